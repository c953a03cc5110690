package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.RoutePlannerTest.HASHER;
import static io.github.prefixrouter.internal.route.RoutePlannerTest.MS;
import static io.github.prefixrouter.internal.route.RoutePlannerTest.matching;
import static io.github.prefixrouter.internal.route.RoutePlannerTest.tokens;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouteDecision.Reason;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.route.RoutePlannerTest.ScriptedView;
import io.github.prefixrouter.spi.EngineLoad;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * The queue term of the routing cost on engines that run many requests at once (continuous
 * batching): a queue drains through every running slot, so it costs {@code queue × service /
 * max(1, inFlight)}, and one-slot engines are priced exactly as before.
 */
class SlotPricingTest {

  /** 0.1 ms a prompt token; the service time before any result is 256 of them: 25.6 ms. */
  static final RouterConfig CFG = RouterConfig.builder().initialPrefillNanosPerToken(100_000)
      .coldPlacement(false).localCaching(false).build();
  static final double SERVICE = 256 * 100_000.0;
  static final double PREFILL = 100_000.0;

  static RoutePlanner planner(RouterConfig cfg, ScriptedView v, int localMatch, EngineLoad load,
      PeerHealth health, boolean previousPricing) {
    CostModel cost = new CostModel(cfg.initialPrefillNanosPerToken());
    if (previousPricing) {
      cost.usePreviousPricing(true, true);
    }
    return new RoutePlanner(cfg, "me", matching(localMatch), new BlockChain(HASHER), v, cost,
        health, () -> 0L, () -> load, true);
  }

  @Test
  void aLocalQueueOnAManySlotEngineCostsAFractionOfAServiceTimePerRequest() {
    // 10 waiting while 256 run: slots free up 256 at a time per service time, so the wait is
    // 10/256 of 25.6 ms = 1 ms, below the 2.2 ms trip to an idle peer holding the same prefix;
    // a full service time per waiting request (256 ms) sent the request away
    int[] t = tokens(1, 640);
    ScriptedView v = new ScriptedView().peer("idle", 2 * MS).holds("idle", t, 640);
    RouteDecision d = planner(CFG, v, 640, new EngineLoad(10, 256), new PeerHealth(), false)
        .decide(t);
    assertEquals(1 * MS, d.candidates().get(0).costNanos(), d.toString());
    assertEquals(Reason.LOCAL_CHEAPEST, d.reason(), d.toString());

    RouteDecision before = planner(CFG, v, 640, new EngineLoad(10, 256), new PeerHealth(), true)
        .decide(t);
    assertEquals(256 * MS, before.candidates().get(0).costNanos(), before.toString());
    assertEquals(Reason.PEER_CHEAPER, before.reason(), before.toString());
  }

  @Test
  void aPeersQueueDrainsThroughTheSlotsItAdvertisesRunning() {
    // both peers hold the whole prompt; "batched" has 10 waiting while it runs 64 (and this
    // node has 6 outstanding there), "single" one waiting behind its one slot
    int[] t = tokens(2, 640);
    ScriptedView v = new ScriptedView().peer("batched", 2 * MS).peer("single", 2 * MS)
        .holds("batched", t, 640).holds("single", t, 640);
    v.queue.put("batched", 10);
    v.inFlight.put("batched", 64);
    v.queue.put("single", 1);
    v.inFlight.put("single", 1);
    PeerHealth health = new PeerHealth();
    for (int i = 0; i < 6; i++) {
      health.get("batched").forwarded();
    }
    RouteDecision d = planner(CFG, v, 0, EngineLoad.IDLE, health, false).decide(t);
    // 2 ms + 0.2 ms + 16 × 25.6 ms / 64
    assertEquals(2_200_000L + (long) (16 * SERVICE / 64), d.candidates().get(1).costNanos(),
        d.toString());
    assertEquals(2_200_000L + (long) SERVICE, d.candidates().get(2).costNanos(), d.toString());
    assertEquals("batched", d.targetNodeId(), d.toString());

    RouteDecision before = planner(CFG, v, 0, EngineLoad.IDLE, health, true).decide(t);
    assertEquals(2_200_000L + (long) (16 * SERVICE), before.candidates().get(1).costNanos());
    assertEquals("single", before.targetNodeId(), before.toString());
  }

