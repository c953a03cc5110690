package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.internal.gossip.GossipProbe;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import java.lang.reflect.Field;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Reaches the gossip engine and the local prefix index inside a node built by
 * {@link PrefixRouterNode#builder()}, for the fault campaign's exact convergence and credit
 * checks. {@link RouterNode} keeps its peer view and index private, so this reads the fields
 * reflectively; package-private accessors would make it unnecessary.
 */
public final class NodeProbe {

  private NodeProbe() {}

  /** The node's own prefix index (what it credits to its own cache), or null. */
  public static LocalPrefixIndex localIndexOf(PrefixRouterNode node) {
    return (LocalPrefixIndex) fieldOf(node, "local");
  }

  /** Private field {@code name} of a {@link RouterNode}, or null for another node. */
  private static Object fieldOf(PrefixRouterNode node, String name) {
    if (!(node instanceof RouterNode rn)) {
      return null;
    }
    try {
      Field f = RouterNode.class.getDeclaredField(name);
      f.setAccessible(true);
      return f.get(rn);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("RouterNode changed shape: " + e, e);
    }
  }

  /** The demand the node's local caching weighs (its planner's), read without side effects. */
  static LocalDemand demandOf(RouterNode node) {
    try {
      Field f = RoutePlanner.class.getDeclaredField("demand");
      f.setAccessible(true);
      return (LocalDemand) f.get(fieldOf(node, "planner"));
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("RoutePlanner changed shape: " + e, e);
    }
  }

  /** The node's count of routing decisions (a prune of its peer records every 1,024th). */
  static AtomicLong decisionsOf(RouterNode node) {
    return (AtomicLong) fieldOf(node, "decisions");
  }

  /** The library's prefix tree behind the node's own index, or null if it has none. */
  public static ConcurrentPrefixTree treeOf(PrefixRouterNode node) {
    return localIndexOf(node) instanceof TreeIndex t ? t.tree() : null;
  }

  /**
   * The router's index over a prefix tree, as a node built by {@link PrefixRouterNode#builder()}
   * wraps its own (a self-managed tree records the prompts the node executed), for nodes the
   * campaign assembles from a {@link RouterNode} and its components.
   */
  public static LocalPrefixIndex treeIndex(ConcurrentPrefixTree tree) {
    return new TreeIndex(tree);
  }

  /** The node's gossip probe, or null if the node does not run the library's gossip. */
  public static GossipProbe gossipOf(PrefixRouterNode node) {
    if (!(fieldOf(node, "peers") instanceof GossipPeerView g)) {
      return null;
    }
    Object engine = g.engine();
    return engine == null ? null : new GossipProbe(engine);
  }

  /** The node's engine watch, or null. */
  private static EngineWatch watchOf(PrefixRouterNode node) {
    return (EngineWatch) fieldOf(node, "engineWatch");
  }

  /**
   * Whether the node's engine watch holds its engine failing now, read without detecting
   * anything (asking its stats would detect stalls at the caller's times).
   */
  public static boolean engineFailing(PrefixRouterNode node) {
    EngineWatch w = watchOf(node);
    return w != null && w.isFailing();
  }

  /**
   * The runs the node's engine watch counts outstanding (the runs it waits for; not one it gave
   * up at its engine timeout that the engine may still hold), read without side effects.
   */
  public static int engineRunsCounted(PrefixRouterNode node) {
    EngineWatch w = watchOf(node);
    return w == null ? 0 : w.outstandingNow();
  }

  /**
   * Of the node's requests routed around its engine and of its peers' forwards refused for it,
   * those while the engine was failing: {reroutes, refusals}.
   */
  public static long[] failingAvoidance(PrefixRouterNode node) {
    EngineWatch w = watchOf(node);
    return w == null ? new long[2] : new long[] {w.failingReroutes(), w.failingRefusals()};
  }
}
