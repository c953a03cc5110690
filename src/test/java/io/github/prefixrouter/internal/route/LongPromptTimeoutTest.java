package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.ForwardingEngine;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * The forwarding timeout of a prompt longer than anything the node has seen, on simulated time:
 * the prefill prior (100 µs/token) must not cut short a long uncached prompt whose peer computes
 * it at 1 ms/token, and a peer that truly hangs is still given up on within the cap.
 */
class LongPromptTimeoutTest {

  static final int OUT = 8;

  /**
   * {@code n} nodes routing to the longest prefix, 1 ms one way (the oracle view gives no cold
   * placement: a prompt nobody holds runs where it is submitted); engines of 2 ms + 1 ms per
   * uncached token of prefill and 5 ms per output token. An engine without {@code timings}
   * reports no prefill and decode times, like the OpenAI-compatible adapter, and one without
   * {@code counts} no cached prompt tokens either (vLLM without
   * {@code --enable-prompt-tokens-details}).
   */
  static OracleCluster cluster(int n, boolean timings, boolean counts, Hang hang) {
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    hooks.engineTweak = b -> b.prefillNanosPerToken(1_000_000).decodeNanosPerToken(5_000_000);
    hooks.engineWrap = e -> {
      InferenceEngine spi = timings ? e : counts ? new ForwardTimeoutTest.NoTimings(e)
          : new NoCounts(e);
      return hang != null && hang.engines++ == 1 ? hang.wrap(spi) : spi;
    };
    // the hanging peer's engine watch would refuse forwards as busy once its engine had been
    // silent for the stall timeout (EngineStallTest); these tests are about the timeouts of a
    // peer that takes the forwards, so it is off
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .coldPlacement(false).engineStallTimeout(Duration.ZERO).build();
    return new OracleCluster(n, cfg, 1, hooks).rtt(Duration.ofMillis(1)).start();
  }

  /** Reports neither timings nor cached prompt tokens. */
  static final class NoCounts extends ForwardingEngine {
    NoCounts(InferenceEngine e) {
      super(e);
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      return delegate.execute(r).thenApply(x -> new EngineResult(x.outputTokens(), x.text(),
          x.promptTokens(), -1, -1, -1));
    }
  }

  /** Makes the second engine built (n1's) never answer while {@link #on} is set. */
  static final class Hang {
    final AtomicBoolean on = new AtomicBoolean();
    int engines;

    InferenceEngine wrap(InferenceEngine e) {
      return new ForwardingEngine(e) {
        @Override
        public CompletableFuture<EngineResult> execute(InferenceRequest r) {
          return on.get() ? new CompletableFuture<>() : e.execute(r);
        }
      };
    }
  }

  /** A prefix of 480 tokens (30 blocks), cached at {@code peers}' engines. */
  static int[] heldBy(OracleCluster c, long seed, String... peers) {
    int[] prefix = prompt(seed, 480);
    for (String p : peers) {
      c.warm(p, concat(prefix, prompt(1, 40)));
    }
    return prefix;
  }

  /** A request of {@code prefix} and {@code fresh} tokens nobody holds. */
  static InferenceRequest request(String id, int[] prefix, long seed, int fresh) {
    return new InferenceRequest(id, concat(prefix, prompt(seed, fresh)),
        GenerationParams.greedy(OUT));
  }

  /** n0 serves short prompts (300 tokens) itself and learns from them. */
  static void shortPrompts(OracleCluster c, int n) {
    for (int i = 0; i < n; i++) {
      InferenceRequest r = new InferenceRequest("short-" + i, prompt(500 + i, 300),
          GenerationParams.greedy(OUT));
      InferenceResponse resp = c.submitAndWait("n0", r);
      assertEquals("n0", resp.servedBy());
      assertEquals(1, resp.attempts());
    }
  }

  static long engineRuns(OracleCluster c) {
    long n = 0;
    for (String id : c.engines.keySet()) {
      n += c.engine(id).stats().requests();
    }
    return n;
  }

  /** Submits {@code q} at n0 and checks that the peer it was placed on answered it, once. */
  static void assertForwardedOnce(OracleCluster c, InferenceRequest q, double expectedSeconds) {
    String target = c.node("n0").explain(q).targetNodeId();
    long runs = engineRuns(c);
    long targetRuns = c.engine(target).stats().requests();
    long t0 = c.sim.nanoTime();
    InferenceResponse resp = c.submitAndWait("n0", q);
    double seconds = (c.sim.nanoTime() - t0) / 1e9;
    assertEquals(FallbackCause.NONE, resp.fallbackCause(),
        "the forward fell back after " + seconds + " s");
    assertEquals(1, resp.attempts());
    assertEquals(target, resp.servedBy());
    assertArrayEquals(expected(q), resp.result().outputTokens());
    assertEquals(runs + 1, engineRuns(c), "the request ran more than once");
    assertEquals(targetRuns + 1, c.engine(target).stats().requests());
    assertEquals(0, c.node("n0").stats().fallbacks().get(FallbackCause.TIMEOUT));
    assertTrue(seconds < expectedSeconds * 1.05, "took " + seconds + " s");
  }

