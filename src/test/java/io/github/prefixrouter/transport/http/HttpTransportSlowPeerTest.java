package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.Await;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Peers (or strangers) that open connections and then stall must not starve everyone else. */
class HttpTransportSlowPeerTest extends HttpTransportFixture {

  private Socket stall(InetSocketAddress addr, String prefix) throws Exception {
    Socket s = new Socket(addr.getHostString(), addr.getPort());
    toClose.add(s);
    OutputStream out = s.getOutputStream();
    out.write(prefix.getBytes(StandardCharsets.US_ASCII));
    out.flush();
    return s;
  }

  /**
   * Four connections stalled mid-request, twice as many as the server threads: a peer's request
   * is answered while they hold their reader threads, and each is cut after the I/O timeout.
   * Before the cut, they held the server threads for ever and no request was answered again.
   * The timeout, 5 s, is also the peer's own request's: at 1 s, a stall of the machine while it
   * was read cut it too ("header parser received no bytes").
   */
  @Test
  void stalledConnectionsDoNotStarveOtherPeers() throws Exception {
    HttpTransport a = start(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY).serverThreads(2).inboundIoTimeout(Duration.ofSeconds(5)),
        new HttpTransportTest.Recorder());
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY), new HttpTransportTest.Recorder());
    InetSocketAddress addr = HttpTransportTest.hostPort(a.localAddress().address());
    // two strangers stall in the request headers, two in a body they never finish
    for (int i = 0; i < 2; i++) {
      stall(addr, "POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n");
      stall(addr, "POST /prefix-router/v1/message HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc");
    }
    // every staller has reached the server: it holds a reader thread, or was already cut (a
    // stall of the machine longer than the timeout); a fixed sleep only hoped so
    Await.until(() -> a.readersInUse() + a.stats().slowConnectionsClosed() == 4,
        "the 4 stalled connections hold reader threads");
    byte[] answer = b.request(a.localAddress(), "hi".getBytes(StandardCharsets.UTF_8),
        Duration.ofSeconds(20)).get(30, TimeUnit.SECONDS);
    assertEquals("echo b hi", new String(answer, StandardCharsets.UTF_8));
    // every stalled connection is cut and counted; the peer that answered is not
    for (AutoCloseable c : toClose) {
      if (c instanceof Socket s) {
        s.setSoTimeout(10_000);
        assertEquals(-1, s.getInputStream().read(), "a stalled connection is closed");
      }
    }
    // counted just after the connection closes
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (a.stats().slowConnectionsClosed() < 4 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(4, a.stats().slowConnectionsClosed());
    assertEquals(0, a.stats().malformedRejected(), "a body cut by the timeout is counted once");
    assertEquals(1, a.stats().requestsReceived());
  }

  @Test
  void aPeerThatDoesNotReadItsAnswerDoesNotBlockTheThreadThatAnswers() throws Exception {
    CompletableFuture<byte[]> answer = new CompletableFuture<>();
    HttpTransport a = start(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().inboundIoTimeout(Duration.ofSeconds(1)),
        new Transport.InboundHandler() {
          @Override
          public void onMessage(PeerAddress from, byte[] payload) {}

          @Override
          public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
            return answer;
          }
        });
    InetSocketAddress addr = HttpTransportTest.hostPort(a.localAddress().address());
    // a peer that sends a request and never reads the answer
    Socket s = stall(addr, "POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n"
        + "PR-Sender: b\r\nPR-Sender-Address: 127.0.0.1:1\r\nPR-Recipient: a\r\n"
        + "PR-Timestamp: 0\r\nPR-Nonce: n1\r\nContent-Length: 1\r\n\r\nx");
    s.setReceiveBufferSize(4096);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (a.stats().requestsReceived() < 1 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(1, a.stats().requestsReceived());
    // the thread that completes the handler's answer (an engine's, a scheduler's) must not be
    // the one left writing 4 MB into a connection nobody reads
    CompletableFuture<Void> completing = CompletableFuture.runAsync(
        () -> answer.complete(new byte[(4 << 20) - 64]));
    completing.get(5, TimeUnit.SECONDS);
    // and the connection is cut once the answer has not been taken within the timeout (what
    // the kernel buffered before the cut still trickles to the client afterwards)
    deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (a.stats().slowConnectionsClosed() < 1 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(1, a.stats().slowConnectionsClosed());
  }

  /**
   * close() while a server thread is blocked writing a large answer to a peer that reads
   * nothing: a request of another peer still in the handler gets its 503 at once, on another
   * server thread, and close() returns within its bound, {@code inboundIoTimeout}, whatever the
   * stalled peer does. The timeout is long (10 s) so that "at once" (asserted within 8 s) and
   * "once close() returned" (after about 10 s) stay apart by more than a loaded machine stalls.
   */
  @Test
  void closeAnswers503AtOnceAndReturnsWithinItsBoundWhileAnAnswerIsStuck() throws Exception {
    Duration io = Duration.ofSeconds(10);
    CompletableFuture<byte[]> big = new CompletableFuture<>();
    List<CompletableFuture<byte[]>> held = new CopyOnWriteArrayList<>();
    HttpTransport a = HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().serverThreads(2).inboundIoTimeout(io).build();
    toClose.add(a);
    a.start(new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {}

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        if (from.nodeId().equals("s")) {
          return big; // the stalled peer's
        }
        CompletableFuture<byte[]> f = new CompletableFuture<>();
        held.add(f);
        return f;
      }
    });
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication(), new HttpTransportTest.Recorder());
    InetSocketAddress addr = HttpTransportTest.hostPort(a.localAddress().address());
    Socket s = new Socket();
    toClose.add(s);
    s.setReceiveBufferSize(4096); // a small window, set before connecting; never read
    // from another address than b's: the answers to one address are written by half the server
    // threads at most, one of these two
    s.bind(new InetSocketAddress(HttpTransportAnswerWritersTest.otherLoopback(), 0));
    s.connect(addr);
    s.getOutputStream().write(("POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n"
        + "PR-Sender: s\r\nPR-Sender-Address: 127.0.0.1:1\r\nPR-Recipient: a\r\n"
        + "PR-Timestamp: 0\r\nPR-Nonce: n1\r\nContent-Length: 1\r\n\r\nx")
        .getBytes(StandardCharsets.US_ASCII));
    s.getOutputStream().flush();
    CompletableFuture<byte[]> f = b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(60));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while ((a.stats().requestsReceived() < 2 || held.isEmpty()) && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(2, a.stats().requestsReceived());
    big.complete(new byte[(4 << 20) - 64]); // its write blocks a server thread
    Thread.sleep(200);

    long start = System.nanoTime();
    // on a thread of its own: b's client completes its answers on the common pool, which from
    // JDK 25 has one thread on 2 processors, and close() must not be the one holding it
    CompletableFuture<Void> closing =
        CompletableFuture.runAsync(a::close, r -> new Thread(r, "closing a").start());
    // at once: long before close() returns, which waits for the stuck write (about io)
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(8, TimeUnit.SECONDS));
    assertFalse(closing.isDone(), "the 503 came only once close() returned");
    TransportException te = assertInstanceOf(TransportException.class, e.getCause());
    assertEquals(TransportException.Kind.BUSY, te.kind(), te.getMessage());
    assertTrue(te.getMessage().endsWith("is busy: transport closed"), te.getMessage());
    closing.get(io.toMillis() + 20_000, TimeUnit.MILLISECONDS);
    long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertTrue(took <= io.toMillis() + 5_000, "close() took " + took + " ms");
    // and the stuck connection is cut: what the kernel buffered, then the end of the stream
    s.setSoTimeout(10_000);
    InputStream in = s.getInputStream();
    while (in.read(new byte[65_536]) >= 0) {
      // drain
    }
  }

  @Test
  void aPeerThatStallsInTheAnswerToAMessageDoesNotHoldItsSlotForever() throws Exception {
    // a "peer" that answers every message with headers and then stalls in the body
    StallingHttpPeer fake = new StallingHttpPeer(
        "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nx");
    toClose.add(fake);
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY).maxInFlightPerPeer(1)
        .messageTimeout(Duration.ofMillis(300)), new HttpTransportTest.Recorder());
    PeerAddress peer = new PeerAddress("a", "127.0.0.1:" + fake.port());
    b.send(peer, new byte[] {1});
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (b.stats().messagesFailed() < 1 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(1, b.stats().messagesFailed(), "the stalled answer fails the message");
    // its slot is free again: the next message is sent, not dropped as busy
    b.send(peer, new byte[] {2});
    assertEquals(0, b.stats().outboundBusy());
    assertEquals(2, b.stats().messagesSent());
  }

  /**
   * An answer whose Content-Length is no number is a malformed answer, as one of an unexpected
   * status is: PROTOCOL, naming the header. It failed as UNREACHABLE with the HTTP client's
   * NumberFormatException ("For input string").
   */
  @Test
  void anAnswerWithAContentLengthThatIsNoNumberIsAProtocolFailure() throws Exception {
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY), new HttpTransportTest.Recorder());
    TransportException t =
        failureAgainst(b, "HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nx");
    assertEquals(TransportException.Kind.PROTOCOL, t.kind(), t.toString());
    assertTrue(t.getMessage().contains("Content-Length is not a length: \"abc\""),
        t.getMessage());
  }

  /**
   * An answer the HTTP client cannot parse (a status line that is none, as a service other than
   * a peer's gives; more interim answers than the client takes) is a malformed answer too:
   * PROTOCOL, saying what was wrong. The client's {@link java.net.ProtocolException} was taken
   * for UNREACHABLE, so such a peer was cooled down and counted as one that could not be
   * reached.
   */
  @Test
  void anAnswerTheClientCannotParseIsAProtocolFailure() throws Exception {
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY), new HttpTransportTest.Recorder());
    List<String> answers = List.of("SSH-2.0-OpenSSH_9.2\r\n\r\n",
        "HTTP/1.1 102 Processing\r\n\r\n".repeat(9));
    assertEquals(List.of(), failuresOtherThan(b, answers,
        t -> t.kind() == TransportException.Kind.PROTOCOL
            && t.getCause() instanceof java.net.ProtocolException));
  }

  /**
   * An error answer carries no MAC: one from anyone at the peer's address, without the cluster
   * key, fails the request with its status's kind and its text, which the node reads a peer's
   * refusals in (docs/deployment.md, "Authentication").
   */
  @Test
  void anUnsignedErrorAnswerFailsTheRequestWithItsText() throws Exception {
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY), new HttpTransportTest.Recorder());
    TransportException t = failureAgainst(b, "HTTP/1.1 500 Internal Server Error\r\n"
        + "PR-Error: PROTOCOL: MODEL_MISMATCH: node a serves model id 'x'\r\n"
        + "Content-Length: 0\r\n\r\n");
    assertEquals(TransportException.Kind.PROTOCOL, t.kind(), t.toString());
    assertTrue(t.getMessage().endsWith("answered HTTP 500: PROTOCOL: MODEL_MISMATCH: node a serves"
        + " model id 'x'"), t.getMessage());
  }

  /**
   * An answer whose chunked body is out of form (a chunk size that is no hex number, one too
   * long, a size line not ended by CRLF) is a malformed answer too: PROTOCOL, saying what was
   * wrong. The HTTP client fails it with a plain IOException, which was taken for UNREACHABLE,
   * so such a peer was cooled down for failureCooldown and counted as one that could not be
   * reached.
   */
  @Test
  void anAnswerWithAMalformedChunkIsAProtocolFailure() throws Exception {
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY), new HttpTransportTest.Recorder());
    String head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    List<String> answers = List.of(head + "zz\r\nabc\r\n0\r\n\r\n",
        head + "3" + ";x".repeat(2000) + "\r\nabc\r\n0\r\n\r\n", head + "3\rXabc\r\n0\r\n\r\n");
    assertEquals(List.of(), failuresOtherThan(b, answers,
        t -> t.kind() == TransportException.Kind.PROTOCOL
            && t.getMessage().toLowerCase(java.util.Locale.ROOT).contains("chunk")));
  }

  /**
   * Sends a request from {@code b} to a peer answering each of {@code answers} in turn; returns
   * the failures that are not {@code expected} (and fails if a request is answered).
   */
  private List<String> failuresOtherThan(HttpTransport b, List<String> answers,
      java.util.function.Predicate<TransportException> expected) throws Exception {
    List<String> problems = new ArrayList<>();
    for (String answer : answers) {
      TransportException t = failureAgainst(b, answer);
      if (!expected.test(t)) {
        problems.add(t.toString());
      }
    }
    return problems;
  }

  /**
   * How {@code b}'s request fails against a peer that answers {@code answer} (and fails the test
   * if it is answered).
   */
  private TransportException failureAgainst(HttpTransport b, String answer) throws Exception {
    StallingHttpPeer fake = new StallingHttpPeer(answer);
    toClose.add(fake);
    PeerAddress peer = new PeerAddress("a", "127.0.0.1:" + fake.port());
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> b.request(peer, new byte[] {1}, Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS));
    return assertInstanceOf(TransportException.class, e.getCause());
  }

  /**
   * close() lets go of the one-way messages still in flight: a message whose peer stalls in the
   * body of its answer has its connection closed at once. Only the timer, which close() stops,
   * cut such a message (after messageTimeout), so the message's exchange stayed open for as long
   * as the peer held it, its connection, and the HTTP client's selector thread with it, long
   * after close() returned.
   */
  @Test
  void aMessageInFlightAtCloseHasItsConnectionClosed() throws Exception {
    try (java.net.ServerSocket peer = new java.net.ServerSocket(0, 50,
        java.net.InetAddress.getByName("127.0.0.1"))) {
      HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
          .clusterKey(HttpTransportTest.KEY).messageTimeout(Duration.ofSeconds(60)),
          new HttpTransportTest.Recorder());
      b.send(new PeerAddress("a", "127.0.0.1:" + peer.getLocalPort()), new byte[] {1});
      Socket s = peer.accept();
      toClose.add(s);
      InputStream in = s.getInputStream();
      for (int matched = 0; matched < 4; ) { // the request's headers
        int c = in.read();
        assertTrue(c >= 0, "the message's headers ended early");
        matched = (c == (matched % 2 == 0 ? '\r' : '\n')) ? matched + 1 : 0;
      }
      assertEquals(1, in.read(), "the message's body");
      // headers, then a stall in the body
      s.getOutputStream().write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nx"
          .getBytes(StandardCharsets.US_ASCII));
      s.getOutputStream().flush();
      Thread.sleep(200);
      b.close();
      s.setSoTimeout(10_000);
      try {
        assertEquals(-1, in.read(), "the connection of the message in flight at close()");
      } catch (java.net.SocketTimeoutException e) {
        throw new AssertionError("the connection of the message in flight at close() was still "
            + "open 10 s after close() returned");
      }
      assertEquals(1, b.stats().messagesFailed());
    }
  }

  /**
   * A request refused after its body was read in part (a chunked body above the cap, a chunk
   * header that is no number) is answered, and the JDK server then drains what is left of the
   * body: a sender that stalls there is cut after the I/O timeout too. Before, the answer and
   * the drain came after the deadline had ended, and the connection held its reader thread
   * for ever (here the only one, so a signed peer's request was refused meanwhile).
   */
  @ParameterizedTest
  @ValueSource(booleans = {true, false})
  void aSenderStallingAfterARefusedBodyIsCut(boolean aboveTheCap) throws Exception {
    String chunks = aboveTheCap ? "41\r\n" + "x".repeat(0x41) + "\r\n" : "zz\r\n";
    HttpTransport a = start(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY).maxMessageBytes(64).readerThreads(1)
        .inboundIoTimeout(Duration.ofSeconds(2)), new HttpTransportTest.Recorder());
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY), new HttpTransportTest.Recorder());
    InetSocketAddress addr = HttpTransportTest.hostPort(a.localAddress().address());
    Socket s = stall(addr, "POST /prefix-router/v1/message HTTP/1.1\r\nHost: x\r\n"
        + "Transfer-Encoding: chunked\r\n\r\n" + chunks);
    s.setSoTimeout(10_000);
    InputStream in = s.getInputStream();
    String answer = new String(in.readNBytes(12), StandardCharsets.US_ASCII);
    assertTrue(answer.equals("HTTP/1.1 413") || answer.equals("HTTP/1.1 400"), answer);
    while (in.read() >= 0) {
      // the rest of the answer, then the end of the stream: the connection is cut
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (a.stats().slowConnectionsClosed() < 1 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(1, a.stats().slowConnectionsClosed());
    // the reader thread is free for the next request
    byte[] echo = b.request(a.localAddress(), "hi".getBytes(StandardCharsets.UTF_8),
        Duration.ofSeconds(20)).get(30, TimeUnit.SECONDS);
    assertEquals("echo b hi", new String(echo, StandardCharsets.UTF_8));
    assertEquals(0, a.stats().readsRefused());
  }

  /**
   * A peer that sends request after request on one connection and reads none of the answers
   * fills the connection until an answer's write blocks. When that answer is a 504 (the handler
   * outlasted maxHandlingTime), its write must block a server thread under the I/O deadline,
   * never the timer thread, which also fires every request timeout and I/O deadline: before,
   * the 504 was written on the timer thread, which then hung for good, and no deadline fired
   * again.
   */
  @Test
  void aTimedOutRequestsAnswerThatCannotBeWrittenDoesNotBlockTheTimer() throws Exception {
    AtomicInteger received = new AtomicInteger();
    AtomicInteger lastKind = new AtomicInteger();
    HttpTransport a = start(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().maxHandlingTime(Duration.ofMillis(1))
        .inboundIoTimeout(Duration.ofSeconds(2)),
        new Transport.InboundHandler() {
          @Override
          public void onMessage(PeerAddress from, byte[] payload) {}

          @Override
          public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
            lastKind.set(payload[0]);
            received.incrementAndGet();
            // 'f' is answered at once with a body that fills the connection fast; 'h' never,
            // so it is answered 504 after maxHandlingTime
            return payload[0] == 'f' ? CompletableFuture.completedFuture(new byte[FILL])
                : new CompletableFuture<>();
          }
        });
    InetSocketAddress addr = HttpTransportTest.hostPort(a.localAddress().address());
    // the connection's capacity (the server's send buffer, sized by the kernel, and the
    // client's receive window): how many fills fit on a connection of the same kind
    int fit = sendUntilBlocked(addr, received, Integer.MAX_VALUE);
    boolean blockedIn504 = false;
    for (int margin = 4; margin <= 64 && !blockedIn504; margin *= 2) {
      // fills to within a margin of the capacity, then 504s (small) until one's write blocks
      sendUntilBlocked(addr, received, Math.max(0, fit - margin));
      blockedIn504 = lastKind.get() == 'h';
    }
    assertTrue(blockedIn504, "a 504's write blocked");
    // the timer still fires: a stranger that stalls in its request headers now is cut at the
    // I/O deadline (a request's timeout would prove nothing: the HTTP client has a backstop)
    Socket stalled = stall(addr, "POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n");
    stalled.setSoTimeout(10_000);
    assertEquals(-1, stalled.getInputStream().read(), "the stalled connection is closed");
  }

  /** The body of each fill answer of {@link #aTimedOutRequestsAnswerThatCannotBeWrittenDoesNotBlockTheTimer}. */
  private static final int FILL = 32 << 10;

  /**
   * Opens a connection with a small receive window that never reads, sends {@code fills}
   * requests answered at once with {@link #FILL} bytes, then requests the handler never answers,
   * one at a time (the JDK server reads the next request once the last is answered), until one
   * is not read within a while: it waits behind an answer whose write is blocked.
   *
   * @return the number of requests that were read, less one (those whose answers were written)
   */
  private int sendUntilBlocked(InetSocketAddress addr, AtomicInteger received, int fills)
      throws Exception {
    Socket s = new Socket();
    toClose.add(s);
    s.setReceiveBufferSize(1024); // a small window, set before connecting
    s.connect(addr);
    OutputStream out = s.getOutputStream();
    int base = received.get();
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    for (int sent = 1; System.nanoTime() < end; sent++) {
      out.write(("POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n"
          + "PR-Sender: b\r\nPR-Sender-Address: 127.0.0.1:1\r\nPR-Recipient: a\r\n"
          + "PR-Timestamp: 0\r\nPR-Nonce: n" + sent + "\r\nContent-Length: 1\r\n\r\n"
          + (sent <= fills ? "f" : "h")).getBytes(StandardCharsets.US_ASCII));
      out.flush();
      long wait = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(300);
      while (received.get() - base < sent && System.nanoTime() < wait) {
        Thread.sleep(1);
      }
      if (received.get() - base < sent) {
        return sent - 2;
      }
    }
    throw new AssertionError("no answer's write blocked within 60 s");
  }
}
