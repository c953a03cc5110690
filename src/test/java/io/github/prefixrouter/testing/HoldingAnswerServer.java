package io.github.prefixrouter.testing;

import static io.github.prefixrouter.testing.RawConnections.readHead;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;

/**
 * A model server that answers every request, whatever its path, with the headers of a JSON
 * answer of {@code length} bytes and all of its body but the last byte (or, streamed, an event
 * stream of one line of nearly {@code length} bytes, not ended), then holds the connection open:
 * each answer a client reads then holds nearly {@code length} bytes of its heap until its
 * request ends. Counts the answers whose body it could write whole, those of them whose
 * connection the client then closed, and the answers it could not write whole. The
 * answer-budget tests of the engine adapter and of the engine's tokenizer share it, with the
 * wait until the answers settle ({@link #awaitSettled}) and the heap they hold
 * ({@link #heapInUse}).
 */
public final class HoldingAnswerServer implements AutoCloseable {

  private final ServerSocket raw = new ServerSocket(0, 64, InetAddress.getLoopbackAddress());
  private final AtomicInteger written = new AtomicInteger();
  private final AtomicInteger closedAfterWrite = new AtomicInteger();
  private final AtomicInteger writeFailed = new AtomicInteger();
  private final ConcurrentLinkedQueue<Socket> conns = new ConcurrentLinkedQueue<>();
  private final int length;
  private final byte[] body;
  private final boolean streamed;

  /**
   * Starts the server on a loopback port.
   *
   * @param length the length of each answer, in bytes (all but the last one sent)
   * @param streamed whether the answers are event streams rather than JSON answers
   * @throws IOException if the port cannot be opened
   */
  public HoldingAnswerServer(int length, boolean streamed) throws IOException {
    this.length = length;
    this.streamed = streamed;
    this.body = new byte[length - 1];
    Arrays.fill(body, streamed ? (byte) 'x' : (byte) ' ');
    Thread acceptor = new Thread(() -> {
      try {
        while (true) {
          Socket conn = raw.accept();
          conns.add(conn);
          Thread t = new Thread(() -> hold(conn), "holding-answer");
          t.setDaemon(true);
          t.start();
        }
      } catch (IOException closed) {
        // the test is over
      }
    }, "holding-acceptor");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  /** The server's base URL, {@code http://127.0.0.1:port}. */
  public String baseUrl() {
    return "http://127.0.0.1:" + raw.getLocalPort();
  }

  /** The URL of {@code path} (starting with {@code /}) on the server. */
  public URI uri(String path) {
    return URI.create(baseUrl() + path);
  }

  private void hold(Socket conn) {
    try {
      String head = readHead(conn).toLowerCase(Locale.ROOT);
      int at = head.indexOf("content-length:");
      conn.getInputStream().readNBytes(
          Integer.parseInt(head.substring(at + 15, head.indexOf('\r', at)).trim()));
      OutputStream out = conn.getOutputStream();
      if (streamed) {
        out.write(("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            + "Connection: close\r\n\r\ndata: ").getBytes(StandardCharsets.US_ASCII));
        out.write(body, 0, body.length - 64);
      } else {
        out.write(("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
        out.write(body);
      }
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

  /** The answers whose body was written whole (all but its last byte). */
  public int written() {
    return written.get();
  }

  /** The answers whose body could not be written whole: the client cut them off. */
  public int writeFailed() {
    return writeFailed.get();
  }

  /** The answers written whole whose connection the client then closed. */
  public int closedAfterWrite() {
    return closedAfterWrite.get();
  }

  /** The answers whose body was written (all but its last byte) and whose client holds it. */
  public int held() {
    return written.get() - closedAfterWrite.get();
  }

  /**
   * Waits until the answers to {@code calls} settle: every answer written whole or cut off by
   * the client, and every call either ended or holding its whole answer, {@code length} bytes of
   * its budget (a plain answer's buffer at its Content-Length, a stream's line at its limit, when
   * that is {@code length}): {@code heldBytes}, what the answers hold of the budget the calls
   * share, is {@code length} bytes for each call not ended. A call still reading its answer, or
   * waiting for its next share, holds less, and one refused gives its share back before it ends;
   * once each call not ended holds its whole answer, none takes any more, so none is refused any
   * more, however late the client read the answers. The figures must hold at two polls in a row:
   * an answer copying its buffer into the next step holds both for that moment.
   *
   * @param calls the calls this server answers, as their callers see them
   * @param heldBytes what the answers hold of their budget now, in bytes
   * @param max how long to wait at most
   * @throws AssertionError if they have not settled within {@code max}
   * @throws InterruptedException if the waiting thread is interrupted
   */
  public void awaitSettled(List<? extends CompletableFuture<?>> calls, LongSupplier heldBytes,
      Duration max) throws InterruptedException {
    long until = System.nanoTime() + max.toNanos();
    String last = "";
    while (true) {
      long ended = calls.stream().filter(CompletableFuture::isDone).count();
      long held = heldBytes.getAsLong();
      boolean settled = written.get() + writeFailed.get() == calls.size()
          && held == (calls.size() - ended) * (long) length
          && ended == calls.stream().filter(CompletableFuture::isDone).count();
      String state = written.get() + " answers written, " + writeFailed.get() + " cut off, "
          + ended + " of " + calls.size() + " calls ended, " + held + " bytes held (each call "
          + "not ended holds " + length + " once its answer is read)";
      if (settled && state.equals(last)) {
        return;
      }
      last = settled ? state : "";
      assertTrue(System.nanoTime() < until,
          "not settled within " + max.toSeconds() + " s: " + state);
      Thread.sleep(20);
    }
  }

  /**
   * The heap in use after a full collection, in bytes.
   *
   * @throws InterruptedException if the waiting thread is interrupted
   */
  public static long heapInUse() throws InterruptedException {
    MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
    for (int i = 0; i < 3; i++) {
      System.gc();
      Thread.sleep(50);
    }
    return memory.getHeapMemoryUsage().getUsed();
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
