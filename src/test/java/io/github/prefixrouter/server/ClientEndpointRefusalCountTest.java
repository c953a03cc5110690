package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.testing.Await;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The requests the client endpoint refuses itself are counted: 400 and 413 (a body that is not
 * JSON, not UTF-8, cannot be read, is too large, or has invalid fields) in
 * {@code rejected_invalid}, 404 and 405 (a path or a method this port does not serve) in
 * {@code rejected_not_found}, each once and in no other counter. They were answered and counted
 * nowhere, so a client sending garbage left no trace in {@code /v1/stats} or {@code /metrics}.
 */
class ClientEndpointRefusalCountTest {

  private static final long NOW = 1_767_225_600L;
  /** The gauges of the {@code client} section; every other key is a counter. */
  private static final Set<String> GAUGES =
      Set.of("in_flight", "streams_open", "body_budget_held_bytes");

  private final StubNode stub = new StubNode();
  private final FakeTokenizer tokenizer = new FakeTokenizer();
  private ClientEndpoint endpoint;
  private int port;

  private void start(Duration ioTimeout) throws Exception {
    when(stub.node.stats()).thenReturn(StatsFixtures.nodeStats());
    endpoint = new ClientEndpoint(stub.node, List::of, 64, ioTimeout, "base",
        ClientEndpoint.DEFAULT_READER_THREADS, ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS,
        tokenizer, () -> NOW, 7L);
    InetSocketAddress a = endpoint.start("127.0.0.1", 0);
    port = a.getPort();
  }

  @AfterEach
  void stop() {
    if (endpoint != null) {
      endpoint.stop();
    }
  }

  /** The endpoint's counters now, by their key in {@code /v1/stats}. */
  private Map<String, Long> counters() {
    for (StatsTable.Section<?> s : endpoint.sections()) {
      if ("client".equals(s.key())) {
        Map<String, Long> m = new LinkedHashMap<>();
        s.json().forEach((k, v) -> {
          if (!GAUGES.contains(k)) {
            m.put(k, ((Number) v).longValue());
          }
        });
        return m;
      }
    }
    throw new AssertionError("no client section");
  }

  private long total() {
    return counters().values().stream().mapToLong(Long::longValue).sum();
  }

  /**
   * Sends {@code head} (the request line and headers, without the blank line) and {@code body},
   * closes the sending side and reads the answer to its end.
   */
  private String exchange(String head, String body) throws Exception {
    try (Socket s = new Socket("127.0.0.1", port)) {
      s.setSoTimeout(10_000);
      OutputStream out = s.getOutputStream();
      out.write((head + "\r\nHost: x\r\nConnection: close\r\n\r\n" + body)
          .getBytes(StandardCharsets.ISO_8859_1));
      out.flush();
      s.shutdownOutput();
      return new String(s.getInputStream().readAllBytes(), StandardCharsets.ISO_8859_1);
    }
  }

  private static String post(String path, String body) {
    return "POST " + path + " HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: "
        + body.getBytes(StandardCharsets.ISO_8859_1).length;
  }

  @Test
  void everyRequestTheEndpointRefusesIsCountedOnce() throws Exception {
    start(Duration.ofSeconds(20));
    // request head and body -> the status it is answered and the counter that counts it
    record Refusal(String what, String head, String body, int status, String counter) {}
    List<Refusal> refusals = new java.util.ArrayList<>();
    for (String path : List.of(ClientEndpoint.COMPLETIONS, ClientEndpoint.OPENAI_COMPLETIONS,
        ClientEndpoint.OPENAI_CHAT)) {
      String invalid = path.equals(ClientEndpoint.COMPLETIONS) ? "{\"prompt\":\"text\"}"
          : "{\"prompt\":\"a\",\"messages\":[],\"max_token\":1}";
      String p = "POST " + path + " HTTP/1.1\r\nContent-Type: application/json";
      refusals.addAll(List.of(
          new Refusal("malformed JSON", post(path, "{\"prompt\":[1,"), "{\"prompt\":[1,", 400,
              "rejected_invalid"),
          new Refusal("not UTF-8", post(path, "{\"prompt\":\"\u00ff\"}"), "{\"prompt\":\"\u00ff\"}",
              400, "rejected_invalid"),
          new Refusal("an invalid field", post(path, invalid), invalid, 400, "rejected_invalid"),
          new Refusal("too large", p + "\r\nContent-Length: " + (9 << 20), "{\"prompt\":[1", 413,
              "rejected_invalid"),
          new Refusal("cut off mid-chunk", p + "\r\nTransfer-Encoding: chunked",
              "10\r\nabc", 400, "rejected_invalid"),
          new Refusal("a chunk longer than its size", p + "\r\nTransfer-Encoding: chunked",
              "3\r\nabcdef\r\n0\r\n\r\n", 400, "rejected_invalid"),
          new Refusal("shorter than its Content-Length", p + "\r\nContent-Length: 100",
              "{\"prompt\":[1", 400, "rejected_invalid"),
          new Refusal("a method the path does not take", "GET " + path + " HTTP/1.1", "", 405,
              "rejected_not_found")));
    }
    refusals.addAll(List.of(
        new Refusal("no such path", "GET /nope HTTP/1.1", "", 404, "rejected_not_found"),
        new Refusal("no such OpenAI path", "GET /v1/embeddings HTTP/1.1", "", 404,
            "rejected_not_found"),
        new Refusal("no such path, with a body", post("/v1/embeddings", "{}"), "{}", 404,
            "rejected_not_found"),
        new Refusal("POST /v1/stats", post(ClientEndpoint.STATS, "{}"), "{}", 405,
            "rejected_not_found"),
        new Refusal("POST /metrics", "POST /metrics HTTP/1.1\r\nContent-Length: 0", "", 405,
            "rejected_not_found"),
        new Refusal("DELETE /health", "DELETE /health HTTP/1.1", "", 405, "rejected_not_found"),
        new Refusal("POST /v1/models", "POST /v1/models HTTP/1.1\r\nContent-Length: 0", "", 405,
            "rejected_not_found")));
    for (Refusal r : refusals) {
      Map<String, Long> before = counters();
      String answer = exchange(r.head(), r.body());
      String what = r.what() + " (" + r.head().substring(0, r.head().indexOf(" HTTP")) + ")";
      assertTrue(answer.startsWith("HTTP/1.1 " + r.status()), what + ": " + answer);
      assertEquals(before.values().stream().mapToLong(Long::longValue).sum() + 1, total(),
          what + ": counted once, in some counter: " + counters());
      assertEquals(before.get(r.counter()) + 1, counters().get(r.counter()),
          what + ": counted in " + r.counter() + ": " + counters());
    }
    assertEquals(0, stub.futures.size());
    assertEquals(0, tokenizer.calls.size());
  }

