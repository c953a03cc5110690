package io.github.prefixrouter;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.LoggedLines;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Test;

/** The public builder and a single node with the real local tree. */
class PrefixRouterNodeTest {

  final SimulatedScheduler sim = new SimulatedScheduler();
  final InMemoryNetwork net = new InMemoryNetwork(sim, 1);

  SimulatedEngine engine(boolean events) {
    return SimulatedEngine.builder().scheduler(sim).publishesCacheEvents(events)
        .vocabularySize(1000).build();
  }

  @Test
  void builderNamesEveryMissingSetting() {
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> PrefixRouterNode.builder().build());
    assertTrue(e.getMessage().contains("nodeId(String)"), e.getMessage());
    assertTrue(e.getMessage().contains("transport(Transport)"), e.getMessage());
    assertTrue(e.getMessage().contains("engine(InferenceEngine)"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> PrefixRouterNode.builder().nodeId("a b"));
    assertThrows(NullPointerException.class, () -> PrefixRouterNode.builder().clock(null));
  }

  /**
   * A node given a scheduler that is also a clock ({@link SimulatedScheduler}) and no clock of
   * its own reads time from that scheduler, as {@code SimulatedEngine} does: before, it read the
   * system clock while its timers ran in simulated time, so its gossip generation came from the
   * machine's uptime and a peer cut off for a simulated minute was still counted live.
   */
  @Test
  void aSchedulerThatIsAClockIsTheClockWhenNoneIsGiven() {
    sim.advanceBy(5_000_000_000L);
    PrefixRouterNode a = PrefixRouterNode.builder().nodeId("a").transport(net.transport("a"))
        .engine(engine(false)).scheduler(sim).random(new SplittableRandom(1)).build();
    PrefixRouterNode b = PrefixRouterNode.builder().nodeId("b").transport(net.transport("b"))
        .engine(engine(false)).scheduler(sim).random(new SplittableRandom(2))
        .seeds(List.of(InMemoryNetwork.addressOf("a"))).build();
    a.start();
    b.start();
    assertEquals(5_000_001, a.stats().gossip().generation(),
        "the generation is the simulated clock's reading in microseconds, plus 1");
    sim.advanceBy(2_000_000_000L);
    assertEquals(1, a.stats().peersLive(), "a knows b");
    net.crash("b");
    sim.advanceBy(60_000_000_000L);
    assertEquals(0, a.stats().peersLive(),
        "b, silent for a simulated minute (peerDeadAfter 10 s), is dead to a");
    a.stop();
    sim.runUntilIdle(10_000);
  }

  /** A clock given is the node's clock, also with a scheduler that is a clock itself. */
  @Test
  void aClockGivenIsTheClockWhateverTheScheduler() {
    sim.advanceBy(5_000_000_000L);
    PrefixRouterNode a = PrefixRouterNode.builder().nodeId("a").transport(net.transport("a"))
        .engine(engine(false)).scheduler(sim).clock(() -> sim.nanoTime() + 4_000_000_000L)
        .random(new SplittableRandom(1)).build();
    a.start();
    assertEquals(9_000_001, a.stats().gossip().generation(),
        "the generation is the given clock's reading in microseconds, plus 1");
    a.stop();
    sim.runUntilIdle(10_000);
  }

