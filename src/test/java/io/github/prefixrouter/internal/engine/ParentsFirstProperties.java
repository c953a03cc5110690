package io.github.prefixrouter.internal.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.function.UnaryOperator;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

/**
 * {@link ParentsFirst} on random forests of blocks given in a random order, and on parents that
 * loop.
 */
class ParentsFirstProperties {

  /** A block and its parent (null at a chain's start). */
  record Node(int id, Node parent) {}

  @Property(tries = 200)
  void everyBlockComesOnceAndAfterItsParent(@ForAll @IntRange(min = 0, max = 300) int size,
      @ForAll long seed) {
    Random random = new Random(seed);
    List<Node> nodes = new ArrayList<>();
    for (int i = 0; i < size; i++) {
      Node parent = nodes.isEmpty() || random.nextInt(4) == 0 ? null
          : nodes.get(random.nextInt(nodes.size()));
      nodes.add(new Node(i, parent));
    }
    Collections.shuffle(nodes, random);
    List<Node> ordered = ParentsFirst.order(nodes, Node::parent);
    assertEquals(new HashSet<>(nodes), new HashSet<>(ordered));
    assertEquals(nodes.size(), ordered.size());
    Set<Node> seen = new HashSet<>();
    for (Node n : ordered) {
      assertTrue(n.parent() == null || seen.contains(n.parent()), n + " before its parent");
      seen.add(n);
    }
  }
  /** A block whose parent is set after it is made, so that parents can loop. */
  static final class Looped {
    final int id;
    Looped parent;

    Looped(int id) {
      this.id = id;
    }

    @Override
    public String toString() {
      return "block " + id;
    }
  }

  /**
   * {@code parentOf} asked at most a bound of times: parents that loop sent the walk up round
   * and round, growing its list until the heap ran out.
   */
  static UnaryOperator<Looped> bounded(int calls) {
    int[] n = {0};
    return b -> {
      if (++n[0] > calls) {
        throw new AssertionError("parentOf asked over " + calls + " times: the walk loops");
      }
      return b.parent;
    };
  }

  @Example
  void aBlockItsOwnParentComesOnce() {
    Looped a = new Looped(0);
    a.parent = a;
    Looped b = new Looped(1);
    b.parent = a;
    List<Looped> ordered = ParentsFirst.order(List.of(b, a), bounded(100));
    assertEquals(List.of(a, b), ordered);
  }

  @Example
  void twoBlocksEachOthersParentComeOnceEach() {
    Looped a = new Looped(0);
    Looped b = new Looped(1);
    a.parent = b;
    b.parent = a;
    Looped c = new Looped(2); // continues the loop
    c.parent = a;
    List<Looped> ordered = ParentsFirst.order(List.of(a, b, c), bounded(100));
    // the walk up from a meets a again: b is placed first, a after it, c after a
    assertEquals(List.of(b, a, c), ordered);
  }

  @Property(tries = 200)
  void parentsThatLoopStillGiveEveryBlockOnce(@ForAll @IntRange(min = 0, max = 200) int size,
      @ForAll long seed) {
    Random random = new Random(seed);
    List<Looped> blocks = new ArrayList<>();
    for (int i = 0; i < size; i++) {
      blocks.add(new Looped(i));
    }
    for (Looped b : blocks) { // any parent at all, itself included
      b.parent = random.nextInt(4) == 0 ? null : blocks.get(random.nextInt(size));
    }
    Collections.shuffle(blocks, random);
    List<Looped> ordered = ParentsFirst.order(blocks, bounded(2 * size));
    assertEquals(size, ordered.size());
    Set<Looped> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    seen.addAll(ordered);
    assertEquals(size, seen.size());
    // a block whose ancestors reach a chain's start comes after its parent, as without loops
    Map<Looped, Integer> at = new IdentityHashMap<>();
    for (int i = 0; i < ordered.size(); i++) {
      at.put(ordered.get(i), i);
    }
    for (Looped b : ordered) {
      if (b.parent != null && reachesAStart(b)) {
        assertTrue(at.get(b.parent) < at.get(b), b + " before its parent");
      }
    }
  }

  private static boolean reachesAStart(Looped b) {
    Set<Looped> passed = Collections.newSetFromMap(new IdentityHashMap<>());
    for (Looped at = b; at != null; at = at.parent) {
      if (!passed.add(at)) {
        return false;
      }
    }
    return true;
  }
}
