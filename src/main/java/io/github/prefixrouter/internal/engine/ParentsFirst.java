package io.github.prefixrouter.internal.engine;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.function.UnaryOperator;

/**
 * Orders an engine's cached blocks so that every block comes after its parent: the order in
 * which a listener set late is told of them, so that replaying its events gives the cached
 * blocks.
 */
public final class ParentsFirst {

  private ParentsFirst() {}

  /**
   * {@code blocks} with every block after its parent, otherwise in the order given (a block is
   * placed just after its last ancestor not placed yet). Blocks are told apart by identity.
   * Parents that loop (a block its own parent, or its parent's parent...: a corrupt cache or a
   * hash collision) cannot all come first: the loop is cut where the walk up from a block meets
   * a block it passed already, which is then placed as a chain's first, so every block still
   * comes exactly once and the walk ends.
   *
   * @param blocks the cached blocks, whose parents are cached too
   * @param parentOf a block's parent among them, or null for a chain's first block
   * @param <B> the engine's block
   * @return a new list of the same blocks
   */
  public static <B> List<B> order(Collection<B> blocks, UnaryOperator<B> parentOf) {
    List<B> out = new ArrayList<>(blocks.size());
    Set<B> placed = Collections.newSetFromMap(new IdentityHashMap<>());
    List<B> up = new ArrayList<>();
    Set<B> onChain = Collections.newSetFromMap(new IdentityHashMap<>());
    for (B b : blocks) {
      for (B at = b; at != null && !placed.contains(at) && onChain.add(at);
          at = parentOf.apply(at)) {
        up.add(at);
      }
      for (int i = up.size() - 1; i >= 0; i--) {
        placed.add(up.get(i));
        out.add(up.get(i));
      }
      up.clear();
      onChain.clear();
    }
    return out;
  }
}
