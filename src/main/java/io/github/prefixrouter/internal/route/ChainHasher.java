package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.internal.tree.BlockHasher;

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

  /**
   * Like {@link #extend(int[], int, int, long[])} for a prompt of the cache scope whose chain
   * starts from {@code scopeRoot} ({@link BlockHasher#scopeRoot}). The default serves the
   * default scope ({@link BlockHasher#ROOT_PARENT}) and refuses any other.
   *
   * @throws UnsupportedOperationException if this hasher cannot chain from {@code scopeRoot}
   */
  default int extend(long scopeRoot, int[] tokens, int done, int length, long[] out) {
    if (scopeRoot != BlockHasher.ROOT_PARENT) {
      throw new UnsupportedOperationException(getClass() + " does not hash cache scopes");
    }
    return extend(tokens, done, length, out);
  }
}
