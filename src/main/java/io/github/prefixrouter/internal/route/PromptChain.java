package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.internal.gossip.BlockChainSource;

/**
 * A prompt's block-hash chain computed on demand, reusable across decisions (one per thread):
 * {@link #reset} points it at a new prompt without allocating; the hashes array only grows.
 */
final class PromptChain implements BlockChainSource {

  private ChainHasher hasher;
  private int blockSize;
  private long[] hashes = new long[256];
  private int[] tokens;
  private int maxBlocks;
  private int done;

  /** Starts a new prompt; nothing is hashed until {@link #ensure} asks. */
  void reset(int[] tokens, ChainHasher hasher, int blockSize) {
    this.hasher = hasher;
    this.blockSize = blockSize;
    this.tokens = tokens;
    this.maxBlocks = tokens.length / blockSize;
    this.done = 0;
    if (hashes.length < maxBlocks) {
      hashes = new long[Math.max(maxBlocks, hashes.length * 2)];
    }
  }

  /** Drops the references to the last prompt and hasher. */
  void clear() {
    tokens = null;
    hasher = null;
  }

  /** The prompt's number of full blocks. */
  int maxBlocks() {
    return maxBlocks;
  }

  /** Blocks hashed so far. */
  int hashed() {
    return done;
  }

  @Override
  public int ensure(int blocks) {
    int want = Math.min(blocks, maxBlocks);
    if (want > done) {
      done = hasher.extend(tokens, done, want * blockSize, hashes);
    }
    return done;
  }

  @Override
  public long[] hashes() {
    return hashes;
  }
}