  @Test
  void aPromptLongerThanAnySampledIsAnsweredByThePeerOnce() {
    // The review's scenario: n0 ran 300-token prompts, then a prompt of 3,000 uncached tokens
    // goes to a peer (both peers hold its first 480 tokens) whose engine (no timings) takes
    // 3.04 s. Old code: the prior priced its prefill at 0.3 s, the timeout was 2.5 s: both
    // peers timed out and it ran at n0 (3 attempts, 8.4 s; now 3.04 s)
    OracleCluster c = cluster(3, false, true, null);
    shortPrompts(c, 3);
    InferenceRequest q = request("long", heldBy(c, 42, "n1", "n2"), 8, 3_000);
    assertForwardedOnce(c, q, 3.05);
  }

  @Test
  void aPromptTheSamplesCoverIsTimedOutOnTheirBoundNotOnThePrior() {
    // An engine that reports timings, but too few samples to learn the slope: the prior says
    // 100 µs/token. n0 ran a 3,000-token prompt itself (3.0 s of prefill); a prompt of 2,000
    // uncached tokens at n1 is covered, its prefill bounded by 2,000 x 3.0 s / 3,000. Old code:
    // a timeout of 1 s (the floor) for 2.04 s at n1: TIMEOUT, then 2.5 s more here (3.5 s)
    OracleCluster c = cluster(2, true, true, null);
    InferenceRequest first = new InferenceRequest("first", prompt(7, 3_000),
        GenerationParams.greedy(OUT));
    assertEquals("n0", c.submitAndWait("n0", first).servedBy());
    assertEquals(1e5, c.node("n0").learnedPrefillNanosPerToken(), 1, "the slope is the prior");
    InferenceRequest q = request("q", heldBy(c, 42, "n1"), 8, 2_000);
    assertForwardedOnce(c, q, 2.06);
  }

  @Test
  void aPeerThatHangsStillTimesOutWithinTheCapAndItsGuessIsNotCooledDown() {
    hangingPeer(true);
  }

  @Test
  void withoutCachedCountsTheLocalMatchTellsWhatARunCovered() {
    // the same with engines that report no cached tokens: what n0 ran covers the prompt's
    // length less the local tree's match, so the second forward is not a guess either
    hangingPeer(false);
  }

  void hangingPeer(boolean counts) {
    Hang hang = new Hang();
    OracleCluster c = cluster(2, false, counts, hang);
    shortPrompts(c, 3);
    int[] a = heldBy(c, 42, "n1");
    int[] b = heldBy(c, 43, "n1");
    int[] d = heldBy(c, 44, "n1");
    hang.on.set(true);
    long cap = c.config.forwardTimeoutMax().toNanos();

    // a prompt longer than any sampled: the timeout is the cap, then it runs here (3.5 s)
    InferenceRequest q = request("long", a, 8, 3_000);
    long t0 = c.sim.nanoTime();
    InferenceResponse resp = c.submitAndWait("n0", q);
    double seconds = (c.sim.nanoTime() - t0) / 1e9;
    assertEquals(FallbackCause.TIMEOUT, resp.fallbackCause());
    assertEquals("n0", resp.servedBy());
    assertEquals(2, resp.attempts());
    assertArrayEquals(expected(q), resp.result().outputTokens());
    assertTrue(seconds >= cap / 1e9 && seconds < cap / 1e9 + 3.6, "took " + seconds + " s");
    // the timeout was a guess: n1 is not cooled down, the next request for its prefix goes there
    InferenceRequest next = request("next", b, 9, 1_000);
    assertEquals("n1", c.node("n0").explain(next).targetNodeId());

    // a prompt the samples (now the 3,480-token run here) cover: timed out on what was
    // learned, well within the cap, and then n1 is cooled down
    t0 = c.sim.nanoTime();
    resp = c.submitAndWait("n0", next);
    seconds = (c.sim.nanoTime() - t0) / 1e9;
    assertEquals(FallbackCause.TIMEOUT, resp.fallbackCause());
    assertEquals("n0", resp.servedBy());
    assertTrue(seconds > 2 && seconds < cap / 2e9, "took " + seconds + " s");
    RouteDecision after = c.node("n0").explain(request("later", d, 10, 1_000));
    assertTrue(after.isLocal(), String.valueOf(after));
    assertFalse(after.candidates().stream().anyMatch(k -> "n1".equals(k.nodeId())
        && k.skipped() == RouteDecision.SkipReason.NONE), "n1 was not cooled down: " + after);
  }
}
