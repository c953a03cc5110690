package io.github.prefixrouter.workload;

/**
 * Draws ranks {@code 0..n-1} with probability proportional to {@code 1 / (rank + 1)^exponent},
 * one uniform double per draw, in rank order (no shuffle; {@link SubjectPopularity} shuffles
 * which subject has which rank). The simulated workloads pick their system prompts with it.
 */
public final class ZipfDraw {

  private final double[] cdf;
  private final double sum;

  private ZipfDraw(double[] cdf) {
    this.cdf = cdf;
    this.sum = cdf[cdf.length - 1];
  }

  /**
   * A draw over {@code n} ranks.
   *
   * @param n the number of ranks, at least 1
   * @param exponent the Zipf exponent, finite and at least 0 (0 is uniform)
   * @return the draw
   * @throws IllegalArgumentException if {@code n < 1} or the exponent is out of range
   */
  public static ZipfDraw of(int n, double exponent) {
    if (n < 1) {
      throw new IllegalArgumentException("n must be at least 1, was " + n);
    }
    if (!(exponent >= 0) || Double.isInfinite(exponent)) {
      throw new IllegalArgumentException("Zipf exponent must be finite and >= 0, was " + exponent);
    }
    double[] cdf = new double[n];
    double sum = 0;
    for (int k = 0; k < n; k++) {
      sum += 1.0 / Math.pow(k + 1, exponent);
      cdf[k] = sum;
    }
    return new ZipfDraw(cdf);
  }

  /**
   * The rank for a uniform draw.
   *
   * @param u a uniform double in {@code [0, 1)}
   * @return a rank in {@code [0, n)}
   */
  public int rank(double u) {
    double x = u * sum;
    int k = 0;
    while (k < cdf.length - 1 && cdf[k] < x) {
      k++;
    }
    return k;
  }
}
