package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.github.prefixrouter.workload.PromptSource;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;


class SimulationDeterminismTest {

  static SimConfig small(long seed, int threads) {
    SimConfig d = SimConfig.defaults();
    return new SimConfig(seed, 4, 8.0, 500, 50, 1.0, List.of(2, 200), 0.1, 0.01, 1, d.engine(),
        10, threads, d.policies(), d.distributions(), null, Path.of("target/test-results"));
  }

  @Test
  void sameSeedGivesIdenticalResultsWhateverTheParallelism() throws Exception {
    PromptSource prompts = Prompts.load(null, 42);
    SimConfig one = small(42, 1);
    SimConfig two = small(42, 2);
    List<RunResult> a = PaperRunner.run(one, prompts, Clusters::create, null);
    List<RunResult> b = PaperRunner.run(two, prompts, Clusters::create, null);
    String ja = Report.json(one, "w", a);
    String jb = Report.json(one, "w", b);
    assertEquals(ja, jb);
    for (RunResult r : a) {
      assertEquals(450, r.measuredRequests(), r.scenario().toString());
      assertEquals(0, r.failedRequests(), r.scenario().toString());
    }
    List<RunResult> c = PaperRunner.run(small(43, 2), prompts, Clusters::create, null);
    assertNotEquals(ja, Report.json(one, "w", c));
  }

  @Test
  void everyPolicyRunsTheSameTrace() throws Exception {
    PromptSource prompts = Prompts.load(null, 42);
    SimConfig cfg = small(9, 2);
    List<RunResult> rs = PaperRunner.run(cfg, prompts, Clusters::create, null);
    assertEquals(PaperRunner.scenarios(cfg).size(), rs.size());
    for (RunResult r : rs) {
      int requests = 0;
      for (RunResult.Window w : r.timeline()) {
        requests += w.requests();
      }
      assertEquals(500, requests, r.scenario().toString());
      double share = 0;
      for (double s : r.nodeShares()) {
        share += s;
      }
      assertEquals(1.0, share, 1e-9);
      assertTrue(r.hitRate() >= 0 && r.hitRate() < 1);
    }
  }
}
