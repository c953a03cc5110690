package io.github.prefixrouter.internal;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A count of a repeated failure, and the rule that thins its log as the count grows: the 1st,
 * 2nd, 4th, 8th ... failure (each whose number is a power of two) is logged, the others only
 * counted. So a failure that lasts (a clock, an engine's {@code load()} or an engine's runs that
 * throw every time) logs a line per doubling of its count, not one per occurrence, and never
 * stops being logged for good. The caller writes the lines: typically the first with what was
 * thrown, the later ones with their count ({@code GuardedClock}, the node's engine load guard,
 * the node's runs that break the engine's contract).
 *
 * <p>Thread-safe: each failure gets a number of its own, so each line is logged exactly once
 * however many threads fail at once.
 */
public final class DoublingLog {

  private final AtomicLong count = new AtomicLong();

  /**
   * Counts a failure.
   *
   * @return its number (1 for the first) if its line is to be logged, a power of two; else 0
   */
  public long failed() {
    long n = count.incrementAndGet();
    return logs(n) ? n : 0;
  }

  /**
   * The failures counted so far, logged or not.
   *
   * @return the count
   */
  public long count() {
    return count.get();
  }

  /**
   * Whether the {@code n}-th failure is logged: {@code n} is a power of two (1, 2, 4, ...).
   *
   * @param n a failure's number
   * @return true if it is logged
   */
  public static boolean logs(long n) {
    return n > 0 && (n & (n - 1)) == 0;
  }
}
