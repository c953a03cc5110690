package io.github.prefixrouter.testing;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.util.concurrent.CompletableFuture;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The server side of a raw HTTP connection an HTTP client opened to a test's socket: the
 * request's head, and whether the client closed the connection.
 */
public final class RawConnections {

  private RawConnections() {}

  /**
   * Reads a request's line and headers (10 s at most between two bytes).
   *
   * @param conn the server's side of the connection
   * @return the line and headers, with the empty line that ends them
   * @throws IOException if the read fails or times out
   */
  public static String readHead(Socket conn) throws IOException {
    conn.setSoTimeout(10_000);
    InputStream in = conn.getInputStream();
    StringBuilder head = new StringBuilder();
    while (!head.toString().endsWith("\r\n\r\n")) {
      int b = in.read();
      assertTrue(b >= 0, "the connection ended in the request's head: " + head);
      head.append((char) b);
    }
    return head.toString();
  }

  /**
   * Reads a request's line, headers and body, which must have a {@code Content-Length} (10 s at
   * most between two bytes).
   *
   * @param conn the server's side of the connection
   * @return the connection's input, positioned after the request
   * @throws IOException if the read fails or times out
   */
  public static InputStream readRequest(Socket conn) throws IOException {
    String head = readHead(conn);
    Matcher m = Pattern.compile("(?i)content-length:\\s*(\\d+)").matcher(head);
    assertTrue(m.find(), head);
    InputStream in = conn.getInputStream();
    in.readNBytes(Integer.parseInt(m.group(1)));
    return in;
  }

  /**
   * Accepts the connection on which a client sends {@code what} again, within {@code raw}'s
   * accept timeout; when none comes, fails saying so and how {@code f}, the client's future,
   * ended.
   *
   * @param raw the test's server socket, with its accept timeout set
   * @param f the future of what was sent
   * @param what what was sent, for the message ("request", "tokenization")
   * @return the server's side of the new connection
   * @throws IOException if accepting fails otherwise
   */
  public static Socket acceptSentAgain(ServerSocket raw, CompletableFuture<?> f, String what)
      throws IOException {
    try {
      return raw.accept();
    } catch (SocketTimeoutException none) {
      String how;
      try {
        how = "it completed with " + f.getNow(null);
      } catch (Exception failed) {
        how = "it failed with " + failed.getCause();
      }
      throw new AssertionError("the " + what + " was not sent again on a new connection within "
          + raw.getSoTimeout() + " ms: " + (f.isDone() ? how : "it is still waiting"), none);
    }
  }

  /**
   * Waits until the client closes the connection: true when it did (end of stream or reset),
   * false when it still held it open after 10 s.
   *
   * @param conn the server's side of the connection
   * @return whether the client closed it
   * @throws IOException if the read fails otherwise
   */
  public static boolean closedByClient(Socket conn) throws IOException {
    conn.setSoTimeout(10_000);
    InputStream in = conn.getInputStream();
    try {
      while (in.read() >= 0) {
        // what is left of the request, then nothing more: read to the end
      }
      return true;
    } catch (SocketTimeoutException stillOpen) {
      return false;
    } catch (SocketException reset) {
      return true;
    }
  }
}
