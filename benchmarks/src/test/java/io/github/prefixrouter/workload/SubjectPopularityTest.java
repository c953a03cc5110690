package io.github.prefixrouter.workload;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class SubjectPopularityTest {

  private static int[] counts(SubjectPopularity p, int draws, long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    int[] c = new int[p.subjects()];
    for (int i = 0; i < draws; i++) {
      c[p.sample(rnd.nextDouble())]++;
    }
    return c;
  }

  @Test
  void uniformSpreadsEvenlyAndZipfFollowsTheRanking() {
    int[] uniform = counts(SubjectPopularity.of(57, 0, 7), 57_000, 1);
    for (int c : uniform) {
      assertTrue(c > 800 && c < 1200, "uniform count " + c);
    }
    SubjectPopularity zipf = SubjectPopularity.of(57, 1.0, 7);
    int[] z = counts(zipf, 57_000, 1);
    // Zipf(1) over 57 ranks: rank 1 has 1/H(57) = 21.7% of the mass, rank 2 half of that
    double top = z[zipf.subjectOfRank(0)] / 57_000.0;
    double second = z[zipf.subjectOfRank(1)] / 57_000.0;
    assertEquals(0.217, top, 0.01);
    assertEquals(0.108, second, 0.01);
    assertEquals(Arrays.stream(z).max().getAsInt(), z[zipf.subjectOfRank(0)]);
  }

  @Test
  void rankingIsASeededPermutation() {
    SubjectPopularity a = SubjectPopularity.of(20, 1.0, 3);
    SubjectPopularity b = SubjectPopularity.of(20, 1.0, 3);
    boolean[] seen = new boolean[20];
    for (int r = 0; r < 20; r++) {
      assertEquals(a.subjectOfRank(r), b.subjectOfRank(r));
      seen[a.subjectOfRank(r)] = true;
    }
    for (boolean s : seen) {
      assertTrue(s);
    }
    boolean differs = false;
    for (long seed = 4; seed < 10 && !differs; seed++) {
      differs = SubjectPopularity.of(20, 1.0, seed).subjectOfRank(0) != a.subjectOfRank(0);
    }
    assertTrue(differs, "the ranking should depend on the seed");
  }

  @Test
  void rejectsInvalidArguments() {
    assertThrows(IllegalArgumentException.class, () -> SubjectPopularity.of(0, 1.0, 1));
    assertThrows(IllegalArgumentException.class, () -> SubjectPopularity.of(5, -1, 1));
    assertThrows(IllegalArgumentException.class, () -> SubjectPopularity.of(5, Double.NaN, 1));
    assertThrows(IllegalArgumentException.class,
        () -> SubjectPopularity.of(5, Double.POSITIVE_INFINITY, 1));
  }
}
