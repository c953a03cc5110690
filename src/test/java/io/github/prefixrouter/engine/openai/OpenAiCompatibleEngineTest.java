package io.github.prefixrouter.engine.openai;

import static io.github.prefixrouter.engine.openai.ScriptedOpenAiServer.reply;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.wire.SelectorThreads;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.EngineTimeoutException;
import io.github.prefixrouter.spi.InvalidRequestException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.net.URISyntaxException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The adapter against a fake OpenAI-compatible server on loopback. */
class OpenAiCompatibleEngineTest {

  private ScriptedOpenAiServer server;

  @BeforeEach
  void startFakeServer() throws IOException {
    server = ScriptedOpenAiServer.start();
  }

  @AfterEach
  void stop() {
    server.close();
  }

  private String base() {
    return server.base();
  }

  private OpenAiCompatibleEngine engine() {
    return OpenAiCompatibleEngine.builder().baseUrl(base()).model("m").requestTimeout(Duration.ofSeconds(5)).build();
  }

  private static InferenceRequest request() {
    return new InferenceRequest("r1", new int[] {101, 7, 7, 9000}, new GenerationParams(3, 0.0, 0.9, 17L));
  }

  private static EngineException failure(CompletableFuture<EngineResult> f) {
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(20, TimeUnit.SECONDS));
    assertTrue(e.getCause() instanceof EngineException, "cause: " + e.getCause());
    return (EngineException) e.getCause();
  }

  /** As {@link #failure(CompletableFuture)}, saying what was awaited if it never came. */
  private static EngineException failure(CompletableFuture<EngineResult> f, String what) {
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> f.get(20, TimeUnit.SECONDS), () -> "no failure within 20 s: " + what);
    assertTrue(e.getCause() instanceof EngineException, "cause: " + e.getCause());
    return (EngineException) e.getCause();
  }

  /**
   * The subscriber is built when the node hands the engine its listener, so that is where its
   * settings are refused: an incomplete builder with an {@link IllegalStateException}, a setting
   * out of range with an {@link IllegalArgumentException}, each naming the setting. Nothing is
   * subscribed then.
   */
  @Test
  void kvEventSettingsAreRefusedWhenTheListenerIsSet() {
    io.github.prefixrouter.spi.CacheEventListener listener =
        new io.github.prefixrouter.spi.CacheEventListener() {};
    OpenAiCompatibleEngine noBlockSize = OpenAiCompatibleEngine.builder().baseUrl(base())
        .kvEvents(io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber.builder()
            .endpoint("tcp://127.0.0.1:5557"))
        .build();
    IllegalStateException missing = assertThrows(IllegalStateException.class,
        () -> noBlockSize.setCacheEventListener(listener));
    assertTrue(missing.getMessage().contains("blockSize"), missing.getMessage());
    assertEquals(null, noBlockSize.kvEventSubscriber());
    OpenAiCompatibleEngine tinyLimit = OpenAiCompatibleEngine.builder().baseUrl(base())
        .kvEvents(io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber.builder()
            .endpoint("tcp://127.0.0.1:5557").blockSize(16).maxMessageBytes(10))
        .build();
    IllegalArgumentException outOfRange = assertThrows(IllegalArgumentException.class,
        () -> tinyLimit.setCacheEventListener(listener));
    assertTrue(outOfRange.getMessage().contains("maxMessageBytes"), outOfRange.getMessage());
    assertEquals(null, tinyLimit.kvEventSubscriber());
  }

  @Test
  void sendsTokenIdsAndParsesTextTokensAndCachedTokens() throws Exception {
    server.behaviour.set((ex, body) -> reply(ex, 200,
        "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\" B\","
            + "\"token_ids\":[426,13,198],\"finish_reason\":\"length\"}],"
            + "\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3,\"total_tokens\":7,"
            + "\"prompt_tokens_details\":{\"cached_tokens\":2}}}"));
    EngineResult r = engine().execute(request()).get(20, TimeUnit.SECONDS);
    assertEquals(" B", r.text());
    assertArrayEquals(new int[] {426, 13, 198}, r.outputTokens());
    assertEquals(4, r.promptTokens());
    assertEquals(2, r.cachedPromptTokens());
    Map<?, ?> sent = server.lastBody.get();
    assertEquals(List.of(101L, 7L, 7L, 9000L), sent.get("prompt"));
    assertEquals(3L, sent.get("max_tokens"));
    assertEquals(0.0, sent.get("temperature"));
    assertEquals(0.9, sent.get("top_p"));
    assertEquals(17L, sent.get("seed"));
    assertEquals("m", sent.get("model"));
    assertEquals(Boolean.TRUE, sent.get("return_token_ids"));
  }

  /** A server that rejects return_token_ids is sent none when the builder says so. */
  @Test
  void withoutReturnTokenIdsTheFieldIsNotSent() throws Exception {
    server.behaviour.set((ex, body) -> reply(ex, 200, "{\"choices\":[{\"text\":\" B\"}]}"));
    OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(base())
        .returnTokenIds(false).requestTimeout(Duration.ofSeconds(5)).build();
    assertEquals(" B", e.execute(request()).get(20, TimeUnit.SECONDS).text());
    assertFalse(server.lastBody.get().containsKey("return_token_ids"), "sent: " + server.lastBody.get());
    e.execute(request(), (t, x) -> { }).get(20, TimeUnit.SECONDS);
    assertEquals(Boolean.TRUE, server.lastBody.get().get("stream"));
    assertFalse(server.lastBody.get().containsKey("return_token_ids"), "streamed, sent: " + server.lastBody.get());
  }

  @Test
  void aScopedRequestNamesItsAdapterAsTheModelAndSendsItsSalt() throws Exception {
    String ok = "{\"choices\":[{\"index\":0,\"text\":\" B\",\"token_ids\":[1]}]}";
    server.behaviour.set((ex, body) -> reply(ex, 200, ok));
    OpenAiCompatibleEngine e = engine();
    e.execute(request().withScope(io.github.prefixrouter.CacheScope.of("sql-lora", "t\u00e9nant-1")))
        .get(20, TimeUnit.SECONDS);
    assertEquals("sql-lora", server.lastBody.get().get("model"));
    assertEquals("t\u00e9nant-1", server.lastBody.get().get("cache_salt"));
    e.execute(request().withScope(io.github.prefixrouter.CacheScope.salt("t2")))
        .get(20, TimeUnit.SECONDS);
    assertEquals("m", server.lastBody.get().get("model"), "the base model without an adapter");
    assertEquals("t2", server.lastBody.get().get("cache_salt"));
    e.execute(request()).get(20, TimeUnit.SECONDS);
    assertEquals("m", server.lastBody.get().get("model"));
    assertTrue(!server.lastBody.get().containsKey("cache_salt"), "no salt, no cache_salt");
  }

  @Test
  void cachedTokensAbsentMeansUnknownAndTextOnlyAnswersHaveNoTokens() throws Exception {
    // llama.cpp-like answer: no token ids, no prompt_tokens_details
    server.behaviour.set((ex, body) -> reply(ex, 200,
        "{\"choices\":[{\"text\":\"hello\",\"index\":0}],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1}}"));
    EngineResult r = engine().execute(request()).get(20, TimeUnit.SECONDS);
    assertEquals("hello", r.text());
    assertEquals(0, r.outputTokens().length);
    assertEquals(4, r.promptTokens());
    assertEquals(-1, r.cachedPromptTokens());
    // null details (SGLang without the option) also mean unknown
    server.behaviour.set((ex, body) -> reply(ex, 200,
        "{\"choices\":[{\"text\":\"x\"}],\"usage\":{\"prompt_tokens\":4,\"prompt_tokens_details\":null}}"));
    assertEquals(-1, engine().execute(request()).get(20, TimeUnit.SECONDS).cachedPromptTokens());
  }

  /**
   * vLLM started with {@code --enable-prompt-tokens-details} leaves {@code prompt_tokens_details}
   * out of an answer whose count is 0: once the server has reported a count, an answer with a
   * usage but no count is a complete miss, not an unknown. An answer without any usage says
   * nothing, and a server that never reported a count stays unknown.
   */
  @Test
  void cachedTokensLeftOutByAServerThatReportedThemAreZero() throws Exception {
    String without = "{\"choices\":[{\"index\":0,\"text\":\"x\"}],"
        + "\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1,\"total_tokens\":5}}";
    String nullDetails = "{\"choices\":[{\"index\":0,\"text\":\"x\"}],"
        + "\"usage\":{\"prompt_tokens\":4,\"prompt_tokens_details\":null}}";
    String reported = "{\"choices\":[{\"index\":0,\"text\":\"x\"}],"
        + "\"usage\":{\"prompt_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":2}}}";
    String noUsage = "{\"choices\":[{\"index\":0,\"text\":\"x\"}]}";
    OpenAiCompatibleEngine e = engine();
    server.behaviour.set((ex, body) -> reply(ex, 200, without));
    assertEquals(-1, e.execute(request()).get(20, TimeUnit.SECONDS).cachedPromptTokens(),
        "a server that never reported cached_tokens: unknown");
    server.behaviour.set((ex, body) -> reply(ex, 200, reported));
    assertEquals(2, e.execute(request()).get(20, TimeUnit.SECONDS).cachedPromptTokens());
    server.behaviour.set((ex, body) -> reply(ex, 200, without));
    assertEquals(0, e.execute(request()).get(20, TimeUnit.SECONDS).cachedPromptTokens(),
        "the server reported cached_tokens before and leaves them out only for 0 (as vLLM "
            + "does): the miss was read as unknown");
    server.behaviour.set((ex, body) -> reply(ex, 200, nullDetails));
    assertEquals(0, e.execute(request()).get(20, TimeUnit.SECONDS).cachedPromptTokens(),
        "null details after a report: a miss was read as unknown");
    server.behaviour.set((ex, body) -> reply(ex, 200, noUsage));
    assertEquals(-1, e.execute(request()).get(20, TimeUnit.SECONDS).cachedPromptTokens(),
        "an answer without usage says nothing of the cache");
    server.behaviour.set((ex, body) -> reply(ex, 200, without));
    assertEquals(-1, engine().execute(request()).get(20, TimeUnit.SECONDS).cachedPromptTokens(),
        "another adapter, whose server never reported a count: unknown");
  }

  /**
   * A connection refused after the server had answered says its process went away, and its
   * cache with it: the node's listener hears it once, however many requests are refused then,
   * and again only once the server has answered again (a health probe's answer and refusal count
   * as a completion's). A server that never answered (a node started before it) lost nothing.
   * The adapter also forgets that the server reported its cached tokens: the new process may
   * run without that option. A listener that throws changes nothing else.
   */
  @Test
  void aConnectionRefusedAfterAnAnswerIsOneLossOfTheCache() throws Exception {
    AtomicBoolean reports = new AtomicBoolean(true);
    FakeOpenAiServer.Answer answer = (prompt, maxTokens) -> "{\"choices\":[{\"index\":0,"
        + "\"text\":\"x\"}],\"usage\":{\"prompt_tokens\":" + prompt.length
        + (reports.get() ? ",\"prompt_tokens_details\":{\"cached_tokens\":2}" : "") + "}}";
    FakeOpenAiServer s = FakeOpenAiServer.start(answer);
    int port = s.port();
    s.close();
    List<String> losses = java.util.Collections.synchronizedList(new ArrayList<>());
    OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
        .baseUrl("http://127.0.0.1:" + port).requestTimeout(Duration.ofSeconds(5)).build();
    e.setCacheLossListener(losses::add);
    try {
      EngineException before = failure(e.execute(request()), "a refused connection");
      assertTrue(before.getMessage().contains("server unreachable"), before.getMessage());
      assertEquals(List.of(), losses, "a server that never answered lost nothing");

      s = FakeOpenAiServer.start(answer, port);
      assertEquals(2, e.execute(request()).get(20, TimeUnit.SECONDS).cachedPromptTokens());
      s.close();
      for (int i = 0; i < 3; i++) {
        assertTrue(failure(e.execute(request()), "a refused connection").retryable());
      }
      assertEquals(1, losses.size(), "one loss, however many requests are refused: " + losses);
      assertTrue(losses.get(0).contains("refused the connection after it had answered"),
          losses.get(0));

      // started again without the cached-token report
      reports.set(false);
      s = FakeOpenAiServer.start(answer, port);
      assertEquals(-1, e.execute(request()).get(20, TimeUnit.SECONDS).cachedPromptTokens(),
          "the new process has not reported its cached tokens: unknown");
      s.close();
      assertEquals(-1, e.healthStatus().get(20, TimeUnit.SECONDS));
      assertEquals(2, losses.size(), "a health probe refused after an answer: " + losses);

      s = FakeOpenAiServer.start(answer, port);
      assertEquals(200, e.healthStatus().get(20, TimeUnit.SECONDS));
      s.close();
      e.setCacheLossListener(why -> {
        throw new IllegalStateException("a listener that throws");
      });
      EngineException after = failure(e.execute(request()), "a refused connection");
      assertTrue(after.getMessage().contains("server unreachable"), after.getMessage());
      assertEquals(0, e.load().total(), "the refused request's slot is back");
    } finally {
      e.close();
      s.close();
    }
  }

  @Test
  void onlyAConnectExceptionOfAnAddressThatResolvedIsARefusal() {
    assertTrue(OpenAiCompatibleEngine.refused(new java.net.ConnectException()));
    java.net.ConnectException twice = new java.net.ConnectException();
    twice.initCause(new java.nio.channels.ClosedChannelException()); // JDK 17's client's report
    assertTrue(OpenAiCompatibleEngine.refused(twice));
    java.net.ConnectException unresolved = new java.net.ConnectException();
    unresolved.initCause(new java.nio.channels.UnresolvedAddressException());
    assertFalse(OpenAiCompatibleEngine.refused(unresolved), "a name that did not resolve");
    assertFalse(OpenAiCompatibleEngine.refused(
        new java.net.http.HttpConnectTimeoutException("connect timed out")), "a connect timeout");
    assertFalse(OpenAiCompatibleEngine.refused(new IOException("Connection reset")));
  }

  @Test
  void slowAnswerTimesOutNotRetryably() throws Exception {
    OpenAiCompatibleEngine e =
        OpenAiCompatibleEngine.builder().baseUrl(base()).requestTimeout(Duration.ofMillis(300)).build();
    // connect first: a request timeout that passes before the connection is made is reported
    // by the JDK as a connect timeout (server unreachable, retryable), as it should be. The
    // first exchanges of a JVM may take longer than 300 ms themselves.
    server.behaviour.set((ex, body) -> reply(ex, 200, "{\"choices\":[{\"text\":\"x\"}]}"));
    boolean connected = false;
    for (int i = 0; i < 20 && !connected; i++) {
      try {
        e.execute(request()).get(20, TimeUnit.SECONDS);
        connected = true;
      } catch (ExecutionException slow) {
        // try again
      }
    }
    assertTrue(connected, "no answer within 300 ms in 20 tries");
    server.behaviour.set((ex, body) -> server.awaitRelease());
    EngineException err = failure(e.execute(request()));
    // a generation that outlasts requestTimeout here would outlast it on a peer too
    assertInstanceOf(EngineTimeoutException.class, err, () -> err + " / " + err.getCause());
    assertFalse(err.retryable());
    assertTrue(err.getMessage().contains("no answer within 300 ms"), err.getMessage());
    assertEquals(0, e.load().total(), "in-flight counter released");
  }

  /**
   * The host's executor refuses work (bounded and full, or shut down) when a request's deadline
   * passes: the request still fails at its timeout, on the timer's thread, rather than never.
   */
  @Test
  void aRequestTimesOutWhenTheHostsExecutorRefusesWork() throws Exception {
    timesOutWhenTheHostsExecutorThrows(new RejectedExecutionException("the host's pool is full"));
  }

  /**
   * As {@link #aRequestTimesOutWhenTheHostsExecutorRefusesWork}, for an executor that throws
   * anything else as it is handed the work: a thread pool that cannot start a thread throws an
   * {@link OutOfMemoryError}. Only a {@link RejectedExecutionException} was run on the timer's
   * thread instead, so the request's timeout was lost: it was never answered, holding its slot.
   */
  @Test
  void aRequestTimesOutWhenTheHostsExecutorThrowsAnythingElse() throws Exception {
    timesOutWhenTheHostsExecutorThrows(
        new OutOfMemoryError("unable to create native thread: possibly out of memory"));
    timesOutWhenTheHostsExecutorThrows(new IllegalStateException("the host's pool is stopping"));
  }

  /**
   * A request whose answer's body stalls times out, when its host's executor throws
   * {@code thrown} as the timeout is handed to it.
   */
  private void timesOutWhenTheHostsExecutorThrows(Throwable thrown) throws Exception {
    ExecutorService pool = Executors.newCachedThreadPool();
    AtomicBoolean refuse = new AtomicBoolean();
    Executor host = r -> {
      if (refuse.get()) {
        if (thrown instanceof Error error) {
          throw error;
        }
        throw (RuntimeException) thrown;
      }
      pool.execute(r);
    };
    try {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(base()).executor(host)
          .requestTimeout(Duration.ofMillis(500)).build();
      server.behaviour.set((ex, body) -> reply(ex, 200, "{\"choices\":[{\"text\":\"x\"}]}"));
      e.execute(request()).get(20, TimeUnit.SECONDS); // connected
      // the answer's headers come, then its body stalls: the adapter's own deadline applies
      server.behaviour.set((ex, body) -> {
        ex.getResponseHeaders().add("Content-Type", "application/json");
        ex.sendResponseHeaders(200, 0);
        ex.getResponseBody().flush();
        server.awaitRelease();
      });
      CompletableFuture<EngineResult> f = e.execute(request());
      Thread.sleep(200); // the headers have arrived
      refuse.set(true);
      EngineException err = failure(f, "the request's timeout, the host's executor throwing "
          + thrown);
      assertInstanceOf(EngineTimeoutException.class, err, () -> err + " / " + err.getCause());
      assertEquals(0, e.load().total(), "in-flight counter released");
    } finally {
      refuse.set(false);
      pool.shutdownNow();
    }
  }

  @Test
  void httpErrorsMapToRetryableOrNot() {
    // 404 and 405 depend on their body and the request: see the tests below
    int[] statuses = {429, 503, 500, 502, 408, 401, 403, 400, 413, 422};
    boolean[] retryable = {true, true, true, true, true, true, true, false, false, false};
    for (int i = 0; i < statuses.length; i++) {
      int s = statuses[i];
      server.behaviour.set((ex, body) -> reply(ex, s, "{\"error\":{\"message\":\"boom " + s + "\"}}"));
      EngineException err = failure(engine().execute(request()));
      assertEquals(retryable[i], err.retryable(), "status " + s);
      // a client error other than a timeout, overload or refused credentials: the request is
      // invalid, and says so by its type
      assertEquals(!retryable[i], err instanceof InvalidRequestException, s + ": " + err);
      assertTrue(err.getMessage().contains("HTTP " + s) && err.getMessage().contains("boom"), err.getMessage());
      // the status itself, typed: a caller tells a refused key from other failures by it
      assertEquals(java.util.OptionalInt.of(s), err.httpStatus(), "status " + s + ": " + err);
      EngineException streamed = failure(engine().execute(request(), (t, text) -> { }));
      assertEquals(java.util.OptionalInt.of(s), streamed.httpStatus(), "streamed " + s + ": " + streamed);
    }
  }

  /** A failure that is no HTTP answer's status has none: no answer, or a malformed 200. */
  @Test
  void aFailureWithoutAnErrorStatusHasNoHttpStatus() throws Exception {
    server.behaviour.set((ex, body) -> reply(ex, 200, "{\"choices\": 7}"));
    EngineException malformed = failure(engine().execute(request()));
    assertTrue(malformed.httpStatus().isEmpty(), malformed + ": " + malformed.httpStatus());
    int port;
    try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
      port = s.getLocalPort();
    }
    try (OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
        .baseUrl("http://127.0.0.1:" + port).build()) {
      EngineException refused = failure(e.execute(request()));
      assertTrue(refused.httpStatus().isEmpty(), refused + ": " + refused.httpStatus());
    }
  }

  /**
   * A 404 or 405 that is not the server's word on the request's model says the completions
   * endpoint is not where the node posts (a base URL with a path the server lacks, a proxy
   * without the route, a server without {@code /v1/completions}): every request would fail so,
   * so it is not the request's fault but this server's, retryable (a peer may serve it), and the
   * message names the URL and the base URL to check. It used to be an invalid request: every
   * client got a 400 and no peer was tried.
   */
  @ParameterizedTest
  @ValueSource(strings = {
      "404 {\"detail\":\"Not Found\"}",
      "404 <html><head><title>404 Not Found</title></head><body>nginx</body></html>",
      "404 ",
      "404 {\"error\":{\"message\":\"Invalid URL (POST /v1/completions)\","
          + "\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}",
      "404 {\"message\":\"no Route matched with those values\"}",
      "405 {\"detail\":\"Method Not Allowed\"}",
      "405 {\"object\":\"error\",\"message\":\"The model `m` does not exist.\"}"})
  void aMissingEndpointIsTheServersFaultNotTheRequests(String answer) {
    int status = Integer.parseInt(answer.substring(0, 3));
    String body = answer.substring(4);
    server.behaviour.set((ex, b) -> reply(ex, status, body));
    for (boolean streamed : new boolean[] {false, true}) {
      for (InferenceRequest r : List.of(request(),
          request().withScope(io.github.prefixrouter.CacheScope.adapter("sql-lora")))) {
        EngineException err = failure(streamed ? engine().execute(r, (t, text) -> { })
            : engine().execute(r));
        assertFalse(err instanceof InvalidRequestException, answer + ": " + err);
        assertTrue(err.retryable(), err.getMessage());
        assertEquals(java.util.OptionalInt.of(status), err.httpStatus(), answer + ": " + err);
        assertTrue(err.getMessage().contains("HTTP " + status)
            && err.getMessage().contains(base() + "/v1/completions")
            && err.getMessage().contains("base URL"), err.getMessage());
      }
    }
  }

  /**
   * A 404 in OpenAI's error shape naming the model (vLLM's {@code "The model `x` does not
   * exist."}, old and new shapes; OpenAI's {@code model_not_found}) refuses the model the request
   * named: a client's LoRA adapter the server does not serve is an invalid request (400, no peer
   * tried), while the base model is the one this node sends for every request, so a server that
   * lacks it is misconfigured for this node: retryable, saying so.
   */
  @ParameterizedTest
  @ValueSource(strings = {
      "{\"object\":\"error\",\"message\":\"The model `x` does not exist.\","
          + "\"type\":\"NotFoundError\",\"param\":null,\"code\":404}",
      "{\"error\":{\"message\":\"The model `x` does not exist.\",\"type\":\"NotFoundError\","
          + "\"param\":null,\"code\":404}}",
      "{\"error\":{\"message\":\"not available\",\"type\":\"invalid_request_error\","
          + "\"param\":null,\"code\":\"model_not_found\"}}"})
  void aModelNotFoundIsTheRequestsFaultOnlyForAnAdapter(String body) {
    server.behaviour.set((ex, b) -> reply(ex, 404, body));
    for (boolean streamed : new boolean[] {false, true}) {
      InferenceRequest lora = request().withScope(io.github.prefixrouter.CacheScope.adapter("sql-lora"));
      EngineException invalid = failure(streamed ? engine().execute(lora, (t, text) -> { })
          : engine().execute(lora));
      assertInstanceOf(InvalidRequestException.class, invalid, () -> body + ": " + invalid);
      assertTrue(invalid.getMessage().contains("HTTP 404"), invalid.getMessage());
      assertEquals(java.util.OptionalInt.of(404), invalid.httpStatus(), body);
      EngineException base = failure(streamed ? engine().execute(request(), (t, text) -> { })
          : engine().execute(request()));
      assertFalse(base instanceof InvalidRequestException, body + ": " + base);
      assertTrue(base.retryable(), base.getMessage());
      assertEquals(java.util.OptionalInt.of(404), base.httpStatus(), body);
      assertTrue(base.getMessage().contains("HTTP 404")
          && base.getMessage().contains("model 'm'"), base.getMessage());
    }
  }

  /**
   * With {@code apiKey}, the health probe and every completion, plain or streamed, carry
   * {@code Authorization: Bearer <key>}; a key the server refuses (401) fails the request as
   * retryable (a peer's server has its own key), the message naming the status, never the key.
   */
  @Test
  void theApiKeyGoesWithEveryCallAndARefusalNeverShowsIt() throws Exception {
    try (FakeOpenAiServer fake = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      fake.requireApiKey("sk-right-42");
      try (OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(fake.baseUrl())
          .apiKey("sk-right-42").requestTimeout(Duration.ofSeconds(5)).build()) {
        assertTrue(e.health().get(20, TimeUnit.SECONDS));
        assertEquals(3, e.execute(request()).get(20, TimeUnit.SECONDS).outputTokens().length);
        assertEquals(3, e.execute(request(), (t, text) -> { }).get(20, TimeUnit.SECONDS)
            .outputTokens().length);
      }
      assertEquals(List.of("/health ok", "/v1/models ok", "/v1/completions ok", "/v1/completions ok"),
          fake.requests());
      try (OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(fake.baseUrl())
          .apiKey("sk-wrong-17").requestTimeout(Duration.ofSeconds(5)).build()) {
        assertFalse(e.health().get(20, TimeUnit.SECONDS));
        for (boolean streamed : new boolean[] {false, true}) {
          EngineException err = failure(streamed ? e.execute(request(), (t, text) -> { })
              : e.execute(request()));
          assertTrue(err.retryable(), err.getMessage());
          assertTrue(err.getMessage().contains("HTTP 401"), err.getMessage());
          assertTrue(err.getMessage().contains("the model server refuses the API key the node "
              + "sends"), err.getMessage());
          assertFalse(err.getMessage().contains("sk-wrong-17"), err.getMessage());
        }
        assertFalse(e.toString().contains("sk-wrong-17"), e.toString());
      }
      try (OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(fake.baseUrl())
          .requestTimeout(Duration.ofSeconds(5)).build()) {
        EngineException err = failure(e.execute(request()));
        assertTrue(err.getMessage().contains("HTTP 401") && err.getMessage().contains(
            "the model server refuses requests without an API key"), err.getMessage());
      }
    }
  }

  /**
   * vLLM answers {@code /health} without its key and guards {@code /v1}: the probe then asks
   * {@code GET /v1/models} too, with the key, and reports its 401 (a wrong key, or none), so
   * that the health check shows a key every completion would be refused with. It used to
   * report {@code /health}'s 200: healthy.
   */
  @Test
  void theHealthStatusShowsAKeyRefusedBehindAnOpenHealthCheck() throws Exception {
    try (FakeOpenAiServer fake = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      fake.requireApiKey("sk-right-42");
      fake.healthOpen(true);
      for (String key : new String[] {"sk-wrong-17", null}) {
        try (OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(fake.baseUrl())
            .apiKey(key).requestTimeout(Duration.ofSeconds(5)).build()) {
          assertEquals(401, e.healthStatus().get(20, TimeUnit.SECONDS), "key " + key);
          assertFalse(e.health().get(20, TimeUnit.SECONDS), "key " + key);
        }
      }
      try (OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(fake.baseUrl())
          .apiKey("sk-right-42").requestTimeout(Duration.ofSeconds(5)).build()) {
        assertEquals(200, e.healthStatus().get(20, TimeUnit.SECONDS));
      }
    }
  }

  /**
   * Only a 401 or 403 of {@code GET /v1/models} overrides {@code /health}'s 2xx: a server without
   * that path (404), or failing it, is as healthy as its health check says.
   */
  @Test
  void theModelsProbeOverridesAHealthyCheckOnlyWithARefusedKey() throws Exception {
    for (int models : new int[] {404, 500, 503}) {
      server.modelsStatus = models;
      assertEquals(200, engine().healthStatus().get(10, TimeUnit.SECONDS), "models " + models);
    }
    for (int models : new int[] {401, 403}) {
      server.modelsStatus = models;
      assertEquals(models, engine().healthStatus().get(10, TimeUnit.SECONDS), "models " + models);
    }
    server.healthStatus = 503; // a failing health check is not asked further
    assertEquals(503, engine().healthStatus().get(10, TimeUnit.SECONDS));
  }

  @Test
  void aPromptBeyondTheContextIsAnInvalidRequestWithTheServersMessage() {
    // vLLM's answer to a prompt longer than --max-model-len
    String vllm = "{\"object\":\"error\",\"message\":\"This model's maximum context length is 50"
        + " tokens. However, you requested 103 tokens (100 in the messages, 3 in the completion)."
        + " Please reduce the length of the messages or completion.\",\"type\":\"BadRequestError\","
        + "\"param\":null,\"code\":400}";
    server.behaviour.set((ex, body) -> reply(ex, 400, vllm));
    EngineException err = failure(engine().execute(request()));
    assertInstanceOf(InvalidRequestException.class, err);
    assertFalse(err.retryable());
    assertTrue(err.getMessage().contains("maximum context length is 50 tokens"), err.getMessage());
  }

  @Test
  void malformedOrMisshapenAnswersAreTypedErrors() {
    String[] bodies = {
        "{\"choices\":[{\"text\":\"x\"}", // truncated
        "not json",
        "{\"choices\":[]}",
        "{\"choices\":[{\"text\":5}]}",
        "{\"choices\":[{\"text\":\"x\",\"token_ids\":[\"a\"]}]}",
        "{\"choices\":[{\"text\":\"x\"}],\"usage\":{\"prompt_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":9}}}",
        "{\"choices\":[{\"text\":\"x\"}],\"usage\":{\"prompt_tokens\":-1}}",
        "[" .repeat(100) + "]".repeat(100),
    };
    for (String b : bodies) {
      server.behaviour.set((ex, body) -> reply(ex, 200, b));
      EngineException err = failure(engine().execute(request()));
      assertTrue(err.retryable(), b);
    }
  }

  @Test
  void anAnswerPastMaxTokensOrWithANegativeTokenIdIsARetryableFailure() {
    // such an answer used to pass as the request's output
    for (String ids : List.of("[426,13,198,11]", "[426,-1]")) {
      server.behaviour.set((ex, body) -> reply(ex, 200,
          "{\"choices\":[{\"index\":0,\"text\":\" B\",\"token_ids\":" + ids + "}]}"));
      EngineException plain = failure(engine().execute(request()));
      assertTrue(plain.retryable(), plain::toString);
      assertTrue(plain.getMessage().contains(ids.contains("-") ? "-1" : "max_tokens 3"),
          plain.getMessage());
      // a streamed request the server answers with a plain JSON answer: no piece either
      List<String> pieces = new java.util.concurrent.CopyOnWriteArrayList<>();
      assertTrue(failure(engine().execute(request(), (t, text) -> pieces.add(text))).retryable());
      assertEquals(List.of(), pieces);
    }
  }

  @Test
  void oversizedAnswerIsRefused() {
    server.behaviour.set((ex, body) -> reply(ex, 200, "{\"choices\":[{\"text\":\"" + "x".repeat(5000) + "\"}]}"));
    OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(base()).maxResponseBytes(1024).build();
    EngineException err = failure(e.execute(request()));
    assertTrue(err.getMessage().contains("larger than 1024"), err.getMessage());
  }

  /**
   * An answer of tiny values takes tens of bytes of heap a character once parsed (8 MiB of
   * {@code [{},{},...]}, within the default limit, about 260 MB; a few at once exhaust the heap):
   * its parse is bounded at 16 MiB plus 6 bytes a character and refused, retryable, naming the
   * limit. An answer of token ids, the densest shape real answers have (12 bytes for an id of
   * one digit and its comma), is not refused, beyond the 16 MiB as well.
   */
  @Test
  void anAnswerOfTinyValuesIsRefusedAsItIsParsedOneOfTokenIdsIsNot() throws Exception {
    String tiny = "{\"choices\":[{\"index\":0,\"text\":\"a\",\"token_ids\":[5],\"extra\":["
        + "{},".repeat(400_000) + "{}]}]}";
    server.behaviour.set((ex, body) -> reply(ex, 200, tiny));
    OpenAiCompatibleEngine e = engine();
    EngineException err = failure(e.execute(request()));
    assertTrue(err.retryable(), err.toString());
    assertTrue(err.getMessage().contains("more than " + ((16L << 20) + 6L * tiny.length())
        + " bytes of heap once parsed"), err.getMessage());
    // a server that echoes a prompt of 2 million ids of one digit: 24 MiB charged
    String ids = "{\"choices\":[{\"index\":0,\"text\":\"a\",\"token_ids\":[5],"
        + "\"prompt_token_ids\":[" + "7,".repeat(2_000_000) + "7]}]}";
    server.behaviour.set((ex, body) -> reply(ex, 200, ids));
    EngineResult r = e.execute(request()).get(20, TimeUnit.SECONDS);
    assertEquals("a", r.text());
    assertArrayEquals(new int[] {5}, r.outputTokens());
    assertEquals(0, e.load().total());
  }

  /** docs/engines.md states the parse's bound and the wait after a finish_reason as they are. */
  @Test
  void theParseBoundAndTheWaitAfterAFinishReasonAreTheDocumentedOnes() throws IOException {
    String doc = java.nio.file.Files.readString(java.nio.file.Path.of("docs", "engines.md"))
        .replaceAll("\\s+", " ");
    assertEquals(16L << 20, io.github.prefixrouter.internal.json.AnswerHeap.BASE_BYTES);
    assertEquals(6, io.github.prefixrouter.internal.json.AnswerHeap.PER_CHAR);
    assertTrue(doc.contains("16 MiB plus 6 bytes per character of the answer or chunk"));
    assertEquals(1000, OpenAiCompatibleEngine.AFTER_DONE_MILLIS);
    assertTrue(doc.contains("1 s after choice 0's `finish_reason` when no `[DONE]` has come"));
    assertTrue(doc.contains("closed 1 s after `[DONE]`"));
  }

  @Test
  void anErrorStatusMapsByItsStatusWhateverTheSizeOfItsBody() throws Exception {
    // a proxy's or server's error page larger than maxResponseBytes: the status still says
    // what happened (overloaded, invalid request, bad gateway), whether streamed or not
    String page = "<html><body>" + "<p>error</p>".repeat(500) + "</body></html>";
    OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(base())
        .maxResponseBytes(1024).build();
    for (int s : new int[] {429, 503, 400, 502}) {
      server.behaviour.set((ex, body) -> {
        byte[] b = page.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        ex.getResponseHeaders().add("Content-Type", "text/html");
        ex.sendResponseHeaders(s, b.length);
        ex.getResponseBody().write(b);
      });
      for (boolean streamed : new boolean[] {false, true}) {
        EngineException err = failure(streamed
            ? e.execute(request(), (tokens, text) -> { }) : e.execute(request()));
        String what = s + (streamed ? " streamed: " : ": ") + err;
        assertTrue(err.getMessage().contains("HTTP " + s), what);
        assertEquals(s == 429 || s == 503, err instanceof io.github.prefixrouter.spi.EngineBusyException, what);
        assertEquals(s == 400, err instanceof InvalidRequestException, what);
        assertEquals(s != 400, err.retryable(), what);
      }
    }
    assertEquals(0, e.load().total());
  }

  @Test
  void unreachableServerIsRetryable() throws Exception {
    int port;
    try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
      port = s.getLocalPort();
    }
    OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl("http://127.0.0.1:" + port).build();
    assertTrue(failure(e.execute(request())).retryable());
  }

  @Test
  void loadCountsInFlightAndExcessRequestsAreBusy() throws Exception {
    CountDownLatch arrived = new CountDownLatch(2);
    server.behaviour.set((ex, body) -> {
      arrived.countDown();
      server.awaitRelease();
      reply(ex, 200, "{\"choices\":[{\"text\":\"ok\"}]}");
    });
    OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(base()).maxInFlight(2).build();
    CompletableFuture<EngineResult> f1 = e.execute(request());
    CompletableFuture<EngineResult> f2 = e.execute(new InferenceRequest("r2", new int[] {1}, GenerationParams.DEFAULT));
    assertTrue(arrived.await(10, TimeUnit.SECONDS));
    assertEquals(2, e.load().inFlight());
    EngineException busy = failure(e.execute(new InferenceRequest("r3", new int[] {1}, GenerationParams.DEFAULT)));
    assertTrue(busy.retryable() && busy.getMessage().contains("busy"), busy.getMessage());
    server.release.countDown();
    assertEquals("ok", f1.get(10, TimeUnit.SECONDS).text());
    assertEquals("ok", f2.get(10, TimeUnit.SECONDS).text());
    assertEquals(0, e.load().total());
  }

  @Test
  void requestsBeyondTheSlotsAreReportedAsQueueDepthAndBeyondMaxInFlightAsBusy() throws Exception {
    CountDownLatch arrived = new CountDownLatch(5);
    server.behaviour.set((ex, body) -> {
      arrived.countDown();
      server.awaitRelease();
      reply(ex, 200, "{\"choices\":[{\"text\":\"ok\"}]}");
    });
    // a server running 2 requests at once (vLLM --max-num-seqs 2); 5 outstanding at most
    OpenAiCompatibleEngine e =
        OpenAiCompatibleEngine.builder().baseUrl(base()).slots(2).maxInFlight(5).build();
    List<CompletableFuture<EngineResult>> held = new java.util.ArrayList<>();
    for (int i = 0; i < 5; i++) {
      held.add(e.execute(new InferenceRequest("q" + i, new int[] {1, i}, GenerationParams.DEFAULT)));
      assertEquals(new io.github.prefixrouter.spi.EngineLoad(Math.max(0, i - 1), Math.min(i + 1, 2)),
          e.load(), "after " + (i + 1) + " requests");
    }
    assertTrue(arrived.await(10, TimeUnit.SECONDS), "every outstanding request reaches the server");
    EngineException busy = failure(e.execute(new InferenceRequest("q5", new int[] {1}, GenerationParams.DEFAULT)));
    assertTrue(busy instanceof io.github.prefixrouter.spi.EngineBusyException, busy.toString());
    assertTrue(busy.retryable());
    assertEquals(new io.github.prefixrouter.spi.EngineLoad(3, 2), e.load(), "a refused request is not counted");
    server.release.countDown();
    for (CompletableFuture<EngineResult> f : held) {
      assertEquals("ok", f.get(10, TimeUnit.SECONDS).text());
    }
    assertEquals(io.github.prefixrouter.spi.EngineLoad.IDLE, e.load());
  }

  /**
   * A request refused at {@code maxInFlight} never left the node: the adapter's own limit was
   * reached, and the server is not failing. The node, with no peer to try them on, fails such
   * requests as busy (the refusal their cause), but neither counts them towards
   * {@code engineFailureLimit} (3) nor takes its engine for failing and routes around it. They
   * were counted: three such refusals in a row, and the node declared its healthy engine failing.
   */
  @Test
  void refusalsAtMaxInFlightAreNoFailuresOfTheEngineForTheNode() throws Exception {
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      server.hold();
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(server.baseUrl())
          .slots(1).maxInFlight(2).requestTimeout(Duration.ofSeconds(60)).build();
      RouterConfig config = RouterConfig.defaults();
      PrefixRouterNode node = LoneNode.started(e, config);
      try {
        List<CompletableFuture<InferenceResponse>> held = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
          held.add(node.submit(new InferenceRequest("h" + i, new int[] {1, 2, i},
              GenerationParams.DEFAULT)));
        }
        assertTrue(server.awaitArrived(2, Duration.ofSeconds(20)), "the held requests");
        int refused = 2 * config.engineFailureLimit();
        for (int i = 0; i < refused; i++) {
          CompletableFuture<InferenceResponse> f = node.submit(new InferenceRequest("r" + i,
              new int[] {3, 4, i}, GenerationParams.DEFAULT));
          ExecutionException x = assertThrows(ExecutionException.class,
              () -> f.get(20, TimeUnit.SECONDS));
          RequestFailedException failed =
              assertInstanceOf(RequestFailedException.class, x.getCause());
          EngineBusyException busy = assertInstanceOf(EngineBusyException.class,
              failed.getCause(), "a request beyond maxInFlight is busy: " + failed);
          assertTrue(busy.getMessage().contains("already in flight"), busy.getMessage());
        }
        assertEquals(2, server.arrived(), "a request refused at maxInFlight reached the server");
        EngineStallStats s = node.engineStallStats().orElseThrow();
        assertEquals(0, s.failedInARow(), refused + " requests refused at maxInFlight were "
            + "counted as failures of the engine in a row: " + s);
        assertEquals(0, s.failing(), "the node took its healthy engine for failing after "
            + refused + " refusals at maxInFlight: " + s);
        RouteDecision d = node.explain(new InferenceRequest("next", new int[] {5, 6},
            GenerationParams.DEFAULT));
        assertNotEquals(RouteDecision.Reason.LOCAL_ENGINE_FAILING, d.reason(),
            "the node's decisions route around its healthy engine after refusals at "
                + "maxInFlight: " + d);
        server.release();
        for (CompletableFuture<InferenceResponse> f : held) {
          assertEquals("a", f.get(20, TimeUnit.SECONDS).servedBy());
        }
      } finally {
        server.release();
        node.close();
        e.close();
      }
    }
  }

  @Test
  void serverOverloadAnswersAreBusyOtherFailuresAreNot() {
    for (int s : new int[] {429, 503}) {
      server.behaviour.set((ex, body) -> reply(ex, s, "{\"error\":{\"message\":\"overloaded\"}}"));
      EngineException err = failure(engine().execute(request()));
      assertTrue(err instanceof io.github.prefixrouter.spi.EngineBusyException, s + ": " + err);
      assertTrue(err.retryable() && err.getMessage().contains("HTTP " + s), err.getMessage());
    }
    for (int s : new int[] {500, 502, 400}) {
      server.behaviour.set((ex, body) -> reply(ex, s, "{}"));
      EngineException err = failure(engine().execute(request()));
      assertFalse(err instanceof io.github.prefixrouter.spi.EngineBusyException, s + ": " + err);
    }
  }

  @Test
  void aCompletedRequestsSlotIsFreeWhenItsFutureCompletes() throws Exception {
    // the node reads load() in its completion callbacks and may submit the next request from
    // them: the slot of the request that completed must be free there, streamed or not
    server.behaviour.set((ex, body) -> reply(ex, 200, "{\"choices\":[{\"text\":\"x\",\"token_ids\":[1]}]}"));
    OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(base()).maxInFlight(1).build();
    for (boolean streamed : new boolean[] {false, true}) {
      CompletableFuture<CompletableFuture<EngineResult>> next = new CompletableFuture<>();
      int[] seen = {-1};
      CompletableFuture<EngineResult> f = streamed ? e.execute(request(), (t, x) -> { }) : e.execute(request());
      f.whenComplete((r, x) -> {
        seen[0] = e.load().total();
        next.complete(e.execute(request()));
      });
      assertEquals("x", f.get(20, TimeUnit.SECONDS).text());
      assertEquals("x", next.get(20, TimeUnit.SECONDS).get(20, TimeUnit.SECONDS).text(),
          "the next request, submitted as the first completed, found its slot taken");
      assertEquals(0, seen[0], "load() in the future's callback");
    }
  }

  @Test
  void slotsAndMaxInFlightDefaultsAndChecks() {
    OpenAiCompatibleEngine d = OpenAiCompatibleEngine.builder().baseUrl(base()).build();
    assertEquals(256, d.slots());
    assertEquals(512, d.maxInFlight());
    OpenAiCompatibleEngine s = OpenAiCompatibleEngine.builder().baseUrl(base()).slots(8).build();
    assertEquals(16, s.maxInFlight());
    OpenAiCompatibleEngine m = OpenAiCompatibleEngine.builder().baseUrl(base()).maxInFlight(2).build();
    assertEquals(2, m.slots(), "a cap below the default slots is all running");
    assertThrows(IllegalArgumentException.class,
        () -> OpenAiCompatibleEngine.builder().baseUrl(base()).slots(0).build());
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> OpenAiCompatibleEngine.builder().baseUrl(base()).slots(8).maxInFlight(4).build());
    assertTrue(e.getMessage().contains("slots"), e.getMessage());
  }

  @Test
  void cancelFailsThePendingFutureOnce() throws Exception {
    CountDownLatch arrived = new CountDownLatch(1);
    server.behaviour.set((ex, body) -> {
      arrived.countDown();
      server.awaitRelease();
    });
    OpenAiCompatibleEngine e = engine();
    CompletableFuture<EngineResult> f = e.execute(request());
    assertTrue(arrived.await(10, TimeUnit.SECONDS));
    e.cancel("r1");
    assertFalse(failure(f).retryable());
    assertEquals(0, e.load().total());
  }

  @Test
  void cancelReachesEveryRunOfTheIdAlsoOneStartedBeforeAnotherOfTheSameId() throws Exception {
    // ids are unique per origin only: two runs of one id may overlap here. The node cancels an
    // id once the other run is over; the run still going must then be cancelled.
    CountDownLatch firstArrived = new CountDownLatch(1);
    server.behaviour.set((ex, body) -> {
      if (((Number) body.get("max_tokens")).intValue() == 3) {
        firstArrived.countDown();
        server.awaitRelease(); // the long run
      } else {
        reply(ex, 200, "{\"choices\":[{\"text\":\"x\",\"token_ids\":[1]}]}");
      }
    });
    OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(base())
        .requestTimeout(Duration.ofSeconds(60)).build();
    CompletableFuture<EngineResult> first = e.execute(request());
    assertTrue(firstArrived.await(10, TimeUnit.SECONDS));
    InferenceRequest sameId = new InferenceRequest("r1", new int[] {1, 2}, GenerationParams.greedy(4));
    assertEquals("x", e.execute(sameId).get(20, TimeUnit.SECONDS).text());
    e.cancel("r1");
    // the cancel completes it on this thread, or on the HTTP client's thread that the closed
    // connection wakes, which may run the future's last callbacks while cancel returns
    try {
      first.handle((r, t) -> null).get(5, TimeUnit.SECONDS);
    } catch (java.util.concurrent.TimeoutException notCancelled) {
      fail("the first run of r1 was not cancelled");
    }
    EngineException err = failure(first);
    assertFalse(err.retryable());
    assertTrue(err.getMessage().contains("cancelled"), err.getMessage());
    assertEquals(0, e.load().total());
  }

  @Test
  void cancelClosesTheConnectionSoTheServerAbortsTheRequest() throws Exception {
    // vLLM aborts a request whose client disconnects: a cancel that only stopped waiting would
    // leave the server generating for nobody. A raw server sees the connection end.
    try (java.net.ServerSocket raw = new java.net.ServerSocket(0, 1,
        java.net.InetAddress.getLoopbackAddress())) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl("http://127.0.0.1:" + raw.getLocalPort()).requestTimeout(Duration.ofSeconds(60))
          .build();
      CompletableFuture<EngineResult> f = e.execute(request());
      raw.setSoTimeout(10_000);
      try (java.net.Socket conn = raw.accept()) {
        java.io.InputStream in = ScriptedOpenAiServer.readRequest(conn);
        assertFalse(f.isDone());
        // the request is being generated: the node gives up on it
        e.cancel("r1");
        assertFalse(failure(f).retryable());
        int after;
        try {
          after = in.read();
        } catch (java.net.SocketTimeoutException t) {
          throw new AssertionError("the connection stayed open 10 s after cancel", t);
        } catch (java.net.SocketException reset) {
          after = -1; // reset: closed as well
        }
        assertEquals(-1, after, "the client sent more instead of closing");
      }
      assertEquals(0, e.load().total());
    }
  }

  /**
   * A caller that cancels the future {@code execute} gave it ends the request as {@link
   * OpenAiCompatibleEngine#cancel} does: the connection is closed, so that vLLM aborts the
   * generation, and the request's slot is free, streamed or not.
   */
  @ParameterizedTest(name = "streamed: {0}")
  @ValueSource(booleans = {false, true})
  void cancellingTheFutureClosesTheConnectionAndFreesTheSlot(boolean streamed) throws Exception {
    try (java.net.ServerSocket raw = new java.net.ServerSocket(0, 1,
        java.net.InetAddress.getLoopbackAddress());
        OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
            .baseUrl("http://127.0.0.1:" + raw.getLocalPort())
            .requestTimeout(Duration.ofSeconds(60)).build()) {
      CompletableFuture<EngineResult> f = streamed
          ? e.execute(request(), (t, x) -> { }) : e.execute(request());
      raw.setSoTimeout(10_000);
      try (java.net.Socket conn = raw.accept()) {
        java.io.InputStream in = ScriptedOpenAiServer.readRequest(conn);
        assertEquals(1, e.load().total());
        assertTrue(f.cancel(true));
        int after;
        try {
          after = in.read();
        } catch (java.net.SocketTimeoutException t) {
          throw new AssertionError("the connection stayed open 10 s after the cancel", t);
        } catch (java.net.SocketException reset) {
          after = -1; // reset: closed as well
        }
        assertEquals(-1, after, "the client sent more instead of closing");
      }
      assertEquals(0, e.load().total());
      assertEquals(0, e.stats().inFlight());
    }
  }

  @Test
  void healthChecksHealthThenModels() throws Exception {
    assertTrue(engine().health().get(10, TimeUnit.SECONDS));
    server.healthStatus = 404; // no /health: falls back to /v1/models
    assertTrue(engine().health().get(10, TimeUnit.SECONDS));
    server.healthStatus = 503;
    assertFalse(engine().health().get(10, TimeUnit.SECONDS));
    server.stop();
    assertFalse(engine().health().get(10, TimeUnit.SECONDS));
  }

  @Test
  void aRequestTimeoutWrittenAsNeverStillAnswersEveryRequest() throws Exception {
    // the JDK's HTTP client fails a request whose timeout is beyond what its clock adds up
    // (ArithmeticException, DateTimeException), and one near 2^63 ms stalls its selector: that
    // request never completes and the client refuses every request after it
    server.behaviour.set((ex, body) -> reply(ex, 200,
        "{\"choices\":[{\"index\":0,\"text\":\" B\",\"token_ids\":[426]}]}"));
    for (Duration never : List.of(Duration.ofSeconds(Long.MAX_VALUE), Duration.ofDays(1L << 40),
        Duration.ofMillis(Long.MAX_VALUE), java.time.temporal.ChronoUnit.FOREVER.getDuration())) {
      OpenAiCompatibleEngine e =
          OpenAiCompatibleEngine.builder().baseUrl(base()).requestTimeout(never).build();
      for (int i = 0; i < 2; i++) {
        EngineResult r = e.execute(request()).get(10, TimeUnit.SECONDS);
        assertEquals(" B", r.text(), never::toString);
        EngineResult streamed = e.execute(request(), (t, text) -> { }).get(10, TimeUnit.SECONDS);
        assertEquals(" B", streamed.text(), never::toString);
        assertTrue(e.health().get(10, TimeUnit.SECONDS), never::toString);
      }
      assertEquals(0, e.load().total());
    }
  }

  @Test
  void aConnectTimeoutWrittenAsNeverStillConnects() throws Exception {
    // the JDK's HTTP client failed every connection of such a timeout (ArithmeticException,
    // DateTimeException), which the adapter reported as a server unreachable
    server.behaviour.set((ex, body) -> reply(ex, 200,
        "{\"choices\":[{\"index\":0,\"text\":\" B\",\"token_ids\":[426]}]}"));
    for (Duration never : List.of(Duration.ofSeconds(Long.MAX_VALUE), Duration.ofDays(1L << 40),
        Duration.ofMillis(Long.MAX_VALUE))) {
      OpenAiCompatibleEngine e =
          OpenAiCompatibleEngine.builder().baseUrl(base()).connectTimeout(never).build();
      assertEquals(" B", e.execute(request()).get(10, TimeUnit.SECONDS).text(), never::toString);
      assertTrue(e.health().get(10, TimeUnit.SECONDS), never::toString);
    }
  }

  @Test
  void invalidConfigurationIsRejected() {
    assertThrows(IllegalArgumentException.class, () -> OpenAiCompatibleEngine.builder().build());
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> OpenAiCompatibleEngine.builder().baseUrl("ftp://x").build());
    assertTrue(e.getMessage().contains("http"), e.getMessage());
    assertThrows(IllegalArgumentException.class,
        () -> OpenAiCompatibleEngine.builder().baseUrl(base()).maxInFlight(0).build());
    assertThrows(IllegalArgumentException.class,
        () -> OpenAiCompatibleEngine.builder().baseUrl(base()).requestTimeout(Duration.ZERO).build());
    assertEquals(base() + "/v1/completions",
        OpenAiCompatibleEngine.builder().baseUrl(base() + "/v1/").build().completionsUri().toString());
  }

  /**
   * An IPv6 address without brackets ({@code http://::1:8000}) reads as a URL without a host:
   * it was refused as "an http(s) URL with a host", which did not say how to write it.
   */
  @Test
  void anIpv6AddressWithoutBracketsIsRejectedSayingToBracketIt() {
    for (String url : List.of("http://::1:8000", "http://fd00::2:8000/v1", "https://::1")) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> OpenAiCompatibleEngine.builder().baseUrl(url).build());
      assertTrue(e.getMessage().contains("IPv6 address without brackets"), e.getMessage());
      assertTrue(e.getMessage().contains("http://[::1]:8000"), e.getMessage());
      assertTrue(e.getMessage().endsWith("was " + url), e.getMessage());
    }
    // a URL without a host otherwise says what a host is, brackets included
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> OpenAiCompatibleEngine.builder().baseUrl("http://vllm_server:8000").build());
    assertTrue(e.getMessage().contains("IPv6 in brackets"), e.getMessage());
    assertEquals("http://[::1]:8000/v1/completions", OpenAiCompatibleEngine.builder()
        .baseUrl("http://[::1]:8000").build().completionsUri().toString());
  }

  /**
   * A string that is no URL at all was refused with {@code java.net.URI}'s message alone
   * ("Illegal character in authority at index 7: ..."), which named no setting and carried the
   * whole value, however long.
   */
  @Test
  void aMalformedBaseUrlIsRejectedNamingTheSettingAndItsValueShortened() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> OpenAiCompatibleEngine.builder().baseUrl("http://vllm host:8000"));
    // the index is java.net.URI's: where the authority starts on JDK 17, where its bad
    // character is on JDK 25
    assertEquals("baseUrl is not a URL: Illegal character in authority at index "
        + uriErrorIndex("http://vllm host:8000") + ": http://vllm host:8000", e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> OpenAiCompatibleEngine.builder().baseUrl("http://"));
    assertEquals("baseUrl is not a URL: Expected authority at index 7: http://", e.getMessage());
    String longValue = "http://h:8000/" + "a".repeat(5000) + " b";
    e = assertThrows(IllegalArgumentException.class,
        () -> OpenAiCompatibleEngine.builder().baseUrl(longValue));
    assertTrue(e.getMessage().startsWith("baseUrl is not a URL: Illegal character in path at "
        + "index 5014: http://h:8000/aaa"), e.getMessage());
    assertTrue(e.getMessage().endsWith("..."), e.getMessage());
    assertTrue(e.getMessage().length() < 300, e.getMessage());
  }

  /** The index {@code java.net.URI} reports for {@code url}, which it refuses. */
  private static int uriErrorIndex(String url) {
    URISyntaxException e = assertThrows(URISyntaxException.class, () -> new URI(url));
    assertTrue(e.getIndex() >= 0, e.getMessage());
    return e.getIndex();
  }

  /**
   * The JDK's HTTP client sends no credentials from a URL's user information: a base URL of
   * {@code http://user:secret@host} was accepted, every request went without them (and was
   * refused by a server that wants them), and the password stood in every error message, log
   * line and {@code toString} that named the endpoint. It is refused, without the password.
   */
  @Test
  void aBaseUrlWithUserInformationIsRefusedWithoutEchoingIt() {
    for (String url : List.of("http://user:s3cret@127.0.0.1:8000", "https://s3cret@h/v1")) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> OpenAiCompatibleEngine.builder().baseUrl(url).build(), url);
      assertTrue(e.getMessage().contains("baseUrl must not carry user information"),
          e.getMessage());
      assertTrue(e.getMessage().contains("apiKey"), e.getMessage());
      assertFalse(e.getMessage().contains("s3cret"), e.getMessage());
      assertFalse(String.valueOf(e.getCause()).contains("s3cret"), e.getMessage());
    }
  }

  /**
   * A base URL with user information that is no URL either (a space in it, say) was refused by
   * {@link OpenAiCompatibleEngine.Builder#baseUrl} with the parse error, which quotes the value
   * whole, password and all (in its message and its cause's). It is refused as user
   * information, without the password.
   */
  @Test
  void aBaseUrlWithUserInformationThatDoesNotParseIsRefusedWithoutEchoingIt() {
    for (String url : List.of("http://user:s3cret @127.0.0.1:8000", "http://u:s3cret@h:8000/a b",
        "https://s3cret@h^/v1")) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> OpenAiCompatibleEngine.builder().baseUrl(url).build(), url);
      assertTrue(e.getMessage().contains("baseUrl must not carry user information"),
          e.getMessage());
      for (Throwable t = e; t != null; t = t.getCause()) {
        assertFalse(String.valueOf(t.getMessage()).contains("s3cret"), e.getMessage());
      }
    }
    // a URL without user information still says where it does not parse
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> OpenAiCompatibleEngine.builder().baseUrl("http://h:8000/a b"));
    assertTrue(e.getMessage().startsWith("baseUrl is not a URL: Illegal character in path"),
        e.getMessage());
  }

  @Test
  void aPortNoServerCanListenOnIsRejected() {
    // accepted, every request would fail at connect time as an unreachable server
    for (String url : List.of("http://127.0.0.1:99999", "http://127.0.0.1:0", "http://h:65536/v1")) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> OpenAiCompatibleEngine.builder().baseUrl(url).build(), url);
      assertTrue(e.getMessage().contains("port"), e.getMessage());
    }
    assertEquals("http://h:65535/v1/completions", OpenAiCompatibleEngine.builder()
        .baseUrl("http://h:65535").build().completionsUri().toString());
    assertEquals("http://h/v1/completions", OpenAiCompatibleEngine.builder()
        .baseUrl("http://h").build().completionsUri().toString());
  }

  /**
   * close() ends the HTTP client's selector thread, with the client's default executor and with
   * the host's; a request or health check afterwards fails at once. JDK 17's client cannot be
   * closed, and its {@code HttpClient-<n>-SelectorManager} ran until the client was garbage
   * collected: for as long as the host held the engine.
   */
  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void closeEndsTheHttpClientsSelectorThread(boolean hostExecutor) throws Exception {
    server.behaviour.set((ex, body) -> reply(ex, 200,
        "{\"choices\":[{\"index\":0,\"text\":\" B\",\"token_ids\":[1]}]}"));
    ExecutorService pool = Executors.newCachedThreadPool();
    try {
      java.util.Set<Thread> before = SelectorThreads.now();
      OpenAiCompatibleEngine.Builder b =
          OpenAiCompatibleEngine.builder().baseUrl(base()).requestTimeout(Duration.ofSeconds(5));
      OpenAiCompatibleEngine e = (hostExecutor ? b.executor(pool) : b).build();
      e.execute(request()).get(20, TimeUnit.SECONDS);
      List<Thread> selectors = SelectorThreads.since(before);
      assertEquals(1, selectors.size(), "the engine's client has one selector: " + selectors);
      e.close();
      assertEquals(List.of(), SelectorThreads.aliveAfterWaiting(selectors), "alive after close()");
      long t0 = System.nanoTime();
      EngineException x = failure(e.execute(request()));
      assertTrue(x.getMessage().contains("closed"), x.getMessage());
      assertFalse(e.health().get(20, TimeUnit.SECONDS));
      assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(4),
          "failing after close() waited for the request timeout");
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * {@code close()} ends the HTTP client's selector thread, which also keeps the client's own
   * timeouts: a request in flight then, its answer's headers not come yet, was never answered,
   * however short its {@code requestTimeout}, and held its slot for good; one whose stream had
   * begun failed only at its {@code requestTimeout}. Each fails at once now, retryably.
   */
  @Test
  void closeFailsTheRequestsInFlightAtOnce() throws Exception {
    CountDownLatch held = new CountDownLatch(3);
    server.behaviour.set((ex, body) -> {
      if (((List<?>) body.get("prompt")).get(0).equals(2L)) { // a stream that has begun
        OutputStream out = OpenAiCompatibleEngineStreamingTest.startStream(ex);
        OpenAiCompatibleEngineStreamingTest.send(out,
            OpenAiCompatibleEngineStreamingTest.chunk("a", "[1]", null));
      }
      held.countDown();
      server.awaitRelease();
    });
    OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(base())
        .requestTimeout(Duration.ofHours(1)).build();
    GenerationParams params = new GenerationParams(3, 0.0, 1.0, 1L);
    CountDownLatch streaming = new CountDownLatch(1);
    List<CompletableFuture<EngineResult>> inFlight = List.of(
        e.execute(new InferenceRequest("plain", new int[] {1, 7}, params)),
        e.execute(new InferenceRequest("no-headers", new int[] {1, 8}, params), (t, x) -> { }),
        e.execute(new InferenceRequest("begun", new int[] {2, 9}, params),
            (t, x) -> streaming.countDown()));
    assertTrue(held.await(20, TimeUnit.SECONDS), "the requests reached the server");
    assertTrue(streaming.await(20, TimeUnit.SECONDS), "the stream began");
    e.close();
    for (CompletableFuture<EngineResult> f : inFlight) {
      try {
        f.get(5, TimeUnit.SECONDS);
        fail("a request in flight completed normally at close()");
      } catch (TimeoutException stuck) {
        fail("a request in flight at close() was not answered within 5 s; load " + e.load());
      } catch (ExecutionException x) {
        EngineException err = assertInstanceOf(EngineException.class, x.getCause());
        assertTrue(err.retryable(), err::toString);
        assertTrue(err.getMessage().contains("closed"), err.getMessage());
      }
    }
    assertEquals(0, e.load().total(), "in-flight counter released");
  }
}
