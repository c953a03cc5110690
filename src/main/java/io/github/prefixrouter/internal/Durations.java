package io.github.prefixrouter.internal;

import java.time.Duration;

/** Conversions of {@link Duration}s that timers and deadlines count in nanoseconds. */
public final class Durations {

  private Durations() {}

  /**
   * {@code d} in nanoseconds, or {@link Long#MAX_VALUE} when that does not fit in a long (about
   * 292 years: a "never" written as a huge duration).
   *
   * @param d a non-negative duration
   * @return its nanoseconds, saturated
   */
  public static long saturatedNanos(Duration d) {
    try {
      return d.toNanos();
    } catch (ArithmeticException beyond292Years) {
      return Long.MAX_VALUE;
    }
  }
}