  @Test
  void aPeerAdvertisingAHugeRunningCountDoesNotMakeItsQueueFree() {
    // "liar" advertises 2^31 - 1 running (a bug, a stale or forged figure) with 1,000 really
    // waiting: divided by its claim, the queue cost 12 us and drew the request from "honest",
    // which has 10 waiting behind 64 slots; no engine runs more than 4,096 at once
    int[] t = tokens(4, 640);
    ScriptedView v = new ScriptedView().peer("liar", 2 * MS).peer("honest", 2 * MS)
        .holds("liar", t, 640).holds("honest", t, 640);
    v.queue.put("liar", 1_000);
    v.inFlight.put("liar", Integer.MAX_VALUE);
    v.queue.put("honest", 10);
    v.inFlight.put("honest", 64);
    RouteDecision d = planner(CFG, v, 0, EngineLoad.IDLE, new PeerHealth(), false).decide(t);
    // 2 ms + 0.2 ms + 1,000 × 25.6 ms / 4,096
    assertEquals(2_200_000L + (long) (1_000 * SERVICE / 4_096),
        d.candidates().get(1).costNanos(), d.toString());
    assertEquals("honest", d.targetNodeId(), d.toString());
    // the local engine's figure is bounded alike
    RouteDecision local = planner(CFG, new ScriptedView(), 640,
        new EngineLoad(1_000, Integer.MAX_VALUE), new PeerHealth(), false).decide(t);
    assertEquals((long) (1_000 * SERVICE / 4_096), local.candidates().get(0).costNanos(),
        local.toString());
  }

  /**
   * Reference model of the local cost: {@code queue × service / max(1, running) + prefill ×
   * uncached}; one running request (or none) gives the formula before slots were counted, and
   * so does the previous pricing for any number running.
   */
  @Property(tries = 300)
  void theLocalCostFollowsTheReferenceFormula(@ForAll @IntRange(min = 0, max = 64) int queue,
      @ForAll @IntRange(min = 0, max = 300) int running,
      @ForAll @IntRange(min = 0, max = 640) int localMatch) {
    int[] t = tokens(3, 640);
    EngineLoad load = new EngineLoad(queue, running);
    long now = planner(CFG, new ScriptedView(), localMatch, load, new PeerHealth(), false)
        .decide(t).candidates().get(0).costNanos();
    long before = planner(CFG, new ScriptedView(), localMatch, load, new PeerHealth(), true)
        .decide(t).candidates().get(0).costNanos();
    long oldFormula = (long) (queue * SERVICE + PREFILL * (640 - localMatch));
    assertEquals((long) (queue * SERVICE / Math.max(1, running) + PREFILL * (640 - localMatch)),
        now);
    assertEquals(oldFormula, before);
    if (running <= 1) {
      assertEquals(oldFormula, now);
    }
  }

  @Test
  void theRestOfABoughtMissIsSpreadOverTheRunningSlots() {
    // as RoutePlannerTest.theRestOfABoughtMissIsChargedToTheLocalEngine, 1 ms a token: the
    // 320 ms miss is bought on an idle engine; while it runs with 3 others, what is left of it
    // holds a new request up for a quarter of its time
    RouterConfig cfg = RouterConfig.builder().initialPrefillNanosPerToken(MS).build();
    int[] t = tokens(5, 320);
    ScriptedView v = new ScriptedView().peer("holder", 200 * MS).holds("holder", t, 320);
    AtomicLong now = new AtomicLong();
    AtomicReference<EngineLoad> load = new AtomicReference<>(EngineLoad.IDLE);
    RoutePlanner p = RoutePlannerTest.plannerWith(cfg, v, now, load);
    RouteDecision bought = null;
    for (int i = 0; i < 6 && (bought == null || bought.reason() != Reason.LOCAL_CACHING); i++) {
      bought = p.decide(t, 0, null, 0, new PeerSet[1]);
    }
    assertEquals(Reason.LOCAL_CACHING, bought.reason(), bought.toString());
    load.set(new EngineLoad(0, 4));
    RouteDecision during = p.decide(t);
    assertEquals(320 * MS + 80 * MS, during.candidates().get(0).costNanos(), during.toString());
    now.set(200 * MS);
    assertEquals(320 * MS + 30 * MS, p.decide(t).candidates().get(0).costNanos());
  }
}
