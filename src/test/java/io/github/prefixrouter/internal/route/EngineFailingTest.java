package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.GossipingPair.skipOf;
import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.OracleCluster.request;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouteDecision.Reason;
import io.github.prefixrouter.RouteDecision.SkipReason;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.AnswerBudgetException;
import io.github.prefixrouter.internal.EngineInFlightLimitException;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.EngineTimeoutException;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.InvalidRequestException;
import io.github.prefixrouter.testing.LoggedLines;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A node whose own engine fails every request at once (its server down, refusing connections,
 * or answering every call with an error) stops giving it requests after a few such failures in
 * a row, as it does a stalled engine: its clients' requests go to peers, its peers' forwards are
 * refused as busy and its gossip pushes back, with one probe run at a time after each
 * {@code failureCooldown}; the first success ends it. In simulated time.
 */
class EngineFailingTest {

  static final long SECOND = 1_000_000_000L;

  /**
   * Wraps an engine that, while {@link #failure} is set, fails every run with it at once (or
   * throws it from {@code execute}, when {@link #throwsFailure}).
   */
  static final class Failing extends CountingEngine {
    Throwable failure;
    /** Whether a run fails once the engine has run it (an error in its answer), not at once. */
    boolean failsAfterRunning;
    /** Whether {@code execute} throws the failure instead of returning a failed future. */
    boolean throwsFailure;
    /** Whether {@code execute} returns null instead of a future. */
    boolean returnsNoFuture;
    /** Whether each run's future completes with null instead of a result. */
    boolean completesWithNull;

    Failing(InferenceEngine delegate) {
      super(delegate);
    }

    @Override
    CompletableFuture<EngineResult> run(InferenceRequest r, OutputListener l) {
      if (returnsNoFuture) {
        return null;
      }
      if (completesWithNull) {
        return CompletableFuture.completedFuture(null);
      }
      Throwable e = failure;
      if (e != null && throwsFailure) {
        throw Failing.<RuntimeException>undeclared(e);
      }
      if (e != null && failsAfterRunning) {
        return delegate.execute(r, l).handle((res, err) -> {
          throw Failing.<RuntimeException>undeclared(e);
        });
      }
      if (e != null) {
        return CompletableFuture.failedFuture(e);
      }
      return delegate.execute(r, l);
    }

    /** Throws {@code t} whatever it is, a checked exception too, as a buggy engine may. */
    @SuppressWarnings("unchecked")
    static <T extends Throwable> T undeclared(Throwable t) throws T {
      throw (T) t;
    }
  }

  static final EngineException REFUSED = new EngineException("connection refused", true);

  static final class Cluster extends WrappedEngineCluster<Failing> {
    Cluster(int n, RouterConfig config) {
      super(n, config, UnaryOperator.identity(), Failing::new, new OracleCluster.Hooks());
    }

    /** What {@code f} failed with (a {@link CompletionException}'s cause), or null. */
    Throwable failureOf(CompletableFuture<?> f) {
      Throwable t = await(f.handle((x, e) -> e));
      return t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
    }
  }

  /** Two nodes, n0's engine refusing every run and found failing after its first 3 requests. */
  static Cluster withNode0Failing() {
    Cluster k = new Cluster(2, config().build());
    k.engine(0).failure = REFUSED;
    for (int i = 0; i < 3; i++) {
      k.await(k.node(0).submit(request("r" + i, prompt(i, 200))));
    }
    assertEquals(1, k.watch(0).failing());
    return k;
  }

