package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.doReturn;
import static org.mockito.Mockito.doThrow;
import static org.mockito.Mockito.spy;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.Await;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;

/**
 * An {@link Error} thrown as a client request is handled or answered (the heap running out, a
 * stack overflow, an {@link AssertionError} of a host component: the node, its tokenizer, the
 * writer threads) is the endpoint's to answer as it answers an exception: the client gets
 * exactly one answer, or its connection closed, and the request gives back its in-flight slot,
 * its tokenization and its share of the body budget. It used to escape to the JDK server or to
 * a future nothing reads, and the client waited for an answer that never came.
 */
class ClientEndpointErrorTest extends ClientEndpointFixture {

  private void start() throws IOException {
    start(System::nanoTime);
  }

  /** Starts the endpoint, its monotonic clock {@code nanoClock}. */
  private void start(java.util.function.LongSupplier nanoClock) throws IOException {
    when(node.stats()).thenReturn(StatsFixtures.nodeStats());
    start(new ClientEndpoint(node, List::of, 64, Duration.ofSeconds(5), "base",
        ClientEndpoint.DEFAULT_READER_THREADS, ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS,
        tokenizer, () -> 1_767_225_600L, 7L, ClientEndpoint.DEFAULT_BODY_BUDGET, nanoClock));
  }

  /** Puts {@code value} in the endpoint's field {@code name}; returns what it held. */
  private Object swapField(String name, Object value) throws ReflectiveOperationException {
    java.lang.reflect.Field field = ClientEndpoint.class.getDeclaredField(name);
    field.setAccessible(true);
    Object was = field.get(endpoint);
    field.set(endpoint, value);
    return was;
  }

