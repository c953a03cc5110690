package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A node's child table where linear probing wraps around: a first token whose home is the last
 * slot, taken, goes to slot 0, and one whose home is slot 0 is pushed on to slot 1. Lookups,
 * inserts and removals must follow the probe sequence across the end of the table.
 */
class ChildTableTest {

  private static final int LEN = 8;

  /** The {@code nth} token id from 1 up whose home slot in a table of {@code len} is slot. */
  static int keyWithHome(int slot, int len, int nth) {
    for (int k = 1, found = 0; ; k++) {
      if (ConcurrentPrefixTree.slot(k, len) == slot && found++ == nth) {
        return k;
      }
    }
  }

  /**
   * A tree (capacity 100) holding a one-token child for each of {@code others}, then for each of
   * {@code then}, inserted in that order (so the least recently used first).
   */
  private static ConcurrentPrefixTree treeOf(int[] others, int... then) {
    ConcurrentPrefixTree t = LruEvictionTest.tree(100);
    for (int k : others) {
      t.insert(new int[] {k});
    }
    for (int k : then) {
      t.insert(new int[] {k});
    }
    return t;
  }

  /** The first token of the child in each slot of the root's table, null for a free slot. */
  private static Integer[] slots(ConcurrentPrefixTree t) {
    ConcurrentPrefixTree.Node[] kids = t.rootForTest().kids;
    Integer[] out = new Integer[kids.length];
    for (int i = 0; i < kids.length; i++) {
      out[i] = kids[i] == null ? null : kids[i].edge[0];
    }
    return out;
  }

  /**
   * Six children of the root in a table of 8 slots, three with homes 2, 3 and 4, then a and b
   * with home 7 (b wraps to slot 0) and c with home 0 (pushed on to slot 1). Each is found; a
   * token with home 7 that is not held is not. Then a, b and c go, oldest first: removing a
   * moves b back across the end of the table to its home and c to its own; removing b leaves c
   * at its home 0.
   */
  @Test
  void aClusterWrappingPastTheLastSlotIsFoundAndShrinksAcrossIt() {
    int a = keyWithHome(7, LEN, 0);
    int b = keyWithHome(7, LEN, 1);
    int c = keyWithHome(0, LEN, 0);
    int absent = keyWithHome(7, LEN, 2);
    int[] others = {keyWithHome(2, LEN, 0), keyWithHome(3, LEN, 0), keyWithHome(4, LEN, 0)};
    ConcurrentPrefixTree t = treeOf(others, a, b, c);
    for (int k : others) {
      t.insert(new int[] {k}); // newer than a, b and c
    }
    Integer o2 = others[0];
    Integer o3 = others[1];
    Integer o4 = others[2];
    assertArrayEquals(new Integer[] {b, c, o2, o3, o4, null, null, a}, slots(t));
    for (int k : List.of(a, b, c, o2, o3, o4)) {
      assertEquals(1, t.match(new int[] {k, 5}), "token " + k);
    }
    assertEquals(0, t.match(new int[] {absent}));
    t.checkInvariants();

    assertEquals(1, t.evictTo(5)); // a, at slot 7: b moves back to 7, then c to 0
    assertArrayEquals(new Integer[] {c, null, o2, o3, o4, null, null, b}, slots(t));
    assertEquals(0, t.match(new int[] {a}));
    assertEquals(1, t.match(new int[] {b}));
    assertEquals(1, t.match(new int[] {c}));
    t.checkInvariants();

    assertEquals(1, t.evictTo(4)); // b, at slot 7: c stays at its home 0
    assertArrayEquals(new Integer[] {c, null, o2, o3, o4, null, null, null}, slots(t));
    assertEquals(1, t.match(new int[] {c}));
    t.checkInvariants();

    assertEquals(1, t.evictTo(3)); // c: three children stay in the table of 8
    assertArrayEquals(new Integer[] {null, null, o2, o3, o4, null, null, null}, slots(t));
    assertEquals(0, t.match(new int[] {c}));
    for (int k : others) {
      assertEquals(1, t.match(new int[] {k}), "token " + k);
    }
    t.checkInvariants();
  }

  /**
   * A child past the end of the table is removed from where it sits (slot 0, home 7) while the
   * one at its home 7 stays, and a child whose home is slot 0 moves into the hole it leaves.
   */
  @Test
  void aChildThatWrappedToSlotZeroIsRemovedThere() {
    int a = keyWithHome(7, LEN, 0);
    int b = keyWithHome(7, LEN, 1);
    int c = keyWithHome(0, LEN, 0);
    int[] others = {keyWithHome(2, LEN, 0), keyWithHome(3, LEN, 0), keyWithHome(4, LEN, 0)};
    ConcurrentPrefixTree t = treeOf(others, a, b, c);
    t.insert(new int[] {a}); // b is now the oldest
    for (int k : others) {
      t.insert(new int[] {k});
    }
    Integer o2 = others[0];
    Integer o3 = others[1];
    Integer o4 = others[2];
    assertArrayEquals(new Integer[] {b, c, o2, o3, o4, null, null, a}, slots(t));
    assertEquals(1, t.evictTo(5)); // b, at slot 0: c moves back to its home 0
    assertArrayEquals(new Integer[] {c, null, o2, o3, o4, null, null, a}, slots(t));
    assertEquals(0, t.match(new int[] {b}));
    assertEquals(1, t.match(new int[] {a}));
    assertEquals(1, t.match(new int[] {c}));
    t.checkInvariants();
    assertEquals(1, t.evictTo(4)); // c, the oldest now: a stays at 7
    assertArrayEquals(new Integer[] {null, null, o2, o3, o4, null, null, a}, slots(t));
    assertEquals(1, t.match(new int[] {a}));
    t.checkInvariants();
  }
}
