package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.OracleCluster.request;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Races between the threads of a node found by {@link RealThreadClusterStressTest} (or while
 * reading the code for what it reported), each forced deterministically: with latches (a latch
 * stands for a thread the operating system did not run at that moment) or with an SPI call
 * inside the window that completes what another thread would.
 */
class StopRacesTest {

  /**
   * A thread delivering a piece of output to the client's listener when the request's answer
   * comes on another thread runs the request's completion after the piece (the listener is
   * never called after its future completes). The answering thread used to end the request
   * there and then, so the node stopped, with every counter read, before the client's future
   * completed and before the request was counted answered: a request accepted and unanswered at
   * {@code STOPPED}.
   */
  @Test
  void aStopEndsAfterTheAnswerThatAListenersPieceHeldBack() throws Exception {
    AtomicReference<OutputListener> engineListener = new AtomicReference<>();
    CompletableFuture<EngineResult> run = new CompletableFuture<>();
    InferenceEngine engine = new InferenceEngine() {
      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest r) {
        return execute(r, OutputListener.IGNORE);
      }

      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest r, OutputListener l) {
        engineListener.set(l);
        return run;
      }
    };
    RouterNode node = localNode(new InMemoryNetwork(new SimulatedScheduler(), 1).transport("n0"),
        engine, new ManualScheduler());
    node.start();
    CountDownLatch inListener = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    OutputListener client = (tokens, text) -> {
      inListener.countDown();
      try {
        release.await(30, TimeUnit.SECONDS); // this thread is not run for a moment
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    };
    InferenceRequest r = new InferenceRequest("q", prompt(1, 64),
        io.github.prefixrouter.GenerationParams.greedy(2));
    int[] out = expected(r);
    CompletableFuture<InferenceResponse> f = node.submit(r, client);

    // the engine streams its first token on one thread: the client's listener takes it
    Thread piece = new Thread(() -> engineListener.get().onOutput(new int[] {out[0]}, ""));
    piece.start();
    assertTrue(inListener.await(30, TimeUnit.SECONDS));
    CompletableFuture<Void> stopped = node.stop();
    assertFalse(stopped.isDone(), "a request is in flight");
    // ... and answers on another (this one) meanwhile
    run.complete(new EngineResult(out, "", r.length(), 0, 1_000, 1_000));
    boolean stoppedFirst = stopped.isDone();
    boolean answeredFirst = f.isDone();
    NodeStats atStop = node.stats();
    release.countDown();
    piece.join(30_000);

    assertFalse(stoppedFirst, "the node stopped while an accepted request was "
        + (answeredFirst ? "" : "un") + "answered: " + atStop);
    assertTrue(f.isDone() && stopped.isDone());
    assertArrayEquals(out, f.join().result().outputTokens());
    NodeStats s = node.stats();
    assertEquals(1, s.requests());
    assertEquals(1, s.servedLocally());
    assertEquals(0, s.inFlight());
    assertEquals(PrefixRouterNode.State.STOPPED, s.state());
  }

  /**
   * A host that asks for a grace period while the stop is already finishing on another thread
   * (its last request answered there, its transport closing) gets the same future and sets no
   * timer. The node used to schedule the grace period's timer after the stop had taken the
   * timers to cancel: it stayed on the host's scheduler, holding the stopped node, for the whole
   * grace period (on a scheduler the node owned and had closed, the refused timer was logged as
   * an error).
   */
  @Test
  void aGracePeriodAskedForWhileTheStopFinishesSetsNoTimer() throws Exception {
    CompletableFuture<EngineResult> run = new CompletableFuture<>();
    InferenceEngine engine = r -> run;
    CountDownLatch closing = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Transport slowClose = new ForwardingTransport(
        new InMemoryNetwork(new SimulatedScheduler(), 1).transport("n0")) {
      @Override
      public void close() {
        closing.countDown();
        try {
          release.await(30, TimeUnit.SECONDS); // an HTTP transport answering its last 503s
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        super.close();
      }
    };
    ManualScheduler timers = new ManualScheduler();
    RouterNode node = localNode(slowClose, engine, timers);
    node.start();
    InferenceRequest r = request("q", prompt(1, 64));
    CompletableFuture<InferenceResponse> f = node.submit(r);
    CompletableFuture<Void> stopped = node.stop();
    assertFalse(stopped.isDone(), "a request is in flight");
    // the last request is answered on another thread, which goes on to finish the stop
    Thread answer = new Thread(() -> run.complete(
        new EngineResult(expected(r), "", r.length(), 0, 1_000, 1_000)));
    answer.start();
    assertTrue(closing.await(30, TimeUnit.SECONDS));
    // the host's deadline nears: it asks for a grace period
    CompletableFuture<Void> again = node.stop(Duration.ofMinutes(5));
    release.countDown();
    answer.join(30_000);

    assertSame(stopped, again);
    assertTrue(stopped.isDone() && f.isDone());
    assertEquals(PrefixRouterNode.State.STOPPED, node.state());
    assertEquals(List.of(), timers.pending(),
        "a timer the stopped node set is still waiting on the host's scheduler");
  }

  /**
   * A forward's inactivity check (streamed) or liveness check that runs while the forward's
   * answer arrives on another thread sets no timer for an attempt that is over. The checks set
   * their next timer after the answer's thread had cancelled the current one: a timer of up to
   * a forwarding timeout (60 s by default) stayed on the scheduler for an answered request,
   * holding it, and outlived a stop. Here the answer arrives inside the check, where it reads
   * the clock (inactivity) or the peer view (liveness): the interleaving of the two threads.
   */
  @Test
  void aForwardAnsweredWhileItsChecksRunLeavesNoTimer() throws Exception {
    for (boolean inactivity : new boolean[] {true, false}) {
      Duration timeout = Duration.ofSeconds(3); // nothing observed yet: forwardTimeoutMax
      Duration every = Duration.ofMillis(700); // half of peerSuspectAfter
      RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
          .coldPlacement(false).forwardTimeout(Duration.ofMillis(100), timeout)
          .peerTimeouts(Duration.ofMillis(1_400), Duration.ofSeconds(10)).build();
      CompletableFuture<byte[]> answer = new CompletableFuture<>();
      AtomicReference<Runnable> duringTheCheck = new AtomicReference<>();
      Transport t = new ForwardingTransport(
          new InMemoryNetwork(new SimulatedScheduler(), 1).transport("n0")) {
        @Override
        public CompletableFuture<byte[]> request(io.github.prefixrouter.spi.PeerAddress to,
            byte[] payload, Duration d) {
          return answer;
        }
      };
      // the answer arrives (on another thread) while the check runs: between the check's look
      // at the attempt and its next timer, where it reads the clock or the peer view
      Clock clock = () -> {
        Runnable r = duringTheCheck.getAndSet(null);
        if (r != null) {
          r.run();
        }
        return 1_000_000_000L;
      };
      PeerView onePeer = new PeerView() {
        final PeerSet peers = new PeerSet(
            new io.github.prefixrouter.spi.PeerAddress[] {InMemoryNetwork.addressOf("n1")},
            new int[1], new int[1], new int[1], new boolean[1], new boolean[1],
            new long[] {200_000}, new long[1]);

        @Override
        public PeerSet livePeers() {
          Runnable r = duringTheCheck.getAndSet(null);
          if (r != null) {
            r.run();
          }
          return peers;
        }

        @Override
        public void leadingBlocks(PeerSet p, long[] chain, int blocks, int[] out) {
          out[0] = blocks;
        }
      };
      ManualScheduler timers = new ManualScheduler();
      RouterNode node = new RouterNode("n0", cfg, t, r -> new CompletableFuture<>(), clock,
          timers, new SplittableRandom(1), List.of(), new RouterNode.Components(
              RequestLifecycleTest.NO_CACHE, (tokens, l, o) -> l / cfg.blockSize(), onePeer));
      node.start();
      InferenceRequest r = request("q", prompt(1, 64));
      CompletableFuture<InferenceResponse> f = node.submit(r, (tokens, text) -> { });
      assertFalse(f.isDone());
      duringTheCheck.set(() -> answer.complete(ForwardCodec.result("q", "n1", 1_000,
          new EngineResult(expected(r), "", r.length(), 64, 1_000, 1_000))));
      timers.runTheOneSetFor(inactivity ? timeout : every);

      assertTrue(f.isDone(), "answered");
      assertEquals("n1", f.join().servedBy());
      assertEquals(List.of(), timers.pending(), (inactivity ? "inactivity" : "liveness")
          + " check: a timer of the answered forward is still set");
      node.stop().get(10, TimeUnit.SECONDS);
    }
  }

  /** A node running every request on {@code engine}, with the timers of {@code scheduler}. */
  private static RouterNode localNode(Transport transport, InferenceEngine engine,
      Scheduler scheduler) {
    return new RouterNode("n0", RouterConfig.builder().policy(RoutingPolicy.LOCAL_ONLY).build(),
        transport, engine, Clock.system(), scheduler, new SplittableRandom(1), List.of(),
        new RouterNode.Components(RequestLifecycleTest.NO_CACHE, (t, l, o) -> 0,
            PeerView.NONE));
  }

  /** A thread-safe scheduler that never runs its timers: it keeps those not cancelled. */
  static final class ManualScheduler implements Scheduler {
    private final List<Timer> pending = new ArrayList<>();

    private record Timer(String what, long delayNanos, Runnable task) {
      @Override
      public boolean equals(Object o) {
        return this == o; // each timer is its own
      }

      @Override
      public int hashCode() {
        return System.identityHashCode(this);
      }
    }

    @Override
    public synchronized Cancellable schedule(long delayNanos, Runnable task) {
      Timer t = new Timer(task.getClass().getName() + " in " + delayNanos / 1_000_000 + " ms",
          delayNanos, task);
      pending.add(t);
      return () -> {
        synchronized (ManualScheduler.this) {
          return pending.remove(t);
        }
      };
    }

    /** Runs the one pending timer set for {@code delay} (taken off first, as a real one is). */
    void runTheOneSetFor(Duration delay) {
      Timer found = null;
      synchronized (this) {
        for (Timer t : pending) {
          if (t.delayNanos() == delay.toNanos()) {
            assertTrue(found == null, "two timers set for " + delay + ": " + pending());
            found = t;
          }
        }
        assertTrue(found != null, "no timer set for " + delay + ": " + pending());
        pending.remove(found);
      }
      found.task().run();
    }

    synchronized List<String> pending() {
      List<String> all = new ArrayList<>();
      for (Timer t : pending) {
        all.add(t.what());
      }
      return all;
    }
  }
}
