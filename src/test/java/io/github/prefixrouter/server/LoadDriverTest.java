package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.transport.http.StallingHttpPeer;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The load driver against in-process nodes, including client-side failover. */
class LoadDriverTest {

  /** The summary reads the same whatever the JVM's default locale (a decimal comma elsewhere). */
  @Test
  void theSummaryIsInTheRootLocaleWhateverTheDefault() {
    LoadDriver.Sample answered = new LoadDriver.Sample(0, "r0", "a", "a", false, null,
        1_500_000L, 10, 4, new int[] {1}, 0, null, 1_250_000L, "x", null);
    LoadDriver.Result r = new LoadDriver.Result(List.of(answered), 2_000_000_000L, 1);
    Locale before = Locale.getDefault();
    try {
      Locale.setDefault(Locale.GERMANY);
      String summary = r.summary();
      assertTrue(summary.contains("wall=2.0s") && summary.contains("mean=1.5")
          && summary.contains("ttft ms: p50=1.3") && summary.contains("hitRate=0.400"), summary);
    } finally {
      Locale.setDefault(before);
    }
  }

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
  void streamedRunsGetTheSameAnswersAndATimeToFirstPiece() throws Exception {
    try (NodeMain.Running a = NodeMain.start(options("a"))) {
      List<int[]> prompts = prompts(12);
      LoadDriver.Result plain = LoadDriver.builder().endpoints(List.of(a.clientAddress))
          .concurrency(2).maxTokens(3).build().run(prompts);
      LoadDriver.Result streamed = LoadDriver.builder().endpoints(List.of(a.clientAddress))
          .concurrency(2).maxTokens(3).stream(true).build().run(prompts);
      assertEquals(12, streamed.answered().size(), streamed.summary());
      for (int i = 0; i < 12; i++) {
        LoadDriver.Sample p = plain.samples().get(i);
        LoadDriver.Sample s = streamed.samples().get(i);
        assertArrayEquals(p.tokenIds(), s.tokenIds(), "request " + i);
        assertEquals("a", s.servedBy());
        assertEquals(p.promptTokens(), s.promptTokens());
        assertTrue(s.cachedTokens() >= 0);
        assertTrue(s.firstPieceNanos() > 0 && s.firstPieceNanos() <= s.latencyNanos(),
            s.firstPieceNanos() + " of " + s.latencyNanos());
        assertEquals(-1, p.firstPieceNanos());
      }
      assertTrue(Double.isNaN(plain.firstPiecePercentileMillis(50)));
      assertTrue(streamed.firstPiecePercentileMillis(50) <= streamed.latencyPercentileMillis(100));
      assertTrue(streamed.summary().contains("ttft ms: p50="), streamed.summary());
      assertTrue(!plain.summary().contains("ttft"), plain.summary());
    }
  }

  @Test
  void aStreamThatFailsOrEndsWithoutDoneIsAnError() throws Exception {
    for (String body : List.of(
        "data: {\"id\":\"load-0\",\"token_ids\":[1],\"text\":\"a\"}\n\n"
            + "data: {\"id\":\"load-0\",\"error\":{\"message\":\"m\",\"type\":\"timeout\","
            + "\"status\":504}}\n\n",
        "data: {\"id\":\"load-0\",\"token_ids\":[1],\"text\":\"a\"}\n\n")) {
      LoadDriver.Sample s = streamedAnswer(body);
      assertTrue(s.error() != null && (s.error().contains("timeout")
          || s.error().contains("without [DONE]")), s.error());
      assertTrue(s.firstPieceNanos() > 0);
    }
  }

  /** The one answer of a run of one request against a fake endpoint that sends {@code body}. */
  private static LoadDriver.Sample streamedAnswer(String body) throws Exception {
    return streamedAnswer(body, java.time.Duration.ofSeconds(5));
  }

  private static LoadDriver.Sample streamedAnswer(String body, java.time.Duration requestTimeout)
      throws Exception {
    byte[] b = body.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    try (StallingHttpPeer fake = new StallingHttpPeer("HTTP/1.1 200 OK\r\nContent-Type: "
        + "text/event-stream\r\nConnection: close\r\nContent-Length: " + b.length + "\r\n\r\n"
        + body)) {
      LoadDriver d = LoadDriver.builder().endpoints(List.of("127.0.0.1:" + fake.port()))
          .concurrency(1).stream(true).requestTimeout(requestTimeout).build();
      LoadDriver.Result r = java.util.concurrent.CompletableFuture.supplyAsync(
          () -> d.run(prompts(1))).get(30, java.util.concurrent.TimeUnit.SECONDS);
      assertEquals(1, r.samples().size());
      return r.samples().get(0);
    }
  }

