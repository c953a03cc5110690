package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The node's gossip generation: host-supplied when configured, else from its clock; a clock
 * that throws at build fails the build with a typed error, or gives the reading taken before.
 */
class GossipGenerationTest {

  final SimulatedScheduler sim = new SimulatedScheduler();
  final InMemoryNetwork net = new InMemoryNetwork(sim, 1);

  long generationOf(String id, RouterConfig config) {
    return generationOf(id, config, sim);
  }

  long generationOf(String id, RouterConfig config, Clock clock) {
    PrefixRouterNode node = builder(id).clock(clock).random(new SplittableRandom(1))
        .config(config).build();
    node.start();
    sim.runUntilIdle(1_000);
    long g = NodeProbe.gossipOf(node).generation();
    node.stop();
    sim.runUntilIdle(1_000);
    return g;
  }

  PrefixRouterNode.Builder builder(String id) {
    return PrefixRouterNode.builder().nodeId(id).transport(net.transport(id))
        .engine(SimulatedEngine.builder().scheduler(sim).vocabularySize(100).build())
        .scheduler(sim);
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
  void aClockThatThrowsWhenTheGenerationIsReadGivesTheReadingTakenAtBuild() {
    // old code: the clock's exception escaped build()
    sim.advanceBy(5_000_000_000L);
    Clock clock = () -> {
      if (StackWalker.getInstance().walk(st -> st.anyMatch(
          f -> f.getClassName().equals(DefaultComponents.class.getName())
              && f.getMethodName().equals("generation")))) {
        throw new ArithmeticException("the clock failed");
      }
      return sim.nanoTime();
    };
    long g = generationOf("d", RouterConfig.defaults(), clock);
    assertTrue(g >= 5_000_001 && g < 6_000_000, "generation " + g);
  }

  @Test
  void aClockThatThrowsAtBuildFailsTheBuildWithATypedError() {
    // old code: the clock's own exception escaped build(), a bare ArithmeticException
    Clock broken = () -> {
      throw new ArithmeticException("the clock failed");
    };
    for (boolean seeded : new boolean[] {true, false}) {
      PrefixRouterNode.Builder b = builder(seeded ? "e" : "f").clock(broken);
      if (seeded) {
        b.random(new SplittableRandom(1)); // else the clock seeds the random source
      }
      Throwable t = assertThrows(Throwable.class, b::build);
      assertInstanceOf(IllegalStateException.class, t, "a clock that throws at build (random "
          + (seeded ? "given" : "from the clock") + "): " + t);
      assertTrue(t.getMessage().contains("clock"), t.getMessage());
      assertInstanceOf(ArithmeticException.class, t.getCause());
    }
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
