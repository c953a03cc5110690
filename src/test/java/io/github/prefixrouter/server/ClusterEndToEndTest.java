package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.engine.reference.ReferenceEngine;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Four {@link NodeMain} processes on loopback with the reference engine, driven over HTTP with an
 * MMLU-shaped workload; one node is killed with {@code kill -9} a third of the way through.
 * Checked: every request issued gets exactly one answer, answers equal what a single reference
 * engine produces for the same tokens, the survivors drop the dead node, no survivor fails a
 * request. The same run with the local-only policy is reported side by side.
 *
 * <p>Run with {@code mvn -Pe2e test -Dgroups=e2e} (about a minute). Node logs go to
 * {@code target/e2e/<policy>/<node>.log}.
 */
@Tag("e2e")
class ClusterEndToEndTest {

  static final int NODES = 4;
  static final int SUBJECTS = 16;
  static final int REQUESTS = 240;
  static final int MAX_TOKENS = 2;
  static final int CACHE_TOKENS = 2048;
  static final String KEY_HEX = "5f1d3c0b2a99887766554433221100ffeeddccbbaa99887766554433221100ff";

  /** MMLU-shaped: per-subject shared prefixes (header and 5 shots) and short questions. */
  static List<int[]> workload(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    int[][] prefixes = new int[SUBJECTS][];
    for (int s = 0; s < SUBJECTS; s++) {
      prefixes[s] = tokens(rnd, 250 + rnd.nextInt(250));
    }
    List<int[]> prompts = new ArrayList<>();
    for (int i = 0; i < REQUESTS; i++) {
      int s = rnd.nextInt(SUBJECTS);
      int[] q = tokens(rnd, 30 + rnd.nextInt(60));
      int[] p = Arrays.copyOf(prefixes[s], prefixes[s].length + q.length);
      System.arraycopy(q, 0, p, prefixes[s].length, q.length);
      prompts.add(p);
    }
    return prompts;
  }

