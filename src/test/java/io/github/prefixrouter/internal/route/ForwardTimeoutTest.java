package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.SimulatedEngine;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Forwarding under real engine timing, on simulated time: a peer that holds the prefix answers
 * a long generation once, whether or not its engine reports timings, instead of the forward
 * timing out and the request running a second time at the origin.
 */
class ForwardTimeoutTest {

  static final int[] PREFIX = prompt(42, 480);

  /** An engine like the OpenAI-compatible adapter: results carry no prefill or decode time. */
  static final class NoTimings extends ForwardingEngine {
    NoTimings(InferenceEngine e) {
      super(e);
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      return delegate.execute(r).thenApply(x -> new EngineResult(x.outputTokens(), x.text(),
          x.promptTokens(), x.cachedPromptTokens(), -1, -1));
    }
  }

  /** Two nodes, 1 ms one way; n1's engine caches PREFIX; engines decode at {@code decodeMs}. */
  static OracleCluster cluster(long decodeMs, boolean timings) {
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    hooks.engineTweak = b -> b.decodeNanosPerToken(Duration.ofMillis(decodeMs).toNanos());
    if (!timings) {
      hooks.engineWrap = NoTimings::new;
    }
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .coldPlacement(false).build();
    OracleCluster c = new OracleCluster(2, cfg, 1, hooks).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    return c;
  }

  /** n0 serves {@code n} requests of its own (no peer holds their prefix), learning from them. */
  static void runLocally(OracleCluster c, int n, int maxTokens) {
    for (int i = 0; i < n; i++) {
      InferenceRequest r = new InferenceRequest("local-" + i,
          concat(prompt(500 + i, 300), prompt(600 + i, 50)), GenerationParams.greedy(maxTokens));
      InferenceResponse resp = c.submitAndWait("n0", r);
      assertEquals("n0", resp.servedBy());
    }
  }

  /** Submits a request for PREFIX at n0 and checks that n1 answered it, once. */
  static void assertAnsweredByThePeerOnce(OracleCluster c, int maxTokens, double expectedSeconds) {
    SimulatedEngine.Stats e0 = c.engine("n0").stats();
    SimulatedEngine.Stats e1 = c.engine("n1").stats();
    InferenceRequest q = new InferenceRequest("q", concat(PREFIX, prompt(9, 64)),
        GenerationParams.greedy(maxTokens));
    long t0 = c.sim.nanoTime();
    InferenceResponse resp = c.submitAndWait("n0", q);
    double seconds = (c.sim.nanoTime() - t0) / 1e9;
    assertEquals(FallbackCause.NONE, resp.fallbackCause(),
        "the forward fell back after " + seconds + " s");
    assertEquals("n1", resp.servedBy());
    assertEquals(1, resp.attempts());
    assertArrayEquals(expected(q), resp.result().outputTokens());
    assertEquals(e0.requests(), c.engine("n0").stats().requests(), "the request ran at n0 too");
    assertEquals(e1.requests() + 1, c.engine("n1").stats().requests());
    assertEquals(0, c.node("n0").stats().fallbacks().get(FallbackCause.TIMEOUT));
    assertTrue(seconds < expectedSeconds * 1.1, "took " + seconds + " s");
  }

  @Test
  void anEngineWithoutTimingsIsTimedByTheNodeSoAForwardIsNotCutShort() {
    // old code: the model never learned (decode stayed 1 ms/token), the forward timed out after
    // about 1 s and the request ran again at n0: 5.1 s against 4.1 s
    OracleCluster c = cluster(20, false);
    runLocally(c, 3, 200);
    assertAnsweredByThePeerOnce(c, 200, 4.1);
  }

  @Test
  void aFirstForwardBeforeAnythingIsKnownWaitsForTheAnswer() {
    // old code: the 1 ms/token prior gave a 1 s timeout to a 4 s generation
    OracleCluster c = cluster(20, false);
    assertAnsweredByThePeerOnce(c, 200, 4.1);
  }

  @Test
  void anEngineThatReportsTimingsIsLearnedFromItsFirstResults() {
    // old code: after two results the EWMA had moved from 1 to 2.9 ms/token of the 20: the
    // forward timed out after about 2.3 s, 6.4 s in all
    OracleCluster c = cluster(20, true);
    runLocally(c, 2, 200);
    assertAnsweredByThePeerOnce(c, 200, 4.1);
  }

  @Test
  void aGenerationLongerThanTheTimeoutCapIsAnsweredByThePeerOnce() {
    // 2,000 tokens at 40 ms/token: 80 s, past the 60 s cap. Old code: TIMEOUT (after 8 s with
    // the 1 ms/token prior; the cap would have cut it at 60 s anyway), then 80 s more at n0:
    // 88 s
    OracleCluster c = cluster(40, false);
    runLocally(c, 1, 200);
    assertAnsweredByThePeerOnce(c, 2_000, 81);
  }