  @Test
  void engineDrivenModeDemandedOfASilentEngineIsRejected() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> PrefixRouterNode.builder().nodeId("a").transport(net.transport("a"))
            .engine(engine(false)).clock(sim).scheduler(sim)
            .config(RouterConfig.builder().treeMode(RouterConfig.TreeMode.ENGINE_DRIVEN).build())
            .build());
    assertTrue(e.getMessage().contains("ENGINE_DRIVEN"), e.getMessage());
  }

  /**
   * {@code InferenceEngine.setCacheEventListener}: the node hands its listener over once, when
   * it is built (before {@code start()} and any request), and only to run its tree engine-driven:
   * a node configured {@code SELF_MANAGED} never calls it, whatever the engine publishes.
   */
  @Test
  void theEngineGetsTheListenerWhenTheNodeIsBuiltAndOnlyForAnEngineDrivenTree() {
    for (RouterConfig.TreeMode mode : RouterConfig.TreeMode.values()) {
      java.util.concurrent.atomic.AtomicInteger calls =
          new java.util.concurrent.atomic.AtomicInteger();
      io.github.prefixrouter.spi.InferenceEngine publishing =
          new io.github.prefixrouter.testing.ForwardingEngine(engine(true)) {
            @Override
            public boolean publishesCacheEvents() {
              return true;
            }

            @Override
            public void setCacheEventListener(io.github.prefixrouter.spi.CacheEventListener l) {
              calls.incrementAndGet();
              delegate.setCacheEventListener(l);
            }
          };
      String id = "m-" + mode.name().toLowerCase(java.util.Locale.ROOT).replace('_', '-');
      PrefixRouterNode node = PrefixRouterNode.builder().nodeId(id).transport(net.transport(id))
          .engine(publishing).clock(sim).scheduler(sim).random(new SplittableRandom(1))
          .config(RouterConfig.builder().treeMode(mode).build())
          .build();
      assertEquals(mode == RouterConfig.TreeMode.SELF_MANAGED ? 0 : 1, calls.get(), mode.name());
      assertEquals(mode != RouterConfig.TreeMode.SELF_MANAGED,
          node.cacheEventStats().isPresent(), mode.name());
      node.start();
      node.stop();
      sim.runUntilIdle(100_000);
      assertEquals(mode == RouterConfig.TreeMode.SELF_MANAGED ? 0 : 1, calls.get(), mode.name());
    }
  }

  /**
   * {@code RouterConfig.blockSize} other than the engine's (a {@code SimulatedEngine} stores
   * blocks of 16 tokens): the engine-driven tree mirrors none of its stores, and says so at
   * ERROR, naming the node and both sizes (the line named no node, so that of several nodes in
   * one process the one at fault could not be told). It stayed empty, the stores counted only
   * in malformedEvents.
   */
  @Test
  void aBlockSizeOtherThanTheEnginesIsLoggedAtError() {
    List<String> lines = LoggedLines.logged("ConcurrentPrefixTree", () -> {
      PrefixRouterNode node = PrefixRouterNode.builder().nodeId("b32")
          .transport(net.transport("b32")).engine(engine(true)).clock(sim).scheduler(sim)
          .random(new SplittableRandom(1))
          .config(RouterConfig.builder().blockSize(32)
              .treeMode(RouterConfig.TreeMode.ENGINE_DRIVEN).build())
          .build();
      node.start();
      int[] tokens = new int[100];
      Arrays.setAll(tokens, i -> (i * 7) % 1000);
      CompletableFuture<InferenceResponse> f = node.submit(InferenceRequest.of("r", tokens));
      sim.runUntilIdle(100_000);
      assertEquals("b32", f.join().servedBy());
      assertEquals(0, node.stats().localCachedTokens(), "the engine's 6 blocks are not mirrored");
      assertEquals(1, node.cacheEventStats().orElseThrow().malformedEvents());
      node.stop();
      sim.runUntilIdle(100_000);
    });
    assertEquals(List.of("[" + Thread.currentThread().getName() + "] ERROR "
        + "io.github.prefixrouter.internal.tree.ConcurrentPrefixTree - node b32: the engine "
        + "stores blocks of 16 tokens, the tree's block size is 32: RouterConfig.blockSize must "
        + "equal the engine's KV block size; such stores cannot be mirrored and are dropped (1 so "
        + "far, counted in malformedEvents)"), lines,
        "what the node's tree logs of an engine of block size 16 under blockSize 32");
  }

  /**
   * An engine that publishes cache events takes one listener, so one engine-driven node: a
   * second node built on it, while the first runs or after it stopped, fails in {@code build()}
   * with the engine's {@code IllegalStateException}, and the first node goes on as before.
   */
  @Test
  void aSecondNodeOnAnEngineThatPublishesCacheEventsIsRefusedAtBuild() {
    SimulatedEngine engine = engine(true);
    PrefixRouterNode first = PrefixRouterNode.builder().nodeId("first")
        .transport(net.transport("first")).engine(engine).clock(sim).scheduler(sim)
        .random(new SplittableRandom(1)).build();
    first.start();
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> PrefixRouterNode.builder().nodeId("second").transport(net.transport("second"))
            .engine(engine).clock(sim).scheduler(sim).random(new SplittableRandom(2)).build(),
        "a second node built on the engine of a running one");
    assertEquals("the cache event listener is already set", e.getMessage());
    int[] tokens = new int[100];
    Arrays.setAll(tokens, i -> (i * 7) % 1000);
    CompletableFuture<InferenceResponse> f = first.submit(InferenceRequest.of("r", tokens));
    sim.runUntilIdle(100_000);
    assertEquals("first", f.join().servedBy());
    assertEquals(96, first.stats().localCachedTokens(), "the first node still mirrors the engine");
    CompletableFuture<Void> stop = first.stop();
    sim.runUntilIdle(100_000);
    assertTrue(stop.isDone());
    e = assertThrows(IllegalStateException.class,
        () -> PrefixRouterNode.builder().nodeId("third").transport(net.transport("third"))
            .engine(engine).clock(sim).scheduler(sim).random(new SplittableRandom(3)).build(),
        "a node built on the engine of a stopped one");
    assertEquals("the cache event listener is already set", e.getMessage());
  }

  @Test
  void localTreeFollowsTheEngineInBothModes() {
    for (boolean events : new boolean[] {true, false}) {
      String id = events ? "driven" : "self";
      PrefixRouterNode node = PrefixRouterNode.builder().nodeId(id).transport(net.transport(id))
          .engine(engine(events)).clock(sim).scheduler(sim).random(new SplittableRandom(1))
          .build();
      node.start();
      int[] tokens = new int[100];
      Arrays.setAll(tokens, i -> (i * 7) % 1000);
      InferenceRequest r = InferenceRequest.of("r", tokens);
      CompletableFuture<InferenceResponse> f = node.submit(r);
      sim.runUntilIdle(100_000);
      InferenceResponse resp = f.join();
      assertEquals(id, resp.servedBy());
      assertArrayEquals(SimulatedEngine.expectedOutput(tokens, r.params(), 1000),
          resp.result().outputTokens());
      // engine-driven mirrors the engine's 6 whole blocks; self-managed records all 100 tokens
      assertEquals(events ? 96 : 100, node.stats().localCachedTokens(), id);
      assertEquals(events ? 96 : 100, node.explain(r).candidates().get(0).matchedTokens());
      if (events) {
        // the engine's one store of 6 blocks, applied; nothing it could not apply
        assertEquals(new CacheEventStats(1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
            node.cacheEventStats().orElseThrow());
      } else {
        assertTrue(node.cacheEventStats().isEmpty(), "a self-managed tree receives no events");
      }
      CompletableFuture<Void> stop = node.stop();
      sim.runUntilIdle(100_000);
      assertTrue(stop.isDone());
    }
  }

  /**
   * On a {@link SimulatedScheduler}, a request in flight is answered only as the thread driving
   * the scheduler advances it, so the stop waits for that: what {@code close()}'s Javadoc shows
   * (stop, advance until the stop completes, then close) ends with the request answered, and
   * {@code stop(Duration.ZERO)} abandons the request at once, so {@code close()} returns.
   */
  @Test
  void onASimulatedSchedulerTheStopCompletesAsTheTestAdvancesTime() {
    int[] tokens = new int[100];
    Arrays.setAll(tokens, i -> (i * 7) % 1000);
    PrefixRouterNode a = PrefixRouterNode.builder().nodeId("a").transport(net.transport("a"))
        .engine(engine(false)).scheduler(sim).random(new SplittableRandom(1)).build();
    a.start();
    CompletableFuture<InferenceResponse> f = a.submit(InferenceRequest.of("r", tokens));
    CompletableFuture<Void> stopped = a.stop();
    assertFalse(stopped.isDone(), "the stop waits for the request in flight");
    while (!stopped.isDone() && sim.runNext()) {
      // advance until the stop completes
    }
    assertTrue(stopped.isDone(), "the stop did not complete in simulated time");
    a.close();
    assertEquals(PrefixRouterNode.State.STOPPED, a.state());
    assertEquals("a", f.join().servedBy());

    PrefixRouterNode b = PrefixRouterNode.builder().nodeId("b").transport(net.transport("b"))
        .engine(engine(false)).scheduler(sim).random(new SplittableRandom(2)).build();
    b.start();
    CompletableFuture<InferenceResponse> g = b.submit(InferenceRequest.of("r", tokens));
    assertTrue(b.stop(java.time.Duration.ZERO).isDone(), "the request was abandoned at once");
    b.close();
    CompletionException e = assertThrows(CompletionException.class, g::join);
    assertInstanceOf(NodeNotRunningException.class, e.getCause());
  }
}
