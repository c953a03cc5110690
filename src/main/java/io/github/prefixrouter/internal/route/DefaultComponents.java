package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.InferenceEngine;

/** Assembles a node's local tree, block hasher and peer view from its configuration. */
final class DefaultComponents {

  private DefaultComponents() {}

  static RouterNode.Components create(RouterNode node) {
    ConcurrentPrefixTree tree = localTree(node.config(), node.engine());
    if (tree.mode() == ConcurrentPrefixTree.Mode.ENGINE_DRIVEN) {
      node.engine().setCacheEventListener(tree.engineEvents());
    }
    TreeIndex local = new TreeIndex(tree);
    return new RouterNode.Components(local, tree.hasher()::chain, PeerView.NONE);
  }

  /**
   * The local tree in the configured mode: engine-driven when the engine publishes cache events
   * (or the configuration demands it), else self-managed at the configured capacity.
   *
   * @throws IllegalArgumentException if engine-driven mode is demanded of an engine that
   *     publishes no events
   */
  static ConcurrentPrefixTree localTree(RouterConfig config, InferenceEngine engine) {
    boolean publishes = engine.publishesCacheEvents();
    ConcurrentPrefixTree.Mode mode = switch (config.treeMode()) {
      case AUTO -> publishes ? ConcurrentPrefixTree.Mode.ENGINE_DRIVEN
          : ConcurrentPrefixTree.Mode.SELF_MANAGED;
      case ENGINE_DRIVEN -> {
        if (!publishes) {
          throw new IllegalArgumentException("treeMode ENGINE_DRIVEN needs an engine that "
              + "publishes cache events; this engine does not: use AUTO or SELF_MANAGED");
        }
        yield ConcurrentPrefixTree.Mode.ENGINE_DRIVEN;
      }
      case SELF_MANAGED -> ConcurrentPrefixTree.Mode.SELF_MANAGED;
    };
    return ConcurrentPrefixTree.builder().mode(mode).blockSize(config.blockSize())
        .salt(config.hashSalt()).capacityTokens(config.treeCapacityTokens()).build();
  }
}
