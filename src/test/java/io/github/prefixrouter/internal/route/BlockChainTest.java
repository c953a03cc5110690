package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.github.prefixrouter.internal.tree.BlockHasher;
import java.util.Arrays;
import java.util.SplittableRandom;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/** The two-pass chain equals {@link BlockHasher}'s block-by-block chain, whole or extended. */
class BlockChainTest {

  @Property
  void chainAndExtensionsEqualTheReferenceHasher(
      @ForAll @IntRange(min = 1, max = 40) int blockSize,
      @ForAll long salt,
      @ForAll long seed,
      @ForAll @IntRange(min = 0, max = 700) int length,
      @ForAll @IntRange(min = 0, max = 3) int splits) {
    SplittableRandom r = new SplittableRandom(seed);
    int[] tokens = new int[length + r.nextInt(5)];
    for (int i = 0; i < tokens.length; i++) {
      // full 32-bit range, negative ids included (hashed as unsigned)
      tokens[i] = r.nextInt(4) == 0 ? r.nextInt() : r.nextInt(200_000);
    }
    BlockHasher reference = new BlockHasher(blockSize, salt);
    // expected: block by block through hashBlock, not through the pipelined chain loop
    long[] expected = new long[length / blockSize];
    long parent = BlockHasher.ROOT_PARENT;
    for (int b = 0; b < expected.length; b++) {
      parent = reference.hashBlock(parent, tokens, b * blockSize);
      expected[b] = parent;
    }

    BlockChain chain = new BlockChain(reference);
    long[] whole = new long[expected.length + 2];
    Arrays.fill(whole, 7);
    assertEquals(expected.length, chain.chain(tokens, length, whole));
    assertArrayEquals(expected, Arrays.copyOf(whole, expected.length));
    assertEquals(7, whole[expected.length], "wrote past the chain");

    long[] stepwise = new long[expected.length];
    int done = 0;
    int upTo = 0;
    for (int s = 0; s < splits; s++) {
      upTo = Math.min(length, upTo + r.nextInt(length + 1));
      done = chain.extend(tokens, done, upTo, stepwise);
      assertEquals(upTo / blockSize, done);
    }
    assertEquals(expected.length, chain.extend(tokens, done, length, stepwise));
    assertArrayEquals(expected, stepwise);
  }

  @Test
  void defaultBlockSizeMatchesTheReferenceOnALongPrompt() {
    SplittableRandom r = new SplittableRandom(4);
    int[] tokens = new int[4096 + 7];
    for (int i = 0; i < tokens.length; i++) {
      tokens[i] = r.nextInt();
    }
    BlockHasher reference = new BlockHasher(16, 0);
    assertArrayEquals(reference.chain(tokens), chainOf(new BlockChain(reference), tokens));
  }

  @Test
  void rejectsLengthsOutsideThePromptAndShortOutput() {
    BlockChain chain = new BlockChain(new BlockHasher(16, 0));
    assertThrows(IllegalArgumentException.class, () -> chain.chain(new int[8], 9, new long[1]));
    assertThrows(IllegalArgumentException.class, () -> chain.chain(new int[32], 32, new long[1]));
  }

  private static long[] chainOf(BlockChain chain, int[] tokens) {
    long[] out = new long[tokens.length / 16];
    chain.chain(tokens, tokens.length, out);
    return out;
  }
}
