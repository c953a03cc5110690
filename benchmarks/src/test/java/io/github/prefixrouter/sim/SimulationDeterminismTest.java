package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.workload.PromptSource;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

class SimulationDeterminismTest {

  static SimConfig small(long seed, int threads, List<Policy> policies, List<Integer> delays) {
    SimConfig d = SimConfig.defaults();
    return new SimConfig(seed, 4, 4.5, 400, 40, 1.0, delays, 0.1, 0.01, 1, d.engine(), 10,
        threads, policies, d.distributions(), null, Path.of("target/test-results"));
  }

  @Test
  void sameSeedGivesIdenticalResultsWhateverTheParallelism() throws Exception {
    PromptSource prompts = Prompts.load(null, 42);
    List<Policy> policies = List.of(Policy.CHWBL, Policy.ORACLE, Policy.PAPER, Policy.COST_AWARE);
    SimConfig one = small(42, 1, policies, List.of(2));
    SimConfig two = small(42, 2, policies, List.of(2));
    List<RunResult> a = PaperRunner.run(one, prompts, Clusters::create, null);
    List<RunResult> b = PaperRunner.run(two, prompts, Clusters::create, null);
    String ja = Report.json(one, "w", a);
    assertEquals(ja, Report.json(one, "w", b));
    List<RunResult> c =
        PaperRunner.run(small(43, 2, policies, List.of(2)), prompts, Clusters::create, null);
    assertNotEquals(ja, Report.json(one, "w", c));
  }

  @Test
  void everyPolicyRunsTheSameTraceAndAnswersEveryRequest() throws Exception {
    PromptSource prompts = Prompts.load(null, 42);
    SimConfig cfg = small(9, 2, List.of(Policy.values()), List.of(2, 200));
    List<RunResult> rs = PaperRunner.run(cfg, prompts, Clusters::create, null);
    assertEquals(PaperRunner.scenarios(cfg).size(), rs.size());
    for (RunResult r : rs) {
      assertEquals(360, r.measuredRequests(), r.scenario().toString());
      assertEquals(0, r.failedRequests(), r.scenario().toString());
      int requests = 0;
      for (RunResult.Window w : r.timeline()) {
        requests += w.requests();
      }
      assertEquals(400, requests, r.scenario().toString());
      double share = 0;
      for (double s : r.nodeShares()) {
        share += s;
      }
      assertEquals(1.0, share, 1e-9);
      assertTrue(r.hitRate() >= 0 && r.hitRate() < 1);
    }
  }
}
