package io.github.prefixrouter.sim;

import java.util.random.RandomGenerator;

/** One-way message delay of the simulated network: delay × (1 ± jitter), uniform. */
final class SimLink {

  private final long delayNanos;
  private final double jitterFraction;
  private final RandomGenerator random;

  SimLink(long delayNanos, double jitterFraction, RandomGenerator random) {
    this.delayNanos = delayNanos;
    this.jitterFraction = jitterFraction;
    this.random = random;
  }

  long sampleNanos() {
    if (jitterFraction == 0 || delayNanos == 0) {
      return delayNanos;
    }
    double f = 1.0 + jitterFraction * (2 * random.nextDouble() - 1);
    return Math.max(0, Math.round(delayNanos * f));
  }
}
