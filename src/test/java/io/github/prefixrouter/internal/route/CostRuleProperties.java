package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.RoutePlannerTest.HASHER;
import static io.github.prefixrouter.internal.route.RoutePlannerTest.matching;
import static io.github.prefixrouter.internal.route.RoutePlannerTest.tokens;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouteDecision.Reason;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.route.RoutePlannerTest.ScriptedView;
import io.github.prefixrouter.spi.EngineLoad;
import java.time.Duration;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/**
 * "Forwarding never makes latency worse than local execution": the cost-aware decision against
 * a model of its cost rule written here, over link delays from none to hours, prompts from
 * shorter than a block to many blocks, prefill speeds from 1 ns to 1 ms a token, queues on
 * engines of one or many slots, and peers holding any part of the prompt.
 *
 * <p>The model (docs/routing.md, "The decision"), in exact integer arithmetic, with the prefill
 * {@code p} per token, the service time {@code 256 p} before any result, and no staleness or
 * accuracy discount: {@code cost(local) = ⌊q × 256p / S⌋ + p × (n − localMatch)}, {@code
 * cost(peer) = rtt + overhead + ⌊q × 256p / S⌋ + p × (n − match)}, where {@code S = max(1,
 * min(s, 4096))} for {@code s} running and {@code match} is the peer's whole blocks of the
 * prompt. A peer wins only by the margin
 * {@code max(ratio × cost(local), min)}; a cold prompt (nobody holds a block) may go to its
 * rendezvous node when that is at most {@code coldPlacementSlack} slower than local.
 */
class CostRuleProperties {

  static final int BLOCK = 16;

  record Peer(long rttNanos, int heldTokens, int queue, int slots) {}

  record Setup(int promptTokens, long prefillNanos, long overheadNanos, double marginRatio,
      long marginMinNanos, int localMatch, int localQueue, int localSlots, List<Peer> peers) {}

  @Provide
  Arbitrary<Long> rtts() {
    // none, LAN, WAN, a satellite hop, an hour: gossip measures whatever the link is
    return Arbitraries.oneOf(
        Arbitraries.of(0L, 1_000L, 200_000_000L, 1_000_000_000L, 3_600_000_000_000L),
        Arbitraries.longs().between(0, 2_000_000_000L));
  }

  @Provide
  Arbitrary<Setup> setups() {
    Arbitrary<Integer> n = Arbitraries.oneOf(
        Arbitraries.of(1, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK),
        Arbitraries.integers().between(1, 2_048));
    Arbitrary<Long> prefill = Arbitraries.oneOf(Arbitraries.of(1L, 1_000_000L),
        Arbitraries.longs().between(1, 1_000_000));
    Arbitrary<Long> overhead = Arbitraries.longs().between(0, 50_000_000L);
    Arbitrary<Double> ratio = Arbitraries.of(0.0, 0.05, 0.2, 0.5);
    Arbitrary<Long> marginMin = Arbitraries.of(0L, 500_000L, 10_000_000L);
    Arbitrary<Integer> queue = Arbitraries.oneOf(Arbitraries.of(0),
        Arbitraries.integers().between(0, 40));
    Arbitrary<Integer> slots = Arbitraries.of(0, 1, 2, 8, 256, 4096, 5000, Integer.MAX_VALUE);
    Arbitrary<Double> held = Arbitraries.doubles().between(0, 1);
    Arbitrary<List<PeerSpec>> peers = Combinators.combine(rtts(), held, queue, slots)
        .as(PeerSpec::new).list().ofMinSize(1).ofMaxSize(4);
    // the peers combined with the local side, not flat-mapped onto it: a flatMap made jqwik
    // build a new arbitrary and its edge cases for every setup drawn
    Arbitrary<Setup> local = Combinators.combine(n, prefill, overhead, ratio, marginMin, held,
            queue, slots)
        .as((tokens, p, o, r, m, lm, lq, ls) -> new Setup(tokens, p, o, r, m,
            (int) (lm * tokens), lq, ls, List.of()));
    return Combinators.combine(local, peers).as((s, specs) -> new Setup(s.promptTokens(),
        s.prefillNanos(), s.overheadNanos(), s.marginRatio(), s.marginMinNanos(), s.localMatch(),
        s.localQueue(), s.localSlots(), specs.stream()
            .map(p -> new Peer(p.rttNanos(), (int) (p.heldShare() * s.promptTokens()),
                p.queue(), p.slots()))
            .toList()));
  }

  /** A peer before the prompt's length is known: the share of the prompt it holds. */
  record PeerSpec(long rttNanos, double heldShare, int queue, int slots) {}

  static long queueTerm(int queue, int slots, long prefill) {
    return queue * 256L * prefill / Math.max(1, Math.min(slots, 4096));
  }

  static long modelLocal(Setup s) {
    return queueTerm(s.localQueue(), s.localSlots(), s.prefillNanos())
        + s.prefillNanos() * (s.promptTokens() - s.localMatch());
  }

  static int modelMatch(Setup s, Peer p) {
    return p.heldTokens() / BLOCK * BLOCK;
  }

  static long modelPeer(Setup s, Peer p) {
    return p.rttNanos() + s.overheadNanos() + queueTerm(p.queue(), p.slots(), s.prefillNanos())
        + s.prefillNanos() * (s.promptTokens() - modelMatch(s, p));
  }

