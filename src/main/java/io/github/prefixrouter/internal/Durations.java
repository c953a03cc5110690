package io.github.prefixrouter.internal;

import java.time.Duration;

/**
 * Conversions of {@link Duration}s that timers and deadlines count in nanoseconds, and deadlines
 * on a clock whose readings have an arbitrary origin.
 *
 * <p>A {@link io.github.prefixrouter.spi.Clock}'s readings, like {@link System#nanoTime()}'s,
 * mean something only as differences: the origin may lie anywhere, so {@code now + nanos} may
 * wrap past {@link Long#MAX_VALUE}. A deadline is therefore compared with a reading by their
 * difference ({@link #ahead}), never by value, which holds for deadlines less than 2^63 ns
 * (about 292 years) from the reading.
 */
public final class Durations {

  /** A deadline never set: {@link #ahead} of no reading. {@link #deadline} never returns it. */
  public static final long NEVER = Long.MIN_VALUE;

  private Durations() {}

  /**
   * The reading {@code nanos} after {@code now}, wrapping past {@link Long#MAX_VALUE} as
   * readings do; never {@link #NEVER} (a sum equal to it is moved on by a nanosecond).
   *
   * @param now a reading
   * @param nanos how far after it, at least 0
   * @return the deadline's reading
   */
  public static long deadline(long now, long nanos) {
    long d = now + nanos;
    return d == NEVER ? d + 1 : d;
  }

  /**
   * Whether deadline {@code until} (from {@link #deadline}, or {@link #NEVER}) is still ahead of
   * reading {@code now}.
   *
   * @param until a deadline, or {@link #NEVER}
   * @param now a reading of the same clock
   * @return whether {@code until} is set and later than {@code now}
   */
  public static boolean ahead(long until, long now) {
    return until != NEVER && until - now > 0;
  }

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
