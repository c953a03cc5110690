package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.Await;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The peer port's limits on what strangers (before any authentication) can make a node hold:
 * the bodies being read hold at most the body budget, a body whose share is held by others is
 * answered 503 (busy, to a peer) and counted, and the budget comes back for signed traffic once
 * the strangers leave; a connection beyond the reader threads is answered 503 as well, not
 * closed. The I/O timeout is far above every wait here, so nothing passes by a stalled
 * connection being cut.
 */
class HttpTransportBodyBudgetTest extends HttpTransportFixture {

  private static final int KIB = 1 << 10;
  private static final int MIB = 1 << 20;
  private static final Duration LONG_IO_TIMEOUT = Duration.ofSeconds(120);
  private static final String HEADERS_STALL =
      "POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n";

  /** A connection from {@code localHost} that sends {@code head} and {@code bodyBytes}. */
  private Socket send(String localHost, InetSocketAddress to, String head, int bodyBytes)
      throws IOException {
    Socket s = new Socket();
    toClose.add(s);
    // the whole request fits in the socket's buffer and goes in one write, so that writing it
    // never waits for the server: a server that answers without reading the body and closes
    // would otherwise reset a write still in progress (seen under load with a 200 KB body),
    // or, with the head and the body written apart, a body written after the server answered
    // the head and closed
    s.setSendBufferSize(Math.max(64 * 1024, 2 * (head.length() + bodyBytes)));
    s.bind(new InetSocketAddress(localHost, 0));
    s.connect(to, 5_000);
    byte[] h = head.getBytes(StandardCharsets.US_ASCII);
    byte[] request = java.util.Arrays.copyOf(h, h.length + bodyBytes);
    OutputStream out = s.getOutputStream();
    try {
      out.write(request);
      out.flush();
    } catch (java.net.SocketException reset) {
      // the copy into the buffer can still be cut by a server that answered and closed before
      // it ended (a writer descheduled part-way on a loaded machine): "Connection reset by
      // peer". The answer came before the reset and is still there to read, as a sender with a
      // send buffer too small for the request (2 KiB) reads it every time
    }
    return s;
  }

  private static String messageHead(int contentLength) {
    return "POST /prefix-router/v1/message HTTP/1.1\r\nHost: x\r\nContent-Length: "
        + contentLength + "\r\n\r\n";
  }

  /** The answer's status line and headers, or null if the connection was closed without one. */
  private static String answerHead(Socket s) throws IOException {
    s.setSoTimeout(20_000);
    InputStream in = s.getInputStream();
    StringBuilder sb = new StringBuilder();
    try {
      while (!sb.toString().endsWith("\r\n\r\n")) {
        int c = in.read();
        if (c < 0) {
          break;
        }
        sb.append((char) c);
      }
    } catch (SocketTimeoutException e) {
      throw e;
    } catch (IOException reset) {
      return null;
    }
    return sb.length() == 0 ? null : sb.toString();
  }

  private static void assertStillConnected(Socket s) throws IOException {
    s.setSoTimeout(50);
    assertThrows(SocketTimeoutException.class, () -> s.getInputStream().read(),
        "the stalled connection is still open (nothing was answered or closed)");
  }

  private static InetSocketAddress addressOf(HttpTransport t) {
    return HttpTransportTest.hostPort(t.localAddress().address());
  }

