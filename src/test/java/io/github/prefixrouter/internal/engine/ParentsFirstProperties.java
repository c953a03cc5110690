package io.github.prefixrouter.internal.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

/** {@link ParentsFirst} on random forests of blocks given in a random order. */
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
}
