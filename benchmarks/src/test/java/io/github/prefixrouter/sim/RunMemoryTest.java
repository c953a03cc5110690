package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.workload.PromptSource;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What a run holds while it goes: not every request of the run at once. */
class RunMemoryTest {

  @Test
  void aRunQueuesOnlyTheArrivalsItIsAboutToReach() {
    PromptSource prompts = Prompts.load(null, 42);
    SimConfig d = SimConfig.defaults();
    int n = 10_000;
    for (Policy p : List.of(Policy.PAPER, Policy.LEAST_LOADED)) {
      SimConfig cfg = new SimConfig(42, 4, 4.5, n, 500, 1.0, List.of(200), 0.1, 0, 1,
          d.engine(), 20, 1, List.of(p), List.of(Distribution.SKEWED), null,
          Path.of("target/test-results"));
      Trace trace = Trace.generate(prompts, Distribution.SKEWED, cfg, cfg.seed());
      Simulation.Context[] context = new Simulation.Context[1];
      int[] mostPending = new int[1];
      RunResult r = Simulation.run(new Scenario(p, 200, Distribution.SKEWED), cfg, prompts, trace,
          ctx -> {
            context[0] = ctx;
            return Clusters.create(ctx);
          },
          k -> mostPending[0] = Math.max(mostPending[0], context[0].scheduler().pendingTasks()));
      assertEquals(n - 500, r.measuredRequests(), p.label());
      assertEquals(0, r.failedRequests(), p.label());
      // the cluster's timers and requests in flight, and the arrivals up to its farthest timer:
      // for the library's nodes, their 10-minute engine timeout (2,700 arrivals at 4.5/s)
      int bound = p == Policy.PAPER ? 4_000 : 300;
      assertTrue(mostPending[0] < bound, p.label() + ": " + mostPending[0] + " tasks pending");
    }
  }
}
