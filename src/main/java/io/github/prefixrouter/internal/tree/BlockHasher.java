package io.github.prefixrouter.internal.tree;

/**
 * Computes the 64-bit chained hash of fixed-size token blocks: the only thing peers ever see of
 * a prompt.
 *
 * <h2>Algorithm (version 1, fixed; see docs/tree.md for a language-neutral description)</h2>
 *
 * <p>All arithmetic is on unsigned 64-bit words modulo 2<sup>64</sup>; {@code rotl(x, r)}
 * rotates left, {@code >>>} shifts right without sign. Constants (those of XXH64 and
 * MurmurHash3's finalizer):
 *
 * <pre>
 *   P1 = 0x9E3779B185EBCA87   P2 = 0xC2B2AE3D27D4EB4F   P3 = 0x165667B19E3779F9
 *   P5 = 0x27D4EB2F165667C5   M1 = 0xFF51AFD7ED558CCD   M2 = 0xC4CEB9FE1A85EC53
 *   ROOT = 0x6A09E667F3BCC908   (parent of the first block of every prompt)
 *   round(v, w) = rotl(v + w * P2, 31) * P1
 *   fmix(x)     = x ^= x >>> 33; x *= M1; x ^= x >>> 33; x *= M2; x ^= x >>> 33
 *   saltKey     = fmix(salt + P3)
 * </pre>
 *
 * To hash one block of {@code B} tokens {@code t[0..B-1]} (each token id taken as its unsigned
 * 32-bit value) continuing the block whose hash is {@code parent}:
 *
 * <pre>
 *   words: w[j] = t[2j] | t[2j+1] &lt;&lt; 32 for j &lt; B/2, and if B is odd a last word t[B-1]
 *   v1 = saltKey + P1 + P2;  v2 = saltKey + P2;  v3 = saltKey;  v4 = saltKey - P1
 *   word j goes to lane j mod 4:  v = round(v, w[j])
 *   acc = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18) + B * P5
 *   h = fmix(acc + round(0, parent))
 *   return h == 0 ? P3 : h                                       // never 0
 * </pre>
 *
 * The four lanes do not depend on the parent, so a processor overlaps the token work of the next
 * block with the finalization of the current one; only the last step is chained. The chain of a
 * prompt is {@code c[0] = hashBlock(ROOT, block 0)}, {@code c[j] = hashBlock(c[j-1], block j)};
 * a trailing partial block has no hash. The hash is never 0, so 0 can mark "no block"
 * ({@link io.github.prefixrouter.spi.CacheEventListener#NO_PARENT}).
 *
 * <h2>Scope roots</h2>
 *
 * <p>A prompt of a {@link io.github.prefixrouter.CacheScope} other than the default (a LoRA
 * adapter, a cache salt) chains from its scope's root instead of {@code ROOT}, so its blocks
 * never hash like those of the same tokens in another scope:
 *
 * <pre>
 *   scopeRoot("", "") = ROOT
 *   otherwise, with a = UTF-8(adapter), s = UTF-8(salt):
 *     m = u32le(len(a)) || a || u32le(len(s)) || s       (lengths in bytes)
 *     pad m with zero bytes to a multiple of 8; w[j] = its 8-byte little-endian words
 *     h = ROOT;  for each word: h = round(h, w[j])
 *     h = fmix(h + len(m before padding) * P5)
 *     return (h == 0 || h == ROOT) ? P3 : h                 // never 0, never the default's
 * </pre>
 *
 * The lengths make it unambiguous (("ab", "c") and ("a", "bc") give different messages); it
 * does not depend on the per-cluster salt, which enters every block through {@code saltKey}.
 *
 * <p>Instances are immutable and thread-safe; the chain methods do not allocate except
 * {@link #chain(int[])} and {@link #chain(long, int[])}, which return a new array.
 */
public final class BlockHasher {

  /** Parent hash used for the first block of every prompt. */
  public static final long ROOT_PARENT = 0x6A09E667F3BCC908L;

