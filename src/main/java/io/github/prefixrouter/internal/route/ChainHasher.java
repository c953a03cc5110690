package io.github.prefixrouter.internal.route;

/** Computes the chained block hashes of a prompt: the only form peers ever see of it. */
@FunctionalInterface
public interface ChainHasher {

  /**
   * Writes the chained hashes of the full blocks of {@code tokens[0..length)} to {@code out}.
   *
   * @return the number of full blocks hashed
   */
  int chain(int[] tokens, int length, long[] out);
}
