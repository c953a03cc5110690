package io.github.prefixrouter.internal.zmq;

import static io.github.prefixrouter.internal.zmq.ZmtpBytes.ascii;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The ZMTP client against JeroMQ, an independent implementation of ZMTP 3.1, on loopback:
 * JeroMQ binds (as vLLM does), the client connects.
 */
class ZmtpJeromqInteropTest {

  private static final Duration GUARD = Duration.ofSeconds(30);
  private static final ZmtpOptions OPTIONS =
      ZmtpOptions.DEFAULTS.withReadTimeout(Duration.ofSeconds(10)).withMaxFrames(8);

  private final ZContext ctx = new ZContext();
  private final List<AutoCloseable> toClose = new ArrayList<>();

  @AfterEach
  void closeAll() throws Exception {
    for (AutoCloseable c : toClose) {
      c.close();
    }
    ctx.close();
  }

  private ZMQ.Socket bound(SocketType type) {
    ZMQ.Socket s = ctx.createSocket(type);
    s.setLinger(0);
    s.bindToRandomPort("tcp://127.0.0.1");
    return s;
  }

  private static int port(ZMQ.Socket s) {
    String e = s.getLastEndpoint();
    return Integer.parseInt(e.substring(e.lastIndexOf(':') + 1));
  }

  private ZmtpSocket connect(ZmtpSocket.Type type, ZMQ.Socket peer) throws Exception {
    ZmtpSocket z = new ZmtpSocket(type, OPTIONS);
    toClose.add(z);
    z.connect(new ZmtpEndpoint("127.0.0.1", port(peer)));
    return z;
  }

  private static void sendMultipart(ZMQ.Socket s, byte[]... frames) {
    for (int i = 0; i < frames.length - 1; i++) {
      assertTrue(s.sendMore(frames[i]));
    }
    assertTrue(s.send(frames[frames.length - 1]));
  }

  private static byte[] seq(long n) {
    return ByteBuffer.allocate(8).putLong(n).array();
  }

  private static byte[] random(int n, long seed) {
    byte[] b = new byte[n];
    new Random(seed).nextBytes(b);
    return b;
  }

  @Test
  void ourSubscriptionReachesJeromqInTheZmtp30MessageForm() throws Exception {
    ZMQ.Socket xpub = bound(SocketType.XPUB);
    ZmtpSocket sub = connect(ZmtpSocket.Type.SUB, xpub);
    assertEquals("XPUB", sub.peerSocketType());
    sub.subscribe(ascii("kv-events"));
    xpub.setReceiveTimeOut(10_000);
    byte[] subscription = xpub.recv();
    assertArrayEquals(ascii("\u0001kv-events"), subscription);
    // and the publisher then delivers
    sendMultipart(xpub, ascii("kv-events"), seq(7), ascii("hello"));
    List<byte[]> m = assertTimeoutPreemptively(GUARD, sub::receive);
    assertEquals(3, m.size());
    assertEquals(7, ByteBuffer.wrap(m.get(1)).getLong());
  }

  /**
   * A frame of up to 255 bytes has a one-byte size, a longer one an eight-byte size (the LONG
   * flag): subscriptions whose frame (0x01 and the topic) is on either side of that boundary
   * reach JeroMQ whole, and the publisher then delivers the topic.
   */
  @Test
  void subscriptionsOnEitherSideOfTheLongFrameSizeReachJeromq() throws Exception {
    ZMQ.Socket xpub = bound(SocketType.XPUB);
    ZmtpSocket sub = connect(ZmtpSocket.Type.SUB, xpub);
    xpub.setReceiveTimeOut(10_000);
    for (int n = 252; n <= 258; n++) {
      byte[] topic = ascii("t".repeat(n));
      sub.subscribe(topic);
      byte[] expected = new byte[n + 1];
      expected[0] = 1;
      System.arraycopy(topic, 0, expected, 1, n);
      assertArrayEquals(expected, xpub.recv(), "a subscription frame of " + (n + 1) + " bytes");
    }
    sendMultipart(xpub, ascii("t".repeat(255)), seq(7), ascii("hello"));
    List<byte[]> m = assertTimeoutPreemptively(GUARD, sub::receive);
    assertArrayEquals(ascii("t".repeat(255)), m.get(0));
    assertEquals(7, ByteBuffer.wrap(m.get(1)).getLong());
  }