  /**
   * The parent hash of the first block of a prompt of the scope ({@code adapter}, {@code salt}):
   * {@link #ROOT_PARENT} for the default scope (both empty), else the function in the class
   * notes.
   */
  public static long scopeRoot(String adapter, String salt) {
    if (adapter.isEmpty() && salt.isEmpty()) {
      return ROOT_PARENT;
    }
    byte[] a = adapter.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    byte[] s = salt.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    int len = 8 + a.length + s.length;
    byte[] m = new byte[(len + 7) & ~7];
    java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(m).order(java.nio.ByteOrder.LITTLE_ENDIAN);
    b.putInt(a.length).put(a).putInt(s.length).put(s);
    b.rewind();
    long h = ROOT_PARENT;
    while (b.hasRemaining()) {
      h = round(h, b.getLong());
    }
    h = fmix(h + len * P5);
    return h == 0 || h == ROOT_PARENT ? P3 : h;
  }

  /** {@link #scopeRoot(String, String)} of a request's scope. */
  public static long scopeRoot(io.github.prefixrouter.CacheScope scope) {
    return scope.isDefault() ? ROOT_PARENT : scopeRoot(scope.adapter(), scope.salt());
  }

  /** Version of the algorithm above; bumped if it ever changes. */
  public static final int ALGORITHM_VERSION = 1;

  static final long P1 = 0x9E3779B185EBCA87L;
  static final long P2 = 0xC2B2AE3D27D4EB4FL;
  static final long P3 = 0x165667B19E3779F9L;
  static final long P5 = 0x27D4EB2F165667C5L;
  private static final long M1 = 0xFF51AFD7ED558CCDL;
  private static final long M2 = 0xC4CEB9FE1A85EC53L;

  private final int blockSize;
  private final long salt;
  private final long saltKey;
  private final long lengthTerm;
  private final long lane1;
  private final long lane2;
  private final long lane4;

  /**
   * @param blockSize tokens per block, at least 1
   * @param salt per-cluster salt; 0 is an ordinary value (no special meaning)
   * @throws IllegalArgumentException if {@code blockSize < 1}
   */
  public BlockHasher(int blockSize, long salt) {
    if (blockSize < 1) {
      throw new IllegalArgumentException("blockSize must be at least 1, was " + blockSize);
    }
    this.blockSize = blockSize;
    this.salt = salt;
    this.saltKey = fmix(salt + P3);
    this.lengthTerm = blockSize * P5;
    this.lane1 = saltKey + P1 + P2;
    this.lane2 = saltKey + P2;
    this.lane4 = saltKey - P1;
  }

  /** Tokens per block. */
  public int blockSize() {
    return blockSize;
  }

  /** The per-cluster salt this hasher mixes into every block. */
  public long salt() {
    return salt;
  }

  /**
   * Hashes the block of {@link #blockSize()} tokens starting at {@code tokens[from]},
   * continuing the block whose hash is {@code parentHash} ({@link #ROOT_PARENT} for the first
   * block of a prompt).
   *
   * @throws IndexOutOfBoundsException if the block does not fit in {@code tokens}
   */
  public long hashBlock(long parentHash, int[] tokens, int from) {
    if (from < 0 || from > tokens.length - blockSize) {
      throw new IndexOutOfBoundsException(
          "block [" + from + ", " + ((long) from + blockSize) + ") outside tokens of length "
              + tokens.length);
    }
    return hashUnchecked(parentHash, tokens, from);
  }

  private long hashUnchecked(long parentHash, int[] tokens, int from) {
    return finish(accumulate(tokens, from), parentHash);
  }

  /** The last, parent-dependent step of a block's hash. */
  private static long finish(long acc, long parentHash) {
    long h = fmix(acc + round(0, parentHash));
    return h == 0 ? P3 : h;
  }

