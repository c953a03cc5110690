package io.github.prefixrouter.bench.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;

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
}
