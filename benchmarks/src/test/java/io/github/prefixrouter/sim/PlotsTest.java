package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.knowm.xchart.XYChart;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PlotsTest {

  private static RunResult result(Policy p, int delay, Distribution d) {
    return result(p, delay, d, 0.3 + delay / 1000.0);
  }

  private static RunResult result(Policy p, int delay, Distribution d, double meanSeconds) {
    double[] shares = {0.25, 0.25, 0.25, 0.25};
    List<RunResult.Window> timeline =
        List.of(
            new RunResult.Window(0, 10, 0.8, shares, shares),
            new RunResult.Window(20, 12, 0.9, shares, shares));
    return new RunResult(new Scenario(p, delay, d), 100, 0, meanSeconds, 0.2, 0.9, 0.85,
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

  private static SimConfig config(List<Integer> delays, List<Policy> policies, Path dir) {
    SimConfig d = SimConfig.defaults();
    return new SimConfig(42, 4, 4.5, 200, 40, 1.0, delays, 0.1, 0, 1, d.engine(), 20, 1,
        policies, List.of(Distribution.UNIFORM), null, dir);
  }

  /**
   * A run whose every measured request failed has no mean latency (NaN), and a mean of 0 has
   * no place on a log scale: such a point used to reach the chart, which then failed to draw
   * after the JSON was written. It is left out; the policy's other points are drawn.
   */
  @Test
  void aRunWithoutAMeanLatencyIsLeftOutOfTheLatencyChart(@TempDir Path dir) throws Exception {
    SimConfig cfg = config(List.of(2, 200, 1000), List.of(Policy.NO_ROUTING, Policy.PAPER), dir);
    List<RunResult> results = new ArrayList<>();
    results.add(result(Policy.NO_ROUTING, 2, Distribution.UNIFORM, Double.NaN));
    results.add(result(Policy.NO_ROUTING, 200, Distribution.UNIFORM, 0.5));
    results.add(result(Policy.NO_ROUTING, 1000, Distribution.UNIFORM, 0));
    results.add(result(Policy.PAPER, 2, Distribution.UNIFORM, Double.NaN));
    results.add(result(Policy.PAPER, 200, Distribution.UNIFORM, Double.NaN));
    results.add(result(Policy.PAPER, 1000, Distribution.UNIFORM, Double.POSITIVE_INFINITY));
    XYChart c = Plots.latencyVsDelay(cfg, results, Distribution.UNIFORM);
    assertEquals(List.of("no-routing"), List.copyOf(c.getSeriesMap().keySet()));
    assertArrayEquals(new double[] {200}, c.getSeriesMap().get("no-routing").getXData());
    assertArrayEquals(new double[] {0.5}, c.getSeriesMap().get("no-routing").getYData());
    List<Path> files = Plots.write(dir, cfg, results);
    assertEquals(1, files.size());
    assertTrue(Files.size(files.get(0)) > 1000);
  }

  /**
   * A delay of 0 ms has no place on a log scale either: it used to be drawn at 1 ms, on top of
   * a delay of 1 ms if there was one. With a 0 among the delays the axis is of delay + 1 ms and
   * says so; without one it is the delay itself.
   */
  @Test
  void aDelayOfZeroIsDrawnApartFromOneAndTheAxisSaysHow(@TempDir Path dir) {
    List<RunResult> results = new ArrayList<>();
    for (int delay : List.of(0, 1, 200)) {
      results.add(result(Policy.NO_ROUTING, delay, Distribution.UNIFORM));
    }
    XYChart c = Plots.latencyVsDelay(config(List.of(0, 1, 200), List.of(Policy.NO_ROUTING), dir),
        results, Distribution.UNIFORM);
    assertArrayEquals(new double[] {1, 2, 201}, c.getSeriesMap().get("no-routing").getXData());
    assertEquals("network delay + 1 ms (ms, log scale)", c.getXAxisTitle());
    XYChart positive = Plots.latencyVsDelay(
        config(List.of(1, 200), List.of(Policy.NO_ROUTING), dir), results, Distribution.UNIFORM);
    assertArrayEquals(new double[] {1, 200},
        positive.getSeriesMap().get("no-routing").getXData());
    assertEquals("network delay (ms, log scale)", positive.getXAxisTitle());
  }
}