  /**
   * A request refused after its prompt was tokenized (its {@code max_tokens} beyond the room the
   * model's context leaves) is counted in {@code rejected_invalid}; one the tokenizer refused is
   * counted in {@code tokenize_refused} alone.
   */
  @Test
  void aRequestRefusedAfterTokenizingIsCountedOnce() throws Exception {
    start(Duration.ofSeconds(20));
    tokenizer.maxModelLen = 8;
    String body = "{\"model\":\"base\",\"prompt\":\"hello\",\"max_tokens\":100}";
    String answer = exchange(post(ClientEndpoint.OPENAI_COMPLETIONS, body), body);
    assertTrue(answer.startsWith("HTTP/1.1 400"), answer);
    assertTrue(answer.contains("at most 3 tokens can be generated"), answer);
    assertEquals(1, total(), counters().toString());
    assertEquals(1L, counters().get("rejected_invalid"), counters().toString());
    tokenizer.mode = FakeTokenizer.Mode.INVALID;
    answer = exchange(post(ClientEndpoint.OPENAI_COMPLETIONS, body), body);
    assertTrue(answer.startsWith("HTTP/1.1 400"), answer);
    assertEquals(2, total(), counters().toString());
    assertEquals(1L, counters().get("tokenize_refused"), counters().toString());
    assertEquals(0, stub.futures.size());
  }

  /**
   * A connection reset mid-body gets no answer it could read, but its refusal is counted all the
   * same; one whose body the I/O deadline cut is counted as a slow connection alone.
   */
  @Test
  void aBodyResetIsCountedAndOneCutByTheDeadlineOnlyAsSlow() throws Exception {
    start(Duration.ofMillis(500));
    for (String path : List.of(ClientEndpoint.COMPLETIONS, ClientEndpoint.OPENAI_CHAT)) {
      try (Socket s = new Socket("127.0.0.1", port)) {
        s.getOutputStream().write((post(path, "x".repeat(100)) + "\r\nHost: x\r\n\r\n{\"pr")
            .getBytes(StandardCharsets.US_ASCII));
        s.getOutputStream().flush();
        // the body is being read once it holds part of the body budget
        Await.until(() -> endpoint.bodyBudgetAvailable() < endpoint.bodyBudget(),
            "the body being read");
        s.setSoLinger(true, 0);
      }
    }
    Await.until(() -> total() >= 2, "two resets counted: " + counters());
    assertEquals(2L, counters().get("rejected_invalid"), counters().toString());
    for (String path : List.of(ClientEndpoint.COMPLETIONS, ClientEndpoint.OPENAI_CHAT)) {
      try (Socket s = new Socket("127.0.0.1", port)) {
        s.setSoTimeout(10_000);
        s.getOutputStream().write((post(path, "x".repeat(100)) + "\r\nHost: x\r\n\r\n{\"pr")
            .getBytes(StandardCharsets.US_ASCII));
        s.getOutputStream().flush(); // and nothing more: cut at the deadline
        s.getInputStream().readAllBytes();
      } catch (java.net.SocketException reset) {
        // closed with a reset: fine
      }
    }
    Await.until(() -> counters().get("slow_connections_closed") >= 2,
        "two slow connections counted: " + counters());
    assertEquals(4, total(), counters().toString());
    assertEquals(2L, counters().get("rejected_invalid"), counters().toString());
  }

  /** The counters are in {@code /v1/stats} and {@code /metrics}. */
  @Test
  void theCountersAreInStatsAndMetrics() throws Exception {
    start(Duration.ofSeconds(20));
    exchange(post(ClientEndpoint.COMPLETIONS, "{"), "{");
    exchange("GET /nope HTTP/1.1", "");
    exchange("GET /nope HTTP/1.1", "");
    String stats = exchange("GET " + ClientEndpoint.STATS + " HTTP/1.1", "");
    assertTrue(stats.contains("\"rejected_invalid\":1"), stats);
    assertTrue(stats.contains("\"rejected_not_found\":2"), stats);
    String metrics = exchange("GET " + ClientEndpoint.METRICS + " HTTP/1.1", "");
    assertTrue(metrics.contains("\nprefix_router_client_rejected_invalid_total 1\n"), metrics);
    assertTrue(metrics.contains("\nprefix_router_client_rejected_not_found_total 2\n"), metrics);
  }
}
