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
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;

/**
 * The forwarding timeout of a prompt longer than anything the node has seen, on simulated time:
 * the prefill prior (100 µs/token) must not cut short a cold prompt whose peer computes it at
 * 1 ms/token, and a peer that truly hangs is still given up on within the cap.
 */
class LongPromptTimeoutTest {

  static final int OUT = 8;

  /**
   * {@code n} nodes with the default (cost-aware, cold placement) configuration, 5 ms one way,
   * so that a prompt under about 400 tokens runs where it is submitted (a peer costs the trip
   * more, past the cold placement's slack) and a longer one is placed on a peer; engines of 2 ms
   * + 1 ms per uncached token of prefill and 5 ms per output token.
   */
  static OracleCluster cluster(int n, boolean timings, Hang hang) {
    return cluster(n, RouterConfig.builder().build(), timings, true, hang);
  }

  /**
   * As above; an engine without {@code timings} reports no prefill and decode times, like the
   * OpenAI-compatible adapter, and one without {@code counts} no cached prompt tokens either
   * (vLLM without {@code --enable-prompt-tokens-details}).
   */
  static OracleCluster cluster(int n, RouterConfig cfg, boolean timings, boolean counts,
      Hang hang) {
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    hooks.engineTweak = b -> b.prefillNanosPerToken(1_000_000).decodeNanosPerToken(5_000_000);
    hooks.engineWrap = e -> {
      InferenceEngine spi = timings ? e : counts ? new ForwardTimeoutTest.NoTimings(e)
          : new NoCounts(e);
      return hang != null && hang.engines++ == 1 ? hang.wrap(spi) : spi;
    };
    return new OracleCluster(n, cfg, 1, hooks).rtt(Duration.ofMillis(5)).start();
  }

  /** Reports neither timings nor cached prompt tokens. */
  static final class NoCounts implements InferenceEngine {
    final InferenceEngine e;

    NoCounts(InferenceEngine e) {
      this.e = e;
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      return e.execute(r).thenApply(x -> new EngineResult(x.outputTokens(), x.text(),
          x.promptTokens(), -1, -1, -1));
    }

    @Override
    public EngineLoad load() {
      return e.load();
    }

    @Override
    public void cancel(String requestId) {
      e.cancel(requestId);
    }
  }

  /** Makes the second engine built (n1's) never answer while {@link #on} is set. */
  static final class Hang {
    final AtomicBoolean on = new AtomicBoolean();
    int engines;

    InferenceEngine wrap(InferenceEngine e) {
      return new InferenceEngine() {
        @Override
        public CompletableFuture<EngineResult> execute(InferenceRequest r) {
          return on.get() ? new CompletableFuture<>() : e.execute(r);
        }

        @Override
        public EngineLoad load() {
          return e.load();
        }

        @Override
        public void cancel(String requestId) {
          e.cancel(requestId);
        }
      };
    }
  }

  /** A request of {@code length} fresh tokens whose decision at n0 {@code wanted} accepts. */
  static InferenceRequest find(OracleCluster c, String id, int length,
      Predicate<RouteDecision> wanted) {
    for (long seed = 1_000; seed < 2_000; seed++) {
      InferenceRequest r = new InferenceRequest(id, prompt(seed, length),
          GenerationParams.greedy(OUT));
      if (wanted.test(c.node("n0").explain(r))) {
        return r;
      }
    }
    throw new AssertionError("no prompt of " + length + " tokens is placed as wanted");
  }

  static Predicate<RouteDecision> coldPlacedOn(String peer) {
    return d -> d.reason() == RouteDecision.Reason.COLD_PLACEMENT
        && peer.equals(d.targetNodeId());
  }

