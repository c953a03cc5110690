package io.github.prefixrouter.internal;

import java.util.Arrays;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
import org.slf4j.Logger;

/**
 * A count of a component's failures and its log of them, bounded: every failure is counted
 * ({@link #count()}), and at most {@code perMinute} lines are logged a minute (timed by the
 * caller's clock, in milliseconds: a wall clock, or a monotonic one), all failures together,
 * the next line logged saying how many were left out before it. A failure that lasts (a heap
 * that runs out, a provider or a host component that breaks) fails everything that arrives
 * meanwhile: logged a line each, it would fill the log. What was thrown is logged with its line,
 * an {@link Error} at ERROR, anything else at WARN ({@link #log}). The HTTP transport and the
 * node's client endpoint count their own failures here.
 *
 * <p>Thread-safe: any thread may report a failure. The count misses none; the lines of one
 * minute are at most {@code perMinute} however many threads report at once (a
 * {@link RecentWarnings} that remembers no key admits them).
 */
public final class CountedFailureLog {

  private final Logger log;
  private final int perMinute;
  private final LongSupplier clockMillis;
  private final RecentWarnings lines;
  private final LongAdder count = new LongAdder();

  /**
   * @param log where the lines go
   * @param perMinute lines a minute at most
   * @param clockMillis the caller's clock, in milliseconds, read as each failure is reported
   */
  public CountedFailureLog(Logger log, int perMinute, LongSupplier clockMillis) {
    this.log = log;
    this.perMinute = perMinute;
    this.clockMillis = clockMillis;
    this.lines = new RecentWarnings(0, perMinute);
  }

  /**
   * Counts a failure, and logs its line unless this minute's lines are used up (then the next
   * line logged counts it as left out).
   *
   * @param thrown what was thrown, logged with its stack trace; null for none
   * @param format the line, with a {@code {}} for each of {@code args}
   */
  public void failed(Throwable thrown, String format, Object... args) {
    count.increment();
    long leftOut = lines.admit("", format, clockMillis.getAsLong());
    if (leftOut < 0) {
      return; // left out this minute (the next line logged counts it)
    }
    log(log, thrown, leftOut == 0 ? format : format + " (" + leftOut + " more such failures "
        + "left out before this one, above " + perMinute + " a minute)", args);
  }

  /** The failures reported so far, whether their lines were logged or left out. */
  public long count() {
    return count.sum();
  }

  /**
   * Logs a failure's line with what was thrown: an {@link Error} (the heap running out, a thread
   * that cannot start) at ERROR, anything else at WARN, every time: not counted, nor bounded.
   *
   * @param thrown what was thrown, logged with its stack trace; null for none (WARN)
   * @param format the line, with a {@code {}} for each of {@code args}
   */
  public static void log(Logger log, Throwable thrown, String format, Object... args) {
    Object[] all = args;
    if (thrown != null) {
      all = Arrays.copyOf(args, args.length + 1);
      all[args.length] = thrown;
    }
    if (thrown instanceof Error) {
      log.error(format, all);
    } else {
      log.warn(format, all);
    }
  }
}
