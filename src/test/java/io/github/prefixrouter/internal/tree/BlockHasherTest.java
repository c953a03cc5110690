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
 * docs/tree.md (the Python reference there), not by this class.
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
