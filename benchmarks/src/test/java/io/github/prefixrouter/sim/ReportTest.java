package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

class ReportTest {

  private static RunResult result(Policy p, int failed, double mean, double p50, double p99) {
    double[] shares = {0.5, 0.5};
    return new RunResult(new Scenario(p, 2, Distribution.UNIFORM), 100, failed, mean, p50, p99,
        0.5, 0.25, 0.5, shares, 1000, 40,
        List.of(new RunResult.Window(0, 10, 0.5, shares, shares)), "subject_0");
  }

  /**
   * A run whose every measured request failed has no latency: its figures, and every ratio
   * over it (the whole block's when it is the baseline's), used to print as NaN and NaNx; they
   * are "-", as a baseline that did not run, and the other figures are as before.
   */
  @Test
  void latenciesAndRatiosThatDoNotExistPrintAsADash() {
    SimConfig d = SimConfig.defaults();
    SimConfig cfg = new SimConfig(42, 2, 4.5, 200, 40, 1.0, List.of(2), 0.1, 0, 1, d.engine(),
        20, 1, List.of(Policy.NO_ROUTING, Policy.PAPER, Policy.ORACLE),
        List.of(Distribution.UNIFORM), null, Path.of("unused"));
    String failedBase = Report.table(cfg, List.of(
        result(Policy.NO_ROUTING, 100, Double.NaN, Double.NaN, Double.NaN),
        result(Policy.PAPER, 0, 0.25, 0.2, 0.9)));
    assertEquals(List.of(
            "| no-routing          |       - |       - |       - |         - |    50.0% |"
                + "     25.0% |    50.0% |         1000 | failed=100",
            "| paper               |   0.250 |   0.200 |   0.900 |         - |    50.0% |"
                + "     25.0% |    50.0% |         1000 |"),
        rows(failedBase));
    String failedRun = Report.table(cfg, List.of(
        result(Policy.NO_ROUTING, 0, 0.5, 0.4, 1.5),
        result(Policy.PAPER, 100, Double.NaN, Double.NaN, Double.NaN)));
    assertEquals(List.of(
            "| no-routing          |   0.500 |   0.400 |   1.500 |    1.000x |    50.0% |"
                + "     25.0% |    50.0% |         1000 |",
            "| paper               |       - |       - |       - |         - |    50.0% |"
                + "     25.0% |    50.0% |         1000 | failed=100"),
        rows(failedRun));
  }

  /**
   * Every line of a block has its column bars where the header has them, whatever the policy:
   * the policy column was 14 characters wide, and the rows of earliest-completion and
   * cost-aware-greedy pushed the rest of their line out of line.
   */
  @Test
  void everyRowLinesUpWithTheHeaderWhateverThePolicysName() {
    SimConfig d = SimConfig.defaults();
    List<Policy> all = List.of(Policy.values());
    SimConfig cfg = new SimConfig(42, 2, 4.5, 200, 40, 1.0, List.of(2), 0.1, 0, 1, d.engine(),
        20, 1, all, List.of(Distribution.UNIFORM), null, Path.of("unused"));
    List<RunResult> results = new java.util.ArrayList<>();
    for (Policy p : all) {
      results.add(result(p, 0, 0.5, 0.4, 1.5));
    }
    List<String> lines = Report.table(cfg, results).lines()
        .filter(l -> l.startsWith("|")).toList();
    assertEquals(2 + all.size(), lines.size(), String.join("\n", lines));
    String header = lines.get(0);
    for (String line : lines) {
      assertEquals(bars(header), bars(line), "the bars of\n" + header + "\n" + line);
    }
    for (Policy p : all) {
      assertEquals(1, lines.stream().filter(l -> l.startsWith("| " + p.label() + " ")).count(),
          p.label());
    }
  }

  /** Where {@code line} has a {@code '|'}. */
  private static List<Integer> bars(String line) {
    List<Integer> at = new java.util.ArrayList<>();
    for (int i = 0; i < line.length(); i++) {
      if (line.charAt(i) == '|') {
        at.add(i);
      }
    }
    return at;
  }

  private static List<String> rows(String table) {
    return table.lines().filter(l -> l.startsWith("| ") && !l.startsWith("| policy")).toList();
  }
}