  @Test
  void multipartMessagesFromAJeromqPublisherArriveIntactAndOtherTopicsAreFiltered()
      throws Exception {
    ZMQ.Socket pub = bound(SocketType.PUB);
    ZmtpSocket sub = connect(ZmtpSocket.Type.SUB, pub);
    assertEquals("PUB", sub.peerSocketType());
    sub.subscribe(ascii("kv-events"));

    List<byte[][]> expected = List.of(
        new byte[][] {ascii("kv-events"), seq(1), ascii("small")},
        new byte[][] {ascii("kv-events"), seq(2), random(255, 1)},
        new byte[][] {ascii("kv-events"), seq(3), random(256, 2)},
        new byte[][] {ascii("kv-events"), seq(4), random(300, 3)},
        new byte[][] {ascii("kv-events"), seq(5), random(70_000, 4)},
        new byte[][] {ascii("kv-events"), new byte[0], new byte[0], ascii("x"), new byte[0]},
        new byte[][] {ascii("kv-events"), random(65_536, 5), random(1 << 20, 6)},
        new byte[][] {ascii("kv-events-end")});

    // the publisher only sends to subscribers it has seen subscribe (the slow joiner): it
    // repeats a warm-up message until one arrives, then sends the messages under test, each
    // after one of another topic that must be filtered out
    AtomicBoolean joined = new AtomicBoolean();
    Thread publisher = new Thread(() -> {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (!joined.get() && System.nanoTime() < deadline) {
        sendMultipart(pub, ascii("kv-events-warm-up"), ascii("w"));
        try {
          Thread.sleep(5);
        } catch (InterruptedException e) {
          return;
        }
      }
      for (byte[][] m : expected) {
        sendMultipart(pub, ascii("other"), seq(99), ascii("must not arrive"));
        sendMultipart(pub, m);
      }
    }, "jeromq-publisher");
    publisher.start();
    try {
      List<List<byte[]>> received = assertTimeoutPreemptively(GUARD, () -> {
        List<List<byte[]>> r = new ArrayList<>();
        while (r.size() < expected.size()) {
          List<byte[]> m = sub.receive();
          assertTrue(new String(m.get(0), java.nio.charset.StandardCharsets.ISO_8859_1)
              .startsWith("kv-events"), "only the subscribed topic arrives");
          if (java.util.Arrays.equals(m.get(0), ascii("kv-events-warm-up"))) {
            joined.set(true);
            continue;
          }
          r.add(m);
        }
        return r;
      });
      for (int i = 0; i < expected.size(); i++) {
        byte[][] e = expected.get(i);
        List<byte[]> m = received.get(i);
        assertEquals(e.length, m.size(), "frames of message " + i);
        for (int f = 0; f < e.length; f++) {
          assertArrayEquals(e[f], m.get(f), "frame " + f + " of message " + i);
        }
      }
    } finally {
      joined.set(true);
      publisher.join(10_000);
    }
  }

  @Test
  void aJeromqRouterAnswersAReplayRequestAsVllmDoes() throws Exception {
    ZMQ.Socket router = bound(SocketType.ROUTER);
    ZmtpSocket dealer = connect(ZmtpSocket.Type.DEALER, router);
    assertEquals("ROUTER", dealer.peerSocketType());
    dealer.send(List.of(new byte[0], seq(41)));

    // the server side of vLLM's replay: [identity, empty, start] in, then one
    // [identity, empty, seq, payload] per buffered message from start, then the end marker
    router.setReceiveTimeOut(10_000);
    byte[] identity = router.recv();
    assertTrue(router.hasReceiveMore());
    assertArrayEquals(new byte[0], router.recv());
    assertTrue(router.hasReceiveMore());
    long start = ByteBuffer.wrap(router.recv()).getLong();
    assertEquals(41, start);
    for (long s = start; s < start + 3; s++) {
      sendMultipart(router, identity, new byte[0], seq(s), random(s == 42 ? 70_000 : 10, s));
    }
    sendMultipart(router, identity, new byte[0], seq(-1), new byte[0]);

    List<List<byte[]>> replayed = assertTimeoutPreemptively(GUARD, () -> {
      List<List<byte[]>> r = new ArrayList<>();
      while (true) {
        List<byte[]> m = dealer.receive();
        r.add(m);
        if (ByteBuffer.wrap(m.get(1)).getLong() == -1) {
          return r;
        }
      }
    });
    assertEquals(4, replayed.size());
    for (int i = 0; i < 3; i++) {
      List<byte[]> m = replayed.get(i);
      assertEquals(3, m.size());
      assertArrayEquals(new byte[0], m.get(0));
      assertEquals(41 + i, ByteBuffer.wrap(m.get(1)).getLong());
      assertArrayEquals(random(41 + i == 42 ? 70_000 : 10, 41 + i), m.get(2));
    }
    assertArrayEquals(new byte[0], replayed.get(3).get(2));
  }

  @Test
  @SuppressWarnings("deprecation") // destroySocket: closes and forgets the socket
  void aJeromqPublisherThatClosesEndsTheStreamWithAnIoException() throws Exception {
    ZMQ.Socket pub = bound(SocketType.PUB);
    ZmtpSocket sub = connect(ZmtpSocket.Type.SUB, pub);
    sub.subscribe(new byte[0]);
    ctx.destroySocket(pub);
    java.io.IOException e = assertTimeoutPreemptively(GUARD,
        () -> org.junit.jupiter.api.Assertions.assertThrows(java.io.IOException.class,
            sub::receive));
    assertTrue(e instanceof java.io.EOFException || e instanceof java.net.SocketException,
        e.toString());
  }
}
