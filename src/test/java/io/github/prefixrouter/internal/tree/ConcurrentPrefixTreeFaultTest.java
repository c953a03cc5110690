package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.github.prefixrouter.spi.CacheEventListener;
import java.util.Arrays;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * Self-managed writes that fail part-way (an {@link OutOfMemoryError} where a write allocates):
 * the tree must be left consistent, with its listeners' replicas and its leases whole.
 */
class ConcurrentPrefixTreeFaultTest {

  private static Runnable oom() {
    return () -> {
      throw new OutOfMemoryError("test");
    };
  }

  private static Set<Long> held(ConcurrentPrefixTree t) {
    return Arrays.stream(t.blockHashes()).boxed().collect(Collectors.toSet());
  }

  /** After a failed write: consistent, the replayed events equal the blocks held. */
  private static void assertWhole(ConcurrentPrefixTree t, ConcurrentPrefixTreeTest.Replay replay) {
    t.checkInvariants();
    replay.assertConsistent();
    assertEquals(held(t), replay.held, "replayed blocks");
  }

  @Test
  void anInsertWhoseEvictionFailsPartWayLeavesAConsistentTree() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(10).blockSize(2)
        .build();
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    t.insert(new int[] {1, 2, 3, 4, 5, 6, 7, 8});
    t.midWriteFaultForTest = oom();
    // 14 tokens: the eviction trims the older prompt by 4, and fails while it does
    assertThrows(OutOfMemoryError.class, () -> t.insert(new int[] {20, 21, 22, 23, 24, 25}));
    t.midWriteFaultForTest = () -> { };
    assertWhole(t, replay);
    assertEquals(1, t.repairsForTest());

    t.insert(new int[] {1, 2, 3, 4});
    t.insert(new int[] {30, 31, 32, 33, 34, 35, 36, 37});
    assertEquals(10, t.sizeTokens());
    assertWhole(t, replay);
  }

  /**
   * A write that fails after hashing its new blocks and before linking them leaves the tree as
   * it was, and its listeners must not be told of blocks it never held (they were: the repair
   * gave the write's buffered events, and a replica claimed blocks the node did not cache).
   */
  @Test
  void aWriteThatFailsBeforeLinkingItsBlocksReportsNoneOfThem() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(100).blockSize(2)
        .build();
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    t.insert(new int[] {1, 2, 3, 4});
    t.midWriteFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, () -> t.insert(new int[] {5, 6, 7, 8}));
    t.midWriteFaultForTest = () -> { };
    assertEquals(4, t.sizeTokens(), "the tree as it was");
    assertWhole(t, replay);
    assertEquals(java.util.List.of("stored 2", "cleared", "stored 2"), replay.log);

    ConcurrentPrefixTree e = ConcurrentPrefixTree.engineDriven(2);
    ConcurrentPrefixTreeTest.Replay mirror = new ConcurrentPrefixTreeTest.Replay();
    e.addListener(mirror);
    CacheEventListener engine = e.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    e.midWriteFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, () -> engine.onBlocksStored(
        CacheEventListener.NO_PARENT, new long[] {2}, new int[] {7, 8}));
    e.midWriteFaultForTest = () -> { };
    assertEquals(1, e.engineEventFailures());
    assertEquals(2, e.sizeTokens(), "the tree as it was");
    assertWhole(e, mirror);
    engine.onBlocksRemoved(new long[] {1});
    assertWhole(e, mirror);
    assertEquals(java.util.Set.of(), mirror.held);
  }

  /**
   * An engine event whose failure the tree throws on (out of memory) must still give the
   * listeners the events of its repair before it returns, as every other write does: they
   * waited for the next write, and a replica held the blocks of the cleared tree meanwhile.
   */
  @Test
  void anEngineEventThatThrowsOnTellsTheListenersAtOnce() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    t.midStoreFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, () -> engine.onBlocksStored(
        1, new long[] {2}, new int[] {7, 8}));
    t.midStoreFaultForTest = () -> { };
    assertEquals(0, t.sizeTokens(), "cleared: the store left a block no removal reaches");
    assertWhole(t, replay);
    assertEquals(java.util.List.of("stored 1", "cleared"), replay.log);
  }

  @Test
  void anEvictToThatFailsPartWayLeavesAConsistentTree() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(100).blockSize(2)
        .build();
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    t.insert(new int[] {1, 2, 3, 4, 5, 6, 7, 8});
    t.midWriteFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, () -> t.evictTo(5));
    t.midWriteFaultForTest = () -> { };
    assertWhole(t, replay);
    assertEquals(0, t.evictTo(t.sizeTokens()));
  }

  /**
   * A lease taken before a write whose repair cleared the tree pins nothing and is released
   * once, quietly; a release that itself fails has still released its lease (a second release
   * is refused as for any lease), and leaves no count behind.
   */
  @Test
  void leasesAreNeitherLostNorDoubledByARepair() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(12).blockSize(2)
        .build();
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    t.insert(new int[] {1, 2, 3, 4});
    ConcurrentPrefixTree.Lease before = t.acquire(new int[] {1, 2, 3, 4, 9});
    assertEquals(4, before.lockedTokens());
    t.insert(new int[] {5, 6, 7, 8, 9, 10});
    t.midWriteFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, () -> t.insert(new int[] {20, 21, 22, 23, 24}));
    t.midWriteFaultForTest = () -> { };
    assertWhole(t, replay);
    assertDoesNotThrow(before::release);
    assertThrows(IllegalStateException.class, before::release);
    assertEquals(0, t.pinnedTokens());

    // the release itself fails: its leaf goes back to the LRU heap, which fails to grow
    t.insert(new int[] {1, 2, 3, 4});
    ConcurrentPrefixTree.Lease failing = t.acquire(new int[] {1, 2, 3, 4});
    t.midWriteFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, failing::release);
    t.midWriteFaultForTest = () -> { };
    assertWhole(t, replay);
    assertEquals(0, t.pinnedTokens());
    assertThrows(IllegalStateException.class, failing::release, "released once already");
    assertDoesNotThrow(failing::close);

    // an acquire that fails once it pinned its path hands out no lease: it must pin nothing
    t.insert(new int[] {1, 2, 3, 4, 5, 6});
    t.insert(new int[] {1, 2}); // a recency boundary after 2, which the acquire's use removes
    t.midWriteFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, () -> t.acquire(new int[] {1, 2, 3, 4, 5, 6}));
    t.midWriteFaultForTest = () -> { };
    assertWhole(t, replay);
    assertEquals(0, t.pinnedTokens());
    t.evictTo(0);
    assertEquals(0, t.sizeTokens(), "nothing left pinned");
  }
}
