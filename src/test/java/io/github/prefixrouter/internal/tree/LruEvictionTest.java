package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import org.junit.jupiter.api.Test;

/**
 * Self-managed eviction, exactly: how many tokens an insert over the capacity evicts, from which
 * leaf, which part of its edge goes, and which blocks are reported evicted.
 *
 * <p>Every tree here counts the changes its writes make (a leaf added or trimmed, two nodes
 * merged, a leaf put in the LRU heap) and throws an assertion once they pass {@value
 * #MAX_CHANGES} in all: an eviction loop that does not end fails its test at once, not at the
 * build's per-test timeout.
 */
class LruEvictionTest {

  /** Far more changes than all the writes of one test here make together. */
  static final int MAX_CHANGES = 1_000;

  /** A self-managed tree of {@code capacity} tokens and block size 2, its writes bounded. */
  static ConcurrentPrefixTree tree(long capacity) {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(capacity).blockSize(2)
        .build();
    int[] changes = {0};
    t.midWriteFaultForTest = () -> {
      if (++changes[0] > MAX_CHANGES) {
        throw new AssertionError("the writes made more than " + MAX_CHANGES
            + " changes: a loop that does not end");
      }
    };
    return t;
  }

  /** Records the block events as "stored [hashes]" and "evicted [hashes]". */
  static final class Events implements BlockEventListener {
    final List<String> log = new ArrayList<>();

    @Override
    public void onStored(long[] hashes) {
      log.add("stored " + Arrays.toString(hashes));
    }

    @Override
    public void onEvicted(long[] hashes) {
      log.add("evicted " + Arrays.toString(hashes));
    }

    @Override
    public void onCleared() {
      log.add("cleared");
    }

    /** The events since the last call. */
    List<String> take() {
      List<String> out = List.copyOf(log);
      log.clear();
      return out;
    }
  }

  static String stored(long... hashes) {
    return "stored " + Arrays.toString(hashes);
  }

  static String evicted(long... hashes) {
    return "evicted " + Arrays.toString(hashes);
  }

  /**
   * The tree's nodes as nested brackets, children by first token, a node's lease count after its
   * tokens: {@code [1 2 (locked 1) [3 4]] [7 8]} is a leased node [1, 2] with a child [3, 4],
   * and a leaf [7, 8].
   */
  static String shape(ConcurrentPrefixTree t) {
    StringBuilder sb = new StringBuilder();
    appendChildren(t.rootForTest(), sb);
    return sb.toString();
  }

  private static void appendChildren(ConcurrentPrefixTree.Node n, StringBuilder sb) {
    List<ConcurrentPrefixTree.Node> kids = Arrays.stream(n.kids).filter(Objects::nonNull)
        .sorted(Comparator.comparingLong(c -> c.edge.length == 0 ? Long.MIN_VALUE : c.edge[0]))
        .toList();
    for (ConcurrentPrefixTree.Node c : kids) {
      if (sb.length() > 0 && sb.charAt(sb.length() - 1) != '[') {
        sb.append(' ');
      }
      sb.append('[');
      for (int i = 0; i < c.edge.length; i++) {
        sb.append(i == 0 ? "" : " ").append(c.edge[i]);
      }
      if (c.locks() > 0) {
        sb.append(" (locked ").append(c.locks()).append(')');
      }
      appendChildren(c, sb);
      sb.append(']');
    }
  }

  /**
   * A tree at its capacity, one token over it: exactly one token goes, the last of the least
   * recently used leaf, with the block it ended; the next insert, two tokens over, takes the
   * same leaf's 4th and 5th tokens, and the block the 4th ended.
   */
  @Test
  void oneTokenOverTheCapacityEvictsTheLastTokenOfTheLeastRecentlyUsedLeaf() {
    ConcurrentPrefixTree t = tree(10);
    Events events = new Events();
    t.addListener(events);
    int[] a = {1, 2, 3, 4, 5, 6};
    int[] b = {7, 8, 9, 10};
    t.insert(a);
    t.insert(b);
    assertEquals(10, t.sizeTokens());
    assertEquals("[1 2 3 4 5 6] [7 8 9 10]", shape(t));
    long[] ca = t.hasher().chain(a);
    events.take();

    t.insert(new int[] {11}); // no block of its own
    assertEquals(10, t.sizeTokens());
    assertEquals("[1 2 3 4 5] [7 8 9 10] [11]", shape(t));
    assertEquals(List.of(evicted(ca[2])), events.take());

    t.insert(new int[] {12, 13}); // one block: a's 4th and 5th tokens go, with its 2nd block
    assertEquals(10, t.sizeTokens());
    assertEquals("[1 2 3] [7 8 9 10] [11] [12 13]", shape(t));
    assertEquals(List.of(stored(t.hasher().chain(new int[] {12, 13})), evicted(ca[1])),
        events.take());
    assertEquals(3, t.match(a));
    assertEquals(4, t.match(b));
    t.checkInvariants();
  }

