package io.github.prefixrouter.internal.tree;

import static io.github.prefixrouter.internal.tree.LruEvictionTest.evicted;
import static io.github.prefixrouter.internal.tree.LruEvictionTest.shape;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.spi.CacheEventListener;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The heap of evictable leaves: a leaf taken out of it from the middle (leased, or removed by
 * the engine) leaves the rest in LRU order, and a node that stops being a leaf, or is removed,
 * is never chosen for eviction afterwards.
 */
class LruHeapTest {

  /** Evicts one token at a time from single-token leaves: the first token of each, in order. */
  private static List<Integer> evictionOrder(ConcurrentPrefixTree t) {
    List<Integer> order = new ArrayList<>();
    while (t.sizeTokens() > t.pinnedTokens()) {
      List<int[]> before = t.leafSequences();
      assertEquals(1, t.evictTo(t.sizeTokens() - 1));
      List<int[]> after = t.leafSequences();
      for (int[] leaf : before) {
        if (after.stream().noneMatch(x -> java.util.Arrays.equals(x, leaf))) {
          order.add(leaf[0]);
        }
      }
    }
    return order;
  }

  /**
   * Leaves 1 to 7 used in that order, then 2, 4 and 5 again: the heap holds 5 below 2 on one
   * side and 7 on the other. Leasing 5 takes it from the middle; 7, moved into its place, is
   * older than 2 above it and must rise. The unleased leaves then go strictly by last use.
   */
  @Test
  void aLeafLeasedFromTheMiddleOfTheHeapLeavesTheRestInLruOrder() {
    ConcurrentPrefixTree t = LruEvictionTest.tree(100);
    for (int k = 1; k <= 7; k++) {
      t.insert(new int[] {k});
    }
    for (int k : new int[] {2, 4, 5}) {
      t.insert(new int[] {k});
    }
    ConcurrentPrefixTree.Lease lease = t.acquire(new int[] {5});
    t.insert(new int[] {8});
    t.insert(new int[] {9});
    assertEquals(List.of(1, 3, 6, 7, 2, 4, 8, 9), evictionOrder(t));
    assertEquals("[5 (locked 1)]", shape(t));
    t.checkInvariants();
    lease.release();
    assertEquals(List.of(5), evictionOrder(t));
    t.checkInvariants();
  }

  /**
   * The same in an engine-driven tree at its mirror limit: the engine removes a block whose
   * leaf sits in the middle of the heap, and each later store over the limit drops exactly the
   * least recently stored leaf.
   */
  @Test
  void aLeafTheEngineRemovesFromTheMiddleOfTheHeapLeavesTheRestInLruOrder() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder()
        .mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN).blockSize(2).mirrorLimitTokens(16).build();
    LruEvictionTest.Events events = new LruEvictionTest.Events();
    t.addListener(events);
    CacheEventListener engine = t.engineEvents();
    for (int k = 1; k <= 7; k++) {
      engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {k}, new int[] {k, k});
    }
    for (int k : new int[] {2, 4, 5}) { // another copy of each: used again
      engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {k}, new int[] {k, k});
    }
    engine.onBlocksRemoved(new long[] {5});
    engine.onBlocksRemoved(new long[] {5}); // its last copy: the leaf goes
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {8}, new int[] {8, 8});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {9}, new int[] {9, 9});
    assertEquals(16, t.sizeTokens());
    events.take();
    List<String> dropped = new ArrayList<>();
    for (int k = 10; k < 18; k++) {
      engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {k}, new int[] {k, k});
      for (String e : events.take()) {
        if (e.startsWith("evicted")) {
          dropped.add(e);
        }
      }
    }
    BlockHasher h = t.hasher();
    List<String> expected = new ArrayList<>();
    for (int k : new int[] {1, 3, 6, 7, 2, 4, 8, 9}) {
      expected.add(evicted(h.chain(new int[] {k, k})));
    }
    assertEquals(expected, dropped);
    t.checkInvariants();
  }

  /**
   * A leaf that gets a child while leased is an inner node when the lease goes: it is not
   * evictable until its children have gone, oldest first, and then goes by its own last use.
   */
  @Test
  void aLeafThatGotChildrenWhileLeasedIsEvictedOnlyAfterThem() {
    ConcurrentPrefixTree t = LruEvictionTest.tree(100);
    t.insert(new int[] {1, 2});
    ConcurrentPrefixTree.Lease lease = t.acquire(new int[] {1, 2});
    t.insert(new int[] {1, 2, 3}); // children of the leased leaf
    t.insert(new int[] {1, 2, 4});
    t.insert(new int[] {6}); // newer than [1, 2]
    lease.release();
    assertEquals("[1 2 [3] [4]] [6]", shape(t));
    assertEquals(1, t.evictTo(4));
    assertEquals("[1 2 4] [6]", shape(t)); // [3] went; [1, 2] and [4] share their last use
    assertEquals(1, t.evictTo(3));
    assertEquals("[1 2] [6]", shape(t));
    assertEquals(2, t.evictTo(1));
    assertEquals("[6]", shape(t));
    t.checkInvariants();
  }

  /**
   * Engine-driven, where a leaf extension stops at every block: a store continuing a leaf makes
   * it an inner node. Over the mirror limit, its new child goes first (the oldest leaf), then the
   * node itself once it is a leaf again; a node chosen while inner would take its child with it
   * and report only its own block.
   */
  @Test
  void anEngineLeafContinuedByAStoreIsDroppedOnlyAfterItsChild() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder()
        .mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN).blockSize(2).mirrorLimitTokens(6).build();
    t.extensionSpanForTest(1);
    LruEvictionTest.Events events = new LruEvictionTest.Events();
    t.addListener(events);
    CacheEventListener engine = t.engineEvents();
    BlockHasher h = t.hasher();
    long[] chain = h.chain(new int[] {1, 1, 2, 2});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {1, 1});
    engine.onBlocksStored(1, new long[] {2}, new int[] {2, 2}); // [1, 1] is inner now
    assertEquals("[1 1 [2 2]]", shape(t));
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {3}, new int[] {3, 3});
    events.take();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {4}, new int[] {4, 4});
    assertEquals("[1 1] [3 3] [4 4]", shape(t));
    assertEquals(List.of(LruEvictionTest.stored(h.chain(new int[] {4, 4})), evicted(chain[1])),
        events.take());
    t.checkInvariants();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {5}, new int[] {5, 5});
    assertEquals("[3 3] [4 4] [5 5]", shape(t));
    assertEquals(List.of(LruEvictionTest.stored(h.chain(new int[] {5, 5})), evicted(chain[0])),
        events.take());
    t.checkInvariants();
  }
}
