package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import io.github.prefixrouter.internal.InFlightLimitException;
import io.github.prefixrouter.internal.wire.JdkHttpServers;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class HttpTransportTest extends HttpTransportFixture {

  static final byte[] KEY = "0123456789abcdef0123456789abcdef".getBytes(StandardCharsets.US_ASCII);
  static final byte[] OTHER_KEY = "fedcba9876543210fedcba9876543210".getBytes(StandardCharsets.US_ASCII);

  /** Records inbound traffic; requests are answered by {@link #answer}. */
  static final class Recorder implements Transport.InboundHandler {
    final BlockingQueue<String> messages = new LinkedBlockingQueue<>();
    final List<CompletableFuture<byte[]>> held = new CopyOnWriteArrayList<>();
    volatile boolean hold;
    volatile boolean busy;

    @Override
    public void onMessage(PeerAddress from, byte[] payload) {
      messages.add(from.nodeId() + "@" + from.address() + ":" + new String(payload, StandardCharsets.UTF_8));
    }

    @Override
    public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
      if (busy) {
        return CompletableFuture.failedFuture(new TransportException(TransportException.Kind.BUSY, "full"));
      }
      if (hold) {
        CompletableFuture<byte[]> f = new CompletableFuture<>();
        held.add(f);
        return f;
      }
      String s = "echo " + from.nodeId() + " " + new String(payload, StandardCharsets.UTF_8);
      return CompletableFuture.completedFuture(s.getBytes(StandardCharsets.UTF_8));
    }
  }

  private static TransportException.Kind failureKind(CompletableFuture<?> f) throws Exception {
    return failure(f).kind();
  }

  private static TransportException failure(CompletableFuture<?> f) throws Exception {
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
    assertTrue(e.getCause() instanceof TransportException, "cause: " + e.getCause());
    return (TransportException) e.getCause();
  }

  @Test
  void requestAndMessageRoundTripWithAuthenticatedSender() throws Exception {
    Recorder ra = new Recorder();
    HttpTransport a = start(node("a"), ra);
    HttpTransport b = start(node("b"), new Recorder());
    byte[] answer = b.request(a.localAddress(), "hi".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(5))
        .get(10, TimeUnit.SECONDS);
    assertEquals("echo b hi", new String(answer, StandardCharsets.UTF_8));
    b.send(a.localAddress(), "gossip".getBytes(StandardCharsets.UTF_8));
    assertEquals("b@" + b.localAddress().address() + ":gossip", ra.messages.poll(10, TimeUnit.SECONDS));
    // many requests over reused connections: four bursts of 50, each within the 64 a peer may
    // have in flight and the receiver's 64 reader threads (200 at once exceeded the readers,
    // and those beyond them were refused BUSY whenever the machine was too busy to finish the
    // earlier reads first)
    for (int burst = 0; burst < 4; burst++) {
      List<CompletableFuture<byte[]>> fs = new ArrayList<>();
      for (int i = 0; i < 50; i++) {
        fs.add(b.request(a.localAddress(), ("r" + burst + "." + i).getBytes(StandardCharsets.UTF_8),
            Duration.ofSeconds(10)));
      }
      for (int i = 0; i < 50; i++) {
        assertEquals("echo b r" + burst + "." + i,
            new String(fs.get(i).get(20, TimeUnit.SECONDS), StandardCharsets.UTF_8));
      }
    }
    assertEquals(201, a.stats().requestsReceived());
    assertEquals(0, a.stats().authFailures());
  }

  @Test
  void requestTimesOutWhenThePeerDoesNotAnswer() throws Exception {
    Recorder ra = new Recorder();
    ra.hold = true;
    HttpTransport a = start(node("a"), ra);
    HttpTransport b = start(node("b"), new Recorder());
    CompletableFuture<byte[]> f = b.request(a.localAddress(), new byte[] {1}, Duration.ofMillis(300));
    assertEquals(TransportException.Kind.TIMEOUT, failureKind(f));
    assertEquals(0, b.stats().pendingRequests());
  }

  @Test
  void unreachablePeerFailsWithUnreachable() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    HttpTransport b = start(node("b"), new Recorder());
    CompletableFuture<byte[]> f =
        b.request(new PeerAddress("x", "127.0.0.1:" + port), new byte[] {1}, Duration.ofSeconds(5));
    assertEquals(TransportException.Kind.UNREACHABLE, failureKind(f));
    b.send(new PeerAddress("x", "127.0.0.1:" + port), new byte[] {1}); // never throws
  }

  @Test
  void peerBusyIsReportedAsBusy() throws Exception {
    Recorder ra = new Recorder();
    ra.busy = true;
    HttpTransport a = start(node("a"), ra);
    HttpTransport b = start(node("b"), new Recorder());
    TransportException e = failure(b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(5)));
    assertEquals(TransportException.Kind.BUSY, e.kind());
    // the peer's push-back: the node cools the peer down
    assertFalse(e instanceof InFlightLimitException, e.toString());
  }

  @Test
  void tooManyRequestsInFlightToOnePeerFailFastWithBusy() throws Exception {
    Recorder ra = new Recorder();
    ra.hold = true;
    HttpTransport a = start(node("a"), ra);
    HttpTransport b = start(node("b").maxInFlightPerPeer(2), new Recorder());
    CompletableFuture<byte[]> f1 = b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(10));
    CompletableFuture<byte[]> f2 = b.request(a.localAddress(), new byte[] {2}, Duration.ofSeconds(10));
    CompletableFuture<byte[]> f3 = b.request(a.localAddress(), new byte[] {3}, Duration.ofSeconds(10));
    assertTrue(f3.isDone(), "third request must fail at once");
    assertEquals(TransportException.Kind.BUSY, failureKind(f3));
    // raised here, not said by the peer: the node neither cools the peer down nor counts push-back
    assertTrue(failure(f3) instanceof InFlightLimitException, failure(f3).toString());
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (ra.held.size() < 2 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(2, ra.held.size(), "the first two requests reach the handler");
    ra.held.forEach(h -> h.complete(new byte[] {9}));
    assertArrayEquals(new byte[] {9}, f1.get(10, TimeUnit.SECONDS));
    assertArrayEquals(new byte[] {9}, f2.get(10, TimeUnit.SECONDS));
    // capacity is released: a new request goes through
    ra.hold = false;
    assertEquals("echo b \u0004",
        new String(b.request(a.localAddress(), new byte[] {4}, Duration.ofSeconds(10)).get(10, TimeUnit.SECONDS),
            StandardCharsets.UTF_8));
  }

  /**
   * Requests may not take a peer's last {@code min(4, maxInFlightPerPeer / 4)} slots: forwards of
   * long generations holding all the others leave room for messages (gossip, CANCELs), which
   * were all dropped as busy, so the peer heard nothing more of this node.
   */
  @Test
  void requestsHoldingTheirLimitLeaveSlotsForMessages() throws Exception {
    Recorder ra = new Recorder();
    ra.hold = true;
    HttpTransport a = start(node("a"), ra);
    HttpTransport b = start(node("b"), new Recorder()); // maxInFlightPerPeer 64
    List<CompletableFuture<byte[]>> requests = new ArrayList<>();
    for (int i = 0; i < 64; i++) {
      requests.add(b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(30)));
    }
    for (int i = 0; i < 4; i++) {
      b.send(a.localAddress(), ("m" + i).getBytes(StandardCharsets.UTF_8));
    }
    assertEquals(0, b.stats().messagesDropped(), "messages dropped beside 64 requests");
    long refused = requests.stream().filter(CompletableFuture::isDone).count();
    assertEquals(4, refused, "requests refused as busy: 60 may be in flight");
    for (CompletableFuture<byte[]> f : requests.subList(60, 64)) {
      assertEquals(TransportException.Kind.BUSY, failureKind(f));
    }
    for (int i = 0; i < 4; i++) {
      assertNotNull(ra.messages.poll(10, TimeUnit.SECONDS), "message " + i + " delivered");
    }
    assertEquals(4, b.stats().outboundBusy());
    requests.forEach(f -> f.cancel(true));
  }

  /** The slots kept for messages, as the class documentation and docs/deployment.md give them. */
  @Test
  void slotsKeptForMessagesAreAQuarterOfTheLimitUpTo4() {
    assertEquals(0, HttpTransport.slotsForMessages(1));
    assertEquals(0, HttpTransport.slotsForMessages(3));
    assertEquals(1, HttpTransport.slotsForMessages(4));
    assertEquals(2, HttpTransport.slotsForMessages(8));
    assertEquals(4, HttpTransport.slotsForMessages(16));
    assertEquals(4, HttpTransport.slotsForMessages(64));
    assertEquals(4, HttpTransport.slotsForMessages(1 << 20));
  }

  @Test
  void inboundRequestsAboveTheLimitAreAnsweredBusy() throws Exception {
    Recorder ra = new Recorder();
    ra.hold = true;
    HttpTransport a = start(node("a").maxInboundRequests(1), ra);
    HttpTransport b = start(node("b"), new Recorder());
    CompletableFuture<byte[]> f1 = b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(10));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (ra.held.isEmpty() && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(1, ra.held.size(), "the first request holds the only inbound slot");
    TransportException e = failure(b.request(a.localAddress(), new byte[] {2}, Duration.ofSeconds(10)));
    assertEquals(TransportException.Kind.BUSY, e.kind());
    assertFalse(e instanceof InFlightLimitException, "the peer's 503 is its push-back: " + e);
    assertEquals(1, a.stats().inboundBusy());
    ra.held.get(0).complete(new byte[] {7});
    assertArrayEquals(new byte[] {7}, f1.get(10, TimeUnit.SECONDS));
  }

  @Test
  void closeFailsEveryPendingRequestWithClosed() throws Exception {
    Recorder ra = new Recorder();
    ra.hold = true;
    HttpTransport a = start(node("a"), ra);
    HttpTransport b = start(node("b"), new Recorder());
    List<CompletableFuture<byte[]>> fs = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      fs.add(b.request(a.localAddress(), new byte[] {(byte) i}, Duration.ofSeconds(30)));
    }
    b.close();
    for (CompletableFuture<byte[]> f : fs) {
      assertEquals(TransportException.Kind.CLOSED, failureKind(f));
    }
    assertEquals(TransportException.Kind.CLOSED,
        failureKind(b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(1))));
    b.send(a.localAddress(), new byte[] {1}); // dropped, never throws
    b.close(); // idempotent
  }

  /**
   * A request still in the handler when the receiving transport closes is answered 503 with the
   * error "transport closed" (on a server thread, under the I/O deadline), which its sender
   * reports as {@code BUSY} naming the cause, at once rather than at its timeout; close()
   * returns long before its bound of {@code inboundIoTimeout}, and the handler's answer coming
   * after close() is written nowhere.
   */
  @Test
  void closingTheServerSideAnswersItsInboundRequestsWith503() throws Exception {
    Recorder ra = new Recorder();
    ra.hold = true;
    HttpTransport a = start(node("a").inboundIoTimeout(Duration.ofSeconds(20)), ra);
    HttpTransport b = start(node("b"), new Recorder());
    CompletableFuture<byte[]> f = b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(60));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (ra.held.isEmpty() && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(1, ra.held.size(), "the request must be in the handler when the server closes");
    long start = System.nanoTime();
    a.close();
    long closeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertTrue(closeMillis < 10_000, "close() took " + closeMillis + " ms");
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
    TransportException te = assertInstanceOf(TransportException.class, e.getCause());
    assertEquals(TransportException.Kind.BUSY, te.kind(), te.getMessage());
    assertTrue(te.getMessage().endsWith("is busy: transport closed"), te.getMessage());
    ra.held.get(0).complete(new byte[] {9}); // too late: close() answered it
    assertEquals(0, a.stats().inboundBusy(), "counted as refused by a full transport");
  }

  /** What a plain HTTP client sees of close()'s answer: the status line and the error header. */
  @Test
  void closeAnswersARequestInTheHandler503OnTheWire() throws Exception {
    Recorder ra = new Recorder();
    ra.hold = true;
    HttpTransport a = start(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().inboundIoTimeout(Duration.ofSeconds(20)), ra);
    InetSocketAddress addr = hostPort(a.localAddress().address());
    try (Socket s = new Socket(addr.getHostString(), addr.getPort())) {
      s.setSoTimeout(10_000);
      OutputStream out = s.getOutputStream();
      out.write(("POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n"
          + "PR-Sender: b\r\nPR-Sender-Address: 127.0.0.1:1\r\nPR-Recipient: a\r\n"
          + "PR-Timestamp: 0\r\nPR-Nonce: n1\r\nContent-Length: 1\r\n\r\nx")
          .getBytes(StandardCharsets.US_ASCII));
      out.flush();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (ra.held.isEmpty() && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      assertEquals(1, ra.held.size(), "the request must be in the handler when the server closes");
      a.close();
      String head = new String(s.getInputStream().readAllBytes(), StandardCharsets.US_ASCII);
      assertTrue(head.startsWith("HTTP/1.1 503 "), head);
      assertTrue(head.toLowerCase(java.util.Locale.ROOT).contains("\r\npr-error: transport closed\r\n"), head);
    }
  }

  @Test
  void wrongClusterKeyIsRejectedCountedAndNeverDelivered() throws Exception {
    Recorder ra = new Recorder();
    HttpTransport a = start(node("a"), ra);
    HttpTransport intruder =
        start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0).clusterKey(OTHER_KEY), new Recorder());
    assertEquals(TransportException.Kind.PROTOCOL,
        failureKind(intruder.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(5))));
    intruder.send(a.localAddress(), "forged".getBytes(StandardCharsets.UTF_8));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (a.stats().authFailures() < 2 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(2, a.stats().authFailures());
    assertEquals(0, a.stats().requestsReceived());
    assertTrue(ra.messages.isEmpty());
  }

  @Test
  void tamperedPayloadOrSenderFailsAuthentication() throws Exception {
    Recorder ra = new Recorder();
    HttpTransport a = start(node("a"), ra);
    MessageAuthenticator auth = new MessageAuthenticator(List.of(KEY));
    String ts = Long.toString(System.currentTimeMillis());
    byte[] body = "real".getBytes(StandardCharsets.UTF_8);
    String mac = auth.sign(body, "message", "b", "127.0.0.1:1", "a", ts, "n1");
    // payload changed
    assertEquals(401, post(a, "/prefix-router/v1/message", "forged".getBytes(StandardCharsets.UTF_8),
        "b", "127.0.0.1:1", "a", ts, "n1", mac));
    // sender changed (claims another node's identity)
    assertEquals(401, post(a, "/prefix-router/v1/message", body, "c", "127.0.0.1:1", "a", ts, "n1", mac));
    // addressed to another node
    assertEquals(401, post(a, "/prefix-router/v1/message", body, "b", "127.0.0.1:1", "z", ts, "n1", mac));
    // intact
    assertEquals(204, post(a, "/prefix-router/v1/message", body, "b", "127.0.0.1:1", "a", ts, "n1", mac));
    assertEquals("b@127.0.0.1:1:real", ra.messages.poll(10, TimeUnit.SECONDS));
    assertEquals(3, a.stats().authFailures());
    assertTrue(ra.messages.isEmpty());
  }

  /**
   * The answers docs/deployment.md lists for what is not a signed envelope at all: 400 for an
   * envelope out of form (a timestamp that is no number, a nonce empty or above 64 characters),
   * counted as malformed and checked before the MAC; 405, with {@code Allow: POST}, for another
   * method than POST. Nothing is delivered.
   */
  @Test
  void anEnvelopeOutOfFormIs400AndAnotherMethod405() throws Exception {
    Recorder ra = new Recorder();
    HttpTransport a = start(node("a"), ra);
    MessageAuthenticator auth = new MessageAuthenticator(List.of(KEY));
    String ts = Long.toString(System.currentTimeMillis());
    byte[] body = "real".getBytes(StandardCharsets.UTF_8);
    String longNonce = "n".repeat(65);
    assertEquals(400, post(a, "/prefix-router/v1/message", body, "b", "127.0.0.1:1", "a", ts,
        longNonce, auth.sign(body, "message", "b", "127.0.0.1:1", "a", ts, longNonce)));
    assertEquals(400, post(a, "/prefix-router/v1/request", body, "b", "127.0.0.1:1", "a", "soon",
        "n2", auth.sign(body, "request", "b", "127.0.0.1:1", "a", "soon", "n2")));
    assertEquals(2, a.stats().malformedRejected());
    assertEquals(0, a.stats().authFailures());
    HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    HttpResponse<Void> get = c.send(HttpRequest.newBuilder(
        URI.create("http://" + a.localAddress().address() + "/prefix-router/v1/message")).GET()
        .build(), HttpResponse.BodyHandlers.discarding());
    assertEquals(405, get.statusCode());
    assertEquals(Optional.of("POST"), get.headers().firstValue("Allow"));
    assertTrue(ra.messages.isEmpty());
    assertEquals(0, a.stats().messagesReceived() + a.stats().requestsReceived());
  }

  @Test
  void aPeerAddressedByAWrongIdIsNamedOnceByTheSender() throws Exception {
    Recorder ra = new Recorder();
    HttpTransport a = start(node("a"), ra);
    HttpTransport b = start(node("b"), new Recorder());
    PeerAddress wrong = new PeerAddress("wrong", a.localAddress().address());
    // a seed with the wrong id: messages fail at the peer, and the sender learns who is there
    for (int i = 0; i < 3; i++) {
      b.send(wrong, new byte[] {1});
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (b.stats().messagesFailed() < 3 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(3, b.stats().messagesFailed());
    assertEquals(Map.of(wrong.address() + " wrong", "a"), b.otherNodesSeen(), "remembered (and warned) once");
    // a request says it in its failure
    ExecutionException x = assertThrows(ExecutionException.class,
        () -> b.request(wrong, new byte[] {1}, Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS));
    assertTrue(x.getCause().getMessage().contains("is a, not wrong"), x.getCause().getMessage());
    assertEquals(1, b.otherNodesSeen().size());
    // the right id works, and nothing is remembered for an ordinary authentication failure
    b.send(a.localAddress(), new byte[] {2});
    assertTrue(ra.messages.poll(10, TimeUnit.SECONDS) != null);
    HttpTransport c = start(HttpTransport.builder().nodeId("c").listen("127.0.0.1", 0)
        .clusterKey(OTHER_KEY), new Recorder());
    assertThrows(ExecutionException.class,
        () -> c.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS));
    assertTrue(c.otherNodesSeen().isEmpty());
    assertEquals(3 + 1 + 1, a.stats().authFailures());
  }

  /**
   * The warning of a peer that says it is another node stays bounded and never stops for good:
   * at most {@link HttpTransport#WARNINGS_PER_MINUTE} a minute, the
   * {@link HttpTransport#MAX_OTHER_NODES} pairs of address and id seen most recently remembered,
   * and a pair forgotten warns again. It stopped for good once 1,024 pairs had been warned of,
   * so a seed list that went wrong later was never named.
   */
  @Test
  void theWarningsOfOtherNodesAreBoundedAndNeverStopForGood() throws Exception {
    int perMinute = HttpTransport.WARNINGS_PER_MINUTE;
    AtomicLong wall = new AtomicLong(1_700_000_000_000L);
    HttpTransport a = start(node("a"), new Recorder());
    HttpTransport b = start(node("b").wallClockMillis(wall::get), new Recorder());
    String at = a.localAddress().address();
    int wrong = 0;
    while (wrong < HttpTransport.MAX_OTHER_NODES) {
      for (int i = 0; i < perMinute; i++) {
        refusedAsAnother(b, new PeerAddress("w" + wrong++, at));
      }
      wall.addAndGet(60_000);
    }
    assertEquals(HttpTransport.MAX_OTHER_NODES, b.otherNodesSeen().size());
    // a pair first seen now is warned of, the least recently seen forgotten
    refusedAsAnother(b, new PeerAddress("late", at));
    assertTrue(b.otherNodesSeen().containsKey(at + " late"), "a pair seen late is warned of");
    assertEquals(HttpTransport.MAX_OTHER_NODES, b.otherNodesSeen().size());
    assertTrue(!b.otherNodesSeen().containsKey(at + " w0"), "the least recently seen forgotten");
    // and it warns again when seen again
    wall.addAndGet(60_000);
    refusedAsAnother(b, new PeerAddress("w0", at));
    assertTrue(b.otherNodesSeen().containsKey(at + " w0"), "a forgotten pair warns again");
    // at most perMinute warnings a minute: the rest are left out, and not remembered
    wall.addAndGet(60_000);
    for (int i = 0; i < perMinute + 3; i++) {
      refusedAsAnother(b, new PeerAddress("m" + i, at));
    }
    for (int i = 0; i < perMinute + 3; i++) {
      assertEquals(i < perMinute, b.otherNodesSeen().containsKey(at + " m" + i), "m" + i);
    }
    wall.addAndGet(60_000);
    refusedAsAnother(b, new PeerAddress("m" + perMinute, at));
    assertTrue(b.otherNodesSeen().containsKey(at + " m" + perMinute), "warned a minute later");
  }

  /** A request from {@code from} to {@code to}, which names another node: refused. */
  private static void refusedAsAnother(HttpTransport from, PeerAddress to) throws Exception {
    ExecutionException x = assertThrows(ExecutionException.class,
        () -> from.request(to, new byte[] {1}, Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS));
    assertTrue(x.getCause().getMessage().contains("is a, not " + to.nodeId()),
        x.getCause().getMessage());
  }

  /**
   * The stale-timestamp warning stays bounded whatever sender ids key holders sign with, and
   * never stops for good: at most {@link HttpTransport#WARNINGS_PER_MINUTE} a minute, the
   * {@link HttpTransport#MAX_OTHER_NODES} senders seen most recently remembered, and a sender
   * forgotten warns again. It stopped for good once 1,024 senders had been warned of, so a peer
   * whose clock went wrong later was never named.
   */
  @Test
  void theStaleWarningsAreBoundedAndNeverStopForGood() throws Exception {
    int perMinute = HttpTransport.WARNINGS_PER_MINUTE;
    AtomicLong wall = new AtomicLong(1_700_000_000_000L);
    HttpTransport a = start(node("a").wallClockMillis(wall::get), new Recorder());
    HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    int senders = 0;
    while (senders < HttpTransport.MAX_OTHER_NODES) {
      for (int i = 0; i < perMinute; i++) {
        assertEquals(401, postStale(c, a, "s" + senders++, wall.get()));
      }
      wall.addAndGet(60_000);
    }
    assertEquals(HttpTransport.MAX_OTHER_NODES, a.staleSendersSeen().size());
    assertEquals(401, postStale(c, a, "b", wall.get()));
    assertTrue(a.staleSendersSeen().contains("b"), "a sender seen late is warned of");
    assertTrue(!a.staleSendersSeen().contains("s0"), "the least recently seen forgotten");
    wall.addAndGet(60_000);
    assertEquals(401, postStale(c, a, "s0", wall.get()));
    assertTrue(a.staleSendersSeen().contains("s0"), "a forgotten sender warns again");
    assertEquals(HttpTransport.MAX_OTHER_NODES, a.staleSendersSeen().size());
    wall.addAndGet(60_000);
    for (int i = 0; i < perMinute + 3; i++) {
      assertEquals(401, postStale(c, a, "m" + i, wall.get()));
    }
    for (int i = 0; i < perMinute + 3; i++) {
      assertEquals(i < perMinute, a.staleSendersSeen().contains("m" + i), "m" + i);
    }
    assertEquals(HttpTransport.MAX_OTHER_NODES, a.staleSendersSeen().size());
    assertEquals(senders + 2 + perMinute + 3, a.stats().replaysRejected());
  }

  /** A message signed by {@code sender}, a minute older than {@code now}: refused as stale. */
  private static int postStale(HttpClient c, HttpTransport to, String sender, long now)
      throws Exception {
    MessageAuthenticator auth = new MessageAuthenticator(List.of(KEY));
    byte[] body = {1};
    String ts = Long.toString(now - 60_000);
    String nonce = "n-" + sender + "-" + now;
    HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + to.localAddress().address()
            + HttpTransport.MESSAGE_PATH))
        .header(HttpTransport.H_SENDER, sender)
        .header(HttpTransport.H_SENDER_ADDRESS, "127.0.0.1:1")
        .header(HttpTransport.H_RECIPIENT, "a")
        .header(HttpTransport.H_TIMESTAMP, ts)
        .header(HttpTransport.H_NONCE, nonce)
        .header(HttpTransport.H_MAC, auth.sign(body, HttpTransport.TAG_MESSAGE, sender,
            "127.0.0.1:1", "a", ts, nonce))
        .POST(HttpRequest.BodyPublishers.ofByteArray(body))
        .build();
    return c.send(req, HttpResponse.BodyHandlers.discarding()).statusCode();
  }

  @Test
  void replayedAndStaleMessagesAreRejectedAndCounted() throws Exception {
    Recorder ra = new Recorder();
    AtomicLong wall = new AtomicLong(1_000_000_000L);
    HttpTransport a = start(node("a").wallClockMillis(wall::get).replayWindow(Duration.ofSeconds(30)), ra);
    MessageAuthenticator auth = new MessageAuthenticator(List.of(KEY));
    byte[] body = "g".getBytes(StandardCharsets.UTF_8);
    String ts = Long.toString(wall.get());
    String mac = auth.sign(body, "message", "b", "127.0.0.1:1", "a", ts, "n1");
    assertEquals(204, post(a, "/prefix-router/v1/message", body, "b", "127.0.0.1:1", "a", ts, "n1", mac));
    assertEquals(401, post(a, "/prefix-router/v1/message", body, "b", "127.0.0.1:1", "a", ts, "n1", mac));
    // still rejected later inside the window
    wall.addAndGet(25_000);
    assertEquals(401, post(a, "/prefix-router/v1/message", body, "b", "127.0.0.1:1", "a", ts, "n1", mac));
    // outside the window: stale
    wall.addAndGet(10_000);
    assertEquals(401, post(a, "/prefix-router/v1/message", body, "b", "127.0.0.1:1", "a", ts, "n1", mac));
    // a fresh message with a new nonce passes
    String ts2 = Long.toString(wall.get());
    String mac2 = auth.sign(body, "message", "b", "127.0.0.1:1", "a", ts2, "n2");
    assertEquals(204, post(a, "/prefix-router/v1/message", body, "b", "127.0.0.1:1", "a", ts2, "n2", mac2));
    // one-way delivery is asynchronous: wait for both accepted messages before counting
    assertEquals("b@127.0.0.1:1:g", ra.messages.poll(10, TimeUnit.SECONDS));
    assertEquals("b@127.0.0.1:1:g", ra.messages.poll(10, TimeUnit.SECONDS));
    assertEquals(3, a.stats().replaysRejected());
    assertEquals(2, a.stats().messagesReceived());
    assertTrue(ra.messages.isEmpty());
  }

  /**
   * A sender whose clock is off by more than the replay window has every message and request
   * refused; the refusal says by how much, and the receiver warns once per sender. Both said only
   * "stale" (the receiver at debug level), so a node with a wrong clock looked partitioned.
   */
  @Test
  void aStaleTimestampIsRefusedSayingHowFarTheClocksAreApart() throws Exception {
    AtomicLong wallA = new AtomicLong(1_700_000_060_000L);
    AtomicLong wallB = new AtomicLong(1_700_000_000_000L);
    Recorder ra = new Recorder();
    HttpTransport a = start(node("a").wallClockMillis(wallA::get), ra);
    HttpTransport b = start(node("b").wallClockMillis(wallB::get), new Recorder());
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(10))
            .get(20, TimeUnit.SECONDS));
    TransportException te = (TransportException) e.getCause();
    assertEquals(TransportException.Kind.PROTOCOL, te.kind());
    assertTrue(te.getMessage().contains("rejected: stale: timestamp is 60000 ms behind this node's "
        + "clock, beyond the replay window of 30000 ms"), te.getMessage());
    assertEquals(Set.of("b"), a.staleSendersSeen());
    wallB.set(1_700_000_105_000L);
    e = assertThrows(ExecutionException.class,
        () -> b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(10))
            .get(20, TimeUnit.SECONDS));
    String message = e.getCause().getMessage();
    assertTrue(message.contains("timestamp is 45000 ms ahead of this node's clock"), message);
    assertEquals(2, a.stats().replaysRejected());
    assertEquals(0, a.stats().requestsReceived());
    // within the window again: accepted
    wallB.set(wallA.get());
    assertArrayEquals("echo b x".getBytes(StandardCharsets.UTF_8),
        b.request(a.localAddress(), "x".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10))
            .get(20, TimeUnit.SECONDS));
  }

  @Test
  void replayGuardForgetsNoncesAfterTwoWindowsAndStaysBounded() {
    ReplayGuard g = new ReplayGuard(1_000, 16);
    for (int i = 0; i < 16; i++) {
      assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("b", "n" + i, 10_000, 10_000));
    }
    assertEquals(ReplayGuard.Verdict.FULL, g.check("b", "x", 10_000, 10_000));
    assertEquals(ReplayGuard.Verdict.REPLAY, g.check("b", "n3", 10_500, 10_500));
    assertEquals(ReplayGuard.Verdict.STALE, g.check("b", "y", 8_000, 10_500));
    // after two windows the old nonces are forgotten (they could no longer pass the time check)
    assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("b", "z", 12_001, 12_001));
    assertEquals(1, g.size());
  }

  /**
   * Nonces remembered whole are bounded over all senders, as counter windows are, not only per
   * sender: a holder of the cluster key sending under ever-new sender ids took about 270 bytes
   * per message for two windows (without limit for a long window). The transport's own counter
   * nonces are not refused meanwhile, and the nonces are forgotten two windows later.
   */
  @Test
  void replayGuardBoundsTheNoncesOfEverNewSenders() {
    ReplayGuard g = new ReplayGuard(1_000, 16);
    for (int i = 0; i < ReplayGuard.MAX_NONCES; i++) {
      assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("s" + i, "n", 10_000, 10_000));
    }
    assertEquals(ReplayGuard.Verdict.FULL, g.check("another", "n", 10_000, 10_000));
    assertEquals(ReplayGuard.Verdict.FULL, g.check("s1", "m", 10_000, 10_000));
    assertEquals(ReplayGuard.MAX_NONCES, g.size());
    assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("b", "0123456789abcdef-1", 10_000, 10_000));
    assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("another", "n", 12_001, 12_001));
    assertEquals(1, g.size());
    // the bound holds whatever the per-sender limit allows
    ReplayGuard h = new ReplayGuard(1_000, 64, ReplayGuard.COUNTER_WINDOW, 32);
    for (int i = 0; i < 32; i++) {
      assertEquals(ReplayGuard.Verdict.ACCEPT, h.check("s" + i, "n", 10_000, 10_000));
    }
    assertEquals(ReplayGuard.Verdict.FULL, h.check("s0", "m", 10_000, 10_000));
  }

  @Test
  void inFlightAccountingForgetsAddressesWithNothingInFlight() throws Exception {
    HttpTransport b = start(node("b"), new Recorder());
    // peers that come and go, each at its own address (closed ports: unreachable)
    List<CompletableFuture<byte[]>> fs = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      int port;
      try (ServerSocket s = new ServerSocket(0)) {
        port = s.getLocalPort();
      }
      PeerAddress gone = new PeerAddress("gone-" + i, "127.0.0.1:" + port);
      fs.add(b.request(gone, new byte[] {1}, Duration.ofSeconds(5)));
      b.send(gone, new byte[] {2});
    }
    for (CompletableFuture<byte[]> f : fs) {
      failureKind(f);
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (b.stats().messagesFailed() < 20 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(20, b.stats().messagesFailed());
    assertEquals(0, b.peersInFlight());
  }

  @Test
  void replayGuardForgetsTheNoncesOfSendersThatFellSilent() {
    ReplayGuard g = new ReplayGuard(1_000, 1 << 10);
    // nodes that sent a burst and left the cluster (churn)
    for (int node = 0; node < 50; node++) {
      for (int i = 0; i < 20; i++) {
        assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("gone-" + node, "n" + i, 10_000, 10_000));
      }
    }
    assertEquals(1_000, g.size());
    // two windows later only what can still pass the time check is remembered, whoever sends
    assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("b", "x", 12_001, 12_001));
    assertEquals(1, g.size());
    assertEquals(1, g.senders());
  }

  /**
   * Nonces are forgotten in acceptance order once their receive time is two windows old. After
   * the receiver's wall clock stepped back (NTP, a resumed VM) by more than that, the nonces
   * accepted before the step carried receive times in the future: they held the head of the
   * list, so nothing behind them expired either until the clock caught up, and a sender that
   * kept sending reached {@code maxNoncesPerSender} and was refused (FULL) for as long as the
   * step (an hour here). Messages accepted before the step cannot pass the timestamp check any
   * more, so their nonces are forgotten at once.
   */
  @Test
  void replayGuardForgetsNoncesFromBeforeTheClockSteppedBack() {
    ReplayGuard g = new ReplayGuard(1_000, 16);
    long before = 1_700_000_000_000L;
    for (int i = 0; i < 10; i++) {
      assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("b", "old" + i, before, before));
    }
    long after = before - 3_600_000; // stepped back an hour; the sender's clock too
    for (int i = 0; i < 16; i++) {
      assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("b", "new" + i, after + i, after + i),
          "message " + i + " after the step");
    }
    assertEquals(16, g.size());
    // still no replay: new nonces are remembered, old messages are stale
    assertEquals(ReplayGuard.Verdict.REPLAY, g.check("b", "new3", after + 20, after + 20));
    assertEquals(ReplayGuard.Verdict.STALE, g.check("b", "old3", before, after + 20));
    // a step back of less than two windows forgets nothing that could still be replayed
    ReplayGuard h = new ReplayGuard(1_000, 16);
    assertEquals(ReplayGuard.Verdict.ACCEPT, h.check("b", "n", before, before));
    assertEquals(ReplayGuard.Verdict.REPLAY, h.check("b", "n", before, before - 500));
  }

  @Test
  void replayGuardRejectsTimestampsWhoseDistanceOverflows() {
    ReplayGuard g = new ReplayGuard(1_000, 16);
    long now = 1_700_000_000_000L;
    // now - ts wraps to Long.MIN_VALUE, whose absolute value is negative
    assertEquals(ReplayGuard.Verdict.STALE, g.check("b", "n1", now + Long.MIN_VALUE, now));
    assertEquals(ReplayGuard.Verdict.STALE, g.check("b", "n2", Long.MIN_VALUE, now));
    assertEquals(ReplayGuard.Verdict.STALE, g.check("b", "n3", Long.MAX_VALUE, now));
    assertEquals(ReplayGuard.Verdict.STALE, g.check("b", "n4", Long.MAX_VALUE, -now));
    assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("b", "n5", now - 1_000, now));
    assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("b", "n6", now + 1_000, now));
    assertEquals(ReplayGuard.Verdict.STALE, g.check("b", "n7", now + 1_001, now));
    assertEquals(2, g.size());
  }

  @Test
  void oversizedBodyIsRefusedFromContentLengthBeforeReading() throws Exception {
    Recorder ra = new Recorder();
    HttpTransport a = start(node("a").maxMessageBytes(1024), ra);
    InetSocketAddress addr = hostPort(a.localAddress().address());
    try (Socket s = new Socket(addr.getHostString(), addr.getPort())) {
      s.setSoTimeout(10_000);
      OutputStream out = s.getOutputStream();
      // declares 100 MB but sends nothing: the answer must come without waiting for the body
      out.write(("POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
          .getBytes(StandardCharsets.US_ASCII));
      out.flush();
      InputStream in = s.getInputStream();
      byte[] buf = new byte[12];
      int n = 0;
      while (n < 12) {
        int r = in.read(buf, n, 12 - n);
        if (r < 0) {
          break;
        }
        n += r;
      }
      assertEquals("HTTP/1.1 413", new String(buf, 0, n, StandardCharsets.US_ASCII));
    }
    assertEquals(1, a.stats().oversizeRejected());
  }

  @Test
  void oversizedBodyWithoutLengthIsCutOffAtTheCap() throws Exception {
    Recorder ra = new Recorder();
    HttpTransport a = start(node("a").maxMessageBytes(1024), ra);
    HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    // ofInputStream has no known length, so the client sends it chunked
    HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + a.localAddress().address() + "/prefix-router/v1/message"))
        .POST(HttpRequest.BodyPublishers.ofInputStream(() -> new java.io.ByteArrayInputStream(new byte[64 * 1024])))
        .build();
    int status;
    try {
      status = c.send(req, HttpResponse.BodyHandlers.discarding()).statusCode();
    } catch (java.io.IOException reset) {
      status = 413; // the server may close the connection while the client still writes
    }
    assertEquals(413, status);
    assertEquals(1, a.stats().oversizeRejected());
    assertTrue(ra.messages.isEmpty());
  }

  @Test
  void outboundPayloadAboveTheCapFailsWithTooLargeBeforeAnythingIsSent() throws Exception {
    Recorder ra = new Recorder();
    HttpTransport a = start(node("a"), ra);
    HttpTransport b = start(node("b").maxMessageBytes(100), new Recorder());
    assertEquals(TransportException.Kind.TOO_LARGE,
        failureKind(b.request(a.localAddress(), new byte[101], Duration.ofSeconds(5))));
    assertEquals(0, b.stats().requestsSent());
    assertEquals(0, b.stats().bytesOut());
    assertEquals(0, a.stats().oversizeRejected());
    assertEquals(0, a.stats().requestsReceived());
  }

  @Test
  void aRequestAboveThePeersLowerCapFailsWithTooLarge() throws Exception {
    Recorder ra = new Recorder();
    HttpTransport a = start(node("a").maxMessageBytes(1000), ra);
    HttpTransport b = start(node("b"), new Recorder());
    CompletableFuture<byte[]> f = b.request(a.localAddress(), new byte[1001], Duration.ofSeconds(5));
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
    TransportException te = (TransportException) e.getCause();
    assertEquals(TransportException.Kind.TOO_LARGE, te.kind());
    assertTrue(te.getMessage().contains("refused the request or its answer as too large: body of 1001 bytes"), te.getMessage());
    assertEquals(1, a.stats().oversizeRejected());
    assertEquals(0, a.stats().requestsReceived());
  }

  @Test
  void answerLargerThanTheCapIsRefusedAsTooLarge() throws Exception {
    // above the requester's cap: refused while reading
    HttpTransport a = start(node("a"), (from, p) -> CompletableFuture.completedFuture(new byte[5000]));
    HttpTransport b = start(node("b").maxMessageBytes(1000), new Recorder());
    assertEquals(TransportException.Kind.TOO_LARGE,
        failureKind(b.request(a.localAddress(), new byte[1], Duration.ofSeconds(5))));
    // above the server's own cap: answered 413 instead, nothing of it sent
    HttpTransport c = start(node("c").maxMessageBytes(1000),
        (from, p) -> CompletableFuture.completedFuture(new byte[5000]));
    CompletableFuture<byte[]> f = a.request(c.localAddress(), new byte[1], Duration.ofSeconds(5));
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
    assertEquals(TransportException.Kind.TOO_LARGE, ((TransportException) e.getCause()).kind());
    assertTrue(e.getCause().getMessage().contains("answer of 5000 bytes exceeds maxMessageBytes 1000"),
        e.getCause().getMessage());
    assertEquals(0, c.stats().bytesOut());
  }

  @Test
  void unauthenticatedAnswerIsDropped() throws Exception {
    // an impostor server that answers 200 without a valid MAC
    HttpServer fake = JdkHttpServers.create(new InetSocketAddress("127.0.0.1", 0), 0);
    fake.createContext("/", ex -> {
      ex.getRequestBody().readAllBytes();
      byte[] body = "forged answer".getBytes(StandardCharsets.UTF_8);
      ex.sendResponseHeaders(200, body.length);
      ex.getResponseBody().write(body);
      ex.close();
    });
    fake.start();
    toClose.add(() -> fake.stop(0));
    HttpTransport b = start(node("b"), new Recorder());
    CompletableFuture<byte[]> f = b.request(
        new PeerAddress("a", "127.0.0.1:" + fake.getAddress().getPort()), new byte[1], Duration.ofSeconds(5));
    assertEquals(TransportException.Kind.PROTOCOL, failureKind(f));
    assertEquals(1, b.stats().authFailures());
  }

  @Test
  void invalidConfigurationIsRejectedWithAMessageThatSaysWhatToFix() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0).build());
    assertTrue(e.getMessage().contains("clusterKey"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0).clusterKey(new byte[8]).build());
    assertTrue(e.getMessage().contains("16 bytes"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> node("a").maxInFlightPerPeer(0).build());
    assertTrue(e.getMessage().contains("maxInFlightPerPeer"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> node("a").listen("127.0.0.1", 70000).build());
    assertTrue(e.getMessage().contains("port"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> node("bad id").build());
    assertTrue(e.getMessage().contains("nodeId"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> node("a").connectTimeout(Duration.ZERO).build());
    assertTrue(e.getMessage().contains("connectTimeout"), e.getMessage());
    // timestamps are in milliseconds: a shorter replay window counted as 0 ms, and every
    // message not stamped in the receiver's very millisecond was refused as stale
    e = assertThrows(IllegalArgumentException.class,
        () -> node("a").replayWindow(Duration.ofNanos(999_999)).build());
    assertTrue(e.getMessage().contains("replayWindow") && e.getMessage().contains("1 ms"),
        e.getMessage());
    node("a").replayWindow(Duration.ofMillis(1)).build(); // accepted
    // a wildcard listen address is no address for peers on other hosts (it was advertised as
    // 127.0.0.1, so each of them sent this node's traffic to itself)
    for (String wildcard : List.of("0.0.0.0", "::")) {
      e = assertThrows(IllegalArgumentException.class, () -> node("a").listen(wildcard, 0).build());
      assertTrue(e.getMessage().contains("advertisedAddress"), e.getMessage());
    }
    // nor is a host name a URI cannot carry (a container's "node_1"): the node started, and no
    // peer could send to it nor took its messages
    e = assertThrows(IllegalArgumentException.class, () -> node("a").listen("node_1", 0).build());
    assertTrue(e.getMessage().contains("node_1") && e.getMessage().contains("advertisedAddress"),
        e.getMessage());
    node("a").listen("node_1", 0).advertisedAddress("10.1.2.3:7000").build(); // accepted
  }

  @Test
  void aWildcardListenAddressAdvertisesTheGivenAddress() {
    HttpTransport t = start(node("a").listen("0.0.0.0", 0).advertisedAddress("10.1.2.3:7000"),
        new Recorder());
    assertEquals("10.1.2.3:7000", t.localAddress().address());
  }

  /**
   * The wildcard, in any spelling, is no address peers can connect to: a node advertising it
   * sent its peers to their own machines, and listening on a spelling other than the three the
   * builder knew needed no advertised address.
   */
  @Test
  void theWildcardIsNeitherAdvertisedNorListenedOnWithoutAnAdvertisedAddress() {
    for (String w : List.of("0.0.0.0:7000", "[::]:7000", "[0::0]:7000", "[0:0:0:0:0:0:0:0]:7000",
        "[::0]:7000")) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> node("a").listen("127.0.0.1", 0).advertisedAddress(w).build(), w);
      assertTrue(e.getMessage().contains("is the wildcard address"), e.getMessage());
    }
    for (String host : List.of("0.0.0.0", "::", "0::0", "::0", "[0:0::0]")) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> node("a").listen(host, 0).build(), host);
      assertTrue(e.getMessage().contains("needs advertisedAddress"), e.getMessage());
    }
  }

  static int post(HttpTransport target, String path, byte[] body, String sender, String senderAddress,
      String recipient, String ts, String nonce, String mac) throws Exception {
    HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + target.localAddress().address() + path))
        .header("PR-Sender", sender)
        .header("PR-Sender-Address", senderAddress)
        .header("PR-Recipient", recipient)
        .header("PR-Timestamp", ts)
        .header("PR-Nonce", nonce)
        .header("PR-Mac", mac)
        .POST(HttpRequest.BodyPublishers.ofByteArray(body))
        .build();
    return c.send(req, HttpResponse.BodyHandlers.discarding()).statusCode();
  }

  static InetSocketAddress hostPort(String address) {
    int i = address.lastIndexOf(':');
    return new InetSocketAddress(address.substring(0, i), Integer.parseInt(address.substring(i + 1)));
  }
}
