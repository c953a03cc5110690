package io.github.prefixrouter.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.Clock;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AfterContainer;

/**
 * The guard of a host's clock: a reading that throws gives the latest good one, in the clock's
 * own order (readings compared as differences: they may pass {@link Long#MAX_VALUE}).
 */
class GuardedClockProperties {

  /** Threads to read on, one at a time; more than the guard has slots on a small machine. */
  static final ExecutorService[] THREADS = new ExecutorService[16];

  static {
    for (int i = 0; i < THREADS.length; i++) {
      THREADS[i] = Executors.newSingleThreadExecutor();
    }
  }

  @AfterContainer
  static void stopThreads() {
    for (ExecutorService t : THREADS) {
      t.shutdownNow();
    }
  }

  /** A clock that gives the scripted readings in turn; null: that reading throws. */
  static Clock scripted(Deque<Long> readings) {
    return () -> {
      Long next = readings.removeFirst();
      if (next == null) {
        throw new IllegalStateException("the clock was shut down");
      }
      return next;
    };
  }

  @Property
  void aReadingThatThrowsGivesTheLatestGoodOne(
      @ForAll @LongRange(min = 0, max = 20_000_000_000L) long beforeWrap,
      @ForAll @Size(max = 64) List<@LongRange(min = -1, max = 1_000_000_000L) Long> steps) {
    // -1: the reading throws; else the clock has moved on by that many nanoseconds
    long origin = Long.MAX_VALUE - beforeWrap; // most runs pass Long.MAX_VALUE
    Deque<Long> readings = new LinkedList<>();
    readings.add(origin);
    long now = origin;
    for (long s : steps) {
      if (s < 0) {
        readings.add(null);
      } else {
        now += s;
        readings.add(now);
      }
    }
    GuardedClock clock = GuardedClock.of("node n0", scripted(new LinkedList<>(readings)));
    readings.removeFirst();
    long good = origin;
    int thrown = 0;
    for (int i = 0; i < steps.size(); i++) {
      Long next = readings.removeFirst();
      long read = clock.nanoTime();
      if (next == null) {
        thrown++;
        assertEquals(good, read, "reading " + i + " threw: the latest good reading stands");
      } else {
        assertEquals(next.longValue(), read, "reading " + i + " is the clock's own");
        good = next;
      }
    }
    assertEquals(thrown, clock.failures(), "the readings that threw");
  }

  /**
   * Readings taken on many threads, one after the other: a reading that throws, on whichever
   * thread, gives the latest good reading of them all, taken on that thread or another, also
   * across {@link Long#MAX_VALUE}; a reading earlier than the latest (taken before it on another
   * thread and returned after it) is given as it is and does not replace it.
   */
  @Property
  void aReadingThatThrowsGivesTheLatestGoodOneOfEveryThread(
      @ForAll @LongRange(min = 0, max = 20_000_000_000L) long beforeWrap,
      @ForAll @Size(max = 64) List<@LongRange(min = -1_000_000_000L, max = 1_000_000_000L) Long>
          steps,
      @ForAll @Size(min = 1, max = 64) List<@IntRange(min = 0, max = 15) Integer> threads)
      throws Exception {
    // 0: the reading throws; above 0: the clock has moved on by that many nanoseconds; below 0:
    // a reading that many nanoseconds before the latest good one
    long origin = Long.MAX_VALUE - beforeWrap;
    Deque<Long> readings = new LinkedList<>();
    List<Long> expected = new ArrayList<>();
    long good = origin;
    for (long s : steps) {
      if (s == 0) {
        readings.add(null);
        expected.add(good);
      } else {
        long read = good + s;
        readings.add(read);
        expected.add(read);
        if (s > 0) {
          good = read;
        }
      }
    }
    readings.addFirst(origin);
    GuardedClock clock = GuardedClock.of("node n0", scripted(readings));
    int thrown = 0;
    for (int i = 0; i < steps.size(); i++) {
      int t = threads.get(i % threads.size());
      long read = readOn(t, clock);
      if (steps.get(i) == 0) {
        thrown++;
      }
      assertEquals(expected.get(i).longValue(), read, "reading " + i + " (step " + steps.get(i)
          + ") on thread " + t + (steps.get(i) == 0
              ? " threw: the latest good reading of every thread stands"
              : " is the clock's own"));
    }
    assertEquals(thrown, clock.failures(), "the readings that threw");
  }

  private static long readOn(int thread, GuardedClock clock) throws Exception {
    try {
      return THREADS[thread].submit(clock::nanoTime).get();
    } catch (ExecutionException e) {
      throw new AssertionError("reading the clock on thread " + thread + " threw", e.getCause());
    }
  }

  @Example
  void anEarlierReadingReturnedLaterDoesNotReplaceTheLatest() {
    // as when another thread's reading, taken first, returns after this thread's: the latest in
    // the clock's order stands, also across Long.MAX_VALUE (where comparing values would not)
    long before = Long.MAX_VALUE - 5;
    long after = Long.MIN_VALUE + 5;
    Deque<Long> readings = new LinkedList<>();
    readings.add(before - 10);
    readings.add(after);
    readings.add(before);
    readings.add(null);
    GuardedClock clock = GuardedClock.of("node n0", scripted(readings));
    assertEquals(after, clock.nanoTime());
    assertEquals(before, clock.nanoTime());
    assertEquals(after, clock.nanoTime(),
        "a reading that threw gave an earlier reading than the latest good one");
  }

  @Example
  void aClockThatThrowsWhenFirstReadIsATypedError() {
    ArithmeticException thrown = new ArithmeticException("overflow");
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> GuardedClock.of("node n0", () -> {
          throw thrown;
        }));
    assertSame(thrown, e.getCause());
    assertTrue(e.getMessage().contains("n0") && e.getMessage().contains("clock"),
        e.getMessage());
  }

  @Example
  void anErrorOrACheckedExceptionIsGuardedAlike() {
    Deque<Long> readings = new LinkedList<>(List.of(7L));
    Throwable[] next = {new AssertionError("clock"),
        new java.io.IOException("clock")};
    int[] i = {0};
    GuardedClock clock = GuardedClock.of("node n0", () -> {
      if (!readings.isEmpty()) {
        return readings.removeFirst();
      }
      throw io.github.prefixrouter.contract.ThrowingCacheEventListener
          .<RuntimeException>undeclared(next[i[0]++]);
    });
    assertEquals(7L, clock.nanoTime(), "an Error");
    assertEquals(7L, clock.nanoTime(), "a checked exception thrown undeclared");
    assertEquals(2, clock.failures());
    assertSame(clock, GuardedClock.of("node n1", clock), "a guard is not guarded again");
  }
}