  static Predicate<RouteDecision> coldPlacedOnAPeer() {
    return d -> d.reason() == RouteDecision.Reason.COLD_PLACEMENT && !d.isLocal();
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
  void aColdPromptLongerThanAnySampledIsAnsweredByThePeerOnce() {
    // The review's scenario: n0 ran 300-token prompts, then a 3,000-token cold prompt is placed
    // on a peer whose engine (no timings) takes 3.04 s. Old code: the prior priced its prefill
    // at 0.3 s, the timeout was 2.5 s: both peers timed out and it ran at n0 (3 attempts)
    OracleCluster c = cluster(3, false, null);
    shortPrompts(c, 3);
    InferenceRequest q = find(c, "long", 3_000, coldPlacedOnAPeer());
    assertForwardedOnce(c, q, 3.05);
  }

  @Test
  void aPromptTheSamplesCoverIsTimedOutOnTheirBoundNotOnThePrior() {
    // An engine that reports timings, but too few samples to learn the slope: the prior says
    // 100 µs/token. n0 ran a 3,000-token prompt itself (3.0 s of prefill); a prompt of 2,000
    // uncached tokens at n1 is covered, its prefill bounded by 2,000 x 3.0 s / 3,000. Old code:
    // a timeout of 1 s (the floor) for 2.05 s at n1: TIMEOUT, then 2.5 s more here
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .coldPlacement(false).build();
    OracleCluster c = cluster(2, cfg, true, true, null);
    InferenceRequest first = new InferenceRequest("first", prompt(7, 3_000),
        GenerationParams.greedy(OUT));
    assertEquals("n0", c.submitAndWait("n0", first).servedBy());
    assertEquals(1e5, c.node("n0").learnedPrefillNanosPerToken(), 1, "the slope is the prior");
    int[] prefix = prompt(42, 480);
    c.warm("n1", concat(prefix, prompt(1, 40)));
    InferenceRequest q = new InferenceRequest("q", concat(prefix, prompt(8, 2_000)),
        GenerationParams.greedy(OUT));
    assertEquals("n1", c.node("n0").explain(q).targetNodeId());
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
    OracleCluster c = cluster(2, RouterConfig.builder().build(), false, counts, hang);
    shortPrompts(c, 3);
    hang.on.set(true);
    long cap = c.config.forwardTimeoutMax().toNanos();

    // a prompt longer than any sampled: the timeout is the cap, then it runs here (3.04 s)
    InferenceRequest q = find(c, "long", 3_000, coldPlacedOn("n1"));
    long t0 = c.sim.nanoTime();
    InferenceResponse resp = c.submitAndWait("n0", q);
    double seconds = (c.sim.nanoTime() - t0) / 1e9;
    assertEquals(FallbackCause.TIMEOUT, resp.fallbackCause());
    assertEquals("n0", resp.servedBy());
    assertEquals(2, resp.attempts());
    assertArrayEquals(expected(q), resp.result().outputTokens());
    assertTrue(seconds >= cap / 1e9 && seconds < cap / 1e9 + 3.1, "took " + seconds + " s");
    // the timeout was a guess: n1 is not cooled down, a request placed there is sent there
    InferenceRequest next = find(c, "next", 1_000, coldPlacedOn("n1"));
    RouteDecision d = c.node("n0").explain(next);
    assertEquals("n1", d.targetNodeId());

    // a prompt the samples (now the 3,000-token run here) cover: timed out on what was
    // learned, well within the cap, and then n1 is cooled down
    t0 = c.sim.nanoTime();
    resp = c.submitAndWait("n0", next);
    seconds = (c.sim.nanoTime() - t0) / 1e9;
    assertEquals(FallbackCause.TIMEOUT, resp.fallbackCause());
    assertEquals("n0", resp.servedBy());
    assertTrue(seconds > 2 && seconds < cap / 2e9, "took " + seconds + " s");
    RouteDecision after = c.node("n0").explain(find(c, "later", 1_000, d2 -> true));
    assertFalse(after.candidates().stream().anyMatch(k -> "n1".equals(k.nodeId())
        && k.skipped() == RouteDecision.SkipReason.NONE), "n1 was not cooled down: " + after);
  }
}
