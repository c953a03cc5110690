package io.github.prefixrouter.bench.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class TreeBenchmarkMainTest {

  private static String refused(String... args) {
    return assertThrows(IllegalArgumentException.class, () -> TreeBenchmarkMain.options(args))
        .getMessage();
  }

  @Test
  void repeatedUnknownAndValuelessFlagsAreRefused() {
    assertEquals("--mmlu is given twice", refused("--mmlu", "a", "--mmlu", "b"));
    assertEquals("--full is given twice", refused("--full", "--full"));
    assertEquals("--out needs a value", refused("--full", "--out"));
    assertEquals("unknown flag --ful", refused("--ful"));
    assertEquals(new TreeBenchmarkMain.Options("d", true, Path.of("t.json"), false),
        TreeBenchmarkMain.options(new String[] {"--out", "t.json", "--full", "--mmlu", "d"}));
    assertTrue(TreeBenchmarkMain.options(new String[] {"-h"}).help());
  }

  /** The LRU tree's row measures inserts only: its match cells are "-", as other gaps are. */
  @Test
  void figuresNotMeasuredPrintAsDashes() {
    TreeBenchmarkMain.Row lru = new TreeBenchmarkMain.Row("prefix-tree-lru", "mmlu");
    lru.insertNs = 250;
    String line = TreeBenchmarkMain.tableRow(lru);
    assertFalse(line.contains("NaN"), line);
    assertEquals(String.format("%-12s %-22s %12s %12s %12s %14s %12s", "mmlu",
        "prefix-tree-lru", "-", "-", "-", "4.00 M", "-"), line);
    TreeBenchmarkMain.Row ours = new TreeBenchmarkMain.Row("prefix-tree", "mmlu");
    ours.matchP50 = 120;
    ours.matchMean = 130.4;
    assertTrue(TreeBenchmarkMain.tableRow(ours).contains("      120 ns       130 ns"),
        TreeBenchmarkMain.tableRow(ours));
  }
}
