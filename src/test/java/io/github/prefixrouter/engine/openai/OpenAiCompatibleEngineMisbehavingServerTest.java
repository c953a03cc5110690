package io.github.prefixrouter.engine.openai;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.EngineTimeoutException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The adapter against servers that misbehave at the HTTP level: answers whose body stalls
 * after the headers, streams held open after {@code [DONE]}. Each server here is a raw socket
 * answering by hand, so that the test controls every byte and sees when the adapter closes the
 * connection. Their requestTimeout, 2 s, is what the tests wait for; it is long enough for the
 * first exchange of a fresh HTTP client on a loaded machine.
 */
class OpenAiCompatibleEngineMisbehavingServerTest {

  private static InferenceRequest request(String id) {
    return new InferenceRequest(id, new int[] {101, 7, 7, 9000}, new GenerationParams(3, 0.0, 0.9, 17L));
  }

  private static EngineException failure(CompletableFuture<EngineResult> f) {
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(20, TimeUnit.SECONDS));
    assertInstanceOf(EngineException.class, e.getCause());
    return (EngineException) e.getCause();
  }

  private static void write(OutputStream out, String s) throws IOException {
    out.write(s.getBytes(StandardCharsets.UTF_8));
    out.flush();
  }

  /**
   * Waits until the client closes the connection: true when it did (end of stream or reset),
   * false when it still held it open after 10 s.
   */
  private static boolean closedByClient(Socket conn) throws IOException {
    conn.setSoTimeout(10_000);
    InputStream in = conn.getInputStream();
    try {
      while (in.read() >= 0) {
        // the client sends nothing more on this connection: read to its end
      }
      return true;
    } catch (SocketTimeoutException stillOpen) {
      return false;
    } catch (SocketException reset) {
      return true;
    }
  }

  @Test
  void aPlainAnswerWhoseBodyStallsAfterItsHeadersTimesOutAndClosesTheConnection() throws Exception {
    stalledJsonBody(false);
  }

  @Test
  void aPlainAnswerToAStreamedRequestWhoseBodyStallsTimesOutAndClosesTheConnection() throws Exception {
    stalledJsonBody(true);
  }

  /**
   * A server that sends a JSON answer's headers and a part of its body, then nothing (a hung
   * server or proxy): the request fails at {@code requestTimeout} as one whose headers never
   * came, gives its slot back, and its connection is closed.
   */
  private static void stalledJsonBody(boolean streamed) throws Exception {
    try (ServerSocket raw = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl("http://127.0.0.1:" + raw.getLocalPort())
          .requestTimeout(Duration.ofSeconds(2)).build();
      OpenAiCompatibleEngineStreamingTest.Pieces pieces = new OpenAiCompatibleEngineStreamingTest.Pieces();
      CompletableFuture<EngineResult> f = streamed ? pieces.run(e, request("r1")) : e.execute(request("r1"));
      raw.setSoTimeout(10_000);
      try (Socket conn = raw.accept()) {
        ScriptedOpenAiServer.readRequest(conn);
        // the headers and a part of the body, and then nothing (a hung server or proxy)
        write(conn.getOutputStream(), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + "Content-Length: 100\r\n\r\n{\"choices\":[{\"text\":");
        EngineException err = failure(f);
        assertInstanceOf(EngineTimeoutException.class, err, err::toString);
        assertFalse(err.retryable());
        assertEquals(0, e.load().total(), "the slot is given back");
        assertTrue(closedByClient(conn), "the connection stayed open after the timeout");
      }
      assertTrue(pieces.texts.isEmpty());
    }
  }

  @Test
  void aStreamHeldOpenAfterDoneIsClosedAtTheDeadline() throws Exception {
    // [DONE] completes the request; a server (or proxy) that then neither ends the body nor
    // closes the connection must not hold it open for ever
    try (ServerSocket raw = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl("http://127.0.0.1:" + raw.getLocalPort())
          .requestTimeout(Duration.ofSeconds(2)).build();
      OpenAiCompatibleEngineStreamingTest.Pieces pieces = new OpenAiCompatibleEngineStreamingTest.Pieces();
      CompletableFuture<EngineResult> f = pieces.run(e, request("r1"));
      raw.setSoTimeout(10_000);
      try (Socket conn = raw.accept()) {
        ScriptedOpenAiServer.readRequest(conn);
        String events = OpenAiCompatibleEngineStreamingTest.chunk("a", "[1]", "length") + "data: [DONE]\n\n";
        // a chunked body whose last chunk (0) never comes
        write(conn.getOutputStream(), "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            + "Transfer-Encoding: chunked\r\n\r\n" + Integer.toHexString(events.length()) + "\r\n"
            + events + "\r\n");
        assertEquals("a", f.get(20, TimeUnit.SECONDS).text());
        assertEquals(0, e.load().total());
        assertTrue(closedByClient(conn), "the connection stayed open after the deadline");
      }
    }
  }
}
