package io.github.prefixrouter.sim;

import java.util.random.RandomGenerator;

/**
 * One-way message delay for the simulator-level baselines, the same model as the library's
 * {@code InMemoryNetwork} links: delay plus a uniform jitter in [0, jitterFraction × delay). It
 * never loses a message: the configured loss applies to the library's nodes only.
 */
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
    return delayNanos + (long) (random.nextDouble() * jitterFraction * delayNanos);
  }
}
