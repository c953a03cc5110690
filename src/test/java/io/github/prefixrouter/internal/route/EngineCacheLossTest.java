package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * An engine that reports its whole cache lost (its server's process went away:
 * {@link InferenceEngine#setCacheLossListener}) has its node clear a self-managed tree, the
 * node's estimate of that cache, once per loss: counted, and told to its peers as the tree's
 * clear. A tree that mirrors the engine's own events is left as they made it. Two nodes
 * gossiping in simulated time ({@link GossipingPair}).
 */
class EngineCacheLossTest {

  /** An engine that keeps the loss listener the node gives it, and reports no cache events. */
  static final class LosingEngine extends ForwardingEngine {
    private final boolean publishes;
    volatile Consumer<String> lost;
    int listenersSet;

    LosingEngine(InferenceEngine delegate, boolean publishes) {
      super(delegate);
      this.publishes = publishes;
    }

    @Override
    public boolean publishesCacheEvents() {
      return publishes;
    }

    @Override
    public void setCacheLossListener(Consumer<String> listener) {
      listenersSet++;
      lost = listener;
    }
  }

  private static final long SECOND = 1_000_000_000L;

  private static InferenceResponse run(SimulatedScheduler sim, PrefixRouterNode node,
      InferenceRequest r) {
    CompletableFuture<InferenceResponse> f = node.submit(r);
    sim.runUntilIdle(1_000_000);
    return f.join();
  }

  @Test
  void aLossClearsTheSelfManagedTreeAndThePeersReplicaOfIt() {
    SimulatedScheduler sim = new SimulatedScheduler();
    LosingEngine engine = new LosingEngine(OracleCluster.engineDefaults(sim)
        .publishesCacheEvents(false).build(), false);
    Map<String, PrefixRouterNode> nodes = GossipingPair.start(sim, RouterConfig.defaults(),
        engine);
    PrefixRouterNode a = nodes.get("a");
    PrefixRouterNode b = nodes.get("b");
    assertEquals(1, engine.listenersSet, "a self-managed tree's node listens for losses");
    run(sim, a, InferenceRequest.of("warm", OracleCluster.prompt(1, 160)));
    sim.advanceBy(5 * SECOND);
    NodeStats warm = a.stats();
    assertEquals(160, warm.localCachedTokens());
    assertEquals(10, warm.localBlocks());
    assertEquals(10, NodeProbe.gossipOf(b).replicaOf("a").length, "b learned a's blocks");

    engine.lost.accept("the server went away");
    NodeStats cleared = a.stats();
    assertEquals(0, cleared.localCachedTokens(), cleared.toString());
    assertEquals(0, cleared.localBlocks(), cleared.toString());
    EngineStallStats watch = a.engineStallStats().orElseThrow();
    assertEquals(1, watch.cacheLosses(), watch.toString());
    sim.advanceBy(5 * SECOND);
    assertArrayEquals(new long[0], NodeProbe.gossipOf(b).replicaOf("a"),
        "b's replica of a, told of the clear by gossip");

    // what runs on the new process is recorded again
    run(sim, a, InferenceRequest.of("after", OracleCluster.prompt(2, 32)));
    assertEquals(32, a.stats().localCachedTokens());
    a.stop();
    b.stop();
    sim.runUntilIdle(1_000_000);
  }

  @Test
  void aTreeThatMirrorsTheEnginesEventsIsNotTheLossListenersToClear() {
    SimulatedScheduler sim = new SimulatedScheduler();
    LosingEngine mirrored = new LosingEngine(OracleCluster.engineDefaults(sim).build(), true);
    Map<String, PrefixRouterNode> nodes = GossipingPair.start(sim, RouterConfig.defaults(),
        mirrored);
    assertEquals(0, mirrored.listenersSet, "an engine-driven tree's node set a loss listener");
    assertNull(mirrored.lost);
    nodes.values().forEach(PrefixRouterNode::stop);
    sim.runUntilIdle(1_000_000);

    // the same engine under a node that estimates its cache itself
    SimulatedScheduler sim2 = new SimulatedScheduler();
    LosingEngine estimated = new LosingEngine(OracleCluster.engineDefaults(sim2).build(), true);
    Map<String, PrefixRouterNode> selfManaged = GossipingPair.start(sim2,
        RouterConfig.builder().treeMode(RouterConfig.TreeMode.SELF_MANAGED).build(), estimated);
    assertEquals(1, estimated.listenersSet);
    assertTrue(estimated.lost != null);
    selfManaged.values().forEach(PrefixRouterNode::stop);
    sim2.runUntilIdle(1_000_000);
  }
}
