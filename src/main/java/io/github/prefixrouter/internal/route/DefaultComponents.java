package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.gossip.GossipConfig;
import io.github.prefixrouter.internal.gossip.GossipEngine;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;

/**
 * Assembles a node: the local tree (engine-driven, fed the engine's cache events; or
 * self-managed, cleared when the engine reports its cache lost), whose block events feed the
 * gossiped local summary; the anti-entropy engine, sending through the node's transport; and
 * the router's view of the peers over it.
 */
final class DefaultComponents {

  private DefaultComponents() {}

  static RouterNode.Components create(RouterNode node) {
    RouterConfig config = node.config();
    ConcurrentPrefixTree tree = localTree(config, node.engine(), node.nodeId());
    if (tree.mode() == ConcurrentPrefixTree.Mode.ENGINE_DRIVEN) {
      node.engine().setCacheEventListener(node.countingProgress(tree.engineEvents()));
    } else {
      // the tree estimates the engine's cache: an engine that finds it lost has it cleared
      node.engine().setCacheLossListener(node::engineCacheLost);
    }
    TreeIndex local = new TreeIndex(tree);
    long generation = generation(node);
    GossipConfig gossipConfig = GossipPeerView.gossipConfig(config); // fails at build if invalid
    GossipPeerView peers = new GossipPeerView(() -> {
      PeerAddress self = node.transport().localAddress();
      if (!self.nodeId().equals(node.nodeId())) {
        throw new IllegalStateException("the transport's address " + self
            + " names another node id than this node's " + node.nodeId());
      }
      GossipEngine gossip = new GossipEngine(self, generation,
          gossipConfig, node.seeds(), node.clock(), node.scheduler(),
          node.random(), node::engineLoad, (to, payload) -> node.transport().send(to, payload));
      gossip.pushBackWhen(node::engineAvoided);
      GossipPeerView.followTree(tree, gossip.localSummary());
      return gossip;
    }, config.maxPeers());
    return new RouterNode.Components(local, new BlockChain(tree.hasher()), peers);
  }

  /**
   * The node's gossip generation: the host-supplied {@link RouterConfig#gossipGeneration()} if
   * set, else microseconds of its clock at build time, at least 1. The clock's value grows
   * across restarts on one machine (a monotonic clock, or simulated time); a restart after a
   * reboot may get a smaller value, which the node mends when peers tell it of the larger one,
   * if that is at most 2^40 above (the gossip layer's largest generation jump), and which peers
   * otherwise accept once the old incarnation is dead and forgotten ({@code peerDeadAfter} and
   * {@code 4 × peerDeadAfter} after its last heartbeat); a host-supplied generation avoids
   * both. The
   * clock is the node's guard of it ({@link io.github.prefixrouter.internal.GuardedClock}),
   * which read it once already: a reading that throws here gives that one.
   */
  static long generation(RouterNode node) {
    long supplied = node.config().gossipGeneration();
    if (supplied > 0) {
      return supplied;
    }
    return Math.max(1L, Math.min(1L << 62, node.clock().nanoTime() / 1_000L + 1));
  }

  /**
   * The local tree in the configured mode: engine-driven when the engine publishes cache events
   * (or the configuration demands it), at most {@link RouterConfig#mirrorLimitTokens()}, else
   * self-managed at the configured capacity; its log lines name the node {@code nodeId}.
   *
   * @throws IllegalArgumentException if engine-driven mode is demanded of an engine that
   *     publishes no events
   */
  static ConcurrentPrefixTree localTree(RouterConfig config, InferenceEngine engine,
      String nodeId) {
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
    ConcurrentPrefixTree.Builder b = ConcurrentPrefixTree.builder().mode(mode)
        .blockSize(config.blockSize()).salt(config.hashSalt())
        .capacityTokens(config.treeCapacityTokens()).nodeId(nodeId);
    if (mode == ConcurrentPrefixTree.Mode.ENGINE_DRIVEN) {
      b.mirrorLimitTokens(config.mirrorLimitTokens());
    }
    return b.build();
  }
}
