package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.GossipingPair.skipOf;
import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.OracleCluster.request;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouteDecision.Reason;
import io.github.prefixrouter.RouteDecision.SkipReason;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.EngineTimeoutException;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A node whose own engine stops answering (a hung server) routes its clients' requests around
 * it, refuses its peers' forwards, and goes back to it once it answers again; in simulated time,
 * with the engine's stall timeout of 5 s.
 */
class EngineStallTest {

  static final Duration STALL = Duration.ofSeconds(5);
  static final long SECOND = 1_000_000_000L;

  /**
   * Wraps an engine that can be made to hang: while {@link #hang} is set it takes requests and
   * answers none (their load shows as running, as a hung server's does through the HTTP
   * adapter), until {@link #release()} runs them; a cancel fails a held request, as the adapter
   * closing its connection does.
   */
  static final class Hanging extends CountingEngine {
    boolean hang;
    /** False: the engine streams nothing, as one that implements only execute(request). */
    boolean streams = true;
    /** True: the held requests show as waiting for a slot, as a hung server's full queue. */
    boolean heldQueued;
    OutputListener lastListener;
    private final Map<String, CompletableFuture<EngineResult>> held = new LinkedHashMap<>();
    private final List<Runnable> resume = new ArrayList<>();

    Hanging(InferenceEngine delegate) {
      super(delegate);
    }

    @Override
    CompletableFuture<EngineResult> run(InferenceRequest r, OutputListener given) {
      lastListener = given;
      OutputListener l = streams ? given : OutputListener.IGNORE;
      if (!hang) {
        return delegate.execute(r, l);
      }
      CompletableFuture<EngineResult> f = new CompletableFuture<>();
      held.put(r.id(), f);
      resume.add(() -> {
        if (held.remove(r.id()) == f) {
          delegate.execute(r, l).whenComplete((res, err) -> {
            if (err != null) {
              f.completeExceptionally(err);
            } else {
              f.complete(res);
            }
          });
        }
      });
      return f;
    }

    /** Stops hanging and runs the held requests. */
    void release() {
      hang = false;
      List<Runnable> r = List.copyOf(resume);
      resume.clear();
      r.forEach(Runnable::run);
    }

    @Override
    public EngineLoad load() {
      EngineLoad l = super.load();
      return heldQueued ? new EngineLoad(l.queueDepth() + held.size(), l.inFlight())
          : new EngineLoad(l.queueDepth(), l.inFlight() + held.size());
    }

    @Override
    public void cancel(String requestId) {
      CompletableFuture<EngineResult> f = held.remove(requestId);
      if (f != null) {
        f.completeExceptionally(new EngineException("connection closed", true));
      } else {
        delegate.cancel(requestId);
      }
    }
  }

  static final class Cluster extends WrappedEngineCluster<Hanging> {
    Cluster(int n, RouterConfig config) {
      this(n, config, UnaryOperator.identity());
    }

    Cluster(int n, RouterConfig config, UnaryOperator<SimulatedEngine.Builder> tweak) {
      this(n, config, tweak, new OracleCluster.Hooks());
    }

    Cluster(int n, RouterConfig config, UnaryOperator<SimulatedEngine.Builder> tweak,
        OracleCluster.Hooks hooks) {
      super(n, config, tweak, Hanging::new, hooks);
    }

    void advanceTo(long seconds) {
      c.sim.advanceTo(seconds * SECOND);
    }
  }

