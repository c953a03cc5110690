package io.github.prefixrouter.engine.openai;

import static io.github.prefixrouter.testing.RawConnections.acceptSentAgain;
import static io.github.prefixrouter.testing.RawConnections.readHead;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The race of a pooled connection with the server's idle close: vLLM and SGLang (uvicorn) close
 * a connection idle for 5 s, while the JDK client keeps it up to 20 s, so a request may be
 * written to a connection just as the server closes it. The server never saw that request; the
 * JDK client does not send a POST again, and the request failed as a retryable I/O failure,
 * which the node counted against a healthy, idle server. Each server here is a raw socket that
 * answers a first request on a keep-alive connection, then closes that connection as the next
 * request arrives on it, without answering it (with a FIN, or a reset), and accepts new
 * connections as usual: the race, made certain.
 */
class OpenAiCompatibleEngineKeepAliveTest {

  private static final String ANSWER = "{\"choices\":[{\"index\":0,\"text\":\"ab\","
      + "\"token_ids\":[1,2],\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":4}}";

  private static InferenceRequest request(String id) {
    return new InferenceRequest(id, new int[] {101, 7, 7, 9000},
        new GenerationParams(2, 0.0, 0.9, 17L));
  }

  private static CompletableFuture<EngineResult> send(OpenAiCompatibleEngine e, String id,
      boolean streamed) {
    return streamed ? e.execute(request(id), (t, text) -> { }) : e.execute(request(id));
  }

  private static void write(OutputStream out, String s) throws IOException {
    out.write(s.getBytes(StandardCharsets.UTF_8));
    out.flush();
  }

  private static void answer(Socket conn, String body) throws IOException {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    write(conn.getOutputStream(), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + "Content-Length: " + b.length + "\r\n\r\n" + body);
  }

  /** Closes {@code conn} without answering: with a FIN, or with a reset. */
  private static void drop(Socket conn, boolean reset) throws IOException {
    if (reset) {
      conn.setSoLinger(true, 0);
    }
    conn.close();
  }

  /** An engine at {@code raw}'s port, with a 30 s request timeout. */
  private static OpenAiCompatibleEngine engineFor(ServerSocket raw) {
    return OpenAiCompatibleEngine.builder()
        .baseUrl("http://127.0.0.1:" + raw.getLocalPort())
        .requestTimeout(Duration.ofSeconds(30)).build();
  }

  /** Asserts that {@code f} fails within 20 s as a retryable engine failure, and returns it. */
  private static EngineException retryableFailure(CompletableFuture<EngineResult> f) {
    ExecutionException x = assertThrows(ExecutionException.class,
        () -> f.get(20, TimeUnit.SECONDS));
    EngineException err = assertInstanceOf(EngineException.class, x.getCause());
    assertTrue(err.retryable(), err.toString());
    return err;
  }

  /**
   * Asserts that {@code e} counted {@code connectionRetries} requests sent again, and holds no
   * load.
   */
  private static void assertCounted(OpenAiCompatibleEngine e, long connectionRetries) {
    assertEquals(connectionRetries, e.stats().connectionRetries(), e.stats().toString());
    assertEquals(0, e.load().total());
  }

  /**
   * Asserts that {@code f} fails as a retryable "I/O failure" after it was sent again once, and
   * that no third try reaches {@code raw} within 1 s.
   */
  private static void assertFailedAfterOneRetry(ServerSocket raw, OpenAiCompatibleEngine e,
      CompletableFuture<EngineResult> f) throws IOException {
    EngineException err = retryableFailure(f);
    assertTrue(err.getMessage().contains("I/O failure"), err.getMessage());
    raw.setSoTimeout(1_000);
    assertThrows(SocketTimeoutException.class, raw::accept, "a third try");
    assertCounted(e, 1);
  }

  @ParameterizedTest(name = "streamed: {0}, reset: {1}")
  @CsvSource({"false,false", "false,true", "true,false", "true,true"})
  void aRequestTheServerClosedItsPooledConnectionOnIsSentAgainOnANewOne(boolean streamed,
      boolean reset) throws Exception {
    try (ServerSocket raw = new ServerSocket(0, 4, InetAddress.getLoopbackAddress());
        OpenAiCompatibleEngine e = engineFor(raw)) {
      raw.setSoTimeout(10_000);
      CompletableFuture<EngineResult> first = send(e, "r1", streamed);
      try (Socket conn = raw.accept()) {
        ScriptedOpenAiServer.readRequest(conn);
        answer(conn, ANSWER);
        assertEquals("ab", first.get(20, TimeUnit.SECONDS).text());
        // the next request goes out on the pooled connection, which the server closes as it
        // arrives, without answering it
        CompletableFuture<EngineResult> second = send(e, "r2", streamed);
        ScriptedOpenAiServer.readRequest(conn);
        drop(conn, reset);
        try (Socket again = acceptSentAgain(raw, second, "request")) {
          ScriptedOpenAiServer.readRequest(again);
          answer(again, ANSWER);
          assertEquals("ab", second.get(20, TimeUnit.SECONDS).text());
        }
      }
      assertCounted(e, 1);
    }
  }

  /**
   * A server that closes every connection as a request arrives, without answering (a server
   * that crashes as it takes each request): the request is sent again once, not more, and then
   * fails as before, retryable.
   */
  @ParameterizedTest(name = "streamed: {0}")
  @ValueSource(booleans = {false, true})
  void aRequestIsSentAgainOnlyOnce(boolean streamed) throws Exception {
    try (ServerSocket raw = new ServerSocket(0, 4, InetAddress.getLoopbackAddress());
        OpenAiCompatibleEngine e = engineFor(raw)) {
      raw.setSoTimeout(10_000);
      CompletableFuture<EngineResult> f = send(e, "r1", streamed);
      for (int i = 0; i < 2; i++) {
        try (Socket conn = acceptSentAgain(raw, f, "request")) {
          ScriptedOpenAiServer.readRequest(conn);
          drop(conn, false);
        }
      }
      assertFailedAfterOneRetry(raw, e, f);
    }
  }

  /**
   * A server that reads each request whole, on a new connection as on a pooled one, and then
   * resets the connection (a socket closed with SO_LINGER 0) or half-closes it (its side shut,
   * the client's left open), without a byte of an answer: the adapter cannot tell such a
   * connection from a pooled one the server closed as idle, so the request is sent again once,
   * not more, and then fails as before, retryable, an "I/O failure".
   */
  @ParameterizedTest(name = "streamed: {0}, how: {1}")
  @CsvSource({"false,reset", "true,reset", "false,halfClose", "true,halfClose"})
  void aRequestTheServerResetsOrHalfClosesAfterReadingItIsSentAgainOnlyOnce(boolean streamed,
      String how) throws Exception {
    List<Socket> held = new ArrayList<>();
    try (ServerSocket raw = new ServerSocket(0, 4, InetAddress.getLoopbackAddress());
        OpenAiCompatibleEngine e = engineFor(raw)) {
      raw.setSoTimeout(10_000);
      CompletableFuture<EngineResult> f = send(e, "r1", streamed);
      for (int i = 0; i < 2; i++) {
        Socket conn = acceptSentAgain(raw, f, "request");
        held.add(conn);
        ScriptedOpenAiServer.readRequest(conn);
        if (how.equals("reset")) {
          drop(conn, true);
        } else {
          conn.shutdownOutput(); // a FIN; the server's side still reads
        }
      }
      assertFailedAfterOneRetry(raw, e, f);
    } finally {
      for (Socket conn : held) {
        conn.close();
      }
    }
  }

  /**
   * A server that resets the connection once it has sent its answer's status line (and, in
   * the second case, its headers too): the server began to answer, so it read the request, and
   * the request is not sent again; it fails as a connection failure, retryable, and nothing is
   * counted.
   */
  @ParameterizedTest(name = "streamed: {0}, headers: {1}")
  @CsvSource({"false,false", "true,false", "false,true", "true,true"})
  void aResetAfterTheStatusLineIsNotSentAgain(boolean streamed, boolean headers)
      throws Exception {
    try (ServerSocket raw = new ServerSocket(0, 4, InetAddress.getLoopbackAddress());
        OpenAiCompatibleEngine e = engineFor(raw)) {
      raw.setSoTimeout(10_000);
      CompletableFuture<EngineResult> f = send(e, "r1", streamed);
      try (Socket conn = acceptSentAgain(raw, f, "request")) {
        ScriptedOpenAiServer.readRequest(conn);
        write(conn.getOutputStream(), "HTTP/1.1 200 OK\r\n" + (!headers ? ""
            : streamed ? "Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            : "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"));
        Thread.sleep(300); // read by the client before the reset
        drop(conn, true);
      }
      raw.setSoTimeout(2_000);
      try (Socket again = raw.accept()) {
        throw new AssertionError("the request was sent again on a new connection after its "
            + "answer's status line came: " + e.stats());
      } catch (SocketTimeoutException none) {
        // no second try
      }
      retryableFailure(f);
      assertCounted(e, 0);
    }
  }

  /**
   * A server that answers nothing at all where nothing listens still fails at once, tried once:
   * a refused connection is no race with an idle close.
   */
  @Test
  void aRefusedConnectionIsNotSentAgain() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    try (OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
        .baseUrl("http://127.0.0.1:" + port).build()) {
      ExecutionException x = assertThrows(ExecutionException.class,
          () -> e.execute(request("r1")).get(20, TimeUnit.SECONDS));
      EngineException err = assertInstanceOf(EngineException.class, x.getCause());
      assertTrue(err.getMessage().contains("server unreachable"), err.getMessage());
      assertEquals(0, e.stats().connectionRetries(), e.stats().toString());
    }
  }

  /**
   * The health probe ({@code GET /health}, then {@code GET /v1/models}) on a pooled connection
   * the server closes as the probe arrives: it is sent again on a new connection and the server
   * is healthy. JDK 17's client sends a GET again itself when its pooled connection was closed
   * before any byte of the answer (as here), and the adapter does not send it again after that
   * (nor counts it), so it counts at most one here (a reset as the probe is written, which the
   * JDK does not send again).
   */
  @ParameterizedTest(name = "reset: {0}")
  @ValueSource(booleans = {false, true})
  void aHealthProbeTheServerClosedItsPooledConnectionOnIsSentAgain(boolean reset)
      throws Exception {
    try (ServerSocket raw = new ServerSocket(0, 8, InetAddress.getLoopbackAddress());
        OpenAiCompatibleEngine e = engineFor(raw)) {
      AtomicInteger dropped = new AtomicInteger();
      Thread acceptor = new Thread(() -> {
        while (!raw.isClosed()) {
          try {
            Socket conn = raw.accept();
            Thread t = new Thread(() -> serveProbes(conn, reset, dropped));
            t.setDaemon(true);
            t.start();
          } catch (IOException closed) {
            return;
          }
        }
      });
      acceptor.setDaemon(true);
      acceptor.start();
      assertEquals(200, e.healthStatus().get(20, TimeUnit.SECONDS));
      Thread.sleep(300); // the probe's connections back in the client's pool
      CompletableFuture<Integer> second = e.healthStatus();
      assertEquals(200, second.get(20, TimeUnit.SECONDS));
      assertEquals(1, dropped.get(), "the second probe did not come on a pooled connection");
      assertTrue(e.stats().connectionRetries() <= 1, e.stats().toString());
    }
  }

  /**
   * A server that reads every probe and closes its connection without answering: JDK 17's
   * client sends a GET again itself when a connection ends before any byte of its answer, so
   * the adapter does not send it again too; each probe reaches the server twice, not four
   * times, and the server is unreachable (-1).
   */
  @ParameterizedTest(name = "reset: {0}")
  @ValueSource(booleans = {false, true})
  void aHealthProbeToAServerThatDropsEveryRequestIsSentTwiceAtMost(boolean reset)
      throws Exception {
    try (ServerSocket raw = new ServerSocket(0, 8, InetAddress.getLoopbackAddress());
        OpenAiCompatibleEngine e = engineFor(raw)) {
      List<String> heads = java.util.Collections.synchronizedList(new ArrayList<>());
      Thread acceptor = new Thread(() -> {
        while (!raw.isClosed()) {
          try (Socket conn = raw.accept()) {
            heads.add(readHead(conn).lines().findFirst().orElse(""));
            drop(conn, reset);
          } catch (IOException | AssertionError closed) {
            if (raw.isClosed()) {
              return;
            }
          }
        }
      });
      acceptor.setDaemon(true);
      acceptor.start();
      assertEquals(-1, e.healthStatus().get(20, TimeUnit.SECONDS));
      Thread.sleep(500); // a try sent later would have come by now
      assertEquals(2, heads.size(), "requests that reached the server: " + heads);
      assertEquals(0, e.stats().connectionRetries(), e.stats().toString());
    }
  }

  /**
   * Answers the probes that come on {@code conn}, 200 each, but the first request of the test
   * that comes on a connection that served one already: that connection is closed unanswered.
   */
  private static void serveProbes(Socket conn, boolean reset, AtomicInteger dropped) {
    try (conn) {
      int served = 0;
      while (true) {
        String head = readHead(conn);
        if (served > 0 && dropped.compareAndSet(0, 1)) {
          drop(conn, reset);
          return;
        }
        if (head.startsWith("GET /health ")) {
          write(conn.getOutputStream(), "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        } else {
          answer(conn, "{\"data\":[]}");
        }
        served++;
      }
    } catch (IOException | AssertionError ended) {
      // the client closed the connection
    }
  }
}
