package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineResult;
import java.net.InetSocketAddress;
import io.github.prefixrouter.engine.openai.FakeOpenAiServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Stopping a node process (what SIGTERM does) answers every request its clients sent: those the
 * engine finishes within the grace period with their answers, the others with a 503.
 */
class NodeShutdownTest {

  static final int N = 12; // below the 16 unfinished bodies per client address

  static List<CompletableFuture<HttpResponse<String>>> sendAll(HttpClient c, String address) {
    List<CompletableFuture<HttpResponse<String>>> fs = new ArrayList<>();
    for (int i = 0; i < N; i++) {
      fs.add(c.sendAsync(HttpRequest.newBuilder(
              URI.create("http://" + address + "/v1/route/completions"))
          .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":[1,2," + i + "]}")).build(),
          HttpResponse.BodyHandlers.ofString()));
    }
    return fs;
  }

  static List<CompletableFuture<HttpResponse<String>>> sendAllStreaming(HttpClient c,
      String address) {
    List<CompletableFuture<HttpResponse<String>>> fs = new ArrayList<>();
    for (int i = 0; i < N; i++) {
      fs.add(c.sendAsync(HttpRequest.newBuilder(
              URI.create("http://" + address + "/v1/route/completions"))
          .POST(HttpRequest.BodyPublishers.ofString(
              "{\"prompt\":[1,2," + i + "],\"stream\":true}")).build(),
          HttpResponse.BodyHandlers.ofString()));
    }
    return fs;
  }

  static void awaitStopping(PrefixRouterNode node) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (node.state() == PrefixRouterNode.State.RUNNING && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    assertEquals(PrefixRouterNode.State.STOPPING, node.state());
  }

  @Test
  void theEndpointDeliversEveryAnswerGivenBeforeItStops() throws Exception {
    PrefixRouterNode node = mock(PrefixRouterNode.class);
    when(node.state()).thenReturn(PrefixRouterNode.State.RUNNING);
    when(node.nodeId()).thenReturn("solo");
    List<CompletableFuture<InferenceResponse>> held =
        java.util.Collections.synchronizedList(new ArrayList<>());
    when(node.submit(any())).thenAnswer(inv -> {
      CompletableFuture<InferenceResponse> f = new CompletableFuture<>();
      held.add(f);
      return f;
    });
    ClientEndpoint endpoint = new ClientEndpoint(node, List::of, 4096, Duration.ofSeconds(5));
    InetSocketAddress addr = endpoint.start("127.0.0.1", 0);
    HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    List<CompletableFuture<HttpResponse<String>>> fs =
        sendAll(c, addr.getHostString() + ":" + addr.getPort());
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (held.size() < N && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    assertEquals(N, held.size());
    RouteDecision d = new RouteDecision(RoutingPolicy.LOCAL_ONLY, 3, new String[] {"solo"},
        new int[1], new int[1], new int[1], new long[1], new long[1],
        new RouteDecision.SkipReason[] {RouteDecision.SkipReason.NONE}, 0,
        RouteDecision.Reason.LOCAL_ONLY_POLICY);
    // the node answers every request, then the process stops its endpoint (as NodeMain does
    // once the node has stopped)
    for (CompletableFuture<InferenceResponse> f : held) {
      f.complete(new InferenceResponse("q", new EngineResult(new int[] {7}, "x".repeat(20_000),
          3, 0, 1, 1), "solo", false, 1, FallbackCause.NONE, d));
    }
    endpoint.stop();

    for (CompletableFuture<HttpResponse<String>> f : fs) {
      HttpResponse<String> resp = f.get(20, TimeUnit.SECONDS); // an answer, not a reset
      assertEquals(200, resp.statusCode(), resp.body());
    }
  }

  @Test
  void answersTheEngineGivesWhileStoppingReachTheirClients() throws Exception {
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      server.hold();
      NodeOptions o = NodeOptions.parse(new String[] {"--id", "solo", "--listen", "127.0.0.1:0",
          "--client", "127.0.0.1:0", "--engine", server.baseUrl()},
          Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
      NodeMain.Running r = NodeMain.start(o);
      HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
      List<CompletableFuture<HttpResponse<String>>> fs = sendAll(c, r.clientAddress);
      assertTrue(server.awaitArrived(N, Duration.ofSeconds(20)));

      CompletableFuture<Void> closed = CompletableFuture.runAsync(r::close);
      awaitStopping(r.node);
      server.release(); // every answer arrives while the node stops
      closed.get(60, TimeUnit.SECONDS);

      for (CompletableFuture<HttpResponse<String>> f : fs) {
        HttpResponse<String> resp = f.get(20, TimeUnit.SECONDS); // an answer, not a reset
        assertEquals(200, resp.statusCode(), resp.body());
      }
    }
  }

  /** Streamed or not, nothing was answered before the grace period ended: each is a 503. */
  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void requestsStillRunningWhenTheGracePeriodEndsAre503(boolean streamed) throws Exception {
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      server.hold(); // never released before the node stops
      NodeOptions o = NodeOptions.parse(new String[] {"--id", "solo", "--listen", "127.0.0.1:0",
          "--client", "127.0.0.1:0", "--engine", server.baseUrl(),
          "--shutdown-grace-ms", "300"},
          Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
      NodeMain.Running r = NodeMain.start(o);
      HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
      List<CompletableFuture<HttpResponse<String>>> fs = streamed
          ? sendAllStreaming(c, r.clientAddress) : sendAll(c, r.clientAddress);
      assertTrue(server.awaitArrived(N, Duration.ofSeconds(20)));

      CompletableFuture.runAsync(r::close).get(60, TimeUnit.SECONDS);
      server.release();

      for (CompletableFuture<HttpResponse<String>> f : fs) {
        HttpResponse<String> resp = f.get(20, TimeUnit.SECONDS);
        assertEquals(503, resp.statusCode(), resp.body());
        assertTrue(resp.body().contains("STOPPING"), resp.body());
      }
      assertEquals(N, r.node.stats().failed());
      assertEquals(0, r.endpoint.openStreams());
    }
  }
}
