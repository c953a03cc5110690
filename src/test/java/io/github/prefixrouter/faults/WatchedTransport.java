package io.github.prefixrouter.faults;

import io.github.prefixrouter.internal.route.ForwardFrames;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * Decorates a node's transport to watch it from outside: every FORWARD frame the node sends is
 * reported to the {@link Invariants} (hop accounting), and anything the node's inbound handler
 * throws is recorded as an escaped exception before being rethrown (the in-memory network would
 * otherwise swallow it like a real one drops the connection).
 */
final class WatchedTransport implements Transport {

  private final String nodeId;
  private final String instanceKey;
  private final Transport inner;
  private final Invariants invariants;
  private final GuardedScheduler scheduler;

  WatchedTransport(String nodeId, String instanceKey, Transport inner, Invariants invariants,
      GuardedScheduler scheduler) {
    this.nodeId = nodeId;
    this.instanceKey = instanceKey;
    this.inner = inner;
    this.invariants = invariants;
    this.scheduler = scheduler;
  }

  Transport inner() {
    return inner;
  }

  /** A frame this node sent, kept so the network can replay it much later. */
  record Sent(PeerAddress to, byte[] payload, boolean request) {}

  private static final int HISTORY = 256;
  private final java.util.ArrayDeque<Sent> history = new java.util.ArrayDeque<>();
  long replayed;

  private void remember(PeerAddress to, byte[] payload, boolean request) {
    if (history.size() == HISTORY) {
      history.pollFirst();
    }
    history.addLast(new Sent(to, payload.clone(), request));
  }

  /**
   * Replays {@code count} frames this node sent earlier, picked at random, through {@code via}
   * (this node's transport, or the transport of a later incarnation of the same node), as the
   * network would deliver a very late duplicate: same sender, same destination, same bytes.
   * Answers to replayed requests go nowhere.
   */
  void replay(java.util.random.RandomGenerator random, int count, Transport via) {
    if (history.isEmpty()) {
      return;
    }
    Sent[] all = history.toArray(new Sent[0]);
    for (int i = 0; i < count; i++) {
      Sent s = all[random.nextInt(all.length)];
      replayed++;
      if (s.request()) {
        via.request(s.to(), s.payload(), Duration.ofSeconds(30));
      } else {
        via.send(s.to(), s.payload());
      }
    }
  }

  @Override
  public void start(InboundHandler handler) {
    inner.start(new InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        try {
          handler.onMessage(from, payload);
        } catch (RuntimeException | Error e) {
          scheduler.recordEscape("node " + nodeId + " onMessage from " + from, e);
          throw e;
        }
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        try {
          CompletableFuture<byte[]> f = handler.onRequest(from, payload);
          if (f == null) {
            invariants.violation("node " + nodeId + " answered a request from " + from
                + " with a null future");
          }
          return f;
        } catch (RuntimeException | Error e) {
          scheduler.recordEscape("node " + nodeId + " onRequest from " + from, e);
          throw e;
        }
      }
    });
  }

  @Override
  public PeerAddress localAddress() {
    return inner.localAddress();
  }

  @Override
  public void send(PeerAddress to, byte[] payload) {
    if (invariants.leftAddresses.contains(to.address())) {
      invariants.othersToLeftAddresses++;
    }
    remember(to, payload, false);
    inner.send(to, payload);
  }

  @Override
  public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload, Duration timeout) {
    ForwardFrames.ForwardHeader h = ForwardFrames.peekForward(payload);
    if (h != null) {
      invariants.onForwardSent(instanceKey, nodeId, to.nodeId(), h.requestId(), h.hops());
    }
    if (invariants.leftAddresses.contains(to.address())) {
      if (h != null) {
        invariants.forwardsToLeftAddresses++;
      } else {
        invariants.othersToLeftAddresses++;
      }
    }
    remember(to, payload, true);
    return inner.request(to, payload, timeout);
  }

  @Override
  public void close() {
    inner.close();
  }
}
