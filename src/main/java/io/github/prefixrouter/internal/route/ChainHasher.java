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

  /**
   * Extends a chain whose first {@code done} hashes are already in {@code out} to the full
   * blocks of {@code tokens[0..length)}, so a caller can hash a prompt lazily, only as far as
   * it needs. The default recomputes everything.
   *
   * @return the number of full blocks now in {@code out}
   */
  default int extend(int[] tokens, int done, int length, long[] out) {
    return chain(tokens, length, out);
  }
}
