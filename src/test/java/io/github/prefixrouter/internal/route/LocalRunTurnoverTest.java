package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.OracleCluster.request;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouteDecision.Reason;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.route.LocalFailureTest.Fault;
import io.github.prefixrouter.internal.route.LocalFailureTest.Faulty;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Every run the local engine takes inserts the prompt's uncached tokens into its cache, so local
 * caching counts it in the cache turnover the residency is estimated from, whatever brought the
 * request here: a routing decision to run it here, a peer's forward, or no decision at all (a
 * forward that fell back to the local engine, a peer's final failure judged here, routing that
 * threw). n0 holds the first 256 tokens of a 2,048-token prefix its peers hold whole; its cache
 * is 4,096 tokens, so that one run's 1,824 uncached tokens bring the residency below its cap.
 * In simulated time.
 */
class LocalRunTurnoverTest {

  static final int CAPACITY = 4096;
  static final int[] PREFIX = prompt(42, 2048);
  static final int HELD_HERE = 256;
  /** A request for the prefix, with a question of its own: 2,080 tokens, 1,824 uncached at n0. */
  static final InferenceRequest R = request("q", concat(PREFIX, prompt(9, 32)));

  static RouterConfig config() {
    return RouterConfig.builder().policy(RoutingPolicy.COST_AWARE)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false)
        .treeCapacityTokens(CAPACITY).build();
  }

  /**
   * The residency of a node whose runs inserted {@code tokens} into its cache just now: the
   * capacity over the insertion rate (4,096 tokens over 1,824 a minute: about 135 s).
   */
  static long residencyAfter(long tokens, long now) {
    LocalDemand ran = new LocalDemand(CAPACITY);
    ran.inserted(tokens, now);
    return ran.residencyNanos(now);
  }

  /** How a request that n0 decided to forward comes to run on n0's engine, with no decision. */
  enum Path {
    /** The forward is too large for the link: the other peers' links are too. */
    TOO_LARGE,
    /** The transport is closed: no peer can be reached. */
    TRANSPORT_CLOSED,
    /** Its third forward fails (each peer's engine fails it retryably): no fourth is sent. */
    THIRD_FORWARD_FAILED,
    /** The peer's engine refuses it as invalid: the local engine judges it once. */
    PEER_REFUSED
  }

  /** Nodes n0 to n(peers) whose engines are {@link Faulty}; n0's forwards fail as set. */
  static final class Cluster {
    final OracleCluster c;
    final List<Faulty> engines = new ArrayList<>();
    /** How n0's transport fails every forward, or null for none. */
    TransportException.Kind forwardsFail;

    Cluster(int peers) {
      OracleCluster.Hooks h = new OracleCluster.Hooks();
      h.transportWrap = t -> new ForwardingTransport(t) {
        @Override
        public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
            Duration timeout) {
          TransportException.Kind k = forwardsFail;
          if (k != null && t.localAddress().nodeId().equals("n0")) {
            return CompletableFuture.failedFuture(new TransportException(k, "forward " + k));
          }
          return super.request(to, payload, timeout);
        }
      };
      c = OracleCluster.withWrappedEngines(peers + 1, config(), 5, UnaryOperator.identity(),
          Faulty::new, engines, h);
      c.warm("n0", Arrays.copyOf(PREFIX, HELD_HERE));
      for (int i = 1; i <= peers; i++) {
        c.warm("n" + i, concat(PREFIX, prompt(1, 40)));
      }
    }

    Faulty engine(int i) {
      return engines.get(i);
    }

    long residency() {
      return NodeProbe.demandOf(c.node("n0")).residencyNanos(c.sim.nanoTime());
    }

    /** Runs the simulation until n0's engine has been called (or the answer is there). */
    void untilRunHere(CompletableFuture<?> answer) {
      while (engines.get(0).calls.get() == 0 && !answer.isDone() && c.sim.runNext()) {
        // keep going
      }
    }
  }

  /**
   * A request n0 decided to forward, and then ran itself without deciding again, counts its
   * uncached tokens in n0's cache turnover once its engine has taken the run.
   */
  @ParameterizedTest
  @EnumSource(Path.class)
  void aRunHereWithNoDecisionCountsInTheCacheTurnover(Path path) {
    Cluster k = new Cluster(path == Path.THIRD_FORWARD_FAILED ? 3 : 1);
    switch (path) {
      case TOO_LARGE -> k.forwardsFail = TransportException.Kind.TOO_LARGE;
      case TRANSPORT_CLOSED -> k.forwardsFail = TransportException.Kind.CLOSED;
      case THIRD_FORWARD_FAILED ->
          k.engines.subList(1, 4).forEach(e -> e.fault = Fault.UNREACHABLE);
      case PEER_REFUSED -> k.engine(1).fault = Fault.INVALID;
    }
    assertEquals(LocalDemand.MAX_RESIDENCY_NANOS, k.residency(), "nothing ran at n0 yet");
    CompletableFuture<InferenceResponse> answer = k.c.node("n0").submit(R);
    k.untilRunHere(answer);
    assertEquals(1, k.engine(0).calls.get(), "the request did not run on n0's engine");
    long now = k.c.sim.nanoTime();
    assertEquals(residencyAfter(R.length() - HELD_HERE, now), k.residency(), path + ": n0's "
        + "engine took the run of " + (R.length() - HELD_HERE) + " uncached tokens, yet the "
        + "cache turnover gives a residency of " + k.residency() / 1_000_000 + " ms (600,000: "
        + "as if nothing ran here)");

    InferenceResponse a = k.c.runUntilDone(answer).join();
    assertEquals("n0", a.servedBy(), a.toString());
    assertArrayEquals(expected(R), a.result().outputTokens());
    assertEquals(Reason.PEER_CHEAPER, a.decision().reason(), "n0 decided to forward: " + a);
    FallbackCause cause = switch (path) {
      case TOO_LARGE -> FallbackCause.TOO_LARGE;
      case TRANSPORT_CLOSED -> FallbackCause.TRANSPORT_CLOSED;
      case THIRD_FORWARD_FAILED, PEER_REFUSED -> FallbackCause.PEER_FAILED;
    };
    assertEquals(cause, a.fallbackCause(), a.toString());
    assertEquals(path == Path.THIRD_FORWARD_FAILED ? 4 : 2, a.attempts(), a.toString());
  }

  /**
   * A run with no decision that the engine refuses at once ({@code execute} returns a failed
   * future) inserted nothing: the turnover counts none of it, as for a decided run.
   */
  @Test
  void aRunWithNoDecisionTheEngineRefusesAtOnceIsNoRunHere() {
    Cluster k = new Cluster(1);
    k.forwardsFail = TransportException.Kind.TOO_LARGE;
    k.engine(0).fault = Fault.UNREACHABLE;
    CompletableFuture<InferenceResponse> answer = k.c.runUntilDone(k.c.node("n0").submit(R));
    Throwable t = answer.handle((r, e) -> e).join();
    assertInstanceOf(RequestFailedException.class,
        t instanceof CompletionException ? t.getCause() : t);
    assertEquals(1, k.engine(0).calls.get(), "the request was not given to n0's engine");
    assertEquals(LocalDemand.MAX_RESIDENCY_NANOS, k.residency(), "n0's engine refused the run, "
        + "yet the cache turnover counts its tokens: a residency of " + k.residency() / 1_000_000
        + " ms");
  }

  /**
   * A peer's forward that runs here comes through a decision of this node (the hop limit's),
   * which records the run: n1, holding half of the prefix, counts the 1,056 tokens it lacks.
   */
  @Test
  void aForwardServedHereCountsInTheCacheTurnover() {
    List<Faulty> engines = new ArrayList<>();
    OracleCluster c = OracleCluster.withWrappedEngines(2, config(), 5, UnaryOperator.identity(),
        Faulty::new, engines);
    c.warm("n1", Arrays.copyOf(PREFIX, 1024));
    CompletableFuture<InferenceResponse> answer = c.node("n0").submit(R);
    while (engines.get(1).calls.get() == 0 && !answer.isDone() && c.sim.runNext()) {
      // until n1's engine takes the forward
    }
    assertEquals(1, engines.get(1).calls.get(), "n0 did not forward the request to n1");
    long now = c.sim.nanoTime();
    long residency = NodeProbe.demandOf(c.node("n1")).residencyNanos(now);
    assertEquals(residencyAfter(R.length() - 1024, now), residency, "n1's engine took the "
        + "forward's run of " + (R.length() - 1024) + " uncached tokens, yet the cache turnover "
        + "gives a residency of " + residency / 1_000_000 + " ms");
    InferenceResponse a = c.runUntilDone(answer).join();
    assertEquals("n1", a.servedBy(), a.toString());
    assertTrue(a.forwarded(), a.toString());
  }

  /**
   * A request whose routing threw (here the peer view failing) runs here under a {@link
   * Reason#ROUTING_FAILED} decision the planner never made: it counts in the turnover too, its
   * cached part from the local index.
   */
  @Test
  void aRunAfterRoutingThrewCountsInTheCacheTurnover() {
    SimulatedScheduler sim = new SimulatedScheduler();
    SimulatedEngine engine = OracleCluster.engineDefaults(sim).build();
    engine.execute(request("warm", Arrays.copyOf(PREFIX, HELD_HERE)));
    sim.runUntilIdle(1_000);
    boolean[] failing = {false};
    PeerView view = new PeerView() {
      @Override
      public PeerSet livePeers() {
        if (failing[0]) {
          throw new IllegalStateException("peer view corrupted");
        }
        return PeerView.NONE.livePeers();
      }

      @Override
      public void leadingBlocks(PeerSet peers, long[] chain, int blocks, int[] out) {}
    };
    Faulty spi = new Faulty(engine);
    RouterNode node = new RouterNode("n0", config(),
        new InMemoryNetwork(sim, 1).transport("n0"), spi, sim, sim, new SplittableRandom(1),
        List.of(), new RouterNode.Components(EngineCacheIndex.of(engine), (t, l, o) -> 0, view));
    node.start();
    failing[0] = true;
    long now = sim.nanoTime();
    CompletableFuture<InferenceResponse> answer = node.submit(R);
    failing[0] = false;
    assertEquals(1, spi.calls.get(), "the request did not run on the engine");
    long residency = NodeProbe.demandOf(node).residencyNanos(now);
    assertEquals(residencyAfter(R.length() - HELD_HERE, now), residency, "the engine took the "
        + "run of " + (R.length() - HELD_HERE) + " uncached tokens, yet the cache turnover gives "
        + "a residency of " + residency / 1_000_000 + " ms (600,000: as if nothing ran here)");
    sim.runUntilIdle(1_000_000);
    assertTrue(answer.isDone(), "the request was never answered");
    InferenceResponse a = answer.join();
    assertEquals(Reason.ROUTING_FAILED, a.decision().reason(), a.toString());
    assertEquals("n0", a.servedBy(), a.toString());
    assertFalse(a.forwarded(), a.toString());
    node.stop();
  }
}
