package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.engine.openai.FakeOpenAiServer;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/**
 * Two {@link NodeMain} nodes over HTTP, each in front of an OpenAI-compatible server, one of
 * which hangs: it takes requests and answers none. Through the adapter its requests show as
 * running (no queue for the watermarks), so only the engine watch tells the node to route
 * around it.
 */
class HungEngineNodeTest {

  /** Servers a and b, each with its node in front; a's node seeds b's. */
  private static final class Pair implements AutoCloseable {
    final FakeOpenAiServer serverA = FakeOpenAiServer.start(FakeOpenAiServer.ECHO);
    final FakeOpenAiServer serverB = FakeOpenAiServer.start(FakeOpenAiServer.ECHO);
    final NodeMain.Running a;
    final NodeMain.Running b;

    Pair(String stallMs) throws Exception {
      a = start("a", serverA, stallMs, "");
      b = start("b", serverB, stallMs, "a@" + a.transport.localAddress().address());
      await(() -> a.node.stats().peersLive() == 1 && b.node.stats().peersLive() == 1,
          "the nodes found each other");
    }

    private static NodeMain.Running start(String id, FakeOpenAiServer server, String stallMs,
        String seeds) throws Exception {
      return NodeMain.start(NodeOptions.parse(new String[] {"--id", id, "--listen",
          "127.0.0.1:0", "--client", "127.0.0.1:0", "--engine", server.baseUrl(), "--policy",
          "longest-prefix", "--gossip-interval-ms", "50", "--engine-stall-ms", stallMs,
          "--seeds", seeds}, Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX)));
    }

    @Override
    public void close() {
      b.close();
      a.close();
      serverB.close();
      serverA.close();
    }
  }

  private static InferenceRequest request(String id, int seed) {
    int[] p = new int[64];
    for (int i = 0; i < p.length; i++) {
      p[i] = 1 + (seed * 7919 + i * 104_729) % 90_000;
    }
    return new InferenceRequest(id, p, GenerationParams.greedy(2));
  }

  private static void await(BooleanSupplier condition, String what) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!condition.getAsBoolean() && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertTrue(condition.getAsBoolean(), what);
  }

  /** The body of the node's {@code GET /health}, which must answer 200. */
  private static String health(NodeMain.Running n) throws Exception {
    java.net.http.HttpResponse<String> r = java.net.http.HttpClient.newHttpClient().send(
        java.net.http.HttpRequest.newBuilder(
            java.net.URI.create("http://" + n.clientAddress + "/health")).build(),
        java.net.http.HttpResponse.BodyHandlers.ofString());
    assertEquals(200, r.statusCode(), r.body());
    return r.body();
  }

  private static RouteDecision.SkipReason skipOf(String id, RouteDecision d) {
    return d.candidates().stream().filter(c -> c.nodeId().equals(id)).findFirst()
        .orElseThrow().skipped();
  }

  @Test
  void aNodeRoutesAroundItsHungServerAndBackWhenItAnswers() throws Exception {
    try (Pair p = new Pair("1000")) {
      FakeOpenAiServer serverA = p.serverA;
      NodeMain.Running a = p.a;
      NodeMain.Running b = p.b;
      serverA.hold();
      CompletableFuture<InferenceResponse> stuck = a.node.submit(request("stuck", 1));
      assertTrue(serverA.awaitArrived(1, Duration.ofSeconds(10)), "a's server got it");

      await(() -> a.node.engineStallStats().orElseThrow().avoided() == 1, "a's engine stalled: "
          + a.node.engineStallStats().orElseThrow());
      assertEquals("{\"state\":\"RUNNING\",\"engine_avoided\":true,\"engine_stalled\":true,"
          + "\"engine_failing\":false,\"engine_key_refused\":false,\"node_id_in_use\":false}", health(a),
          "still 200, and says the engine is avoided");
      InferenceResponse r = a.node.submit(request("next", 2)).get(20, TimeUnit.SECONDS);
      assertEquals("b", r.servedBy(), r.toString());
      assertEquals(RouteDecision.Reason.LOCAL_ENGINE_STALLED, r.decision().reason());
      assertEquals(1, serverA.arrived(), "the hung server was sent nothing more");
      await(() -> skipOf("a", b.node.explain(request("probe", 3)))
          == RouteDecision.SkipReason.OVERLOADED, "b sees a pushing back");
      assertFalse(stuck.isDone());

      serverA.release();
      assertEquals("a", stuck.get(20, TimeUnit.SECONDS).servedBy());
      EngineStallStats s = a.node.engineStallStats().orElseThrow();
      assertEquals(0, s.avoided(), s.toString());
      assertEquals(1, s.stalls(), s.toString());
      assertEquals(1, s.recoveries(), s.toString());
      assertEquals(1, s.reroutes(), s.toString());
      assertEquals("{\"state\":\"RUNNING\",\"engine_avoided\":false,\"engine_stalled\":false,"
          + "\"engine_failing\":false,\"engine_key_refused\":false,\"node_id_in_use\":false}", health(a));
      InferenceResponse back = a.node.submit(request("back", 4)).get(20, TimeUnit.SECONDS);
      assertEquals("a", back.servedBy(), back.toString());
      await(() -> skipOf("a", b.node.explain(request("probe", 3)))
          == RouteDecision.SkipReason.NONE, "b sees a recovered");
    }
  }

  /** Without the watch, the hung server gets every request the node would run itself. */
  @Test
  void withTheWatchOffTheHungServerGetsTheNextRequestToo() throws Exception {
    try (Pair p = new Pair("0")) {
      FakeOpenAiServer serverA = p.serverA;
      NodeMain.Running a = p.a;
      serverA.hold();
      CompletableFuture<InferenceResponse> stuck = a.node.submit(request("stuck", 1));
      assertTrue(serverA.awaitArrived(1, Duration.ofSeconds(10)));
      Thread.sleep(1_500);
      CompletableFuture<InferenceResponse> next = a.node.submit(request("next", 2));
      assertTrue(serverA.awaitArrived(2, Duration.ofSeconds(10)), "the hung server got it");
      assertEquals(0, a.node.engineStallStats().orElseThrow().stalls());
      serverA.release();
      assertEquals("a", stuck.get(20, TimeUnit.SECONDS).servedBy());
      assertEquals("a", next.get(20, TimeUnit.SECONDS).servedBy());
    }
  }
}
