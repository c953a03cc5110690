package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.GossipStats;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What the node's {@code GET /health} says of its engine: whether the node routes around it,
 * stalled or failing, and whether the model server refuses the node's API key; and whether
 * another process uses the node's id; without changing the status, which the node's state
 * alone decides (200 while running: the node still answers its clients).
 */
class ClientEndpointHealthTest {

  private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private final PrefixRouterNode node = mock(PrefixRouterNode.class);
  private ClientEndpoint endpoint;
  private String base;

  @BeforeEach
  void startEndpoint() throws IOException {
    when(node.state()).thenReturn(PrefixRouterNode.State.RUNNING);
    when(node.nodeId()).thenReturn("solo");
    endpoint = new ClientEndpoint(node, List::of, 16, Duration.ofSeconds(10));
  }

  private void start() throws IOException {
    InetSocketAddress addr = endpoint.start("127.0.0.1", 0);
    base = "http://127.0.0.1:" + addr.getPort();
  }

  @AfterEach
  void stop() {
    endpoint.stop();
  }

  private HttpResponse<String> health() throws Exception {
    return http.sendAsync(HttpRequest.newBuilder(URI.create(base + "/health")).build(),
        HttpResponse.BodyHandlers.ofString()).get(20, TimeUnit.SECONDS);
  }

  /** Stats of a watch that sees the engine {@code avoided}, {@code stalled}, {@code failing}. */
  private static EngineStallStats watch(int avoided, int stalled, int failing) {
    return new EngineStallStats(avoided, stalled, stalled, 0, stalled, 0, 0, 0, failing,
        failing * 3L, failing, 0, 0);
  }

  @Test
  void aFailingEngineIsToldFromAStalledOneAndTheStatusStays200() throws Exception {
    start();
    when(node.engineStallStats()).thenReturn(Optional.of(watch(0, 0, 0)));
    HttpResponse<String> r = health();
    assertEquals(200, r.statusCode(), r.body());
    assertEquals("{\"state\":\"RUNNING\",\"engine_avoided\":false,\"engine_stalled\":false,"
        + "\"engine_failing\":false}", r.body());

    when(node.engineStallStats()).thenReturn(Optional.of(watch(1, 0, 1)));
    r = health();
    assertEquals(200, r.statusCode(), r.body());
    assertEquals("{\"state\":\"RUNNING\",\"engine_avoided\":true,\"engine_stalled\":false,"
        + "\"engine_failing\":true}", r.body());

    when(node.engineStallStats()).thenReturn(Optional.of(watch(1, 1, 0)));
    r = health();
    assertEquals(200, r.statusCode(), r.body());
    assertEquals("{\"state\":\"RUNNING\",\"engine_avoided\":true,\"engine_stalled\":true,"
        + "\"engine_failing\":false}", r.body());

    // failing, its probe due: not avoided this moment, and still failing
    when(node.engineStallStats()).thenReturn(Optional.of(watch(0, 0, 1)));
    r = health();
    assertEquals("{\"state\":\"RUNNING\",\"engine_avoided\":false,\"engine_stalled\":false,"
        + "\"engine_failing\":true}", r.body());
  }

  @Test
  void aRefusedKeyIsSaidWithItsStatusAndTheStatusStays200() throws Exception {
    AtomicInteger refused = new AtomicInteger();
    endpoint.watchEngineKey(refused::get);
    start();
    when(node.engineStallStats()).thenReturn(Optional.of(watch(0, 0, 0)));
    HttpResponse<String> r = health();
    assertEquals(200, r.statusCode(), r.body());
    assertEquals("{\"state\":\"RUNNING\",\"engine_avoided\":false,\"engine_stalled\":false,"
        + "\"engine_failing\":false,\"engine_key_refused\":false}", r.body());

    refused.set(403);
    when(node.engineStallStats()).thenReturn(Optional.of(watch(1, 0, 1)));
    r = health();
    assertEquals(200, r.statusCode(), r.body());
    assertEquals("{\"state\":\"RUNNING\",\"engine_avoided\":true,\"engine_stalled\":false,"
        + "\"engine_failing\":true,\"engine_key_refused\":true,\"engine_key_refused_status\":403}",
        r.body());

    refused.set(0);
    when(node.engineStallStats()).thenReturn(Optional.of(watch(0, 0, 0)));
    r = health();
    assertEquals("{\"state\":\"RUNNING\",\"engine_avoided\":false,\"engine_stalled\":false,"
        + "\"engine_failing\":false,\"engine_key_refused\":false}", r.body());
  }

  /** The node's stats, its gossip layer taking its id {@code inUse} by another process. */
  private static NodeStats stats(boolean inUse, long refuted, long generation) {
    return new NodeStats("solo", PrefixRouterNode.State.RUNNING, 0, 0, 0, 0, 0, 0, 0, 0,
        Map.of(), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, new GossipStats(generation, inUse, 0, 100, 0,
            0, 0, 0, 0, 0, 0, refuted, refuted, 0, 0, 0, 0));
  }

