package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.EngineTimeoutException;
import io.github.prefixrouter.testing.Await;
import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;

/**
 * Fuzzes the client endpoint with mutations of valid requests of every route, as values (a
 * member replaced by a hostile value, removed, or added) and as bytes (bytes that are not
 * UTF-8, broken escapes, huge exponents, truncation), sent to an endpoint with the demo
 * tokenizer in front of a node that answers at once, fails busy, or fails after its first
 * piece. Whatever the body: an answer comes; it is never a 500; a refusal is a 400 in the
 * route's error shape (OpenAI's on the OpenAI routes), with nothing submitted; an accepted
 * request is submitted once and answered once, whole or as a stream, in the status its outcome
 * calls for; the in-flight slots and streams all end.
 */
class ClientEndpointFuzzProperties {

  static final String CHAT = ClientEndpoint.OPENAI_CHAT;
  static final String TEXT = ClientEndpoint.OPENAI_COMPLETIONS;
  static final String ROUTE = ClientEndpoint.COMPLETIONS;

  static ClientEndpoint endpoint;
  static String address;
  static HttpClient client;
  static final AtomicInteger submitted = new AtomicInteger();
  /** How the node ended the last request submitted: 0 answered, 1 busy, 2 failed after a piece. */
  static volatile int lastOutcome = -1;
  static volatile boolean lastStreamed;

  /** What the stub node does with a request: a function of the request, so a test knows it. */
  static int outcome(InferenceRequest r) {
    return Math.floorMod(r.tokens()[r.tokens().length - 1] + r.params().maxTokens(), 5) == 0 ? 1
        : Math.floorMod(r.params().maxTokens(), 7) == 3 ? 2 : 0;
  }

  @BeforeContainer
  static void start() throws Exception {
    PrefixRouterNode node = mock(PrefixRouterNode.class);
    when(node.state()).thenReturn(PrefixRouterNode.State.RUNNING);
    when(node.nodeId()).thenReturn("solo");
    when(node.stats()).thenReturn(StatsFixtures.nodeStats());
    when(node.submit(any())).thenAnswer(inv -> answer(inv.getArgument(0), null));
    when(node.submit(any(), any())).thenAnswer(inv -> answer(inv.getArgument(0),
        inv.getArgument(1)));
    endpoint = new ClientEndpoint(node, List::of, 64, Duration.ofSeconds(10), "reference",
        ClientEndpoint.DEFAULT_READER_THREADS, ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS,
        new ReferenceTokenizer(1024, 64), () -> 1_767_225_600L, 11L);
    address = "127.0.0.1:" + endpoint.start("127.0.0.1", 0).getPort();
    client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  }

  @AfterContainer
  static void stop() {
    endpoint.stop();
  }

  private static CompletableFuture<InferenceResponse> answer(InferenceRequest r,
      OutputListener l) {
    submitted.incrementAndGet();
    int outcome = outcome(r);
    lastOutcome = outcome;
    lastStreamed = l != null;
    if (outcome == 1) {
      return CompletableFuture.failedFuture(new RequestFailedException(r.id(), "busy everywhere",
          new EngineBusyException("engine busy")));
    }
    int n = Math.min(r.params().maxTokens(), 3);
    int[] out = new int[n];
    Arrays.fill(out, 5 + r.tokens().length % 7);
    if (l != null) {
      l.onOutput(new int[] {out[0]}, "");
    }
    if (outcome == 2) {
      return CompletableFuture.failedFuture(new RequestFailedException(r.id(), "late",
          new EngineTimeoutException("no answer in time", null)));
    }
    return CompletableFuture.completedFuture(new InferenceResponse(r.id(),
        new EngineResult(out, "", r.tokens().length, 0, 1, 1), "solo", false, 1,
        FallbackCause.NONE, StubNode.LOCAL_DECISION));
  }

  // ------------------------------------------------------------------------ the requests

