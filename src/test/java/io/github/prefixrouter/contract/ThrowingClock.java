package io.github.prefixrouter.contract;

import io.github.prefixrouter.spi.Clock;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A host's clock with a bug: once {@linkplain #arm armed}, every {@code every}-th reading (from
 * the {@code phase}-th) throws instead of reading {@code clock}, in turn an
 * {@link IllegalStateException}, an {@link Error} and an {@link java.io.IOException} thrown
 * undeclared (as code in a language without checked exceptions throws it). With {@code every}
 * 1 every reading throws once armed. Thread-safe.
 */
public final class ThrowingClock implements Clock {

  private final Clock clock;
  private final int every;
  private final int phase;
  private final AtomicLong reads = new AtomicLong();
  private final AtomicLong thrown = new AtomicLong();
  private volatile boolean armed;

  /**
   * A clock that reads {@code clock} until armed.
   *
   * @param clock the clock read when a reading does not throw
   * @param every one reading in {@code every} throws once armed ({@code >= 1})
   * @param phase which of them: the readings since armed whose index is {@code phase} modulo
   *     {@code every}
   */
  public ThrowingClock(Clock clock, int every, int phase) {
    if (every < 1 || phase < 0 || phase >= every) {
      throw new IllegalArgumentException("every >= 1, 0 <= phase < every; was " + every + ", "
          + phase);
    }
    this.clock = clock;
    this.every = every;
    this.phase = phase;
  }

  /**
   * From now on, readings throw as set.
   *
   * @return this clock
   */
  public ThrowingClock arm() {
    armed = true;
    return this;
  }

  /** From now on, every reading reads the clock again. */
  public void disarm() {
    armed = false;
  }

  /**
   * The readings that threw.
   *
   * @return how many
   */
  public long thrown() {
    return thrown.get();
  }

  @Override
  public long nanoTime() {
    if (armed && reads.getAndIncrement() % every == phase) {
      switch ((int) (thrown.getAndIncrement() % 3)) {
        case 0 -> throw new IllegalStateException("clock shut down");
        case 1 -> throw new ClockError("clock");
        default -> throw ThrowingCacheEventListener.<RuntimeException>undeclared(
            new java.io.IOException("clock"));
      }
    }
    return clock.nanoTime();
  }

  /** An Error a host's clock may throw (an assertion in its code, a missing class). */
  static final class ClockError extends Error {
    private static final long serialVersionUID = 1L;

    ClockError(String m) {
      super(m);
    }
  }
}