  static RouterConfig.Builder config() {
    return RouterConfig.builder().policy(RoutingPolicy.COST_AWARE)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false);
  }

  @Test
  void aFailingEngineGetsOnlyProbesUntilOneSucceeds() {
    Cluster k = new Cluster(2, config().build());
    k.engine(0).failure = REFUSED;
    for (int i = 0; i < 10; i++) {
      InferenceRequest r = request("r" + i, prompt(i, 200));
      InferenceResponse a = k.await(k.node(0).submit(r));
      assertEquals("n1", a.servedBy(), a.toString());
      assertArrayEquals(expected(r), a.result().outputTokens());
    }
    assertEquals(3, k.engine(0).calls,
        "after 3 failures in a row the engine is avoided; it was given every request");
    InferenceResponse avoided = k.await(k.node(0).submit(request("x", prompt(50, 200))));
    assertEquals(Reason.LOCAL_ENGINE_FAILING, avoided.decision().reason(), avoided.toString());
    RouteDecision explained = k.node(0).explain(request("y", prompt(50, 200)));
    assertEquals(Reason.LOCAL_ENGINE_FAILING, explained.reason(), explained.toString());
    assertEquals("n1", explained.targetNodeId(), explained.toString());
    EngineStallStats s = k.watch(0);
    assertEquals(1, s.avoided(), s.toString());
    assertEquals(1, s.failing(), s.toString());
    assertEquals(0, s.stalled(), "failing, not stalled: " + s);
    assertEquals(3, s.failedInARow(), s.toString());
    assertEquals(1, s.failingSpells(), s.toString());
    // the 7 requests after the third failure, "x", and the third request's own decision to
    // try a peer once the engine had failed it
    assertEquals(9, s.reroutes(), s.toString());
    assertEquals(9, NodeProbe.failingAvoidance(k.node(0))[0], "all of them for the failing engine");

    // a failureCooldown later, one request probes the engine; it fails: avoided again
    k.advanceBy(3 * SECOND);
    InferenceResponse p1 = k.await(k.node(0).submit(request("p1", prompt(51, 200))));
    assertEquals(4, k.engine(0).calls, "the probe");
    assertEquals("n1", p1.servedBy());
    assertEquals(FallbackCause.LOCAL_FAILED, p1.fallbackCause(), p1.toString());
    k.await(k.node(0).submit(request("p2", prompt(52, 200))));
    assertEquals(4, k.engine(0).calls, "no probe before another failureCooldown");
    assertEquals(4, k.watch(0).failedInARow());
    assertEquals(1, k.watch(0).failingSpells(), "one spell, still going on");

    // the engine is back: the next probe succeeds and the node uses its engine again
    k.engine(0).failure = null;
    k.advanceBy(3 * SECOND);
    InferenceRequest r = request("p3", prompt(53, 200));
    InferenceResponse p3 = k.await(k.node(0).submit(r));
    assertEquals("n0", p3.servedBy(), p3.toString());
    assertArrayEquals(expected(r), p3.result().outputTokens());
    InferenceResponse after = k.await(k.node(0).submit(request("p4", prompt(54, 200))));
    assertEquals("n0", after.servedBy(), after.toString());
    assertEquals(Reason.LOCAL_CHEAPEST, after.decision().reason());
    s = k.watch(0);
    assertEquals(0, s.avoided(), s.toString());
    assertEquals(0, s.failing(), s.toString());
    assertEquals(0, s.failedInARow(), s.toString());
    assertEquals(1, s.failingSpells(), s.toString());
  }

  /**
   * Two requests decided while the probe is due, the second between the first's decision to run
   * here and the start of its run (another thread's request, forced here by the engine's load
   * being read in that gap): only the first is the probe; the second goes to the peer.
   */
  @Test
  void oneProbeAtATimeAlsoForDecisionsThatCrossEachOther() {
    Cluster k = withNode0Failing();
    int calls = k.engine(0).calls;
    k.advanceBy(3 * SECOND);

    List<CompletableFuture<InferenceResponse>> crossing = new ArrayList<>();
    k.engine(0).inRunStart = () -> crossing.add(
        k.node(0).submit(request("crossing", prompt(61, 200))));
    InferenceResponse probe = k.await(k.node(0).submit(request("probe", prompt(60, 200))));
    assertEquals(1, crossing.size(), "the engine's load was not read as the probe started");
    InferenceResponse other = k.await(crossing.get(0));
    assertEquals(calls + 1, k.engine(0).calls,
        "the request decided while the probe was starting was run on the failing engine too");
    assertEquals(FallbackCause.LOCAL_FAILED, probe.fallbackCause(), probe.toString());
    assertEquals(Reason.LOCAL_ENGINE_FAILING, other.decision().reason(), other.toString());
    assertEquals("n1", other.servedBy(), other.toString());

    // the probe, ended, is given back: the next one runs a failureCooldown later
    k.advanceBy(3 * SECOND);
    k.engine(0).failure = null;
    InferenceResponse back = k.await(k.node(0).submit(request("back", prompt(62, 200))));
    assertEquals("n0", back.servedBy(), back.toString());
    assertEquals(0, k.watch(0).failing());
  }

  /**
   * A request its local engine failed, decided again to go to a peer, entered once, and counts
   * once in the demand local caching weighs: n0 counts the arrivals that a demand told of each
   * request once, as it was submitted, counts.
   */
  @Test
  void aRequestDecidedAgainAfterALocalFailureCountsOnceInLocalDemand() {
    Cluster k = new Cluster(2, config().build());
    LocalDemand submitted = new LocalDemand(k.c.config.treeCapacityTokens());
    k.engine(0).failure = REFUSED;
    for (int i = 0; i < 3; i++) {
      submitted.requested(0, k.c.sim.nanoTime());
      InferenceResponse a = k.await(k.node(0).submit(request("r" + i, prompt(i, 200))));
      assertEquals(FallbackCause.LOCAL_FAILED, a.fallbackCause(), a.toString());
      assertEquals("n1", a.servedBy(), a.toString());
    }
    long now = k.c.sim.nanoTime();
    double expected = submitted.arrivalsPerSecond(now);
    assertEquals(expected, NodeProbe.demandOf(k.node(0)).arrivalsPerSecond(now), expected * 1e-9,
        "3 requests entered n0, each run here, failed and sent to n1");
  }

  /**
   * A request its local engine failed, decided again to go to a peer, ran here once: the rate at
   * which n0's runs insert tokens into its cache (its turnover, which local caching weighs)
   * counts its prompt once, as a demand told of each run here counts it. The engine fails each
   * run once it has run it (a run it refuses at once is no run here: {@link
   * BoughtMissRunTest#aBoughtMissTheEngineRefusesAtOnceIsNoRunHere}). A small cache, so that the
   * turnover is below its cap.
   */
  @Test
  void aRequestDecidedAgainAfterALocalFailureCountsOnceInTheCacheTurnover() {
    Cluster k = new Cluster(2, config().treeCapacityTokens(1024).build());
    LocalDemand ran = new LocalDemand(1024);
    k.engine(0).failure = REFUSED;
    k.engine(0).failsAfterRunning = true;
    for (int i = 0; i < 3; i++) {
      ran.inserted(200, k.c.sim.nanoTime());
      InferenceResponse a = k.await(k.node(0).submit(request("r" + i, prompt(i, 200))));
      assertEquals(FallbackCause.LOCAL_FAILED, a.fallbackCause(), a.toString());
      assertEquals("n1", a.servedBy(), a.toString());
    }
    long now = k.c.sim.nanoTime();
    assertEquals(ran.residencyNanos(now), NodeProbe.demandOf(k.node(0)).residencyNanos(now),
        "3 requests ran here, each failed and sent to n1");
  }

  @Test
  void failuresWithSuccessesBetweenThemAreNoFailingEngine() {
    Cluster k = new Cluster(2, config().build());
    for (int i = 0; i < 12; i++) {
      k.engine(0).failure = i % 3 == 2 ? null : REFUSED;
      k.await(k.node(0).submit(request("r" + i, prompt(i, 200))));
    }
    assertEquals(12, k.engine(0).calls, "two failures in a row at most: never avoided");
    assertEquals(0, k.watch(0).failingSpells());
  }

  @Test
  void theLimitIsASettingAndZeroTurnsTheCheckOff() {
    Cluster k = new Cluster(2, config().engineFailureLimit(0).build());
    k.engine(0).failure = REFUSED;
    for (int i = 0; i < 6; i++) {
      assertEquals("n1", k.await(k.node(0).submit(request("r" + i, prompt(i, 200)))).servedBy());
    }
    assertEquals(6, k.engine(0).calls);
    assertEquals(0, k.watch(0).failing());
    assertEquals(6, k.watch(0).failedInARow(),
        "with the check off the failures in a row are still counted, for the operator to see");

    k = new Cluster(2, config().engineFailureLimit(5).build());
    k.engine(0).failure = REFUSED;
    for (int i = 0; i < 8; i++) {
      k.await(k.node(0).submit(request("r" + i, prompt(i, 200))));
    }
    assertEquals(5, k.engine(0).calls);
  }

  @Test
  void theLimitIsValidated() {
    assertEquals(3, RouterConfig.defaults().engineFailureLimit());
    for (int bad : new int[] {-1, RouterConfig.MAX_ENGINE_FAILURE_LIMIT + 1}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> RouterConfig.builder().engineFailureLimit(bad).build());
      assertTrue(e.getMessage().contains("engineFailureLimit must be between 0"), e.getMessage());
    }
    assertEquals(7, RouterConfig.builder().engineFailureLimit(7).build().toBuilder().build()
        .engineFailureLimit());
  }

  @Test
  void aFailingNodeRefusesItsPeersForwardsAsBusy() {
    Cluster k = new Cluster(2, config().build());
    int[] prefix = prompt(42, 480);
    k.c.warm("n0", prefix); // n1's view sees n0 holding the prefix
    k.engine(0).failure = REFUSED;
    for (int i = 0; i < 3; i++) {
      k.await(k.node(0).submit(request("own" + i, prompt(i, 200))));
    }
    int calls = k.engine(0).calls;

    InferenceRequest r = request("from-n1", concat(prefix, prompt(8, 40)));
    InferenceResponse a = k.await(k.node(1).submit(r));
    assertEquals("n0", a.decision().targetNodeId(), "n1 first chose n0: " + a.decision());
    assertEquals("n1", a.servedBy(), a.toString());
    assertArrayEquals(expected(r), a.result().outputTokens());
    assertEquals(FallbackCause.BUSY, a.fallbackCause(),
        "n0 refused it as busy rather than running it on its failing engine: " + a);
    assertEquals(calls, k.engine(0).calls, "the forward reached n0's failing engine");
    assertEquals(1, k.node(0).stats().refusedForPeers());
    assertEquals(1, k.watch(0).refusedForPeers());
    assertEquals(1, NodeProbe.failingAvoidance(k.node(0))[1], "refused for its failing engine");
  }

  @Test
  void aFailingNodeAdvertisesOverloadInItsGossipUntilItRecovers() {
    SimulatedScheduler sim = new SimulatedScheduler();
    Failing failing = new Failing(OracleCluster.engineDefaults(sim).build());
    Map<String, PrefixRouterNode> nodes =
        GossipingPair.start(sim, config().build(), failing);
    sim.advanceBy(2 * SECOND);
    InferenceRequest probe = request("probe", prompt(9, 200));
    assertEquals(SkipReason.NONE, skipOf("a", nodes.get("b").explain(probe)));

    failing.failure = REFUSED;
    for (int i = 0; i < 3; i++) {
      CompletableFuture<InferenceResponse> f =
          nodes.get("a").submit(request("r" + i, prompt(i, 200)));
      sim.advanceBy(SECOND / 10);
      assertEquals("b", f.join().servedBy());
    }
    sim.advanceBy(SECOND / 2);
    assertEquals(SkipReason.OVERLOADED, skipOf("a", nodes.get("b").explain(probe)),
        "b learns by gossip that a's engine fails");
    nodes.values().forEach(PrefixRouterNode::stop);
  }

  /**
   * A peer's final answer (its engine's timeout, or an invalid request) ends a request whose
   * node avoids its failing engine: it used to be run there anyway, as the local engine's
   * judgement, beside the probe, only to fail; on a stalled engine it would have waited for
   * {@code engineTimeout}. With the probe due, the run is the probe; with a healthy engine, the
   * local engine judges it as before.
   */
  @Test
  void aPeersFinalAnswerIsNotRunOnAnAvoidedEngine() {
    Cluster k = withNode0Failing();
    k.engine(1).failure = new EngineTimeoutException("no answer within engineTimeout", null);
    int peerCalls = k.engine(1).calls;
    Throwable t = k.failureOf(k.node(0).submit(request("t", prompt(60, 200))));
    assertInstanceOf(RequestFailedException.class, t);
    assertTrue(t.getMessage().contains("engineTimeout"), t.getMessage());
    assertEquals(3, k.engine(0).calls, "run on the failing engine after the peer's final answer");
    assertEquals(peerCalls + 1, k.engine(1).calls, "the peer's run, final");

    // a failureCooldown later the probe is due: the request is the probe
    k.advanceBy(3 * SECOND);
    k.engine(0).failure = null;
    InferenceRequest r = request("u", prompt(61, 200));
    InferenceResponse a = k.await(k.node(0).submit(r));
    assertEquals(4, k.engine(0).calls, "the probe");
    assertEquals("n0", a.servedBy(), a.toString());
    assertArrayEquals(expected(r), a.result().outputTokens());
    assertEquals(0, k.watch(0).failing());
  }

  @Test
  void invalidRequestsAreNoSignOfAFailingEngine() {
    Cluster k = new Cluster(2, config().build());
    k.engine(0).failure = new InvalidRequestException("prompt too long");
    for (int i = 0; i < 6; i++) {
      Throwable t = k.failureOf(k.node(0).submit(request("r" + i, prompt(i, 200))));
      assertInstanceOf(RequestFailedException.class, t);
    }
    assertEquals(6, k.engine(0).calls, "every request was the engine's to refuse");
    assertEquals(0, k.watch(0).failedInARow());
  }

  /**
   * An answer the node had no heap to read (the adapter's answer budget held by other answers)
   * is the node's shortage, not its engine's failure: such refusals in a row leave the engine in
   * use, each request tried on the peer; between failures they neither add to the count nor
   * reset it, as a success would.
   */
  @Test
  void answersRefusedTheAnswerBudgetAreNoSignOfAFailingEngine() {
    Cluster k = new Cluster(2, config().build());
    EngineException refused = new AnswerBudgetException("the answer could not get its share of "
        + "the heap this engine gives the answers being read and parsed (answerBudget)", null);
    k.engine(0).failure = refused;
    for (int i = 0; i < 6; i++) {
      InferenceResponse a = k.await(k.node(0).submit(request("r" + i, prompt(i, 200))));
      assertNotEquals(Reason.LOCAL_ENGINE_FAILING, a.decision().reason(),
          "after " + i + " refused answers the node routed around its engine: " + a);
      assertEquals("n1", a.servedBy(), a.toString());
      assertEquals(FallbackCause.LOCAL_FAILED, a.fallbackCause(), a.toString());
    }
    assertEquals(6, k.engine(0).calls, "the node avoided its engine after refused answers");
    EngineStallStats s = k.watch(0);
    assertEquals(0, s.failedInARow(), "refused answers counted as failures: " + s);
    assertEquals(0, s.failing(), s.toString());

    // 2 failures, 2 refusals, 1 failure: 3 failures in a row, the refusals between them no
    // success
    EngineException[] runs = {REFUSED, REFUSED, refused, refused, REFUSED};
    for (int i = 0; i < runs.length; i++) {
      k.engine(0).failure = runs[i];
      k.await(k.node(0).submit(request("f" + i, prompt(10 + i, 200))));
    }
    s = k.watch(0);
    assertEquals(3, s.failedInARow(), s.toString());
    assertEquals(1, s.failing(), "the refusals between the failures reset their count: " + s);
  }

  /**
   * A run the adapter refused at its own limit of requests in flight ({@code maxInFlight})
   * never reached the engine: such refusals in a row leave the engine in use, and they keep
   * being busy to the node (each request tried on the peer; a peer's forward answered BUSY).
   * Between the server's own busy answers (a 503), which do count, they neither add to the
   * count nor reset it.
   */
  @Test
  void refusalsAtTheAdaptersInFlightLimitAreNoSignOfAFailingEngine() {
    Cluster k = new Cluster(2, config().build());
    int[] prefix = prompt(42, 480);
    k.c.warm("n0", prefix); // n1's view sees n0 holding the prefix
    EngineException atLimit = new EngineInFlightLimitException(
        "engine busy: 512 requests already in flight to http://127.0.0.1:8000/v1/completions");
    k.engine(0).failure = atLimit;
    for (int i = 0; i < 6; i++) {
      InferenceResponse a = k.await(k.node(0).submit(request("r" + i, prompt(i, 200))));
      assertNotEquals(Reason.LOCAL_ENGINE_FAILING, a.decision().reason(),
          "after " + i + " refusals at the in-flight limit the node routed around its engine: "
              + a);
      assertEquals("n1", a.servedBy(), a.toString());
      assertEquals(FallbackCause.LOCAL_FAILED, a.fallbackCause(), a.toString());
    }
    assertEquals(6, k.engine(0).calls, "the node avoided its engine after refusals at its limit");
    EngineStallStats s = k.watch(0);
    assertEquals(0, s.failedInARow(), "refusals at the in-flight limit counted as failures: " + s);
    assertEquals(0, s.failing(), s.toString());

    // a peer's forward refused so is push-back, as for any busy engine
    InferenceRequest r = request("from-n1", concat(prefix, prompt(8, 40)));
    InferenceResponse a = k.await(k.node(1).submit(r));
    assertEquals("n0", a.decision().targetNodeId(), "n1 first chose n0: " + a.decision());
    assertEquals("n1", a.servedBy(), a.toString());
    assertEquals(FallbackCause.BUSY, a.fallbackCause(), a.toString());
    assertEquals(7, k.engine(0).calls, "the forward was n0's engine's to refuse");
    assertEquals(1, k.node(0).stats().refusedForPeers());
    assertEquals(0, k.watch(0).refusedForPeers(), "refused for an avoided engine");

    // 2 busy answers of the server, 2 refusals at the limit, 1 busy answer: 3 in a row
    EngineException serverBusy = new EngineBusyException("server answered HTTP 503", 503);
    EngineException[] runs = {serverBusy, serverBusy, atLimit, atLimit, serverBusy};
    for (int i = 0; i < runs.length; i++) {
      k.engine(0).failure = runs[i];
      k.await(k.node(0).submit(request("f" + i, prompt(10 + i, 200))));
    }
    s = k.watch(0);
    assertEquals(3, s.failedInARow(), s.toString());
    assertEquals(1, s.failing(), "the refusals between the busy answers reset their count: " + s);
  }

  /**
   * An engine that breaks its contract, failing a run with something that is not an {@link
   * EngineException} (an {@code IOException} of the host's HTTP client in the future it
   * returns, a {@code NullPointerException} thrown by {@code execute}), fails as a retryable
   * failure of this engine: each request is tried on the peer, and after {@code
   * engineFailureLimit} of them in a row the node routes around its engine. Alone, or under the
   * local-only policy, the request fails with a {@link RequestFailedException} carrying what
   * the engine failed with.
   */
  @ParameterizedTest(name = "thrown by execute: {0}")
  @ValueSource(booleans = {false, true})
  void aFailureThatIsNoEngineExceptionIsTriedOnAPeerAndCountsTowardTheLimit(boolean thrown) {
    Throwable broken = thrown
        ? new NullPointerException("Cannot read field \"choices\" because \"body\" is null")
        : new java.io.IOException("connection reset by peer");
    Cluster k = new Cluster(2, config().build());
    k.engine(0).failure = broken;
    k.engine(0).throwsFailure = thrown;
    EngineStallStats s = sixRequestsAreServedByN1AndN0sEngineIsAvoidedAfterThree(k);
    assertEquals(3, s.failedInARow(), s.toString());
    assertEquals(3, k.node(0).stats().fallbacks().get(FallbackCause.LOCAL_FAILED));
    assertEquals(0, k.node(0).stats().failed());

    // with no peer to go to the request fails, with what the engine failed with
    // (no peer at all; a peer, and the local-only policy)
    for (int n = 1; n <= 2; n++) {
      Cluster solo = new Cluster(n, n == 1 ? config().build()
          : config().policy(RoutingPolicy.LOCAL_ONLY).build());
      solo.engine(0).failure = broken;
      solo.engine(0).throwsFailure = thrown;
      Throwable t = solo.failureOf(solo.node(0).submit(request("q", prompt(1, 200))));
      assertInstanceOf(RequestFailedException.class, t);
      assertTrue(t.getCause() == broken, String.valueOf(t.getCause()));
      assertEquals(1, solo.engine(0).calls);
      if (n == 2) {
        assertEquals(0, solo.engine(1).calls, "a peer was tried under the local-only policy");
      }
      assertEquals(1, solo.node(0).stats().failed());
    }
  }

  /**
   * Runs that fail with something other than an {@link EngineException} are logged at each
   * doubling of their count: the first with what was thrown, then the 2nd, 4th and 8th with
   * their count, so an engine that breaks its contract at every run does not fill the log.
   */
  @Test
  void runsThatBreakTheEnginesContractAreLoggedAtEachDoublingOfTheirCount() {
    Cluster solo = new Cluster(1, config().build());
    solo.engine(0).failure = new java.io.IOException("connection reset by peer");
    List<String> lines = LoggedLines.logged("EngineException", () -> {
      for (int i = 0; i < 9; i++) {
        assertInstanceOf(RequestFailedException.class,
            solo.failureOf(solo.node(0).submit(request("q" + i, prompt(i, 200)))));
      }
    });
    assertEquals(9, solo.engine(0).calls);
    assertEquals(4, lines.size(), String.join("\n", lines));
    assertTrue(lines.get(0).contains("failed request q0 with java.io.IOException, which is not"),
        lines.get(0));
    for (int i = 1; i < 4; i++) {
      assertTrue(lines.get(i).contains("its engine has failed " + (1 << i) + " runs with an"
          + " exception that is not an EngineException"), lines.get(i));
    }
  }

  /**
   * An engine that returns no future, or completes a run with no result, breaks its contract
   * as one that fails with something other than an {@link EngineException} does: the request
   * is tried on the peer, and after {@code engineFailureLimit} of them in a row the node routes
   * around its engine.
   */
  @ParameterizedTest(name = "no future: {0}")
  @ValueSource(booleans = {false, true})
  void anEngineThatGivesNoFutureOrNoResultIsTriedOnAPeerAndCountsTowardTheLimit(
      boolean noFuture) {
    Cluster k = new Cluster(2, config().build());
    k.engine(0).returnsNoFuture = noFuture;
    k.engine(0).completesWithNull = !noFuture;
    EngineStallStats s = sixRequestsAreServedByN1AndN0sEngineIsAvoidedAfterThree(k);
    assertEquals(0, k.node(0).stats().failed());
  }

  /**
   * Six requests entering at n0, whose engine fails each run, are all served by n1; n0's engine
   * is given the first 3 and then avoided as failing.
   *
   * @return n0's engine watch's stats after the six
   */
  private static EngineStallStats sixRequestsAreServedByN1AndN0sEngineIsAvoidedAfterThree(
      Cluster k) {
    for (int i = 0; i < 6; i++) {
      InferenceRequest r = request("r" + i, prompt(i, 200));
      InferenceResponse a = k.await(k.node(0).submit(r).handle((x, e) -> {
        if (e != null) {
          throw new AssertionError("n0's request failed though n1 could serve it", e);
        }
        return x;
      }));
      assertEquals("n1", a.servedBy(), a.toString());
      assertArrayEquals(expected(r), a.result().outputTokens());
    }
    EngineStallStats s = k.watch(0);
    assertEquals(3, k.engine(0).calls,
        "after 3 failures in a row the engine is avoided; it was given every request: " + s);
    assertEquals(1, s.failing(), s.toString());
    return s;
  }

  @Test
  void timeoutsAreLeftToTheStallCheck() {
    Cluster k = new Cluster(2, config().build());
    k.engine(0).failure = new EngineTimeoutException("no answer in time", null);
    for (int i = 0; i < 6; i++) {
      k.await(k.node(0).submit(request("r" + i, prompt(i, 200))).handle((x, e) -> e));
    }
    assertEquals(6, k.engine(0).calls);
    assertEquals(0, k.watch(0).failing());
  }

  @Test
  void withNoPeerAFailingEngineStillGetsEveryRequestAndEachOneAnswer() {
    Cluster k = new Cluster(1, config().build());
    k.engine(0).failure = REFUSED;
    for (int i = 0; i < 6; i++) {
      Throwable t = k.failureOf(k.node(0).submit(request("r" + i, prompt(i, 200))));
      assertInstanceOf(RequestFailedException.class, t);
      assertTrue(t.getCause() == REFUSED, String.valueOf(t.getCause()));
    }
    assertEquals(6, k.engine(0).calls, "with no peer to go to, every request runs here");
    assertEquals(1, k.watch(0).failing());
    k.engine(0).failure = null;
    InferenceRequest r = request("ok", prompt(7, 200));
    InferenceResponse a = k.await(k.node(0).submit(r));
    assertEquals("n0", a.servedBy());
    assertArrayEquals(expected(r), a.result().outputTokens());
    assertEquals(0, k.watch(0).failing());
  }
}