  /**
   * An insert 7 tokens over the capacity, with a leased prefix in the way: the least recently
   * used leaf, below the leased prefix, goes whole (4 tokens), the leased prefix stays although
   * it is older than the rest, and the next leaf loses exactly its last 3 tokens. Then an insert
   * exactly as long as the excess of the oldest leaf removes that leaf whole, leaving no empty
   * edge behind, and evicts nothing else.
   */
  @Test
  void anInsertOverTheCapacityEvictsWholeLeavesThenTrimsTheNextPastALease() {
    ConcurrentPrefixTree t = tree(12);
    Events events = new Events();
    t.addListener(events);
    int[] a = {1, 2, 3, 4, 5, 6};
    int[] b = {7, 8, 9, 10, 11, 12};
    int[] c = {20, 21, 22, 23, 24, 25, 26};
    int[] d = {30, 31, 32};
    t.insert(a); // use 1
    t.insert(b); // use 2
    ConcurrentPrefixTree.Lease lease = t.acquire(new int[] {1, 2, 99}); // use 3, pins [1, 2]
    assertEquals(2, lease.lockedTokens());
    assertEquals("[1 2 (locked 1) [3 4 5 6]] [7 8 9 10 11 12]", shape(t));
    long[] ca = t.hasher().chain(a);
    long[] cb = t.hasher().chain(b);
    events.take();

    t.insert(c); // use 4: 19 tokens, 7 over
    assertEquals(12, t.sizeTokens());
    assertEquals("[1 2 (locked 1)] [7 8 9] [20 21 22 23 24 25 26]", shape(t));
    assertEquals(List.of(stored(t.hasher().chain(c)), evicted(ca[1], ca[2], cb[1], cb[2])),
        events.take());
    assertEquals(2, t.match(a));
    assertEquals(3, t.match(b));
    assertEquals(7, t.match(c));
    t.checkInvariants();

    t.insert(d); // use 5: 3 over, exactly the length of the oldest unleased leaf [7 8 9]
    assertEquals(12, t.sizeTokens());
    assertEquals("[1 2 (locked 1)] [20 21 22 23 24 25 26] [30 31 32]", shape(t));
    assertEquals(List.of(stored(t.hasher().chain(d)), evicted(cb[0])), events.take());
    assertEquals(0, t.match(b));
    t.checkInvariants();

    // with every other leaf newer, the leased prefix is evictable once released, and first
    lease.release();
    assertEquals(2, t.evictTo(10));
    assertEquals("[20 21 22 23 24 25 26] [30 31 32]", shape(t));
    assertEquals(List.of(evicted(ca[0])), events.take());
    t.checkInvariants();
  }

  /**
   * {@link ConcurrentPrefixTree#evictTo} evicts exactly down to its target, across leaves of
   * several lengths, and reports how many tokens went: never one more or one less.
   */
  @Test
  void evictToStopsExactlyAtItsTarget() {
    ConcurrentPrefixTree t = tree(100);
    Events events = new Events();
    t.addListener(events);
    int[] a = {1, 2, 3};
    int[] b = {4, 5, 6, 7, 8};
    int[] c = {9, 10};
    t.insert(a);
    t.insert(b);
    t.insert(c);
    long[] cb = t.hasher().chain(b);
    events.take();
    assertEquals(0, t.evictTo(10));
    assertEquals(0, t.evictTo(11));
    assertEquals(List.of(), events.take());
    assertEquals(1, t.evictTo(9)); // a's last token, not a block's
    assertEquals("[1 2] [4 5 6 7 8] [9 10]", shape(t));
    assertEquals(List.of(), events.take());
    assertEquals(3, t.evictTo(6)); // the rest of a (2), then b's last token
    assertEquals("[4 5 6 7] [9 10]", shape(t));
    assertEquals(List.of(evicted(t.hasher().chain(a)[0])), events.take());
    assertEquals(5, t.evictTo(1)); // the rest of b (4), then c's last token
    assertEquals("[9]", shape(t));
    assertEquals(List.of(evicted(cb[0], cb[1], t.hasher().chain(c)[0])), events.take());
    assertEquals(1, t.evictTo(0));
    assertEquals("", shape(t));
    assertEquals(0, t.sizeTokens());
    t.checkInvariants();
  }
}
