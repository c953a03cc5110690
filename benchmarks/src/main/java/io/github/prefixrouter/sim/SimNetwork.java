package io.github.prefixrouter.sim;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.random.RandomGenerator;

/**
 * The simulated network between the nodes of a run: every message (one-way or either leg of a
 * request) takes one sampled {@link SimLink} delay and is lost with a fixed probability, all on
 * the run's scheduler. Counts the bytes of one-way messages and of requests and answers.
 */
final class SimNetwork {

  private final Scheduler scheduler;
  private final SimLink link;
  private final double loss;
  private final RandomGenerator random;
  private final Map<String, Endpoint> endpoints = new HashMap<>();
  private long oneWayBytes;
  private long requestBytes;

  SimNetwork(Scheduler scheduler, SimLink link, double loss, RandomGenerator random) {
    this.scheduler = scheduler;
    this.link = link;
    this.loss = loss;
    this.random = random;
  }

  /** A transport for the node {@code nodeId}, reachable at address {@code nodeId}. */
  Transport transport(String nodeId) {
    Endpoint e = new Endpoint(new PeerAddress(nodeId, nodeId));
    if (endpoints.putIfAbsent(nodeId, e) != null) {
      throw new IllegalArgumentException("node " + nodeId + " already has a transport");
    }
    return e;
  }

  PeerAddress address(String nodeId) {
    return new PeerAddress(nodeId, nodeId);
  }

  /** Bytes of one-way messages sent so far (gossip and cancels). */
  long oneWayBytes() {
    return oneWayBytes;
  }

  /** Bytes of requests and answers sent so far (forwarding). */
  long requestBytes() {
    return requestBytes;
  }

  private boolean lost() {
    return loss > 0 && random.nextDouble() < loss;
  }

  private final class Endpoint implements Transport {
    private final PeerAddress self;
    private InboundHandler handler;
    private boolean closed;
    private final Set<CompletableFuture<byte[]>> pending = new HashSet<>();

    Endpoint(PeerAddress self) {
      this.self = self;
    }

    @Override
    public void start(InboundHandler handler) {
      if (this.handler != null) {
        throw new IllegalStateException("transport of " + self + " already started");
      }
      this.handler = Objects.requireNonNull(handler, "handler");
    }

    @Override
    public PeerAddress localAddress() {
      return self;
    }

    private Endpoint target(PeerAddress to) {
      Endpoint t = endpoints.get(to.address());
      return t != null && t.handler != null && !t.closed ? t : null;
    }

    @Override
    public void send(PeerAddress to, byte[] payload) {
      if (closed) {
        return;
      }
      oneWayBytes += payload.length;
      if (lost()) {
        return;
      }
      byte[] copy = payload.clone();
      scheduler.schedule(
          link.sampleNanos(),
          () -> {
            Endpoint t = target(to);
            if (t != null) {
              t.handler.onMessage(self, copy);
            }
          });
    }

    @Override
    public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload, Duration timeout) {
      CompletableFuture<byte[]> f = new CompletableFuture<>();
      if (closed) {
        scheduler.schedule(0, () -> f.completeExceptionally(
            new TransportException(TransportException.Kind.CLOSED, "transport closed")));
        return f;
      }
      pending.add(f);
      f.whenComplete((r, e) -> pending.remove(f));
      long t = Math.max(0, timeout.toNanos());
      Scheduler.Cancellable timer =
          scheduler.schedule(
              t,
              () -> f.completeExceptionally(
                  new TransportException(
                      TransportException.Kind.TIMEOUT, "no answer from " + to + " in " + timeout)));
      f.whenComplete((r, e) -> timer.cancel());
      requestBytes += payload.length;
      if (lost()) {
        return f;
      }
      byte[] copy = payload.clone();
      scheduler.schedule(
          link.sampleNanos(),
          () -> {
            Endpoint target = target(to);
            if (target == null) {
              f.completeExceptionally(
                  new TransportException(TransportException.Kind.UNREACHABLE, to + " unreachable"));
              return;
            }
            CompletableFuture<byte[]> answer;
            try {
              answer = target.handler.onRequest(self, copy);
            } catch (RuntimeException e) {
              answer = CompletableFuture.failedFuture(e);
            }
            answer.whenComplete(
                (resp, err) -> {
                  if (resp != null) {
                    requestBytes += resp.length;
                  }
                  if (lost()) {
                    return;
                  }
                  scheduler.schedule(
                      link.sampleNanos(),
                      () -> {
                        if (err != null) {
                          Throwable c =
                              err instanceof java.util.concurrent.CompletionException
                                      && err.getCause() != null
                                  ? err.getCause()
                                  : err;
                          f.completeExceptionally(
                              c instanceof TransportException
                                  ? c
                                  : new TransportException(
                                      TransportException.Kind.PROTOCOL,
                                      "peer failed: " + c.getMessage()));
                        } else {
                          f.complete(resp);
                        }
                      });
                });
          });
      return f;
    }

    @Override
    public void close() {
      if (closed) {
        return;
      }
      closed = true;
      for (CompletableFuture<byte[]> f : Set.copyOf(pending)) {
        f.completeExceptionally(
            new TransportException(TransportException.Kind.CLOSED, "transport closed"));
      }
    }
  }
}
