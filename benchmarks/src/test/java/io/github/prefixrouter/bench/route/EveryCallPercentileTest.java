package io.github.prefixrouter.bench.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The exact slow-call counts that the route benchmark's p99 target is checked on, and the
 * emulation of JMH's sample-mode histogram that shows why its upper percentiles are not used.
 */
class EveryCallPercentileTest {

  @Test
  void countsEveryThresholdStrictlyAbove() {
    RouteBenchmark.EveryCall c = new RouteBenchmark.EveryCall();
    c.record(999);
    c.record(1_000); // not over 1 us
    c.record(1_001);
    c.record(10_000); // not over 10 us
    c.record(10_001);
    c.record(60_000);
    assertEquals(6, c.calls);
    assertEquals(4, c.over1us);
    assertEquals(3, c.over8us);
    assertEquals(2, c.over10us);
    assertEquals(1, c.over15us);
    assertEquals(1, c.over50us);
    c.reset();
    assertEquals(0, c.calls);
    assertEquals(0, c.over1us + c.over10us + c.over50us);
  }

  @Test
  void thresholdsAndCounterNamesMatchTheFields() throws Exception {
    long[] t = RouteBenchmark.EveryCall.THRESHOLDS_NANOS;
    String[] names = RouteBenchmark.EveryCall.COUNTERS;
    assertEquals(t.length, names.length);
    for (int i = 0; i < t.length; i++) {
      RouteBenchmark.EveryCall c = new RouteBenchmark.EveryCall();
      c.record(t[i]); // not over its own threshold
      c.record(t[i] + 1); // over it
      var f = RouteBenchmark.EveryCall.class.getField(names[i]);
      assertEquals(1L, f.getLong(c), names[i]);
      if (i > 0) {
        assertTrue(t[i] > t[i - 1], "thresholds ascend");
      }
    }
  }

  private static RouteBenchmarkMain.Row row(long calls, long... over) {
    double[] o = new double[over.length];
    for (int i = 0; i < over.length; i++) {
      o[i] = over[i];
    }
    return new RouteBenchmarkMain.Row("decideEveryCall", "FIXED", 64, 4096, null, -1, calls, o);
  }

  @Test
  void bracketsTheExactP99FromTheCounts() {
    // 100,000 calls: 5% over 6 us, 0.9% over 8 us, 0.5% over 10 us
    RouteBenchmarkMain.Row r =
        row(100_000, 100_000, 100_000, 90_000, 20_000, 5_000, 900, 500, 300, 200, 10);
    assertEquals(8_000, r.p99AtMostNanos());
    assertEquals(6_000, r.p99AboveNanos());
    assertEquals("(6, 8] us", r.p99Bracket());
    assertEquals(0.005, r.shareOverTarget(), 1e-12);
    // 2% over 50 us: no threshold bounds it
    RouteBenchmarkMain.Row slow =
        row(1_000, 1_000, 1_000, 1_000, 1_000, 1_000, 1_000, 1_000, 500, 100, 20);
    assertEquals(-1, slow.p99AtMostNanos());
    assertEquals(50_000, slow.p99AboveNanos());
    assertEquals(1.0, slow.shareOverTarget(), 1e-12);
    assertFalse(slow.shareOverTarget() <= 0.01);
    RouteBenchmarkMain.Row none = new RouteBenchmarkMain.Row(
        "decide", "FIXED", 64, 4096, null, -1, 0, null);
    assertFalse(none.everyCall());
    assertNull(none.over());
  }

  /**
   * A trace like the decision's on this machine: the body between 3 and 5 us, 0.6% of calls hit
   * by an interruption of 15 to 60 us. The exact p99 is in the body; JMH's halved histogram,
   * which keeps single-sample buckets whole, puts it in the tail.
   */
  @Test
  void jmhSampleModeOverWeightsRareSlowCalls() {
    SplittableRandom r = new SplittableRandom(7);
    long[] took = new long[400_000];
    for (int i = 0; i < took.length; i++) {
      took[i] = r.nextDouble() < 0.006 ? 15_000 + r.nextInt(45_000) : 3_000 + r.nextInt(2_000);
    }
    long[] sorted = took.clone();
    Arrays.sort(sorted);
    long exactP99 = sorted[(int) (0.99 * sorted.length)];
    assertTrue(exactP99 < 5_000, "exact p99 " + exactP99);
    long[] jmh = RouteLatencyLoopMain.jmhSampleMode(took, 1_800_000_000L, 0x5EED);
    assertTrue(jmh[0] >= 3_000 && jmh[0] < 5_000, "p50 stays in the body: " + jmh[0]);
    assertTrue(jmh[2] > 15_000, "p99 moves into the tail: " + jmh[2]);
  }

  /** Without rare values the emulated histogram agrees with the exact percentiles. */
  @Test
  void jmhSampleModeAgreesWithoutRareValues() {
    SplittableRandom r = new SplittableRandom(11);
    long[] took = new long[400_000];
    for (int i = 0; i < took.length; i++) {
      took[i] = 3_000 + r.nextInt(200); // 200 values, each in thousands of samples
    }
    long[] sorted = took.clone();
    Arrays.sort(sorted);
    long[] jmh = RouteLatencyLoopMain.jmhSampleMode(took, 1_800_000_000L, 0x5EED);
    long exactP99 = sorted[(int) (0.99 * sorted.length)];
    assertTrue(Math.abs(jmh[2] - exactP99) <= 8, jmh[2] + " vs " + exactP99);
  }
}
