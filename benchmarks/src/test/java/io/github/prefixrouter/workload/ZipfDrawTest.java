package io.github.prefixrouter.workload;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.DoubleRange;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

class ZipfDrawTest {

  @Test
  void ranksFollowTheWeights() {
    // weights 1, 1/2: rank 0 covers [0, 2/3)
    ZipfDraw d = ZipfDraw.of(2, 1.0);
    assertEquals(0, d.rank(0.0));
    assertEquals(0, d.rank(0.66));
    assertEquals(1, d.rank(0.67));
    assertEquals(1, d.rank(Math.nextDown(1.0)));
    // exponent 0 is uniform: four equal quarters
    ZipfDraw u = ZipfDraw.of(4, 0);
    assertEquals(0, u.rank(0.24));
    assertEquals(1, u.rank(0.26));
    assertEquals(2, u.rank(0.74));
    assertEquals(3, u.rank(0.76));
  }

  /** The rank is the first whose cumulative weight reaches u times the total, as counted naively. */
  @Property(tries = 300)
  void rankMatchesANaiveCount(@ForAll @IntRange(min = 1, max = 200) int n,
      @ForAll @DoubleRange(min = 0, max = 3) double exponent,
      @ForAll @DoubleRange(min = 0, max = 1, maxIncluded = false) double u) {
    double[] cumulative = new double[n];
    double total = 0;
    for (int k = 0; k < n; k++) {
      total += Math.pow(k + 1, -exponent);
      cumulative[k] = total;
    }
    double target = u * total;
    int expected = n - 1;
    for (int k = 0; k < n; k++) {
      if (cumulative[k] >= target) {
        expected = k;
        break;
      }
    }
    int rank = ZipfDraw.of(n, exponent).rank(u);
    assertTrue(rank >= 0 && rank < n, "rank " + rank);
    if (rank != expected) {
      // the sums round differently: they may disagree by one where the target is a boundary
      double boundary = cumulative[Math.min(rank, expected)];
      assertTrue(Math.abs(rank - expected) == 1 && Math.abs(boundary - target) <= 1e-9 * total,
          rank + " vs " + expected + ": the target " + target + " is no boundary, "
              + "the nearest cumulative weight is " + boundary);
    }
  }

  @Test
  void badArgumentsAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> ZipfDraw.of(0, 1));
    assertThrows(IllegalArgumentException.class, () -> ZipfDraw.of(3, -1));
    assertThrows(IllegalArgumentException.class, () -> ZipfDraw.of(3, Double.NaN));
    assertThrows(IllegalArgumentException.class,
        () -> ZipfDraw.of(3, Double.POSITIVE_INFINITY));
  }
}
