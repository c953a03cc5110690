package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.OracleCluster.request;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A clock's readings are meaningful only as differences, from an arbitrary origin
 * ({@link io.github.prefixrouter.spi.Clock}): what a node remembers of a peer for a while (a
 * busy or failure cool-down, a FORWARD version the peer rejected) must hold for that while
 * whatever the readings are, also when the end of the while lies past {@link Long#MAX_VALUE}.
 */
class ClockOriginTest {

  static final int[] PREFIX = prompt(42, 480);

  /** Runs at most {@code maxTasks} simulated tasks, until {@code f} is done. */
  static void runUntilDone(OracleCluster c, CompletableFuture<?> f, int maxTasks) {
    for (int i = 0; i < maxTasks && !f.isDone() && c.sim.runNext(); i++) {
      // keep going
    }
  }

  @Test
  void aPeerFromBeforeStreamingIsAskedToStreamOnceWhateverTheClocksOrigin() {
    // the clock reads a minute before Long.MAX_VALUE: the 5 minutes for which the node
    // remembers that the peer does not speak streaming FORWARDs end past it
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.startNanos = Long.MAX_VALUE - Duration.ofMinutes(1).toNanos();
    AtomicInteger rejected = new AtomicInteger();
    StreamingTest.beforeStreaming(h, "n1", rejected);
    OracleCluster c = new OracleCluster(2, StreamingTest.forwarding(Duration.ZERO), 1, h)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    for (int i = 1; i <= 2; i++) {
      InferenceRequest r = new InferenceRequest("r" + i, concat(PREFIX, prompt(i, 40)),
          GenerationParams.greedy(20));
      StreamRecorder rec = new StreamRecorder(expected(r), c.sim::nanoTime);
      CompletableFuture<InferenceResponse> f = c.node("n0").submit(r, rec);
      rec.future = f;
      runUntilDone(c, f, 5_000);
      assertEquals(1, rejected.get(), "asked to stream once, then remembered");
      assertTrue(f.isDone());
      InferenceResponse resp = f.join();
      assertEquals("n1", resp.servedBy());
      assertEquals(1, resp.attempts());
      assertArrayEquals(expected(r), rec.tokens());
    }
  }

  @Test
  void aBusyPeerIsCooledDownWhateverTheClocksOrigin() {
    // the clock reads 10 s before Long.MAX_VALUE; the 30 s cool-down ends past it
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.startNanos = Long.MAX_VALUE - Duration.ofSeconds(10).toNanos();
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).watermarks(0, 1)
        .busyCooldown(Duration.ofSeconds(30)).build();
    OracleCluster c = new OracleCluster(2, cfg, 3, h).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 32)));
    InferenceRequest r1 = request("q1", concat(PREFIX, prompt(9, 32)));
    InferenceRequest r2 = request("q2", concat(PREFIX, prompt(10, 32)));
    CompletableFuture<InferenceResponse> f1 = c.node("n0").submit(r1);
    // n1 gets a local queue while q1 travels: the forward arrives to a full queue
    c.engine("n1").execute(request("bg1", prompt(5, 64)));
    c.engine("n1").execute(request("bg2", prompt(6, 64)));
    runUntilDone(c, f1, 100_000);
    InferenceResponse resp = f1.join();
    assertEquals(FallbackCause.BUSY, resp.fallbackCause());
    assertTrue(c.sim.nanoTime() < Long.MAX_VALUE - Duration.ofSeconds(5).toNanos());
    // within the cool-down the peer is skipped even though it is idle again
    c.sim.runUntilIdle(1_000_000);
    RouteDecision d = c.node("n0").explain(r2);
    assertEquals(RouteDecision.SkipReason.BUSY_COOLDOWN, d.candidates().get(1).skipped(),
        d.toString());
  }
}