  static RouteDecision decide(Setup s, boolean coldPlacement, boolean localCaching) {
    RouterConfig cfg = RouterConfig.builder()
        .initialPrefillNanosPerToken(s.prefillNanos())
        .forwardOverhead(Duration.ofNanos(s.overheadNanos()))
        .forwardMargin(s.marginRatio(), Duration.ofNanos(s.marginMinNanos()))
        .coldPlacement(coldPlacement).localCaching(localCaching).build();
    int[] t = tokens(s.promptTokens() * 31L + s.peers().size(), s.promptTokens());
    ScriptedView v = new ScriptedView();
    for (int i = 0; i < s.peers().size(); i++) {
      Peer p = s.peers().get(i);
      String id = "p" + i;
      v.peer(id, p.rttNanos()).holds(id, t, p.heldTokens());
      v.queue.put(id, p.queue());
      v.inFlight.put(id, p.slots());
    }
    EngineLoad load = new EngineLoad(s.localQueue(), s.localSlots());
    RoutePlanner planner = new RoutePlanner(cfg, "me", matching(s.localMatch()),
        new BlockChain(HASHER), v, new CostModel(cfg.initialPrefillNanosPerToken()),
        new PeerHealth(), () -> 0L, () -> load, true);
    // a routing attempt (not explain), so local caching counts and reserves as in service
    return planner.decide(t, 0, null, 0, new PeerSet[1]);
  }

  /** Rounding of the planner's double arithmetic: a nanosecond or two either way. */
  static final long SLACK = 2;

  /**
   * How near a comparison may be to its boundary and still be left undecided: both costs and
   * the margin (a share of the local cost) round by up to a nanosecond each.
   */
  static final long BOUNDARY = 4;

  @Property(tries = 400)
  void everyCostIsTheModelsAndAForwardIsNeverSlowerThanLocal(
      @ForAll("setups") Setup s, @ForAll boolean coldPlacement, @ForAll boolean localCaching) {
    RouteDecision d = decide(s, coldPlacement, localCaching);
    long local = modelLocal(s);
    List<RouteDecision.Candidate> c = d.candidates();
    assertEquals(local, c.get(0).costNanos(), SLACK, () -> "local cost: " + d);
    boolean anyMatch = s.localMatch() > 0;
    for (int i = 0; i < s.peers().size(); i++) {
      Peer p = s.peers().get(i);
      long want = modelPeer(s, p);
      assertEquals(modelMatch(s, p), c.get(i + 1).matchedTokens(), () -> "match: " + d);
      assertEquals(want, c.get(i + 1).costNanos(), SLACK, () -> "peer cost: " + d);
      anyMatch |= modelMatch(s, p) > 0;
    }
    long margin = Math.max((long) (s.marginRatio() * local), s.marginMinNanos());
    if (d.isLocal()) {
      return;
    }
    long target = modelPeer(s, s.peers().get(c.indexOf(d.target()) - 1));
    if (d.reason() == Reason.PEER_CHEAPER) {
      assertTrue(target < local - margin + BOUNDARY,
          () -> "forwarded to a peer that does not beat local by the margin: " + d);
    } else if (d.reason() == Reason.COLD_PLACEMENT) {
      assertTrue(coldPlacement && !anyMatch && s.promptTokens() >= BLOCK, d::toString);
      assertTrue(target <= local * 1.25 + BOUNDARY,
          () -> "cold placement beyond its slack: " + d);
    } else {
      fail("forwarded for " + d.reason() + ": " + d);
    }
  }

  @Property(tries = 400)
  void aPeerThatBeatsLocalByTheMarginGetsTheRequest(@ForAll("setups") Setup s) {
    // without local caching and cold placement, the decision is the cost rule alone
    RouteDecision d = decide(s, false, false);
    long local = modelLocal(s);
    long margin = Math.max((long) (s.marginRatio() * local), s.marginMinNanos());
    long best = Long.MAX_VALUE;
    for (Peer p : s.peers()) {
      best = Math.min(best, modelPeer(s, p));
    }
    if (best < local - margin - BOUNDARY) {
      assertEquals(Reason.PEER_CHEAPER, d.reason(), d::toString);
      long target = modelPeer(s, s.peers().get(d.candidates().indexOf(d.target()) - 1));
      assertEquals(best, target, SLACK, () -> "not the cheapest peer: " + d);
    } else if (best > local - margin + BOUNDARY) {
      assertTrue(d.isLocal(), d::toString);
    }
  }

  @Property(tries = 400)
  void whenTheRoundTripExceedsWhatAForwardCanSaveTheRequestStaysLocal(
      @ForAll("setups") Setup s, @ForAll boolean localCaching,
      @ForAll @IntRange(min = 0, max = 3) int extraHours) {
    // every link costs more than the whole local estimate (queue and all of the prefill): no
    // peer can save it, whatever it holds, on the default margins
    long local = modelLocal(s);
    Setup slow = new Setup(s.promptTokens(), s.prefillNanos(), s.overheadNanos(), s.marginRatio(),
        s.marginMinNanos(), s.localMatch(), s.localQueue(), s.localSlots(), s.peers().stream()
            .map(p -> new Peer(Math.max(p.rttNanos(), local + extraHours * 3_600_000_000_000L),
                p.heldTokens(), p.queue(), p.slots()))
            .toList());
    boolean anyMatch = s.localMatch() > 0
        || slow.peers().stream().anyMatch(p -> modelMatch(slow, p) > 0);
    RouteDecision d = decide(slow, true, localCaching);
    if (anyMatch) {
      assertTrue(d.isLocal(), d::toString);
    } else if (!d.isLocal()) {
      // a cold prompt may go to its rendezvous node, at most the slack slower than local
      assertEquals(Reason.COLD_PLACEMENT, d.reason(), d::toString);
      assertTrue(d.target().costNanos() <= local * 1.25 + BOUNDARY, d::toString);
    }
  }
}
