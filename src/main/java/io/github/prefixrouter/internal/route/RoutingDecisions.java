package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.gossip.GossipEngine;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineLoad;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The routing decision on its own, over a given local tree and gossip engine, for benchmarks
 * and tools that measure or replay decisions without running a node.
 */
public final class RoutingDecisions {

  private RoutingDecisions() {}

  /**
   * A function from a prompt to the decision a node with this tree, gossip state and load would
   * take for it (as {@link io.github.prefixrouter.PrefixRouterNode#explain} does). Thread-safe.
   */
  public static Function<int[], RouteDecision> planner(
      RouterConfig config,
      String localId,
      ConcurrentPrefixTree local,
      GossipEngine gossip,
      Clock clock,
      Supplier<EngineLoad> localLoad) {
    return planner(config, localId, local, gossip, clock, localLoad, true);
  }

  /**
   * Like {@link #planner(RouterConfig, String, ConcurrentPrefixTree, GossipEngine, Clock,
   * Supplier)}; with {@code prefixHashCache} false the decisions hash every prompt from its first
   * block instead of reusing the chain hashes of recently seen prefixes (same decisions; for
   * measuring what the cache saves).
   */
  public static Function<int[], RouteDecision> planner(
      RouterConfig config,
      String localId,
      ConcurrentPrefixTree local,
      GossipEngine gossip,
      Clock clock,
      Supplier<EngineLoad> localLoad,
      boolean prefixHashCache) {
    GossipPeerView peers = new GossipPeerView(() -> gossip, gossip.slotCapacity());
    peers.start();
    RoutePlanner planner = new RoutePlanner(config, localId, new TreeIndex(local),
        new BlockChain(local.hasher()), peers, new CostModel(config.initialPrefillNanosPerToken()),
        new PeerHealth(), clock, localLoad, prefixHashCache);
    return planner::decide;
  }
}
