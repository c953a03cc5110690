package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.testing.ForwardingEngine;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * The counters of {@link NodeStats} are monotonic as {@code stats()} sees them, also while
 * clients cancel their requests as they are answered: such an answer is not counted, and was
 * never counted and then taken back (a concurrent {@code stats()} saw served locally and the
 * prompt tokens go up, then down). The node's hook between counting an answer and completing
 * its future ({@link RouterNode#beforeAnswerGiven}) puts the cancel and the {@code stats()}
 * reads exactly where the race would, on every run.
 */
class MonotonicStatsTest {

  private static OracleCluster cluster() {
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.engineWrap = ForwardingEngine::new; // streams nothing: the output comes with the result
    return new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1, h).start();
  }

  /** The client cancels on the answer's own piece, before the answer claims the future. */
  @Test
  void aCancelBeforeTheAnswerIsNeverCountedAsAnswered() {
    OracleCluster c = cluster();
    RouterNode n = c.node("n0");
    List<NodeStats> seen = new ArrayList<>();
    seen.add(n.stats());
    n.beforeAnswerGiven = () -> seen.add(n.stats());
    List<CompletableFuture<InferenceResponse>> mine = new ArrayList<>();
    // what each cancel returned, checked below: the node catches what an output listener throws
    List<Boolean> cancels = new ArrayList<>();
    CompletableFuture<InferenceResponse> f = n.submit(StreamingTest.generating("r", 1, 4),
        (t, s) -> {
          cancels.add(mine.get(0).cancel(true));
          seen.add(n.stats());
        });
    mine.add(f);
    StreamingTest.runUntilDone(c, f);
    c.sim.runUntilIdle(1_000_000);
    seen.add(n.stats());
    assertEquals(List.of(true), cancels, "the cancel on the answer's piece");
    assertTrue(f.isCancelled());
    assertMonotonic(seen);
    NodeStats s = n.stats();
    assertEquals(0, s.servedLocally(), s.toString());
    assertEquals(0, s.promptTokens(), s.toString());
    assertEquals(1, s.failed(), s.toString());
  }

  /** The client cancels after the answer was counted, before its future is completed. */
  @Test
  void aCancelBetweenTheCountAndTheCompletionGivesWay() {
    OracleCluster c = cluster();
    RouterNode n = c.node("n0");
    List<NodeStats> seen = new ArrayList<>();
    seen.add(n.stats());
    List<CompletableFuture<InferenceResponse>> mine = new ArrayList<>();
    AtomicBoolean cancelled = new AtomicBoolean();
    n.beforeAnswerGiven = () -> {
      seen.add(n.stats());
      cancelled.set(mine.get(0).cancel(true));
      seen.add(n.stats());
    };
    InferenceRequest r = StreamingTest.generating("r", 1, 4);
    CompletableFuture<InferenceResponse> f = n.submit(r);
    mine.add(f);
    StreamingTest.runUntilDone(c, f);
    c.sim.runUntilIdle(1_000_000);
    seen.add(n.stats());
    assertMonotonic(seen);
    assertEquals(4, seen.size(), "the hook ran once");
    assertFalse(cancelled.get(), "a cancel after the answer was counted must find it answered");
    assertFalse(f.isCancelled());
    NodeStats s = n.stats();
    assertEquals(1, s.servedLocally(), s.toString());
    assertEquals(0, s.failed(), s.toString());
    assertEquals(r.length(), s.promptTokens(), s.toString());
  }

  private static void assertMonotonic(List<NodeStats> seen) {
    for (int i = 1; i < seen.size(); i++) {
      NodeStats a = seen.get(i - 1);
      NodeStats b = seen.get(i);
      if (b.servedLocally() < a.servedLocally() || b.forwarded() < a.forwarded()
          || b.failed() < a.failed() || b.promptTokens() < a.promptTokens()
          || b.cachedPromptTokens() < a.cachedPromptTokens()) {
        fail("a counter went down: " + a + " then " + b);
      }
    }
  }
}
