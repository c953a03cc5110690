package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.doAnswer;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.server.PrometheusTextParser.Family;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.Await;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The client port's body budget: the heap the request bodies being read hold at once, all
 * reader threads together. A request whose share is held by other bodies is answered 503 with
 * {@code Retry-After} and counted; it is served once they give it back; ordinary requests pass
 * at the smallest budget; every way a read ends gives its whole share back.
 */
class ClientEndpointBodyBudgetTest {

  private static final int KIB = 1 << 10;
  private static final int MIB = 1 << 20;
  /** The client port's first step of a body's share. */
  private static final int FIRST_STEP = 64 * KIB;

  private final StubNode stub = new StubNode();
  private final HttpClient client =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private final List<Socket> held = new ArrayList<>();
  private final AtomicInteger submitted = new AtomicInteger();
  private ClientEndpoint endpoint;
  private String address;

  private void start(Duration ioTimeout) throws IOException {
    when(stub.node.stats()).thenReturn(StatsFixtures.nodeStats());
    doAnswer(inv -> {
      submitted.incrementAndGet();
      return CompletableFuture.completedFuture(response(inv.getArgument(0)));
    }).when(stub.node).submit(any());
    endpoint = new ClientEndpoint(stub.node, List::of, 256, ioTimeout, "base",
        ClientEndpoint.DEFAULT_READER_THREADS, ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS,
        new ReferenceTokenizer(1024, 64), () -> 1_767_225_600L, 3L,
        ClientEndpoint.MIN_BODY_BUDGET);
    InetSocketAddress a = endpoint.start("127.0.0.1", 0);
    address = "127.0.0.1:" + a.getPort();
  }

  private static InferenceResponse response(InferenceRequest r) {
    return new InferenceResponse(r.id(), new EngineResult(new int[] {7}, "a",
        r.tokens().length, 0, 1, 1), "solo", false, 1, FallbackCause.NONE,
        StubNode.LOCAL_DECISION);
  }

  @AfterEach
  void stop() throws IOException {
    for (Socket s : held) {
      s.close();
    }
    if (endpoint != null) {
      endpoint.stop();
    }
  }

