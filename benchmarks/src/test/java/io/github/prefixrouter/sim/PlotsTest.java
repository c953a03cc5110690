package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PlotsTest {

  private static RunResult result(Policy p, int delay, Distribution d) {
    double[] shares = {0.25, 0.25, 0.25, 0.25};
    List<RunResult.Window> timeline =
        List.of(
            new RunResult.Window(0, 10, 0.8, shares, shares),
            new RunResult.Window(20, 12, 0.9, shares, shares));
    return new RunResult(new Scenario(p, delay, d), 100, 0, 0.3 + delay / 1000.0, 0.2, 0.9, 0.85,
        0.5, 0.25, shares, 1000, 40, timeline, "subject_0");
  }

  @Test
  void everyPolicyIncludingTheAblationGetsItsCharts(@TempDir Path dir) throws Exception {
    SimConfig d = SimConfig.defaults();
    List<Policy> all = List.of(Policy.values());
    SimConfig cfg =
        new SimConfig(42, 4, 4.5, 200, 40, 1.0, List.of(2, 200), 0.1, 0, 1, d.engine(), 20, 1,
            all, d.distributions(), null, dir);
    List<RunResult> results = new ArrayList<>();
    for (Distribution dist : cfg.distributions()) {
      for (int delay : cfg.delaysMs()) {
        for (Policy p : all) {
          results.add(result(p, delay, dist));
        }
      }
    }
    List<Path> files = Plots.write(dir, cfg, results);
    // two latency charts, the hit-rate chart, and two per policy of paper, cost-aware, oracle
    assertEquals(9, files.size());
    for (Path f : files) {
      assertTrue(Files.size(f) > 1000, f.toString());
    }
  }
}
