package io.github.prefixrouter.engine.openai;

import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.List;
import java.util.SplittableRandom;

/**
 * A node with no peers around an engine under test, for the tests of what the node makes of
 * the adapter's failures: its requests have nowhere else to go.
 */
final class LoneNode {

  private LoneNode() {}

  /** Builds and starts node "a" with {@code config} around {@code engine}, in simulated time. */
  static PrefixRouterNode started(InferenceEngine engine, RouterConfig config) {
    SimulatedScheduler time = new SimulatedScheduler();
    PrefixRouterNode node = PrefixRouterNode.builder()
        .nodeId("a")
        .config(config)
        .transport(new InMemoryNetwork(time, 1).transport("a"))
        .engine(engine)
        .clock(time).scheduler(time).random(new SplittableRandom(1))
        .seeds(List.of())
        .build();
    node.start();
    return node;
  }
}
