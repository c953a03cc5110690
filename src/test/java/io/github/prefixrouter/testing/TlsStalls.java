package io.github.prefixrouter.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLSocket;

/**
 * Raw clients of a TLS port that stall before, during or right after the TLS handshake, and the
 * time the server takes to close their connections: the TLS slow-client tests of the client
 * port and the peer port share them.
 */
public final class TlsStalls {

  private TlsStalls() {}

  /** Where a connection stalls. */
  public enum Stall {
    /** A TCP connection that sends nothing at all. */
    SILENT,
    /** Three bytes of a TLS record header (a handshake record), then nothing. */
    PARTIAL_RECORD_HEADER,
    /** A whole ClientHello, then nothing: the server answers and waits for the client's reply. */
    CLIENT_HELLO,
    /** The whole handshake, then nothing. */
    HANDSHAKE_DONE,
    /** The whole handshake, then half a request line. */
    HALF_REQUEST_LINE;

    /** Whether the connection sends anything, so that the server starts reading it. */
    public boolean sendsBytes() {
      return this != SILENT;
    }
  }

  /**
   * A stalled connection.
   *
   * @param socket the client's socket (an {@link SSLSocket} once the handshake is done)
   * @param openedNanos {@link System#nanoTime()} before it connected
   * @param closedAtOnce whether the server closed it before it could stall (its handshake
   *     failed: no reader slot, say)
   */
  public record Stalled(Stall stall, Socket socket, long openedNanos, boolean closedAtOnce) {}

  /**
   * Opens a connection to the TLS port at {@code address} that stalls as {@code stall} says.
   *
   * @param tls a client context trusting the port's certificate (for the ClientHello and the
   *     handshake)
   */
  public static Stalled open(Stall stall, InetSocketAddress address, SSLContext tls)
      throws IOException {
    long opened = System.nanoTime();
    Socket s = new Socket(address.getAddress(), address.getPort());
    s.setSoTimeout(30_000); // never reached: the callers' bounds are shorter
    OutputStream out = s.getOutputStream();
    switch (stall) {
      case SILENT -> {
        // nothing
      }
      case PARTIAL_RECORD_HEADER -> {
        out.write(new byte[] {0x16, 0x03, 0x01}); // handshake record, TLS 1.0 framing, no length
        out.flush();
      }
      case CLIENT_HELLO -> {
        out.write(clientHello(tls, address));
        out.flush();
      }
      case HANDSHAKE_DONE, HALF_REQUEST_LINE -> {
        SSLSocket ssl = (SSLSocket) tls.getSocketFactory().createSocket(s,
            address.getHostString(), address.getPort(), true);
        try {
          ssl.startHandshake();
          if (stall == Stall.HALF_REQUEST_LINE) {
            ssl.getOutputStream().write("GET /hea".getBytes(StandardCharsets.US_ASCII));
            ssl.getOutputStream().flush();
          }
        } catch (IOException closed) {
          ssl.close();
          return new Stalled(stall, ssl, opened, true);
        }
        return new Stalled(stall, ssl, opened, false);
      }
      default -> throw new AssertionError(stall);
    }
    return new Stalled(stall, s, opened, false);
  }

  /** The first flight of a TLS client of {@code address}: the records of its ClientHello. */
  private static byte[] clientHello(SSLContext tls, InetSocketAddress address)
      throws IOException {
    SSLEngine engine = tls.createSSLEngine(address.getHostString(), address.getPort());
    engine.setUseClientMode(true);
    ByteBuffer out = ByteBuffer.allocate(engine.getSession().getPacketBufferSize());
    engine.beginHandshake();
    SSLEngineResult r = engine.wrap(ByteBuffer.allocate(0), out);
    if (r.getStatus() != SSLEngineResult.Status.OK || out.position() == 0) {
      throw new IllegalStateException("no ClientHello: " + r);
    }
    out.flip();
    byte[] b = new byte[out.remaining()];
    out.get(b);
    return b;
  }

  /**
   * Reads (and drops) what the server sends on {@code c} until it closes the connection, and
   * returns the milliseconds from the connection's opening to its close.
   *
   * @throws AssertionError if the connection is still open {@code boundMillis} after its
   *     opening
   */
  public static long millisUntilClosed(Stalled c, long boundMillis) throws IOException {
    long deadline = c.openedNanos() + TimeUnit.MILLISECONDS.toNanos(boundMillis);
    Socket s = c.socket();
    if (!c.closedAtOnce()) {
      InputStream in = s.getInputStream();
      byte[] buf = new byte[4096];
      try {
        while (true) {
          long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
          if (left <= 0) {
            throw new SocketTimeoutException();
          }
          s.setSoTimeout((int) left);
          if (in.read(buf) < 0) {
            break;
          }
        }
      } catch (SocketTimeoutException held) {
        throw new AssertionError(c.stall() + ": the connection was still open " + boundMillis
            + " ms after it was opened");
      } catch (IOException closed) {
        // a reset, or a TLS socket's error on a connection closed without close_notify
      }
    }
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - c.openedNanos());
  }
}
