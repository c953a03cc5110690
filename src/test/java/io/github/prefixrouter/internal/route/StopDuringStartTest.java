package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * A stop that comes while the node is starting (a host's shutdown hook on another thread, here
 * called from within the transport's start) leaves the node stopped: nothing of the start
 * goes on after it.
 */
class StopDuringStartTest {

  @Test
  void aStopWhileTheTransportStartsLeavesNoGossipRunning() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    AtomicReference<PrefixRouterNode> self = new AtomicReference<>();
    AtomicReference<CompletableFuture<Void>> stop = new AtomicReference<>();
    AtomicInteger sentAfterStop = new AtomicInteger();
    Transport t = new ForwardingTransport(net.transport("a")) {
      @Override
      public void start(InboundHandler handler) {
        super.start(handler);
        stop.set(self.get().stop());
      }

      @Override
      public void send(PeerAddress to, byte[] payload) {
        if (stop.get() != null) {
          sentAfterStop.incrementAndGet();
        }
        super.send(to, payload);
      }
    };
    PrefixRouterNode node = PrefixRouterNode.builder().nodeId("a").transport(t)
        .engine(new RequestLifecycleTest.CountingEngine()).clock(sim).scheduler(sim)
        .random(new SplittableRandom(1)).seeds(List.of(InMemoryNetwork.addressOf("b")))
        .build();
    self.set(node);
    node.start();
    assertTrue(stop.get().isDone(), "the stop finished");
    assertEquals(PrefixRouterNode.State.STOPPED, node.state());
    sim.advanceBy(Duration.ofSeconds(10).toNanos());
    assertEquals(0, sentAfterStop.get(), "gossip messages sent by a stopped node");
    assertEquals(0, sim.pendingTasks(), "timers left by a stopped node");
  }

  @Test
  void aStopOnAnotherThreadCompletesOnceTheStartHasStoppedWhatItStarted() throws Exception {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    CountDownLatch starting = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Transport t = new ForwardingTransport(net.transport("a")) {
      @Override
      public void start(InboundHandler handler) {
        starting.countDown();
        try {
          release.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        super.start(handler);
      }
    };
    PrefixRouterNode node = PrefixRouterNode.builder().nodeId("a").transport(t)
        .engine(new RequestLifecycleTest.CountingEngine()).clock(sim).scheduler(sim)
        .random(new SplittableRandom(1)).seeds(List.of(InMemoryNetwork.addressOf("b")))
        .build();
    Thread starter = new Thread(node::start, "starter");
    starter.setDaemon(true);
    starter.start();
    starting.await();
    CompletableFuture<Void> stopped;
    try {
      stopped = node.stop();
      assertTrue(!stopped.isDone(), "a stop finished before the transport it closes was started");
    } finally {
      release.countDown();
    }
    stopped.get(10, TimeUnit.SECONDS);
    starter.join(10_000);
    assertEquals(PrefixRouterNode.State.STOPPED, node.state());
    assertEquals(0, sim.pendingTasks(), "timers left by a stopped node");
  }

  @Test
  void aStopWhileTheTransportFailsToStartLeavesTheNodeStopped() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    AtomicReference<PrefixRouterNode> self = new AtomicReference<>();
    Transport t = new ForwardingTransport(net.transport("a")) {
      @Override
      public void start(InboundHandler handler) {
        self.get().stop();
        throw new IllegalStateException("the transport was closed while it started");
      }
    };
    PrefixRouterNode node = PrefixRouterNode.builder().nodeId("a").transport(t)
        .engine(new RequestLifecycleTest.CountingEngine()).clock(sim).scheduler(sim)
        .random(new SplittableRandom(1)).build();
    self.set(node);
    org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class, node::start);
    assertTrue(node.stop().isDone());
    assertEquals(PrefixRouterNode.State.STOPPED, node.state(),
        "a stopped node that says it is still stopping");
  }
}
