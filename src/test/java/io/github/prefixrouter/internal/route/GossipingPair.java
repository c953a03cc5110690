package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouteDecision.SkipReason;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * Two started nodes, "a" and "b", gossiping in simulated time over 1 ms links, "a" with the
 * engine a test gives it: for tests of what "b" learns of "a" by gossip alone.
 */
final class GossipingPair {

  private GossipingPair() {}

  /**
   * Nodes "a" (running {@code engineOfA}) and "b" (a default simulated engine), started, by id.
   *
   * @param sim the simulated clock and scheduler of both
   * @param config the configuration of both
   * @param engineOfA the engine of node "a"
   * @return the nodes by id, "a" first
   */
  static Map<String, PrefixRouterNode> start(SimulatedScheduler sim, RouterConfig config,
      InferenceEngine engineOfA) {
    InMemoryNetwork net = new InMemoryNetwork(sim, 5);
    net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(1)));
    Map<String, PrefixRouterNode> nodes = new LinkedHashMap<>();
    for (String id : List.of("a", "b")) {
      nodes.put(id, PrefixRouterNode.builder().nodeId(id).config(config)
          .transport(net.transport(id))
          .engine(id.equals("a") ? engineOfA : OracleCluster.engineDefaults(sim).build())
          .clock(sim).scheduler(sim).random(new SplittableRandom(id.hashCode()))
          .seeds(List.of(InMemoryNetwork.addressOf("a"))).build());
    }
    nodes.values().forEach(PrefixRouterNode::start);
    return nodes;
  }

  /** Why decision {@code d} skipped node {@code id}; fails the test if it is no candidate. */
  static SkipReason skipOf(String id, RouteDecision d) {
    for (RouteDecision.Candidate c : d.candidates()) {
      if (c.nodeId().equals(id)) {
        return c.skipped();
      }
    }
    throw new AssertionError(id + " is not a candidate of " + d);
  }
}
