package io.github.prefixrouter.workload;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/**
 * How often each subject of a {@link PromptSource} is asked: uniform, or Zipf over the subjects
 * ranked in a seeded random order (so rank 1 is not always the first file).
 *
 * <p>Immutable and thread-safe; sampling takes the caller's uniform draw, so callers keep control
 * of their random stream and runs replay from their seed.
 */
public final class SubjectPopularity {

  private final int[] subjectOfRank;
  private final double[] cdf;

  private SubjectPopularity(int[] subjectOfRank, double[] cdf) {
    this.subjectOfRank = subjectOfRank;
    this.cdf = cdf;
  }

  /**
   * Popularity over {@code subjects} subjects.
   *
   * @param exponent Zipf exponent; 0 means uniform
   * @param rankingSeed seed of the random ranking of subjects
   * @throws IllegalArgumentException if {@code subjects < 1} or the exponent is negative or not finite
   */
  public static SubjectPopularity of(int subjects, double exponent, long rankingSeed) {
    if (subjects < 1) {
      throw new IllegalArgumentException("subjects must be at least 1, was " + subjects);
    }
    if (!(exponent >= 0) || Double.isInfinite(exponent)) {
      throw new IllegalArgumentException("Zipf exponent must be finite and >= 0, was " + exponent);
    }
    List<Integer> order = new ArrayList<>(subjects);
    for (int s = 0; s < subjects; s++) {
      order.add(s);
    }
    Collections.shuffle(order, new Random(rankingSeed));
    int[] rank = order.stream().mapToInt(Integer::intValue).toArray();
    double[] cdf = new double[subjects];
    double sum = 0;
    for (int r = 0; r < subjects; r++) {
      sum += exponent == 0 ? 1.0 : 1.0 / Math.pow(r + 1, exponent);
      cdf[r] = sum;
    }
    for (int r = 0; r < subjects; r++) {
      cdf[r] /= sum;
    }
    return new SubjectPopularity(rank, cdf);
  }

  /** Number of subjects. */
  public int subjects() {
    return subjectOfRank.length;
  }

  /** The subject with popularity rank {@code r} (0 = most popular). */
  public int subjectOfRank(int r) {
    return subjectOfRank[r];
  }

  /** The subject for a uniform draw {@code u} in [0, 1). */
  public int sample(double u) {
    int r = 0;
    while (r < cdf.length - 1 && cdf[r] < u) {
      r++;
    }
    return subjectOfRank[r];
  }
}
