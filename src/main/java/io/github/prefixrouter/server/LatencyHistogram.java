package io.github.prefixrouter.server;

import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * Durations counted in fixed buckets, as a Prometheus histogram shows them: how many took at
 * most each bound ({@link #BOUNDS_SECONDS}, then {@code +Inf}), and their sum.
 *
 * <p>Recording takes no lock: one atomic increment of the duration's bucket, then one add to
 * the sum. A {@link #snapshot} reads each bucket once and makes the counts cumulative from
 * those reads, so its {@code +Inf} count is its count, whatever is recorded meanwhile, and no
 * count of a later snapshot is below that of an earlier one. Its sum, read before the buckets,
 * may miss a duration whose bucket it counted (one being recorded as it reads; the next snapshot
 * has it), never the other way round.
 */
final class LatencyHistogram {

  /**
   * The buckets' upper bounds in seconds, 10 ms to 2 minutes: from an answer served from the
   * cache or refused at once to a long generation. Each bucket counts the durations up to its
   * bound (Prometheus' {@code le}); {@code +Inf} comes after the last.
   */
  static final double[] BOUNDS_SECONDS =
      {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120};

  private static final long[] BOUNDS_NANOS = new long[BOUNDS_SECONDS.length];

  static {
    for (int i = 0; i < BOUNDS_SECONDS.length; i++) {
      BOUNDS_NANOS[i] = Math.round(BOUNDS_SECONDS[i] * 1e9);
    }
  }

  /** Per bucket, not cumulative; the last is above the last bound. */
  private final AtomicLongArray counts = new AtomicLongArray(BOUNDS_SECONDS.length + 1);
  private final LongAdder sumNanos = new LongAdder();

  /**
   * Counts one duration; a negative one (a clock that went back) counts as 0.
   *
   * @param nanos the duration in nanoseconds
   */
  void record(long nanos) {
    long d = Math.max(0, nanos);
    counts.incrementAndGet(bucket(d));
    sumNanos.add(d);
  }

  /** The index of the first bucket whose bound is at least {@code nanos}. */
  private static int bucket(long nanos) {
    int i = 0;
    while (i < BOUNDS_NANOS.length && nanos > BOUNDS_NANOS[i]) {
      i++;
    }
    return i;
  }

  /** The counts now, cumulative ({@link LatencyHistogram}: consistent within themselves). */
  Snapshot snapshot() {
    // the sum first: a duration is added to its bucket before the sum, so every duration the
    // sum has is in a bucket read after it
    long sum = sumNanos.sum();
    long[] cumulative = new long[counts.length()];
    long total = 0;
    for (int i = 0; i < cumulative.length; i++) {
      total += counts.get(i);
      cumulative[i] = total;
    }
    return new Snapshot(cumulative, sum / 1e9);
  }

  /**
   * A histogram's counts at one moment.
   *
   * @param cumulative per bound of {@link #BOUNDS_SECONDS}, then for {@code +Inf}: the
   *     durations up to it
   * @param sumSeconds the durations' sum, in seconds
   */
  record Snapshot(long[] cumulative, double sumSeconds) {
    Snapshot {
      if (cumulative.length != BOUNDS_SECONDS.length + 1) {
        throw new IllegalArgumentException("a count per bound and one for +Inf, had "
            + cumulative.length);
      }
      cumulative = cumulative.clone();
    }

    /** The durations counted: the {@code +Inf} bucket's count. */
    long count() {
      return cumulative[cumulative.length - 1];
    }

    @Override
    public long[] cumulative() {
      return cumulative.clone();
    }
  }
}
