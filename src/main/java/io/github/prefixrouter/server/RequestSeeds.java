package io.github.prefixrouter.server;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The sampling seeds the client endpoint draws for OpenAI-style requests that name none.
 *
 * <p>Engines decode deterministically from a request's seed (a streamed request that falls
 * back to another engine must get the same output there), so a request without a seed still
 * needs one, and two such requests should not share it: two identical chat requests at
 * temperature 1 must be able to answer differently. The entry node draws one per request from
 * this generator, seeded once when the endpoint is built, and the seed then travels with the
 * request wherever it is served.
 *
 * <p>SplitMix64 over a counter: a seed per call, in [0, 2<sup>31</sup>) so that every engine
 * takes it (some take only 32-bit seeds). Thread-safe and lock-free; the same seed at
 * construction gives the same sequence.
 */
final class RequestSeeds {

  private static final long GOLDEN_GAMMA = 0x9E3779B97F4A7C15L;
  private final AtomicLong state;

  /** @param seed the generator's seed */
  RequestSeeds(long seed) {
    this.state = new AtomicLong(seed);
  }

  /** The next seed, in [0, 2<sup>31</sup>). */
  long next() {
    long z = state.addAndGet(GOLDEN_GAMMA);
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    z = z ^ (z >>> 31);
    return z >>> 33;
  }
}
