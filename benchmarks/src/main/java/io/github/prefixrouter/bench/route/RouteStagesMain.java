package io.github.prefixrouter.bench.route;

import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.internal.gossip.BlockChainSource;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Arrays;
import java.util.Locale;
import java.util.function.Function;
import java.util.function.IntToLongFunction;

/**
 * The routing decision's stages and the decision with and without the prefix hash cache and the
 * previous planner, timed in one process on {@link RouteBenchmark}'s fixture, for a machine too
 * busy for JMH's percentiles: each call timed alone (fastest run and 10th percentile, which
 * preemption rarely reaches), and thread CPU time per decision over interleaved batches (which
 * excludes the time the thread was not running).
 *
 * <pre>
 *   java -cp benchmarks/target/benchmarks.jar io.github.prefixrouter.bench.route.RouteStagesMain \\
 *       [peers] [promptTokens] [FIXED|SHARED]        (default 64 4096 FIXED)
 * </pre>
 *
 * <p>A bad argument ({@link RouteFixture.Args}) stops it with {@code error: ...} naming it and
 * exit code 2.
 */
public final class RouteStagesMain {

  private static long sink;

  private RouteStagesMain() {}

  public static void main(String[] args) {
    RouteFixture f = Flags.parseOrExit("usage: benchmarks/run route-stages "
        + RouteFixture.Args.USAGE + "\n  the routing decision's stages timed one by one", args,
        RouteFixture.Args::parseAll).fixture();
    int peers = f.peers;
    int tokens = f.promptTokens;
    RouteFixture.Workload w = f.workload;
    f.checkSameDecisions(4, 7);
    int nq = f.queries.length;
    BlockChainSource[] hashed = new BlockChainSource[nq];
    int[] hashedBlocks = new int[nq];
    for (int i = 0; i < nq; i++) {
      long[] chain = f.hasher.chain(f.queries[i]);
      hashed[i] = BlockChainSource.of(chain, chain.length);
      int longest = 0;
      for (RouteDecision.Candidate c : f.decideWithoutCache.apply(f.queries[i]).candidates()) {
        if (!c.local()) {
          longest = Math.max(longest, c.matchedTokens() / 16);
        }
      }
      int pulled = 8; // the lazy query pulls 8 blocks, then 16 at a time, past the longest match
      while (pulled <= longest) {
        pulled += 16;
      }
      hashedBlocks[i] = Math.min(pulled, chain.length);
    }
    int[] perSlot = new int[f.observer.slotCapacity()];
    long[] out = new long[tokens / 16];
    System.out.printf(Locale.ROOT, "%s workload, %d peers, %d tokens; nanoseconds%n", w, peers,
        tokens);
    time("hash as far as the decision (no cache)", nq,
        i -> f.hasher.chain(f.queries[i], hashedBlocks[i] * 16, out));
    time("local tree match", nq, i -> f.localTree.match(f.queries[i]));
    time("replica query over precomputed hashes", nq,
        i -> f.observer.leadingBlocks(hashed[i], perSlot));
    time("decision", nq, i -> f.decide.apply(f.queries[i]).candidateCount());
    time("decision without the prefix hash cache", nq,
        i -> f.decideWithoutCache.apply(f.queries[i]).candidateCount());
    time("previous planner", nq, i -> f.previous.decide(f.queries[i]).candidateCount());
    cpuTime(f);
    System.out.println("(" + (sink & 1) + ")");
  }

  private static void time(String name, int nq, IntToLongFunction op) {
    int reps = 60_000;
    long[] ns = new long[reps];
    for (int r = 0; r < 3 * reps; r++) {
      sink += op.applyAsLong(r % nq);
    }
    for (int r = 0; r < reps; r++) {
      long t0 = System.nanoTime();
      sink += op.applyAsLong(r % nq);
      ns[r] = System.nanoTime() - t0;
    }
    Arrays.sort(ns);
    System.out.printf(Locale.ROOT, "  %-42s min %7d  p10 %7d  p50 %7d  p99 %7d%n", name, ns[0],
        ns[reps / 10], ns[reps / 2], ns[reps * 99 / 100]);
  }

  private static void cpuTime(RouteFixture f) {
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    String[] names = {"decision", "decision without the prefix hash cache", "previous planner"};
    @SuppressWarnings("unchecked")
    Function<int[], RouteDecision>[] fs = new Function[] {f.decide, f.decideWithoutCache,
        (Function<int[], RouteDecision>) f.previous::decide};
    int batches = 40;
    int per = 2_000;
    int m = f.queries.length - 1;
    double[][] r = new double[fs.length][batches];
    int next = 0;
    for (int b = 0; b < batches; b++) {
      for (int k = 0; k < fs.length; k++) {
        long c0 = mx.getCurrentThreadCpuTime();
        for (int i = 0; i < per; i++) {
          sink += fs[k].apply(f.queries[(next + i) & m]).candidateCount();
        }
        r[k][b] = (mx.getCurrentThreadCpuTime() - c0) / (double) per;
      }
      next += per;
    }
    System.out.println("  thread CPU time per decision, batches of " + per + ", interleaved:");
    for (int k = 0; k < fs.length; k++) {
      Arrays.sort(r[k]);
      System.out.printf(Locale.ROOT, "  %-42s min %7.0f  median %7.0f%n", names[k], r[k][0],
          r[k][batches / 2]);
    }
  }
}
