package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.spi.EngineException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The client endpoint at its edges: a body parsed past the I/O deadline, a
 * failure message JSON cannot carry, a tokenizer URL without a usable host, clients that do
 * not read their answers.
 */
class ClientEndpointEdgeCaseTest {

  private final StubNode stub = new StubNode();
  private final HttpClient client =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private ClientEndpoint endpoint;

  @AfterEach
  void stop() {
    if (endpoint != null) {
      endpoint.stop();
    }
  }

  private int start(Duration ioTimeout) throws Exception {
    when(stub.node.stats()).thenReturn(StatsFixtures.nodeStats());
    endpoint = new ClientEndpoint(stub.node, List::of, 64, ioTimeout, "base");
    InetSocketAddress a = endpoint.start("127.0.0.1", 0);
    return a.getPort();
  }

  /**
   * A body that arrives in time but whose parse outlasts the I/O deadline: the deadline's
   * interrupt lands outside any channel operation, so it closes nothing; the handler must close
   * the connection itself rather than leave the client waiting for ever.
   */
  @Test
  void aBodyWhoseParseOutlastsTheDeadlineIsAnsweredOrClosed() throws Exception {
    int port = start(Duration.ofMillis(250));
    StringBuilder sb = new StringBuilder("{\"prompt\":[");
    while (sb.length() < (8 << 20) - 64) {
      sb.append("99999999999999999999,"); // slow to read: parseLong fails, then parseDouble
    }
    sb.append("1]}");
    byte[] body = sb.toString().getBytes(StandardCharsets.US_ASCII);
    try (Socket s = new Socket("127.0.0.1", port)) {
      s.setSoTimeout(15_000);
      OutputStream out = s.getOutputStream();
      out.write(("POST " + ClientEndpoint.COMPLETIONS + " HTTP/1.1\r\nHost: x\r\n"
          + "Content-Type: application/json\r\nContent-Length: " + body.length + "\r\n\r\n")
          .getBytes(StandardCharsets.US_ASCII));
      try {
        out.write(body);
        out.flush();
      } catch (SocketException closed) {
        return; // a slow sender outlasted the deadline mid-body and was closed: fine too
      }
      InputStream in = s.getInputStream();
      try {
        in.read(); // a status line, or -1 / a reset: the connection was closed; both are fine
      } catch (SocketTimeoutException hang) {
        fail("no answer, and the connection still open, 15 s after the whole body was sent");
      } catch (SocketException closed) {
        // closed: fine
      }
    }
  }

  /**
   * A chunked body whose chunk size overflows an int in the JDK server's parse (2^31 or more) is
   * answered 400, as a body that cannot be read, and the connection is closed after the answer.
   * The server's stream threw {@link IndexOutOfBoundsException}: it was answered 500 and logged
   * as a failure of the node, and the connection stayed open past the I/O timeout.
   */
  @Test
  void aChunkSizeThatOverflowsAnIntIsABadRequestAndClosesTheConnection() throws Exception {
    int port = start(Duration.ofSeconds(60));
    try (Socket s = new Socket("127.0.0.1", port)) {
      s.setSoTimeout(10_000);
      OutputStream out = s.getOutputStream();
      out.write(("POST " + ClientEndpoint.COMPLETIONS + " HTTP/1.1\r\nHost: x\r\n"
          + "Transfer-Encoding: chunked\r\n\r\n80000000\r\nabc\r\n0\r\n\r\n")
          .getBytes(StandardCharsets.US_ASCII));
      out.flush();
      InputStream in = s.getInputStream();
      StringBuilder answer = new StringBuilder();
      try {
        for (int c; (c = in.read()) >= 0; ) {
          answer.append((char) c);
        }
      } catch (SocketTimeoutException open) {
        fail("the connection was left open after the answer: " + answer);
      }
      assertTrue(answer.toString().startsWith("HTTP/1.1 400"), answer.toString());
      assertTrue(answer.toString().contains("cannot read the request body"), answer.toString());
    }
  }