  static RouterConfig.Builder config() {
    return RouterConfig.builder().policy(RoutingPolicy.COST_AWARE)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).engineStallTimeout(STALL);
  }

  @Test
  void aHungEngineIsRoutedAroundUntilItAnswersAgain() {
    Cluster k = new Cluster(2, config().build());
    k.engine(0).hang = true;
    InferenceRequest r1 = request("r1", prompt(1, 200));
    InferenceRequest r2 = request("r2", prompt(2, 200));
    CompletableFuture<InferenceResponse> f1 = k.node(0).submit(r1);
    k.advanceTo(1);
    CompletableFuture<InferenceResponse> f2 = k.node(0).submit(r2);
    k.advanceTo(4);
    assertEquals(0, k.watch(0).avoided(), "silent for 4 s of 5: " + k.watch(0));
    assertEquals(2, k.watch(0).outstanding());

    // 5 s after the first run started, with no progress since: stalled
    k.advanceTo(5);
    EngineStallStats s = k.watch(0);
    assertEquals(1, s.avoided(), s.toString());
    assertEquals(1, s.stalled(), s.toString());
    assertEquals(1, s.stalls(), s.toString());
    assertEquals(5, s.silentSeconds(), s.toString());
    assertFalse(f1.isDone());
    assertFalse(f2.isDone());

    // its own client's request goes to the peer, whatever local execution would cost
    InferenceRequest r3 = request("r3", prompt(3, 200));
    InferenceResponse a3 = k.await(k.node(0).submit(r3));
    assertEquals("n1", a3.servedBy(), a3.decision().toString());
    assertEquals(Reason.LOCAL_ENGINE_STALLED, a3.decision().reason());
    assertArrayEquals(expected(r3), a3.result().outputTokens());
    assertEquals(2, k.engine(0).calls, "the hung engine was given the request");
    assertEquals(1, k.watch(0).reroutes());

    // the engine answers again: the held requests are served here, and the stall ends
    k.engine(0).release();
    InferenceResponse a1 = k.await(f1);
    InferenceResponse a2 = k.await(f2);
    assertEquals("n0", a1.servedBy());
    assertEquals("n0", a2.servedBy());
    assertArrayEquals(expected(r1), a1.result().outputTokens());
    assertArrayEquals(expected(r2), a2.result().outputTokens());
    s = k.watch(0);
    assertEquals(0, s.avoided(), s.toString());
    assertEquals(0, s.stalled(), s.toString());
    assertEquals(1, s.recoveries(), s.toString());
    assertEquals(0, s.outstanding(), s.toString());

    InferenceResponse a4 = k.await(k.node(0).submit(request("r4", prompt(4, 200))));
    assertEquals("n0", a4.servedBy(), a4.decision().toString());
    assertEquals(Reason.LOCAL_CHEAPEST, a4.decision().reason());
  }

  @Test
  void aStalledNodeRefusesItsPeersForwardsAsBusy() {
    Cluster k = new Cluster(2, config().build());
    int[] prefix = prompt(42, 480);
    k.c.warm("n0", prefix); // n1's view sees n0 holding the prefix
    k.engine(0).hang = true;
    CompletableFuture<InferenceResponse> stuck =
        k.node(0).submit(request("stuck", prompt(7, 200)));
    k.advanceTo(6);
    assertEquals(1, k.watch(0).avoided());

    InferenceRequest r = request("from-n1", concat(prefix, prompt(8, 40)));
    InferenceResponse a = k.await(k.node(1).submit(r));
    assertEquals("n0", a.decision().targetNodeId(), "n1 first chose n0: " + a.decision());
    assertEquals("n1", a.servedBy(), "n0 refused it and n1 ran it: " + a);
    assertEquals(FallbackCause.BUSY, a.fallbackCause());
    assertArrayEquals(expected(r), a.result().outputTokens());
    assertEquals(1, k.watch(0).refusedForPeers());
    assertEquals(1, k.node(0).stats().refusedForPeers());
    assertEquals(1, k.engine(0).calls, "the refused request reached n0's engine");

    k.engine(0).release();
    assertEquals("n0", k.await(stuck).servedBy());
  }

  /**
   * A stalled engine whose queue has also reached the high watermark: its refusal of a peer's
   * forward is one for the stall too, counted by the engine watch. The queue was checked first,
   * and such refusals (the usual ones once a stalled engine's queue fills) were counted in
   * {@code refused_for_peers} only, never in the watch's.
   */
  @Test
  void aStalledNodeWithAFullQueueCountsItsRefusalsForTheStall() {
    Cluster k = new Cluster(2, config().watermarks(0, 1).build());
    int[] prefix = prompt(42, 480);
    k.c.warm("n0", prefix);
    k.engine(0).hang = true;
    k.engine(0).heldQueued = true;
    List<CompletableFuture<InferenceResponse>> stuck = new ArrayList<>();
    stuck.add(k.node(0).submit(request("stuck", prompt(7, 200))));
    k.advanceTo(6);
    assertEquals(1, k.watch(0).avoided());
    assertEquals(1, k.engine(0).load().queueDepth(), "at the high watermark");

    InferenceRequest r = request("from-n1", concat(prefix, prompt(9, 40)));
    InferenceResponse a = k.await(k.node(1).submit(r));
    assertEquals("n1", a.servedBy(), "n0 refused it and n1 ran it: " + a);
    assertEquals(FallbackCause.BUSY, a.fallbackCause());
    assertEquals(1, k.node(0).stats().refusedForPeers());
    assertEquals(1, k.watch(0).refusedForPeers(), "a refusal of a stalled engine's node");

    k.engine(0).release();
    for (CompletableFuture<InferenceResponse> f : stuck) {
      assertEquals("n0", k.await(f).servedBy());
    }
  }

  @Test
  void whenTheStuckRunsEndTheNextRequestProbesTheEngine() {
    Cluster k = new Cluster(2, config().engineTimeout(Duration.ofSeconds(8)).build());
    k.engine(0).hang = true;
    CompletableFuture<InferenceResponse> f1 = k.node(0).submit(request("r1", prompt(1, 200)));
    k.advanceTo(6);
    assertEquals(1, k.watch(0).avoided());

    // the node gives the run up at its engine timeout: no request outstanding, none avoided
    Throwable t = k.await(f1.handle((r, e) -> e));
    if (t instanceof CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    assertInstanceOf(RequestFailedException.class, t);
    assertInstanceOf(EngineTimeoutException.class, t.getCause());
    EngineStallStats s = k.watch(0);
    assertEquals(0, s.outstanding(), s.toString());
    assertEquals(0, s.avoided(), s.toString());
    assertEquals(1, s.stalled(), "a timeout is no progress: " + s);

    // the next request runs here as a probe, and the engine is avoided again at once
    CompletableFuture<InferenceResponse> probe =
        k.node(0).submit(request("probe", prompt(2, 200)));
    assertEquals(1, k.watch(0).avoided(), k.watch(0).toString());
    InferenceResponse other = k.await(k.node(0).submit(request("other", prompt(3, 200))));
    assertEquals(Reason.LOCAL_ENGINE_STALLED, other.decision().reason(), other.toString());
    assertEquals("n1", other.servedBy());
    assertEquals(1, k.watch(0).stalls(), "one stall, still going on");

    k.engine(0).release();
    InferenceResponse p = k.await(probe);
    assertEquals("n0", p.servedBy());
    assertTrue(p.decision().isLocal(), p.decision().toString());
    assertEquals(0, k.watch(0).stalled());
    assertEquals(1, k.watch(0).recoveries());
  }

  /**
   * A request decided while the stalled engine's probe was being started (another thread's,
   * forced here by the engine's load being read in that gap) is not a second probe: it goes to
   * the peer rather than wait on the hung engine until engineTimeout too.
   */
  @Test
  void oneProbeAtATimeAlsoForDecisionsThatCrossEachOther() {
    Cluster k = new Cluster(2, config().engineTimeout(Duration.ofSeconds(8)).build());
    k.engine(0).hang = true;
    CompletableFuture<InferenceResponse> f1 = k.node(0).submit(request("r1", prompt(1, 200)));
    k.advanceTo(6);
    assertEquals(1, k.watch(0).avoided(), "stalled: " + k.watch(0));
    k.await(f1.handle((r, e) -> e)); // given up at the engine timeout
    assertEquals(0, k.watch(0).outstanding());
    assertEquals(1, k.watch(0).stalled());

    List<CompletableFuture<InferenceResponse>> crossing = new ArrayList<>();
    k.engine(0).inRunStart = () -> crossing.add(
        k.node(0).submit(request("crossing", prompt(3, 200))));
    CompletableFuture<InferenceResponse> probe =
        k.node(0).submit(request("probe", prompt(2, 200)));
    assertEquals(1, crossing.size(), "the engine's load was not read as the probe started");
    InferenceResponse other = k.await(crossing.get(0));
    assertEquals(2, k.engine(0).calls,
        "the request decided while the probe was starting was held by the hung engine too");
    assertEquals(Reason.LOCAL_ENGINE_STALLED, other.decision().reason(), other.toString());
    assertEquals("n1", other.servedBy(), other.toString());

    k.engine(0).release();
    assertEquals("n0", k.await(probe).servedBy());
    assertEquals(0, k.watch(0).stalled());
    InferenceResponse after = k.await(k.node(0).submit(request("after", prompt(4, 200))));
    assertEquals("n0", after.servedBy(), after.toString());
  }

  /** A taken-probe crossing at n0 ({@link #takenProbeCrossing}) and when its requests entered. */
  record Crossing(Cluster k, long stalledAt, long crossedAt) {}

  /**
   * n0's engine stalls on a first request, given up at the engine timeout; then a request whose
   * decision to run here finds the stalled engine's probe taken (by a request decided between
   * that decision and its taking the probe: another thread's, forced here by the node's clock
   * being read in that gap, by the prune of its peer records every 1,024th decision) is decided
   * again, and goes to the peer, while the crossing request runs here as the probe. Returns the
   * cluster, when the first request entered and when the other two did (at the same time).
   */
  Crossing takenProbeCrossing(RouterConfig config) {
    List<Runnable> inPrune = new ArrayList<>();
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    hooks.clockWrap = clock -> () -> {
      if (!inPrune.isEmpty() && StackWalker.getInstance().walk(st -> st.anyMatch(
          f -> f.getClassName().equals(RouterNode.class.getName())
              && f.getMethodName().equals("pruneHealth")))) {
        inPrune.remove(0).run();
      }
      return clock.nanoTime();
    };
    Cluster k = new Cluster(2, config, UnaryOperator.identity(), hooks);
    k.engine(0).hang = true;
    long stalledAt = k.c.sim.nanoTime();
    CompletableFuture<InferenceResponse> f1 = k.node(0).submit(request("r1", prompt(1, 200)));
    k.advanceTo(6);
    assertEquals(1, k.watch(0).avoided(), "stalled: " + k.watch(0));
    k.await(f1.handle((r, e) -> e)); // given up at the engine timeout
    assertEquals(0, k.watch(0).outstanding());
    assertEquals(1, k.watch(0).stalled());

    List<CompletableFuture<InferenceResponse>> crossing = new ArrayList<>();
    inPrune.add(() -> crossing.add(k.node(0).submit(request("crossing", prompt(3, 200)))));
    NodeProbe.decisionsOf(k.node(0)).set(1023); // the next decision prunes
    long crossedAt = k.c.sim.nanoTime();
    InferenceResponse again = k.await(k.node(0).submit(request("again", prompt(2, 200))));
    assertEquals(1, crossing.size(), "no request was decided in the gap");
    assertEquals(Reason.LOCAL_ENGINE_STALLED, again.decision().reason(), again.toString());
    assertEquals("n1", again.servedBy(), again.toString());
    assertEquals(2, k.engine(0).calls, "the crossing request is the probe");
    k.engine(0).release();
    assertEquals("n0", k.await(crossing.get(0)).servedBy());
    return new Crossing(k, stalledAt, crossedAt);
  }

  /**
   * A request decided again for a taken probe ({@link #takenProbeCrossing}) entered once, and
   * counts once in the demand local caching weighs: n0 counts the arrivals that a demand told of
   * each request once, as it was submitted, counts.
   */
  @Test
  void aRequestDecidedAgainForATakenProbeCountsOnceInLocalDemand() {
    RouterConfig config = config().engineTimeout(Duration.ofSeconds(8)).build();
    Crossing x = takenProbeCrossing(config);
    LocalDemand submitted = new LocalDemand(config.treeCapacityTokens());
    submitted.requested(0, x.stalledAt());
    submitted.requested(0, x.crossedAt());
    submitted.requested(0, x.crossedAt()); // the crossing request, at the same time

    long now = x.k().c.sim.nanoTime();
    double expected = submitted.arrivalsPerSecond(now);
    assertEquals(expected, NodeProbe.demandOf(x.k().node(0)).arrivalsPerSecond(now),
        expected * 1e-9, "3 requests entered n0");
  }

  /**
   * The same crossing, seen in the rate at which n0's runs insert tokens into its cache (its
   * turnover, which local caching weighs): the request decided again for the taken probe never
   * ran here, so only the two runs here count, as a demand told of each counts them. A small
   * cache, so that the turnover is below its cap.
   */
  @Test
  void aRequestDecidedAgainForATakenProbeIsNoRunHereInTheCacheTurnover() {
    RouterConfig config = config().engineTimeout(Duration.ofSeconds(8)).treeCapacityTokens(1024)
        .build();
    Crossing x = takenProbeCrossing(config);
    LocalDemand ran = new LocalDemand(1024);
    ran.inserted(200, x.stalledAt());
    ran.inserted(200, x.crossedAt()); // the crossing request, the probe

    long now = x.k().c.sim.nanoTime();
    assertEquals(ran.residencyNanos(now), NodeProbe.demandOf(x.k().node(0)).residencyNanos(now),
        "2 requests ran here");
  }

  /** 60 output tokens at 200 ms each: 12 s of decoding, streamed 4 tokens at a time. */
  static final GenerationParams LONG = GenerationParams.greedy(60);

  static Cluster slowDecoding(RouterConfig config) {
    return new Cluster(2, config, b -> b.decodeNanosPerToken(200_000_000L));
  }

  @Test
  void streamedOutputIsProgress() {
    Cluster k = slowDecoding(config().build());
    InferenceRequest r = new InferenceRequest("long", prompt(1, 200), LONG);
    List<Integer> pieces = new ArrayList<>();
    CompletableFuture<InferenceResponse> f =
        k.node(0).submit(r, (tokens, text) -> pieces.add(tokens.length));
    for (int sec = 1; sec <= 11; sec++) {
      k.advanceTo(sec);
      assertEquals(0, k.watch(0).avoided(), "at " + sec + " s: " + k.watch(0));
    }
    InferenceResponse a = k.await(f);
    assertEquals("n0", a.servedBy());
    assertTrue(pieces.size() > 5, "streamed in pieces: " + pieces);
    assertEquals(0, k.watch(0).stalls());
  }

  @Test
  void anAnswerNobodyStreamsIsStillProgressWhenTheEngineStreamsIt() {
    Cluster k = slowDecoding(config().build());
    InferenceRequest r = new InferenceRequest("long", prompt(1, 200), LONG);
    CompletableFuture<InferenceResponse> f = k.node(0).submit(r); // its client does not stream
    for (int sec = 1; sec <= 11; sec++) {
      k.advanceTo(sec);
      assertEquals(0, k.watch(0).avoided(), "at " + sec + " s: " + k.watch(0));
    }
    InferenceResponse other = k.await(k.node(0).submit(request("other", prompt(2, 200))));
    assertNotEquals(Reason.LOCAL_ENGINE_STALLED, other.decision().reason(), other.toString());
    InferenceResponse a = k.await(f);
    assertEquals("n0", a.servedBy());
    assertArrayEquals(expected(r), a.result().outputTokens());
    assertEquals(0, k.watch(0).stalls());
  }

  @ParameterizedTest
  @ValueSource(booleans = {true, false})
  void onlyAWatchedEngineIsAskedToStreamARunNobodyStreams(boolean watched) {
    RouterConfig config = config().engineStallTimeout(watched ? STALL : Duration.ZERO).build();
    Cluster k = new Cluster(1, config);
    InferenceRequest r = request("r", prompt(1, 200));
    InferenceResponse a = k.await(k.node(0).submit(r));
    assertEquals("n0", a.servedBy());
    assertArrayEquals(expected(r), a.result().outputTokens());
    assertEquals(1, k.engine(0).calls);
    assertEquals(watched, k.engine(0).lastListener != OutputListener.IGNORE,
        "a listener only to see progress: " + k.engine(0).lastListener);
  }

  @Test
  void aSilentLongRunLooksStalledUntilItAnswers() {
    Cluster k = slowDecoding(config().build());
    k.engine(0).streams = false;
    InferenceRequest r = new InferenceRequest("long", prompt(1, 200), LONG);
    CompletableFuture<InferenceResponse> f = k.node(0).submit(r); // not streamed: silent
    k.advanceTo(6);
    assertEquals(1, k.watch(0).avoided(), "12 s without output: " + k.watch(0));
    InferenceResponse other = k.await(k.node(0).submit(request("other", prompt(2, 200))));
    assertEquals(Reason.LOCAL_ENGINE_STALLED, other.decision().reason());

    InferenceResponse a = k.await(f);
    assertEquals("n0", a.servedBy());
    assertArrayEquals(expected(r), a.result().outputTokens());
    assertEquals(0, k.watch(0).stalled(), "its answer ended the stall");
    assertEquals(1, k.watch(0).recoveries());
    InferenceResponse next = k.await(k.node(0).submit(request("next", prompt(3, 200))));
    assertNotEquals(Reason.LOCAL_ENGINE_STALLED, next.decision().reason());
  }

  /**
   * An engine that publishes its cache events shows a prefill's progress when it stores the
   * prompt's blocks: a second request's prefill, 4 s into a silent 12 s run, restarts the stall
   * clock, which it cannot do for an engine whose events nobody hears.
   */
  @ParameterizedTest
  @ValueSource(booleans = {true, false})
  void anEngineStoringBlocksIsMakingProgress(boolean publishesEvents) {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 3);
    SimulatedEngine streaming = OracleCluster.engineDefaults(sim).slots(2)
        .decodeNanosPerToken(200_000_000L).publishesCacheEvents(publishesEvents).build();
    // streams nothing (ForwardingEngine does not pass streamed runs on): only stores show
    // progress
    InferenceEngine engine = new io.github.prefixrouter.testing.ForwardingEngine(streaming);
    RouterNode n = (RouterNode) PrefixRouterNode.builder().nodeId("a").config(config().build())
        .transport(net.transport("a")).engine(engine).clock(sim).scheduler(sim)
        .random(new SplittableRandom(1)).seeds(List.of()).build();
    n.start();
    CompletableFuture<InferenceResponse> f1 =
        n.submit(new InferenceRequest("r1", prompt(1, 200), LONG));
    sim.advanceTo(4 * SECOND);
    CompletableFuture<InferenceResponse> f2 =
        n.submit(new InferenceRequest("r2", prompt(2, 200), LONG));
    sim.advanceTo(6 * SECOND);
    assertEquals(publishesEvents ? 0 : 1, n.engineStallStats().orElseThrow().avoided(),
        n.engineStallStats().orElseThrow().toString());
    sim.advanceTo(30 * SECOND);
    assertEquals("a", f1.join().servedBy());
    assertEquals("a", f2.join().servedBy());
    n.stop();
  }

  @Test
  void aZeroStallTimeoutNeverAvoidsTheEngine() {
    Cluster k = new Cluster(2, config().engineStallTimeout(Duration.ZERO).build());
    k.engine(0).hang = true;
    CompletableFuture<InferenceResponse> f1 = k.node(0).submit(request("r1", prompt(1, 200)));
    k.advanceTo(120);
    assertEquals(0, k.watch(0).avoided());
    assertEquals(0, k.watch(0).stalls());
    CompletableFuture<InferenceResponse> f2 = k.node(0).submit(request("r2", prompt(2, 200)));
    k.advanceTo(121);
    assertEquals(2, k.engine(0).calls, "both requests went to the engine");
    k.engine(0).release();
    assertEquals("n0", k.await(f1).servedBy());
    assertEquals("n0", k.await(f2).servedBy());
  }

  @Test
  void withNoPeerEligibleAStalledNodeStillRunsItsRequests() {
    Cluster k = new Cluster(1, config().build());
    k.engine(0).hang = true;
    CompletableFuture<InferenceResponse> f1 = k.node(0).submit(request("r1", prompt(1, 200)));
    k.advanceTo(6);
    assertEquals(1, k.watch(0).avoided());
    CompletableFuture<InferenceResponse> f2 = k.node(0).submit(request("r2", prompt(2, 200)));
    k.engine(0).release();
    InferenceResponse a2 = k.await(f2);
    assertEquals("n0", a2.servedBy());
    assertEquals(Reason.NO_PEERS, a2.decision().reason());
    assertEquals("n0", k.await(f1).servedBy());
  }

  @Test
  void aStalledNodeAdvertisesOverloadInItsGossipUntilItRecovers() {
    SimulatedScheduler sim = new SimulatedScheduler();
    Hanging hanging = new Hanging(OracleCluster.engineDefaults(sim).build());
    Map<String, PrefixRouterNode> nodes =
        GossipingPair.start(sim, config().build(), hanging);
    sim.advanceBy(2 * SECOND);
    InferenceRequest probe = request("probe", prompt(9, 200));
    assertEquals(SkipReason.NONE, skipOf("a", nodes.get("b").explain(probe)));

    hanging.hang = true;
    CompletableFuture<InferenceResponse> f = nodes.get("a").submit(request("r1", prompt(1, 200)));
    sim.advanceBy(4 * SECOND);
    assertEquals(SkipReason.NONE, skipOf("a", nodes.get("b").explain(probe)), "not stalled yet");
    sim.advanceBy(2 * SECOND);
    assertEquals(SkipReason.OVERLOADED, skipOf("a", nodes.get("b").explain(probe)),
        "b learns of a's stall by gossip");

    hanging.release();
    sim.advanceBy(2 * SECOND);
    assertEquals("a", f.join().servedBy());
    assertEquals(SkipReason.NONE, skipOf("a", nodes.get("b").explain(probe)), "recovered");
    nodes.values().forEach(PrefixRouterNode::stop);
  }

  @Test
  void theStallTimeoutIsValidated() {
    assertEquals(Duration.ofSeconds(30), RouterConfig.defaults().engineStallTimeout());
    IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(
        IllegalArgumentException.class,
        () -> RouterConfig.builder().engineStallTimeout(Duration.ofSeconds(-1)).build());
    assertTrue(e.getMessage().contains("engineStallTimeout"), e.getMessage());
    e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
        () -> RouterConfig.builder().engineStallTimeout(Duration.ofDays(400)).build());
    assertTrue(e.getMessage().contains("engineStallTimeout"), e.getMessage());
    assertEquals(Duration.ofSeconds(7), RouterConfig.builder()
        .engineStallTimeout(Duration.ofSeconds(7)).build().toBuilder().build()
        .engineStallTimeout());
  }
}
