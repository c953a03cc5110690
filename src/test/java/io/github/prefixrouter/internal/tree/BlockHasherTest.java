package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.stream.IntStream;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * Golden values computed by an independent implementation of the algorithm as written in
 * docs/tree.md (the Python reference there), not by this class; and a Java reference written
 * from the same text, checked against those values, for every block size's path through the
 * hasher.
 */
class BlockHasherTest {

  private static final int[] RANGE_40 = IntStream.range(0, 40).toArray();

  @Test
  void goldenChainBlockSize16() {
    assertArrayEquals(
        new long[] {0x0d695e414099018aL, 0x0b958564312cbf02L},
        new BlockHasher(16, 0).chain(RANGE_40));
  }

  @Test
  void goldenChainWithSalt() {
    assertArrayEquals(
        new long[] {0x657f1cd1acff4159L, 0xe34db0181c434377L},
        new BlockHasher(16, 42).chain(RANGE_40));
  }

  @Test
  void goldenOddBlockSizeAndExtremeTokenIds() {
    int[] tokens = {-1, 0, 100_000, Integer.MAX_VALUE, Integer.MIN_VALUE, 7, 8};
    assertArrayEquals(
        new long[] {0x3d5e3a54cf2672c8L, 0x364e827717600daaL},
        new BlockHasher(3, 0).chain(tokens));
  }

  @Test
  void goldenBlockSizeOneAndZeros() {
    assertArrayEquals(
        new long[] {0xcd9d67e228123091L, 0xdd4830264948b21dL},
        new BlockHasher(1, 0).chain(new int[] {5, 6}));
    assertArrayEquals(
        new long[] {0x54d3d49f3adfbb76L, 0x915f9960bca317feL},
        new BlockHasher(16, 0).chain(new int[32]));
  }

  @Test
  void goldenBlockSizesWithEveryLaneRemainder() {
    assertArrayEquals(
        new long[] {0x1cb41ddc02029eccL, 0x30e91f9a6351b59dL},
        new BlockHasher(7, 0).chain(IntStream.range(0, 15).toArray()));
    assertArrayEquals(
        new long[] {0x1a68406ad00ebd1bL, 0xbf241754b91ce772L},
        new BlockHasher(13, 0).chain(IntStream.range(1000, 1026).toArray()));
  }

  /**
   * Block sizes that are multiples of 8 other than 16 (engines commonly use 32 and 64) take the
   * general loop's four-words-per-pass path, which 16's unrolled code does not exercise; odd and
   * other even sizes end it with every remainder. Values from the Python reference in
   * docs/tree.md: {@code chain(list(range(1000, 1000 + 2 * B + 3)), B)} with salt 0 and 42,
   * and {@code chain(E, B)} with salt 0 and -7, where {@code E} repeats
   * {@code [-1, 0, 100000, 0x7FFFFFFF, -0x80000000, 7, 8, 1, -2, 0x12345678]} to 2 * B tokens.
   */
  @Test
  void goldenBlockSizesOfTheGeneralLoop() {
    // {blockSize, salt 0 range, salt 0 range, salt 42 range, salt 42 range,
    //  salt 0 extreme, salt 0 extreme, salt -7 extreme, salt -7 extreme}
    long[][] golden = {
        {8, 0x08c65b8ebd8e68b9L, 0xc088b15971a2c72aL, 0x6cb0bb2028eef784L, 0x1d1c386bc7b01422L,
            0x2c5f7a6520cf15b4L, 0xe89236dd7c996ed6L, 0x056a0de2548e58f6L, 0x2ae863ca8bca6ddcL},
        {32, 0xbea70bf368698d07L, 0x4229a54b394b2feaL, 0x696dd88c6db80e7dL, 0x24db31bd953e20a6L,
            0x19515c2e7c464211L, 0x0b0d1797a07bd087L, 0x3de0d74ac85f6cb7L, 0x4b5f6f0d348736f9L},
        {64, 0xdc8e5389d30b2dfdL, 0xb637859e99b9adb5L, 0x07c857824853caaaL, 0x6960e0d9ef13209eL,
            0xa83a49e3ed60bd13L, 0x2f262e8569f61758L, 0x7aa2311ffcbaede0L, 0xc559c58c9729d808L},
        {5, 0x2d4b1dcb184c85b4L, 0x1adf2eaa97458b66L, 0x19c988faf09b699cL, 0x56ede15a1c184769L,
            0x433c6b35a2832a4fL, 0x24cdce8e355e0794L, 0x16d8780aa721ae7bL, 0x0db4be0439a4109bL},
        {9, 0x0cfb3612b24918e7L, 0x3b0f8c26c90c2392L, 0xffce610b65cf60d3L, 0x712c5db24e0532aaL,
            0x5f71054159c85392L, 0x7a73f927ff33da47L, 0x7cd6de9f45d79e03L, 0x00a60ec67f2a1a4cL},
        {24, 0x432f50f234677032L, 0xd60c1692c0c40aabL, 0x71346e29a97b7988L, 0x49cfe4a1145878b6L,
            0x188ac8de8393da24L, 0xa894a0f380d79713L, 0xdcea2b869382aa65L, 0xc4848c52154b767eL},
    };
    int[] extremes = {-1, 0, 100_000, Integer.MAX_VALUE, Integer.MIN_VALUE, 7, 8, 1, -2,
        0x12345678};
    for (long[] g : golden) {
      int b = (int) g[0];
      int[] range = IntStream.range(1000, 1000 + 2 * b + 3).toArray();
      int[] extreme = IntStream.range(0, 2 * b).map(i -> extremes[i % extremes.length]).toArray();
      String size = "block size " + b;
      assertArrayEquals(new long[] {g[1], g[2]}, new BlockHasher(b, 0).chain(range), size);
      assertArrayEquals(new long[] {g[3], g[4]}, new BlockHasher(b, 42).chain(range), size);
      assertArrayEquals(new long[] {g[5], g[6]}, new BlockHasher(b, 0).chain(extreme), size);
      assertArrayEquals(new long[] {g[7], g[8]}, new BlockHasher(b, -7).chain(extreme), size);
    }
  }

