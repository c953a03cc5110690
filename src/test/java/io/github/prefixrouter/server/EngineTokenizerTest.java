package io.github.prefixrouter.server;

import static io.github.prefixrouter.testing.RawConnections.closedByClient;
import static io.github.prefixrouter.testing.RawConnections.readHead;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.internal.wire.JdkHttpServers;
import io.github.prefixrouter.internal.wire.SelectorThreads;
import io.github.prefixrouter.server.PromptTokenizer.TokenizeException;
import io.github.prefixrouter.server.PromptTokenizer.Tokenized;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** {@link EngineTokenizer} against a fake vLLM {@code /tokenize} on loopback. */
class EngineTokenizerTest {

  /** What the fake server answers: status and body. */
  private record Answer(int status, String body) {}

  private HttpServer server;
  private final AtomicReference<Answer> answer = new AtomicReference<>();
  private final AtomicReference<Map<?, ?>> lastBody = new AtomicReference<>();
  private final AtomicReference<String> lastAuthorization = new AtomicReference<>();
  private final CountDownLatch release = new CountDownLatch(1);
  private EngineTokenizer tokenizer;

  @BeforeEach
  void start() throws IOException {
    server = JdkHttpServers.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.setExecutor(Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, "fake-tokenize-server");
      t.setDaemon(true);
      return t;
    }));
    server.createContext("/tokenize", this::handle);
    server.start();
    tokenizer = tokenizer(Duration.ofSeconds(5), 1 << 20);
  }

  private EngineTokenizer tokenizer(Duration timeout, int cap) {
    return new EngineTokenizer(
        EngineTokenizer.tokenizeUri("http://127.0.0.1:" + server.getAddress().getPort() + "/v1/"),
        "secret-key", Duration.ofSeconds(2), timeout, cap);
  }

  private void handle(HttpExchange ex) throws IOException {
    try (ex) {
      lastBody.set((Map<?, ?>) Json.parse(
          new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8)));
      lastAuthorization.set(ex.getRequestHeaders().getFirst("Authorization"));
      Answer a = answer.get();
      if (a == null) { // never answers
        release.await(30, TimeUnit.SECONDS);
        return;
      }
      byte[] b = a.body().getBytes(StandardCharsets.UTF_8);
      ex.getResponseHeaders().add("Content-Type", "application/json");
      ex.sendResponseHeaders(a.status(), b.length);
      ex.getResponseBody().write(b);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @AfterEach
  void stop() {
    release.countDown();
    server.stop(0);
    tokenizer.close();
  }

  /** Whether a live thread's name begins with {@code prefix}. */
  static boolean threadsNamed(String prefix) {
    return Thread.getAllStackTraces().keySet().stream()
        .anyMatch(t -> t.isAlive() && t.getName().startsWith(prefix));
  }

  /** Waits up to 10 s for every thread named {@code prefix...} to end; whether they did. */
  static boolean threadsEnd(String prefix) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (threadsNamed(prefix) && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    return !threadsNamed(prefix);
  }

  private static Tokenized ok(CompletableFuture<Tokenized> f) throws Exception {
    return f.get(10, TimeUnit.SECONDS);
  }

  private static TokenizeException failed(CompletableFuture<Tokenized> f) throws Exception {
    try {
      Tokenized t = f.get(10, TimeUnit.SECONDS);
      fail("expected a failure, got " + java.util.Arrays.toString(t.tokens()));
      return null;
    } catch (ExecutionException e) {
      return assertInstanceOf(TokenizeException.class, e.getCause());
    }
  }

  /**
   * The request a tokenization sends holds copies of the prompt until it is answered: its JSON
   * text and that text's UTF-8 bytes, taken from the caller's heap before it is sent (the client
   * port's body budget): two bytes per character of an ASCII prompt, and a few for the keys.
   */
  @Test
  void theCopiesOfThePromptAreTakenFromTheCallersHeap() throws Exception {
    answer.set(new Answer(200, "{\"tokens\":[1,2],\"max_model_len\":64}"));
    String prompt = "x".repeat(100_000);
    java.util.concurrent.atomic.AtomicLong taken = new java.util.concurrent.atomic.AtomicLong();
    tokenizer.tokenize("m", prompt, taken::addAndGet).get(10, TimeUnit.SECONDS);
    assertTrue(taken.get() >= 2L * prompt.length() && taken.get() < 2L * prompt.length() + 256,
        "taken for a prompt of " + prompt.length() + " ASCII characters: " + taken.get());
    taken.set(0);
    // one Latin-1 character and one not: two bytes each as text, 2 + 3 in UTF-8
    String wide = "\u00e9\u4e2d".repeat(50_000);
    tokenizer.tokenizeChat("m", List.of(Map.of("role", "user", "content", wide)), Map.of(),
        taken::addAndGet).get(10, TimeUnit.SECONDS);
    long expected = 2L * wide.length() + 5L * wide.length() / 2;
    assertTrue(taken.get() >= expected && taken.get() < expected + 512,
        "taken for a conversation of " + wide.length() + " wide characters: " + taken.get());
  }

  /** A heap that cannot give the copies ends the call: thrown on, nothing sent. */
  @Test
  void aHeapThatRefusesTheCopiesEndsTheCallBeforeItIsSent() {
    answer.set(new Answer(200, "{\"tokens\":[1],\"max_model_len\":64}"));
    IllegalStateException refused = new IllegalStateException("no heap");
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> tokenizer.tokenize("m", "hello", bytes -> {
          throw refused;
        }));
    assertTrue(e == refused, "thrown on as it was: " + e);
    assertEquals(null, lastBody.get(), "nothing sent");
  }

  @Test
  void aTextPromptIsSentWithItsSpecialTokensAndItsIdsComeBack() throws Exception {
    answer.set(new Answer(200, "{\"count\":3,\"max_model_len\":32768,\"tokens\":[1,15496,995],"
        + "\"token_strs\":null}"));
    Tokenized t = ok(tokenizer.tokenize("Qwen/Qwen2.5-0.5B-Instruct", "Hello world"));
    assertArrayEquals(new int[] {1, 15496, 995}, t.tokens());
    assertEquals(32768, t.maxModelLen());
    assertEquals(Map.of("model", "Qwen/Qwen2.5-0.5B-Instruct", "prompt", "Hello world",
        "add_special_tokens", true), lastBody.get());
    assertEquals("Bearer secret-key", lastAuthorization.get());
  }

  /**
   * An answer of tiny values takes tens of bytes of heap a character once parsed (64 MiB of
   * {@code [{},{},...]}, the default cap, about 2 GB): its parse is bounded at
   * 16 MiB plus 6 bytes a character, the most token ids take, and refused as the tokenizer's
   * fault naming the limit. Ids of one digit, the densest answer, pass beyond the 16 MiB.
   */
  @Test
  void anAnswerOfTinyValuesIsRefusedAsItIsParsedOneOfTokenIdsIsNot() throws Exception {
    EngineTokenizer big = tokenizer(Duration.ofSeconds(10), 8 << 20);
    try {
      String tiny = "{\"tokens\":[1],\"extra\":[" + "{},".repeat(400_000) + "{}]}";
      answer.set(new Answer(200, tiny));
      TokenizeException e = failed(big.tokenize("m", "hi"));
      assertFalse(e.invalidRequest(), e.toString());
      assertTrue(e.getMessage().contains("more than " + ((16L << 20) + 6L * tiny.length())
          + " bytes of heap once parsed"), e.getMessage());
      answer.set(new Answer(200, "{\"tokens\":[" + "7,".repeat(2_000_000) + "7]}"));
      assertEquals(2_000_001, ok(big.tokenize("m", "hi")).tokens().length);
    } finally {
      big.close();
    }
  }

  /** docs/engines.md states the bound on the parse of an answer as it is. */
  @Test
  void theParseBoundIsTheDocumentedOne() throws IOException {
    String doc = java.nio.file.Files.readString(java.nio.file.Path.of("docs", "engines.md"))
        .replaceAll("\\s+", " ");
    assertEquals(16L << 20, io.github.prefixrouter.internal.json.AnswerHeap.BASE_BYTES);
    assertEquals(6, io.github.prefixrouter.internal.json.AnswerHeap.PER_CHAR);
    assertTrue(doc.contains("(`EngineTokenizer`) bounds its answers alike, 16 MiB plus 6 bytes a "
        + "character"));
  }

  @Test
  void aTimeoutBeyond292YearsCountsAsNeverInsteadOfFailingEveryExchange() throws Exception {
    // "never" written as a huge duration: Duration.toNanos() throws beyond 2^63 ns, and the
    // JDK's HTTP client fails a request or a connection whose timeout it cannot add up
    answer.set(new Answer(200, "{\"tokens\":[1,2]}"));
    URI uri = EngineTokenizer.tokenizeUri("http://127.0.0.1:" + server.getAddress().getPort());
    for (Duration never : List.of(java.time.temporal.ChronoUnit.FOREVER.getDuration(),
        Duration.ofMillis(Long.MAX_VALUE), Duration.ofNanos(Long.MAX_VALUE).plusNanos(1))) {
      EngineTokenizer t = new EngineTokenizer(uri, null, never, never, 1 << 20);
      try {
        assertArrayEquals(new int[] {1, 2}, ok(t.tokenize("m", "Hello")).tokens(),
            never.toString());
      } finally {
        t.close();
      }
    }
  }

  @Test
  void aConversationIsSentForTheServersChatTemplateWithTheGenerationPrompt() throws Exception {
    answer.set(new Answer(200, "{\"tokens\":[7,8,9]}"));
    List<Map<String, Object>> messages = List.of(
        Map.of("role", "system", "content", "Be brief."),
        Map.of("role", "user", "content", List.of(Map.of("type", "text", "text", "Hi"))));
    Tokenized t = ok(tokenizer.tokenizeChat("sql-lora", messages, Map.of("enable_thinking", false)));
    assertArrayEquals(new int[] {7, 8, 9}, t.tokens());
    assertEquals(-1, t.maxModelLen(), "no max_model_len in the answer");
    assertEquals(Map.of("model", "sql-lora", "messages", messages, "add_generation_prompt", true,
        "chat_template_kwargs", Map.of("enable_thinking", false)), lastBody.get());

    ok(tokenizer.tokenizeChat("", messages, Map.of()));
    assertEquals(Map.of("messages", messages, "add_generation_prompt", true), lastBody.get(),
        "no model and no template arguments when there are none");
  }

  /**
   * A server whose {@code /tokenize} requires {@code prompt} and reads no {@code messages} (an
   * SGLang or a vLLM from before conversations could be tokenized) refuses every conversation
   * with a validation error naming {@code prompt} as missing: HTTP 400 from SGLang and vLLM,
   * which turn FastAPI's validation errors into 400s, or FastAPI's own 422. The node's body has
   * no {@code prompt}, so that is the tokenizer's fault, not the conversation's: it was taken
   * for the request's, and next to such a server every chat request was answered 400.
   */
  @ParameterizedTest(name = "{0}")
  @CsvSource(delimiter = '|', value = {
      // SGLang's handler: str(exc) and str(exc.errors()), Python's reprs
      "400|{\"object\":\"error\",\"message\":\"[{'type': 'missing', 'loc': ('body', 'prompt'), "
          + "'msg': 'Field required', 'input': {'model': 'm', 'messages': [{'role': 'user', "
          + "'content': 'hi'}], 'add_generation_prompt': True}}]\",\"type\":\"Bad Request\","
          + "\"param\":null,\"code\":400}",
      // pydantic's own text of the error
      "400|{\"object\":\"error\",\"message\":\"1 validation error for TokenizeRequest\\nprompt\\n  "
          + "Field required [type=missing, input_value={'messages': []}, input_type=dict]\","
          + "\"type\":\"BadRequestError\",\"param\":null,\"code\":400}",
      // pydantic 1's
      "400|{\"object\":\"error\",\"message\":\"1 validation error for Request\\nbody -> prompt\\n"
          + "  field required (type=value_error.missing)\",\"type\":\"BadRequestError\",\"code\":400}",
      // FastAPI's own answer
      "422|{\"detail\":[{\"type\":\"missing\",\"loc\":[\"body\",\"prompt\"],\"msg\":\"Field "
          + "required\",\"input\":{\"messages\":[]}}]}",
  })
  void aServerWhoseTokenizeReadsNoMessagesIsTheTokenizersFault(int status, String body)
      throws Exception {
    answer.set(new Answer(status, body));
    TokenizeException e = failed(tokenizer.tokenizeChat("m",
        List.of(Map.of("role", "user", "content", "hi")), Map.of()));
    assertFalse(e.invalidRequest(), "the tokenizer's fault: " + e.getMessage());
    assertTrue(e.getMessage().contains("reads no conversation"), e.getMessage());
    // a text prompt refused so is the request's fault, as any other 4xx
    TokenizeException text = failed(tokenizer.tokenize("m", "x"));
    assertTrue(text.invalidRequest(), text.getMessage());
  }

  /**
   * A conversation the server refuses otherwise (its chat template raises on it, a message it
   * cannot validate) is the request's fault, with the server's words.
   */
  @ParameterizedTest(name = "{0}: {1}")
  @CsvSource(delimiter = '|', value = {
      "400|{\"error\":{\"message\":\"Conversation roles must alternate user/assistant/user/assistant/...\",\"type\":\"BadRequestError\",\"code\":400}}|Conversation roles must alternate",
      "400|{\"object\":\"error\",\"message\":\"[{'type': 'literal_error', 'loc': ('body', 'messages', 0, 'role'), 'msg': 'Input should be user'}]\",\"code\":400}|'loc': ('body', 'messages', 0, 'role')",
      "422|{\"detail\":[{\"type\":\"missing\",\"loc\":[\"body\",\"messages\",0,\"content\"],\"msg\":\"Field required\"}]}|Field required",
  })
  void aConversationTheServerRefusesIsTheRequestsFault(int status, String body, String message)
      throws Exception {
    answer.set(new Answer(status, body));
    TokenizeException e = failed(tokenizer.tokenizeChat("m",
        List.of(Map.of("role", "user", "content", "hi")), Map.of()));
    assertTrue(e.invalidRequest(), "the request's fault: " + e.getMessage());
    assertTrue(e.getMessage().contains(message), e.getMessage());
  }

  @ParameterizedTest(name = "{0}: {1}")
  @CsvSource(delimiter = '|', value = {
      "400|{\"error\":{\"message\":\"messages: bad role\",\"type\":\"BadRequestError\",\"code\":400}}|messages: bad role",
      "400|{\"object\":\"error\",\"message\":\"older shape\",\"type\":\"BadRequestError\"}|older shape",
      "404|{\"error\":{\"message\":\"The model `x` does not exist.\",\"code\":404}}|The model `x` does not exist.",
      "422|{\"detail\":[{\"msg\":\"Field required\"},{\"msg\":\"Input should be a string\"}]}|Field required; Input should be a string",
      "400|not json at all|not json at all",
  })
  void anAnswerBlamingTheRequestIsAnInvalidRequestWithTheServersWords(int status, String body,
      String message) throws Exception {
    answer.set(new Answer(status, body));
    TokenizeException e = failed(tokenizer.tokenize("m", "x"));
    assertTrue(e.invalidRequest(), "the request's fault: " + e.getMessage());
    assertEquals(message, e.getMessage());
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(delimiter = '|', value = {
      "500|{\"error\":{\"message\":\"engine dead\"}}|answered 500: engine dead",
      "503|busy|answered 503: busy",
      "401|{\"error\":{\"message\":\"bad key\"}}|answered 401",
      "403|forbidden|answered 403",
      "408|slow|answered 408",
      "429|{\"error\":{\"message\":\"too many\"}}|answered 429",
      "404|{\"detail\":\"Not Found\"}|no tokenize endpoint there",
      "405|{\"detail\":\"Method Not Allowed\"}|no tokenize endpoint there",
      // a proxy's JSON 404, and OpenAI's own of a path it does not serve, name no model: they
      // were taken for the server's word on the request, and the client answered 400
      "404|{\"message\":\"no Route matched with those values\"}|no tokenize endpoint there",
      "404|{\"error\":{\"message\":\"Invalid URL (POST /tokenize)\",\"type\":\"invalid_request_error\"}}|no tokenize endpoint there",
      "405|{\"object\":\"error\",\"message\":\"Method Not Allowed\"}|no tokenize endpoint there",
      "200|[1,2,3]|unusable answer",
      "200|{\"count\":3}|tokens must be an array",
      "200|{\"tokens\":[1,-2]}|tokens[1] is negative",
      "200|{\"tokens\":[-1,2]}|tokens[0] is negative: -1",
      "200|{\"tokens\":[1,2.5]}|tokens[1] must be an integer",
      "200|{\"tokens\":[1,2],\"count\":3}|count 3 is not the number of tokens",
      "200|{\"tokens\":[1,2],\"count\":1}|count 1 is not the number of tokens",
      "200|{\"tokens\":[1,2],\"max_model_len\":0}|max_model_len must be positive",
      "200|{\"tokens\":[1,2]|is not JSON",
  })
  void anAnswerBlamingTheServerOrUnusableIsTheTokenizersFault(int status, String body,
      String contains) throws Exception {
    answer.set(new Answer(status, body));
    TokenizeException e = failed(tokenizer.tokenize("m", "x"));
    assertFalse(e.invalidRequest(), "the tokenizer's fault: " + e.getMessage());
    assertTrue(e.getMessage().contains(contains), e.getMessage());
    assertFalse(e.getMessage().contains("secret-key"), "the API key shown: " + e.getMessage());
  }

  /**
   * A 401 or 403 (the server refuses this node's key, or its lack of one) is the tokenizer's
   * fault, as the completions' is, and says what to give: the key's flag and variable, never the
   * key. It said only "answered 401", which a client's operator could not act on.
   */
  @ParameterizedTest(name = "{0}")
  @CsvSource({"401", "403"})
  void aRefusedKeyPointsAtTheKeysFlagAndVariable(int status) throws Exception {
    answer.set(new Answer(status, "{\"error\":{\"message\":\"bad key\"}}"));
    // logged too, for the node's operator, whom the clients' answers do not reach: once, not
    // once per request, which would flood the log at the request rate
    java.io.PrintStream stderr = System.err;
    java.io.ByteArrayOutputStream log = new java.io.ByteArrayOutputStream();
    System.setErr(new java.io.PrintStream(log, true, StandardCharsets.UTF_8));
    TokenizeException e;
    try {
      e = failed(tokenizer.tokenize("m", "x"));
      for (int i = 0; i < 3; i++) {
        failed(tokenizer.tokenize("m", "x"));
      }
    } finally {
      System.setErr(stderr);
    }
    assertFalse(e.invalidRequest(), e.getMessage());
    assertTrue(e.getMessage().contains("answered " + status + ": bad key"), e.getMessage());
    assertTrue(e.getMessage().contains("refuses the API key given")
        && e.getMessage().contains("--engine-api-key-file")
        && e.getMessage().contains("PREFIX_ROUTER_ENGINE_API_KEY"), e.getMessage());
    assertFalse(e.getMessage().contains("secret-key"), "the API key shown: " + e.getMessage());
    List<String> lines = log.toString(StandardCharsets.UTF_8).lines()
        .filter(l -> l.contains("--engine-api-key-file")).toList();
    assertEquals(1, lines.size(), "logged once in 4 refusals: " + lines);
    assertTrue(lines.get(0).contains("WARN") && lines.get(0).contains("answered " + status),
        lines.get(0));
    assertFalse(lines.get(0).contains("secret-key"), lines.get(0));
    EngineTokenizer keyless = new EngineTokenizer(tokenizer.uri(), null, Duration.ofSeconds(2),
        Duration.ofSeconds(5), 1 << 20);
    try {
      TokenizeException n = failed(keyless.tokenize("m", "x"));
      assertTrue(n.getMessage().contains("refuses requests without an API key")
          && n.getMessage().contains("--engine-api-key-file")
          && n.getMessage().contains("PREFIX_ROUTER_ENGINE_API_KEY"), n.getMessage());
    } finally {
      keyless.close();
    }
  }

  @Test
  void aPromptWithNoTokensIsTheRequestsFault() throws Exception {
    answer.set(new Answer(200, "{\"count\":0,\"max_model_len\":4096,\"tokens\":[]}"));
    TokenizeException e = failed(tokenizer.tokenize("m", ""));
    assertTrue(e.invalidRequest());
    assertTrue(e.getMessage().contains("empty"), e.getMessage());
  }

  /**
   * llama.cpp's {@code /tokenize} reads {@code content}, not {@code prompt} (nor
   * {@code messages}), and answers {@code {"tokens":[]}} to the body it is sent: every text
   * prompt and conversation was answered 400, "the prompt is empty", the client blamed for a
   * tokenizer that did not read its prompt.
   */
  @Test
  void noTokensForAPromptThatIsNotBlankAreTheTokenizersFault() throws Exception {
    answer.set(new Answer(200, "{\"tokens\":[]}"));
    for (CompletableFuture<Tokenized> f : List.of(tokenizer.tokenize("m", "Hello there"),
        tokenizer.tokenizeChat("m", List.of(Map.of("role", "user", "content", "Hi")), Map.of()))) {
      TokenizeException e = failed(f);
      assertFalse(e.invalidRequest(), e.getMessage());
      assertTrue(e.getMessage().contains("no tokens") && e.getMessage().contains("content"),
          e.getMessage());
    }
    // a blank prompt without tokens stays the request's fault
    TokenizeException e = failed(tokenizer.tokenize("m", " \n"));
    assertTrue(e.invalidRequest(), e.getMessage());
  }

  @Test
  void aLongErrorMessageIsShortened() throws Exception {
    answer.set(new Answer(400, "{\"error\":{\"message\":\"" + "x".repeat(5_000) + "\"}}"));
    TokenizeException e = failed(tokenizer.tokenize("m", "x"));
    assertEquals(EngineTokenizer.MAX_MESSAGE_CHARS + 3, e.getMessage().length());
  }

  /**
   * A message shortened where a surrogate pair straddles the cut keeps the pair out whole: half
   * of it made the client's JSON answer unwritable, and the client got a 500 instead of it.
   */
  @ParameterizedTest(name = "{0}")
  @CsvSource({"400", "500"})
  void aShortenedMessageNeverEndsInHalfACharacter(int status) throws Exception {
    String server = "x".repeat(EngineTokenizer.MAX_MESSAGE_CHARS - 1) + "\uD83D\uDE00 more";
    answer.set(new Answer(status, server)); // not JSON: the body itself is the message
    TokenizeException e = failed(tokenizer.tokenize("m", "x"));
    String m = e.getMessage();
    for (int i = 0; i < m.length(); i++) {
      assertFalse(Character.isSurrogate(m.charAt(i)), "half a surrogate pair at " + i);
    }
    assertTrue(m.endsWith("x".repeat(10) + "..."), m.substring(m.length() - 20));
    Json.write(Map.of("message", m)); // the client's answer carries it
  }

  @Test
  void anAnswerAboveTheCapIsRefused() throws Exception {
    StringBuilder big = new StringBuilder("{\"tokens\":[");
    for (int i = 0; i < 1_000; i++) {
      big.append(i == 0 ? "" : ",").append(100_000 + i);
    }
    answer.set(new Answer(200, big.append("]}").toString()));
    EngineTokenizer small = tokenizer(Duration.ofSeconds(5), 1_000);
    TokenizeException e = failed(small.tokenize("m", "x"));
    assertFalse(e.invalidRequest());
    assertTrue(e.getMessage().contains("exceeds 1000 bytes"), e.getMessage());
    assertEquals(1_000, ok(tokenizer.tokenize("m", "x")).tokens().length, "within the cap: read");
  }

  @Test
  void aServerThatNeverAnswersFailsWithinTheTimeout() throws Exception {
    answer.set(null);
    EngineTokenizer quick = tokenizer(Duration.ofMillis(300), 1 << 20);
    long start = System.nanoTime();
    TokenizeException e = failed(quick.tokenize("m", "x"));
    assertFalse(e.invalidRequest());
    assertTrue(e.timedOut(), "answered 504 by the client endpoint");
    assertTrue(e.getMessage().contains("within 300 ms"), e.getMessage());
    assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(9), "failed by the timeout");
  }

  @Test
  void aServerNotListeningIsTheTokenizersFault() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    EngineTokenizer none = new EngineTokenizer(URI.create("http://127.0.0.1:" + port + "/tokenize"),
        null, Duration.ofSeconds(2), Duration.ofSeconds(5), 1 << 20);
    TokenizeException e = failed(none.tokenize("m", "x"));
    assertFalse(e.invalidRequest());
    assertFalse(e.timedOut());
    assertTrue(e.getMessage().startsWith("tokenizer failed: cannot reach"), e.getMessage());
  }

  @Test
  void theEndpointIsTheServersRootTokenizeWhateverTheBaseUrlsForm() {
    for (String base : List.of("http://h:8000", "http://h:8000/", "http://h:8000/v1",
        "http://h:8000/v1/")) {
      assertEquals(URI.create("http://h:8000/tokenize"), EngineTokenizer.tokenizeUri(base), base);
    }
    assertEquals(URI.create("http://h:8000/api/tokenize"),
        EngineTokenizer.tokenizeUri("http://h:8000/api"));
  }

  @Test
  void settingsOutOfRangeAreRefused() {
    URI u = URI.create("http://127.0.0.1:1/tokenize");
    for (Runnable r : List.<Runnable>of(
        () -> new EngineTokenizer(u, null, Duration.ZERO, Duration.ofSeconds(1), 1),
        () -> new EngineTokenizer(u, null, Duration.ofSeconds(1), Duration.ofMillis(-1), 1),
        () -> new EngineTokenizer(u, null, Duration.ofSeconds(1), Duration.ofSeconds(1), 0))) {
      try {
        r.run();
        fail("accepted");
      } catch (IllegalArgumentException expected) {
        assertTrue(expected.getMessage().contains("must be positive"), expected.getMessage());
      }
    }
  }

  /**
   * A long error message is cut at {@link EngineTokenizer#MAX_MESSAGE_CHARS}, never between the
   * halves of a surrogate pair: the message goes to the client in a JSON answer.
   */
  @Test
  void aLongServerMessageIsNotCutInsideASurrogatePair() {
    String message = "a".repeat(EngineTokenizer.MAX_MESSAGE_CHARS - 1) + "\uD83D\uDE00 and more";
    String shown = EngineTokenizer.serverMessage(null, message, null);
    assertEquals("a".repeat(EngineTokenizer.MAX_MESSAGE_CHARS - 1) + "...", shown);
    Json.write(Map.of("message", shown)); // throws on half a pair
    String whole = "b".repeat(EngineTokenizer.MAX_MESSAGE_CHARS - 2) + "\uD83D\uDE00";
    assertEquals(whole, EngineTokenizer.serverMessage(null, whole, null), "at the limit: whole");
  }

  /**
   * A tokenizer's error text that echoes the key the node sent (a proxy's page, say) never
   * carries it into the message, which reaches the client: before, it went in as written, or
   * its first part where the cut fell inside it.
   */
  @Test
  void anErrorEchoingTheKeyDoesNotShowIt() {
    for (int status : new int[] {400, 401, 403, 500}) {
      for (String body : new String[] {"{\"detail\":\"token secret-key refused\"}",
          "bad token secret-key", "c".repeat(EngineTokenizer.MAX_MESSAGE_CHARS - 4)
              + "secret-key"}) {
        RuntimeException e = assertThrows(RuntimeException.class,
            () -> tokenizer.parse(status, body.getBytes(StandardCharsets.UTF_8)));
        assertFalse(e.getMessage().contains("secret"), status + ": " + e.getMessage());
      }
    }
  }

  /**
   * The HTTP client's work runs on the tokenizer's own threads, which {@code close()} ends:
   * JDK 17's client cannot be closed, and the threads of its default executor stayed after a
   * stop until the client was garbage-collected. A tokenization after the close fails at once.
   */
  @Test
  void closeEndsTheTokenizersThreads() throws Exception {
    answer.set(new Answer(200, "{\"tokens\":[7,8,9]}"));
    EngineTokenizer t = tokenizer(Duration.ofSeconds(5), 1 << 20);
    String prefix = t.threadNamePrefix();
    assertFalse(threadsNamed(prefix), "no thread before any work");
    assertArrayEquals(new int[] {7, 8, 9}, ok(t.tokenize("m", "x")).tokens());
    assertTrue(threadsNamed(prefix), "the answer was not handled on the tokenizer's threads");
    t.close();
    assertTrue(threadsEnd(prefix), "a thread of the tokenizer remains after close()");
    TokenizeException e = failed(t.tokenize("m", "x"));
    assertFalse(e.invalidRequest());
    assertTrue(e.getMessage().contains("closed"), e.getMessage());
  }

  /**
   * close() ends the HTTP client's selector thread too. JDK 17's client cannot be closed, and
   * its {@code HttpClient-<n>-SelectorManager} ran until the client was garbage collected: for
   * as long as the node (or a caller of a failed start) held the tokenizer.
   */
  @Test
  void closeEndsTheHttpClientsSelectorThread() throws Exception {
    answer.set(new Answer(200, "{\"tokens\":[7]}"));
    Set<Thread> before = SelectorThreads.now();
    EngineTokenizer t = tokenizer(Duration.ofSeconds(5), 1 << 20);
    assertArrayEquals(new int[] {7}, ok(t.tokenize("m", "x")).tokens());
    List<Thread> selectors = SelectorThreads.since(before);
    assertEquals(1, selectors.size(), "the tokenizer's client has one selector: " + selectors);
    t.close();
    assertEquals(List.of(), SelectorThreads.aliveAfterWaiting(selectors),
        "alive after close()");
    TokenizeException e = failed(t.tokenize("m", "x"));
    assertTrue(e.getMessage().contains("closed"), e.getMessage());
  }

  /**
   * close() ends the tokenizations in flight at once, as the tokenizer's fault saying it is
   * closed: one whose answer's headers have not come, and one whose answer's body stalls after
   * its headers; both connections are closed. Both ran to the tokenizer's own timeout (here an
   * hour), their callers waiting and their connections open until then.
   */
  @Test
  void closeEndsTheTokenizationsInFlightAtOnce() throws Exception {
    try (ServerSocket raw = new ServerSocket(0, 4, java.net.InetAddress.getLoopbackAddress())) {
      EngineTokenizer t = new EngineTokenizer(
          URI.create("http://127.0.0.1:" + raw.getLocalPort() + "/tokenize"), null,
          Duration.ofSeconds(5), Duration.ofHours(1), 1 << 20);
      raw.setSoTimeout(10_000);
      CompletableFuture<Tokenized> unanswered = t.tokenize("m", "x");
      try (Socket first = raw.accept()) {
        assertTrue(readHead(first).startsWith("POST /tokenize "));
        CompletableFuture<Tokenized> stalled = t.tokenizeChat("m",
            List.of(Map.of("role", "user", "content", "Hi")), Map.of());
        try (Socket second = raw.accept()) {
          assertTrue(readHead(second).startsWith("POST /tokenize "));
          OutputStream out = second.getOutputStream();
          out.write(("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
              + "Content-Length: 100\r\n\r\n{\"tokens\":[1,").getBytes(StandardCharsets.UTF_8));
          out.flush();
          Thread.sleep(200); // the headers reach the client
          long start = System.nanoTime();
          t.close();
          for (CompletableFuture<Tokenized> f : List.of(unanswered, stalled)) {
            try {
              f.get(5, TimeUnit.SECONDS);
              fail("a tokenization in flight at close() succeeded");
            } catch (TimeoutException stuck) {
              throw new AssertionError("a tokenization in flight at close() went on 5 s");
            } catch (ExecutionException e) {
              TokenizeException te = assertInstanceOf(TokenizeException.class, e.getCause());
              assertFalse(te.invalidRequest());
              assertFalse(te.timedOut());
              assertTrue(te.getMessage().contains("closed"), te.getMessage());
            }
          }
          assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(9), "ended late");
          assertTrue(closedByClient(first), "the unanswered call's connection stayed open");
          assertTrue(closedByClient(second), "the stalled call's connection stayed open");
        }
      }
    }
  }
}
