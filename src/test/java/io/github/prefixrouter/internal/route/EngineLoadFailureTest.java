package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.GossipingPair.skipOf;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.testing.LoggedLines.logged;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouteDecision.SkipReason;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * An engine whose {@code load()} fails (throws, or returns null) does not switch push-back off:
 * the node reads the last good reading, its queue raised to the runs the node has outstanding on
 * the engine beyond the ones that reading had running, in its refusal of forwarded work, its
 * routing and its gossip alike, and counts every failure. Before, such a reading was taken for
 * an idle engine: the node took on every forward and advertised no overload.
 */
class EngineLoadFailureTest {

  private static final long SECOND = 1_000_000_000L;
  private static final int HIGH = 4;

  /** An engine whose load() throws while {@link #broken} is set. */
  static final class BrokenLoad extends ForwardingEngine {
    volatile boolean broken;
    volatile boolean returnsNull;

    BrokenLoad(SimulatedEngine engine) {
      super(engine);
    }

    @Override
    public EngineLoad load() {
      if (returnsNull) {
        return null;
      }
      if (broken) {
        throw new IllegalStateException("metrics endpoint down");
      }
      return super.load();
    }
  }

  /**
   * One node, "s", serving FORWARDs from "o" (its {@link ServingHarness}) on an engine that runs
   * one request at a time, its load() broken as the test says through {@link #wrapped}.
   */
  private static final class Serving {
    BrokenLoad wrapped;
    final ServingHarness harness = new ServingHarness(
        RouterConfig.builder().watermarks(0, HIGH).build(), b -> b.slots(1),
        e -> wrapped = new BrokenLoad(e));
    final SimulatedScheduler sim = harness.sim;
    final SimulatedEngine engine = harness.engine;
    final RouterNode node = harness.node;

    CompletableFuture<byte[]> forward(InferenceRequest r) {
      return harness.forward("o", r);
    }
  }

  private static InferenceRequest generating(String id, long seed) {
    return new InferenceRequest(id, prompt(seed, 64), GenerationParams.greedy(20));
  }

  private static boolean busy(CompletableFuture<byte[]> f) {
    return f.isDone() && ServingHarness.decode(f) instanceof ForwardCodec.Busy;
  }

