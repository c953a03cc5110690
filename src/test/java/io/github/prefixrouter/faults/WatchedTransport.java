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
    inner.send(to, payload);
  }

  @Override
  public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload, Duration timeout) {
    ForwardFrames.ForwardHeader h = ForwardFrames.peekForward(payload);
    if (h != null) {
      invariants.onForwardSent(instanceKey, nodeId, to.nodeId(), h.requestId(), h.hops());
    }
    return inner.request(to, payload, timeout);
  }

  @Override
  public void close() {
    inner.close();
  }
}