  private CompletableFuture<HttpResponse<String>> send(String method, String path, String body) {
    return client.sendAsync(HttpRequest.newBuilder(URI.create("http://" + address + path))
        .method(method, body == null ? HttpRequest.BodyPublishers.noBody()
            : HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** The answer to {@code sent}; fails, saying so, if the client got none within 5 s. */
  private static HttpResponse<String> answer(CompletableFuture<HttpResponse<String>> sent,
      String what) throws InterruptedException {
    try {
      return sent.get(5, TimeUnit.SECONDS);
    } catch (TimeoutException e) {
      return fail(what + ": no answer within 5 s, the exchange was left open");
    } catch (ExecutionException e) {
      return fail(what + ": the connection was closed without an answer (" + e.getCause() + ")");
    }
  }

  private void assertAllGivenBack(String what) throws InterruptedException {
    Await.until(() -> endpoint.inFlight() == 0, what + ": its in-flight slot given back");
    Await.until(() -> endpoint.openStreams() == 0, what + ": its stream given up");
    Await.until(() -> endpoint.tokenizationsUnderWay() == 0, what + ": its tokenization ended");
    assertEquals(endpoint.bodyBudget(), endpoint.bodyBudgetAvailable(),
        what + ": its share of the body budget given back");
  }

  /**
   * {@code client.internal_errors} of {@code /v1/stats} (null if it has none): the requests
   * answered 500, or closed, for the endpoint's own failure.
   */
  private Object internalErrors() throws InterruptedException {
    HttpResponse<String> stats = answer(send("GET", ClientEndpoint.STATS, null), "/v1/stats");
    assertEquals(200, stats.statusCode(), stats.body());
    return ((Map<?, ?>) json(stats.body()).get("client")).get("internal_errors");
  }

  private static Map<?, ?> json(String body) {
    return (Map<?, ?>) Json.parse(body);
  }

  private static Map<String, Object> ordered(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  /** The 500 of the endpoint's own failure in OpenAI's error shape. */
  private static final Map<String, Object> OPENAI_INTERNAL = Map.of("error", ordered("message",
      ClientEndpoint.INTERNAL_ERROR_MESSAGE, "type", "server_error", "param", Json.NULL,
      "code", "internal"));

  /** The same in the node's own routes' shape. */
  private static final Map<String, Object> INTERNAL =
      Map.of("error", ClientEndpoint.INTERNAL_ERROR_MESSAGE);

  private static InferenceResponse response(String id) {
    return new InferenceResponse(id, new EngineResult(new int[] {'o'}, "o", 3, 0, 1, 1), "solo",
        false, 1, FallbackCause.NONE, StubNode.LOCAL_DECISION);
  }

  /** A failure whose cause cannot be read: an {@link Error} as its status answer is written. */
  private static RuntimeException failureThatOverflows() {
    return new RuntimeException("failed") {
      private static final long serialVersionUID = 1L;

      @Override
      public synchronized Throwable getCause() {
        throw new StackOverflowError();
      }
    };
  }

  /** A text request whole and a chat request streamed, both on OpenAI's paths: both tokenized. */
  private static final List<String[]> TOKENIZED = List.of(
      new String[] {ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}"},
      new String[] {ClientEndpoint.OPENAI_CHAT,
          "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}"});

  /** A set that cannot take an element: the heap runs out as one is added. */
  private static java.util.Set<Object> full() {
    return new java.util.concurrent.CopyOnWriteArraySet<>() {
      private static final long serialVersionUID = 1L;

      @Override
      public boolean add(Object o) {
        throw new OutOfMemoryError("Java heap space");
      }
    };
  }

  /** Asserts that {@code resp} is the 500 of the endpoint's own failure in {@code path}'s shape. */
  private static void assertInternal(String path, HttpResponse<String> resp, String what) {
    assertEquals(500, resp.statusCode(), what + ": " + resp.body());
    assertEquals(path.equals(ClientEndpoint.COMPLETIONS) ? INTERNAL : OPENAI_INTERNAL,
        json(resp.body()), what);
  }

  /**
   * Sends {@code body} to {@code path}, the {@code n}th request the node is given, and asserts
   * that it is answered 200 once the node answers it.
   */
  private void assertAnsweredAfter(String path, String body, int n) throws InterruptedException {
    CompletableFuture<HttpResponse<String>> sent = send("POST", path, body);
    stub.awaitSubmitted(n);
    futures.get(n - 1).complete(response(requests.get(n - 1).id()));
    assertEquals(200, answer(sent, "the answer after").statusCode());
  }

  /**
   * An {@link Error} thrown by the handler itself (here the node's id and stats, read as a
   * request is parsed, and for {@code /v1/stats} and {@code /metrics}) is a 500 in the path's
   * error shape, the error's text logged and not sent, as an exception's is; the request holds
   * no in-flight slot nor share of the body budget, and the next requests are answered.
   */
  @Test
  void anErrorThrownAsARequestIsHandledIsA500InThePathsShape() throws Exception {
    start();
    when(node.nodeId()).thenThrow(new AssertionError("secret-detail-of-the-bug"));
    Map<String, String> bodies = new LinkedHashMap<>();
    bodies.put(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\": [1, 2]}");
    bodies.put(ClientEndpoint.OPENAI_CHAT,
        "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}");
    bodies.put(ClientEndpoint.COMPLETIONS, "{\"prompt\": [1, 2]}");
    for (Map.Entry<String, String> e : bodies.entrySet()) {
      HttpResponse<String> resp = answer(send("POST", e.getKey(), e.getValue()), e.getKey());
      assertEquals(500, resp.statusCode(), e.getKey() + " -> " + resp.body());
      assertEquals(e.getKey().equals(ClientEndpoint.COMPLETIONS) ? INTERNAL : OPENAI_INTERNAL,
          json(resp.body()), e.getKey());
      assertFalse(resp.body().contains("secret"), resp.body());
      assertAllGivenBack(e.getKey());
    }
    when(node.stats()).thenThrow(new StackOverflowError());
    HttpResponse<String> stats = answer(send("GET", ClientEndpoint.STATS, null), "/v1/stats");
    assertEquals(500, stats.statusCode(), stats.body());
    assertEquals(INTERNAL, json(stats.body()));
    HttpResponse<String> metrics = answer(send("GET", ClientEndpoint.METRICS, null), "/metrics");
    assertEquals(500, metrics.statusCode(), metrics.body());
    assertEquals(ClientEndpoint.INTERNAL_ERROR_MESSAGE, metrics.body());
    assertEquals("text/plain; charset=utf-8",
        metrics.headers().firstValue("Content-Type").orElse(null));
    assertTrue(requests.isEmpty());

    doReturn("solo").when(node).nodeId();
    doReturn(StatsFixtures.nodeStats()).when(node).stats();
    HttpResponse<String> health = answer(send("GET", ClientEndpoint.HEALTH, null), "/health");
    assertEquals(200, health.statusCode(), health.body());
    assertEquals(5L, internalErrors(), "the 500s of handlers that threw, in internal_errors");
  }

  /**
   * A node whose {@code submit} throws an {@link Error}, or a tokenizer that throws one, is
   * answered as one that throws an exception: 502 with its message (OpenAI's
   * {@code tokenizer_failed} for the tokenizer), on every route, whole and streamed, text and
   * token ids; the in-flight slot, the stream and the tokenization are given back.
   */
  @Test
  void aNodeOrATokenizerThatThrowsAnErrorIsA502AndGivesItsSlotBack() throws Exception {
    start();
    OutOfMemoryError heap = new OutOfMemoryError("Java heap space");
    when(node.submit(any())).thenThrow(heap);
    when(node.submit(any(), any())).thenThrow(heap);
    List<String[]> sends = List.of(
        new String[] {ClientEndpoint.COMPLETIONS, "{\"id\":\"q1\",\"prompt\":[1]}"},
        new String[] {ClientEndpoint.COMPLETIONS, "{\"id\":\"q2\",\"prompt\":[1],\"stream\":true}"},
        new String[] {ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":[1]}"},
        new String[] {ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":[1],\"stream\":true}"},
        new String[] {ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}"},
        new String[] {ClientEndpoint.OPENAI_CHAT,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}"});
    for (String[] s : sends) {
      String what = s[0] + " " + s[1];
      HttpResponse<String> resp = answer(send("POST", s[0], s[1]), what);
      assertEquals(502, resp.statusCode(), what + ": " + resp.body());
      assertTrue(resp.body().contains("Java heap space"), what + ": " + resp.body());
      assertAllGivenBack(what);
    }

    tokenizer.mode = FakeTokenizer.Mode.THROW_ERROR;
    for (String body : List.of("{\"prompt\":\"x\"}", "{\"prompt\":\"x\",\"stream\":true}")) {
      String what = "a tokenizer that throws an Error, " + body;
      HttpResponse<String> resp = answer(send("POST", ClientEndpoint.OPENAI_COMPLETIONS, body),
          what);
      assertEquals(502, resp.statusCode(), what + ": " + resp.body());
      assertEquals("tokenizer_failed", ((Map<?, ?>) json(resp.body()).get("error")).get("code"),
          what + ": " + resp.body());
      assertAllGivenBack(what);
    }
    assertEquals(0L, internalErrors(), "the node's and the tokenizer's failures (502) are not "
        + "the endpoint's own");
  }

  /**
   * An {@link Error} thrown as the node's answer is written, on a writer thread (here the
   * answer's routing decision or the failure's cause cannot be read), is a 500 in the path's
   * error shape, and the writers go on answering: the writer thread used to die with it, the
   * exchange left open.
   */
  @Test
  void anErrorThrownAsAnAnswerIsWrittenIsA500AndTheWritersGoOn() throws Exception {
    start();
    int n = 0;
    for (String path : List.of(ClientEndpoint.OPENAI_COMPLETIONS, ClientEndpoint.COMPLETIONS)) {
      for (boolean failed : new boolean[] {false, true}) {
        String what = path + (failed ? ": a failure" : ": an answer")
            + " whose write throws an Error";
        CompletableFuture<HttpResponse<String>> sent = send("POST", path, "{\"prompt\":[1]}");
        stub.awaitSubmitted(++n);
        if (failed) {
          futures.get(n - 1).completeExceptionally(failureThatOverflows());
        } else {
          InferenceResponse bad = spy(response(requests.get(n - 1).id()));
          doThrow(new AssertionError("an answer that breaks")).when(bad).decision();
          futures.get(n - 1).complete(bad);
        }
        assertInternal(path, answer(sent, what), what);
        assertAllGivenBack(what);
      }
    }
    assertAnsweredAfter(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}", ++n);
    assertEquals(4L, internalErrors(), "the 500s of writes that threw, in internal_errors");
  }

  /**
   * An {@link Error} thrown as a stream's events are written (here its end: the answer's routing
   * decision cannot be read) ends the stream with the internal error event, without
   * {@code [DONE]}, and the stream is given up: the writer thread used to die with it, the
   * stream left open and counted open for good.
   */
  @Test
  void anErrorThrownAsAStreamIsWrittenEndsItWithTheInternalErrorEvent() throws Exception {
    start();
    CompletableFuture<HttpResponse<java.io.InputStream>> sent = client.sendAsync(
        HttpRequest.newBuilder(URI.create("http://" + address + ClientEndpoint.COMPLETIONS))
            .POST(HttpRequest.BodyPublishers.ofString(
                "{\"id\":\"q1\",\"prompt\":[1],\"stream\":true}")).build(),
        HttpResponse.BodyHandlers.ofInputStream());
    stub.awaitSubmitted(1);
    stub.listeners.get(0).onOutput(new int[] {7}, "");
    HttpResponse<java.io.InputStream> resp = sent.get(10, TimeUnit.SECONDS);
    assertEquals(200, resp.statusCode());
    java.io.BufferedReader in = new java.io.BufferedReader(
        new java.io.InputStreamReader(resp.body(), java.nio.charset.StandardCharsets.UTF_8));
    Sse.next(in);
    InferenceResponse bad = spy(response("q1"));
    doThrow(new AssertionError("an answer that breaks")).when(bad).decision();
    futures.get(0).complete(bad);
    CompletableFuture<Object> event = CompletableFuture.supplyAsync(() -> {
      try {
        return Sse.next(in);
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    });
    Object error;
    try {
      error = event.get(5, TimeUnit.SECONDS);
    } catch (TimeoutException e) {
      error = fail("no event within 5 s after the end whose write threw: the stream left open");
    }
    assertTrue(error instanceof Map<?, ?>, String.valueOf(error));
    assertEquals("internal", ((Map<?, ?>) ((Map<?, ?>) error).get("error")).get("type"),
        String.valueOf(error));
    assertEquals(null, Sse.next(in), "the stream ends after the error, without [DONE]");
    assertAllGivenBack("a stream whose end throws an Error");
    assertEquals(1L, internalErrors(), "the stream's internal error, in internal_errors");
  }

  /**
   * A tokenization that fails with an exception whose cause cannot be read (an {@link Error}
   * from the tokenizer's own exception, read on the thread that completed the tokenization) is
   * a 500 {@code internal}, and gives back the request's in-flight slot: it used to be lost in
   * the tokenizer's future, the client never answered.
   */
  @Test
  void anErrorThrownAsATokenizersFailureIsReadIsA500() throws Exception {
    start();
    tokenizer.mode = FakeTokenizer.Mode.NEVER;
    CompletableFuture<HttpResponse<String>> sent =
        send("POST", ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}");
    Await.until(() -> endpoint.tokenizationsUnderWay() == 1, "the tokenization under way");
    tokenizer.calls.get(0).future().completeExceptionally(new CompletionException("tokenizer failed") {
      private static final long serialVersionUID = 1L;

      @Override
      public synchronized Throwable getCause() {
        throw new AssertionError("a tokenizer's failure that breaks");
      }
    });
    HttpResponse<String> resp = answer(sent, "a tokenizer's failure whose cause throws");
    assertEquals(500, resp.statusCode(), resp.body());
    assertEquals(OPENAI_INTERNAL, json(resp.body()));
    assertAllGivenBack("a tokenizer's failure whose cause throws");
    assertTrue(requests.isEmpty());
    assertEquals(1L, internalErrors(), "the 500, in internal_errors");
  }

  /**
   * An answer the writer threads cannot take (their executor throws an {@link Error}: a thread
   * it cannot start) has its connection closed at once, as the thread that completed the node's
   * future does not write: the client is not left waiting. It used to be lost in the node's
   * future, the exchange left open.
   */
  @Test
  void anAnswerNoWriterThreadCanTakeHasItsConnectionClosedAtOnce() throws Exception {
    start();
    ThreadPoolExecutor noThread = new ThreadPoolExecutor(1, 1, 0, TimeUnit.SECONDS,
        new LinkedBlockingQueue<>()) {
      @Override
      public void execute(Runnable task) {
        throw new OutOfMemoryError("unable to create native thread: possibly out of memory");
      }
    };
    Object writers = swapField("executor", noThread);
    try {
      CompletableFuture<HttpResponse<String>> sent =
          send("POST", ClientEndpoint.COMPLETIONS, "{\"prompt\":[1]}");
      stub.awaitSubmitted(1);
      futures.get(0).complete(response(requests.get(0).id()));
      try {
        HttpResponse<String> resp = sent.get(5, TimeUnit.SECONDS);
        fail("answered " + resp.statusCode() + " " + resp.body() + " with no writer thread");
      } catch (TimeoutException e) {
        fail("an answer no writer thread could take: the exchange was left open, the client "
            + "not answered within 5 s");
      } catch (ExecutionException e) {
        assertTrue(e.getCause() instanceof IOException, String.valueOf(e.getCause()));
      }
      assertAllGivenBack("an answer no writer thread could take");
    } finally {
      swapField("executor", writers);
      noThread.shutdownNow();
    }
    assertAnsweredAfter(ClientEndpoint.COMPLETIONS, "{\"prompt\":[1]}", 2);
    assertEquals(1L, internalErrors(), "the connection closed, in internal_errors");
  }

  /**
   * A tokenization whose timeout cannot be set (the endpoint's timer throws an {@link Error}: a
   * thread it cannot start) is a 500 {@code internal}, whole and streamed, text and chat; it
   * gives back its in-flight slot, and the tokenizer's call, which nothing would bound, is
   * cancelled. The {@code Error} used to escape to the handler's guard, which answered 500 but
   * left the slot taken for good (at the in-flight cap every client refused 503) and the call
   * running.
   */
  @Test
  void aTokenizationWhoseTimeoutCannotBeSetIsA500AndGivesItsSlotBack() throws Exception {
    start();
    tokenizer.mode = FakeTokenizer.Mode.NEVER;
    ScheduledThreadPoolExecutor noThread = new ScheduledThreadPoolExecutor(1) {
      @Override
      public ScheduledFuture<?> schedule(Runnable task, long delay, TimeUnit unit) {
        throw new OutOfMemoryError("unable to create native thread: possibly out of memory");
      }
    };
    Object timer = swapField("timer", noThread);
    try {
      for (int i = 0; i < TOKENIZED.size(); i++) {
        String[] s = TOKENIZED.get(i);
        String what = "a tokenization whose timeout cannot be set, " + s[0] + " " + s[1];
        assertInternal(s[0], answer(send("POST", s[0], s[1]), what), what);
        assertAllGivenBack(what);
        assertTrue(tokenizer.calls.get(i).future().isCancelled(),
            what + ": the tokenizer's call, which nothing bounds, was left running");
      }
    } finally {
      swapField("timer", timer);
      noThread.shutdownNow();
    }
    assertTrue(requests.isEmpty());
    tokenizer.mode = FakeTokenizer.Mode.TOKENS;
    assertAnsweredAfter(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}", 1);
    assertEquals(2L, internalErrors(), "the 500s, in internal_errors");
  }

  /**
   * The endpoint's own failures are counted ({@code client.internal_errors},
   * {@code prefix_router_client_internal_errors_total}) and logged at most
   * {@link ClientEndpoint#WARNINGS_PER_MINUTE} lines a minute by the endpoint's clock, the next
   * line logged saying how many were left out: a failure that lasts (the heap, a host component)
   * fails every request meanwhile, and each used to log a line, with a stack trace, and be
   * counted nowhere.
   */
  @Test
  void theEndpointsOwnFailuresAreCountedAndTheirLinesBounded() throws Exception {
    int perMinute = ClientEndpoint.WARNINGS_PER_MINUTE;
    java.util.concurrent.atomic.AtomicLong nanos = new java.util.concurrent.atomic.AtomicLong();
    start(nanos::get);
    when(node.nodeId()).thenThrow(new AssertionError("a host component that breaks"));
    List<String> problems = new java.util.ArrayList<>();
    String failed = "client request to " + ClientEndpoint.COMPLETIONS + " failed";
    List<String> first = io.github.prefixrouter.testing.LoggedLines.logged(failed, () -> {
      for (int i = 0; i < 2 * perMinute; i++) {
        failsWith(500, ClientEndpoint.COMPLETIONS, "{\"prompt\":[1]}", problems);
      }
    });
    if (first.size() != perMinute) {
      problems.add(first.size() + " lines logged in a minute for " + 2 * perMinute
          + " requests the endpoint failed, not " + perMinute + ": " + first);
    }
    nanos.addAndGet(TimeUnit.SECONDS.toNanos(60));
    List<String> next = io.github.prefixrouter.testing.LoggedLines.logged(failed, () -> {
      for (int i = 0; i <= perMinute; i++) {
        failsWith(500, ClientEndpoint.COMPLETIONS, "{\"prompt\":[1]}", problems);
      }
    });
    if (next.size() != perMinute || !next.get(0).contains("(" + perMinute
        + " more such failures left out before this one, above " + perMinute + " a minute)")) {
      problems.add("a minute later, for " + (perMinute + 1) + " requests failed, logged " + next);
    }
    doReturn("solo").when(node).nodeId();
    Object counted = internalErrors();
    if (!Long.valueOf(3 * perMinute + 1).equals(counted)) {
      problems.add("client.internal_errors " + counted + ", not " + (3 * perMinute + 1));
    }
    HttpResponse<String> metrics = answer(send("GET", ClientEndpoint.METRICS, null), "/metrics");
    String exported = "prefix_router_client_internal_errors_total " + (3 * perMinute + 1);
    if (!metrics.body().lines().toList().contains(exported)) {
      problems.add("/metrics has no line " + exported);
    }
    assertEquals(List.of(), problems, "what the endpoint's own failures counted and logged");
  }

  /**
   * The lines of the {@link Error}s a node's {@code submit} or a tokenizer throws (each request
   * answered 502) are at most {@link ClientEndpoint#WARNINGS_PER_MINUTE} a minute by the
   * endpoint's clock, both kinds together, the next line logged saying how many were left out:
   * a node or tokenizer whose heap runs out fails every request meanwhile, and each logged a
   * line, with a stack trace, with no bound. Every request is still answered 502, and each of
   * the tokenizer's still counted in {@code tokenize_failures}.
   */
  @Test
  void theLinesOfErrorsThrownByTheNodeOrTheTokenizerAreBounded() throws Exception {
    int perMinute = ClientEndpoint.WARNINGS_PER_MINUTE;
    java.util.concurrent.atomic.AtomicLong nanos = new java.util.concurrent.atomic.AtomicLong();
    start(nanos::get);
    OutOfMemoryError heap = new OutOfMemoryError("Java heap space");
    when(node.submit(any())).thenThrow(heap);
    tokenizer.mode = FakeTokenizer.Mode.THROW_ERROR;
    List<String> problems = new java.util.ArrayList<>();
    String threw = "threw";
    List<String> first = io.github.prefixrouter.testing.LoggedLines.logged(threw, () -> {
      for (int i = 0; i < perMinute; i++) {
        failsWith(502, ClientEndpoint.COMPLETIONS, "{\"prompt\":[1]}", problems);
        failsWith(502, ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}", problems);
      }
    });
    if (first.size() != perMinute) {
      problems.add(first.size() + " lines logged in a minute for " + 2 * perMinute
          + " Errors of the node and the tokenizer, not " + perMinute + ": " + first);
    }
    nanos.addAndGet(TimeUnit.SECONDS.toNanos(60));
    List<String> next = io.github.prefixrouter.testing.LoggedLines.logged(threw,
        () -> failsWith(502, ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}", problems));
    if (next.size() != 1 || !next.get(0).contains("(" + perMinute
        + " more such failures left out before this one, above " + perMinute + " a minute)")) {
      problems.add("a minute later, for one more Error of the tokenizer, logged " + next);
    }
    HttpResponse<String> stats = answer(send("GET", ClientEndpoint.STATS, null), "/v1/stats");
    Object counted = ((Map<?, ?>) json(stats.body()).get("client")).get("tokenize_failures");
    if (!Long.valueOf(perMinute + 1).equals(counted)) {
      problems.add("client.tokenize_failures " + counted + ", not " + (perMinute + 1));
    }
    if (!Long.valueOf(0).equals(internalErrors())) {
      problems.add("the node's and the tokenizer's 502s counted as the endpoint's own");
    }
    assertAllGivenBack("requests whose node or tokenizer threw an Error");
    assertEquals(List.of(), problems, "the lines of the node's and the tokenizer's Errors");
  }

  /**
   * Adds to {@code problems} unless {@code body} sent to {@code path} is answered
   * {@code status}; a 500 must be the endpoint's own failure in the path's error shape.
   */
  private void failsWith(int status, String path, String body, List<String> problems) {
    try {
      HttpResponse<String> resp = answer(send("POST", path, body), path + " " + body);
      if (resp.statusCode() != status || status == 500 && !json(resp.body()).equals(
          path.equals(ClientEndpoint.COMPLETIONS) ? INTERNAL : OPENAI_INTERNAL)) {
        problems.add(path + " " + body + " answered " + resp.statusCode() + " " + resp.body()
            + ", not " + status);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      problems.add("interrupted");
    }
  }

  /**
   * An {@link Error} thrown as a streamed request's answer is set up, after the request took its
   * in-flight slot (here the set of open streams cannot take it: the heap runs out), is a 500 in
   * the path's error shape, and the slot is given back: on the route's path, on the reader
   * thread, it was answered 500 by the handler's guard with the slot kept for good (at the
   * in-flight cap every client refused 503); on OpenAI's, on the thread that completed the
   * tokenization, it was lost in the tokenizer's future, the client never answered.
   */
  @Test
  void anErrorAsAStreamIsSetUpIsA500AndGivesItsSlotBack() throws Exception {
    start();
    tokenizer.mode = FakeTokenizer.Mode.NEVER;
    Object streams = swapField("openStreams", full());
    try {
      String[][] sends = {
          {ClientEndpoint.COMPLETIONS, "{\"id\":\"q1\",\"prompt\":[1],\"stream\":true}"},
          {ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\",\"stream\":true}"}};
      for (String[] s : sends) {
        String what = "a stream that cannot be set up, " + s[0] + " " + s[1];
        CompletableFuture<HttpResponse<String>> sent = send("POST", s[0], s[1]);
        if (s[0].equals(ClientEndpoint.OPENAI_COMPLETIONS)) {
          Await.until(() -> endpoint.tokenizationsUnderWay() == 1, "the tokenization under way");
          tokenizer.calls.get(0).future().complete(
              new PromptTokenizer.Tokenized(new int[] {1}, -1));
        }
        assertInternal(s[0], answer(sent, what), what);
        assertAllGivenBack(what);
      }
    } finally {
      swapField("openStreams", streams);
    }
    assertTrue(requests.isEmpty(), "nothing submitted: " + requests);
    assertEquals(2L, internalErrors(), "the 500s, in internal_errors");
  }

  /**
   * An {@link Error} thrown as a tokenization under way is tracked, after the request took its
   * in-flight slot (here the set of tokenizations under way cannot take it: the heap runs out),
   * is a 500 {@code internal}, whole and streamed, text and chat, answered once: the slot is
   * given back at once, the tokenizer's call cancelled, and nothing is submitted when it would
   * have completed. It escaped to the handler's guard, which answered 500 with the call still
   * running and the slot held: at the endpoint's timeout the request was answered a second
   * time, and a call that completed before it had its request submitted to the node, for a
   * client already answered.
   */
  @Test
  void anErrorAsATokenizationIsTrackedIsA500AnsweredOnce() throws Exception {
    start();
    tokenizer.mode = FakeTokenizer.Mode.NEVER;
    Object tokenizing = swapField("tokenizing", full());
    try {
      for (int i = 0; i < TOKENIZED.size(); i++) {
        String[] s = TOKENIZED.get(i);
        String what = "a tokenization that cannot be tracked, " + s[0] + " " + s[1];
        assertInternal(s[0], answer(send("POST", s[0], s[1]), what), what);
        CompletableFuture<PromptTokenizer.Tokenized> call = tokenizer.calls.get(i).future();
        assertTrue(call.isCancelled(), what + ": the tokenizer's call was left running, the "
            + "request's slot held (in flight: " + endpoint.inFlight() + ")");
        assertEquals(0, endpoint.inFlight(), what + ": its in-flight slot held");
        call.complete(new PromptTokenizer.Tokenized(new int[] {1}, -1));
      }
    } finally {
      swapField("tokenizing", tokenizing);
    }
    assertTrue(requests.isEmpty(), "submitted for a client answered 500: " + requests);
    tokenizer.mode = FakeTokenizer.Mode.TOKENS;
    assertAnsweredAfter(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}", 1);
    assertEquals(2L, internalErrors(), "the 500s, once each, in internal_errors");
  }

  /**
   * An {@link Error} thrown as a tokenization is tracked after its tokens came (here they come
   * from the tokenizer's thread as the wait is set up, and the set of tokenizations under way
   * then cannot take it: the heap runs out) leaves the request answered as its tokens make it,
   * once, whole and streamed, text and chat; the {@code Error} is the endpoint's own failure all
   * the same, counted in {@code client.internal_errors} and logged at ERROR. It was dropped
   * without a line: the request already answered, nothing counted nor logged it.
   */
  @Test
  void anErrorAsATokenizationIsTrackedAfterItsTokensCameIsCountedAndLogged() throws Exception {
    start();
    tokenizer.mode = FakeTokenizer.Mode.NEVER;
    java.util.Set<Object> fullOnceTokenized = new java.util.concurrent.CopyOnWriteArraySet<>() {
      private static final long serialVersionUID = 1L;

      @Override
      public boolean add(Object o) {
        tokenizer.calls.get(tokenizer.calls.size() - 1).future()
            .complete(new PromptTokenizer.Tokenized(new int[] {1}, -1));
        throw new OutOfMemoryError("Java heap space");
      }
    };
    Object tokenizing = swapField("tokenizing", fullOnceTokenized);
    java.io.PrintStream err = System.err;
    java.io.ByteArrayOutputStream log = new java.io.ByteArrayOutputStream();
    System.setErr(new java.io.PrintStream(log, true, java.nio.charset.StandardCharsets.UTF_8));
    try {
      for (int i = 0; i < TOKENIZED.size(); i++) {
        String[] s = TOKENIZED.get(i);
        String what = "a tokenization tracked after its tokens came, " + s[0] + " " + s[1];
        CompletableFuture<HttpResponse<String>> sent = send("POST", s[0], s[1]);
        stub.awaitSubmitted(i + 1);
        long counted = i + 1;
        Await.until(() -> endpoint.internalErrors() == counted, what + ": the Error thrown "
            + "after its tokens came counted in client.internal_errors (" + counted
            + " expected, " + endpoint.internalErrors() + " counted)");
        futures.get(i).complete(response(requests.get(i).id()));
        HttpResponse<String> resp = answer(sent, what);
        assertEquals(200, resp.statusCode(), what + ": " + resp.body());
        assertAllGivenBack(what);
      }
      Await.until(() -> errorLines(log).size() == TOKENIZED.size(), "a line at ERROR for each "
          + "Error thrown as a tokenization was tracked after its tokens came: "
          + errorLines(log));
    } finally {
      System.setErr(err);
      swapField("tokenizing", tokenizing);
    }
    assertEquals(TOKENIZED.size(), requests.size(), "each request submitted once: " + requests);
    assertEquals((long) TOKENIZED.size(), internalErrors(), "the Errors, in internal_errors");
  }

  /** The lines logged at ERROR in {@code log} about a client request's tokenization. */
  private static List<String> errorLines(java.io.ByteArrayOutputStream log) {
    return log.toString(java.nio.charset.StandardCharsets.UTF_8).lines()
        .filter(l -> l.contains(" ERROR ") && l.contains("tokenization of client request"))
        .toList();
  }
}
