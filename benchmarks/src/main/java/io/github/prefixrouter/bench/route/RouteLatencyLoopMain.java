package io.github.prefixrouter.bench.route;

import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.bench.Flags;
import java.util.Arrays;
import java.util.Locale;

/**
 * Times every decision of a closed loop on {@link RouteBenchmark}'s fixture, without JMH, to
 * tell the decision's own cost from interruptions of the machine: prints the percentiles of all
 * decisions, the share slower than a threshold, how far apart in time those slow decisions are
 * (evenly spaced ones are periodic interruptions, not slow prompts), and each query's median and
 * p99.
 *
 * <pre>
 *   java -cp benchmarks/target/benchmarks.jar io.github.prefixrouter.bench.route.RouteLatencyLoopMain \\
 *       [peers] [promptTokens] [FIXED|SHARED] [slowNanos] [decisions]
 *       (default 64 4096 FIXED 15000 400000; {@code benchmarks/run route-loop ...} runs it with
 *       the fixed, pre-touched heap of {@link RouteBenchmark}'s forks)
 * </pre>
 *
 * <p>A bad argument (not a whole number, out of range, not a workload, or a sixth one) stops
 * it with {@code error: ...} naming it and exit code 2 ({@link Flags#parseOrExit}).
 */
public final class RouteLatencyLoopMain {

  private static final int WARMUP = 200_000;

  private static Object sink;

  private RouteLatencyLoopMain() {}

  /**
   * The command line: the fixture's arguments ({@link RouteFixture.Args}), then {@code slowNanos}
   * (0 or more) and {@code decisions} (1 to {@value #MAX_DECISIONS}).
   */
  record Options(RouteFixture.Args fixture, long slowNanos, int decisions) {

    /**
     * Reads at most five positional arguments.
     *
     * @throws IllegalArgumentException naming the argument that is not a whole number, is out
     *     of range or is not a workload, or for a sixth argument
     */
    static Options parse(String[] args) {
      if (args.length > 5) {
        throw new IllegalArgumentException("at most 5 arguments (" + RouteFixture.Args.USAGE
            + " [slowNanos] [decisions]), not " + args.length);
      }
      RouteFixture.Args fixture = RouteFixture.Args.parse(args);
      long slowNanos = RouteFixture.positional(args, 3, "slowNanos", 15_000, 0, Long.MAX_VALUE);
      int decisions = (int) RouteFixture.positional(args, 4, "decisions", 400_000, 1,
          MAX_DECISIONS);
      return new Options(fixture, slowNanos, decisions);
    }
  }

  /** The most decisions timed: five arrays of 8 bytes per decision fit the 3 GB heap. */
  static final int MAX_DECISIONS = 10_000_000;

