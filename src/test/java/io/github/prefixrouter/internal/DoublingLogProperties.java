package io.github.prefixrouter.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;

/**
 * {@link DoublingLog} against a model that lists the failures to log as the powers of two,
 * 1, 2, 4, ... up to 2^62, made by doubling: the k-th failure is logged if and only if k is in
 * the list, every failure is counted, and no other number is logged.
 */
class DoublingLogProperties {

  /** The model: the powers of two a long holds, by doubling from 1. */
  private static List<Long> powersOfTwo() {
    List<Long> p = new ArrayList<>();
    for (long v = 1; v > 0; v *= 2) {
      p.add(v);
    }
    return p;
  }

  @Property(tries = 200)
  void theFailuresLoggedAreThoseWhoseNumberIsAPowerOfTwo(
      @ForAll @IntRange(min = 0, max = 5_000) int failures) {
    List<Long> model = powersOfTwo();
    DoublingLog log = new DoublingLog();
    List<Long> logged = new ArrayList<>();
    for (int k = 1; k <= failures; k++) {
      long n = log.failed();
      assertEquals(model.contains((long) k) ? k : 0, n, "failure " + k);
      if (n != 0) {
        logged.add(n);
      }
      assertEquals(k, log.count());
    }
    assertEquals(model.stream().filter(p -> p <= failures).toList(), logged);
    assertEquals(failures, log.count());
  }

  @Property(tries = 500)
  void logsMatchesTheModelForAnyNumber(@ForAll long n) {
    assertEquals(powersOfTwo().contains(n), DoublingLog.logs(n), "n = " + n);
  }

  @Property(tries = 200)
  void logsMatchesTheModelAroundEachPowerOfTwo(
      @ForAll @IntRange(min = 0, max = 62) int exponent,
      @ForAll @LongRange(min = -2, max = 2) long offset) {
    long n = (1L << exponent) + offset;
    assertEquals(powersOfTwo().contains(n), DoublingLog.logs(n), "n = " + n);
  }

  @Example
  void noNumberBelowOneIsLogged() {
    assertFalse(DoublingLog.logs(0));
    assertFalse(DoublingLog.logs(-1));
    assertFalse(DoublingLog.logs(Long.MIN_VALUE));
  }

  /** Threads failing at once log each power of two exactly once, and miss no failure. */
  @Example
  void threadsFailingAtOnceLogEachLineOnce() throws InterruptedException {
    DoublingLog log = new DoublingLog();
    int threads = 4;
    int each = 10_000;
    ConcurrentLinkedQueue<Long> logged = new ConcurrentLinkedQueue<>();
    CountDownLatch go = new CountDownLatch(1);
    List<Thread> started = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      Thread th = new Thread(() -> {
        try {
          go.await();
        } catch (InterruptedException e) {
          throw new AssertionError(e);
        }
        for (int i = 0; i < each; i++) {
          long n = log.failed();
          if (n != 0) {
            logged.add(n);
          }
        }
      });
      th.start();
      started.add(th);
    }
    go.countDown();
    for (Thread th : started) {
      th.join();
    }
    assertEquals(threads * each, log.count());
    assertEquals(powersOfTwo().stream().filter(p -> p <= threads * each).toList(),
        logged.stream().sorted().toList());
  }
}
