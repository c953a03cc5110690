package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The node's gossip generation: host-supplied when configured, else from its clock. */
class GossipGenerationTest {

  final SimulatedScheduler sim = new SimulatedScheduler();
  final InMemoryNetwork net = new InMemoryNetwork(sim, 1);

  long generationOf(String id, RouterConfig config) {
    PrefixRouterNode node = PrefixRouterNode.builder().nodeId(id).transport(net.transport(id))
        .engine(SimulatedEngine.builder().scheduler(sim).vocabularySize(100).build())
        .clock(sim).scheduler(sim).random(new SplittableRandom(1)).config(config).build();
    node.start();
    sim.runUntilIdle(1_000);
    long g = NodeProbe.gossipOf(node).generation();
    node.stop();
    sim.runUntilIdle(1_000);
    return g;
  }

  @Test
  void aHostSuppliedGenerationIsUsedEvenIfTheClockIsLater() {
    sim.advanceBy(5_000_000_000L); // the clock alone would give 5,000,001
    assertEquals(1_234, generationOf("a", RouterConfig.builder().gossipGeneration(1_234).build()));
  }

  @Test
  void withoutOneTheClockInMicrosecondsIsUsed() {
    sim.advanceBy(5_000_000_000L);
    long g = generationOf("b", RouterConfig.defaults());
    assertTrue(g >= 5_000_001 && g < 6_000_000, "generation " + g);
  }

  @Test
  void anOutOfRangeGenerationIsRejected() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> RouterConfig.builder().gossipGeneration(-1).build());
    assertTrue(e.getMessage().contains("gossipGeneration"), e.getMessage());
    assertThrows(IllegalArgumentException.class,
        () -> RouterConfig.builder().gossipGeneration((1L << 62) + 1).build());
  }
}