  public static void main(String[] args) {
    Options o = Flags.parseOrExit("usage: benchmarks/run route-loop " + RouteFixture.Args.USAGE
        + " [slowNanos] [decisions]\n  every routing decision of a closed loop timed", args,
        Options::parse);
    RouteFixture f = o.fixture().fixture();
    long slowNanos = o.slowNanos();
    final int measured = o.decisions();
    int[][] queries = f.queries;
    int mask = queries.length - 1;
    for (int i = 0; i < WARMUP; i++) {
      sink = f.decide.apply(queries[i & mask]);
    }
    long[] took = new long[measured];
    long[] startedAt = new long[measured];
    long origin = System.nanoTime();
    for (int i = 0; i < measured; i++) {
      long start = System.nanoTime();
      RouteDecision d = f.decide.apply(queries[i & mask]);
      long end = System.nanoTime();
      sink = d;
      took[i] = end - start;
      startedAt[i] = start - origin;
    }
    long[] sorted = took.clone();
    Arrays.sort(sorted);
    System.out.printf(Locale.ROOT, "%s workload, %d peers, %d tokens, %d decisions in %.0f ms%n",
        f.workload, f.peers, f.promptTokens, measured, startedAt[measured - 1] / 1e6);
    System.out.printf(Locale.ROOT, "all decisions: p50 %d  p90 %d  p99 %d  p99.9 %d ns%n",
        at(sorted, 0.5), at(sorted, 0.9), at(sorted, 0.99), at(sorted, 0.999));
    long[] gaps = new long[measured];
    int slow = 0;
    long last = -1;
    for (int i = 0; i < measured; i++) {
      if (took[i] > slowNanos) {
        if (last >= 0) {
          gaps[slow - 1] = startedAt[i] - last;
        }
        last = startedAt[i];
        slow++;
      }
    }
    System.out.printf(Locale.ROOT, "slower than %d ns: %d (%.3f%%)%n", slowNanos, slow,
        100.0 * slow / measured);
    if (slow > 2) {
      long[] g = Arrays.copyOf(gaps, slow - 1);
      Arrays.sort(g);
      System.out.printf(Locale.ROOT, "time between slow decisions: p10 %d  p50 %d  p90 %d us%n",
          at(g, 0.1) / 1000, at(g, 0.5) / 1000, at(g, 0.9) / 1000);
    }
    long[] jmh = jmhSampleMode(took, startedAt[measured - 1], 0x5EED);
    System.out.printf(Locale.ROOT,
        "the same calls through JMH's sample-mode histogram: p50 %d  p90 %d  p99 %d  p99.9 %d ns%n",
        jmh[0], jmh[1], jmh[2], jmh[3]);
    int perQuery = Math.min(queries.length, 16);
    for (int q = 0; q < perQuery; q++) {
      long[] mine = new long[(measured + queries.length - 1 - q) / queries.length];
      int n = 0;
      for (int i = q; i < measured; i += queries.length) {
        mine[n++] = took[i];
      }
      Arrays.sort(mine, 0, n);
      long[] m = Arrays.copyOf(mine, n);
      System.out.printf(Locale.ROOT, "query %2d: p50 %d  p99 %d ns%n", q, at(m, 0.5), at(m, 0.99));
    }
  }

  /**
   * The p50, p90, p99 and p99.9 that JMH 1.37's {@code Mode.SampleTime} would report for these
   * calls had it timed them as one iteration lasting {@code iterationNanos}: it times the calls
   * its linear congruential generator picks ({@code (rnd & mask) == 0}, the mask starting at 0),
   * records each in a histogram of 1,024 sub-buckets per power of two, and whenever it has taken
   * more than 20 samples per millisecond of the iteration since the last time, halves every
   * bucket's count and doubles the mask. The halving is {@code count / 2} stored only if not 0,
   * so a bucket holding one sample keeps it: after h halvings a rare slow call weighs up to 2^h
   * times what a call of the body weighs, and the upper percentiles move into the tail.
   */
  static long[] jmhSampleMode(long[] took, long iterationNanos, int seed) {
    int[][] hdr = new int[64][];
    long target = Math.max(1, iterationNanos / 1_000_000 * 20);
    int rnd = seed;
    int mask = 0;
    long stride = 0;
    for (long t : took) {
      rnd = rnd * 1664525 + 1013904223;
      if ((rnd & mask) != 0) {
        continue;
      }
      int bucket = Math.max(0, 54 - Long.numberOfLeadingZeros(t));
      if (hdr[bucket] == null) {
        hdr[bucket] = new int[1024];
      }
      hdr[bucket][(int) (t >> bucket)]++;
      if (stride++ > target) {
        for (int[] b : hdr) {
          for (int j = 0; b != null && j < b.length; j++) {
            int v = b[j] / 2;
            if (v != 0) {
              b[j] = v;
            }
          }
        }
        stride = 0;
        mask = (mask << 1) + 1;
      }
    }
    long total = 0;
    for (int[] b : hdr) {
      for (int j = 0; b != null && j < b.length; j++) {
        total += b[j];
      }
    }
    double[] qs = {0.5, 0.9, 0.99, 0.999};
    long[] out = new long[qs.length];
    int k = 0;
    long seen = 0;
    for (int i = 0; i < hdr.length && k < qs.length; i++) {
      for (int j = 0; hdr[i] != null && j < 1024 && k < qs.length; j++) {
        seen += hdr[i][j];
        while (k < qs.length && seen > qs[k] * total) {
          out[k++] = (long) j << i;
        }
      }
    }
    return out;
  }

  private static long at(long[] sorted, double quantile) {
    return sorted[Math.min(sorted.length - 1, (int) (quantile * sorted.length))];
  }
}
