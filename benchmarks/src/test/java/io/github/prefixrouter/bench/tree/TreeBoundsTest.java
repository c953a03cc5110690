package io.github.prefixrouter.bench.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class TreeBoundsTest {

  @Test
  void commonPrefixOfEqualPrefixAndDifferingSequences() {
    assertEquals(3, TreeBenchmark.commonPrefix(new int[] {1, 2, 3}, new int[] {1, 2, 3}));
    assertEquals(2, TreeBenchmark.commonPrefix(new int[] {1, 2, 3}, new int[] {1, 2}));
    assertEquals(2, TreeBenchmark.commonPrefix(new int[] {1, 2}, new int[] {1, 2, 3}));
    assertEquals(1, TreeBenchmark.commonPrefix(new int[] {1, 2, 3}, new int[] {1, 9, 3}));
    assertEquals(0, TreeBenchmark.commonPrefix(new int[] {1}, new int[] {2}));
  }

  @Test
  void theBoundsReadWhatAnExactMatchMustRead() {
    TreeBenchmark.BoundState s = new TreeBenchmark.BoundState();
    s.workload = "random-512";
    s.setUp();
    TreeWorkload w = TreeWorkload.get("random-512");
    PrefixIndex tree = PrefixIndex.create(TreeBenchmarkMain.OURS, Long.MAX_VALUE);
    for (int i = 0; i < w.cached.length; i++) {
      tree.insert(w.cached[i], w.cachedKeys[i]);
    }
    int full = 0;
    for (int i = 0; i < w.queries.length; i++) {
      int match = tree.match(w.queries[i], w.queryKeys[i]);
      assertEquals(match, TreeBenchmark.commonPrefix(w.queries[i], s.partners[i]), "query " + i);
      int reads = match == w.queries[i].length ? match : match + 1;
      assertEquals(reads, s.reads[i], "query " + i);
      full += match == w.queries[i].length ? 1 : 0;
    }
    // about a quarter of the random-512 queries match a cached sequence whole
    assertEquals(0.25, (double) full / w.queries.length, 0.1);
  }

  @Test
  void everyStructureAndTheOracleAgreeOnEveryWorkload() {
    for (String w : TreeWorkload.NAMES) {
      assertEquals(0, TreeBenchmarkMain.verifyAgreement(TreeWorkload.get(w)), w);
    }
  }
}
