package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.spi.Clock;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The host's {@link Clock} as a node reads it: a reading that throws (a host's bug, a simulated
 * clock shut down; a RuntimeException, an Error or a checked exception thrown undeclared, as for
 * the node's other SPIs) gives the latest good reading instead, so that no request the node took
 * on is left unanswered half way through its bookkeeping. While every reading throws, time
 * stands still for the node: its timers still run on the scheduler, but what it measures
 * between readings (service times, cool-downs, silences) does not grow until the clock reads
 * again.
 *
 * <p>The first reading is taken as the node is built ({@link #of}): a clock that throws then
 * fails the build, before any request is accepted. The first failure after that is logged at
 * ERROR with its stack trace, later ones at WARN when their count reaches a power of two; all
 * are counted ({@link #failures}).
 *
 * <p>The latest good reading is the latest in the clock's own order, compared as a difference
 * of readings (a reading may pass {@link Long#MAX_VALUE} and go on from {@link Long#MIN_VALUE}):
 * one taken on another thread that returned later with an earlier value does not replace it, so
 * the readings a thread gets never decrease. Thread-safe; a good reading costs one volatile read,
 * and a compare-and-set when the clock has moved on.
 */
public final class GuardedClock implements Clock {

  private static final Logger LOG = LoggerFactory.getLogger(GuardedClock.class);

  private final String nodeId;
  private final Clock clock;
  private final AtomicLong latest;
  private final AtomicLong failures = new AtomicLong();

  private GuardedClock(String nodeId, Clock clock, long first) {
    this.nodeId = nodeId;
    this.clock = clock;
    this.latest = new AtomicLong(first);
  }

  /**
   * Node {@code nodeId}'s guard of {@code clock}, which it reads once now; {@code clock} itself
   * if it is such a guard already.
   *
   * @param nodeId the node that reads the clock, for the log
   * @param clock the host's clock
   * @return the guarded clock
   * @throws IllegalStateException if the clock throws when read now (its cause is what the
   *     clock threw)
   */
  public static GuardedClock of(String nodeId, Clock clock) {
    Objects.requireNonNull(nodeId, "nodeId");
    Objects.requireNonNull(clock, "clock");
    if (clock instanceof GuardedClock g) {
      return g;
    }
    long first;
    try {
      first = clock.nanoTime();
    } catch (Throwable e) {
      throw new IllegalStateException("node " + nodeId + ": its clock threw when first read, "
          + "as the node was built: " + e, e);
    }
    return new GuardedClock(nodeId, clock, first);
  }

  @Override
  public long nanoTime() {
    long now;
    try {
      now = clock.nanoTime();
    } catch (Throwable e) {
      return failed(e);
    }
    long last = latest.get();
    while (now - last > 0 && !latest.compareAndSet(last, now)) {
      last = latest.get();
    }
    return now;
  }

  /** A reading threw {@code e}: counted, logged (rarely), and the latest good reading stands. */
  private long failed(Throwable e) {
    long n = failures.incrementAndGet();
    if (n == 1) {
      LOG.error("node {}: its clock threw; it reads the latest good reading instead until the"
          + " clock reads again", nodeId, e);
    } else if ((n & (n - 1)) == 0) {
      LOG.warn("node {}: its clock has thrown {} times, the latest: {}", nodeId, n,
          String.valueOf(e));
    }
    return latest.get();
  }

  /**
   * How many readings of the host's clock threw since the node was built.
   *
   * @return the count
   */
  public long failures() {
    return failures.get();
  }
}
