package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.internal.tree.BlockHasher;

/**
 * {@link ChainHasher} computing exactly the chain of the tree's {@link BlockHasher} (algorithm
 * version 1, described there), extending chains incrementally.
 *
 * <p>Design note: in the block hash only the final step ({@code fmix(acc + round(0, parent))})
 * depends on the previous block; the four lanes over the tokens do not. {@link BlockHasher}
 * hashes block after block; here a chain is computed in two passes over the output array: first
 * every block's parent-independent accumulator (independent work the processor overlaps freely),
 * then the short serial pass that chains them. Same values bit for bit (checked against
 * {@link BlockHasher} by {@code BlockChainTest}); the constants are those of the algorithm.
 */
final class BlockChain implements ChainHasher {

  private static final long P1 = 0x9E3779B185EBCA87L;
  private static final long P2 = 0xC2B2AE3D27D4EB4FL;
  private static final long P3 = 0x165667B19E3779F9L;
  private static final long P5 = 0x27D4EB2F165667C5L;
  private static final long M1 = 0xFF51AFD7ED558CCDL;
  private static final long M2 = 0xC4CEB9FE1A85EC53L;

  private final int blockSize;
  private final long saltKey;
  private final long lane1;
  private final long lane2;
  private final long lane4;
  private final long lengthTerm;

  BlockChain(BlockHasher hasher) {
    if (BlockHasher.ALGORITHM_VERSION != 1) {
      throw new IllegalStateException("block hash algorithm version "
          + BlockHasher.ALGORITHM_VERSION + " is not the one implemented here (1)");
    }
    this.blockSize = hasher.blockSize();
    this.saltKey = fmix(hasher.salt() + P3);
    this.lane1 = saltKey + P1 + P2;
    this.lane2 = saltKey + P2;
    this.lane4 = saltKey - P1;
    this.lengthTerm = blockSize * P5;
  }

  @Override
  public int chain(int[] tokens, int length, long[] out) {
    return extend(tokens, 0, length, out);
  }

  @Override
  public int extend(int[] tokens, int done, int length, long[] out) {
    if (length < 0 || length > tokens.length) {
      throw new IllegalArgumentException(
          "length must be in [0, " + tokens.length + "], was " + length);
    }
    int blocks = length / blockSize;
    if (out.length < blocks) {
      throw new IllegalArgumentException(
          "out has room for " + out.length + " hashes, needs " + blocks);
    }
    if (done < 0) {
      done = 0;
    }
    if (blocks <= done) {
      return done;
    }
    // pass 1: the parent-independent accumulator of every new block
    if (blockSize == 16) {
      for (int b = done; b < blocks; b++) {
        out[b] = accumulate16(tokens, b << 4);
      }
    } else {
      for (int b = done; b < blocks; b++) {
        out[b] = accumulate(tokens, b * blockSize);
      }
    }
    // pass 2: chain them
    long parent = done == 0 ? BlockHasher.ROOT_PARENT : out[done - 1];
    for (int b = done; b < blocks; b++) {
      long h = fmix(out[b] + Long.rotateLeft(parent * P2, 31) * P1);
      parent = h == 0 ? P3 : h;
      out[b] = parent;
    }
    return blocks;
  }

  /** The lanes of a 16-token block (the default size): two words per lane. */
  private long accumulate16(int[] t, int i) {
    long v1 = round(lane1, word(t, i));
    long v2 = round(lane2, word(t, i + 2));
    long v3 = round(saltKey, word(t, i + 4));
    long v4 = round(lane4, word(t, i + 6));
    v1 = round(v1, word(t, i + 8));
    v2 = round(v2, word(t, i + 10));
    v3 = round(v3, word(t, i + 12));
    v4 = round(v4, word(t, i + 14));
    return Long.rotateLeft(v1, 1) + Long.rotateLeft(v2, 7) + Long.rotateLeft(v3, 12)
        + Long.rotateLeft(v4, 18) + lengthTerm;
  }

  /** The lanes of a block of any size. */
  private long accumulate(int[] t, int from) {
    long v1 = lane1;
    long v2 = lane2;
    long v3 = saltKey;
    long v4 = lane4;
    int end = from + blockSize;
    int i = from;
    for (; i + 7 < end; i += 8) {
      v1 = round(v1, word(t, i));
      v2 = round(v2, word(t, i + 2));
      v3 = round(v3, word(t, i + 4));
      v4 = round(v4, word(t, i + 6));
    }
    int lane = 0;
    for (; i + 1 < end; i += 2, lane++) {
      long w = word(t, i);
      switch (lane) {
        case 0 -> v1 = round(v1, w);
        case 1 -> v2 = round(v2, w);
        default -> v3 = round(v3, w);
      }
    }
    if (i < end) {
      long w = t[i] & 0xFFFF_FFFFL;
      switch (lane) {
        case 0 -> v1 = round(v1, w);
        case 1 -> v2 = round(v2, w);
        case 2 -> v3 = round(v3, w);
        default -> v4 = round(v4, w);
      }
    }
    return Long.rotateLeft(v1, 1) + Long.rotateLeft(v2, 7) + Long.rotateLeft(v3, 12)
        + Long.rotateLeft(v4, 18) + lengthTerm;
  }

  private static long word(int[] t, int i) {
    return (t[i] & 0xFFFF_FFFFL) | ((long) t[i + 1] << 32);
  }

  private static long round(long v, long w) {
    return Long.rotateLeft(v + w * P2, 31) * P1;
  }

  private static long fmix(long x) {
    x ^= x >>> 33;
    x *= M1;
    x ^= x >>> 33;
    x *= M2;
    x ^= x >>> 33;
    return x;
  }
}