  private static String piece(String id, String tokens) {
    return "data: {\"id\":\"" + id + "\",\"token_ids\":[" + tokens + "],\"text\":\"\"}\n\n";
  }

  private static String answerEvent(String id, String tokens) {
    return "data: {\"id\":\"" + id + "\",\"served_by\":\"n9\",\"forwarded\":true,\"attempts\":2,"
        + "\"fallback\":\"UNREACHABLE\",\"token_ids\":[" + tokens + "],\"text\":\"\","
        + "\"prompt_tokens\":20,\"cached_tokens\":16,\"reason\":\"PEER_CHEAPER\"}\n\n";
  }

  private static final String DONE = "data: [DONE]\n\n";

  @Test
  void aStreamedAnswerIsItsEventsTokensJoinedEndedByTheAnswersEventAndDone() throws Exception {
    // the answer's event carries what no piece did: it is joined too
    LoadDriver.Sample s = streamedAnswer(
        piece("load-0", "7,8") + piece("load-0", "9") + answerEvent("load-0", "10") + DONE);
    assertEquals(null, s.error());
    assertArrayEquals(new int[] {7, 8, 9, 10}, s.tokenIds());
    assertEquals("n9", s.servedBy());
    assertTrue(s.forwarded());
    assertEquals("UNREACHABLE", s.fallback());
    assertEquals(16, s.cachedTokens());
    // an answer without pieces (an engine that does not stream gives its output at the end)
    s = streamedAnswer(piece("load-0", "5,6") + answerEvent("load-0", "") + DONE);
    assertArrayEquals(new int[] {5, 6}, s.tokenIds(), s.error());
  }

  @Test
  void aRequestTimeoutBeyond292YearsCountsAsNeverInsteadOfFailingEveryRequest() throws Exception {
    // "never" written as a huge duration: Duration.toNanos() throws beyond 2^63 ns, and the
    // JDK's HTTP client fails a request whose timeout it cannot add up
    for (java.time.Duration never : List.of(java.time.temporal.ChronoUnit.FOREVER.getDuration(),
        java.time.Duration.ofMillis(Long.MAX_VALUE))) {
      LoadDriver.Sample s = streamedAnswer(
          piece("load-0", "7") + answerEvent("load-0", "8") + DONE, never);
      assertEquals(null, s.error(), never.toString());
      assertArrayEquals(new int[] {7, 8}, s.tokenIds(), never.toString());
    }
  }

