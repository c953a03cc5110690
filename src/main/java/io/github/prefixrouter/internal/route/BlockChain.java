package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.internal.tree.BlockHasher;

/**
 * {@link ChainHasher} over the tree's {@link BlockHasher}, so the router computes exactly the
 * block hashes the tree publishes; chains are extended incrementally with
 * {@link BlockHasher#extend}, which computes the next block's parent-independent lanes while
 * the current block is finalized (software pipelining).
 */
final class BlockChain implements ChainHasher {

  private final BlockHasher hasher;

  BlockChain(BlockHasher hasher) {
    this.hasher = hasher;
  }

  @Override
  public int chain(int[] tokens, int length, long[] out) {
    return hasher.chain(tokens, length, out);
  }

  @Override
  public int extend(int[] tokens, int done, int length, long[] out) {
    return hasher.extend(tokens, done, length, out);
  }

  @Override
  public int extend(long scopeRoot, int[] tokens, int done, int length, long[] out) {
    return hasher.extend(scopeRoot, tokens, done, length, out);
  }
}