  /** docs/deployment.md shows the body of a healthy node in front of a model server. */
  @Test
  void theDocumentedBodyIsAHealthyNodes() throws Exception {
    String doc = Files.readString(Path.of("docs", "deployment.md"));
    int at = doc.indexOf("- `GET /health` (or `HEAD`)");
    assertTrue(at >= 0, "deployment.md documents GET /health");
    Matcher m = Pattern.compile("`(\\{\"state\":[^`]*)`").matcher(doc.substring(at));
    assertTrue(m.find(), "deployment.md shows a body of /health");
    endpoint.watchEngineKey(() -> 0);
    start();
    when(node.engineStallStats()).thenReturn(Optional.of(watch(0, 0, 0)));
    when(node.stats()).thenReturn(stats(false, 0, 1_700_000_000_000_000L));
    assertEquals(m.group(1), health().body());
  }

  /**
   * A node that takes its id to be in use by another process says so, with a reason naming the
   * id, its refutations and its generation, and the status stays 200: each of the two processes
   * still answers its clients, and which one goes is the operator's decision.
   */
  @Test
  void aNodeIdInUseIsSaidWithItsReasonAndTheStatusStays200() throws Exception {
    start();
    when(node.engineStallStats()).thenReturn(Optional.of(watch(0, 0, 0)));
    when(node.stats()).thenReturn(stats(false, 1, 1_700_000_000_000_123L));
    HttpResponse<String> r = health();
    assertEquals(200, r.statusCode(), r.body());
    assertEquals("{\"state\":\"RUNNING\",\"engine_avoided\":false,\"engine_stalled\":false,"
        + "\"engine_failing\":false,\"node_id_in_use\":false}", r.body());

    when(node.stats()).thenReturn(stats(true, 5, 1_700_000_004_567_890L));
    r = health();
    assertEquals(200, r.statusCode(), r.body());
    assertEquals("{\"state\":\"RUNNING\",\"engine_avoided\":false,\"engine_stalled\":false,"
        + "\"engine_failing\":false,\"node_id_in_use\":true,\"node_id_in_use_reason\":"
        + "\"another process gossips with node id solo: peers knew this node by a generation "
        + "above its own 5 times, the last within 128 gossip rounds (it is at generation "
        + "1700000004567890 now, and the other process draws above it in turn); give each "
        + "process its own --id\"}", r.body());

    // stats that fail: the rest of the body, as with a watch that fails
    when(node.stats()).thenThrow(new IllegalStateException("no stats"));
    r = health();
    assertEquals(200, r.statusCode(), r.body());
    assertEquals("{\"state\":\"RUNNING\",\"engine_avoided\":false,\"engine_stalled\":false,"
        + "\"engine_failing\":false}", r.body());
  }

  /**
   * A node that stops while its health is asked: the status and the body's state are one
   * reading of the state, never a 503 saying RUNNING (or a 200 saying STOPPING).
   */
  @Test
  void theStatusAndTheStateAgreeWhileTheNodeStops() throws Exception {
    start();
    when(node.engineStallStats()).thenReturn(Optional.empty());
    when(node.state()).thenReturn(PrefixRouterNode.State.RUNNING,
        PrefixRouterNode.State.STOPPING);
    HttpResponse<String> r = health();
    String state = r.statusCode() == 200 ? "RUNNING" : "STOPPING";
    assertEquals("{\"state\":\"" + state + "\"}", r.body(), "status " + r.statusCode());
  }

  /** A node without a watch of its engine (another implementation) says its state alone. */
  @Test
  void withoutTheWatchTheStateAlone() throws Exception {
    start();
    when(node.engineStallStats()).thenReturn(Optional.empty());
    HttpResponse<String> r = health();
    assertEquals(200, r.statusCode(), r.body());
    assertEquals("{\"state\":\"RUNNING\"}", r.body());
  }

  /**
   * A probe is answered by the node's state alone whatever its details throw, an {@link Error}
   * included (the engine watch's stats, the node's stats, the watch of the engine's key): 200
   * while the node runs, 503 once it stops, as a load balancer reads it. An {@code Error} there
   * used to escape to the handler's guard, a 500 that took a running node out of rotation, and
   * the key watch's failure, an exception too, was not caught at all.
   */
  @Test
  void detailsThatThrowAnErrorLeaveTheStatusToTheState() throws Exception {
    endpoint.watchEngineKey(() -> {
      throw new AssertionError("a key watch that breaks");
    });
    start();
    when(node.engineStallStats()).thenThrow(new StackOverflowError());
    when(node.stats()).thenThrow(new OutOfMemoryError("Java heap space"));
    HttpResponse<String> r = health();
    assertEquals(200, r.statusCode(), "a running node whose details throw: " + r.body());
    assertEquals("{\"state\":\"RUNNING\"}", r.body());
    when(node.state()).thenReturn(PrefixRouterNode.State.STOPPED);
    r = health();
    assertEquals(503, r.statusCode(), "a stopped node whose details throw: " + r.body());
    assertEquals("{\"state\":\"STOPPED\"}", r.body());
  }
}
