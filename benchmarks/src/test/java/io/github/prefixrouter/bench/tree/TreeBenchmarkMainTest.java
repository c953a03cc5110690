package io.github.prefixrouter.bench.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.bench.OutputFlag;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

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

  /**
   * An {@code --out} that is a directory, or lies under a file, is refused before anything
   * runs: it was taken, and writing tree.json failed with a stack trace after the whole
   * benchmark, its figures lost.
   */
  @Test
  void anOutputFileThatCannotBeWrittenIsRefusedBeforeAnythingRuns(@TempDir Path dir)
      throws Exception {
    OutputFlag.assertCheckedBeforeAnythingRuns(dir, "tree.json", args -> TreeBenchmarkMain.options(args).out());
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
