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
import java.util.HashMap;
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
 * <p>A second run streams every answer (server-sent events) and kills a node while it serves
 * requests forwarded to it: every streamed answer, its events' token ids joined, equals the
 * reference engine's; some were forwarded, some fell back after their forward failed, and no
 * survivor saw a stream diverge.
 *
 * <p>A third run sends chats to the OpenAI chat route through a kill, then the same chats
 * streamed with the seeds the first answers reported: every text is the reference engine's, and
 * streamed and whole answers agree.
 *
 * <p>Run with {@code mvn -Pe2e test -Dgroups=e2e} (a few minutes). Node logs go to
 * {@code target/e2e/<run>/<node>.log}.
 */
@Tag("e2e")
class ClusterEndToEndTest {

  static final int NODES = 4;
  static final int SUBJECTS = 16;
  static final int REQUESTS = 240;
  static final int MAX_TOKENS = 2;
  /** The streamed run: fewer requests, more tokens each, so that answers come in several pieces. */
  static final int STREAM_REQUESTS = 80;
  static final int STREAM_MAX_TOKENS = 4;
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

  record RunReport(String policy, LoadDriver.Result result, Map<String, Map<?, ?>> survivorStats,
      Map<?, ?> victimStatsAtKill) {}

  @Test
  void fourNodeProcessesAnswerEveryRequestExactlyOnceThroughAKill() throws Exception {
    List<int[]> prompts = workload(2026);
    List<RunReport> reports = new ArrayList<>();
    for (String policy : System.getProperty("e2e.policies", "cost-aware,local-only").split(",")) {
      reports.add(runCluster(policy, policy, prompts, MAX_TOKENS, false));
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

  @Test
  void streamedAnswersStayWholeWhenANodeServingForwardsIsKilled() throws Exception {
    List<int[]> prompts = workload(2026).subList(0, STREAM_REQUESTS);
    RunReport r = runCluster("stream-cost-aware", "cost-aware", prompts, STREAM_MAX_TOKENS, true);
    LoadDriver.Result x = r.result;
    // every answer came as a stream and its events' token ids, joined, are the whole answer: the
    // reference engine's, whichever node served it, whether it was forwarded, fell back or was
    // re-sent by the client (LoadDriver also checks each stream's framing: the events of one
    // request, the answer's event last, then [DONE])
    try (ReferenceEngine reference = ReferenceEngine.builder().build()) {
      for (LoadDriver.Sample s : x.samples()) {
        assertTrue(s.firstPieceNanos() > 0, s.id() + " was not streamed");
        int[] want = reference.execute(new InferenceRequest("check-" + s.index(), prompts.get(s.index()),
            GenerationParams.greedy(STREAM_MAX_TOKENS))).get(60, TimeUnit.SECONDS).outputTokens();
        assertEquals(STREAM_MAX_TOKENS, want.length);
        assertEquals(Arrays.toString(want), Arrays.toString(s.tokenIds()),
            "streamed answer of request " + s.id() + " (served by " + s.servedBy() + ", forwarded "
                + s.forwarded() + ", fallback " + s.fallback() + ") differs from the reference engine's");
      }
    }
    // the killed node was serving forwarded requests
    assertNotNull(r.victimStatsAtKill, "the killed node's stats were never read");
    long victimServed = ((Number) r.victimStatsAtKill.get("served_for_peers")).longValue();
    long victimOpen = forwardsOpen(r.victimStatsAtKill);
    assertTrue(victimServed + victimOpen > 0, "the killed node served no forwarded request: " + r.victimStatsAtKill);
    // some streamed requests were forwarded, some fell back after their forward failed, and no
    // survivor saw a fallback's output disagree with what it had already streamed
    long forwardedAnswers = x.answered().stream().filter(LoadDriver.Sample::forwarded).count();
    long forwarded = 0;
    Map<String, Long> fallbacks = new java.util.TreeMap<>();
    for (Map.Entry<String, Map<?, ?>> e : r.survivorStats.entrySet()) {
      Map<?, ?> s = e.getValue();
      forwarded += ((Number) s.get("forwarded")).longValue();
      ((Map<?, ?>) s.get("fallbacks")).forEach((cause, n) ->
          fallbacks.merge(String.valueOf(cause), ((Number) n).longValue(), Long::sum));
      assertEquals(0L, ((Map<?, ?>) s.get("peer_messages")).get("output_divergences"),
          "survivor " + e.getKey() + " saw a streamed output diverge");
    }
    assertTrue(forwardedAnswers > 0 && forwarded > 0,
        "no streamed request was forwarded: answers " + forwardedAnswers + ", survivors " + forwarded);
    long failedForwards = fallbacks.entrySet().stream()
        .filter(e -> !e.getKey().equals("BUSY") && !e.getKey().equals("LOCAL_FAILED")
            && !e.getKey().equals("IN_FLIGHT_LIMIT"))
        .mapToLong(Map.Entry::getValue).sum();
    long fellBackAnswers = x.answered().stream().filter(s -> s.fallback() != null).count();
    String line = String.format("streamed: %d answers, %d forwarded, %d with a fallback; survivors' "
            + "fallbacks %s; killed node had served %d forwarded requests and had %d open%n",
        x.answered().size(), forwardedAnswers, fellBackAnswers, fallbacks, victimServed, victimOpen);
    System.out.print(line);
    Files.writeString(Path.of("target", "e2e", "report-stream.txt"), line + x.summary() + "\n",
        StandardCharsets.UTF_8);
    if (victimOpen > 0) {
      // a forward was open at the killed node: its origin fell back (unless it was answered in
      // the moment between the stats read and the kill)
      assertTrue(failedForwards > 0 && fellBackAnswers > 0,
          "no forward failed and fell back when the node was killed: fallbacks " + fallbacks
              + ", answers with a fallback " + fellBackAnswers);
    }
  }

  /** The chat run: conversations over the subjects' system prompts, answers of a few characters. */
  static final int CHAT_REQUESTS = 120;
  static final int CHAT_MAX_TOKENS = 4;

  /**
   * Chats: per subject a system prompt of 250 to 500 characters (the reference tokenizer's
   * tokens) that its requests share, and a user message of 30 to 90; no seeds (the nodes draw
   * them).
   */
  static List<LoadDriver.Prompt> chatWorkload(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    String[] systems = new String[SUBJECTS];
    for (int s = 0; s < SUBJECTS; s++) {
      systems[s] = "You answer questions on subject " + s + ". " + text(rnd, 220 + rnd.nextInt(250));
    }
    List<LoadDriver.Prompt> prompts = new ArrayList<>();
    for (int i = 0; i < CHAT_REQUESTS; i++) {
      int s = rnd.nextInt(SUBJECTS);
      prompts.add(LoadDriver.Prompt.ofChat(List.of(new LoadDriver.Message("system", systems[s]),
          new LoadDriver.Message("user", "Question " + i + ": " + text(rnd, 20 + rnd.nextInt(60)) + "?"))));
    }
    return prompts;
  }

  private static String text(SplittableRandom rnd, int chars) {
    StringBuilder b = new StringBuilder();
    while (b.length() < chars) {
      b.append(b.length() == 0 ? "" : " ");
      int len = 2 + rnd.nextInt(7);
      for (int k = 0; k < len; k++) {
        b.append((char) ('a' + rnd.nextInt(26)));
      }
    }
    b.setLength(chars);
    return b.toString();
  }

  /**
   * Chats on the OpenAI route, through a {@code kill -9}: every conversation is answered exactly
   * once, some were forwarded (their system prompts are shared), and every answer's text is the
   * reference engine's output, as characters, for the chat template's tokens with the seed the
   * node drew (read back from {@code prefix_router.seed}). Then the survivors answer the same
   * chats streamed, sent with those seeds (to all four endpoints: the dead one is failed over),
   * and every streamed text equals the whole one.
   */
  @Test
  void chatsOnTheOpenAiRouteAreTheReferenceEnginesTextThroughAKill() throws Exception {
    List<LoadDriver.Prompt> chats = chatWorkload(2027);
    List<LoadDriver.Result> streamed = new ArrayList<>();
    java.util.concurrent.atomic.AtomicReference<Map<String, Long>> survivorsForwarded =
        new java.util.concurrent.atomic.AtomicReference<>();
    RunReport r = runCluster("chat-cost-aware", "cost-aware", chats, CHAT_MAX_TOKENS, false,
        LoadDriver.Api.CHAT, (endpoints, victim, result) -> {
          LoadDriver probe = LoadDriver.builder().endpoints(endpoints).build();
          Map<String, Long> forwarded = new java.util.TreeMap<>();
          for (String e : survivors(endpoints, victim)) {
            Map<?, ?> s = probe.stats(e);
            forwarded.put(String.valueOf(s.get("node_id")), ((Number) s.get("forwarded")).longValue());
          }
          survivorsForwarded.set(forwarded);
          List<LoadDriver.Prompt> seeded = new ArrayList<>();
          for (LoadDriver.Sample w : result.samples()) {
            seeded.add(chats.get(w.index()).withSeed(w.seed()));
          }
          streamed.add(LoadDriver.builder().endpoints(endpoints).api(LoadDriver.Api.CHAT)
              .concurrency(4).maxTokens(CHAT_MAX_TOKENS).stream(true).idPrefix("chat-stream-")
              .build().runPrompts(seeded));
        });
    LoadDriver.Result whole = r.result();
    assertEquals(CHAT_REQUESTS, whole.answered().size(), whole.summary());
    ReferenceTokenizer characters = new ReferenceTokenizer(NodeMain.REFERENCE_VOCABULARY,
        NodeMain.REFERENCE_MAX_OUTPUT_TOKENS);
    try (ReferenceEngine reference = ReferenceEngine.builder().build()) {
      for (LoadDriver.Sample s : whole.samples()) {
        List<Map<String, Object>> messages = new ArrayList<>();
        for (LoadDriver.Message m : chats.get(s.index()).messages()) {
          messages.add(Map.of("role", m.role(), "content", m.content()));
        }
        int[] prompt = characters.tokenizeChat("", messages, Map.of()).join().tokens();
        assertNotNull(s.seed(), s.id() + " reported no seed");
        int[] want = reference.execute(new InferenceRequest("check-" + s.index(), prompt,
            new GenerationParams(CHAT_MAX_TOKENS, 1.0, 1.0, s.seed()))).get(60, TimeUnit.SECONDS)
            .outputTokens();
        assertEquals(CHAT_MAX_TOKENS, want.length);
        assertEquals(prompt.length, s.promptTokens(), s.id());
        assertEquals(characters.outputText(want, ""), s.text(),
            "chat answer of request " + s.id() + " (served by " + s.servedBy() + ", forwarded "
                + s.forwarded() + ", fallback " + s.fallback() + ", seed " + s.seed()
                + ") differs from the reference engine's");
      }
    }
    long forwardedAnswers = whole.answered().stream().filter(LoadDriver.Sample::forwarded).count();
    long forwarded = survivorsForwarded.get().values().stream().mapToLong(Long::longValue).sum();
    assertTrue(forwardedAnswers > 0 && forwarded > 0, "no chat was forwarded: answers "
        + forwardedAnswers + ", survivors " + survivorsForwarded.get());
    // streamed, with the seeds the whole run reported, on the survivors: the same texts
    assertEquals(1, streamed.size());
    LoadDriver.Result x = streamed.get(0);
    assertEquals(CHAT_REQUESTS, x.completions());
    Set<String> ids = new HashSet<>();
    for (int i = 0; i < CHAT_REQUESTS; i++) {
      LoadDriver.Sample w = whole.samples().get(i);
      LoadDriver.Sample s = x.samples().get(i);
      assertTrue(ids.add(s.id()), "duplicate answer for " + s.id());
      assertTrue(s.ok(), s.id() + " failed: " + s.error());
      assertTrue(s.firstPieceNanos() > 0, s.id() + " was not streamed");
      assertEquals(w.seed(), s.seed(), s.id());
      assertEquals(w.text(), s.text(), "streamed chat " + s.id() + " differs from its whole answer");
    }
    String line = String.format("chat: %d answers, %d forwarded, %d with a fallback, %d client "
            + "failovers; streamed again on the survivors: %d answers, %d forwarded%n",
        whole.answered().size(), forwardedAnswers,
        whole.answered().stream().filter(s -> s.fallback() != null).count(), whole.clientRetries(),
        x.answered().size(), x.answered().stream().filter(LoadDriver.Sample::forwarded).count());
    System.out.print(line);
    Files.writeString(Path.of("target", "e2e", "report-chat.txt"),
        line + whole.summary() + "\n" + x.summary() + "\n", StandardCharsets.UTF_8);
  }

  /** Requests forwarded to a node that it has not answered yet, by its {@code /v1/stats}. */
  private static long forwardsOpen(Map<?, ?> stats) {
    long received = ((Number) ((Map<?, ?>) stats.get("transport")).get("requests_received")).longValue();
    return received - ((Number) stats.get("served_for_peers")).longValue()
        - ((Number) stats.get("refused_for_peers")).longValue();
  }

  private static long servedOrOpen(Map<?, ?> stats) {
    return ((Number) stats.get("served_for_peers")).longValue() + forwardsOpen(stats);
  }

  /**
   * Runs {@code prompts} on four fresh node processes with {@code policy}, killing one on the way:
   * not streamed, the last node once a third of the answers are in; streamed, once a quarter are
   * in, the first node found with a forwarded request open (or at the latest once half are in,
   * the node that served most forwards).
   */
  private RunReport runCluster(String name, String policy, List<int[]> prompts, int maxTokens,
      boolean stream) throws Exception {
    return runCluster(name, policy, prompts.stream().map(LoadDriver.Prompt::ofTokens).toList(),
        maxTokens, stream, LoadDriver.Api.ROUTE, null);
  }

  /** What a test runs on the survivors once a run through a kill is checked, before they stop. */
  interface AfterRun {
    /**
     * @param endpoints every node's client endpoint, the killed one's included
     * @param victim the killed node's index
     * @param result the run's result
     */
    void run(List<String> endpoints, int victim, LoadDriver.Result result) throws Exception;
  }

  /**
   * As {@link #runCluster(String, String, List, int, boolean)}, with prompts of any form sent to
   * {@code api}'s route, and {@code after} (if not null) run on the survivors at the end.
   */
  private RunReport runCluster(String name, String policy, List<LoadDriver.Prompt> prompts,
      int maxTokens, boolean stream, LoadDriver.Api api, AfterRun after) throws Exception {
    int requests = prompts.size();
    Path dir = Path.of("target", "e2e", name);
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

      // not streamed, the last node is killed; streamed, whichever node first has a forwarded
      // request open (so the scenario does not hang on which node the routing picks)
      java.util.concurrent.atomic.AtomicInteger victimRef = new java.util.concurrent.atomic.AtomicInteger(NODES - 1);
      AtomicBoolean killed = new AtomicBoolean();
      java.util.concurrent.atomic.AtomicInteger completed = new java.util.concurrent.atomic.AtomicInteger();
      java.util.concurrent.atomic.AtomicReference<Map<?, ?>> victimAtKill =
          new java.util.concurrent.atomic.AtomicReference<>();
      Thread killer = null;
      if (stream) {
        // kill a node while a request forwarded to it is open: polls every node's stats from a
        // quarter of the run on, and at half-way kills the one that served most forwards
        killer = new Thread(() -> {
          try {
            while (completed.get() < requests / 4) {
              Thread.sleep(5);
            }
            Map<Integer, Map<?, ?>> last = new HashMap<>();
            while (!killed.get()) {
              int pick = -1;
              for (int i = 0; i < NODES && pick < 0; i++) {
                Map<?, ?> s = probe.stats(endpoints.get(i));
                if (s != null) {
                  last.put(i, s);
                  if (forwardsOpen(s) > 0) {
                    pick = i;
                  }
                }
              }
              if (pick < 0 && completed.get() >= requests / 2) {
                pick = last.entrySet().stream()
                    .max(java.util.Comparator.comparingLong(e -> servedOrOpen(e.getValue())))
                    .map(Map.Entry::getKey).orElse(NODES - 1);
              }
              if (pick >= 0) {
                if (killed.compareAndSet(false, true)) {
                  victimRef.set(pick);
                  victimAtKill.set(last.get(pick));
                  procs.get(pick).destroyForcibly(); // kill -9
                }
              } else {
                Thread.sleep(2);
              }
            }
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }, "e2e-killer");
        killer.setDaemon(true);
        killer.start();
      }
      LoadDriver driver = LoadDriver.builder()
          .endpoints(endpoints)
          .api(api)
          .concurrency(4)
          .maxTokens(maxTokens)
          .stream(stream)
          .idPrefix(name + "-")
          .onCompleted(done -> {
            completed.accumulateAndGet(done, Math::max);
            if (!stream && done == requests / 3 && killed.compareAndSet(false, true)) {
              procs.get(victimRef.get()).destroyForcibly(); // kill -9
            }
          })
          .build();
      LoadDriver.Result result = driver.runPrompts(prompts);
      if (killer != null) {
        killer.join(10_000);
      }
      assertTrue(killed.get());
      int victim = victimRef.get();
      assertTrue(procs.get(victim).waitFor(10, TimeUnit.SECONDS));

      // every request issued got exactly one answer
      assertEquals(requests, result.completions(), "completions");
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
      System.out.println(name + ": " + result.summary());
      if (after != null) {
        after.run(List.copyOf(endpoints), victim, result);
      }
      return new RunReport(policy, result, stats, victimAtKill.get());
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
