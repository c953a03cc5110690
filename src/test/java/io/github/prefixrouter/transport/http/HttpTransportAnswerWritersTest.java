package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.Await;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;

/**
 * The answers to inbound requests waiting for a server thread or being written: each holds its
 * request's slot of {@code maxInboundRequests} until it is written or its connection closed.
 */
class HttpTransportAnswerWritersTest extends HttpTransportFixture {

  /** An answer far larger than a connection's socket buffers take. */
  static final byte[] BIG = new byte[(4 << 20) - 64];

  /** Who the handler was called for, in order. */
  final List<String> handled = new CopyOnWriteArrayList<>();

  /** Answers the stalled peer "s" with {@link #BIG} at once, and nobody else ever. */
  final Transport.InboundHandler bigForS = new Transport.InboundHandler() {
    @Override
    public void onMessage(PeerAddress from, byte[] payload) {}

    @Override
    public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
      handled.add(from.nodeId());
      return from.nodeId().equals("s") ? CompletableFuture.completedFuture(BIG)
          : new CompletableFuture<>();
    }
  };

  /**
   * Opens a connection from {@code local} (null: any) with a small receive window that never
   * reads, and sends a request from "s" on it.
   */
  Socket stalledRequest(InetSocketAddress to, InetAddress local, int n) throws Exception {
    Socket s = new Socket();
    toClose.add(s);
    s.setReceiveBufferSize(4096); // a small window, set before connecting; never read
    if (local != null) {
      s.bind(new InetSocketAddress(local, 0));
    }
    s.connect(to);
    OutputStream out = s.getOutputStream();
    out.write(("POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n"
        + "PR-Sender: s\r\nPR-Sender-Address: 127.0.0.1:1\r\nPR-Recipient: a\r\n"
        + "PR-Timestamp: 0\r\nPR-Nonce: n" + n + "\r\nContent-Length: 1\r\n\r\nx")
        .getBytes(StandardCharsets.US_ASCII));
    out.flush();
    return s;
  }

  /**
   * One server thread, blocked writing an answer to a peer that reads nothing, and a 504 of the
   * handling limit waiting behind it: the two hold both slots of {@code maxInboundRequests}, so a
   * third request is refused busy, not handed to the handler. Before, both gave their slots back
   * before they were written (the 504 as its limit passed, the handler's answer as its write
   * began), and every request handled from there added one more answer waiting to be written.
   * Once the stalled write is cut, the 504 is written and the slots are free again.
   */
  @Test
  void answersWaitingToBeWrittenHoldTheirSlots() throws Exception {
    HttpTransport a = start(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().serverThreads(1).maxInboundRequests(2)
        .maxHandlingTime(Duration.ofMillis(300)).inboundIoTimeout(Duration.ofSeconds(10)),
        bigForS);
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication(), new HttpTransportTest.Recorder());
    InetSocketAddress addr = HttpTransportTest.hostPort(a.localAddress().address());
    stalledRequest(addr, null, 1);
    // the answer is counted as its write starts, on the only server thread, where it blocks
    Await.until(() -> a.stats().bytesOut() >= BIG.length, "the big answer is being written");
    CompletableFuture<byte[]> timedOut =
        b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(60));
    Await.until(() -> handled.size() == 2 && a.requestsBeingHandled() == 0,
        "the second request is answered 504 by the handling limit");
    CompletableFuture<byte[]> third =
        b.request(a.localAddress(), new byte[] {2}, Duration.ofSeconds(60));
    Await.until(() -> third.isDone() || handled.size() > 2, "the third request is settled");
    assertEquals(List.of("s", "b"), handled,
        "a request was handled while two answers waited to be written");
    ExecutionException e = assertThrows(ExecutionException.class, third::get);
    TransportException te = assertInstanceOf(TransportException.class, e.getCause());
    assertEquals(TransportException.Kind.BUSY, te.kind(), te.getMessage());
    assertTrue(te.getMessage().endsWith("too many requests in progress"), te.getMessage());
    // the stalled write is cut at the I/O timeout; the 504 behind it is written then
    e = assertThrows(ExecutionException.class, () -> timedOut.get(30, TimeUnit.SECONDS));
    te = assertInstanceOf(TransportException.class, e.getCause());
    assertEquals(TransportException.Kind.TIMEOUT, te.kind(), te.getMessage());
    Await.until(() -> a.stats().slowConnectionsClosed() == 1, "the stalled write is cut");
    CompletableFuture<byte[]> fourth =
        b.request(a.localAddress(), new byte[] {3}, Duration.ofSeconds(60));
    Await.until(() -> handled.size() == 3, "a request is handled again");
    assertEquals(1, a.stats().inboundBusy());
    fourth.cancel(true);
  }

  /** Half the server threads, rounded down and at least one, write to one peer address. */
  @Test
  void halfTheServerThreadsAtMostWriteToOnePeerAddress() {
    int[][] expected = {{1, 1}, {2, 1}, {3, 1}, {4, 2}, {5, 2}, {7, 3}, {32, 16}};
    for (int[] e : expected) {
      assertEquals(e[1], HttpTransport.writersPerPeer(e[0]), e[0] + " server threads");
    }
  }

  /** A loopback address other than 127.0.0.1, for a second peer address on this host. */
  static InetAddress otherLoopback() throws Exception {
    InetAddress other = InetAddress.getByName("127.0.0.2");
    try (Socket probe = new Socket()) {
      probe.bind(new InetSocketAddress(other, 0));
    } catch (java.io.IOException e) {
      assumeTrue(false, "127.0.0.2 is not a local address here: " + e);
    }
    return other;
  }

  /** Answers "s" with {@link #BIG} and everyone else with "ok", at once. */
  final Transport.InboundHandler bigForSOkForOthers = new Transport.InboundHandler() {
    @Override
    public void onMessage(PeerAddress from, byte[] payload) {}

    @Override
    public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
      handled.add(from.nodeId());
      return CompletableFuture.completedFuture(from.nodeId().equals("s") ? BIG
          : "ok".getBytes(StandardCharsets.UTF_8));
    }
  };

  /**
   * Three connections from one address that read none of their large answers, and two server
   * threads: at most one of them (half of the threads) writes to that address, the other two
   * answers wait in its lane, and another peer's answer is written at once on the other thread.
   * Before, the stalled answers took both threads in turn, and the other peer's answer waited
   * behind them for the I/O timeout (20 s here; 10 s is the bound asserted). Once the stalled
   * peer goes away, its lane is written to the end and removed, and every slot is free again.
   */
  @Test
  void aPeerThatDoesNotReadLeavesTheOtherWritersToOtherPeers() throws Exception {
    InetAddress stalled = otherLoopback();
    HttpTransport a = start(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().serverThreads(2)
        .inboundIoTimeout(Duration.ofSeconds(20)), bigForSOkForOthers);
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication(), new HttpTransportTest.Recorder());
    InetSocketAddress addr = HttpTransportTest.hostPort(a.localAddress().address());
    List<Socket> stalls = new java.util.ArrayList<>();
    for (int i = 1; i <= 3; i++) {
      stalls.add(stalledRequest(addr, stalled, i));
    }
    // all three answers handed on, and one being written (counted as its write starts)
    Await.until(() -> handled.size() == 3 && a.stats().bytesOut() >= BIG.length,
        "the stalled peer's three answers are handed on");
    CompletableFuture<byte[]> other =
        b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(60));
    byte[] answer;
    try {
      answer = other.get(10, TimeUnit.SECONDS);
    } catch (TimeoutException e) {
      throw new AssertionError("another peer's answer waited behind the stalled peer's writes "
          + "for 10 s (writes started: " + a.stats().bytesOut() / BIG.length + ")", e);
    }
    assertEquals("ok", new String(answer, StandardCharsets.UTF_8));
    assertEquals(1, a.answersBeingWrittenTo(stalled), "answers being written to the stalled peer");
    assertEquals(2, a.answersWaitingFor(stalled), "answers waiting for the stalled peer");
    // the stalled peer goes away: its answers fail to be written, in turn, and its lane ends
    for (Socket s : stalls) {
      s.close();
    }
    Await.until(() -> a.answerLanes() == 0 && a.inboundSlotsHeld() == 0,
        "every answer written or failed, its lane removed and its slot given back");
    assertEquals(3 * (long) BIG.length + 2, a.stats().bytesOut());
  }

  /**
   * close() while a peer that reads nothing has one answer being written and two waiting in its
   * lane: another peer's request still in the handler is answered 503 at once, while close()
   * still waits for the stalled write, close() returns within its bound, and every slot and lane
   * is given up.
   */
  @Test
  void closeWhileAnswersWaitInALaneGivesEverySlotBack() throws Exception {
    InetAddress stalled = otherLoopback();
    // long enough that close() still waits for the stalled write, begun before, when the 503
    // comes, on a loaded machine too
    Duration io = Duration.ofSeconds(10);
    HttpTransport a = start(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().serverThreads(2).inboundIoTimeout(io), bigForS);
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication(), new HttpTransportTest.Recorder());
    InetSocketAddress addr = HttpTransportTest.hostPort(a.localAddress().address());
    for (int i = 1; i <= 3; i++) {
      stalledRequest(addr, stalled, i);
    }
    CompletableFuture<byte[]> held =
        b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(60));
    Await.until(() -> handled.size() == 4 && a.answersWaitingFor(stalled) == 2,
        "one answer to the stalled peer is being written, two wait, b's request is handled");
    long start = System.nanoTime();
    // on a thread of its own: b's client completes its answers on the common pool, which from
    // JDK 25 has one thread on 2 processors, and close() must not be the one holding it
    CompletableFuture<Void> closing =
        CompletableFuture.runAsync(a::close, r -> new Thread(r, "closing a").start());
    // at once: before close() returns, which waits for the stalled write (up to io)
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> held.get(io.toMillis() + 20_000, TimeUnit.MILLISECONDS));
    long answeredAfter = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertFalse(closing.isDone(),
        "the 503 came only once close() returned, " + answeredAfter + " ms after it began");
    TransportException te = assertInstanceOf(TransportException.class, e.getCause());
    assertEquals(TransportException.Kind.BUSY, te.kind(), te.getMessage());
    closing.get(io.toMillis() + 20_000, TimeUnit.MILLISECONDS);
    long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertTrue(took <= io.toMillis() + 5_000, "close() took " + took + " ms");
    Await.until(() -> a.answerLanes() == 0 && a.inboundSlotsHeld() == 0,
        "every answer written or dropped, its lane removed and its slot given back");
  }

  /**
   * close() while answers to one address wait in its lane behind one being written to a peer
   * that reads nothing: once that write is cut at the I/O timeout (within close()'s wait), the
   * closing transport writes the 503s waiting behind it to their connections, which read them,
   * rather than closing those connections unanswered.
   */
  @Test
  void closeWritesThe503sWaitingInALaneBehindAStalledWrite() throws Exception {
    InetAddress stalled = otherLoopback();
    Duration io = Duration.ofSeconds(3);
    HttpTransport a = start(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().serverThreads(2).inboundIoTimeout(io), bigForS);
    InetSocketAddress addr = HttpTransportTest.hostPort(a.localAddress().address());
    stalledRequest(addr, stalled, 1);
    Await.until(() -> a.answersBeingWrittenTo(stalled) == 1, "the big answer is being written");
    List<Socket> held = new java.util.ArrayList<>();
    for (int i = 2; i <= 3; i++) { // requests of "c" from the same address: never answered
      Socket s = new Socket();
      toClose.add(s);
      s.bind(new InetSocketAddress(stalled, 0));
      s.connect(addr);
      s.getOutputStream().write(("POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n"
          + "PR-Sender: c\r\nPR-Sender-Address: 127.0.0.1:1\r\nPR-Recipient: a\r\n"
          + "PR-Timestamp: 0\r\nPR-Nonce: n" + i + "\r\nContent-Length: 1\r\n\r\nx")
          .getBytes(StandardCharsets.US_ASCII));
      s.getOutputStream().flush();
      held.add(s);
    }
    Await.until(() -> handled.size() == 3, "both requests of c are in the handler");
    Thread.sleep(1_000); // close()'s wait ends well after the big write is cut
    a.close();
    for (Socket s : held) {
      s.setSoTimeout(20_000);
      String status = new java.io.BufferedReader(new java.io.InputStreamReader(
          s.getInputStream(), StandardCharsets.US_ASCII)).readLine();
      assertTrue(status != null && status.startsWith("HTTP/1.1 503"),
          "the answer to a request waiting in the lane at close: " + status);
    }
    assertEquals(0, a.answerLanes());
    assertEquals(0, a.inboundSlotsHeld());
  }

  /**
   * A server full ({@code maxInboundRequests} 1, held by a request the handler never answers),
   * and a peer at another address that pipelines requests on a connection with a small receive
   * window and reads none of their 503s, until they fill the socket buffers; then three
   * strangers stall in their headers. Of the four reader threads, the strangers hold three, and
   * the fourth stays free, as the 503s are written by the server threads through the peer
   * address's lane.
   * So another peer's message is read and delivered, and its request answered 503, at once.
   * Before, the 503s were written on the reader threads, and the peer's connection held one in
   * a blocked write until the I/O timeout (30 s here): the other peer's message was refused as
   * a read beyond the reader threads.
   */
  @Test
  void busyAnswersToAPeerThatDoesNotReadHoldNoReaderThread() throws Exception {
    InetAddress stalled = otherLoopback();
    FullServer full = new FullServer(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().serverThreads(2).readerThreads(4)
        .maxInboundRequests(1).inboundIoTimeout(Duration.ofSeconds(30)));
    HttpTransportTest.Recorder ra = full.ra;
    HttpTransport a = full.a;
    HttpTransport b = full.b;
    List<Socket> stalls = new java.util.ArrayList<>();
    try {
      // a connection that pipelines requests until its 503s stop being taken
      stalls.add(pipelineWithoutReading(full.addr, stalled, 0));
      awaitQuiet(a, "the peer's 503s still taken after 60 s");
      // and three strangers that stall in their headers hold three reader threads
      for (int i = 0; i < 3; i++) {
        Socket staller = new Socket();
        stalls.add(staller);
        staller.connect(full.addr);
        staller.getOutputStream().write("POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n"
            .getBytes(StandardCharsets.US_ASCII));
        staller.getOutputStream().flush();
      }
      Thread.sleep(500);
      assertTrue(a.stats().inboundBusy() > 100, "503s taken: " + a.stats().inboundBusy());
      b.send(a.localAddress(), "m".getBytes(StandardCharsets.UTF_8));
      String got = ra.messages.poll(5, TimeUnit.SECONDS);
      assertEquals("b@" + b.localAddress().address() + ":m", got,
          "another peer's message while the pipelining peer reads none of its 503s (reads "
              + "refused: " + a.stats().readsRefused() + ")");
      CompletableFuture<byte[]> other =
          b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(60));
      ExecutionException e = assertThrows(ExecutionException.class,
          () -> other.get(5, TimeUnit.SECONDS));
      TransportException te = assertInstanceOf(TransportException.class, e.getCause());
      assertEquals(TransportException.Kind.BUSY, te.kind(), te.getMessage());
      assertTrue(te.getMessage().endsWith("too many requests in progress"), te.getMessage());
    } finally {
      for (Socket s : stalls) {
        s.close();
      }
    }
    Await.until(() -> a.answerLanes() == 0 && a.inboundSlotsHeld() == 1,
        "the peer's 503s written or dropped, their lane removed; the held request's slot kept");
    full.holder.cancel(true);
  }

  /**
   * A server full ({@code maxInboundRequests} 1, held by a request the handler never answers),
   * two server threads, {@code maxUnfinishedReadsPerAddress} 1, and six peers at addresses of
   * their own that pipeline requests and read none of their 503s: each address is within its
   * own bound (one 503 at a time on its one connection), but the 503s waiting or being written
   * to them all together are at most 3 (1 + 1 + 1); beyond, a connection is closed unanswered at
   * once. Before, each address kept one 503 (and its connection) until its I/O timeout, so that
   * peers held as many as they had addresses.
   */
  @Test
  void busyAnswersToPeersThatDoNotReadAreBoundedInTotal() throws Exception {
    assertEquals(3, HttpTransport.maxBusyReplies(1, 1, 2));
    assertEquals(256 + 8 + 2, HttpTransport.maxBusyReplies(256, 8, 4));
    List<InetAddress> peers = new java.util.ArrayList<>();
    otherLoopback();
    for (int i = 2; i <= 7; i++) {
      peers.add(InetAddress.getByName("127.0.0." + i));
    }
    FullServer full = new FullServer(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().serverThreads(2).maxInboundRequests(1)
        .maxUnfinishedReadsPerAddress(1).inboundIoTimeout(Duration.ofSeconds(30)));
    HttpTransport a = full.a;
    List<Socket> stalls = new java.util.ArrayList<>();
    try {
      for (int i = 0; i < peers.size(); i++) {
        stalls.add(pipelineWithoutReading(full.addr, peers.get(i), i));
      }
      awaitQuiet(a, "the peers' 503s still taken after 60 s");
      assertTrue(a.stats().inboundBusy() > 100, "503s taken: " + a.stats().inboundBusy());
      assertTrue(a.busyAnswersHeld() <= 3, "503s waiting or being written to the "
          + peers.size() + " peers that read none: " + a.busyAnswersHeld());
    } finally {
      for (Socket s : stalls) {
        s.close();
      }
    }
    Await.until(() -> a.answerLanes() == 0 && a.busyAnswersHeld() == 0,
        "the peers' 503s written or dropped, their lanes removed");
    assertEquals(1, a.inboundSlotsHeld(), "the held request's slot");
    full.holder.cancel(true);
  }

  /** What changes while a peer's requests are read and answered: refused or answered busy. */
  private static long quiet(HttpTransport a) {
    return a.stats().inboundBusy() + a.stats().readsRefused();
  }

  /**
   * Waits until {@link #quiet} stays the same over a second, as a peer's 503s are no longer
   * taken; fails with {@code stillTaken} if it still changes after 60 s.
   */
  private static void awaitQuiet(HttpTransport a, String stillTaken) throws InterruptedException {
    long seen = -1;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    for (long n = quiet(a); n != seen; n = quiet(a)) {
      assertTrue(System.nanoTime() < deadline, stillTaken);
      seen = n;
      Thread.sleep(1_000);
    }
  }

  /**
   * A transport "a" built from {@code config} (with {@code maxInboundRequests} 1) whose handler
   * {@link #ra} holds every request, and a transport "b" whose request {@link #holder} takes
   * a's one slot: the server is full.
   */
  private final class FullServer {
    final HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    final HttpTransport a;
    final HttpTransport b;
    /** Where a listens. */
    final InetSocketAddress addr;
    final CompletableFuture<byte[]> holder;

    FullServer(HttpTransport.Builder config) throws InterruptedException {
      ra.hold = true;
      a = start(config, ra);
      b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
          .insecureWithoutAuthentication(), new HttpTransportTest.Recorder());
      addr = HttpTransportTest.hostPort(a.localAddress().address());
      holder = b.request(a.localAddress(), new byte[] {0}, Duration.ofSeconds(120));
      Await.until(() -> ra.held.size() == 1, "the server is full");
    }
  }

  /**
   * Opens a connection from {@code local} with a small receive window that never reads, and
   * sends requests from "s" on it one after the other until it is closed.
   */
  static Socket pipelineWithoutReading(InetSocketAddress to, InetAddress local, int conn)
      throws Exception {
    Socket s = new Socket();
    s.setReceiveBufferSize(4096); // a small window, set before connecting; never read
    s.bind(new InetSocketAddress(local, 0));
    s.connect(to);
    Thread writer = new Thread(() -> {
      try {
        OutputStream out = s.getOutputStream();
        for (int i = 0; i < 100_000; i++) {
          out.write(("POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n"
              + "PR-Sender: s\r\nPR-Sender-Address: 127.0.0.1:1\r\nPR-Recipient: a\r\n"
              + "PR-Timestamp: 0\r\nPR-Nonce: n" + conn + "-" + i
              + "\r\nContent-Length: 1\r\n\r\nx").getBytes(StandardCharsets.US_ASCII));
        }
      } catch (java.io.IOException closed) {
        // closed by the server, or by the test
      }
    }, "pipelining-peer-" + conn);
    writer.setDaemon(true);
    writer.start();
    return s;
  }
}