  /** Sends 10 forwards at once to a node whose engine runs one at a time: which were refused. */
  private static List<Boolean> tenForwards(Serving s, List<CompletableFuture<byte[]>> answers) {
    List<Boolean> refused = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      CompletableFuture<byte[]> f = s.forward(generating("r" + i, i));
      answers.add(f);
      refused.add(busy(f));
    }
    return refused;
  }

  @Test
  void aLoadThatHasNeverAnsweredStillRefusesForwardsAtTheHighWatermark() {
    Serving working = new Serving();
    List<Boolean> expected = tenForwards(working, new ArrayList<>());
    assertEquals(List.of(false, false, false, false, true, true, true, true, true, true),
        expected, "with a working load() the 5th forward finds 4 queued");

    Serving s = new Serving();
    s.wrapped.broken = true;
    List<CompletableFuture<byte[]>> answers = new ArrayList<>();
    List<Boolean> refused = tenForwards(s, answers);
    assertEquals(expected, refused, "with load() throwing from the start the node took on "
        + refused.stream().filter(b -> !b).count() + " of 10 forwards (highWatermark " + HIGH
        + ")");
    assertEquals(6, s.node.stats().refusedForPeers());

    // every one taken on is answered once, by its run
    s.sim.advanceBy(10 * SECOND);
    for (int i = 0; i < 4; i++) {
      ForwardCodec.Message m = ServingHarness.decode(answers.get(i));
      assertInstanceOf(ForwardCodec.Result.class, m, "r" + i + ": " + m);
      assertArrayEquals(OracleCluster.expected(generating("r" + i, i)),
          ((ForwardCodec.Result) m).result().outputTokens());
    }
    assertEquals(4, s.engine.stats().requests(), "a request ran twice, or one refused ran");
    assertEquals(0, s.node.stats().inFlight());
    long failures = s.node.engineStallStats().orElseThrow().loadFailures();
    assertTrue(failures >= 10, "load() failures counted: " + failures);

    // once runs end, the node's estimate comes down with them and it takes forwards again
    assertTrue(!busy(s.forward(generating("later", 11))), "refused with nothing outstanding");
  }

  @Test
  void aLoadThatFailsAfterAGoodReadingKeepsIt() {
    Serving s = new Serving();
    // the engine's queue filled by its other clients, past the high watermark
    for (int i = 0; i < HIGH + 2; i++) {
      s.engine.execute(generating("other" + i, 100 + i));
    }
    assertTrue(busy(s.forward(generating("seen", 1))), "refused with a full queue");
    s.wrapped.broken = true;
    CompletableFuture<byte[]> whileThrowing = s.forward(generating("throwing", 2));
    assertTrue(busy(whileThrowing), "a load() that throws is taken for an idle engine: "
        + (whileThrowing.isDone() ? ServingHarness.decode(whileThrowing) : "taken on"));
    s.wrapped.broken = false;
    s.wrapped.returnsNull = true;
    assertTrue(busy(s.forward(generating("null", 3))), "a load() of null is taken for idle");
    assertEquals(3, s.node.stats().refusedForPeers());
    assertEquals(2, s.node.engineStallStats().orElseThrow().loadFailures());

    s.wrapped.returnsNull = false;
    s.sim.advanceBy(10 * SECOND); // the other clients' requests ended
    assertTrue(!busy(s.forward(generating("again", 4))), "a good reading is read again");
    assertEquals(2, s.node.engineStallStats().orElseThrow().loadFailures());
  }

  @Test
  void theFirstFailureIsLoggedAtErrorAndLaterOnesAtPowersOfTwo() {
    Serving s = new Serving();
    s.wrapped.broken = true;
    List<String> lines = logged("load()", () -> {
      for (int i = 0; i < 100; i++) {
        s.node.engineLoad();
      }
    });
    assertEquals(100, s.node.engineStallStats().orElseThrow().loadFailures());
    // 1 at ERROR (with its stack trace), then 2, 4, 8, 16, 32, 64 at WARN
    assertEquals(7, lines.size(), String.join("\n", lines));
    assertTrue(lines.get(0).contains("ERROR") && lines.get(0).contains("node s"), lines.get(0));
    assertTrue(lines.get(6).contains("WARN") && lines.get(6).contains("failed 64 times"),
        lines.get(6));
  }

  @Test
  void aNodeWhoseLoadFailsGoesOnAdvertisingItsLastGoodQueue() {
    SimulatedScheduler sim = new SimulatedScheduler();
    SimulatedEngine engine = OracleCluster.engineDefaults(sim).slots(1).build();
    BrokenLoad wrapped = new BrokenLoad(engine);
    RouterConfig config = RouterConfig.builder().policy(RoutingPolicy.COST_AWARE)
        .watermarks(0, HIGH).build();
    Map<String, PrefixRouterNode> nodes = GossipingPair.start(sim, config, wrapped);
    sim.advanceBy(2 * SECOND);
    InferenceRequest probe = OracleCluster.request("probe", prompt(9, 200));
    assertEquals(SkipReason.NONE, skipOf("a", nodes.get("b").explain(probe)));

    for (int i = 0; i < HIGH + 20; i++) { // a's engine busy for its other clients
      engine.execute(generating("other" + i, 100 + i));
    }
    sim.advanceBy(SECOND);
    assertEquals(SkipReason.OVERLOADED, skipOf("a", nodes.get("b").explain(probe)));
    wrapped.broken = true;
    sim.advanceBy(2 * SECOND);
    assertEquals(SkipReason.OVERLOADED, skipOf("a", nodes.get("b").explain(probe)),
        "a advertises an idle engine once its load() throws");
    nodes.values().forEach(PrefixRouterNode::stop);
  }
}
