package io.github.prefixrouter.engine.vllm;

import io.github.prefixrouter.internal.zmq.HostilePeer;
import io.github.prefixrouter.internal.zmq.ZmtpBytes;
import java.io.DataInputStream;
import java.io.IOException;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A vLLM event publisher (a ZeroMQ PUB on loopback) whose connections go silent: on its k-th
 * connection (from 1), once subscribed, it sends the messages queued for that connection and
 * otherwise nothing, keeping the connection open, as a publisher whose host went away without a
 * reset, or whose flow a firewall dropped, looks to its subscriber. Public for the engine
 * adapters' tests in other packages.
 */
public final class SilentPublisher implements AutoCloseable {

  private record Message(long seq, byte[] payload) {}

  private final Map<Integer, BlockingQueue<Message>> toSend = new ConcurrentHashMap<>();
  private final AtomicInteger accepted = new AtomicInteger();
  private final AtomicInteger subscribed = new AtomicInteger();
  private final HostilePeer peer;

  /** Listens on a free loopback port. */
  public SilentPublisher() throws IOException {
    peer = new HostilePeer((sock, in, out) -> {
      int k = accepted.incrementAndGet();
      HostilePeer.readClientHandshake(in);
      out.write(ZmtpBytes.of().greeting().ready("PUB").bytes());
      out.flush();
      HostilePeer.readFrame(new DataInputStream(in)); // the subscription
      subscribed.incrementAndGet();
      BlockingQueue<Message> q = connection(k);
      while (!sock.isClosed()) {
        Message m = q.poll(20, TimeUnit.MILLISECONDS);
        if (m != null) {
          out.write(ZmtpBytes.of().message(new byte[0], FakeVllmPublisher.seq(m.seq()),
              m.payload()).bytes());
          out.flush();
        }
      }
    });
  }

  private BlockingQueue<Message> connection(int k) {
    return toSend.computeIfAbsent(k, x -> new LinkedBlockingQueue<>());
  }

  /** Sends message {@code seq} with {@code payload} on connection {@code k}, once it is made. */
  public void send(int k, long seq, byte[] payload) {
    connection(k).add(new Message(seq, payload));
  }

  /** The endpoint a subscriber connects to, {@code tcp://127.0.0.1:port}. */
  public String endpoint() {
    return "tcp://127.0.0.1:" + peer.port();
  }

  /** How many connections have subscribed so far. */
  public int subscriptions() {
    return subscribed.get();
  }

  @Override
  public void close() throws IOException {
    peer.close();
  }
}
