package io.github.prefixrouter.server;

import static io.github.prefixrouter.testing.RawConnections.readHead;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A model server's {@code /tokenize} that answers every call with the headers of a JSON answer
 * of {@code length} bytes and all of its body but the last byte, then holds the connection open:
 * each answer the tokenizer reads then holds nearly {@code length} bytes of its heap until the
 * tokenization ends. Counts the answers whose body it could write whole, and those of them whose
 * connection the client then closed.
 */
final class HoldingTokenizeServer implements AutoCloseable {
  final ServerSocket raw = new ServerSocket(0, 64, InetAddress.getLoopbackAddress());
  final AtomicInteger written = new AtomicInteger();
  final AtomicInteger closedAfterWrite = new AtomicInteger();
  final AtomicInteger writeFailed = new AtomicInteger();
  private final ConcurrentLinkedQueue<Socket> conns = new ConcurrentLinkedQueue<>();
  private final int length;
  private final byte[] body;

  HoldingTokenizeServer(int length) throws IOException {
    this.length = length;
    this.body = new byte[length - 1];
    java.util.Arrays.fill(body, (byte) ' ');
    Thread acceptor = new Thread(() -> {
      try {
        while (true) {
          Socket conn = raw.accept();
          conns.add(conn);
          Thread t = new Thread(() -> hold(conn), "holding-tokenize-answer");
          t.setDaemon(true);
          t.start();
        }
      } catch (IOException closed) {
        // the test is over
      }
    }, "holding-tokenize-acceptor");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  /** The tokenize endpoint. */
  URI uri() {
    return URI.create("http://127.0.0.1:" + raw.getLocalPort() + "/tokenize");
  }

  private void hold(Socket conn) {
    try {
      String head = readHead(conn).toLowerCase(Locale.ROOT);
      int at = head.indexOf("content-length:");
      InputStream in = conn.getInputStream();
      in.readNBytes(Integer.parseInt(head.substring(at + 15, head.indexOf('\r', at)).trim()));
      OutputStream out = conn.getOutputStream();
      out.write(("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
          + length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
      out.write(body);
      out.flush();
    } catch (IOException | AssertionError e) {
      writeFailed.incrementAndGet();
      return;
    }
    written.incrementAndGet();
    try {
      conn.setSoTimeout(120_000);
      while (conn.getInputStream().read() >= 0) {
        // the client sends nothing more: wait for it to close the connection
      }
    } catch (SocketTimeoutException stillOpen) {
      return;
    } catch (IOException reset) {
      // closed too
    }
    closedAfterWrite.incrementAndGet();
  }

  /** The answers whose body was written (all but its last byte) and whose client holds it. */
  int held() {
    return written.get() - closedAfterWrite.get();
  }

  /** Closes the listening socket and every connection: the answers held end, cut off. */
  @Override
  public void close() throws IOException {
    raw.close();
    for (Socket c : conns) {
      c.close();
    }
  }
}
