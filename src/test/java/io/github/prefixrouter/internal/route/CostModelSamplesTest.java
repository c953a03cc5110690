package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.lang.reflect.Field;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * The cost model keeps learning for as long as a node runs: its counts of samples saturate
 * instead of wrapping to negative numbers that would switch learning off; the learned prefill
 * slope replaces the prior at the eighth sample, not before; and what a peer says of its own
 * time on a forward is believed only up to the time the forward took.
 */
class CostModelSamplesTest {

  @Test
  void thePrefillSlopeIsStillLearnedAfterTwoToThe31Samples() throws Exception {
    CostModel m = new CostModel(100_000);
    // as after 2^31 - 1 results reporting their prefill (25 days at 1,000 results a second):
    // set directly, counting them one by one would take minutes
    Field samples = CostModel.class.getDeclaredField("samples");
    samples.setAccessible(true);
    samples.setInt(m, Integer.MAX_VALUE);
    for (int i = 0; i < 200; i++) {
      int uncached = 100 + (i % 10) * 100;
      m.observe(new EngineResult(new int[] {1}, "", uncached, 0, 300_000L * uncached, 1_000));
    }
    assertEquals(300_000, m.prefillNanosPerToken(), 3_000);
  }

  @Test
  void theEighthReportedPrefillTimeReplacesThePriorNotTheSeventh() {
    // routing.md: the slope stays the prior until 8 reported prefill times with spread fit it.
    // Engine timings of 2 ms plus 300 µs per uncached token, the uncached counts spread from
    // the first two on: only the count of samples holds the prior
    CostModel m = new CostModel(100_000);
    for (int i = 1; i <= 8; i++) {
      int uncached = 100 * i;
      m.observe(new EngineResult(new int[] {1}, "", uncached + 50, 50,
          2 * RoutePlannerTest.MS + 300_000L * uncached, 1_000));
      if (i < 8) {
        assertEquals(100_000, m.prefillNanosPerToken(),
            "the slope after " + i + " reported prefill times");
      }
    }
    assertEquals(300_000, m.prefillNanosPerToken(), 300,
        "the slope after 8 reported prefill times");
  }

  @Test
  void theEighthTimedRunReplacesThePriorNotTheSeventh() {
    // the same for an engine that reports no timings, from the node's own timing of its runs:
    // 5 ms plus 1 ms per uncached token plus 20 ms per output token, output lengths not tied to
    // the uncached counts; the cached count the engine's, else the node's estimate
    int[] outputs = {3, 7, 1, 5, 8, 2, 6, 4};
    for (boolean estimated : new boolean[] {false, true}) {
      CostModel m = new CostModel(100_000);
      for (int i = 1; i <= 8; i++) {
        int uncached = 100 * i;
        int out = outputs[i - 1];
        long nanos = 5 * RoutePlannerTest.MS + 1_000_000L * uncached
            + 20 * RoutePlannerTest.MS * out;
        int cached = 1_000 - uncached;
        m.observe(new EngineResult(new int[out], "", 1_000, estimated ? -1 : cached, -1, -1),
            nanos, estimated ? cached : -1);
        if (i < 8) {
          assertEquals(100_000, m.prefillNanosPerToken(), "the slope after " + i
              + " timed runs, cached counts " + (estimated ? "estimated" : "reported"));
        }
      }
      assertEquals(1_000_000, m.prefillNanosPerToken(), 1_000, "the slope after 8 timed runs, "
          + "cached counts " + (estimated ? "estimated" : "reported"));
    }
  }

  @Test
  void aPeerClaimingMoreTimeThanTheForwardTookDoesNotTeachThatTime() throws Exception {
    // n1 answers after 50 ms, from an engine that reports no timings (an OpenAI-compatible
    // server), but says it spent 10^15 ns (11.6 days) on the request: the node learns its
    // service time from a peer's own time for such engines, and took 11.6 days for the mean
    // service time, which priced every queued request at days
    CostModel cost = afterOneForward(1_000_000_000_000_000L, -1, -1);
    assertTrue(cost.serviceNanos() <= 50 * RoutePlannerTest.MS,
        "learned a service time of " + cost.serviceNanos() + " ns from a 50 ms forward");
  }

