package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.internal.tree.BlockHasher;

/** {@link ChainHasher} over the tree's {@link BlockHasher}, extending chains incrementally. */
final class BlockChain implements ChainHasher {

  private final BlockHasher hasher;
  private final int blockSize;

  BlockChain(BlockHasher hasher) {
    this.hasher = hasher;
    this.blockSize = hasher.blockSize();
  }

  @Override
  public int chain(int[] tokens, int length, long[] out) {
    return hasher.chain(tokens, length, out);
  }

  @Override
  public int extend(int[] tokens, int done, int length, long[] out) {
    int blocks = length / blockSize;
    if (done <= 0) {
      return hasher.chain(tokens, length, out);
    }
    long parent = out[done - 1];
    for (int b = done; b < blocks; b++) {
      parent = hasher.hashBlock(parent, tokens, b * blockSize);
      out[b] = parent;
    }
    return Math.max(done, blocks);
  }
}
