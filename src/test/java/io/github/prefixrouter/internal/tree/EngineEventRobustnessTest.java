package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheEventStats;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.testing.LoggedLines;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Engine events that build extreme shapes: a path of one node per block, aliases never removed.
 *
 * <p>An event that loops forever fails its test after 2 minutes instead of stalling the build
 * (the longest test, the deep tree, takes about 3 s). Each test runs on a thread of its own,
 * since a loop holding the write lock does not stop when interrupted.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class EngineEventRobustnessTest {

  /**
   * A removal of the first block of a deep, branching chain must not throw out of the listener,
   * and the invariant check must get through such a tree. Run on a thread with a small stack
   * (256 KB), where a recursion over the 6,000 nodes of the path overflows as one over 40,000
   * did on a default stack, at a fortieth of the work: each fork below re-stamps the path above
   * it, so building the tree is quadratic in its depth.
   */
  @Test
  void removingTheRootOfADeepTreeDoesNotThrow() throws InterruptedException {
    AtomicReference<Throwable> failed = new AtomicReference<>();
    Thread small = new Thread(null, () -> {
      try {
        removeTheRootOfADeepTree(6_000);
      } catch (Throwable e) {
        failed.set(e);
      }
    }, "small-stack", 256 << 10);
    small.start();
    small.join();
    assertNull(failed.get(), () -> "threw " + failed.get());
  }

  private static void removeTheRootOfADeepTree(int depth) {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder()
        .mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN).blockSize(1).build();
    CacheEventListener engine = t.engineEvents();
    long[] chain = new long[depth];
    for (int i = 0; i < depth; i++) {
      chain[i] = 1 + i;
    }
    engine.onBlocksStored(CacheEventListener.NO_PARENT, chain, new int[depth]); // tokens all 0
    // a side block (token 1) after every block of the chain: one node per level
    for (int i = 0; i < depth - 1; i++) {
      engine.onBlocksStored(chain[i], new long[] {1_000_000L + i}, new int[] {1});
    }
    assertEquals(2L * depth - 1, t.sizeTokens());
    t.checkInvariants(); // visits a path of one node per level: a recursion overflowed the stack
    engine.onBlocksRemoved(new long[] {chain[0]}); // an error here escapes the listener
    assertEquals(0, t.sizeTokens());
    t.checkInvariants();
  }

  /**
   * vLLM reports a long prompt prefilled in chunks, and a decode, as one store per scheduler
   * step, each continuing the last block stored: the work of such a chain must grow linearly
   * with it, not with its square (each store copied the whole leaf edge to append its block).
   */
  @Test
  void aChainStoredBlockByBlockCopiesLinearlyManyTokens() {
    long[] shorter = storeBlockByBlock(1_000);
    long[] longer = storeBlockByBlock(2_000);
    assertTrue(longer[0] <= 5 * shorter[0] / 2,
        "edge tokens copied: " + shorter[0] + " for 1,000 blocks, " + longer[0] + " for 2,000");
  }

  /**
   * A store continuing the leaf where the last store ended is a use of the same path again: it
   * must not re-stamp and re-normalize the whole path above it, which is quadratic in a chain
   * stored block by block below a deep part of the tree.
   */
  @Test
  void extendingTheLastStoredLeafDoesNotWalkTheWholePath() {
    int depth = 2_000;
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(1);
    CacheEventListener engine = t.engineEvents();
    long[] chain = new long[depth];
    for (int i = 0; i < depth; i++) {
      chain[i] = 1 + i;
    }
    engine.onBlocksStored(CacheEventListener.NO_PARENT, chain, new int[depth]); // tokens all 0
    for (int i = 0; i < depth - 1; i++) { // a side block after every block: a node per level
      engine.onBlocksStored(chain[i], new long[] {1_000_000L + i}, new int[] {1});
    }
    int stores = 3_000;
    long before = t.writeCostForTest()[1];
    long parent = chain[depth - 1];
    for (int i = 0; i < stores; i++) { // then the last chain grows one block per store
      engine.onBlocksStored(parent, new long[] {2_000_000L + i}, new int[] {2 + i % 5});
      parent = 2_000_000L + i;
    }
    long steps = t.writeCostForTest()[1] - before;
    assertTrue(steps <= 2L * depth + 4L * stores,
        "path nodes visited by " + stores + " stores below depth " + depth + ": " + steps);
    assertEquals(2L * depth - 1 + stores, t.sizeTokens());
    int[] path = new int[depth + stores];
    for (int i = 0; i < stores; i++) {
      path[depth + i] = 2 + i % 5;
    }
    assertEquals(path.length, t.match(path));
    t.checkInvariants();
  }

  /** Stores a chain of {@code blocks} blocks one per event; returns the tree's write cost. */
  private static long[] storeBlockByBlock(int blocks) {
    int bs = 16;
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(bs);
    CacheEventListener engine = t.engineEvents();
    int[] all = new int[blocks * bs];
    long parent = CacheEventListener.NO_PARENT;
    for (int i = 0; i < blocks; i++) {
      int[] tokens = new int[bs];
      Arrays.fill(tokens, i % 7);
      System.arraycopy(tokens, 0, all, i * bs, bs);
      engine.onBlocksStored(parent, new long[] {1 + i}, tokens);
      parent = 1 + i;
    }
    assertEquals(all.length, t.sizeTokens());
    assertEquals(all.length, t.match(all));
    t.checkInvariants();
    return t.writeCostForTest();
  }

  /**
   * An engine that removes a block under its first hash but never under the second leaves an
   * alias of a block that has gone: the tree is empty, yet the aliases must not pile up.
   */
  @Test
  void aliasesOfRemovedBlocksDoNotPileUpBelowTheLimit() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder()
        .mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN).blockSize(2).mirrorLimitTokens(64).build();
    CacheEventListener engine = t.engineEvents();
    for (int i = 0; i < 100_000; i++) {
      long first = 1 + 2L * i;
      long second = 2 + 2L * i;
      engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {first}, new int[] {5, 5});
      engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {second}, new int[] {5, 5});
      engine.onBlocksRemoved(new long[] {first}); // the block goes; the alias stays
    }
    t.checkInvariants();
    assertEquals(0, t.sizeTokens());
    assertTrue(t.aliasCountForTest() <= 2 * 64, "aliases kept: " + t.aliasCountForTest());
  }

  /**
   * An engine whose removals do not arrive and that stores one block under ever new hashes (a
   * salted chain arrives as the base model's, each salt hashing the same tokens anew) leaves
   * aliases of a block that stays: no more may be kept than the blocks the mirror limit holds,
   * and the newest ones still stand for the block.
   */
  @Test
  void aliasesOfAHeldBlockDoNotPileUpWhenRemovalsAreLost() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder()
        .mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN).blockSize(2).mirrorLimitTokens(64).build();
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 5});
    for (int i = 0; i < 100_000; i++) {
      engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {2 + i}, new int[] {5, 5});
    }
    t.checkInvariants();
    assertEquals(2, t.sizeTokens());
    assertEquals(100_000, t.engineEventStats().aliasedBlocks());
    assertTrue(t.aliasCountForTest() <= 64 / 2, "aliases kept: " + t.aliasCountForTest());
    long newest = 1 + 100_000;
    assertEquals(1, t.engineCopies(newest));
    engine.onBlocksStored(newest, new long[] {-7}, new int[] {6, 6}); // continues its block
    assertEquals(4, t.match(new int[] {5, 5, 6, 6}));
    assertEquals(0, t.engineEventStats().unknownParents());
  }

  /** A store without a scope is malformed: dropped, counted, and not thrown back. */
  @Test
  void aStoreWithANullScopeIsCountedAsMalformed() {
    // it was logged as an event that could not be applied, and counted nowhere
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    CacheEventListener engine = t.engineEvents();
    assertDoesNotThrow(() -> engine.onBlocksStored(
        null, CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6}));
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {2}, new int[] {7, 8});
    // a continuation takes its parent's scope, but a null one is still no scope
    engine.onBlocksStored(null, 2, new long[] {3}, new int[] {9, 9});
    CacheEventStats s = t.engineEventStats();
    assertEquals(2, s.malformedEvents());
    assertEquals(1, s.storedEvents());
    assertEquals(2, t.sizeTokens());
    assertEquals(0, t.match(new int[] {5, 6}));
    assertEquals(2, t.match(new int[] {7, 8, 9, 9}));
    t.checkInvariants();
  }

  /**
   * A store whose token count is not its blocks times the tree's block size is logged at ERROR,
   * the 1st, 2nd, 4th and 8th such store: naming the engine's block size when the count is a
   * whole number of blocks of another size, else the count received. It was only counted in
   * {@code malformedEvents}, and an engine of another block size left the tree empty silently.
   */
  @Test
  void aStoreOfAnotherBlockSizeIsLoggedAtErrorSparsely() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(4);
    CacheEventListener engine = t.engineEvents();
    long none = CacheEventListener.NO_PARENT;
    List<String> lines = LoggedLines.logged("ConcurrentPrefixTree", () -> {
      engine.onBlocksStored(none, new long[] {1, 2}, new int[16]); // 1st: blocks of 8
      engine.onBlocksStored(none, new long[] {3, 4}, new int[5]); // 2nd: no whole block size
      engine.onBlocksStored(none, new long[] {5}, new int[4]); // fits: stored, not counted
      engine.onBlocksStored(none, null, new int[4]); // malformed, but no size to tell
      engine.onBlocksStored(none, new long[] {6}, new int[8]); // 3rd
      engine.onBlocksStored(none, new long[] {7}, new int[0]); // 4th: tokens missing
      for (int i = 0; i < 3; i++) { // 5th to 7th
        engine.onBlocksStored(none, new long[] {8}, new int[2]);
      }
      engine.onBlocksStored(none, new long[0], new int[3]); // 8th: no block
      engine.onBlocksStored(none, new long[] {9}, new int[2]); // 9th
    });
    String prefix = "[" + Thread.currentThread().getName()
        + "] ERROR io.github.prefixrouter.internal.tree.ConcurrentPrefixTree - ";
    String advice = ": RouterConfig.blockSize must equal the engine's KV block size; such stores "
        + "cannot be mirrored and are dropped (";
    String counted = " so far, counted in malformedEvents)";
    assertEquals(List.of(
        prefix + "the engine stores blocks of 8 tokens, the tree's block size is 4" + advice + 1
            + counted,
        prefix + "the engine stored 2 blocks with 5 tokens, not blocks of 4 tokens, the tree's "
            + "block size" + advice + 2 + counted,
        prefix + "the engine stored 1 blocks with 0 tokens, not blocks of 4 tokens, the tree's "
            + "block size" + advice + 4 + counted,
        prefix + "the engine stored 0 blocks with 3 tokens, not blocks of 4 tokens, the tree's "
            + "block size" + advice + 8 + counted), lines,
        "what the tree logs of stores whose token count is not their blocks times 4");
    assertEquals(10, t.engineEventStats().malformedEvents());
    assertEquals(1, t.engineEventStats().storedEvents());
    assertEquals(4, t.sizeTokens());
    t.checkInvariants();
  }

  /**
   * A block event listener that throws an {@link Error} is caught as one that throws an
   * exception: counted, and neither thrown back at the engine nor keeping the events from the
   * listeners after it.
   */
  @Test
  void aBlockEventListenerThatThrowsAnErrorDoesNotEscapeTheEngineEvents() {
    // the Error went through the engine listener's catch of RuntimeException, out of the
    // engine's call, and the listeners after it missed the event
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    t.addListener(new BlockEventListener() {
      @Override
      public void onStored(long[] hashes) {
        throw new StackOverflowError("listener");
      }

      @Override
      public void onEvicted(long[] hashes) {
        throw new AssertionError("listener");
      }

      @Override
      public void onCleared() {
        throw new StackOverflowError("listener");
      }
    });
    ConcurrentPrefixTreeTest.Replay after = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(after);
    CacheEventListener engine = t.engineEvents();
    assertDoesNotThrow(() -> engine.onBlocksStored(
        CacheEventListener.NO_PARENT, new long[] {1, 2}, new int[] {5, 6, 7, 8}));
    assertDoesNotThrow(() -> engine.onBlocksRemoved(new long[] {2}));
    assertDoesNotThrow(engine::onAllCleared);
    assertEquals(3, t.listenerFailures());
    assertEquals(java.util.List.of("stored 2", "evicted 1", "cleared"), after.log);
    assertDoesNotThrow(() -> engine.onBlocksStored(
        CacheEventListener.NO_PARENT, new long[] {3}, new int[] {9, 9}));
    assertEquals(2, t.match(new int[] {9, 9}));
    assertEquals(4, t.listenerFailures());
    after.assertConsistent();
    t.checkInvariants();
  }

  /**
   * An {@link Error} while an engine event is applied (a stack overflow, an assertion) is
   * counted and logged like an exception, and not thrown back at the engine's thread; only a
   * {@link VirtualMachineError} other than a stack overflow (out of memory) is. Either way the
   * write lock is released, the tree stays consistent, and later events are applied.
   */
  @Test
  void anErrorWhileApplyingAnEngineEventDoesNotReachTheEngineUnlessTheVmIsInTrouble() {
    // only RuntimeException was caught: the Error reached the engine's thread uncounted
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    t.engineFaultForTest(() -> {
      throw new StackOverflowError("test");
    });
    assertDoesNotThrow(() -> engine.onBlocksStored(1, new long[] {2}, new int[] {7, 8}));
    t.engineFaultForTest(() -> {
      throw new AssertionError("test");
    });
    assertDoesNotThrow(() -> engine.onBlocksRemoved(new long[] {1}));
    assertDoesNotThrow(engine::onAllCleared);
    assertEquals(3, t.engineEventFailures());
    t.engineFaultForTest(() -> {
      throw new OutOfMemoryError("test");
    });
    assertThrows(OutOfMemoryError.class,
        () -> engine.onBlocksStored(1, new long[] {2}, new int[] {7, 8}));
    assertEquals(4, t.engineEventFailures());
    t.checkInvariants();
    assertEquals(2, t.match(new int[] {5, 6, 7, 8}), "none of the failed events was applied");

    t.engineFaultForTest(() -> { });
    engine.onBlocksStored(1, new long[] {2}, new int[] {7, 8});
    assertEquals(4, t.match(new int[] {5, 6, 7, 8}));
    engine.onBlocksRemoved(new long[] {2});
    assertEquals(2, t.match(new int[] {5, 6, 7, 8}));
    assertEquals(4, t.engineEventFailures());
    replay.assertConsistent();
    t.checkInvariants();
  }

  /**
   * A block event listener that runs out of memory gets the policy of the engine events and of
   * gossip handling: counted in {@code listenerFailures()} (not as an engine event failure: the
   * event was applied), the event and the ones queued after it still reach every listener, and
   * the {@link OutOfMemoryError} is then thrown on to the writer, engine or not.
   */
  @Test
  void aBlockEventListenerOutOfMemoryIsCountedDeliveredAroundAndThrownOn() {
    // the listener delivery caught every Throwable: the OutOfMemoryError was logged and lost
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    t.addListener(new BlockEventListener() {
      @Override
      public void onStored(long[] hashes) {
        throw new OutOfMemoryError("listener");
      }
    });
    ConcurrentPrefixTreeTest.Replay after = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(after);
    CacheEventListener engine = t.engineEvents();
    assertThrows(OutOfMemoryError.class, () -> engine.onBlocksStored(
        CacheEventListener.NO_PARENT, new long[] {1, 2}, new int[] {5, 6, 7, 8}));
    assertEquals(1, t.listenerFailures());
    assertEquals(0, t.engineEventFailures(), "the event was applied");
    assertEquals(4, t.match(new int[] {5, 6, 7, 8}));
    assertEquals(java.util.List.of("stored 2"), after.log);
    assertDoesNotThrow(() -> engine.onBlocksRemoved(new long[] {2}));
    assertEquals(java.util.List.of("stored 2", "evicted 1"), after.log);
    after.assertConsistent();
    t.checkInvariants();

    ConcurrentPrefixTree s = ConcurrentPrefixTree.builder().blockSize(2).capacityTokens(1000)
        .build();
    s.addListener(new BlockEventListener() {
      @Override
      public void onStored(long[] hashes) {
        throw new OutOfMemoryError("listener");
      }
    });
    ConcurrentPrefixTreeTest.Replay r = new ConcurrentPrefixTreeTest.Replay();
    s.addListener(r);
    assertThrows(OutOfMemoryError.class, () -> s.insert(new int[] {1, 2, 3, 4}));
    assertEquals(1, s.listenerFailures());
    assertEquals(2, r.held.size());
    assertEquals(4, s.match(new int[] {1, 2, 3, 4}));
    r.assertConsistent();
    s.checkInvariants();
  }

  /**
   * An {@link Error} part-way through a store, once its tokens are in the tree and before its
   * hashes are recorded, left blocks no removal could reach (the invariant check failed with
   * "engine hash not indexed to its node", and {@code match} reported them cached). A tree the
   * fault left inconsistent is cleared, as if the engine had cleared its cache, and the
   * listeners are told; later events rebuild it.
   */
  @Test
  void anErrorPartWayThroughAStoreLeavesNoUnreachableBlocks() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    t.midStoreFaultForTest = () -> {
      throw new StackOverflowError("test");
    };
    assertDoesNotThrow(() -> engine.onBlocksStored(1, new long[] {2, 3},
        new int[] {7, 8, 9, 9}));
    t.midStoreFaultForTest = () -> { };
    assertEquals(1, t.engineEventFailures());
    t.checkInvariants();
    assertEquals(0, t.match(new int[] {5, 6, 7, 8, 9, 9}), "cleared");
    replay.assertConsistent();
    assertEquals(java.util.Set.of(), replay.held);

    t.midStoreFaultForTest = () -> {
      throw new OutOfMemoryError("test");
    };
    assertThrows(OutOfMemoryError.class, () -> engine.onBlocksStored(
        CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6}));
    t.midStoreFaultForTest = () -> { };
    t.checkInvariants();
    assertEquals(0, t.match(new int[] {5, 6}));

    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    engine.onBlocksStored(1, new long[] {2}, new int[] {7, 8});
    assertEquals(4, t.match(new int[] {5, 6, 7, 8}));
    engine.onBlocksRemoved(new long[] {1});
    assertEquals(0, t.sizeTokens());
    replay.assertConsistent();
    t.checkInvariants();
  }
}
