package io.github.prefixrouter.bench.route;

import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.internal.gossip.BlockChainSource;
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
 * The routing decision broken into its stages, on {@link RouteBenchmark}'s fixture and queries:
 * hashing the whole prompt, hashing as far as the decision does (the longest peer match plus the
 * chunk the lazy query pulls past it), the local tree match, the replica query over precomputed
 * hashes, and the whole decision. What the decision spends on costing the candidates and
 * building the {@link RouteDecision} is the whole minus the stages (without the prefix hash
 * cache: {@code decideWithoutPrefixCache}). Run with
 * {@code benchmarks/run jmh RouteStagesBenchmark -p peers=64 -p promptTokens=4096}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class RouteStagesBenchmark {

  @Param({"4", "64"})
  public int peers;

  @Param({"4096"})
  public int promptTokens;

  @Param({"FIXED", "SHARED"})
  public String workload;

  private RouteFixture fixture;
  private long[][] chains;
  private int[] hashedBlocks;
  private BlockChainSource[] sources;
  private int[] perSlot;
  private long[] out;
  private int next;

  @Setup(Level.Trial)
  public void setUp() {
    fixture = new RouteFixture(peers, promptTokens, 42, RouteFixture.Workload.valueOf(workload));
    int q = fixture.queries.length;
    chains = new long[q][];
    hashedBlocks = new int[q];
    sources = new BlockChainSource[q];
    perSlot = new int[fixture.observer.slotCapacity()];
    out = new long[promptTokens / 16];
    for (int i = 0; i < q; i++) {
      chains[i] = fixture.hasher.chain(fixture.queries[i]);
      sources[i] = BlockChainSource.of(chains[i], chains[i].length);
      RouteDecision d = fixture.decide.apply(fixture.queries[i]);
      int longest = 0;
      for (RouteDecision.Candidate c : d.candidates()) {
        if (!c.local()) {
          longest = Math.max(longest, c.matchedTokens() / 16);
        }
      }
      // the lazy query pulls 8 blocks, then 16 at a time, until no peer is left matching
      int pulled = 8;
      while (pulled <= longest) {
        pulled += 16;
      }
      hashedBlocks[i] = Math.min(pulled, chains[i].length);
    }
  }

  /** The query indices in {@link RouteFixture#order} (a prime period, see there). */
  private int nextIndex() {
    int[] o = fixture.order;
    next = next + 1 == o.length ? 0 : next + 1;
    return o[next];
  }

  @Benchmark
  public long hashWholePrompt() {
    int i = nextIndex();
    int[] t = fixture.queries[i];
    fixture.hasher.chain(t, t.length, out);
    return out[0];
  }

  @Benchmark
  public long hashAsFarAsDecision() {
    int i = nextIndex();
    fixture.hasher.chain(fixture.queries[i], hashedBlocks[i] * 16, out);
    return out[0];
  }

  @Benchmark
  public int localTreeMatch() {
    return fixture.localTree.match(fixture.queries[nextIndex()]);
  }

  @Benchmark
  public int replicaQueryHashed() {
    return fixture.observer.leadingBlocks(sources[nextIndex()], perSlot);
  }

  @Benchmark
  public RouteDecision decide() {
    return fixture.decide.apply(fixture.queries[nextIndex()]);
  }

  @Benchmark
  public RouteDecision decideWithoutPrefixCache() {
    return fixture.decideWithoutCache.apply(fixture.queries[nextIndex()]);
  }

  @Benchmark
  public RouteDecision previousDecide() {
    return fixture.previous.decide(fixture.queries[nextIndex()]);
  }
}
