package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.internal.tree.EngineEventStats;
import java.lang.ref.WeakReference;
import java.util.Collections;
import java.util.Map;
import java.util.WeakHashMap;

/**
 * The local tree of each node built with the default components, for the node's process to
 * show the tree's own counters (engine events it could not apply, blocks it dropped over its
 * mirror limit) next to the node's. Nodes and trees are held weakly (a node holds its tree, so
 * its tree stays while it does): a node that is no longer referenced leaves no entry behind,
 * whatever its tree's listeners hold.
 */
public final class LocalTrees {

  private static final Map<PrefixRouterNode, WeakReference<ConcurrentPrefixTree>> TREES =
      Collections.synchronizedMap(new WeakHashMap<>());

  private LocalTrees() {}

  static void register(PrefixRouterNode node, ConcurrentPrefixTree tree) {
    TREES.put(node, new WeakReference<>(tree));
  }

  /**
   * The counters of the engine events the node's local tree received, if it is engine-driven.
   *
   * @param node a node
   * @return the counters, or null if the node's tree is self-managed or not the default one
   */
  public static EngineEventStats engineEventStats(PrefixRouterNode node) {
    ConcurrentPrefixTree tree = treeOf(node);
    return tree == null || tree.mode() != ConcurrentPrefixTree.Mode.ENGINE_DRIVEN
        ? null : tree.engineEventStats();
  }

  /**
   * The node's local tree (tests and diagnostics).
   *
   * @param node a node
   * @return its tree, or null if it was not built with the default components
   */
  static ConcurrentPrefixTree treeOf(PrefixRouterNode node) {
    WeakReference<ConcurrentPrefixTree> ref = TREES.get(node);
    return ref == null ? null : ref.get();
  }
}
