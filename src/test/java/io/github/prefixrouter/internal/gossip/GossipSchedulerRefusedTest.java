package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.LoggedLines;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.RejectedExecutionException;
import org.junit.jupiter.api.Test;

/**
 * A host's scheduler that starts refusing timers while the node runs (its executor shut down
 * before the node was stopped) ends the node's gossip: its peers then declare it dead. The node
 * says so once, at ERROR, and counts it in {@code internalErrors}, rather than letting its
 * gossip stop unseen.
 */
class GossipSchedulerRefusedTest {

  /** Runs on a simulated scheduler until shut down; then refuses, as an executor does. */
  static final class ShutDownScheduler implements Scheduler {
    final SimulatedScheduler sim;
    volatile boolean shutDown;
    final List<Throwable> thrownByTasks = new ArrayList<>();

    ShutDownScheduler(SimulatedScheduler sim) {
      this.sim = sim;
    }

    @Override
    public Cancellable schedule(long delayNanos, Runnable task) {
      if (shutDown) {
        throw new RejectedExecutionException("executor shut down");
      }
      return sim.schedule(delayNanos, () -> {
        try {
          task.run();
        } catch (Throwable t) { // an executor keeps what a task throws in its future
          thrownByTasks.add(t);
        }
      });
    }
  }

  @Test
  void gossipStoppedByARefusingSchedulerIsLoggedAndCounted() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    ShutDownScheduler refusing = new ShutDownScheduler(sim);
    PrefixRouterNode a = PrefixRouterNode.builder().nodeId("a").transport(net.transport("a"))
        .engine(SimulatedEngine.builder().scheduler(sim).clock(sim).build())
        .clock(sim).scheduler(refusing).random(new SplittableRandom(1))
        .seeds(List.of(InMemoryNetwork.addressOf("b"))).build();
    PrefixRouterNode b = PrefixRouterNode.builder().nodeId("b").transport(net.transport("b"))
        .engine(SimulatedEngine.builder().scheduler(sim).clock(sim).build())
        .clock(sim).scheduler(sim).random(new SplittableRandom(2))
        .seeds(List.of(InMemoryNetwork.addressOf("a"))).build();
    a.start();
    b.start();
    sim.advanceBy(Duration.ofSeconds(2).toNanos());
    long rounds = a.stats().gossip().rounds();
    assertTrue(rounds > 0, "a gossiped before");
    refusing.shutDown = true;
    List<String> lines = LoggedLines.logged("gossip",
        () -> sim.advanceBy(Duration.ofSeconds(2).toNanos()));
    assertEquals(rounds + 1, a.stats().gossip().rounds(), "one more round ran, then none");
    assertEquals(List.of(), refusing.thrownByTasks, "what the node's tasks threw");
    assertEquals(1, lines.stream().filter(l -> l.contains("ERROR")).count(), "lines: " + lines);
    assertTrue(lines.stream().anyMatch(l -> l.contains("ERROR")
        && l.contains("refused the timer of the next gossip round")
        && l.contains("RejectedExecutionException")), "lines: " + lines);
    assertEquals(1, a.stats().gossip().internalErrors());
    b.stop(Duration.ZERO);
    a.stop(Duration.ZERO);
    sim.runUntilIdle(100_000);
  }
}
