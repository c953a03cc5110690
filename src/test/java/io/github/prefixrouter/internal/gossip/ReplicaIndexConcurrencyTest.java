package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Lock-free queries concurrent with mutation: a writer grows every slot's replica one block at a
 * time along one shared chain (so holder sets go from inline to one or several bitmap words, and
 * the table resizes many times), then shrinks them again in reverse, while readers query the
 * whole chain. The writer's states are known exactly: after {@code j + 1} additions, slot
 * {@code r} of the {@code S} slots holds {@code (j - r) / S + 1} blocks (0 if negative). Every
 * answer must equal one of them, namely the one with as many pairs as the answer's counts add
 * up to: a torn read that slipped through would not.
 */
class ReplicaIndexConcurrencyTest {

  static final long SEED = 0x5EED_1DE7L;

  /**
   * A query's optimistic read takes any exception for a torn read; on an index that did not
   * change meanwhile it is not one, but the chain source's own failure (the hashing of the
   * prompt), or a bug: that exception is what the caller gets, not a failure that names no cause.
   */
  @Test
  void aChainSourcesFailureOnAStableIndexIsThrownAsItself() {
    long[] chain = {BlockFingerprint.of(1), BlockFingerprint.of(2)};
    ReplicaIndex index = new ReplicaIndex(256, 1 << 20, 1 << 22, SEED);
    index.add(3, chain[0]);
    RuntimeException broke = new UnsupportedOperationException("the hasher broke");
    BlockChainSource failing = new BlockChainSource() {
      @Override
      public int ensure(int blocks) {
        throw broke;
      }

      @Override
      public long[] hashes() {
        return chain;
      }
    };
    RuntimeException thrown = assertThrows(RuntimeException.class,
        () -> index.leadingBlocks(failing, new int[256], 256));
    assertSame(broke, thrown, "the chain source's failure was masked: " + thrown);
  }

  @ParameterizedTest
  @ValueSource(strings = {"3,9,40,63", "5,9,70,200"})
  void everyConcurrentAnswerIsAStateTheWriterPassedThrough(String slotList) throws Exception {
    int[] slots = Arrays.stream(slotList.split(",")).mapToInt(Integer::parseInt).toArray();
    int blocks = 2_000;
    long[] chain = new long[blocks];
    for (int i = 0; i < blocks; i++) {
      chain[i] = BlockFingerprint.of((i + 1) * 0x9E3779B97F4A7C15L);
    }
    ReplicaIndex index = new ReplicaIndex(256, 1 << 20, 1 << 22, SEED);
    AtomicBoolean done = new AtomicBoolean();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    AtomicInteger answers = new AtomicInteger();
    List<Thread> readers = new ArrayList<>();
    for (int t = 0; t < 2; t++) {
      Thread th = new Thread(() -> {
        int[] out = new int[256];
        try {
          while (!done.get()) {
            int best = index.leadingBlocks(chain, blocks, out, 256);
            check(slots, out, best);
            answers.incrementAndGet();
          }
        } catch (Throwable e) {
          failure.compareAndSet(null, e);
        }
      });
      th.start();
      readers.add(th);
    }
    // grow and shrink until the readers have answered often enough to overlap the writes
    for (int cycle = 0; cycle < 3 || answers.get() < 500 && cycle < 200; cycle++) {
      for (int b = 0; b < blocks && failure.get() == null; b++) {
        for (int s : slots) {
          index.add(s, chain[b]);
        }
      }
      for (int b = blocks - 1; b >= 0 && failure.get() == null; b--) {
        for (int r = slots.length - 1; r >= 0; r--) {
          index.remove(slots[r], chain[b]);
        }
      }
    }
    done.set(true);
    for (Thread th : readers) {
      th.join(30_000);
    }
    if (failure.get() != null) {
      throw new AssertionError(failure.get());
    }
    index.checkInvariants();
    assertTrue(answers.get() > 0, "no query ran");
  }

  private static void check(int[] slots, int[] out, int best) {
    long sum = 0;
    for (int s : slots) {
      sum += out[s];
    }
    long j = sum - 1; // index of the addition after which the index looked like this
    int expectedBest = 0;
    int n = slots.length;
    for (int r = 0; r < n; r++) {
      long want = j < r ? 0 : (j - r) / n + 1;
      if (out[slots[r]] != want) {
        throw new AssertionError("torn answer: counts " + describe(slots, out)
            + " are no state the writer passed through");
      }
      expectedBest = (int) Math.max(expectedBest, want);
    }
    if (best != expectedBest) {
      throw new AssertionError("best " + best + " but counts " + describe(slots, out));
    }
  }

  private static String describe(int[] slots, int[] out) {
    StringBuilder sb = new StringBuilder();
    for (int s : slots) {
      sb.append(s).append('=').append(out[s]).append(' ');
    }
    return sb.toString();
  }
}
