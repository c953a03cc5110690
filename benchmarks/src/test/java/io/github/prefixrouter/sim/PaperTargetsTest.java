package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The result targets, on a smaller scenario than the main job (same model and
 * parameters, fewer requests; the warm-up still covers the time every node needs to see every
 * subject once): each test states one target and fails with the measured figures.
 */
class PaperTargetsTest {

  private static SimConfig cfg;
  private static List<RunResult> results;

  @BeforeAll
  static void runScenario() throws Exception {
    SimConfig d = SimConfig.defaults();
    cfg =
        new SimConfig(
            42,
            4,
            d.ratePerSecond(),
            4_000,
            1_500,
            d.zipfExponent(),
            List.of(2, 200, 1000),
            d.jitterFraction(),
            0.0,
            1,
            d.engine(),
            20,
            2,
            List.of(Policy.NO_ROUTING, Policy.ORACLE, Policy.PAPER, Policy.COST_AWARE),
            List.of(Distribution.UNIFORM, Distribution.SKEWED),
            null,
            Path.of("target/test-results"));
    results = PaperRunner.run(cfg, Prompts.load(null, cfg.seed()), Clusters::create, null);
    System.out.println(Report.table(cfg, results));
  }

  private static RunResult r(Policy p, int delay, Distribution d) {
    return PaperRunner.find(results, p, delay, d);
  }

  private static double ratio(Policy p, int delay, Distribution d) {
    return r(p, delay, d).meanLatencySeconds()
        / r(Policy.NO_ROUTING, delay, d).meanLatencySeconds();
  }

  private static String fmt(String what, double v) {
    return String.format(Locale.ROOT, "%s = %.3f", what, v);
  }

  @Test
  void everyRequestIsAnswered() {
    for (RunResult x : results) {
      assertTrue(x.failedRequests() == 0, x.scenario() + ": " + x.failedRequests() + " failed");
    }
  }

  @Test
  void paperPolicyBeatsNoRoutingAtLowDelay() {
    for (Distribution d : Distribution.values()) {
      double x = ratio(Policy.PAPER, 2, d);
      assertTrue(x < 1.0, fmt("paper / no-routing, 2 ms " + d.label(), x));
    }
  }

  /** The paper saw a larger gain under skew than uniform. */
  @Test
  void paperPolicyGainsMoreUnderSkew() {
    double u = ratio(Policy.PAPER, 2, Distribution.UNIFORM);
    double s = ratio(Policy.PAPER, 2, Distribution.SKEWED);
    assertTrue(s < u, fmt("paper / no-routing, 2 ms skewed", s) + " vs " + fmt("uniform", u));
  }

  @Test
  void paperPolicyLosesToNoRoutingOnSlowLinks() {
    for (int delay : List.of(200, 1000)) {
      for (Distribution d : Distribution.values()) {
        double x = ratio(Policy.PAPER, delay, d);
        assertTrue(x > 1.0, fmt("paper / no-routing, " + delay + " ms " + d.label(), x));
      }
    }
  }

  @Test
  void costAwareGainsAtLowDelay() {
    double u = ratio(Policy.COST_AWARE, 2, Distribution.UNIFORM);
    double s = ratio(Policy.COST_AWARE, 2, Distribution.SKEWED);
    assertTrue(u <= 0.93, fmt("cost-aware / no-routing, 2 ms uniform (target <= 0.93)", u));
    assertTrue(s <= 0.72, fmt("cost-aware / no-routing, 2 ms skewed (target <= 0.72)", s));
  }

  /**
   * On slow links, a longer run of its own: no routing and cost-aware at 200 and 1,000 ms, 10,000
   * requests of which 8,500 measured (1,500 warm-up, as above). The 2,500 measured requests of
   * the scenario above cannot resolve a 2% target there: one local-caching buy of a long prefix
   * (several seconds of prefill and the requests it sends over the link meanwhile) moves the mean
   * by about 2%: the cost-aware / no-routing ratio at 1,000 ms skewed spans 0.92 to 1.11 over
   * seeds 1, 2, 3 and 42 at 2,500 measured requests, 0.93 to 1.02 over the same seeds at 8,500
   * (figures in docs/simulator.md).
   */
  @Test
  void costAwareNeverLosesMuchOnSlowLinks() throws Exception {
    SimConfig slow =
        new SimConfig(
            cfg.seed(),
            cfg.nodes(),
            cfg.ratePerSecond(),
            10_000,
            1_500,
            cfg.zipfExponent(),
            List.of(200, 1000),
            cfg.jitterFraction(),
            0.0,
            1,
            cfg.engine(),
            20,
            2,
            List.of(Policy.NO_ROUTING, Policy.COST_AWARE),
            List.of(Distribution.UNIFORM, Distribution.SKEWED),
            null,
            Path.of("target/test-results"));
    List<RunResult> runs =
        PaperRunner.run(slow, Prompts.load(null, slow.seed()), Clusters::create, null);
    System.out.println(Report.table(slow, runs));
    for (int delay : slow.delaysMs()) {
      for (Distribution d : Distribution.values()) {
        double x =
            PaperRunner.find(runs, Policy.COST_AWARE, delay, d).meanLatencySeconds()
                / PaperRunner.find(runs, Policy.NO_ROUTING, delay, d).meanLatencySeconds();
        assertTrue(
            x <= 1.02,
            fmt("cost-aware / no-routing, " + delay + " ms " + d.label() + " (target <= 1.02)", x));
      }
    }
  }

  @Test
  void costAwareHitRateUnderSkewAtLeastThePaperPolicys() {
    // at 2 ms, where both route; on slow links cost-aware rightly stops forwarding
    double c = r(Policy.COST_AWARE, 2, Distribution.SKEWED).hitRate();
    double p = r(Policy.PAPER, 2, Distribution.SKEWED).hitRate();
    assertTrue(c >= p, fmt("cost-aware hit rate, skewed 2 ms", c) + " < " + fmt("paper", p));
  }

  @Test
  void costAwareKeepsEveryNodeAtMostHalfTheTrafficUnderSkew() {
    for (int delay : cfg.delaysMs()) {
      double m = r(Policy.COST_AWARE, delay, Distribution.SKEWED).maxNodeShare();
      assertTrue(m <= 0.50, fmt("largest node share, cost-aware skewed " + delay + " ms", m));
    }
  }

  @Test
  void costAwareWithinTenPercentOfTheOracle() {
    for (int delay : cfg.delaysMs()) {
      for (Distribution d : Distribution.values()) {
        double c = r(Policy.COST_AWARE, delay, d).meanLatencySeconds();
        double o = r(Policy.ORACLE, delay, d).meanLatencySeconds();
        assertTrue(
            c <= 1.10 * o,
            fmt("cost-aware mean, " + delay + " ms " + d.label(), c) + " > 1.10 x "
                + fmt("oracle", o));
      }
    }
  }
}
