package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
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
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * A transport that waits for the node's stop from inside the node's start or stop of it, on the
 * thread running that call ({@code close()}, or {@code stop().join()}): the stop completes only
 * once that call has returned, so the wait would never end. It fails fast with an
 * {@link IllegalStateException} naming the problem, and the node still stops, whole. Each test
 * runs the node's call on a thread of its own, bounded, so that a wait that never ends fails the
 * test instead of hanging the build.
 */
class StopWaitInsideTransportTest {

  static final Duration BOUND = Duration.ofSeconds(10);

  final SimulatedScheduler sim = new SimulatedScheduler();
  final InMemoryNetwork net = new InMemoryNetwork(sim, 1);
  final AtomicReference<PrefixRouterNode> self = new AtomicReference<>();
  /** Set once the node is asked to stop. */
  final AtomicBoolean stopAsked = new AtomicBoolean();
  final AtomicInteger sentAfterStop = new AtomicInteger();

  /** Node "a", with a peer to gossip with, over a transport whose start and close run these. */
  PrefixRouterNode node(Consumer<PrefixRouterNode> inStart, Consumer<PrefixRouterNode> inClose) {
    Transport t = new ForwardingTransport(net.transport("a")) {
      @Override
      public void start(InboundHandler handler) {
        super.start(handler);
        inStart.accept(self.get());
      }

      @Override
      public void send(PeerAddress to, byte[] payload) {
        if (stopAsked.get()) {
          sentAfterStop.incrementAndGet();
        }
        super.send(to, payload);
      }

      @Override
      public void close() {
        inClose.accept(self.get());
        super.close();
      }
    };
    PrefixRouterNode node = PrefixRouterNode.builder().nodeId("a").transport(t)
        .engine(new RequestLifecycleTest.CountingEngine()).clock(sim).scheduler(sim)
        .random(new SplittableRandom(1)).seeds(List.of(InMemoryNetwork.addressOf("b")))
        .build();
    self.set(node);
    return node;
  }

  /** The node stopped whole: its stop complete, no gossip sent and no timer left after it. */
  void stoppedWhole(PrefixRouterNode node) {
    assertEquals(PrefixRouterNode.State.STOPPED, node.state());
    assertTrue(node.stop().isDone(), "the stop's future is not complete");
    sim.advanceBy(Duration.ofSeconds(10).toNanos());
    assertEquals(0, sentAfterStop.get(), "gossip messages sent by a stopped node");
    assertEquals(0, sim.pendingTasks(), "timers left by a stopped node");
  }

  @Test
  void aCloseInsideTheTransportsStartFailsFastAndTheNodeStops() {
    PrefixRouterNode node = node(n -> {
      stopAsked.set(true);
      n.close();
    }, n -> { });
    IllegalStateException e = assertTimeoutPreemptively(BOUND,
        () -> assertThrows(IllegalStateException.class, node::start),
        "start() never returned: the close() its transport called inside it waits for ever");
    assertTrue(e.getMessage().contains("Transport.start"), e.getMessage());
    stoppedWhole(node);
  }

  /** A transport that catches the failure: its start returns, and the node stops then. */
  @Test
  void aStopJoinedInsideTheTransportsStartFailsFastAndTheNodeStopsWhenItReturns() {
    AtomicReference<Throwable> joined = new AtomicReference<>();
    PrefixRouterNode node = node(n -> {
      stopAsked.set(true);
      CompletableFuture<Void> stop = n.stop();
      try {
        stop.join();
      } catch (Throwable e) {
        joined.set(e);
      }
      assertTrue(!stop.isDone(), "the stop completed before the transport's start returned");
    }, n -> { });
    assertTimeoutPreemptively(BOUND, node::start,
        "start() never returned: the stop its transport joined inside it waits for ever");
    assertTrue(joined.get() instanceof IllegalStateException, String.valueOf(joined.get()));
    stoppedWhole(node);
  }

  /** What follows the stop completes after it: a wait for it there fails fast too. */
  @Test
  void aWaitForWhatFollowsTheStopInsideTheTransportsStartFailsFast() {
    AtomicReference<Throwable> joined = new AtomicReference<>();
    PrefixRouterNode node = node(n -> {
      stopAsked.set(true);
      try {
        n.stop().thenApply(v -> "stopped").get();
      } catch (Throwable e) {
        joined.set(e);
      }
    }, n -> { });
    assertTimeoutPreemptively(BOUND, node::start,
        "start() never returned: the wait inside its transport's start never ends");
    assertTrue(joined.get() instanceof IllegalStateException, String.valueOf(joined.get()));
    stoppedWhole(node);
  }

  @Test
  void aCloseInsideTheTransportsCloseFailsFastAndTheNodeStops() {
    AtomicReference<Throwable> closing = new AtomicReference<>();
    PrefixRouterNode node = node(n -> { }, n -> {
      try {
        n.close();
      } catch (Throwable e) {
        closing.set(e);
        throw e;
      }
    });
    node.start();
    stopAsked.set(true);
    CompletableFuture<Void> stop = assertTimeoutPreemptively(BOUND, () -> node.stop(),
        "stop() never returned: the close() the transport's close called waits for ever");
    assertTrue(closing.get() instanceof IllegalStateException, String.valueOf(closing.get()));
    assertTrue(closing.get().getMessage().contains("Transport.close"),
        closing.get().getMessage());
    assertTrue(stop.isDone(), "the stop's future is not complete");
    stoppedWhole(node);
  }
}