  /**
   * Every block size from 1 to 72 and the common engine sizes up to 256 hash as the algorithm
   * of docs/tree.md says, computed here by {@link #referenceChain}, written from that text (the
   * list of words first, then word j into lane j mod 4) and sharing no code with the class:
   * random ids of any sign, ids drawn from the extremes, with salt 0 and random salts.
   */
  @Test
  void everyBlockSizeHashesAsTheDocumentedAlgorithm() {
    // the reference gives the documented values of the Python reference
    assertArrayEquals(new long[] {0x0d695e414099018aL, 0x0b958564312cbf02L},
        referenceChain(RANGE_40, 16, 0));
    assertArrayEquals(new long[] {0x657f1cd1acff4159L, 0xe34db0181c434377L},
        referenceChain(RANGE_40, 16, 42));
    int[] extremes = {0, 1, -1, Integer.MAX_VALUE, Integer.MIN_VALUE, 0x7FFF_FFFE, 0x8000_0001,
        0xFFFF_0000, 0x0000_FFFF};
    SplittableRandom r = new SplittableRandom(20_260_731);
    int[] sizes = IntStream.concat(IntStream.rangeClosed(1, 72),
        IntStream.of(96, 127, 128, 129, 256)).toArray();
    for (int b : sizes) {
      for (int run = 0; run < 6; run++) {
        int length = 3 * b + r.nextInt(b); // three full blocks and a partial one
        int[] tokens = run % 2 == 0
            ? r.ints(length).toArray()
            : r.ints(length, 0, extremes.length).map(i -> extremes[i]).toArray();
        long salt = run < 2 ? 0 : r.nextLong();
        assertArrayEquals(referenceChain(tokens, b, salt), new BlockHasher(b, salt).chain(tokens),
            "block size " + b + ", salt " + salt + (run % 2 == 0 ? ", random" : ", extreme")
                + " ids, run " + run);
      }
    }
  }

  // The algorithm of docs/tree.md ("Block hash algorithm (version 1)"), constants copied
  // from there; Java's long arithmetic is the modulo 2^64 arithmetic it asks for.
  private static final long REF_P1 = 0x9E3779B185EBCA87L;
  private static final long REF_P2 = 0xC2B2AE3D27D4EB4FL;
  private static final long REF_P3 = 0x165667B19E3779F9L;
  private static final long REF_P5 = 0x27D4EB2F165667C5L;
  private static final long REF_M1 = 0xFF51AFD7ED558CCDL;
  private static final long REF_M2 = 0xC4CEB9FE1A85EC53L;
  private static final long REF_ROOT = 0x6A09E667F3BCC908L;

  private static long referenceRound(long v, long w) {
    return Long.rotateLeft(v + w * REF_P2, 31) * REF_P1;
  }

  private static long referenceFmix(long x) {
    x ^= x >>> 33;
    x *= REF_M1;
    x ^= x >>> 33;
    x *= REF_M2;
    x ^= x >>> 33;
    return x;
  }

