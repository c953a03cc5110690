package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.RoutePlannerTest.MS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.route.RoutePlannerTest.ScriptedView;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

/**
 * The per-peer forward overhead: what a forward costs beyond gossip's round trip, learned from
 * answered forwards (elapsed time less the peer's own time less the smoothed round trip), with
 * the configured {@code forwardOverhead} as the prior.
 */
class ForwardOverheadTest {

  static final long PRIOR = 200_000L;

  @Test
  void thePriorPricesAPeerUntilAForwardThereIsAnswered() {
    PeerHealth.PeerState s = new PeerHealth.PeerState();
    assertEquals(PRIOR, s.overheadNanos(PRIOR));
    // the prior counts as one sample: the first answer moves it half way
    s.observeOverhead(3 * MS, PRIOR);
    assertEquals((PRIOR + 3 * MS) / 2, s.overheadNanos(PRIOR));
    for (int i = 0; i < 60; i++) {
      s.observeOverhead(3 * MS, PRIOR);
    }
    assertEquals(3 * MS, s.overheadNanos(PRIOR), 3 * MS / 100);
  }

  @Test
  void oneStalledAnswerMovesItByABoundedStepAndItComesBack() {
    PeerHealth.PeerState s = new PeerHealth.PeerState();
    for (int i = 0; i < 20; i++) {
      s.observeOverhead(3 * MS, PRIOR);
    }
    s.observeOverhead(Duration.ofSeconds(30).toNanos(), PRIOR); // a stalled answer
    long after = s.overheadNanos(PRIOR);
    assertTrue(after <= 3 * MS + PeerHealth.MAX_OVERHEAD_NANOS / 8 + 1, "after: " + after);
    for (int i = 0; i < 30; i++) {
      s.observeOverhead(3 * MS, PRIOR);
    }
    assertEquals(3 * MS, s.overheadNanos(PRIOR), 3 * MS / 10);
  }

  @Test
  void forwardsFasterThanGossipsRoundTripNeverPriceBelowTheConfiguredOverhead() {
    PeerHealth.PeerState s = new PeerHealth.PeerState();
    for (int i = 0; i < 20; i++) {
      s.observeOverhead(4 * MS, PRIOR);
    }
    for (int i = 0; i < 60; i++) {
      s.observeOverhead(-2 * MS, PRIOR);
    }
    assertEquals(PRIOR, s.overheadNanos(PRIOR));
  }

  /**
   * Invariant after every sample: the overhead lies between the prior and its bound, and within
   * the range of the prior and the (bounded) samples seen so far, since it is a weighted mean of
   * them.
   */
  @Property(tries = 300)
  void theOverheadIsAWeightedMeanOfThePriorAndTheBoundedSamples(
      @ForAll @LongRange(min = 0, max = 200_000_000L) long prior,
      @ForAll @Size(min = 1, max = 40) List<@LongRange(min = -2_000_000_000L,
          max = 2_000_000_000L) Long> samples) {
    PeerHealth.PeerState s = new PeerHealth.PeerState();
    long bound = Math.max(PeerHealth.MAX_OVERHEAD_NANOS, prior);
    double lo = prior;
    double hi = prior;
    for (long x : samples) {
      s.observeOverhead(x, prior);
      double clipped = Math.max(-bound, Math.min(bound, x));
      lo = Math.min(lo, clipped);
      hi = Math.max(hi, clipped);
      long o = s.overheadNanos(prior);
      assertTrue(o >= prior && o <= bound, "out of [prior, bound]: " + o);
      assertTrue(o >= Math.max(prior, (long) Math.floor(lo)) - 1
          && o <= Math.min(bound, (long) Math.ceil(hi)) + 1,
          o + " outside [" + lo + ", " + hi + "]");
    }
  }

  @Test
  void aPeersLearnedOverheadIsPartOfItsCost() {
    int[] t = RoutePlannerTest.tokens(7, 640);
    ScriptedView v = new ScriptedView().peer("near", 2 * MS).peer("far", 2 * MS)
        .holds("near", t, 640).holds("far", t, 640);
    PeerHealth health = new PeerHealth();
    for (int i = 0; i < 40; i++) {
      health.get("near").observeOverhead(6 * MS, PRIOR);
    }
    RouteDecision d = SlotPricingTest.planner(SlotPricingTest.CFG, v, 0, EngineLoad.IDLE, health,
        false).decide(t);
    assertEquals(2 * MS + PRIOR, d.candidates().get(2).costNanos(), d.toString());
    assertEquals(2 * MS + health.get("near").overheadNanos(PRIOR),
        d.candidates().get(1).costNanos(), d.toString());
    assertEquals("far", d.targetNodeId(), d.toString());
  }

  /** Answers to this node's forwards arrive {@code extraNanos} later than the network does. */
  static final class SlowAnswers extends ForwardingTransport {
    final AtomicReference<SimulatedScheduler> sim;
    final long extraNanos;

    SlowAnswers(Transport delegate, AtomicReference<SimulatedScheduler> sim, long extraNanos) {
      super(delegate);
      this.sim = sim;
      this.extraNanos = extraNanos;
    }

    @Override
    public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload, Duration timeout) {
      CompletableFuture<byte[]> out = new CompletableFuture<>();
      delegate.request(to, payload, timeout).whenComplete((v, e) ->
          sim.get().schedule(extraNanos, () -> {
            if (e != null) {
              out.completeExceptionally(e);
            } else {
              out.complete(v);
            }
          }));
      return out;
    }
  }

  /**
   * Two nodes, 1 ms one way (gossip's round trip 2 ms); n0's forwards take 5 ms more (a bigger
   * body, a slower HTTP path); n1's engine caches the prefix. Returns n1's cost in n0's decision
   * for a request of that prefix after n0 forwarded ten of them.
   */
  static long peerCostAfterForwards(boolean previousPricing) {
    AtomicReference<SimulatedScheduler> sim = new AtomicReference<>();
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    hooks.transportWrap = t -> t.localAddress().nodeId().equals("n0")
        ? new SlowAnswers(t, sim, 5 * MS) : t;
    RouterConfig cfg = RouterConfig.builder().coldPlacement(false).localCaching(false).build();
    OracleCluster c = new OracleCluster(2, cfg, 1, hooks);
    sim.set(c.sim);
    if (previousPricing) {
      c.node("n0").usePreviousPricing(true, true);
    }
    c.rtt(Duration.ofMillis(1)).start();
    int[] prefix = prompt(42, 480);
    c.warm("n1", concat(prefix, prompt(1, 40)));
    for (int i = 0; i < 10; i++) {
      InferenceResponse r = c.submitAndWait("n0",
          OracleCluster.request("q" + i, concat(prefix, prompt(100 + i, 40))));
      assertEquals("n1", r.servedBy(), r.decision().toString());
    }
    RouteDecision d = c.node("n0").explain(
        OracleCluster.request("probe", concat(prefix, prompt(999, 40))));
    return d.candidates().get(1).costNanos();
  }

  @Test
  void aNodeLearnsWhatItsForwardsCostBeyondTheRoundTrip() {
    long learned = peerCostAfterForwards(false);
    long prior = peerCostAfterForwards(true);
    // the same requests and engine timings: the costs differ by the learned overhead less the
    // prior (5 ms less 0.2 ms once the mean of the prior and ten samples of 5 ms has moved)
    long diff = learned - prior;
    assertTrue(diff > 4 * MS && diff < 5 * MS, "learned - prior = " + diff);
  }
}