  @Test
  void aPeerSlowerThanTheModelGetsALongerTimeoutAfterItsFirstTimeout() {
    // n0's own engine decodes at 5 ms/token, n1's at 30: the model learned at n0 says a
    // 200-token generation takes 1 s, so the first forward (6 s at n1) times out after 4 s;
    // after the cool-down the next forward to n1 waits twice as long. Old code: every forward
    // to n1 times out (the timeout knows nothing of the peer)
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    AtomicInteger built = new AtomicInteger();
    hooks.engineTweak = b -> b.decodeNanosPerToken(
        Duration.ofMillis(built.getAndIncrement() == 1 ? 30 : 5).toNanos());
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .coldPlacement(false).build();
    OracleCluster c = new OracleCluster(2, cfg, 1, hooks).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    int[] other = prompt(43, 480); // the first request's fallback caches PREFIX at n0
    c.warm("n1", concat(other, prompt(1, 40)));
    runLocally(c, 2, 200);
    InferenceRequest first = new InferenceRequest("first", concat(PREFIX, prompt(8, 64)),
        GenerationParams.greedy(200));
    InferenceResponse r1 = c.submitAndWait("n0", first);
    assertEquals(FallbackCause.TIMEOUT, r1.fallbackCause(), "the model is 6x too fast for n1");
    c.sim.advanceBy(cfg.failureCooldown().toNanos() + 1);
    long timeouts = c.node("n0").stats().fallbacks().get(FallbackCause.TIMEOUT);
    InferenceRequest q = new InferenceRequest("q", concat(other, prompt(9, 64)),
        GenerationParams.greedy(200));
    InferenceResponse resp = c.submitAndWait("n0", q);
    assertEquals("n1", resp.servedBy(), String.valueOf(resp.fallbackCause()));
    assertEquals(FallbackCause.NONE, resp.fallbackCause());
    assertEquals(timeouts, c.node("n0").stats().fallbacks().get(FallbackCause.TIMEOUT));
  }

  @Test
  void timeoutsAloneNeverLengthenTheTimeoutPastTheCap() {
    // a peer that hangs (alive to gossip, silent to forwards) must not be waited for longer and
    // longer: the backoff of its timeouts stays within forwardTimeoutMax
    OracleCluster c = cluster(20, false);
    runLocally(c, 1, 200);
    RouterNode n0 = c.node("n0");
    long max = c.config.forwardTimeoutMax().toNanos();
    PeerHealth.PeerState peer = new PeerHealth.PeerState();
    long learned = n0.forwardTimeout(peer, 0, 0, 200, 0);
    // 4 x 200 tokens x the 20 ms/token the node timed (plus the prefill it could not tell apart)
    assertTrue(learned >= 16e9 && learned < 20e9, "timeout " + learned / 1e9 + " s");
    peer.timedOut();
    assertEquals(2 * learned, n0.forwardTimeout(peer, 0, 0, 200, 0), 1e6);
    for (int i = 0; i < 20; i++) {
      peer.timedOut();
    }
    assertEquals(max, n0.forwardTimeout(peer, 0, 0, 200, 0));
    peer.observeService(4_000_000_000L, 4e9); // it answers as predicted: the backoff ends
    assertEquals(learned, n0.forwardTimeout(peer, 0, 0, 200, 0), 1e6);
    // a generation expected to outlast the cap is still waited for: twice its expected time
    long longOne = n0.forwardTimeout(peer, 0, 0, 2_000, 0);
    assertTrue(longOne > max, "timeout " + longOne / 1e9 + " s");
    assertEquals(longOne, n0.forwardTimeout(peer, 0, 0, 2_000, 0));
    for (int i = 0; i < 20; i++) {
      peer.timedOut();
    }
    assertEquals(longOne, n0.forwardTimeout(peer, 0, 0, 2_000, 0),
        "timeouts must not lengthen it past twice the expected time");
  }

  @Test
  void aForwardToAPeerThatDiesEndsWhenTheFailureDetectorDropsIt() {
    // the long timeout of a long generation must not hold a request to a dead peer: old code
    // timed out after about 1 s (TIMEOUT) only because its timeout was too short for a live peer
    OracleCluster c = cluster(20, false);
    InferenceRequest q = new InferenceRequest("q", concat(PREFIX, prompt(9, 64)),
        GenerationParams.greedy(200));
    long t0 = c.sim.nanoTime();
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(q);
    c.sim.advanceBy(Duration.ofMillis(1_500).toNanos());
    assertTrue(!f.isDone());
    c.crash("n1");
    while (!f.isDone() && c.sim.runNext()) {
      // keep going
    }
    InferenceResponse resp = f.join();
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.UNREACHABLE, resp.fallbackCause());
    double seconds = (c.sim.nanoTime() - t0) / 1e9;
    // noticed within one check (half of peerSuspectAfter), then 4.1 s here
    assertTrue(seconds < 1.5 + c.config.peerSuspectAfter().toNanos() / 2e9 + 4.2,
        "took " + seconds + " s");
  }

  @Test
  void aForwardEndedBecauseItsPeerIsSuspectedIsCancelledAtThePeer() {
    // suspected is not dead: the peer below is alive and the network still delivers, only the
    // sender's view stops listing it; its engine must not generate the answer for nobody
    RouterConfig config = RouterConfig.builder().policy(RoutingPolicy.COST_AWARE)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false)
        .peerTimeouts(Duration.ofMillis(400), Duration.ofSeconds(2)).build();
    OracleCluster c = new OracleCluster(2, config, 3).rtt(Duration.ofMillis(1)).start();
    int[] p = prompt(5, 2000);
    c.warm("n1", p);
    CompletableFuture<InferenceResponse> f =
        c.node("n0").submit(new InferenceRequest("r1", p, GenerationParams.greedy(200)));
    c.sim.advanceBy(Duration.ofMillis(100).toNanos());
    assertEquals(2, c.engine("n1").stats().requests(), "n1 runs the forward (after the warm-up)");
    c.dead.add("n1");
    c.runUntilDone(f);
    assertEquals("n0", f.join().servedBy());
    assertEquals(FallbackCause.UNREACHABLE, f.join().fallbackCause());
    c.sim.runUntilIdle(1_000_000);
    assertEquals(1, c.engine("n1").stats().cancelled(),
        "n1 was sent no CANCEL; it completed " + c.engine("n1").stats().completed());
  }
}
