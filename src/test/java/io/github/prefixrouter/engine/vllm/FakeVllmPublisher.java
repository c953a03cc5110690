package io.github.prefixrouter.engine.vllm;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * vLLM's KV-event publisher as JeroMQ sockets: a PUB sending {@code [topic, seq, payload]} and,
 * optionally, a ROUTER answering replay requests from a bounded buffer the way vLLM's
 * {@code ZmqEventPublisher} does. The PUB is used from the test's thread; the ROUTER has its
 * own.
 */
final class FakeVllmPublisher implements AutoCloseable {

  static final String TOPIC = "kv-events";

  private final ZContext ctx = new ZContext();
  private final int pubPort;
  private ZMQ.Socket pub;
  private final ConcurrentSkipListMap<Long, byte[]> buffer = new ConcurrentSkipListMap<>();
  private final int bufferSize;
  private final AtomicInteger replayRequests = new AtomicInteger();
  private Thread replayThread;
  private volatile boolean closed;
  private int replayPort;

  FakeVllmPublisher(int bufferSize) {
    this.bufferSize = bufferSize;
    pub = ctx.createSocket(SocketType.PUB);
    pub.setLinger(0);
    pubPort = pub.bindToRandomPort("tcp://127.0.0.1");
  }

  String endpoint() {
    return "tcp://127.0.0.1:" + pubPort;
  }

  /** Starts the replay ROUTER; returns its endpoint. */
  String startReplay() {
    ZMQ.Socket router = ctx.createSocket(SocketType.ROUTER);
    router.setLinger(0);
    router.setReceiveTimeOut(50);
    replayPort = router.bindToRandomPort("tcp://127.0.0.1");
    replayThread = new Thread(() -> serveReplays(router), "fake-vllm-replay");
    replayThread.setDaemon(true);
    replayThread.start();
    return "tcp://127.0.0.1:" + replayPort;
  }

  private void serveReplays(ZMQ.Socket router) {
    while (!closed) {
      byte[] identity;
      try {
        identity = router.recv();
      } catch (RuntimeException e) {
        return; // context closed
      }
      if (identity == null) {
        continue;
      }
      byte[] empty = router.recv();
      byte[] start = router.hasReceiveMore() ? router.recv() : null;
      while (router.hasReceiveMore()) {
        router.recv();
      }
      if (empty == null || start == null || start.length != 8) {
        continue;
      }
      replayRequests.incrementAndGet();
      long from = ByteBuffer.wrap(start).getLong();
      for (Map.Entry<Long, byte[]> e : buffer.tailMap(from).entrySet()) {
        router.sendMore(identity);
        router.sendMore(new byte[0]);
        router.sendMore(seq(e.getKey()));
        router.send(e.getValue());
      }
      router.sendMore(identity);
      router.sendMore(new byte[0]);
      router.sendMore(seq(-1));
      router.send(new byte[0]);
    }
  }

  int replayRequests() {
    return replayRequests.get();
  }

  static byte[] seq(long n) {
    return ByteBuffer.allocate(8).putLong(n).array();
  }

  static byte[] payload(long seq) {
    return ("batch " + seq).getBytes(StandardCharsets.US_ASCII);
  }

  private void remember(long seq, byte[] payload) {
    buffer.put(seq, payload);
    while (buffer.size() > bufferSize) {
      buffer.pollFirstEntry();
    }
  }

  /** Publishes message {@code seq} (and keeps it for replay). */
  void publish(long seq) {
    remember(seq, payload(seq));
    send(TOPIC.getBytes(StandardCharsets.US_ASCII), seq(seq), payload(seq));
  }

  /** Publishes message {@code seq} with the given payload (and keeps it for replay). */
  void publish(long seq, byte[] payload) {
    remember(seq, payload);
    send(TOPIC.getBytes(StandardCharsets.US_ASCII), seq(seq), payload);
  }

  /** Keeps {@code payload} as message {@code seq} for replay without sending it: it is lost. */
  void lose(long seq, byte[] payload) {
    remember(seq, payload);
  }

  /** Keeps message {@code seq} for replay without sending it: it is lost on the way. */
  void lose(long seq) {
    remember(seq, payload(seq));
  }

  /** Sends raw frames on the PUB socket. */
  void send(byte[]... frames) {
    for (int i = 0; i < frames.length - 1; i++) {
      pub.sendMore(frames[i]);
    }
    pub.send(frames[frames.length - 1]);
  }

  /**
   * Publishes {@code first}, {@code first + 1}, ... (pausing a little between them) until
   * {@code joined} holds: a subscriber only receives what is published after the publisher
   * has seen its subscription. Returns the next sequence number.
   */
  long publishUntil(long first, BooleanSupplier joined) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    long seq = first;
    while (!joined.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("the subscriber never received a message");
      }
      publish(seq++);
      Thread.sleep(10);
    }
    return seq;
  }

  /** Closes the PUB socket (dropping its subscribers) and binds a new one on the same port. */
  @SuppressWarnings("deprecation") // destroySocket: closes and forgets the socket
  void restartPublisher() {
    ctx.destroySocket(pub);
    pub = ctx.createSocket(SocketType.PUB);
    pub.setLinger(0);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (true) {
      try {
        pub.bind("tcp://127.0.0.1:" + pubPort);
        return;
      } catch (RuntimeException e) {
        if (System.nanoTime() > deadline) {
          throw e;
        }
        Thread.onSpinWait();
      }
    }
  }

  @Override
  public void close() {
    closed = true;
    if (replayThread != null) {
      try {
        replayThread.join(10_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    ctx.close();
  }
}
