package io.github.prefixrouter.bench.route;

import io.github.prefixrouter.RouteDecision;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * Routing-decision latency: the library's full decision (hash the prompt's blocks, match the
 * local tree, one pass over the replica index for all peers, cost every candidate, build the
 * {@link RouteDecision}) side by side with the same decision without the prefix hash cache
 * (every prompt hashed from its first block), the previous version's decision ({@link
 * PreviousPlanner}, the baseline: same decisions, checked at set-up) and a naive per-peer scan
 * that only finds the longest match (a lower bound on what the naive design would cost for a
 * full decision). Two workloads ({@link RouteFixture.Workload}): the fixed 8 queries, and
 * distinct queries sharing family preambles as served traffic does.
 *
 * <p>Every fork runs with a fixed, pre-touched heap ({@link #JVM_ARGS}). A decision allocates
 * its columns (about 1.7 KB at 64 peers), so a growing heap takes page faults on the first
 * touch of every new eden page for as long as it grows: measured with {@code
 * RouteLatencyLoopMain}, that start-up cost alone lifted the p99 at 64 peers and 4,096 tokens
 * from 7.4–8.8 µs to 16–21 µs and tripled the decisions slower than 15 µs (1.6–3.8% against
 * 0.6–0.7%). A latency-sensitive server runs with {@code -Xms} equal to {@code -Xmx} and
 * {@code -XX:+AlwaysPreTouch} for the same reason (docs/deployment.md).
 */
@State(Scope.Thread)
@Fork(jvmArgsAppend = {"-Xms3g", "-Xmx3g", "-XX:+AlwaysPreTouch"})
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class RouteBenchmark {

  /** The JVM flags of every fork: a fixed heap, touched before the benchmark starts. */
  static final String[] JVM_ARGS = {"-Xms3g", "-Xmx3g", "-XX:+AlwaysPreTouch"};

  @Param({"4", "64", "1024"})
  public int peers;

  @Param({"512", "4096"})
  public int promptTokens;

  @Param({"FIXED", "SHARED"})
  public String workload;

  private RouteFixture fixture;
  private int next;

  @Setup(Level.Trial)
  public void setUp() {
    fixture = new RouteFixture(peers, promptTokens, 42, RouteFixture.Workload.valueOf(workload));
    fixture.checkSameDecisions(24, 7);
  }

  /** The queries in {@link RouteFixture#order} (a prime period, see there). */
  private int[] nextQuery() {
    int[] o = fixture.order;
    next = next + 1 == o.length ? 0 : next + 1;
    return fixture.queries[o[next]];
  }

  @Benchmark
  public RouteDecision decide() {
    return fixture.decide.apply(nextQuery());
  }

  /** The library's decision hashing every prompt from its first block (no prefix hash cache). */
  @Benchmark
  public RouteDecision decideWithoutPrefixCache() {
    return fixture.decideWithoutCache.apply(nextQuery());
  }

  /** The decision as the previous version of the library took it (the baseline). */
  @Benchmark
  public RouteDecision previousDecide() {
    return fixture.previous.decide(nextQuery());
  }

  @Benchmark
  public int naivePerPeerScan() {
    return fixture.naiveBest(nextQuery());
  }
}