  private static int[] tokens(SplittableRandom rnd, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = rnd.nextInt(100_000);
    }
    return t;
  }

  record RunReport(String policy, LoadDriver.Result result, Map<String, Map<?, ?>> survivorStats) {}

  @Test
  void fourNodeProcessesAnswerEveryRequestExactlyOnceThroughAKill() throws Exception {
    List<int[]> prompts = workload(2026);
    List<RunReport> reports = new ArrayList<>();
    for (String policy : System.getProperty("e2e.policies", "cost-aware,local-only").split(",")) {
      reports.add(runCluster(policy, prompts));
    }
    // answers equal a single reference engine's, whatever node served them
    try (ReferenceEngine reference = ReferenceEngine.builder().build()) {
      for (int i = 0; i < prompts.size(); i += 7) {
        int[] want = reference.execute(new InferenceRequest("check-" + i, prompts.get(i),
            GenerationParams.greedy(MAX_TOKENS))).get(60, TimeUnit.SECONDS).outputTokens();
        for (RunReport r : reports) {
          assertEquals(Arrays.toString(want), Arrays.toString(r.result.samples().get(i).tokenIds()),
              r.policy + ": answer of request " + i + " differs from the reference engine's");
        }
      }
    }
    StringBuilder table = new StringBuilder("\nrouting vs local-only, 4 processes on loopback, one killed mid-run\n");
    table.append(String.format("%-12s %8s %8s %8s %8s %8s %9s %9s  %s%n",
        "policy", "mean ms", "p50 ms", "p90 ms", "p99 ms", "hitRate", "forwarded", "retries", "served by"));
    for (RunReport r : reports) {
      LoadDriver.Result x = r.result;
      table.append(String.format("%-12s %8.1f %8.1f %8.1f %8.1f %8.3f %9.3f %9d  %s%n", r.policy,
          x.meanLatencyMillis(), x.latencyPercentileMillis(50), x.latencyPercentileMillis(90),
          x.latencyPercentileMillis(99), x.hitRate(), x.forwardedShare(), x.clientRetries(), x.servedBy()));
    }
    System.out.println(table);
    Files.writeString(Path.of("target", "e2e", "report.txt"), table.toString(), StandardCharsets.UTF_8);
  }

  private RunReport runCluster(String policy, List<int[]> prompts) throws Exception {
    Path dir = Path.of("target", "e2e", policy);
    Files.createDirectories(dir);
    Path keyFile = dir.resolve("cluster.key");
    Files.writeString(keyFile, KEY_HEX);
    int[] peerPorts = freePorts(NODES);
    List<Process> procs = new ArrayList<>();
    List<String> endpoints = new ArrayList<>();
    try {
      for (int n = 0; n < NODES; n++) {
        List<String> seeds = new ArrayList<>();
        for (int m = 0; m < NODES; m++) {
          if (m != n) {
            seeds.add("n" + m + "@127.0.0.1:" + peerPorts[m]);
          }
        }
        Path ready = dir.resolve("n" + n + ".ready");
        Files.deleteIfExists(ready);
        List<String> cmd = new ArrayList<>(List.of(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-Xmx256m", "-XX:+UseSerialGC", "-cp", classPath(),
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
            NodeMain.class.getName(),
            "--id", "n" + n,
            "--listen", "127.0.0.1:" + peerPorts[n],
            "--client", "127.0.0.1:0",
            "--seeds", String.join(",", seeds),
            "--cluster-key-file", keyFile.toString(),
            "--engine", "reference",
            "--engine-cache-tokens", Integer.toString(CACHE_TOKENS),
            "--policy", policy,
            "--gossip-interval-ms", "100",
            "--peer-suspect-ms", "1000",
            "--peer-dead-ms", "3000",
            "--ready-file", ready.toString()));
        Process p = new ProcessBuilder(cmd)
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("n" + n + ".log").toFile())
            .start();
        procs.add(p);
      }
      for (int n = 0; n < NODES; n++) {
        Path ready = dir.resolve("n" + n + ".ready");
        Process p = procs.get(n);
        assertTrue(await(() -> Files.exists(ready) || !p.isAlive(), 60_000),
            "node n" + n + " did not start; see " + dir.resolve("n" + n + ".log"));
        assertTrue(p.isAlive(), "node n" + n + " exited; see " + dir.resolve("n" + n + ".log"));
        String line = Files.readString(ready).trim();
        endpoints.add(line.substring(line.indexOf("client=") + "client=".length()));
      }
      LoadDriver probe = LoadDriver.builder().endpoints(endpoints).build();
      boolean routing = !policy.equals("local-only");
      if (routing) {
        assertTrue(await(() -> endpoints.stream().allMatch(e -> peersLive(probe, e) == NODES - 1), 30_000),
            policy + ": nodes did not discover each other: peers_live " + peersLiveAll(probe, endpoints));
      }

      int victim = NODES - 1;
      AtomicBoolean killed = new AtomicBoolean();
      LoadDriver driver = LoadDriver.builder()
          .endpoints(endpoints)
          .concurrency(4)
          .maxTokens(MAX_TOKENS)
          .idPrefix(policy + "-")
          .onCompleted(done -> {
            if (done == REQUESTS / 3 && killed.compareAndSet(false, true)) {
              procs.get(victim).destroyForcibly(); // kill -9
            }
          })
          .build();
      LoadDriver.Result result = driver.run(prompts);
      assertTrue(killed.get());
      assertTrue(procs.get(victim).waitFor(10, TimeUnit.SECONDS));

      // every request issued got exactly one answer
      assertEquals(REQUESTS, result.completions(), "completions");
      Set<String> ids = new HashSet<>();
      for (LoadDriver.Sample s : result.samples()) {
        assertNotNull(s);
        assertTrue(ids.add(s.id()), "duplicate answer for " + s.id());
        if (!s.ok()) {
          fail(policy + ": request " + s.id() + " failed: " + s.error());
        }
      }
      // the survivors drop the dead node and failed nothing
      Map<String, Map<?, ?>> stats = new LinkedHashMap<>();
      if (routing) {
        assertTrue(await(() -> survivors(endpoints, victim).stream().allMatch(e -> peersLive(probe, e) == NODES - 2),
                15_000),
            policy + ": survivors still count the dead node: peers_live " + peersLiveAll(probe, survivors(endpoints, victim)));
      }
      for (String e : survivors(endpoints, victim)) {
        Map<?, ?> s = probe.stats(e);
        assertNotNull(s, "survivor " + e + " does not answer");
        assertEquals(0L, s.get("failed"), "survivor " + e + " failed requests");
        stats.put(String.valueOf(s.get("node_id")), s);
      }
      System.out.println(policy + ": " + result.summary());
      return new RunReport(policy, result, stats);
    } finally {
      for (Process p : procs) {
        p.destroy(); // SIGTERM: graceful stop, prints stats to the log
      }
      for (Process p : procs) {
        if (!p.waitFor(20, TimeUnit.SECONDS)) {
          p.destroyForcibly();
        }
      }
    }
  }

  private static List<String> survivors(List<String> endpoints, int victim) {
    List<String> s = new ArrayList<>(endpoints);
    s.remove(victim);
    return s;
  }

  private static long peersLive(LoadDriver probe, String endpoint) {
    Map<?, ?> s = probe.stats(endpoint);
    return s == null ? -1 : ((Number) s.get("peers_live")).longValue();
  }

  private static List<Long> peersLiveAll(LoadDriver probe, List<String> endpoints) {
    return endpoints.stream().map(e -> peersLive(probe, e)).toList();
  }

  private static String classPath() {
    String cp = System.getProperty("surefire.test.class.path");
    return cp != null && !cp.isEmpty() ? cp : System.getProperty("java.class.path");
  }

  private static int[] freePorts(int n) throws IOException {
    int[] ports = new int[n];
    List<ServerSocket> open = new ArrayList<>();
    try {
      for (int i = 0; i < n; i++) {
        ServerSocket s = new ServerSocket(0);
        open.add(s);
        ports[i] = s.getLocalPort();
      }
    } finally {
      for (ServerSocket s : open) {
        s.close();
      }
    }
    return ports;
  }

  private static boolean await(BooleanSupplier c, long millis) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
    while (!c.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        return false;
      }
      Thread.sleep(100);
    }
    return true;
  }
}
