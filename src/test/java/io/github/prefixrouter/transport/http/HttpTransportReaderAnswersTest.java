package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;

/**
 * The answers still written on the reader thread that read the request (the refusals before
 * authentication, a message's 204), to a connection that pipelines requests and reads none of
 * their answers: once the socket buffers are full, the connection holds its reader thread in a
 * blocked write until {@code inboundIoTimeout} from that request's start, as a connection
 * stalled in its headers does, and is then closed. Other peers' requests and messages are read
 * on reader threads of their own meanwhile, at once.
 */
class HttpTransportReaderAnswersTest extends HttpTransportFixture {

  static final Duration IO = Duration.ofSeconds(4);

  /** A connection that writes requests one after the other and never reads. */
  static final class Pipeline {
    final Socket socket = new Socket();
    /** Bytes of requests the connection has taken so far. */
    final AtomicLong sent = new AtomicLong();
    /** Why the writing stopped, if it did. */
    volatile String ended;
  }

  /**
   * Opens a connection from {@code local} with a small receive window that never reads, and
   * writes {@code request.apply(i)} for i = 0, 1, ... on it until it is closed.
   */
  Pipeline pipeline(InetSocketAddress to, InetAddress local, IntFunction<String> request)
      throws Exception {
    Pipeline p = new Pipeline();
    toClose.add(p.socket);
    p.socket.setReceiveBufferSize(4096); // a small window, set before connecting; never read
    p.socket.bind(new InetSocketAddress(local, 0));
    p.socket.connect(to);
    Thread writer = new Thread(() -> {
      try {
        OutputStream out = p.socket.getOutputStream();
        for (int i = 0; i < 1_000_000; i++) {
          byte[] r = request.apply(i).getBytes(StandardCharsets.US_ASCII);
          out.write(r);
          p.sent.addAndGet(r.length);
        }
      } catch (java.io.IOException closed) { // closed by the server, or by the test
        p.ended = closed.toString();
      }
    }, "pipelining-connection");
    writer.setDaemon(true);
    writer.start();
    return p;
  }

  /** Waits until the pipeline's requests stop being taken: the server's write is blocked. */
  static void awaitStalled(Pipeline p) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    long seen = -1;
    for (long n = p.sent.get(); n != seen || n == 0; n = p.sent.get()) {
      assertTrue(System.nanoTime() < deadline, "the connection's requests still taken after 60 s");
      seen = n;
      Thread.sleep(500);
    }
  }

  /**
   * Runs {@code request} pipelined from another loopback address against {@code a}, which
   * answers it on the reader thread, until the connection's buffers are full: {@code b}'s
   * message is delivered and its request answered at once meanwhile, and within the I/O timeout
   * (and a margin) no reader thread is held any more.
   */
  void holdsOneReaderThreadUntilTheIoTimeout(HttpTransport.Builder aConfig,
      HttpTransport.Builder bConfig, IntFunction<String> request) throws Exception {
    InetAddress stranger = HttpTransportAnswerWritersTest.otherLoopback();
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    HttpTransport a = start(aConfig.readerThreads(16).inboundIoTimeout(IO), ra);
    HttpTransport b = start(bConfig, new HttpTransportTest.Recorder());
    InetSocketAddress addr = HttpTransportTest.hostPort(a.localAddress().address());
    Pipeline p = pipeline(addr, stranger, request);
    awaitStalled(p);
    long stalledAt = System.nanoTime();
    b.send(a.localAddress(), "m".getBytes(StandardCharsets.UTF_8));
    String mine = "b@" + b.localAddress().address() + ":m";
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    String got = null;
    while (!mine.equals(got) && System.nanoTime() < until) { // the pipelined messages skipped
      got = ra.messages.poll(until - System.nanoTime(), TimeUnit.NANOSECONDS);
    }
    assertEquals(mine, got, "another peer's message while the connection does not read");
    byte[] answer = b.request(a.localAddress(), "r".getBytes(StandardCharsets.UTF_8),
        Duration.ofSeconds(10)).get(5, TimeUnit.SECONDS);
    assertEquals("echo b r", new String(answer, StandardCharsets.UTF_8));
    assertEquals(0, a.stats().readsRefused());
    // a write blocked by the full buffers is cut at the I/O timeout; the JDK server may also
    // leave the connection unread for a moment with no thread at all, before it blocks
    io.github.prefixrouter.testing.Await.until(() -> a.readersInUse() == 0,
        "no reader thread held once the I/O timeout has passed");
    long heldMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stalledAt);
    assertTrue(heldMs <= IO.toMillis() + 5_000,
        "the connection held a reader thread " + heldMs + " ms after it stalled");
    assertTrue(p.sent.get() > 100_000, "requests taken before the stall: " + p.sent + " bytes");
  }

  @Test
  void aStrangersUnreadRefusalsOfAMethodHoldOneReaderThreadUntilTheIoTimeout() throws Exception {
    holdsOneReaderThreadUntilTheIoTimeout(node("a"), node("b"),
        i -> "GET /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n\r\n");
  }

  @Test
  void aStrangersUnreadRefusalsOfAForgedMacHoldOneReaderThreadUntilTheIoTimeout()
      throws Exception {
    holdsOneReaderThreadUntilTheIoTimeout(node("a"), node("b"),
        i -> "POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n"
            + "PR-Sender: s\r\nPR-Sender-Address: 127.0.0.1:1\r\nPR-Recipient: a\r\n"
            + "PR-Timestamp: 0\r\nPR-Nonce: n" + i + "\r\nPR-MAC: forged\r\n"
            + "Content-Length: 1\r\n\r\nx");
  }

  @Test
  void aStrangersUnreadRefusalsOfABadEnvelopeHoldOneReaderThreadUntilTheIoTimeout()
      throws Exception {
    holdsOneReaderThreadUntilTheIoTimeout(node("a"), node("b"),
        i -> "POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n"
            + "Content-Length: 1\r\n\r\nx");
  }

  /** Without authentication, as a holder of the cluster key could do with signed messages. */
  @Test
  void aPeersUnreadAnswersToMessagesHoldOneReaderThreadUntilTheIoTimeout() throws Exception {
    holdsOneReaderThreadUntilTheIoTimeout(
        HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0).insecureWithoutAuthentication(),
        HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0).insecureWithoutAuthentication(),
        i -> "POST /prefix-router/v1/message HTTP/1.1\r\nHost: x\r\n"
            + "PR-Sender: s\r\nPR-Sender-Address: 127.0.0.1:1\r\nPR-Recipient: a\r\n"
            + "PR-Timestamp: 0\r\nPR-Nonce: n" + i + "\r\nContent-Length: 1\r\n\r\nx");
  }
}
