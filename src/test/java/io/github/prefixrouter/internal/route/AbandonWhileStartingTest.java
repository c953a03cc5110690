package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeNotRunningException;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.ForwardingTransport;
import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A request abandoned (its client cancels, a stop's grace period ends) while the node is
 * starting one of its attempts, on another thread: the attempt must not go on without it. Here
 * the engine's {@code load()}, which the node calls while it routes a request and starts its run,
 * stands for that other thread: at its k-th call it abandons the request.
 */
class AbandonWhileStartingTest {

  static final int[] PREFIX = prompt(42, 480);

  /** An engine that runs {@code hook} at the k-th call of {@code load()} after it is armed. */
  static final class HookedLoad {
    final AtomicInteger countdown = new AtomicInteger(-1);
    final AtomicReference<Runnable> hook = new AtomicReference<>();

    void arm(int k, Runnable r) {
      hook.set(r);
      countdown.set(k);
    }

    OracleCluster.Hooks hooks(String node) {
      OracleCluster.Hooks h = new OracleCluster.Hooks();
      AtomicInteger built = new AtomicInteger();
      h.engineWrap = e -> {
        boolean hooked = built.getAndIncrement() == Integer.parseInt(node.substring(1));
        return !hooked ? e : new ForwardingEngine(e) {
          @Override
          public EngineLoad load() {
            if (countdown.get() > 0 && countdown.decrementAndGet() == 0) {
              hook.getAndSet(() -> { }).run();
            }
            return super.load();
          }
        };
      };
      return h;
    }
  }

  static InferenceRequest generating(String id, int maxTokens) {
    return new InferenceRequest(id, concat(PREFIX, prompt(7, 40)),
        GenerationParams.greedy(maxTokens));
  }

  /** Call 1 is the decision's, call 2 the run's own just before {@code execute}. */
  @ParameterizedTest(name = "stopped at load() call {0}")
  @ValueSource(ints = {1, 2})
  void aRunStartingWhenTheGracePeriodEndsIsCancelledOnTheEngine(int k) {
    HookedLoad hooked = new HookedLoad();
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1, hooked.hooks("n0")).start();
    RouterNode n0 = c.node("n0");
    hooked.arm(k, () -> n0.stop(Duration.ZERO));
    CompletableFuture<InferenceResponse> f = n0.submit(generating("r1", 50));
    c.sim.runUntilIdle(1_000_000);
    assertEquals(0, hooked.countdown.get(), "the hook did not run");
    CompletionException e = assertThrows(CompletionException.class, f::join);
    assertInstanceOf(NodeNotRunningException.class, e.getCause());
    assertEquals(0, c.engine("n0").stats().completed(),
        "the abandoned request ran to its end on the engine: " + c.engine("n0").stats());
    assertEquals(0, c.engine("n0").load().total());
  }

  /** Call 1 is the fallback decision's, call 2 the run's own just before {@code execute}. */
  @ParameterizedTest(name = "cancelled at load() call {0}")
  @ValueSource(ints = {1, 2})
  void aFallbackStartingWhenTheClientCancelsDoesNotRun(int k) {
    HookedLoad hooked = new HookedLoad();
    OracleCluster c = new OracleCluster(2, RouterConfig.builder()
        .policy(RoutingPolicy.LONGEST_PREFIX).coldPlacement(false).build(), 1,
        hooked.hooks("n0")).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    c.engine("n1").failNext(1); // the forward fails retryably: n0 falls back to its engine
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(generating("r1", 50));
    hooked.arm(k, () -> f.cancel(true));
    c.sim.runUntilIdle(1_000_000);
    assertEquals(0, hooked.countdown.get(), "the hook did not run");
    assertThrows(CancellationException.class, f::join);
    assertEquals(0, c.engine("n0").stats().completed(),
        "the cancelled request ran to its end on the engine: " + c.engine("n0").stats());
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  /** The decision that sends the request to the peer after its local run failed. */
  @org.junit.jupiter.api.Test
  void aForwardStartingWhenTheClientCancelsIsNotServed() {
    int k = 1;
    HookedLoad hooked = new HookedLoad();
    OracleCluster c = new OracleCluster(2, RouterConfig.builder()
        .policy(RoutingPolicy.COST_AWARE).coldPlacement(false).build(), 1,
        hooked.hooks("n0")).rtt(Duration.ofMillis(1)).start();
    c.engine("n0").failNext(1); // the local run fails retryably: n0 tries its peer
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(generating("r1", 50));
    hooked.arm(k, () -> f.cancel(true));
    c.sim.runUntilIdle(1_000_000);
    assertEquals(0, hooked.countdown.get(), "the hook did not run");
    assertThrows(CancellationException.class, f::join);
    assertEquals(0, c.engine("n1").stats().completed(),
        "the peer ran the cancelled request to its end: " + c.engine("n1").stats());
    assertEquals(0, c.node("n1").stats().servedForPeers());
    assertEquals(0, c.node("n0").stats().inFlight());
    assertEquals(0, c.node("n1").stats().inFlight());
  }

  @org.junit.jupiter.api.Test
  void aForwardBeingSentWhenTheClientCancelsIsCancelledAtThePeer() {
    AtomicReference<Runnable> onRequest = new AtomicReference<>(() -> { });
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.transportWrap = t -> new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        onRequest.getAndSet(() -> { }).run();
        return super.request(to, payload, timeout);
      }
    };
    OracleCluster c = new OracleCluster(2, RouterConfig.builder()
        .policy(RoutingPolicy.COST_AWARE).coldPlacement(false).build(), 1, h)
        .rtt(Duration.ofMillis(1)).start();
    c.engine("n0").failNext(1); // the local run fails retryably: n0 tries its peer
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(generating("r1", 50));
    // the client cancels while n0 is sending the FORWARD: the CANCEL goes before it
    onRequest.set(() -> f.cancel(true));
    c.sim.runUntilIdle(1_000_000);
    assertTrue(f.isCancelled());
    assertEquals(0, c.engine("n1").stats().completed(),
        "the peer ran the cancelled request to its end: " + c.engine("n1").stats());
    assertEquals(0, c.node("n1").stats().inFlight());
  }

  /**
   * A FORWARD being sent when the client cancels, to a peer that never answers (cut off, or its
   * host hung): the node no longer awaits it, so it cancels the transport's future as it does
   * for any forward it gives up (the transport lets go of what it holds for it, such as an
   * in-flight slot for the peer), rather than leaving it, and the attempt's timers, to the
   * transport's timeout.
   */
  @org.junit.jupiter.api.Test
  void aForwardBeingSentWhenTheClientCancelsIsLetGoOfAtTheTransport() {
    AtomicReference<Runnable> onRequest = new AtomicReference<>(() -> { });
    AtomicReference<CompletableFuture<byte[]>> sent = new AtomicReference<>();
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.transportWrap = t -> new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        onRequest.getAndSet(() -> { }).run();
        CompletableFuture<byte[]> f = new CompletableFuture<>(); // the peer never answers
        sent.set(f);
        return f;
      }
    };
    OracleCluster c = new OracleCluster(2, RouterConfig.builder()
        .policy(RoutingPolicy.COST_AWARE).coldPlacement(false).build(), 1, h)
        .rtt(Duration.ofMillis(1)).start();
    c.engine("n0").failNext(1); // the local run fails retryably: n0 tries its peer
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(generating("r1", 50));
    onRequest.set(() -> f.cancel(true));
    c.sim.advanceBy(Duration.ofMillis(100).toNanos());
    assertTrue(f.isCancelled());
    assertTrue(sent.get() != null, "no FORWARD was sent");
    assertTrue(sent.get().isCancelled(),
        "the node left the transport awaiting the answer to a forward it gave up");
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  /**
   * A forward abandoned by its client is let go of at the transport before its CANCEL is sent:
   * the request holds one of the peer's in-flight slots until then, and a transport at its
   * limit for the peer (HTTP's {@code maxInFlightPerPeer}) drops a message sent meanwhile, so
   * the CANCEL was lost and the peer generated the whole answer for nobody.
   */
  @ParameterizedTest(name = "abandoned while the FORWARD is sent: {0}")
  @ValueSource(booleans = {false, true})
  void theCancelOfAnAbandonedForwardIsSentOnceTheForwardsSlotIsFree(boolean whileSending) {
    AtomicReference<Runnable> onRequest = new AtomicReference<>(() -> { });
    AtomicReference<CompletableFuture<byte[]>> sent = new AtomicReference<>();
    // for each CANCEL sent after the client cancels: whether the forward was let go of then
    java.util.List<Boolean> cancelsSent = new java.util.concurrent.CopyOnWriteArrayList<>();
    java.util.concurrent.atomic.AtomicBoolean cancelled =
        new java.util.concurrent.atomic.AtomicBoolean();
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.transportWrap = t -> new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        CompletableFuture<byte[]> f = new CompletableFuture<>(); // the peer never answers
        sent.set(f);
        onRequest.getAndSet(() -> { }).run();
        return f;
      }

      @Override
      public void send(PeerAddress to, byte[] payload) {
        if (cancelled.get() && payload.length > 0 && payload[0] == ForwardCodec.CANCEL) {
          cancelsSent.add(sent.get().isDone());
        }
        super.send(to, payload);
      }
    };
    OracleCluster c = new OracleCluster(2, RouterConfig.builder()
        .policy(RoutingPolicy.COST_AWARE).coldPlacement(false).build(), 1, h)
        .rtt(Duration.ofMillis(1)).start();
    c.engine("n0").failNext(1); // the local run fails retryably: n0 tries its peer
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(generating("r1", 50));
    Runnable cancel = () -> {
      cancelled.set(true);
      f.cancel(true);
    };
    if (whileSending) {
      onRequest.set(cancel);
      c.sim.advanceBy(Duration.ofMillis(100).toNanos());
    } else {
      c.sim.advanceBy(Duration.ofMillis(100).toNanos());
      assertTrue(sent.get() != null && !sent.get().isDone(), "the FORWARD is awaited");
      cancel.run();
    }
    assertTrue(f.isCancelled());
    assertTrue(!cancelsSent.isEmpty(), "no CANCEL was sent");
    // abandoned while the FORWARD is sent, a first CANCEL goes at once (the FORWARD may arrive
    // after it); the one that follows the FORWARD is the one that must find a free slot
    assertEquals(true, cancelsSent.get(cancelsSent.size() - 1),
        "the CANCEL was sent while the forward still held its slot at the transport: "
            + cancelsSent);
  }

  /**
   * A run abandoned on an engine that neither answers nor honours the cancel (the SPI's default
   * {@code cancel} does nothing) is given up at {@code engineTimeout}, as a run that was not
   * abandoned is: its pin on the local index is released then, not held forever.
   */
  @org.junit.jupiter.api.Test
  void anAbandonedRunThatNeverEndsReleasesItsPinAtTheEngineTimeout() {
    io.github.prefixrouter.testing.SimulatedScheduler sim =
        new io.github.prefixrouter.testing.SimulatedScheduler();
    AtomicInteger pinned = new AtomicInteger();
    LocalPrefixIndex index = new LocalPrefixIndex() {
      @Override
      public int match(int[] tokens) {
        return 0;
      }

      @Override
      public void onExecuted(int[] tokens) {}

      @Override
      public long cachedTokens() {
        return 0;
      }

      @Override
      public Pin pin(long scopeRoot, int[] tokens) {
        pinned.incrementAndGet();
        return pinned::decrementAndGet;
      }
    };
    // never answers, and its cancel (the SPI's default) does nothing
    io.github.prefixrouter.spi.InferenceEngine hangs = r -> new CompletableFuture<>();
    RouterNode n = new RouterNode("n0", RouterConfig.builder().policy(RoutingPolicy.LOCAL_ONLY)
        .engineTimeout(Duration.ofSeconds(30)).build(),
        new io.github.prefixrouter.testing.InMemoryNetwork(sim, 1).transport("n0"), hangs, sim,
        sim, new java.util.SplittableRandom(1), java.util.List.of(),
        new RouterNode.Components(index, (t, l, o) -> 0, PeerView.NONE));
    n.start();
    CompletableFuture<InferenceResponse> f = n.submit(generating("r1", 50));
    sim.advanceBy(Duration.ofSeconds(1).toNanos());
    assertEquals(1, pinned.get());
    f.cancel(true);
    assertEquals(0, n.stats().inFlight());
    sim.advanceBy(Duration.ofSeconds(30).toNanos());
    assertEquals(0, pinned.get(), "the abandoned run still pins its prefix");
  }
}