  /** Valid requests of every route, as JSON values to mutate. */
  static final List<Object[]> BASES = List.of(
      new Object[] {CHAT, object("model", "reference", "messages", List.of(
          object("role", "system", "content", "be terse"),
          object("role", "user", "content", "hi", "name", "bob"),
          object("role", "assistant", "content", Json.NULL),
          object("role", "user", "content", List.of(object("type", "text", "text", "x")))),
          "max_tokens", 4L, "temperature", 0.5, "top_p", 0.9, "seed", 5L, "stop", List.of("ą"),
          "stop_token_ids", List.of(3L), "stream", false, "n", 1L, "user", "u",
          "cache_salt", "s", "chat_template_kwargs", object("a", 1L), "logprobs", false,
          "tool_choice", "none")},
      new Object[] {CHAT, object("messages", List.of(object("role", "user", "content", "q")),
          "max_completion_tokens", 2L, "stream", true,
          "stream_options", object("include_usage", true))},
      // its one piece is a char of U+0105 to U+010B, each the start of a stop string: held back
      new Object[] {CHAT, object("messages", List.of(object("role", "user", "content", "p")),
          "max_tokens", 3L, "stream", true, "stop", List.of("\u0105z", "\u0106z", "\u0107z",
              "\u0108z", "\u0109z", "\u010az", "\u010bz"))},
      new Object[] {TEXT, object("model", "reference", "prompt", "hello", "max_tokens", 3L,
          "temperature", 0L, "stop", "x", "echo", false, "best_of", 1L, "suffix", "",
          "logprobs", Json.NULL, "stream", true)},
      new Object[] {TEXT, object("prompt", List.of(1L, 2L, 3L, 4L), "max_tokens", 2L)},
      new Object[] {ROUTE, object("id", "q", "prompt", List.of(1L, 2L, 3L), "max_tokens", 2L,
          "stream", true, "stop_token_ids", List.of(5L))},
      new Object[] {ROUTE, object("prompt", List.of(7L, 8L), "max_tokens", 3L,
          "temperature", 0L, "seed", 9L, "model", "m", "cache_salt", "t")});

  static final List<Object> HOSTILE = List.of(Json.NULL, true, false, 0L, -1L, 1L, 3L, 16L,
      1L << 31, Long.MAX_VALUE, Long.MIN_VALUE, -0.0, 1.0, 1.5, 16.0, 1e308, 4.9e-324, "", "x",
      "none", "text", "user", "\uFFFD", "a".repeat(300), List.of(), Map.of(), List.of(1L),
      List.of("a"), List.of(List.of(1L)), List.of(Json.NULL), object("type", "text"),
      object("type", "text", "text", "hi"), object("type", "image_url"),
      object("include_usage", true), List.of(object("role", "user", "content", "hi")),
      object("role", "user"), nested(30), List.of(16_777_215L, 16_777_216L));

  static final List<String> KEYS = List.of("model", "messages", "prompt", "max_tokens",
      "max_completion_tokens", "temperature", "top_p", "seed", "stream", "stream_options", "n",
      "user", "cache_salt", "stop", "stop_token_ids", "chat_template_kwargs", "logprobs",
      "tool_choice", "tools", "echo", "best_of", "suffix", "id", "name", "content", "role",
      "type", "text", "tool_calls", "max_token", "x");

  static final List<byte[]> SNIPPETS = List.of(bytes(0xFF), bytes(0xC3), bytes(0xED, 0xA0, 0x80),
      bytes(0xEF, 0xBB, 0xBF), bytes(0), ascii("\\u"), ascii("\\ud800"), ascii("\\udc00\\ud800"),
      ascii("\""), ascii(","), ascii(":"), ascii("1e999"), ascii("-"), ascii("0"), ascii("-0"),
      ascii("1.0"), ascii("1E400"), ascii("{"), ascii("}"), ascii("["), ascii("]"), ascii(" "),
      ascii("null"), ascii("[".repeat(70)), ascii("\\"), ascii("\n"), ascii("9".repeat(500)),
      "é😀".getBytes(StandardCharsets.UTF_8));

  /** One mutation: its kind, where it applies and what it puts there (both taken modulo). */
  record Op(int kind, int where, int pick) {}

  @Provide
  Arbitrary<List<Op>> ops() {
    return Combinators.combine(Arbitraries.integers().between(0, 8),
        Arbitraries.integers().between(0, 100_000), Arbitraries.integers().between(0, 100_000))
        .as(Op::new).list().ofMinSize(0).ofMaxSize(4);
  }