  private CompletableFuture<HttpResponse<String>> postAsync(String path, String body) {
    return client.sendAsync(HttpRequest.newBuilder(URI.create("http://" + address + path))
        .header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private HttpResponse<String> post(String path, String body) throws Exception {
    return postAsync(path, body).get(30, TimeUnit.SECONDS);
  }

  private HttpResponse<String> get(String path) throws Exception {
    return client.send(HttpRequest.newBuilder(URI.create("http://" + address + path)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** A connection that sends {@code head} and then {@code bodyBytes} bytes of body, and stalls. */
  private Socket send(String head, int bodyBytes) throws IOException {
    return send("127.0.0.1", head, bodyBytes);
  }

  /** {@link #send(String, int)} from the local address {@code from}. */
  private Socket send(String from, String head, int bodyBytes) throws IOException {
    Socket s = new Socket();
    held.add(s);
    s.bind(new InetSocketAddress(from, 0));
    s.connect(new InetSocketAddress("127.0.0.1", Integer.parseInt(address.split(":")[1])), 5_000);
    OutputStream out = s.getOutputStream();
    out.write(head.getBytes(StandardCharsets.US_ASCII));
    out.write(new byte[bodyBytes]);
    out.flush();
    return s;
  }

  private static String head(String path, String lengthHeader) {
    return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + "Connection: close\r\n" + lengthHeader + "\r\n\r\n";
  }

  /** What a connection reads until its end: the answer, or "" if it was closed without one. */
  private static String answer(Socket s) throws IOException {
    s.setSoTimeout(20_000);
    InputStream in = s.getInputStream();
    StringBuilder b = new StringBuilder();
    try {
      for (int c; (c = in.read()) >= 0; ) {
        b.append((char) c);
      }
    } catch (SocketException reset) {
      // closed with unread bytes: what came before the reset is the answer
    }
    return b.toString();
  }

  /** The first line of what a connection reads: its answer's status line. */
  private static String statusLine(Socket s) throws IOException {
    s.setSoTimeout(20_000);
    InputStream in = s.getInputStream();
    StringBuilder b = new StringBuilder();
    for (int c; (c = in.read()) >= 0 && c != '\n'; ) {
      b.append((char) c);
    }
    return b.toString().strip();
  }

  private void awaitWholeBudget(String after) throws InterruptedException {
    Await.until(() -> endpoint.bodyBudgetAvailable() == ClientEndpoint.MIN_BODY_BUDGET,
        "the whole budget is back after " + after + " (available "
            + endpoint.bodyBudgetAvailable() + ")");
  }

  /**
   * Connections that hold the whole smallest budget, each declaring an 8 MiB body and stalling
   * once it has sent part of it. A body holds the step its bytes have reached, twice what it has
   * sent (64 KiB when it has sent nothing): eight that sent 4 MiB hold 64 MiB, the next ones 1
   * MiB, then 4 MiB, 2 MiB, ... 128 KiB, and two that sent nothing 64 KiB each. One at a time,
   * so that each has room for the step it copies to; from 127.0.0.2 and 127.0.0.3, not the
   * tests' address.
   * {@code held.get(0)} holds 8 MiB.
   */
  private void holdTheWholeBudget() throws Exception {
    List<Integer> sent = new ArrayList<>(java.util.Collections.nCopies(8, 4 * MIB));
    sent.add(MIB / 2); // the smallest budget's MiB over 72, while there is room to copy it
    for (int b = 2 * MIB; b >= FIRST_STEP; b /= 2) {
      sent.add(b);
    }
    sent.add(0);
    sent.add(0);
    long holding = 0;
    for (int i = 0; i < sent.size(); i++) {
      send("127.0.0." + (2 + i % 2), head(ClientEndpoint.COMPLETIONS, "Content-Length: " + 8 * MIB),
          sent.get(i));
      holding += Math.max(FIRST_STEP, 2L * sent.get(i));
      long available = ClientEndpoint.MIN_BODY_BUDGET - holding;
      Await.until(() -> endpoint.bodyBudgetAvailable() == available, "body " + i + " holds its "
          + "step (available " + endpoint.bodyBudgetAvailable() + ", not " + available + ")");
    }
  }

  private static Map<?, ?> json(String body) {
    return (Map<?, ?>) Json.parse(body);
  }

  @Test
  void aRequestWhoseShareIsHeldIsRefusedWithRetryAfterAndServedOnceItComesBack()
      throws Exception {
    start(Duration.ofSeconds(60));
    holdTheWholeBudget();
    HttpResponse<String> route = post(ClientEndpoint.COMPLETIONS, "{\"prompt\":[1,2,3]}");
    assertEquals(503, route.statusCode(), route.body());
    assertEquals("1", route.headers().firstValue("Retry-After").orElse(""));
    // its body is left unread: the server closes the connection
    assertEquals("close", route.headers().firstValue("Connection").orElse(""));
    assertTrue(((String) json(route.body()).get("error")).contains("try again"), route.body());
    HttpResponse<String> openAi = post(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"model\":\"base\",\"prompt\":\"hello\"}");
    assertEquals(503, openAi.statusCode(), openAi.body());
    assertEquals("1", openAi.headers().firstValue("Retry-After").orElse(""));
    assertEquals("close", openAi.headers().firstValue("Connection").orElse(""));
    assertEquals("busy", ((Map<?, ?>) json(openAi.body()).get("error")).get("code"),
        openAi.body());
    assertEquals(0, submitted.get(), "nothing submitted");
    assertEquals(2, endpoint.bodyBudgetRefused());
    assertEquals(0, endpoint.readsRefused(), "counted apart from the reader slots");
    Map<?, ?> stats = (Map<?, ?>) json(get(ClientEndpoint.STATS).body()).get("client");
    assertEquals(2L, stats.get("body_budget_refused"));
    assertEquals(ClientEndpoint.MIN_BODY_BUDGET, stats.get("body_budget_held_bytes"));
    Map<String, Family> m = PrometheusTextParser.parse(get(ClientEndpoint.METRICS).body());
    assertEquals(2.0, m.get("prefix_router_client_body_budget_refused_total").value());
    assertEquals((double) ClientEndpoint.MIN_BODY_BUDGET,
        m.get("prefix_router_client_body_budget_held_bytes").value());

    // one held body goes away: its share comes back, and the next request is served
    held.get(0).close();
    Await.until(() -> endpoint.bodyBudgetAvailable() == 8 * MIB, "one body's share is back");
    HttpResponse<String> served = post(ClientEndpoint.COMPLETIONS, "{\"prompt\":[1,2,3]}");
    assertEquals(200, served.statusCode(), served.body());
    HttpResponse<String> text = post(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"model\":\"base\",\"prompt\":\"hello\"}");
    assertEquals(200, text.statusCode(), text.body());
    assertEquals(2, endpoint.bodyBudgetRefused());
    for (Socket s : held) {
      s.close();
    }
    awaitWholeBudget("the held bodies' connections closed");
  }

  /**
   * A request that waits for its share is served when another request gives its share back
   * within the wait: the refusal comes only once none has been given back for the wait (1 s;
   * here 30 s, so that a stall of the machine between the request's wait and the share coming
   * back does not end the wait, as one of 700 ms did after a fixed sleep of 300 ms). The share
   * comes back only once the request is seen waiting: one refused at once never is.
   */
  @Test
  void aRequestWaitingForItsShareIsServedWhenOneComesBack() throws Exception {
    start(Duration.ofSeconds(60));
    endpoint.bodyBudgetWait(Duration.ofSeconds(30));
    holdTheWholeBudget();
    CompletableFuture<HttpResponse<String>> waiting =
        postAsync(ClientEndpoint.COMPLETIONS, "{\"prompt\":[4,5]}");
    Await.until(() -> endpoint.bodyBudgetWaiting() == 1, "the request waits for its share");
    held.get(0).close();
    HttpResponse<String> r = waiting.get(30, TimeUnit.SECONDS);
    assertEquals(200, r.statusCode(), r.body());
    assertEquals(0, endpoint.bodyBudgetRefused());
  }

  /**
   * Clients that declare the largest body and send nothing hold its first step alone, 64 KiB
   * each, not the 8 MiB they declared: fifteen of them (120 MiB declared, more than the smallest
   * budget) hold 960 KiB of it, and ordinary requests are served meanwhile. A body's share used
   * to be its Content-Length, taken before a byte of it arrived: nine such clients held the
   * whole budget, and every other request was answered 503 until they were cut.
   */
  @Test
  void clientsThatDeclareTheLargestBodyAndSendNothingHoldItsFirstStepAlone() throws Exception {
    start(Duration.ofSeconds(60));
    int stalled = 15;
    for (int i = 0; i < stalled; i++) {
      send("127.0.0." + (2 + i % 2), head(ClientEndpoint.COMPLETIONS,
          "Content-Length: " + 8 * MIB), 0);
    }
    long firstSteps = (long) stalled * FIRST_STEP;
    Await.until(() -> ClientEndpoint.MIN_BODY_BUDGET - endpoint.bodyBudgetAvailable()
        >= firstSteps, "the stalled bodies hold their shares");
    Map<?, ?> stats = (Map<?, ?>) json(get(ClientEndpoint.STATS).body()).get("client");
    assertEquals(firstSteps, stats.get("body_budget_held_bytes"));

    StringBuilder ids = new StringBuilder("[100000");
    for (int i = 1; i < 500_000; i++) { // 3.5 MB of body
      ids.append(',').append(100_000 + i % 1000);
    }
    ids.append(']');
    HttpResponse<String> large = post(ClientEndpoint.COMPLETIONS, "{\"prompt\":" + ids + "}");
    assertEquals(200, large.statusCode(), large.body());
    HttpResponse<String> text = post(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"model\":\"base\",\"prompt\":\"hello\"}");
    assertEquals(200, text.statusCode(), text.body());
    assertEquals(0, endpoint.bodyBudgetRefused());
    Await.until(() -> ClientEndpoint.MIN_BODY_BUDGET - endpoint.bodyBudgetAvailable()
        == firstSteps, "the served requests gave their shares back");
    for (Socket s : held) {
      s.close();
    }
    awaitWholeBudget("the stalled bodies' connections closed");
  }

  /**
   * Ordinary requests (token ids of hundreds of KB, text prompts, conversations), 48 at once on
   * both kinds of route, all pass at the smallest budget: each takes only what its body needs,
   * and the budget is whole again afterwards.
   */
  @Test
  void ordinaryRequestsAreServedAtTheSmallestBudget() throws Exception {
    start(Duration.ofSeconds(20));
    StringBuilder ids = new StringBuilder("[100000");
    for (int i = 1; i < 60_000; i++) { // 420 KB of body
      ids.append(',').append(100_000 + i);
    }
    ids.append(']');
    String text = "the quick brown fox jumps over the lazy dog ".repeat(4_000); // 176 KB
    List<CompletableFuture<HttpResponse<String>>> answers = new ArrayList<>();
    for (int i = 0; i < 16; i++) {
      answers.add(postAsync(ClientEndpoint.COMPLETIONS, "{\"prompt\":" + ids + "}"));
      answers.add(postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
          "{\"model\":\"base\",\"prompt\":\"" + text + "\"}"));
      answers.add(postAsync(ClientEndpoint.OPENAI_CHAT, "{\"model\":\"base\",\"messages\":["
          + "{\"role\":\"system\",\"content\":\"be terse\"},"
          + "{\"role\":\"user\",\"content\":\"" + text + "\"}]}"));
    }
    for (CompletableFuture<HttpResponse<String>> a : answers) {
      HttpResponse<String> r = a.get(60, TimeUnit.SECONDS);
      assertEquals(200, r.statusCode(), r.body());
    }
    assertEquals(0, endpoint.bodyBudgetRefused());
    assertEquals(48, submitted.get());
    awaitWholeBudget("48 requests");
  }

  /**
   * Every way a read ends gives the whole share back: a 400 for JSON that is not an object,
   * for bytes that are not UTF-8 and for a body whose parse would take too much; a 413 by the
   * Content-Length and by the bytes sent without one; a client that closes mid-body; on both
   * kinds of route. (A client cut at the I/O deadline: the next test.)
   */
  @Test
  void theBudgetIsWholeAgainAfterEveryWayAReadEnds() throws Exception {
    start(Duration.ofSeconds(60));
    StringBuilder junk = new StringBuilder("{\"prompt\":[1],\"junk\":[{}");
    while (junk.length() < 8 * MIB - 16) {
      junk.append(",{}");
    }
    junk.append("]}");
    for (String path : List.of(ClientEndpoint.COMPLETIONS, ClientEndpoint.OPENAI_COMPLETIONS)) {
      for (String bad : List.of("[1]", "{\"prompt\":", junk.toString())) {
        HttpResponse<String> r = post(path, bad);
        assertEquals(400, r.statusCode(), path + ": " + r.body());
        awaitWholeBudget(path + ": a 400 for " + bad.substring(0, Math.min(12, bad.length())));
      }
      Socket notUtf8 = send(head(path, "Content-Length: 14"), 0);
      notUtf8.getOutputStream().write(new byte[] {'{', '"', 'p', '"', ':', '"', (byte) 0xC3,
          '"', '}', ' ', ' ', ' ', ' ', ' '});
      assertTrue(answer(notUtf8).startsWith("HTTP/1.1 400"), path);
      awaitWholeBudget(path + ": a 400 for bytes that are not UTF-8");
      // its status line: the server then drains the body it never gets until the I/O deadline
      assertTrue(statusLine(send(head(path, "Content-Length: " + (8 * MIB + 1)), 0))
          .startsWith("HTTP/1.1 413"), path);
      awaitWholeBudget(path + ": a 413 by the Content-Length");
      // a few bytes past the cap: with more still being sent when the 413 is written, the
      // server's close can reset the connection before the client reads its answer
      HttpResponse<String> chunked = client.sendAsync(
          HttpRequest.newBuilder(URI.create("http://" + address + path))
              .POST(HttpRequest.BodyPublishers.fromPublisher(
                  HttpRequest.BodyPublishers.ofString(junk + " ".repeat(64)))).build(),
          HttpResponse.BodyHandlers.ofString()).get(30, TimeUnit.SECONDS);
      assertEquals(413, chunked.statusCode(), chunked.body());
      awaitWholeBudget(path + ": a 413 of the bytes sent without a length");
      send(head(path, "Content-Length: " + 4 * MIB), MIB).close();
      awaitWholeBudget(path + ": a client that closed mid-body");
    }
    assertEquals(0, endpoint.bodyBudgetRefused());
  }

  /**
   * A client that stalls mid-body until the I/O deadline cuts it gives its whole share back, on
   * both kinds of route.
   */
  @Test
  void theBudgetIsWholeAgainAfterAClientIsCutAtTheIoDeadlineMidBody() throws Exception {
    start(Duration.ofSeconds(1));
    for (String path : List.of(ClientEndpoint.COMPLETIONS, ClientEndpoint.OPENAI_COMPLETIONS)) {
      Socket stalled = send(head(path, "Transfer-Encoding: chunked"), 0);
      stalled.getOutputStream().write(("100000\r\n" + "a".repeat(1 << 20) + "\r\n")
          .getBytes(StandardCharsets.US_ASCII));
      stalled.getOutputStream().flush();
      Await.until(() -> endpoint.bodyBudgetAvailable() < ClientEndpoint.MIN_BODY_BUDGET,
          "a stalled body holds its share");
      answer(stalled); // closed at the I/O deadline
      awaitWholeBudget(path + ": a client cut at the I/O deadline mid-body");
    }
    // counted once the reader has closed the connection, which the client may see first
    Await.until(() -> endpoint.slowConnectionsClosed() == 2, "both cuts counted (counted "
        + endpoint.slowConnectionsClosed() + ")");
    assertEquals(0, endpoint.bodyBudgetRefused());
  }

  @Test
  void aBudgetBelowOneLargestRequestIsRefused() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> new ClientEndpoint(stub.node, List::of, 16, Duration.ofSeconds(5), "base",
            ClientEndpoint.DEFAULT_READER_THREADS,
            ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS, null, () -> 0L, 1L,
            ClientEndpoint.MIN_BODY_BUDGET - 1));
    assertEquals("bodyBudget must be at least 76546048 bytes (one request of the largest body, "
        + "read or tokenized), was 76546047", e.getMessage());
    assertEquals(73L * MIB, ClientEndpoint.MIN_BODY_BUDGET);
  }
}
