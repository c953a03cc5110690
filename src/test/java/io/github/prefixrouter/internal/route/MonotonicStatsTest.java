package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.testing.ForwardingEngine;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * The counters of {@link NodeStats} are monotonic as {@code stats()} sees them, also while
 * clients cancel their requests on the answer's own piece: such an answer is not counted, and
 * was never counted and then taken back (a concurrent {@code stats()} saw served locally and the
 * prompt tokens go up, then down).
 */
class MonotonicStatsTest {

  @Test
  void countersNeverGoDownWhileClientsCancelOnTheAnswer() throws InterruptedException {
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.engineWrap = ForwardingEngine::new; // streams nothing: the output comes with the result
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1, h).start();
    AtomicBoolean stop = new AtomicBoolean();
    AtomicReference<String> wentDown = new AtomicReference<>();
    Thread reader = new Thread(() -> {
      NodeStats last = c.node("n0").stats();
      while (!stop.get() && wentDown.get() == null) {
        NodeStats s = c.node("n0").stats();
        if (s.servedLocally() < last.servedLocally() || s.promptTokens() < last.promptTokens()
            || s.failed() < last.failed()) {
          wentDown.set(last + " then " + s);
        }
        last = s;
      }
    });
    reader.start();
    int n = 20_000;
    try {
      for (int i = 0; i < n && wentDown.get() == null; i++) {
        List<CompletableFuture<InferenceResponse>> mine = new ArrayList<>();
        CompletableFuture<InferenceResponse> f = c.node("n0").submit(
            StreamingTest.generating("r" + i, i, 4), (t, s) -> mine.get(0).cancel(true));
        mine.add(f);
        StreamingTest.runUntilDone(c, f);
        assertTrue(f.isCancelled());
      }
    } finally {
      stop.set(true);
      reader.join();
    }
    assertNull(wentDown.get(), "a counter went down");
    c.sim.runUntilIdle(1_000_000);
    NodeStats s = c.node("n0").stats();
    assertEquals(0, s.servedLocally(), s.toString());
    assertEquals(0, s.promptTokens(), s.toString());
    assertEquals(n, s.failed(), s.toString());
  }
}
