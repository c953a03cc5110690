package io.github.prefixrouter.workload;

import java.util.SplittableRandom;

/** Seeded random token sequences with no shared structure (the worst case for a prefix tree). */
public final class RandomSequences {

  private RandomSequences() {}

  /**
   * {@code count} sequences of {@code length} tokens drawn uniformly from a vocabulary of
   * {@link SyntheticMmluPrompts#VOCABULARY} ids.
   */
  public static int[][] create(long seed, int count, int length) {
    if (count < 0 || length < 1) {
      throw new IllegalArgumentException(
          "count must be >= 0 and length >= 1, were " + count + " and " + length);
    }
    SplittableRandom r = new SplittableRandom(seed);
    int[][] out = new int[count][];
    for (int i = 0; i < count; i++) {
      out[i] = r.ints(length, 0, SyntheticMmluPrompts.VOCABULARY).toArray();
    }
    return out;
  }
}
