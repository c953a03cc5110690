package io.github.prefixrouter.bench.scope;

import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.workload.RandomSequences;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What a cache scope adds to a local match: the same 1,000 random prompts are cached in the
 * default scope of one tree and in an adapter's scope of another (the adapter's tree also holds
 * 63 other scopes), and the same queries (each a cached prompt, so the walk goes all the way)
 * are matched unscoped and scoped. The scoped match looks its root up in a concurrent map (and
 * may box the key); the walk below the root is the same code. Run with
 * {@code java -cp benchmarks/target/benchmarks.jar org.openjdk.jmh.Main ScopedMatchBenchmark}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(2)
public class ScopedMatchBenchmark {

  @Param({"512", "4096"})
  public int length;

  ConcurrentPrefixTree unscoped;
  ConcurrentPrefixTree scoped;
  long scopeRoot;
  int[][] queries;
  int next;

  @Setup
  public void setUp() {
    queries = RandomSequences.create(7, 1000, length);
    unscoped = ConcurrentPrefixTree.selfManaged(Long.MAX_VALUE);
    scoped = ConcurrentPrefixTree.selfManaged(Long.MAX_VALUE);
    scopeRoot = BlockHasher.scopeRoot("sql-lora", "");
    for (int[] q : queries) {
      unscoped.insert(q);
      scoped.insert(scopeRoot, q, q.length);
    }
    for (int s = 0; s < 63; s++) {
      scoped.insert(BlockHasher.scopeRoot("lora-" + s, ""), queries[s], 16);
    }
  }

  @Benchmark
  public int unscopedMatch() {
    int[] q = queries[next++ % queries.length];
    return unscoped.match(q, q.length);
  }

  @Benchmark
  public int scopedMatch() {
    int[] q = queries[next++ % queries.length];
    return scoped.match(scopeRoot, q, q.length);
  }
}
