package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.transport.http.StallingHttpPeer;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The load driver against in-process nodes, including client-side failover. */
class LoadDriverTest {

  private static NodeOptions options(String id) {
    return NodeOptions.parse(new String[] {"--id", id, "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0",
        "--policy", "local-only"}, Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
  }

  private static List<int[]> prompts(int n) {
    List<int[]> p = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      int[] t = new int[20 + i % 7];
      for (int j = 0; j < t.length; j++) {
        t[j] = (i % 3) * 1000 + j;
      }
      p.add(t);
    }
    return p;
  }

  @Test
  void everyPromptGetsExactlyOneAnswerAndDownNodesAreFailedOver() throws Exception {
    try (NodeMain.Running a = NodeMain.start(options("a"));
        NodeMain.Running b = NodeMain.start(options("b"))) {
      b.close(); // b's client endpoint is gone: its share must fail over to a
      LoadDriver d = LoadDriver.builder().endpoints(List.of(a.clientAddress, b.clientAddress))
          .concurrency(3).maxTokens(2).build();
      LoadDriver.Result r = d.run(prompts(30));
      assertEquals(30, r.completions());
      assertEquals(30, r.answered().size(), r.summary());
      Set<String> ids = new HashSet<>();
      for (LoadDriver.Sample s : r.samples()) {
        assertTrue(ids.add(s.id()));
        assertEquals("a", s.servedBy());
        assertEquals(2, s.tokenIds().length);
      }
      assertTrue(r.clientRetries() >= 1, "the first request sent to b must have failed over");
      assertEquals(Map.of("a", 30L), r.servedBy());
      assertTrue(r.latencyPercentileMillis(50) > 0);
      // repeated prompts hit a's cache
      assertTrue(r.hitRate() > 0.3, "hit rate " + r.hitRate());
    }
  }

  @Test
  void anEndpointThatStallsInItsAnswerTimesOutInsteadOfHangingTheRun() throws Exception {
    // an "endpoint" that sends an answer's headers and one byte of its body, then stalls
    try (StallingHttpPeer fake = new StallingHttpPeer(
        "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{")) {
      LoadDriver d = LoadDriver.builder().endpoints(List.of("127.0.0.1:" + fake.port()))
          .concurrency(1).requestTimeout(java.time.Duration.ofMillis(500)).build();
      LoadDriver.Result r = java.util.concurrent.CompletableFuture.supplyAsync(() -> d.run(prompts(2)))
          .get(30, java.util.concurrent.TimeUnit.SECONDS);
      assertEquals(2, r.samples().size());
      for (LoadDriver.Sample s : r.samples()) {
        assertTrue(s.error() != null, "a stalled answer is an error, not a hang");
      }
      // the stats of such an endpoint: null after at most 5 s, not a hang
      java.util.Map<?, ?> stats = java.util.concurrent.CompletableFuture.supplyAsync(
          () -> d.stats("127.0.0.1:" + fake.port())).get(30, java.util.concurrent.TimeUnit.SECONDS);
      assertEquals(null, stats);
    }
  }

  @Test
  void invalidSettingsAreRejected() {
    assertThrows(IllegalArgumentException.class, () -> LoadDriver.builder().build());
    assertThrows(IllegalArgumentException.class, () -> LoadDriver.builder().endpoints(List.of("nohost")).build());
    assertThrows(IllegalArgumentException.class,
        () -> LoadDriver.builder().endpoints(List.of("h:1")).concurrency(0).build());
  }
}
