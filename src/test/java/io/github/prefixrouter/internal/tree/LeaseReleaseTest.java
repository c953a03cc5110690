package io.github.prefixrouter.internal.tree;

import static io.github.prefixrouter.internal.tree.LruEvictionTest.shape;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/**
 * What a lease's release gives back, exactly: one lock on every node of its path, eviction of
 * its tokens from that moment on (not before, while another lease still holds them), and
 * nothing more on a second release, which throws.
 */
class LeaseReleaseTest {

  @Test
  void aReleaseGivesBackItsLocksAndItsTokensBecomeEvictableExactlyThen() {
    ConcurrentPrefixTree t = LruEvictionTest.tree(100);
    t.insert(new int[] {1, 2, 3, 4});
    t.insert(new int[] {1, 2, 9});
    ConcurrentPrefixTree.Lease first = t.acquire(new int[] {1, 2, 3, 4});
    ConcurrentPrefixTree.Lease second = t.acquire(new int[] {1, 2, 3, 4, 7}); // the same 4
    ConcurrentPrefixTree.Lease branch = t.acquire(new int[] {1, 2, 9});
    assertEquals(4, first.lockedTokens());
    assertEquals(4, second.lockedTokens());
    assertEquals(3, branch.lockedTokens());
    assertEquals("[1 2 (locked 3) [3 4 (locked 2)] [9 (locked 1)]]", shape(t));
    assertEquals(0, t.evictTo(0), "everything is pinned");

    first.release();
    assertEquals("[1 2 (locked 2) [3 4 (locked 1)] [9 (locked 1)]]", shape(t));
    assertEquals(5, t.pinnedTokens());
    assertEquals(0, t.evictTo(0), "[3, 4] is still pinned by the second lease");

    IllegalStateException e = assertThrows(IllegalStateException.class, first::release);
    assertEquals("lease on 4 tokens was already released", e.getMessage());
    first.close(); // quiet, and no release either
    assertEquals("[1 2 (locked 2) [3 4 (locked 1)] [9 (locked 1)]]", shape(t));
    assertEquals(0, t.evictTo(0), "a second release unpins nothing");

    second.release(); // [3, 4] is evictable from now on, [1, 2] still pinned by the branch
    assertEquals("[1 2 (locked 1) [3 4] [9 (locked 1)]]", shape(t));
    assertEquals(3, t.pinnedTokens());
    assertEquals(2, t.evictTo(0));
    assertEquals("[1 2 9 (locked 1)]", shape(t)); // [1, 2] and [9]: one lease, one last use
    t.checkInvariants();

    branch.release();
    assertEquals("[1 2 9]", shape(t));
    assertEquals(0, t.pinnedTokens());
    t.checkInvariants();
    assertEquals(3, t.evictTo(0));
    assertEquals("", shape(t));
    assertThrows(IllegalStateException.class, second::release);
    assertThrows(IllegalStateException.class, branch::release);
    t.checkInvariants();
  }

  /**
   * A lease that ends inside an edge splits it; its release merges the two again (one last use,
   * no lease), and the prefix is evicted as one leaf with the rest of the edge, from its end.
   */
  @Test
  void releasingALeaseThatSplitAnEdgeJoinsItAgain() {
    ConcurrentPrefixTree t = LruEvictionTest.tree(100);
    t.insert(new int[] {1, 2, 3, 4, 5});
    ConcurrentPrefixTree.Lease lease = t.acquire(new int[] {1, 2, 8});
    assertEquals("[1 2 (locked 1) [3 4 5]]", shape(t));
    assertEquals(3, t.evictTo(0), "the tail, not the leased prefix");
    assertEquals("[1 2 (locked 1)]", shape(t));
    t.insert(new int[] {1, 2, 3, 4, 5}); // the tail again, under the leased prefix
    assertEquals("[1 2 (locked 1) [3 4 5]]", shape(t));
    lease.release();
    assertEquals("[1 2 3 4 5]", shape(t));
    assertEquals(1, t.evictTo(4));
    assertEquals("[1 2 3 4]", shape(t));
    assertEquals(4, t.evictTo(0));
    t.checkInvariants();
  }
}