  @Test
  void engineTimingsLongerThanTheForwardAreNotLearned() throws Exception {
    // the same from an engine that reports its timings: a prefill of 10^15 ns in a 50 ms
    // forward was learned as a service time of 11.6 days
    CostModel cost = afterOneForward(40 * RoutePlannerTest.MS, 1_000_000_000_000_000L, 1_000);
    assertTrue(cost.serviceNanos() <= 50 * RoutePlannerTest.MS,
        "learned a service time of " + cost.serviceNanos() + " ns from a 50 ms forward");
    // consistent timings are learned as before
    CostModel ok = afterOneForward(40 * RoutePlannerTest.MS, 30 * RoutePlannerTest.MS,
        5 * RoutePlannerTest.MS);
    assertEquals(35 * RoutePlannerTest.MS, ok.serviceNanos(), 1);
  }

  @Test
  void localEngineTimingsLongerThanTheRunAreNotLearned() {
    // the node timed each run itself (submission to result on its clock: 19.8 ms with the
    // simulated engine), but its own engine reported 10^15 ns (11.6 days) of prefill for each,
    // and that was learned as the service time, pricing every local run at days
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.engineWrap = e -> new ForwardingEngine(e) {
      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest r) {
        return e.execute(r).thenApply(res -> new EngineResult(res.outputTokens(), res.text(),
            res.promptTokens(), res.cachedPromptTokens(), 1_000_000_000_000_000L
                + res.promptTokens() * 1_000_000_000_000L, res.decodeNanos()));
      }
    };
    RouterConfig cfg = RouterConfig.builder().initialPrefillNanosPerToken(200_000).build();
    OracleCluster c = new OracleCluster(1, cfg, 3, h).start();
    RouterNode n0 = c.node("n0");
    for (int i = 0; i < 20; i++) {
      c.submitAndWait("n0", InferenceRequest.of("q" + i, prompt(100 + i, 64 + 8 * i)));
    }
    assertTrue(n0.learnedServiceNanos() <= 50 * RoutePlannerTest.MS,
        "learned a service time of " + n0.learnedServiceNanos() + " ns from runs of ~20 ms");
    assertTrue(n0.learnedPrefillNanosPerToken() <= 1_000_000,
        "learned a prefill of " + n0.learnedPrefillNanosPerToken() + " ns per token");
  }

  @Test
  void runsTheNodeTimedTeachThePrefillSlopeWhenTheEngineReportsNone() {
    // an engine that reports no timings (the OpenAI-compatible adapter): each run takes a fixed
    // 30 ms, 2.5 ms per uncached prompt token and 20 ms per output token, output lengths
    // growing with the prompt (a longer prompt, a longer answer); the node timed every run, and
    // its prefill price stayed at the 100 µs prior for good
    CostModel m = new CostModel(100_000);
    java.util.SplittableRandom rnd = new java.util.SplittableRandom(7);
    for (int i = 0; i < 400; i++) {
      int prompt = 200 + rnd.nextInt(600);
      int cached = rnd.nextBoolean() ? 0 : rnd.nextInt(prompt);
      int out = 1 + (prompt - cached) / 40 + rnd.nextInt(60);
      long nanos = 30 * RoutePlannerTest.MS + 2_500_000L * (prompt - cached) + 20 * RoutePlannerTest.MS * out;
      m.observe(new EngineResult(new int[out], "", prompt, -1, -1, -1), nanos, cached);
    }
    assertEquals(2_500_000, m.prefillNanosPerToken(), 25_000);
    // the decode is what the prefill does not explain, the fixed part included (an upper bound)
    assertTrue(m.decodeNanosPerToken() >= 20 * RoutePlannerTest.MS
        && m.decodeNanosPerToken() <= 24 * RoutePlannerTest.MS, "decode " + m.decodeNanosPerToken());
  }

  @Test
  void timedRunsOfOneOutputLengthTeachTheSlopeAndUntoldCachedCountsTeachNothing() {
    CostModel m = new CostModel(100_000);
    for (int i = 0; i < 100; i++) {
      int uncached = 100 + 37 * (i % 11);
      m.observe(new EngineResult(new int[16], "", 1_000, 1_000 - uncached, -1, -1),
          5 * RoutePlannerTest.MS + 1_000_000L * uncached + 16 * 10 * RoutePlannerTest.MS, -1);
    }
    assertEquals(1_000_000, m.prefillNanosPerToken(), 10_000);
    CostModel blind = new CostModel(100_000);
    for (int i = 0; i < 100; i++) {
      blind.observe(new EngineResult(new int[16], "", 100 + 37 * (i % 11), -1, -1, -1),
          RoutePlannerTest.MS * (5 + i % 11), -1);
    }
    assertEquals(100_000, blind.prefillNanosPerToken(), "no cached count, reported or estimated");
  }

  @Test
  void reportedPrefillTimesOutrankTheNodesTiming() {
    CostModel m = new CostModel(100_000);
    for (int i = 0; i < 20; i++) {
      int uncached = 100 + 50 * (i % 7);
      m.observe(new EngineResult(new int[8], "", uncached, 0, 300_000L * uncached, 1_000));
    }
    assertEquals(300_000, m.prefillNanosPerToken(), 3_000);
    for (int i = 0; i < 100; i++) {
      int uncached = 100 + 50 * (i % 7);
      m.observe(new EngineResult(new int[8], "", uncached, 0, -1, -1), 5_000_000L * uncached, 0);
    }
    assertEquals(300_000, m.prefillNanosPerToken(), 3_000);
  }

  @Test
  void aNodeWhoseEngineReportsNoTimingsLearnsItsPrefillFromItsOwnRuns() {
    // the same runs on the simulated engine, its timings reported to one node and stripped
    // for the other: both learn the engine's prefill price, the second from its own timing
    double[] learned = new double[2];
    for (int strip = 0; strip < 2; strip++) {
      OracleCluster.Hooks h = new OracleCluster.Hooks();
      if (strip == 1) {
        h.engineWrap = e -> new ForwardingEngine(e) {
          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            return e.execute(r).thenApply(res -> new EngineResult(res.outputTokens(), res.text(),
                res.promptTokens(), res.cachedPromptTokens(), -1, -1));
          }
        };
      }
      RouterConfig cfg = RouterConfig.builder().initialPrefillNanosPerToken(20_000).build();
      OracleCluster c = new OracleCluster(1, cfg, 3, h).start();
      for (int i = 0; i < 40; i++) {
        c.submitAndWait("n0", InferenceRequest.of("q" + i, prompt(100 + i, 64 + 24 * (i % 9))));
      }
      learned[strip] = c.node("n0").learnedPrefillNanosPerToken();
    }
    assertTrue(learned[0] > 40_000, "the reported slope: " + learned[0]);
    assertEquals(learned[0], learned[1], learned[0] * 0.05,
        "learned from reported timings " + learned[0] + ", from the node's timing " + learned[1]);
  }

  /**
   * n0's cost model after it forwarded one request to n1, whose answer comes 50 ms later with
   * {@code serverNanos} and the engine timings given ({@code -1}: not reported).
   */
  static CostModel afterOneForward(long serverNanos, long prefillNanos, long decodeNanos)
      throws Exception {
    AtomicReference<SimulatedScheduler> sim = new AtomicReference<>();
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    hooks.transportWrap = t -> !t.localAddress().nodeId().equals("n0") ? t
        : new ForwardingTransport(t) {
          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
              Duration timeout) {
            if (payload.length == 0 || payload[0] != ForwardCodec.FORWARD) {
              return delegate.request(to, payload, timeout);
            }
            InferenceRequest asked;
            try {
              asked = ((ForwardCodec.Forward) ForwardCodec.decode(payload)).request();
            } catch (Exception e) {
              return CompletableFuture.failedFuture(e);
            }
            CompletableFuture<byte[]> out = new CompletableFuture<>();
            sim.get().schedule(50 * RoutePlannerTest.MS, () -> out.complete(
                ForwardCodec.result(asked.id(), "n1", serverNanos,
                    new EngineResult(expected(asked), "", asked.length(), 0, prefillNanos,
                        decodeNanos))));
            return out;
          }
        };
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).build();
    OracleCluster c = new OracleCluster(2, cfg, 1, hooks);
    sim.set(c.sim);
    c.rtt(Duration.ofMillis(1)).start();
    int[] prefix = prompt(42, 480);
    c.warm("n1", concat(prefix, prompt(1, 40)));
    InferenceResponse r = c.submitAndWait("n0",
        OracleCluster.request("q", concat(prefix, prompt(9, 40))));
    assertEquals("n1", r.servedBy(), r.decision().toString());
    Field f = RouterNode.class.getDeclaredField("cost");
    f.setAccessible(true);
    return (CostModel) f.get(c.node("n0"));
  }
}