  /**
   * The parent-independent part of a block's hash: the four lanes over its tokens, merged.
   * Only {@link #finish} depends on the previous block, which is what lets {@link #extend}
   * compute the next block's lanes while the current block is being finalized.
   */
  private long accumulate(int[] tokens, int from) {
    if (blockSize == 16) {
      return accumulate16(tokens, from);
    }
    long v1 = lane1;
    long v2 = lane2;
    long v3 = saltKey;
    long v4 = lane4;
    int end = from + blockSize;
    int i = from;
    for (; i + 7 < end; i += 8) { // four words, one per lane
      v1 = round(v1, word(tokens, i));
      v2 = round(v2, word(tokens, i + 2));
      v3 = round(v3, word(tokens, i + 4));
      v4 = round(v4, word(tokens, i + 6));
    }
    // the remaining 0..7 tokens: up to three whole words, then perhaps a single token
    int lane = 0;
    for (; i + 1 < end; i += 2, lane++) {
      long w = word(tokens, i);
      switch (lane) {
        case 0 -> v1 = round(v1, w);
        case 1 -> v2 = round(v2, w);
        default -> v3 = round(v3, w);
      }
    }
    if (i < end) {
      long w = tokens[i] & 0xFFFF_FFFFL;
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

  /** {@link #accumulate} unrolled for the default 16-token block: two words per lane. */
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

  private static long word(int[] t, int i) {
    return (t[i] & 0xFFFF_FFFFL) | ((long) t[i + 1] << 32);
  }

  private static long round(long v, long w) {
    return Long.rotateLeft(v + w * P2, 31) * P1;
  }

  static long fmix(long x) {
    x ^= x >>> 33;
    x *= M1;
    x ^= x >>> 33;
    x *= M2;
    x ^= x >>> 33;
    return x;
  }

  /**
   * Writes the chained hashes of the full blocks among the first {@code length} tokens into
   * {@code out} and returns how many there are ({@code length / blockSize}). Allocates nothing.
   *
   * @throws IllegalArgumentException if {@code length} is negative or exceeds the array, or
   *     {@code out} is too short
   */
  public int chain(int[] tokens, int length, long[] out) {
    return extend(tokens, 0, length, out);
  }

  /**
   * Like {@link #chain(int[], int, long[])}, but {@code out[0 .. done)} already holds the hashes
   * of the first {@code done} blocks: only the blocks after them are computed. Returns the number
   * of full blocks among the first {@code length} tokens (or {@code done} if that is larger).
   * Allocates nothing.
   *
   * @throws IllegalArgumentException if {@code length} is negative or exceeds the array, or
   *     {@code out} is too short
   */
  public int extend(int[] tokens, int done, int length, long[] out) {
    return extend(ROOT_PARENT, tokens, done, length, out);
  }

  /**
   * Like {@link #extend(int[], int, int, long[])} for a chain whose first block continues
   * {@code rootParent} (a {@link #scopeRoot}) rather than {@link #ROOT_PARENT}.
   */
  public int extend(long rootParent, int[] tokens, int done, int length, long[] out) {
    if (length < 0 || length > tokens.length) {
      throw new IllegalArgumentException(
          "length must be in [0, " + tokens.length + "], was " + length);
    }
    int blocks = length / blockSize;
    if (out.length < blocks) {
      throw new IllegalArgumentException(
          "out has room for " + out.length + " hashes, needs " + blocks);
    }
    done = Math.max(done, 0);
    if (blocks <= done) {
      return done;
    }
    // Software-pipelined: the parent-independent lanes of block b + 1 are computed in the same
    // iteration as the serial finalization of block b, so the processor overlaps the two
    // (the chain's latency, about 20 cycles per block, hides under the lanes' multiplications).
    long parent = done == 0 ? rootParent : out[done - 1];
    long acc = accumulate(tokens, done * blockSize);
    for (int b = done; b < blocks - 1; b++) {
      long next = accumulate(tokens, (b + 1) * blockSize);
      parent = finish(acc, parent);
      out[b] = parent;
      acc = next;
    }
    out[blocks - 1] = finish(acc, parent);
    return blocks;
  }

  /** The chained hashes of all full blocks of {@code tokens}. */
  public long[] chain(int[] tokens) {
    return chain(ROOT_PARENT, tokens);
  }

  /** The chained hashes of all full blocks of {@code tokens}, chained from {@code rootParent}. */
  public long[] chain(long rootParent, int[] tokens) {
    long[] out = new long[tokens.length / blockSize];
    extend(rootParent, tokens, 0, tokens.length, out);
    return out;
  }

  @Override
  public String toString() {
    return "BlockHasher{v" + ALGORITHM_VERSION + ", blockSize=" + blockSize + ", salt=" + salt + "}";
  }
}