  private static long referenceBlock(long parent, int[] t, long salt) {
    int b = t.length;
    long[] w = new long[(b + 1) / 2];
    for (int j = 0; j < b / 2; j++) {
      w[j] = Integer.toUnsignedLong(t[2 * j]) | Integer.toUnsignedLong(t[2 * j + 1]) << 32;
    }
    if (b % 2 == 1) {
      w[b / 2] = Integer.toUnsignedLong(t[b - 1]);
    }
    long saltKey = referenceFmix(salt + REF_P3);
    long[] v = {saltKey + REF_P1 + REF_P2, saltKey + REF_P2, saltKey, saltKey - REF_P1};
    for (int j = 0; j < w.length; j++) {
      v[j % 4] = referenceRound(v[j % 4], w[j]);
    }
    long acc = Long.rotateLeft(v[0], 1) + Long.rotateLeft(v[1], 7) + Long.rotateLeft(v[2], 12)
        + Long.rotateLeft(v[3], 18) + b * REF_P5;
    long h = referenceFmix(acc + referenceRound(0, parent));
    return h == 0 ? REF_P3 : h;
  }

  private static long[] referenceChain(int[] tokens, int b, long salt) {
    long[] out = new long[tokens.length / b];
    long parent = REF_ROOT;
    for (int j = 0; j < out.length; j++) {
      parent = referenceBlock(parent, Arrays.copyOfRange(tokens, j * b, (j + 1) * b), salt);
      out[j] = parent;
    }
    return out;
  }

  @Test
  void goldenScopeRoots() {
    assertEquals(BlockHasher.ROOT_PARENT, BlockHasher.scopeRoot("", ""));
    assertEquals(0x248b0bd7a65dc2b0L, BlockHasher.scopeRoot("sql-lora", ""));
    assertEquals(0x93ec9744a224ce41L, BlockHasher.scopeRoot("", "tenant-1"));
    assertEquals(0x917192a1bb3ad63dL, BlockHasher.scopeRoot("sql-lora", "tenant-1"));
    assertEquals(0x2126cab3c0cb032cL, BlockHasher.scopeRoot("ab", "c"));
    assertEquals(0xfc2a9f9e35400c27L, BlockHasher.scopeRoot("a", "bc"));
    assertEquals(0xceadb4eb1fb32adeL, BlockHasher.scopeRoot("\u00e9\uD83D\uDE00", "\u00fc"));
    assertEquals(0x0482594a7856dba7L, BlockHasher.scopeRoot("x".repeat(13), ""));
    assertEquals(0x917192a1bb3ad63dL,
        BlockHasher.scopeRoot(io.github.prefixrouter.CacheScope.of("sql-lora", "tenant-1")));
    assertEquals(BlockHasher.ROOT_PARENT,
        BlockHasher.scopeRoot(io.github.prefixrouter.CacheScope.DEFAULT));
  }

  @Test
  void goldenScopedChains() {
    assertArrayEquals(
        new long[] {0x3ddaaa4cf47c5f35L, 0x19cb5d0d1a274504L},
        new BlockHasher(16, 0).chain(BlockHasher.scopeRoot("sql-lora", ""), RANGE_40));
    assertArrayEquals(
        new long[] {0x4b1aee151fefb508L, 0x922576bd58e916a5L},
        new BlockHasher(16, 42).chain(BlockHasher.scopeRoot("", "tenant-1"), RANGE_40));
    // the default scope's chain is the unscoped one
    assertArrayEquals(new BlockHasher(16, 0).chain(RANGE_40),
        new BlockHasher(16, 0).chain(BlockHasher.ROOT_PARENT, RANGE_40));
    // extending a scoped chain part-way continues it
    long[] out = new long[2];
    BlockHasher h = new BlockHasher(16, 0);
    long root = BlockHasher.scopeRoot("sql-lora", "");
    assertEquals(1, h.extend(root, RANGE_40, 0, 16, out));
    assertEquals(2, h.extend(root, RANGE_40, 1, 40, out));
    assertArrayEquals(new long[] {0x3ddaaa4cf47c5f35L, 0x19cb5d0d1a274504L}, out);
  }

  @Test
  void scopeRootsOfManyScopesAreDistinctAndNeverZeroOrTheDefault() {
    Set<Long> seen = new HashSet<>();
    for (int i = 0; i < 2000; i++) {
      for (String[] as : new String[][] {{"a" + i, ""}, {"", "a" + i}, {"a", i + ""},
          {"a" + i, "b"}}) {
        long r = BlockHasher.scopeRoot(as[0], as[1]);
        assertTrue(r != 0 && r != BlockHasher.ROOT_PARENT);
        assertTrue(seen.add(r), "collision at " + as[0] + "/" + as[1]);
      }
    }
  }

