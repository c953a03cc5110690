package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.contract.ThrowingCacheEventListener;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;

/**
 * A host's {@link Clock} that throws on some of its readings (a bug of the host's, a simulated
 * clock shut down) loses no answer: every request submitted to a node, forwarded to it by a
 * node or sent to it by a peer, is answered exactly once, with its output, and the nodes go on
 * serving.
 */
class ThrowingClockProperties {

  static final int[] PREFIX = prompt(42, 480);

  /** What a host's clock throws. */
  enum Kind {
    RUNTIME_EXCEPTION,
    ERROR,
    CHECKED_EXCEPTION;

    RuntimeException thrown(String m) {
      return switch (this) {
        case RUNTIME_EXCEPTION -> new ArithmeticException(m);
        case ERROR -> ThrowingCacheEventListener.undeclared(new AnswerNeverLostTest.SpiError(m));
        case CHECKED_EXCEPTION -> AnswerNeverLostTest.checked(m);
      };
    }
  }

  /**
   * A node's clock that, once armed, throws on every {@code every}-th reading (from the
   * {@code phase}-th); the simulation runs on one thread.
   */
  static final class ThrowingClock implements Clock {
    final Clock clock;
    final int every;
    final int phase;
    final Kind kind;
    boolean armed;
    long reads;
    long thrown;

    ThrowingClock(Clock clock, int every, int phase, Kind kind) {
      this.clock = clock;
      this.every = every;
      this.phase = phase;
      this.kind = kind;
    }

    @Override
    public long nanoTime() {
      if (armed && reads++ % every == phase) {
        thrown++;
        throw kind.thrown("clock read " + reads);
      }
      return clock.nanoTime();
    }
  }

  /**
   * Two nodes whose clocks throw on every {@code every}-th reading once started: requests
   * submitted to n0 (run there, or forwarded to n1, which holds their prefix; some streamed)
   * and requests a peer sends n1 are each answered once, with their output; each reading that
   * threw is counted; and both nodes still serve, their clocks throwing or not.
   */
  @Property
  void everyRequestIsAnsweredOnceWhateverReadingsOfTheClockThrow(
      @ForAll @IntRange(min = 1, max = 7) int every,
      @ForAll @IntRange(min = 0, max = 6) int phase,
      @ForAll Kind kind,
      @ForAll @LongRange(min = 1, max = 1_000_000) long seed) throws Exception {
    List<ThrowingClock> clocks = new ArrayList<>();
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    hooks.clockWrap = sim -> {
      ThrowingClock c = new ThrowingClock(sim, every, phase % every, kind);
      clocks.add(c);
      return c;
    };
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false)
        .streamInterval(Duration.ZERO).build();
    OracleCluster c = new OracleCluster(2, cfg, seed, hooks).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    Transport x = c.net.transport("x"); // a peer the nodes do not route to
    x.start((from, p) -> CompletableFuture.completedFuture(new byte[0]));
    clocks.forEach(k -> k.armed = true);

    SplittableRandom r = new SplittableRandom(seed);
    ExactlyOnceLedger ledger = new ExactlyOnceLedger();
    List<StreamRecorder> listeners = new ArrayList<>();
    List<InferenceRequest> fromPeer = new ArrayList<>();
    List<CompletableFuture<byte[]>> peerAnswers = new ArrayList<>();
    for (int i = 0; i < 12; i++) {
      // n1 holds PREFIX: n0 forwards those to it, and runs the others itself
      int[] tail = prompt(seed * 31 + i, 8 + r.nextInt(40));
      int[] tokens = r.nextBoolean() ? concat(PREFIX, tail) : concat(prompt(seed + i, 64), tail);
      InferenceRequest q = new InferenceRequest("q" + i, tokens,
          GenerationParams.greedy(1 + r.nextInt(12)));
      if (i % 4 == 3) {
        fromPeer.add(q);
        peerAnswers.add(x.request(InMemoryNetwork.addressOf("n1"),
            ForwardCodec.forward(q, "x", 1, false, 0L, cfg.modelId()), Duration.ofSeconds(30)));
      } else if (r.nextBoolean()) {
        StreamRecorder rec = new StreamRecorder(expected(q), c.sim::nanoTime);
        listeners.add(rec);
        rec.future = ledger.track(q, c.node("n0").submit(q, rec));
      } else {
        ledger.track(q, c.node("n0").submit(q));
      }
      c.sim.advanceBy(r.nextLong(Duration.ofMillis(6).toNanos()));
    }
    // within the forwarding timeout and far within engineTimeout: an answer lost is not found
    // again by a guard timer
    c.sim.advanceBy(Duration.ofSeconds(20).toNanos());

    long thrown = clocks.stream().mapToLong(k -> k.thrown).sum();
    assertTrue(thrown > 0, "no reading of the clocks threw");
    ledger.assertEachCompletedOnce((i, resp) -> { },
        (i, cause) -> fail("request " + i + " failed, its engine and network sound, after "
            + thrown + " readings of the clocks threw: " + cause));
    for (StreamRecorder rec : listeners) {
      assertTrue(rec.clean(), rec.toString());
    }
    for (int i = 0; i < fromPeer.size(); i++) {
      CompletableFuture<byte[]> a = peerAnswers.get(i);
      String id = fromPeer.get(i).id();
      assertTrue(a.isDone(), "the peer's request " + id + " was never answered");
      assertTrue(!a.isCompletedExceptionally(), "the peer's request " + id
          + " got no answer from the node but a failure: " + a.handle((b, t) -> t).join());
      ForwardCodec.Message m = ForwardCodec.decode(a.join());
      assertTrue(m instanceof ForwardCodec.Result, "the peer's request " + id + ": " + m);
      assertArrayEquals(expected(fromPeer.get(i)),
          ((ForwardCodec.Result) m).result().outputTokens());
    }