  @Property(tries = 400)
  void everyBodyGetsOneAnswerNeverA500AndEveryAcceptedRequestRunsOnce(
      @ForAll @IntRange(min = 0, max = 6) int base, @ForAll("ops") List<Op> ops)
      throws Exception {
    String path = (String) BASES.get(base)[0];
    Object value = copy(BASES.get(base)[1]);
    for (Op op : ops) {
      if (op.kind() < 4) {
        value = mutate(value, op);
      }
    }
    byte[] body = Json.write(value).getBytes(StandardCharsets.UTF_8);
    for (Op op : ops) {
      if (op.kind() >= 4) {
        body = mutate(body, op);
      }
    }
    int before = submitted.get();
    lastOutcome = -1;
    HttpResponse<byte[]> resp = client.sendAsync(HttpRequest.newBuilder(
            URI.create("http://" + address + path))
        .header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofByteArray(body)).build(),
        HttpResponse.BodyHandlers.ofByteArray()).get(30, TimeUnit.SECONDS);
    String text = new String(resp.body(), StandardCharsets.UTF_8);
    String sent = new String(body, StandardCharsets.UTF_8);
    String context = path + " " + abbreviated(sent) + " -> " + resp.statusCode() + " "
        + abbreviated(text);
    Await.until(() -> endpoint.inFlight() == 0 && endpoint.openStreams() == 0,
        "every slot and stream ended: " + context);
    int runs = submitted.get() - before;
    assertTrue(runs <= 1, "submitted " + runs + " times: " + context);
    if (!isUtf8(body)) {
      assertEquals(0, runs, "a body that is not UTF-8 is refused, not repaired: " + context);
    }
    int status = resp.statusCode();
    assertNotEquals(500, status, context);
    String type = resp.headers().firstValue("Content-Type").orElse("");
    if (runs == 0) {
      assertEquals(400, status, "refused without running: " + context);
      checkError(path, status, text, context);
      return;
    }
    boolean streamed = lastStreamed;
    switch (lastOutcome) {
      case 1 -> { // busy before any output: the status answer, streamed or not
        assertEquals(503, status, context);
        assertEquals("1", resp.headers().firstValue("Retry-After").orElse(null), context);
        checkError(path, status, text, context);
      }
      case 2 -> {
        if (streamed && status == 200) { // a chunk, then the failure: an error event, no [DONE]
          List<Object> events = Sse.parse(text);
          assertFalse(events.contains(Sse.DONE), context);
          Object last = events.get(events.size() - 1);
          assertTrue(last instanceof Map<?, ?> m && m.containsKey("error"), context);
          assertTrue(events.size() >= 2, "a stream starts with a chunk, not an error: " + context);
        } else { // not streamed, or its piece showed nothing (a stop): the status answer
          assertEquals(504, status, context);
          checkError(path, status, text, context);
        }
      }
      case 0 -> {
        assertEquals(200, status, context);
        if (streamed) {
          assertEquals(StreamedAnswer.CONTENT_TYPE, type, context);
          for (Map<?, ?> e : Sse.chunks(text)) {
            assertFalse(e.containsKey("error"), context);
          }
        } else {
          Map<?, ?> m = (Map<?, ?>) Json.parse(text);
          if (path.equals(ROUTE)) {
            assertTrue(m.get("token_ids") instanceof List<?>, context);
          } else {
            assertEquals(path.equals(CHAT) ? "chat.completion" : "text_completion",
                m.get("object"), context);
            assertEquals(1, ((List<?>) m.get("choices")).size(), context);
          }
        }
      }
      default -> fail("no outcome recorded: " + context);
    }
  }

  /** A refusal or failure: the route's error shape, OpenAI's on the OpenAI routes. */
  private static void checkError(String path, int status, String text, String context) {
    Map<?, ?> m = (Map<?, ?>) Json.parse(text);
    if (path.equals(ROUTE)) {
      assertTrue(m.get("error") instanceof String s && !s.isEmpty(), context);
      return;
    }
    Map<?, ?> error = (Map<?, ?>) m.get("error");
    assertEquals(List.of("message", "type", "param", "code"), List.copyOf(error.keySet()),
        context);
    assertTrue(error.get("message") instanceof String s && !s.isEmpty(), context);
    assertEquals(OpenAiAnswers.errorType(status), error.get("type"), context);
    assertTrue(error.get("code") instanceof String, context);
  }

  // ------------------------------------------------------------------------ mutations

  /** A value mutation: a member or element replaced, removed or added, or a deep value. */
  static Object mutate(Object root, Op op) {
    List<Object> containers = new ArrayList<>();
    collect(root, containers);
    if (containers.isEmpty()) {
      return copy(HOSTILE.get(op.pick() % HOSTILE.size()));
    }
    Object c = containers.get(op.where() % containers.size());
    Object hostile = copy(op.kind() == 3 ? nested(5 + op.pick() % 20)
        : HOSTILE.get(op.pick() % HOSTILE.size()));
    if (c instanceof Map<?, ?> raw) {
      @SuppressWarnings("unchecked")
      Map<String, Object> m = (Map<String, Object>) raw;
      List<String> keys = new ArrayList<>(m.keySet());
      if (op.kind() == 2 || keys.isEmpty()) {
        m.put(KEYS.get(op.pick() % KEYS.size()), hostile);
      } else if (op.kind() == 1) {
        m.remove(keys.get(op.pick() % keys.size()));
      } else {
        m.put(keys.get(op.pick() % keys.size()), hostile);
      }
    } else {
      @SuppressWarnings("unchecked")
      List<Object> l = (List<Object>) c;
      if (op.kind() == 2 || l.isEmpty()) {
        l.add(l.isEmpty() ? 0 : op.pick() % (l.size() + 1), hostile);
      } else if (op.kind() == 1) {
        l.remove(op.pick() % l.size());
      } else {
        l.set(op.pick() % l.size(), hostile);
      }
    }
    return root;
  }

  /**
   * A byte mutation: a snippet inserted (anywhere, or at the start of a string value) or put in
   * place of a byte, a byte removed, a cut.
   */
  static byte[] mutate(byte[] b, Op op) {
    int at = op.where() % (b.length + 1);
    byte[] snippet = SNIPPETS.get(op.pick() % SNIPPETS.size());
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    switch (op.kind()) {
      case 4 -> {
        out.write(b, 0, at);
        out.writeBytes(snippet);
        out.write(b, at, b.length - at);
      }
      case 5 -> {
        out.write(b, 0, Math.min(at, b.length));
        if (at < b.length) {
          out.write(b, at + 1, b.length - at - 1);
        }
      }
      case 6 -> out.write(b, 0, at);
      case 8 -> { // into a string value: after the quote that opens one
        String text = new String(b, StandardCharsets.ISO_8859_1);
        List<Integer> starts = new ArrayList<>();
        for (int i = text.indexOf(":\""); i >= 0; i = text.indexOf(":\"", i + 1)) {
          starts.add(i + 2);
        }
        int s = starts.isEmpty() ? at : starts.get(op.where() % starts.size());
        out.write(b, 0, s);
        out.writeBytes(snippet);
        out.write(b, s, b.length - s);
      }
      default -> {
        out.write(b, 0, Math.min(at, b.length));
        out.writeBytes(snippet);
        if (at < b.length) {
          out.write(b, at + 1, b.length - at - 1);
        }
      }
    }
    return out.toByteArray();
  }

  /** Whether {@code b} is well-formed UTF-8 (the reference: the JDK's strict decoder). */
  private static boolean isUtf8(byte[] b) {
    try {
      StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(b));
      return true;
    } catch (java.nio.charset.CharacterCodingException e) {
      return false;
    }
  }

  private static void collect(Object v, List<Object> out) {
    if (v instanceof Map<?, ?> m) {
      out.add(v);
      m.values().forEach(x -> collect(x, out));
    } else if (v instanceof List<?> l) {
      out.add(v);
      l.forEach(x -> collect(x, out));
    }
  }

  /** A modifiable deep copy. */
  private static Object copy(Object v) {
    if (v instanceof Map<?, ?> m) {
      Map<String, Object> c = new LinkedHashMap<>();
      m.forEach((k, x) -> c.put((String) k, copy(x)));
      return c;
    }
    if (v instanceof List<?> l) {
      List<Object> c = new ArrayList<>();
      l.forEach(x -> c.add(copy(x)));
      return c;
    }
    return v;
  }

  private static Map<String, Object> object(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  private static Object nested(int depth) {
    Object v = 1L;
    for (int i = 0; i < depth; i++) {
      v = i % 2 == 0 ? List.of(v) : Map.of("a", v);
    }
    return v;
  }

  private static byte[] bytes(int... b) {
    byte[] out = new byte[b.length];
    for (int i = 0; i < b.length; i++) {
      out[i] = (byte) b[i];
    }
    return out;
  }

  private static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  private static String abbreviated(String s) {
    return s.length() <= 600 ? s : s.substring(0, 600) + "...";
  }
}
