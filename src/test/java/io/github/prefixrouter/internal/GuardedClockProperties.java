package io.github.prefixrouter.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.Clock;
import java.util.Deque;
import java.util.LinkedList;
import java.util.List;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;
import net.jqwik.api.constraints.Size;

/**
 * The guard of a host's clock: a reading that throws gives the latest good one, in the clock's
 * own order (readings compared as differences: they may pass {@link Long#MAX_VALUE}).
 */
class GuardedClockProperties {

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
