package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.RoutePlannerTest.HASHER;
import static io.github.prefixrouter.internal.route.RoutePlannerTest.matching;
import static io.github.prefixrouter.internal.route.RoutePlannerTest.tokens;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouteDecision.Reason;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.route.RoutePlannerTest.ScriptedView;
import io.github.prefixrouter.spi.EngineLoad;
import java.time.Duration;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.DoubleRange;
import net.jqwik.api.constraints.LongRange;

/**
 * A cold prompt's rendezvous placement is kept when it is at most {@code coldPlacementSlack}
 * slower than local (docs/routing.md, "The decision"), against the rule's model: one idle peer
 * that wins the rendezvous, a 64-token prompt nobody holds, 0.1 ms a token of prefill and a
 * 0.2 ms forwarding overhead, so local costs 6.4 ms and the peer its round trip more than 6.6 ms.
 */
class ColdPlacementSlackProperties {

  static final long PREFILL = 100_000;
  static final long OVERHEAD = 200_000;
  static final int TOKENS = 64;

  /** A prompt whose rendezvous winner, between "me" and "p", is "p". */
  static int[] placedOnThePeer() {
    for (long seed = 0; ; seed++) {
      int[] t = tokens(seed, TOKENS);
      long[] chain = new long[TOKENS / 16];
      HASHER.chain(t, TOKENS, chain);
      if (Long.compareUnsigned(Rendezvous.score(chain[0], Rendezvous.nodeHash("p")),
          Rendezvous.score(chain[0], Rendezvous.nodeHash("me"))) > 0) {
        return t;
      }
    }
  }

  static final int[] PROMPT = placedOnThePeer();

  @Property(tries = 300)
  void theRendezvousPeerKeepsAColdPromptOnlyWithinTheSlack(
      @ForAll @DoubleRange(min = 0, max = 2) double slack,
      @ForAll @LongRange(min = 0, max = 20_000_000) long rttNanos) {
    RouterConfig cfg = RouterConfig.builder().initialPrefillNanosPerToken(PREFILL)
        .forwardOverhead(Duration.ofNanos(OVERHEAD)).coldPlacementSlack(slack).build();
    ScriptedView v = new ScriptedView().peer("p", rttNanos);
    RoutePlanner planner = new RoutePlanner(cfg, "me", matching(0), new BlockChain(HASHER), v,
        new CostModel(PREFILL), new PeerHealth(), () -> 0L, () -> EngineLoad.IDLE);
    RouteDecision d = planner.decide(PROMPT);
    long local = PREFILL * TOKENS;
    long peer = rttNanos + OVERHEAD + PREFILL * TOKENS;
    assertEquals(local, d.candidates().get(0).costNanos(), 1, d::toString);
    assertEquals(peer, d.candidates().get(1).costNanos(), 1, d::toString);
    // a nanosecond either way of the bound is left to the arithmetic's rounding
    double bound = local * (1.0 + slack);
    if (Math.abs(peer - bound) <= 2) {
      return;
    }
    if (peer < bound) {
      assertEquals(Reason.COLD_PLACEMENT, d.reason(), d::toString);
      assertEquals("p", d.targetNodeId(), d::toString);
    } else {
      // too slow: the cost decides, and the peer costs more than local
      assertEquals(Reason.LOCAL_CHEAPEST, d.reason(), d::toString);
    }
  }
}
