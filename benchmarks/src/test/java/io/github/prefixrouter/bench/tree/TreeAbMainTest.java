package io.github.prefixrouter.bench.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class TreeAbMainTest {

  /**
   * The four build orders form a Latin square (every tree at every position once), so the old
   * and the new build occupy the same build positions in total.
   */
  @Test
  void buildOrdersBalanceEveryPosition() {
    int[][] seen = new int[4][4]; // tree x position
    int oldPositions = 0;
    int newPositions = 0;
    for (int row = 0; row < 4; row++) {
      int[] order = TreeAbMain.buildOrder(row);
      boolean[] inRow = new boolean[4];
      for (int pos = 0; pos < 4; pos++) {
        int tree = order[pos];
        inRow[tree] = true;
        seen[tree][pos]++;
        if (tree % 2 == 0) {
          oldPositions += pos;
        } else {
          newPositions += pos;
        }
      }
      for (int tree = 0; tree < 4; tree++) {
        assertEquals(true, inRow[tree], "row " + row + " builds tree " + tree);
      }
    }
    for (int tree = 0; tree < 4; tree++) {
      for (int pos = 0; pos < 4; pos++) {
        assertEquals(1, seen[tree][pos], "tree " + tree + " at position " + pos);
      }
    }
    assertEquals(oldPositions, newPositions);
  }

  @Test
  void medianOfOddAndEvenCounts() {
    assertEquals(2.0, TreeAbMain.median(new double[] {3, 1, 2}));
    assertEquals(2.5, TreeAbMain.median(new double[] {4, 1, 3, 2}));
  }

  private static String refused(String... args) {
    return assertThrows(IllegalArgumentException.class, () -> TreeAbMain.options(args))
        .getMessage();
  }

  /**
   * A misspelt flag is not taken for a class path, a workload that does not exist does not run
   * nothing, and a repeated or valueless flag is refused.
   */
  @Test
  void badCommandLinesAreRefused() {
    assertEquals("unknown flag --round", refused("--round", "5", "old.jar", "new.jar"));
    assertEquals("unknown flag --quick", refused("old.jar", "--quick", "new.jar"));
    assertEquals("--workload: unknown workload 'bogus' (one of mmlu, random-512, random-4096)",
        refused("--workload", "bogus", "old.jar", "new.jar"));
    assertEquals("--rounds is given twice",
        refused("--rounds", "5", "--rounds", "6", "old.jar", "new.jar"));
    assertEquals("--rounds must be at least 1, not 0",
        refused("--rounds", "0", "old.jar", "new.jar"));
    assertEquals("--mmlu needs a value", refused("old.jar", "new.jar", "--mmlu"));
    assertEquals("two class paths are needed, OLD and NEW; got 1: old.jar", refused("old.jar"));
    TreeAbMain.Options o = TreeAbMain.options(
        new String[] {"--workload", "random-512", "old.jar", "new.jar", "--row", "2"});
    assertEquals(new TreeAbMain.Options(null, 400, "random-512", 2, "old.jar", "new.jar"), o);
  }
}