    // the nodes go on serving, their clocks still throwing, and once they no longer do
    for (boolean armed : new boolean[] {true, false}) {
      clocks.forEach(k -> k.armed = armed);
      for (String at : List.of("n0", "n1")) {
        InferenceRequest q = new InferenceRequest("after-" + at + "-" + armed,
            concat(PREFIX, prompt(seed - 7, 20)), GenerationParams.greedy(4));
        CompletableFuture<InferenceResponse> f = c.node(at).submit(q);
        c.sim.advanceBy(Duration.ofSeconds(5).toNanos());
        assertTrue(f.isDone(), at + " no longer answers (clock " + (armed ? "throwing" : "sound")
            + ")");
        assertArrayEquals(expected(q), f.join().result().outputTokens());
      }
    }
    for (int i = 0; i < clocks.size(); i++) {
      RouterNode n = c.node("n" + i);
      assertEquals(clocks.get(i).thrown, n.clockFailures(),
          n.nodeId() + ": the readings that threw, as the node counted them");
    }
    for (RouterNode n : c.nodes.values()) {
      assertEquals(0, n.stats().inFlight(), n.nodeId() + " holds requests in flight");
      assertTrue(n.stop().isDone(), n.nodeId() + " does not stop");
      assertEquals(PrefixRouterNode.State.STOPPED, n.state());
    }
  }

  /**
   * Two nodes built as a host builds them (their own tree, gossip and planner), whose clocks
   * throw on some readings once started: every request is answered with its output, and once
   * the clocks read again, each node's replica of the other holds what the other publishes.
   */
  @Property(tries = 40)
  void gossipingNodesServeAndConvergeWhateverReadingsOfTheClockThrow(
      @ForAll @IntRange(min = 1, max = 5) int every,
      @ForAll Kind kind,
      @ForAll @LongRange(min = 1, max = 1_000_000) long seed) {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, seed);
    net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(1)));
    Map<String, ThrowingClock> clocks = new LinkedHashMap<>();
    Map<String, PrefixRouterNode> nodes = new LinkedHashMap<>();
    for (String id : List.of("a", "b")) {
      ThrowingClock clock = new ThrowingClock(sim, every, 0, kind);
      clocks.put(id, clock);
      nodes.put(id, PrefixRouterNode.builder().nodeId(id).transport(net.transport(id))
          .engine(OracleCluster.engineDefaults(sim).publishesCacheEvents(true).build())
          .clock(clock).scheduler(sim).random(new SplittableRandom(seed + id.hashCode()))
          .seeds(List.of(InMemoryNetwork.addressOf("a"))).build());
    }
    nodes.values().forEach(PrefixRouterNode::start);
    sim.advanceBy(Duration.ofSeconds(2).toNanos());
    clocks.values().forEach(k -> k.armed = true);

    SplittableRandom r = new SplittableRandom(seed);
    ExactlyOnceLedger ledger = new ExactlyOnceLedger();
    for (int i = 0; i < 16; i++) {
      InferenceRequest q = new InferenceRequest("q" + i, concat(prompt(seed + i % 3, 96),
          prompt(seed * 31 + i, 8 + r.nextInt(40))), GenerationParams.greedy(1 + r.nextInt(8)));
      ledger.track(q, nodes.get(i % 2 == 0 ? "a" : "b").submit(q));
      sim.advanceBy(r.nextLong(Duration.ofMillis(400).toNanos()));
    }
    sim.advanceBy(Duration.ofSeconds(20).toNanos());
    long thrown = clocks.values().stream().mapToLong(k -> k.thrown).sum();
    assertTrue(thrown > 0, "no reading of the clocks threw");
    ledger.assertEachCompletedOnce((i, resp) -> { },
        (i, cause) -> fail("request " + i + " failed, its engine and network sound, after "
            + thrown + " readings of the clocks threw: " + cause));

    clocks.values().forEach(k -> k.armed = false);
    sim.advanceBy(Duration.ofSeconds(20).toNanos());
    for (String id : nodes.keySet()) {
      String other = id.equals("a") ? "b" : "a";
      assertArrayEquals(NodeProbe.gossipOf(nodes.get(other)).ownBlocks(),
          NodeProbe.gossipOf(nodes.get(id)).replicaOf(other),
          id + "'s replica of " + other + " after its clock threw " + clocks.get(id).thrown
              + " times");
      assertEquals(0, nodes.get(id).stats().inFlight(), id + " holds requests in flight");
    }
    for (PrefixRouterNode n : nodes.values()) {
      n.stop();
    }
    sim.runUntilIdle(100_000);
    for (PrefixRouterNode n : nodes.values()) {
      assertEquals(PrefixRouterNode.State.STOPPED, n.state(), n.nodeId() + " did not stop");
    }
  }
}