  /**
   * A body whose parsed JSON would take far more memory than the body (8 MiB of
   * {@code [{},{},...]} holds about 260 MB once parsed) is refused with 400 as it is parsed,
   * on both kinds of route, and nothing is submitted; a body of about the same size made of
   * token ids (held as an {@code int} array) is still served.
   */
  @Test
  void aBodyOfTinyValuesIsRefusedWhileTokenIdsOfTheSameSizeAreServed() throws Exception {
    int port = start(Duration.ofSeconds(20));
    StringBuilder junk = new StringBuilder("{\"prompt\":[1],\"max_tokens\":1,\"junk\":[{}");
    while (junk.length() < (8 << 20) - 16) {
      junk.append(",{}");
    }
    junk.append("]}");
    for (String path : List.of(ClientEndpoint.COMPLETIONS, ClientEndpoint.OPENAI_COMPLETIONS)) {
      HttpResponse<String> r = client.send(
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
              .timeout(Duration.ofSeconds(30))
              .POST(HttpRequest.BodyPublishers.ofString(junk.toString())).build(),
          HttpResponse.BodyHandlers.ofString());
      assertEquals(400, r.statusCode(), path + ": " + r.body());
      assertTrue(r.body().contains("bytes of memory once parsed"), path + ": " + r.body());
    }
    assertEquals(0, stub.futures.size());
    StringBuilder ids = new StringBuilder("{\"id\":\"big\",\"max_tokens\":1,\"prompt\":[100000");
    int n = 1;
    while (n < 1_000_000) { // 7 MB, within the prompt limit of 2^20 tokens
      ids.append(',').append(100_000 + n++ % 900_000);
    }
    ids.append("]}");
    CompletableFuture<HttpResponse<String>> served = client.sendAsync(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + ClientEndpoint.COMPLETIONS))
            .POST(HttpRequest.BodyPublishers.ofString(ids.toString())).build(),
        HttpResponse.BodyHandlers.ofString());
    try {
      stub.awaitSubmitted(1);
    } catch (AssertionError e) {
      fail(served.getNow(null) == null ? "nothing submitted" : served.getNow(null).body());
    }
    assertEquals(n, stub.requests.get(0).length());
    stub.futures.get(0).cancel(false);
    served.get(20, TimeUnit.SECONDS);
  }

  /**
   * A body refused as too large by its Content-Length, whose sender then stalls: closing the
   * exchange after the 413 makes the JDK server drain the rest of the body, a blocking read.
   * That drain runs under the I/O deadline, so the connection is closed at the deadline; it was
   * written after the deadline had ended, and the connection stayed open, holding a reader
   * thread, for as long as the sender liked. Both the route's and the OpenAI-style handler.
   */
  @Test
  void aSenderStallingInARefusedBodyIsCutAtTheDeadline() throws Exception {
    int port = start(Duration.ofMillis(500));
    for (String path : List.of(ClientEndpoint.COMPLETIONS, ClientEndpoint.OPENAI_COMPLETIONS)) {
      try (Socket s = new Socket("127.0.0.1", port)) {
        s.setSoTimeout(10_000);
        OutputStream out = s.getOutputStream();
        out.write(("POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + "Content-Length: " + (9 << 20) + "\r\n\r\n{\"prompt\":[1")
            .getBytes(StandardCharsets.US_ASCII));
        out.flush(); // and nothing more
        InputStream in = s.getInputStream();
        StringBuilder answer = new StringBuilder();
        try {
          for (int b; (b = in.read()) >= 0; ) {
            answer.append((char) b);
          }
        } catch (SocketTimeoutException held) {
          fail(path + ": the connection is still open 10 s after the refusal: " + answer);
        } catch (SocketException closed) {
          // reset rather than closed: fine
        }
        assertTrue(answer.toString().startsWith("HTTP/1.1 413"), path + ": " + answer);
      }
    }
  }

  /**
   * A failure whose message JSON cannot carry as it is (a lone surrogate, as an engine's error
   * message cut in the middle of a pair has) keeps its status (502 here), not 500 "cannot be
   * written as JSON".
   */
  @Test
  void aFailureWhoseMessageEndsInHalfAPairKeepsItsStatus() throws Exception {
    int port = start(Duration.ofSeconds(5));
    String cut = "a".repeat(299) + "\uD83D"; // half of U+1F600
    for (boolean stream : new boolean[] {true, false}) {
      int before = stub.futures.size();
      CompletableFuture<HttpResponse<String>> answer = client.sendAsync(
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + ClientEndpoint.COMPLETIONS))
              .POST(HttpRequest.BodyPublishers.ofString(
                  "{\"id\":\"q\",\"prompt\":[1],\"stream\":" + stream + "}")).build(),
          HttpResponse.BodyHandlers.ofString());
      stub.awaitSubmitted(before + 1);
      stub.futures.get(before).completeExceptionally(new RequestFailedException("q",
          "the local engine failed: " + cut, new EngineException(cut, true)));
      HttpResponse<String> r = answer.get(10, TimeUnit.SECONDS);
      statuses.add(stream + ": " + r.statusCode() + " " + r.body());
    }
    assertEquals("[true: 502, false: 502]", statuses.stream()
        .map(x -> x.substring(0, x.indexOf(' ', x.indexOf(' ') + 1))).toList().toString(),
        String.valueOf(statuses));
  }

  private final java.util.List<String> statuses = new java.util.ArrayList<>();

  /**
   * A --tokenizer URL whose host java.net.URI cannot read (an underscore, as in a compose
   * service name) is a bad flag, not a node that refuses every text request as the client's
   * fault.
   */
  @Test
  void aTokenizerUrlWithoutAHostIsABadFlag() {
    String bad = "http://vllm_server:8000/tokenize";
    assertThrows(IllegalArgumentException.class, () -> NodeOptions.parse(new String[] {
        "--id", "a", "--listen", "127.0.0.1:0", "--insecure", "--tokenizer", bad}, Map.of()),
        "a bad flag");
  }

  @Test
  void aTokenizerItCannotSendToIsNotTheClientsFault() throws Exception {
    String bad = "http://vllm_server:8000/tokenize";
    EngineTokenizer t = new EngineTokenizer(URI.create(bad), null, Duration.ofSeconds(1),
        Duration.ofSeconds(1), 1 << 20);
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> t.tokenize("m", "hello").get(5, TimeUnit.SECONDS));
    PromptTokenizer.TokenizeException te = (PromptTokenizer.TokenizeException) e.getCause();
    assertFalse(te.invalidRequest(), "the node's configuration, not the prompt, is at fault: "
        + te.getMessage());
  }

  /**
   * Clients that start streams and do not read them hold only their own writers: an answer
   * ready for another client is written at once (within 10 s), not after the I/O limit (20 s
   * here), which is when it came while the stalled streams held every writer. Both are far
   * apart, and far above what a loaded machine stalls: with a 4 s limit and a 2 s bound, the
   * other client's own exchange was cut by the limit on a busy machine.
   */
  @Test
  void clientsThatDoNotReadTheirStreamsDoNotDelayOtherAnswers() throws Exception {
    Duration ioLimit = Duration.ofSeconds(20);
    int port = start(ioLimit);
    String big = "x".repeat(256 << 10);
    java.util.List<Socket> stalled = new java.util.ArrayList<>();
    try {
      for (int i = 0; i < 3; i++) {
        Socket s = new Socket();
        // a small window, set before connecting (set after, the kernel drops what arrives
        // beyond it and backs off its retransmissions for minutes); never read
        s.setReceiveBufferSize(4096);
        s.connect(new InetSocketAddress("127.0.0.1", port), 10_000);
        stalled.add(s);
        byte[] body = ("{\"id\":\"s" + i + "\",\"prompt\":[1],\"stream\":true}")
            .getBytes(StandardCharsets.US_ASCII);
        s.getOutputStream().write(("POST " + ClientEndpoint.COMPLETIONS + " HTTP/1.1\r\nHost: x\r\n"
            + "Content-Length: " + body.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
        s.getOutputStream().write(body);
        s.getOutputStream().flush();
        stub.awaitSubmitted(i + 1);
        for (int k = 0; k < 32; k++) { // 8 MiB, more than the connection's buffers hold
          stub.listeners.get(i).onOutput(new int[] {k}, big);
        }
      }
      // their writers are now blocked on the unread streams
      io.github.prefixrouter.testing.Await.until(() -> endpoint.writersBusy() == 3,
          "the three stalled streams hold their writers");
      CompletableFuture<HttpResponse<String>> answer = client.sendAsync(
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + ClientEndpoint.COMPLETIONS))
              .POST(HttpRequest.BodyPublishers.ofString("{\"id\":\"w\",\"prompt\":[1]}")).build(),
          HttpResponse.BodyHandlers.ofString());
      stub.awaitSubmitted(4);
      long t0 = System.nanoTime();
      stub.futures.get(3).complete(response("w"));
      answer.get(60, TimeUnit.SECONDS);
      long ms = (System.nanoTime() - t0) / 1_000_000;
      org.junit.jupiter.api.Assertions.assertTrue(ms < 10_000,
          "an answer ready at once was written " + ms + " ms later, behind three stalled streams");
    } finally {
      for (Socket s : stalled) {
        s.close();
      }
    }
  }

  /**
   * A stats source that fails: {@code /metrics} answers 500 with the fixed internal-error text,
   * as every other path does, never the exception's class or message (which may name internals
   * the client has no business seeing); the exception is logged.
   */
  @Test
  void metricsOfAFailingStatsSourceAreA500WithTheFixedTextNotTheException() throws Exception {
    int port = start(Duration.ofSeconds(5));
    when(stub.node.stats()).thenThrow(new IllegalStateException("secret internals at /var/x"));
    HttpResponse<String> resp = client.send(HttpRequest.newBuilder(
        URI.create("http://127.0.0.1:" + port + ClientEndpoint.METRICS)).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(500, resp.statusCode());
    assertEquals(ClientEndpoint.INTERNAL_ERROR_MESSAGE, resp.body());
    assertEquals("text/plain; charset=utf-8",
        resp.headers().firstValue("Content-Type").orElse(null));
  }

  static io.github.prefixrouter.InferenceResponse response(String id) {
    return new io.github.prefixrouter.InferenceResponse(id,
        new io.github.prefixrouter.spi.EngineResult(new int[] {7}, "", 1, 0, -1, -1), "solo",
        false, 1, io.github.prefixrouter.FallbackCause.NONE, StubNode.LOCAL_DECISION);
  }
}
