package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.internal.gossip.GossipProbe;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * An engine that publishes cache events tells the node of the blocks it holds already when the
 * node sets its listener, at build time; gossip starts later, with the node. The blocks the
 * local tree holds when gossip starts must be published too, or peers never learn of them.
 */
class WarmCacheGossipTest {

  final SimulatedScheduler sim = new SimulatedScheduler();
  final InMemoryNetwork net = new InMemoryNetwork(sim, 1);

  PrefixRouterNode node(String id, SimulatedEngine engine, List<String> seeds) {
    return PrefixRouterNode.builder().nodeId(id).transport(net.transport(id)).engine(engine)
        .clock(sim).scheduler(sim).random(new SplittableRandom(id.hashCode()))
        .seeds(seeds.stream().map(InMemoryNetwork::addressOf).toList()).build();
  }

  @Test
  void blocksCachedBeforeTheNodeStartsAreGossiped() {
    SimulatedEngine warm = SimulatedEngine.builder().scheduler(sim).publishesCacheEvents(true)
        .vocabularySize(1_000).build();
    int[] tokens = new int[160];
    Arrays.setAll(tokens, i -> (i * 7 + 3) % 1_000);
    var done = warm.execute(InferenceRequest.of("warm-up", tokens)); // 10 blocks cached
    sim.runUntilIdle(100_000);
    done.join();
    assertTrue(warm.cachedBlocks() > 0);

    PrefixRouterNode a = node("a", warm, List.of());
    PrefixRouterNode b = node("b", SimulatedEngine.builder().scheduler(sim)
        .publishesCacheEvents(true).vocabularySize(1_000).build(), List.of("a"));
    a.start();
    b.start();
    sim.advanceBy(10_000_000_000L); // ten gossip rounds

    ConcurrentPrefixTree tree = NodeProbe.treeOf(a);
    // the engine cached the warm-up prompt's blocks: the tree must hold exactly their hashes
    long[] cached = tree.hasher().chain(tokens);
    assertEquals(warm.cachedBlocks(), cached.length, "the blocks of the warm-up prompt");
    assertArrayEquals(sorted(cached), sorted(tree.blockHashes()),
        "the tree mirrors the engine's cache");
    long[] held = GossipProbe.fingerprintsOf(cached);
    GossipProbe gossipA = NodeProbe.gossipOf(a);
    assertArrayEquals(held, gossipA.ownBlocks(), "a publishes the blocks its tree holds");
    assertArrayEquals(held, NodeProbe.gossipOf(b).replicaOf("a"), "b's replica of a");
    a.stop();
    b.stop();
    sim.runUntilIdle(100_000);
  }

  private static long[] sorted(long[] a) {
    long[] c = a.clone();
    Arrays.sort(c);
    return c;
  }
}
