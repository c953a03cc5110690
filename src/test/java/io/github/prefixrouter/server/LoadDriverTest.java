package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
    try (java.net.ServerSocket fake = new java.net.ServerSocket(0, 50,
        java.net.InetAddress.getByName("127.0.0.1"))) {
      List<java.net.Socket> held = new java.util.concurrent.CopyOnWriteArrayList<>();
      Thread acceptor = new Thread(() -> {
        try {
          while (true) {
            java.net.Socket s = fake.accept();
            held.add(s);
            java.io.InputStream in = s.getInputStream();
            int matched = 0;
            while (matched < 4) {
              int c = in.read();
              if (c < 0) {
                break;
              }
              matched = (c == (matched % 2 == 0 ? '\r' : '\n')) ? matched + 1 : 0;
            }
            s.getOutputStream().write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{"
                .getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            s.getOutputStream().flush();
          }
        } catch (java.io.IOException closed) {
          // the test is over
        }
      });
      acceptor.setDaemon(true);
      acceptor.start();
      LoadDriver d = LoadDriver.builder().endpoints(List.of("127.0.0.1:" + fake.getLocalPort()))
          .concurrency(1).requestTimeout(java.time.Duration.ofMillis(500)).build();
      LoadDriver.Result r = java.util.concurrent.CompletableFuture.supplyAsync(() -> d.run(prompts(2)))
          .get(30, java.util.concurrent.TimeUnit.SECONDS);
      assertEquals(2, r.samples().size());
      for (LoadDriver.Sample s : r.samples()) {
        assertTrue(s.error() != null, "a stalled answer is an error, not a hang");
      }
      // the stats of such an endpoint: null after at most 5 s, not a hang
      java.util.Map<?, ?> stats = java.util.concurrent.CompletableFuture.supplyAsync(
          () -> d.stats("127.0.0.1:" + fake.getLocalPort())).get(30, java.util.concurrent.TimeUnit.SECONDS);
      assertEquals(null, stats);
      for (java.net.Socket s : held) {
        s.close();
      }
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