  @Test
  void aStreamThatBreaksTheFramingIsAnError() throws Exception {
    Map<String, String> broken = new java.util.LinkedHashMap<>();
    broken.put("an event of another request",
        piece("load-0", "7") + piece("load-1", "8") + answerEvent("load-0", "") + DONE);
    broken.put("no answer event", piece("load-0", "7") + piece("load-0", "8") + DONE);
    broken.put("a piece after the answer's event",
        piece("load-0", "7") + answerEvent("load-0", "") + piece("load-0", "8") + DONE);
    broken.put("two answer events",
        piece("load-0", "7") + answerEvent("load-0", "") + answerEvent("load-0", "8") + DONE);
    broken.put("data after [DONE]",
        piece("load-0", "7") + answerEvent("load-0", "") + DONE + piece("load-0", "8"));
    for (Map.Entry<String, String> e : broken.entrySet()) {
      LoadDriver.Sample s = streamedAnswer(e.getValue());
      assertTrue(s.error() != null && s.error().startsWith("unusable stream"),
          e.getKey() + ": " + s.error());
      assertEquals(0, s.tokenIds().length, e.getKey());
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

  /**
   * A prompt the driver cannot send (a text with a lone surrogate, which JSON cannot carry) is
   * that prompt's error sample: it used to throw inside the completion of the request before
   * it, so no sample came for it and the run waited for ever (and out of the run, for one of
   * the first prompts).
   */
  @Test
  void aPromptThatCannotBeSentIsAnErrorSampleNotAHang() throws Exception {
    int closedPort;
    try (java.net.ServerSocket probe = new java.net.ServerSocket(0, 1,
        java.net.InetAddress.getLoopbackAddress())) {
      closedPort = probe.getLocalPort();
    }
    LoadDriver d = LoadDriver.builder().endpoints(List.of("127.0.0.1:" + closedPort))
        .api(LoadDriver.Api.COMPLETIONS).concurrency(1).build();
    List<LoadDriver.Prompt> prompts = List.of(LoadDriver.Prompt.ofText("first"),
        LoadDriver.Prompt.ofText("lone \uD800 surrogate"), LoadDriver.Prompt.ofText("third"));
    LoadDriver.Result r = java.util.concurrent.CompletableFuture.supplyAsync(
        () -> d.runPrompts(prompts)).get(30, java.util.concurrent.TimeUnit.SECONDS);
    assertEquals(3, r.samples().size());
    assertEquals(3, r.completions());
    for (int i = 0; i < 3; i++) {
      LoadDriver.Sample s = r.samples().get(i);
      assertEquals(i, s.index());
      assertTrue(s.error() != null, "nothing listens at the endpoint: " + s);
    }
    assertTrue(r.samples().get(1).error().contains("lone surrogate"), r.samples().get(1).error());
    // the first prompt cannot be sent either: an error sample, not an exception out of the run
    LoadDriver.Result first = java.util.concurrent.CompletableFuture.supplyAsync(
        () -> d.runPrompts(prompts.subList(1, 3))).get(30, java.util.concurrent.TimeUnit.SECONDS);
    assertEquals(2, first.samples().size());
    assertTrue(first.samples().get(0).error().contains("lone surrogate"),
        first.samples().get(0).error());
    // many in a row: each its error, without a call nested per prompt (a stack overflow,
    // swallowed by the future like the exception was)
    List<LoadDriver.Prompt> many = java.util.Collections.nCopies(50_000, prompts.get(1));
    LoadDriver.Result all = java.util.concurrent.CompletableFuture.supplyAsync(
        () -> d.runPrompts(many)).get(60, java.util.concurrent.TimeUnit.SECONDS);
    assertEquals(50_000, all.samples().size());
    assertTrue(all.samples().stream().allMatch(s -> s.error().contains("lone surrogate")));
  }

  /**
   * A progress callback that throws ends the run with its exception once every prompt is done:
   * it was thrown inside a request's completion, swallowed by the future, and the next prompt
   * was never sent, so the run waited for ever.
   */
  @Test
  void aProgressCallbackThatThrowsDoesNotHangTheRun() throws Exception {
    int closedPort;
    try (java.net.ServerSocket probe = new java.net.ServerSocket(0, 1,
        java.net.InetAddress.getLoopbackAddress())) {
      closedPort = probe.getLocalPort();
    }
    java.util.concurrent.atomic.AtomicInteger calls = new java.util.concurrent.atomic.AtomicInteger();
    LoadDriver d = LoadDriver.builder().endpoints(List.of("127.0.0.1:" + closedPort))
        .concurrency(1).onCompleted(n -> {
          calls.incrementAndGet();
          throw new IllegalArgumentException("progress bar broke at " + n);
        }).build();
    java.util.concurrent.ExecutionException e = assertThrows(
        java.util.concurrent.ExecutionException.class,
        () -> java.util.concurrent.CompletableFuture.supplyAsync(() -> d.run(prompts(3)))
            .get(30, java.util.concurrent.TimeUnit.SECONDS));
    assertTrue(e.getCause() instanceof IllegalStateException, String.valueOf(e.getCause()));
    assertTrue(e.getCause().getMessage().contains("progress bar broke at 1"),
        e.getCause().getMessage());
    assertEquals(3, calls.get(), "every request completes and is reported");
  }

  /**
   * The model goes with the requests of every route, the token route's too, which takes it as
   * the OpenAI routes do (the cache scope: a LoRA adapter, or the base model): it was sent on
   * the OpenAI routes only, so the same conversations sent as ids (the load generator's
   * {@code --chat-as-ids}) ran in another scope than the chats they were compared with.
   */
  @Test
  void theModelGoesWithTheRequestsOfEveryRoute() throws Exception {
    List<String> bodies = java.util.Collections.synchronizedList(new ArrayList<>());
    com.sun.net.httpserver.HttpServer fake = io.github.prefixrouter.internal.wire.JdkHttpServers
        .create(new java.net.InetSocketAddress("127.0.0.1", 0), 0);
    fake.createContext("/", ex -> {
      try (ex) {
        bodies.add(new String(ex.getRequestBody().readAllBytes(),
            java.nio.charset.StandardCharsets.UTF_8));
        ex.sendResponseHeaders(500, -1);
      }
    });
    fake.start();
    try {
      Map<LoadDriver.Api, LoadDriver.Prompt> prompts = Map.of(
          LoadDriver.Api.ROUTE, LoadDriver.Prompt.ofTokens(new int[] {1, 2, 3}),
          LoadDriver.Api.COMPLETIONS, LoadDriver.Prompt.ofText("abc"),
          LoadDriver.Api.CHAT, LoadDriver.Prompt.ofChat(
              List.of(new LoadDriver.Message("user", "abc"))));
      for (var p : prompts.entrySet()) {
        bodies.clear();
        LoadDriver.builder().api(p.getKey()).model("sql-lora")
            .endpoints(List.of("127.0.0.1:" + fake.getAddress().getPort())).concurrency(1)
            .build().runPrompts(List.of(p.getValue()));
        assertEquals(1, bodies.size(), p.getKey() + ": " + bodies);
        assertEquals("sql-lora", ((Map<?, ?>) io.github.prefixrouter.internal.json.Json.parse(
            bodies.get(0))).get("model"), p.getKey() + ": " + bodies.get(0));
      }
    } finally {
      fake.stop(0);
    }
    // and a node takes it on the token route
    try (NodeMain.Running a = NodeMain.start(options("a"))) {
      LoadDriver.Result r = LoadDriver.builder().endpoints(List.of(a.clientAddress))
          .model("sql-lora").concurrency(2).build().run(prompts(4));
      assertEquals(4, r.answered().size(), r.summary());
    }
  }

  @Test
  void invalidSettingsAreRejected() {
    assertThrows(IllegalArgumentException.class, () -> LoadDriver.builder().build());
    assertThrows(IllegalArgumentException.class, () -> LoadDriver.builder().endpoints(List.of("nohost")).build());
    assertThrows(IllegalArgumentException.class,
        () -> LoadDriver.builder().endpoints(List.of("h:1")).concurrency(0).build());
  }

  /**
   * A refused setting is named by its setting, so that a command line can say which of its
   * flags it was: an endpoint that is no URI at all ("h 1:9") was refused with the URI's own
   * message, "Illegal character in authority at index 9: http://h 1:9", naming no endpoint.
   */
  @Test
  void aRefusedSettingIsNamed() {
    // a port no connection can go to failed every request of the run, one by one
    for (String bad : List.of("h 1:9", "localhost", "h:1/x y", "[::1", "h:0", "h:65536",
        "h:99999")) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> LoadDriver.builder().endpoints(List.of("h:1", bad)).build(), bad);
      assertEquals("endpoints must be host:port, was '" + bad + "'", e.getMessage());
    }
    LoadDriver.builder().endpoints(List.of("h:1", "h:65535", "[::1]:8000")).build();
    assertEquals("endpoints must name at least one", assertThrows(IllegalArgumentException.class,
        () -> LoadDriver.builder().build()).getMessage());
    // the nodes' range (GenerationParams'): above it every request was sent, and refused
    for (double t : new double[] {100.5, Double.POSITIVE_INFINITY, Double.NaN, -1}) {
      assertEquals("temperature must be 0 to 100, was " + t, assertThrows(
          IllegalArgumentException.class, () -> LoadDriver.builder().temperature(t))
          .getMessage());
    }
    LoadDriver.builder().temperature(100.0).temperature(0.0).temperature(null);
    for (int n : new int[] {0, GenerationParams.MAX_TOKENS_LIMIT + 1}) {
      assertEquals("maxTokens must be 1 to " + GenerationParams.MAX_TOKENS_LIMIT + ", was " + n,
          assertThrows(IllegalArgumentException.class, () -> LoadDriver.builder()
              .endpoints(List.of("h:1")).maxTokens(n).build()).getMessage());
    }
    LoadDriver.builder().endpoints(List.of("h:1")).maxTokens(GenerationParams.MAX_TOKENS_LIMIT)
        .build();
    assertEquals("concurrency must be 1 to 10000, was 10001", assertThrows(
        IllegalArgumentException.class, () -> LoadDriver.builder().endpoints(List.of("h:1"))
            .concurrency(10_001).build()).getMessage());
    // no HTTP exchange can have one: it was taken, and every request of the run then failed
    // as "client failure: java.lang.IllegalArgumentException: Invalid duration: PT0S"
    for (java.time.Duration d : List.of(java.time.Duration.ZERO, java.time.Duration.ofMillis(-1),
        java.time.temporal.ChronoUnit.FOREVER.getDuration().negated())) {
      assertEquals("requestTimeout must be positive, was " + d, assertThrows(
          IllegalArgumentException.class, () -> LoadDriver.builder().endpoints(List.of("h:1"))
              .requestTimeout(d).build()).getMessage());
    }
    LoadDriver.builder().endpoints(List.of("h:1")).requestTimeout(java.time.Duration.ofNanos(1))
        .build();
  }
}