  private static TransportException.Kind failureKind(java.util.concurrent.Future<byte[]> f)
      throws Exception {
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> f.get(30, TimeUnit.SECONDS));
    return assertInstanceOf(TransportException.class, e.getCause()).kind();
  }

  /**
   * {@code count} strangers, each sending all of its 8 KiB body but one byte to {@code a}'s peer
   * port, one after the other once the last holds its share: their connections.
   */
  private List<Socket> strangersHoldingTheBudget(HttpTransport a, int count) throws Exception {
    InetSocketAddress addr = addressOf(a);
    List<Socket> holding = new ArrayList<>();
    for (int i = 1; i <= count; i++) {
      holding.add(send("127.0.0.2", addr, messageHead(8 * KIB), 8 * KIB - 1));
      long expected = i * 8L * KIB;
      Await.until(() -> a.stats().bodyBudgetHeldBytes() == expected,
          "the strangers hold " + expected + " (held " + a.stats().bodyBudgetHeldBytes() + ")");
    }
    return holding;
  }

  @Test
  void strangersHoldAtMostTheBudgetAndSignedTrafficPassesOnceTheyLeave() throws Exception {
    // bodies of at most 8 KiB (each takes its whole share at once, without growing), a budget of
    // eight of them; the per-address limit is out of the way
    HttpTransport a = start(node("a").inboundIoTimeout(LONG_IO_TIMEOUT).maxMessageBytes(8 * KIB)
        .bodyBudget(64 * KIB).maxUnfinishedReadsPerAddress(64), new HttpTransportTest.Recorder());
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    InetSocketAddress addr = addressOf(a);
    assertEquals(0, a.stats().bodyBudgetHeldBytes());
    List<Socket> holding = strangersHoldingTheBudget(a, 8);
    // more are answered 503 with Retry-After, as a busy peer is, once none has given any back
    // for 1 s, and hold nothing (they send little, so that the server's drain of their bodies
    // waits rather than closing with bytes unread, whose reset could overtake the answer)
    for (int i = 1; i <= 4; i++) {
      Socket refused = send("127.0.0.2", addr, messageHead(8 * KIB), 100);
      String head = answerHead(refused);
      assertTrue(head.startsWith("HTTP/1.1 503 "), head);
      assertTrue(head.contains("Retry-after: 1\r\n") || head.contains("Retry-After: 1\r\n"), head);
      assertEquals(i, a.stats().bodyBudgetRefused());
      assertEquals(64L * KIB, a.stats().bodyBudgetHeldBytes(), "never more than the budget");
    }
    for (Socket s : holding) {
      assertStillConnected(s);
    }
    // a signed request needs a share too: while the strangers hold the budget, its sender is
    // told the node is busy (so it takes the busy cool-down, not the failure one)
    assertEquals(TransportException.Kind.BUSY, failureKind(
        b.request(a.localAddress(), "hi".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(60))));
    assertEquals(5, a.stats().bodyBudgetRefused());
    assertEquals(0, a.stats().readsRefused(), "counted apart from the reader slots");
    // the strangers leave: their shares come back, and the signed request goes through
    for (Socket s : holding) {
      s.close();
    }
    Await.until(() -> a.stats().bodyBudgetHeldBytes() == 0,
        "the budget is back (held " + a.stats().bodyBudgetHeldBytes() + ")");
    byte[] answer = b.request(a.localAddress(), "hi".getBytes(StandardCharsets.UTF_8),
        Duration.ofSeconds(60)).get(30, TimeUnit.SECONDS);
    assertEquals("echo b hi", new String(answer, StandardCharsets.UTF_8));
    assertEquals(0, a.stats().bodyBudgetHeldBytes(), "given back once authenticated");
  }

  @Test
  void everyWayAReadEndsGivesItsShareBack() throws Exception {
    HttpTransport.Builder ab = node("a").maxMessageBytes(64 * KIB).bodyBudget(128 * KIB);
    HttpTransportTest.Recorder received = new HttpTransportTest.Recorder();
    HttpTransport a = start(ab, received);
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    InetSocketAddress addr = addressOf(a);
    // a message and a request, signed: delivered, and nothing held after
    b.send(a.localAddress(), new byte[40 * KIB]);
    byte[] answer = b.request(a.localAddress(), new byte[40 * KIB], Duration.ofSeconds(30))
        .get(30, TimeUnit.SECONDS);
    assertEquals("echo b ".length() + 40 * KIB, answer.length);
    Await.until(() -> a.stats().messagesReceived() == 1, "the message is delivered");
    // a body without a length above the cap (413), an unsigned one (401), a declared one that
    // is too large (413 before reading)
    Socket chunked = send("127.0.0.2", addr, "POST /prefix-router/v1/message HTTP/1.1\r\n"
        + "Host: x\r\nTransfer-Encoding: chunked\r\n\r\n", 0);
    OutputStream out = chunked.getOutputStream();
    out.write(("10001\r\n").getBytes(StandardCharsets.US_ASCII));
    out.write(new byte[64 * KIB + 1]);
    out.write("\r\n0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
    out.flush();
    String head = answerHead(chunked);
    assertTrue(head.startsWith("HTTP/1.1 413 "), head);
    // the rest of its body is left unread, and the server closes the connection: a sender with
    // a larger cap would send its next message into a closed one and fail it as UNREACHABLE
    assertTrue(head.toLowerCase(java.util.Locale.ROOT).contains("\r\nconnection: close\r\n"),
        head);
    Socket unsigned = send("127.0.0.2", addr, messageHead(1000), 1000);
    assertTrue(answerHead(unsigned).startsWith("HTTP/1.1 400 "), "no envelope");
    Socket tooLarge = send("127.0.0.2", addr, messageHead(64 * KIB + 1), 0);
    head = answerHead(tooLarge);
    assertTrue(head.startsWith("HTTP/1.1 413 "), head);
    assertTrue(head.toLowerCase(java.util.Locale.ROOT).contains("\r\nconnection: close\r\n"),
        "its body is left unread: " + head);
    assertEquals(0, a.stats().bodyBudgetHeldBytes());
    assertEquals(0, a.stats().bodyBudgetRefused());
  }

  @Test
  void readBodyHoldsWhatArrivedAndAtMostTwiceTheCap() throws Exception {
    io.github.prefixrouter.internal.wire.BodyBudget budget =
        new io.github.prefixrouter.internal.wire.BodyBudget(2 * MIB, Duration.ZERO, () -> { });
    for (int length : new int[] {0, 1, 8 * KIB, 8 * KIB + 1, 300 * KIB, MIB}) {
      for (boolean declared : new boolean[] {true, false}) {
        try (var share = budget.share()) {
          byte[] body = HttpTransport.readBody(new java.io.ByteArrayInputStream(new byte[length]),
              declared ? length : -1, MIB, share);
          assertEquals(length, body.length, length + (declared ? " declared" : " chunked"));
          // the exact body, nothing more, is what stays held until authenticated
          assertEquals(length, share.held(), length + (declared ? " declared" : " chunked"));
        }
      }
    }
    try (var share = budget.share()) {
      assertEquals(null, HttpTransport.readBody(
          new java.io.ByteArrayInputStream(new byte[MIB + 1]), -1, MIB, share));
    }
    assertEquals(2 * MIB, budget.available());
  }

  @Test
  void aConnectionBeyondTheReaderThreadsIsAnsweredBusy() throws Exception {
    HttpTransport a = start(node("a").inboundIoTimeout(LONG_IO_TIMEOUT).readerThreads(2),
        new HttpTransportTest.Recorder());
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    InetSocketAddress addr = addressOf(a);
    Socket s1 = send("127.0.0.2", addr, HEADERS_STALL, 0);
    Socket s2 = send("127.0.0.3", addr, HEADERS_STALL, 0);
    // both hold a reader thread (a fixed sleep was too short on a busy machine: the request
    // beyond them then found a free reader)
    Await.until(() -> a.readersInUse() == 2, "both stallers hold a reader thread");
    // a whole request beyond them is answered 503 with Retry-After, without its body being read
    Socket third = send("127.0.0.4", addr, messageHead(10_000), 100);
    String head = answerHead(third);
    assertTrue(head.startsWith("HTTP/1.1 503 "), head);
    assertTrue(head.contains("Retry-after: 1\r\n") || head.contains("Retry-After: 1\r\n"), head);
    assertEquals(1, a.stats().readsRefused());
    // and a peer's request is failed as busy (closed without an answer, it was UNREACHABLE)
    assertEquals(TransportException.Kind.BUSY, failureKind(
        b.request(a.localAddress(), "hi".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(60))));
    assertEquals(2, a.stats().readsRefused());
    assertStillConnected(s1);
    assertStillConnected(s2);
    assertEquals(0, a.stats().requestsReceived());
  }

  /**
   * A busy answer to a request whose body is left unread says {@code Connection: close}. The
   * JDK server drains at most 64 KiB of what its handler left of a body, then closes the
   * connection; without the header a sender kept the connection for its next request, which
   * found it closed (the JDK client sends a POST once: "header parser received no bytes") and
   * failed as UNREACHABLE, the failure the busy answer is there to avoid.
   */
  @Test
  void aBusyAnswerToABodyLeftUnreadClosesItsConnection() throws Exception {
    HttpTransport a = start(node("busy-closes").inboundIoTimeout(LONG_IO_TIMEOUT)
        .readerThreads(2), new HttpTransportTest.Recorder());
    InetSocketAddress addr = addressOf(a);
    send("127.0.0.2", addr, HEADERS_STALL, 0);
    send("127.0.0.3", addr, HEADERS_STALL, 0);
    Await.until(() -> liveThreads("prefix-router-http-busy-closes-reader-") == 2,
        "both stallers hold a reader thread");
    // a whole request of 200 KB, beyond the readers: answered 503 with its body left unread
    Socket refused = send("127.0.0.4", addr, messageHead(200_000), 200_000);
    String head = answerHead(refused);
    assertTrue(head.startsWith("HTTP/1.1 503 "), head);
    assertTrue(head.toLowerCase(java.util.Locale.ROOT).contains("\r\nconnection: close\r\n"),
        "the sender is told not to send on this connection again: " + head);
    // and rightly so: the server closes it
    refused.setSoTimeout(20_000);
    try {
      assertEquals(-1, refused.getInputStream().read(), "nothing follows the answer");
    } catch (java.net.SocketException reset) {
      // closed with bytes of the body unread
    }
    assertEquals(1, a.stats().readsRefused());
  }

  /** The live threads whose name starts with {@code prefix}. */
  private static long liveThreads(String prefix) {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && t.getName().startsWith(prefix)).count();
  }

  /**
   * The answers to this node's requests take their heap from the body budget as they arrive,
   * until they are authenticated, as inbound bodies do: a peer (or anyone on the path, without
   * TLS) that sends large answers slowly holds at most the budget, and an answer that cannot get
   * its share fails its request as {@code TOO_LARGE} (the node runs it itself, without cooling
   * the peer down), counted with the budget's other refusals. Answers were read with no share,
   * up to {@code maxMessageBytes} each in a growing buffer, for every request in flight.
   */
  @Test
  void answersTakeTheirShareOfTheBudgetAndOneBeyondItFailsItsRequest() throws Exception {
    // answers of at most 64 KiB, a budget of two of them
    HttpTransport a = start(node("a").inboundIoTimeout(LONG_IO_TIMEOUT).maxMessageBytes(64 * KIB)
        .bodyBudget(128 * KIB), new HttpTransportTest.Recorder());
    // a peer that answers 200 with all of a 64 KiB body but one byte, and then stalls
    StallingHttpPeer peer = new StallingHttpPeer("HTTP/1.1 200 OK\r\nContent-Length: "
        + 64 * KIB + "\r\n\r\n" + "x".repeat(64 * KIB - 1));
    io.github.prefixrouter.spi.PeerAddress p =
        new io.github.prefixrouter.spi.PeerAddress("p", "127.0.0.1:" + peer.port());
    List<java.util.concurrent.CompletableFuture<byte[]>> stalled = new ArrayList<>();
    for (int i = 1; i <= 2; i++) {
      stalled.add(a.request(p, new byte[100], Duration.ofSeconds(60)));
      long expected = i * 64L * KIB;
      Await.until(() -> a.stats().bodyBudgetHeldBytes() == expected,
          "the stalled answers hold " + expected + " (held " + a.stats().bodyBudgetHeldBytes()
              + ")");
    }
    // a third answer finds the budget held: refused once none gave any back for 1 s, long
    // before its 60 s timeout, as an answer this node cannot take now
    java.util.concurrent.CompletableFuture<byte[]> third =
        a.request(p, new byte[100], Duration.ofSeconds(60));
    assertEquals(TransportException.Kind.TOO_LARGE, failureKind(third));
    assertEquals(1, a.stats().bodyBudgetRefused());
    assertEquals(128L * KIB, a.stats().bodyBudgetHeldBytes(), "never more than the budget");
    for (java.util.concurrent.CompletableFuture<byte[]> f : stalled) {
      assertTrue(!f.isDone(), "the stalled answers are still being read");
    }
    // the peer goes away: the stalled answers fail and give their shares back
    peer.close();
    for (java.util.concurrent.CompletableFuture<byte[]> f : stalled) {
      failureKind(f);
    }
    Await.until(() -> a.stats().bodyBudgetHeldBytes() == 0,
        "the budget is back (held " + a.stats().bodyBudgetHeldBytes() + ")");
    // an answer from a real peer passes, and holds nothing once handed on
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    byte[] answer = a.request(b.localAddress(), "hi".getBytes(StandardCharsets.UTF_8),
        Duration.ofSeconds(30)).get(30, TimeUnit.SECONDS);
    assertEquals("echo a hi", new String(answer, StandardCharsets.UTF_8));
    assertEquals(0, a.stats().bodyBudgetHeldBytes(), "given back once authenticated");
    assertEquals(1, a.stats().bodyBudgetRefused());
  }

  /**
   * Strangers that hold the whole budget of the bodies read on the peer port do not fail this
   * node's own forwards: the peers' answers are read within a budget of their own, of the same
   * size, so only this node's own requests fill it. They shared one budget, and every forward
   * failed after 1 s while anyone who could connect kept the budget held.
   */
  @Test
  void strangersHoldingTheInboundBudgetDoNotFailThisNodesRequests() throws Exception {
    HttpTransport a = start(node("a").inboundIoTimeout(LONG_IO_TIMEOUT).maxMessageBytes(8 * KIB)
        .bodyBudget(64 * KIB).maxUnfinishedReadsPerAddress(64), new HttpTransportTest.Recorder());
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    List<Socket> holding = strangersHoldingTheBudget(a, 8);
    for (int i = 0; i < 3; i++) {
      byte[] answer = a.request(b.localAddress(), ("hi" + i).getBytes(StandardCharsets.UTF_8),
          Duration.ofSeconds(60)).get(30, TimeUnit.SECONDS);
      assertEquals("echo a hi" + i, new String(answer, StandardCharsets.UTF_8));
    }
    assertEquals(0, a.stats().bodyBudgetRefused(), "no answer was refused its share");
    assertEquals(64L * KIB, a.stats().bodyBudgetHeldBytes(), "the strangers' shares alone");
    for (Socket s : holding) {
      assertStillConnected(s);
    }
  }

  @Test
  void aTooSmallBodyBudgetIsRefused() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> node("a").maxMessageBytes(MIB).bodyBudget(2L * MIB - 1).build());
    assertTrue(e.getMessage().contains("bodyBudget"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> node("a").bodyBudget(0).build());
    // the default follows maxMessageBytes when that needs more than 64 MiB
    node("a").maxMessageBytes(48 * MIB).build().close();
    node("a").maxMessageBytes(MIB).bodyBudget(2L * MIB).build().close();
  }
}