  @Test
  void hashBlockChainsFromTheRootParent() {
    BlockHasher h = new BlockHasher(16, 0);
    long first = h.hashBlock(BlockHasher.ROOT_PARENT, RANGE_40, 0);
    assertEquals(0x0d695e414099018aL, first);
    assertEquals(0x0b958564312cbf02L, h.hashBlock(first, RANGE_40, 16));
  }

  /**
   * The pipelined chain (the lanes of the next block computed while the current one is
   * finalized), resumed after any number of blocks already held and from any root parent,
   * equals hashing block by block with {@link BlockHasher#hashBlock} (pinned by the golden
   * values above), for every block size's lane remainder.
   */
  @Property(tries = 300)
  void extendingFromAnyBlockEqualsHashingBlockByBlock(
      @ForAll @IntRange(min = 1, max = 40) int blockSize,
      @ForAll long salt,
      @ForAll long rootParent,
      @ForAll @IntRange(min = 0, max = 300) int length,
      @ForAll long seed) {
    BlockHasher h = new BlockHasher(blockSize, salt);
    int[] tokens = new SplittableRandom(seed).ints(length + 7).toArray(); // ids of any sign
    int blocks = length / blockSize;
    long[] expected = new long[blocks];
    long parent = rootParent;
    for (int b = 0; b < blocks; b++) {
      parent = h.hashBlock(parent, tokens, b * blockSize);
      expected[b] = parent;
    }
    assertArrayEquals(expected, h.chain(rootParent, Arrays.copyOf(tokens, length)));
    for (int done = 0; done <= blocks; done++) {
      long[] out = new long[blocks + 2];
      Arrays.fill(out, 42);
      System.arraycopy(expected, 0, out, 0, done);
      assertEquals(blocks, h.extend(rootParent, tokens, done, length, out), "done " + done);
      assertArrayEquals(expected, Arrays.copyOf(out, blocks), "done " + done);
      assertEquals(42, out[blocks], "wrote past the full blocks, done " + done);
    }
  }

  @Test
  void chainIntoBufferCountsOnlyFullBlocksAndAllocatesNothingElse() {
    BlockHasher h = new BlockHasher(16, 0);
    long[] out = new long[4];
    out[2] = 99;
    assertEquals(2, h.chain(RANGE_40, 40, out));
    assertEquals(0x0b958564312cbf02L, out[1]);
    assertEquals(99, out[2]);
    assertEquals(1, h.chain(RANGE_40, 31, out));
    assertEquals(0, h.chain(RANGE_40, 15, out));
  }

  @Test
  void differentPrefixesGiveDifferentHashesForTheSameBlock() {
    BlockHasher h = new BlockHasher(4, 0);
    int[] a = {1, 2, 3, 4, 9, 9, 9, 9};
    int[] b = {1, 2, 3, 5, 9, 9, 9, 9};
    assertNotEquals(h.chain(a)[1], h.chain(b)[1]);
  }

  @Test
  void hashesAreNeverZeroAndRarelyCollide() {
    BlockHasher h = new BlockHasher(2, 0);
    SplittableRandom r = new SplittableRandom(1);
    Set<Long> seen = new HashSet<>();
    int[] t = new int[2];
    for (int i = 0; i < 200_000; i++) {
      t[0] = r.nextInt(1000);
      t[1] = r.nextInt(1000);
      long v = h.hashBlock(i, t, 0);
      assertNotEquals(0L, v);
      seen.add(v);
    }
    assertTrue(seen.size() > 199_990, "collisions: " + (200_000 - seen.size()));
  }

  @Test
  void rejectsBadArguments() {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> new BlockHasher(0, 0));
    assertTrue(e.getMessage().contains("blockSize"), e.getMessage());
    BlockHasher h = new BlockHasher(16, 0);
    assertThrows(IndexOutOfBoundsException.class, () -> h.hashBlock(0, RANGE_40, 30));
    assertThrows(IndexOutOfBoundsException.class, () -> h.hashBlock(0, RANGE_40, -1));
    assertThrows(IllegalArgumentException.class, () -> h.chain(RANGE_40, 41, new long[4]));
    assertThrows(IllegalArgumentException.class, () -> h.chain(RANGE_40, 40, new long[1]));
  }
}
