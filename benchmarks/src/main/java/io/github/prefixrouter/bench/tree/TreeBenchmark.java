package io.github.prefixrouter.bench.tree;

import java.util.Arrays;
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

  /**
   * Two bounds for scale, measured like {@link #match} on the same queries: the <em>oracle</em>
   * already knows which cached sequence shares the longest prefix with each query and only
   * compares the two (one vectorized {@code Arrays.mismatch}); <em>query read</em> only loads
   * the tokens of the query that any exact structure must look at, those of the longest cached
   * prefix and the one after it. No structure that takes the query as an {@code int[]} and
   * answers exactly can do less than the query read, whatever it keeps: each of those tokens
   * could be the one that differs.
   */
  @State(Scope.Thread)
  public static class BoundState {
    @Param({"mmlu", "random-512", "random-4096"})
    public String workload;

    int[][] queries;
    /** Per query, the cached sequence sharing its longest prefix. */
    int[][] partners;
    /** Per query, the tokens any exact match reads: the longest match and one more. */
    int[] reads;
    int next;

    @Setup(Level.Trial)
    public void setUp() {
      TreeWorkload w = TreeWorkload.get(workload);
      queries = w.queries;
      partners = partners(w);
      reads = new int[queries.length];
      for (int i = 0; i < queries.length; i++) {
        reads[i] = Math.min(commonPrefix(queries[i], partners[i]) + 1, queries[i].length);
      }
    }
  }

  /** Per query of the workload, the cached sequence sharing its longest prefix (by search). */
  static int[][] partners(TreeWorkload w) {
    int[][] partners = new int[w.queries.length][];
    for (int i = 0; i < w.queries.length; i++) {
      int best = -1;
      for (int[] c : w.cached) {
        int m = commonPrefix(w.queries[i], c);
        if (m > best) {
          best = m;
          partners[i] = c;
        }
      }
    }
    return partners;
  }

  /** The length of the longest common prefix of two sequences. */
  static int commonPrefix(int[] a, int[] b) {
    int m = Arrays.mismatch(a, 0, a.length, b, 0, b.length);
    return m < 0 ? a.length : m;
  }

  /** The oracle: one comparison of the query with the cached sequence it matches longest. */
  @Benchmark
  @BenchmarkMode(Mode.SampleTime)
  @OutputTimeUnit(TimeUnit.NANOSECONDS)
  public int matchOracle(BoundState s) {
    int i = s.next;
    s.next = i + 1 == s.queries.length ? 0 : i + 1;
    return commonPrefix(s.queries[i], s.partners[i]);
  }

  /**
   * The query read: the tokens an exact match must look at, loaded at the width of the
   * vectorized comparison, by comparing them with themselves (each cache line comes from
   * memory once; its second load hits the first-level cache). A summing loop would be the
   * plainer read, but C2 in Java 17 does not vectorize a loop that is only a reduction, and
   * its scalar loop takes more than twice as long as this on 4,096 tokens: no floor.
   */
  @Benchmark
  @BenchmarkMode(Mode.SampleTime)
  @OutputTimeUnit(TimeUnit.NANOSECONDS)
  public int readQuery(BoundState s) {
    int i = s.next;
    s.next = i + 1 == s.queries.length ? 0 : i + 1;
    int[] q = s.queries[i];
    int n = s.reads[i];
    return Arrays.mismatch(q, 0, n, q, 0, n);
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
