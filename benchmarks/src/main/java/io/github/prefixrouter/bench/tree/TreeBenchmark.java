package io.github.prefixrouter.bench.tree;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * Longest-prefix match and insert, for this library's tree and the two string-keyed baselines,
 * on the same token sequences (see {@link TreeWorkload}). Run by {@link TreeBenchmarkMain}.
 */
public class TreeBenchmark {

  /** A structure holding a workload's cached set, and a cursor over its queries. */
  @State(Scope.Thread)
  public static class MatchState {
    @Param({"prefix-tree", "concurrent-radix-tree", "patricia-trie"})
    public String impl;

    @Param({"mmlu", "random-512", "random-4096"})
    public String workload;

    PrefixIndex index;
    int[][] queries;
    String[] keys;
    int next;

    @Setup(Level.Trial)
    public void setUp() {
      TreeWorkload w = TreeWorkload.get(workload);
      index = PrefixIndex.create(impl, Long.MAX_VALUE);
      for (int i = 0; i < w.cached.length; i++) {
        index.insert(w.cached[i], w.cachedKeys[i]);
      }
      queries = w.queries;
      keys = w.queryKeys;
    }
  }

  /**
   * Time per match, sampled per call: gives the median. The query cycles through the
   * workload's queries.
   */
  @Benchmark
  @BenchmarkMode(Mode.SampleTime)
  @OutputTimeUnit(TimeUnit.NANOSECONDS)
  public int match(MatchState s) {
    int i = s.next;
    s.next = i + 1 == s.queries.length ? 0 : i + 1;
    return s.index.match(s.queries[i], s.keys[i]);
  }

  /** A fresh structure with the cached set, rebuilt before every measured batch. */
  @State(Scope.Thread)
  public static class InsertState {
    @Param({"prefix-tree", "prefix-tree-lru", "concurrent-radix-tree", "patricia-trie"})
    public String impl;

    @Param({"mmlu", "random-512", "random-4096"})
    public String workload;

    TreeWorkload w;
    PrefixIndex index;

    @Setup(Level.Iteration)
    public void setUp() {
      w = TreeWorkload.get(workload);
      // the LRU variant is capped at the cached set's size, so every insert also evicts
      long capacity = w.distinctCachedTokens;
      index = PrefixIndex.create(impl, capacity);
      for (int i = 0; i < w.cached.length; i++) {
        index.insert(w.cached[i], w.cachedKeys[i]);
      }
    }
  }

  /**
   * Inserts every sequence of the workload's insert set once into a structure that already
   * holds the cached set; one call is one batch (divide by the batch size for per-insert time).
   */
  @Benchmark
  @BenchmarkMode(Mode.SingleShotTime)
  @OutputTimeUnit(TimeUnit.NANOSECONDS)
  public PrefixIndex insertBatch(InsertState s) {
    int[][] seqs = s.w.inserts;
    String[] keys = s.w.insertKeys;
    for (int i = 0; i < seqs.length; i++) {
      s.index.insert(seqs[i], keys[i]);
    }
    return s.index;
  }
}
