package io.github.prefixrouter.internal;

import io.github.prefixrouter.spi.Clock;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLongArray;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A host's {@link Clock} as the library reads it: a reading that throws (a host's bug, a
 * simulated clock shut down; a RuntimeException, an Error or a checked exception thrown
 * undeclared, as for the other SPIs) gives the latest good reading instead, so that nothing the
 * reader took on (a node's request, say) is left unanswered half way through its bookkeeping.
 * While every reading throws, time stands still for the reader: its timers still run, but what
 * it measures between readings (service times, cool-downs, silences) does not grow until the
 * clock reads again.
 *
 * <p>A component given a clock of its own reads it through a guard of its own, made as the
 * component is built ({@link #of}), which takes the first reading: a clock that throws then
 * fails the build, before anything is accepted. The first failure after that is logged at ERROR
 * with its stack trace, later ones at WARN when their count reaches a power of two
 * ({@link DoublingLog}); all are counted ({@link #failures}).
 *
 * <p>The latest good reading is the latest in the clock's own order, compared as a difference
 * of readings (a reading may pass {@link Long#MAX_VALUE} and go on from {@link Long#MIN_VALUE}):
 * one taken on another thread that returned later with an earlier value does not replace it, so
 * the readings a thread gets never decrease. Thread-safe. A good reading is kept in a slot picked
 * by the reading thread's id, each slot on a cache line of its own: it costs one volatile read of
 * that slot, and a compare-and-set of it when the clock has moved on, so that threads reading at
 * once do not all write one value (with one value for all, 2 threads reading back to back took
 * two to five times as long per reading as the raw clock: docs/routing.md, "What the clock's
 * guard costs"). A reading that throws gives the latest of the slots.
 */
public final class GuardedClock implements Clock {

  private static final Logger LOG = LoggerFactory.getLogger(GuardedClock.class);

  /** What reads the clock, for the log: "node n0", "transport n0", "reference engine". */
  private final String reader;
  private final Clock clock;
  /**
   * The latest good reading of each slot, slot {@code i} at index {@code (i + 1) * PAD}: 128
   * bytes apart and from the array's ends, so that no two slots share a cache line, nor one
   * with the array's length, which every reading reads.
   */
  private final AtomicLongArray latest;
  private final DoublingLog failures = new DoublingLog();

  /** Longs from one slot to the next. */
  private static final int PAD = 16;
  /** Slots per guard: twice the processors rounded up to a power of two, at most 64. */
  private static final int SLOTS =
      Math.min(64, Integer.highestOneBit(2 * Runtime.getRuntime().availableProcessors() - 1) << 1);

  private GuardedClock(String reader, Clock clock, long first) {
    this.reader = reader;
    this.clock = clock;
    this.latest = new AtomicLongArray((SLOTS + 2) * PAD);
    for (int i = 0; i < SLOTS; i++) {
      latest.set((i + 1) * PAD, first);
    }
  }

  /**
   * The guard of {@code clock} for {@code reader}, which reads it once now; {@code clock}
   * itself if it is such a guard already.
   *
   * @param reader what reads the clock, for the log and the error ("node n0")
   * @param clock the host's clock
   * @return the guarded clock
   * @throws IllegalStateException if the clock throws when read now (its cause is what the
   *     clock threw)
   */
  public static GuardedClock of(String reader, Clock clock) {
    Objects.requireNonNull(reader, "reader");
    Objects.requireNonNull(clock, "clock");
    if (clock instanceof GuardedClock g) {
      return g;
    }
    long first;
    try {
      first = clock.nanoTime();
    } catch (Throwable e) {
      throw new IllegalStateException(reader + ": its clock threw when first read, as it was "
          + "built: " + e, e);
    }
    return new GuardedClock(reader, clock, first);
  }

  @Override
  public long nanoTime() {
    long now;
    try {
      now = clock.nanoTime();
    } catch (Throwable e) {
      return failed(e);
    }
    // the reading thread's slot; threads that share one still keep its latest reading
    int at = (((int) Thread.currentThread().getId() & (SLOTS - 1)) + 1) * PAD;
    long last = latest.get(at);
    while (now - last > 0 && !latest.compareAndSet(at, last, now)) {
      last = latest.get(at);
    }
    return now;
  }

  /** The latest good reading: the latest of the slots, in the clock's order. */
  private long latest() {
    long m = latest.get(PAD);
    for (int i = 1; i < SLOTS; i++) {
      long v = latest.get((i + 1) * PAD);
      if (v - m > 0) {
        m = v;
      }
    }
    return m;
  }

  /** A reading threw {@code e}: counted, logged (rarely), and the latest good reading stands. */
  private long failed(Throwable e) {
    long n = failures.failed(); // 0 unless logged
    if (n == 1) {
      LOG.error("{}: its clock threw; it reads the latest good reading instead until the"
          + " clock reads again", reader, e);
    } else if (n > 1) {
      LOG.warn("{}: its clock has thrown {} times, the latest: {}", reader, n,
          String.valueOf(e));
    }
    return latest();
  }

  /**
   * How many readings of the host's clock threw since the guard was made.
   *
   * @return the count
   */
  public long failures() {
    return failures.count();
  }
}
