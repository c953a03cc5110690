package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheEventStats;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * A node whose engine publishes the blocks it stores but never a removal (an integration whose
 * BlockRemoved events are lost): the node's tree, its gossiped summary and the peer's replica
 * of it stay within the mirror limit, the most recently stored prompts stay matchable, and the
 * blocks dropped are counted.
 */
class MirrorLimitNodeTest {

  private static final int BLOCK = 16;
  private static final long LIMIT = 1_024; // 64 blocks

  /** Publishes cache events (the test sends them); never asked to run anything here. */
  static final class StoringEngine implements InferenceEngine {
    volatile CacheEventListener listener;

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest request) {
      return CompletableFuture.failedFuture(new IllegalStateException("not in this test"));
    }

    @Override
    public boolean publishesCacheEvents() {
      return true;
    }

    @Override
    public void setCacheEventListener(CacheEventListener listener) {
      this.listener = listener;
    }
  }

  @Test
  void anEngineThatNeverRemovesKeepsTheTreeAndItsSummaryBoundedAndCounted() {
    SimulatedScheduler time = new SimulatedScheduler();
    InMemoryNetwork network = new InMemoryNetwork(time, 7);
    network.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(1)));
    RouterConfig config = RouterConfig.builder().blockSize(BLOCK).treeCapacityTokens(256)
        .mirrorLimitTokens(LIMIT).build();
    StoringEngine engine = new StoringEngine();
    List<PrefixRouterNode> nodes = new ArrayList<>();
    for (String id : List.of("a", "b")) {
      nodes.add(PrefixRouterNode.builder()
          .nodeId(id)
          .config(config)
          .transport(network.transport(id))
          .engine(id.equals("a") ? engine : new StoringEngine())
          .clock(time).scheduler(time).random(new SplittableRandom(id.hashCode()))
          .seeds(List.of(InMemoryNetwork.addressOf("a")))
          .build());
    }
    nodes.forEach(PrefixRouterNode::start);
    PrefixRouterNode a = nodes.get(0);
    PrefixRouterNode b = nodes.get(1);
    assertNotNull(engine.listener, "the node subscribed to its engine's events");
    ConcurrentPrefixTree tree = ((RouterNode) a).localTree();
    assertEquals(LIMIT, tree.mirrorLimitTokens());

    // 200 prompts of 4 blocks each, 12,800 tokens, stored and never removed
    int prompts = 200;
    long engineHash = 1;
    List<long[]> stored = new ArrayList<>();
    for (int p = 0; p < prompts; p++) {
      long[] hashes = {engineHash++, engineHash++, engineHash++, engineHash++};
      engine.listener.onBlocksStored(CacheEventListener.NO_PARENT, hashes, prompt(p));
      stored.add(hashes);
      if (p % 20 == 19) {
        time.advanceBy(Duration.ofMillis(500).toNanos()); // gossip runs meanwhile
        assertTrue(tree.sizeTokens() <= LIMIT, "tree holds " + tree.sizeTokens());
        assertTrue(a.stats().localBlocks() <= LIMIT / BLOCK, a.stats().toString());
      }
    }
    time.advanceBy(Duration.ofSeconds(3).toNanos());

    NodeStats sa = a.stats();
    assertEquals(LIMIT, sa.localCachedTokens());
    assertEquals(LIMIT / BLOCK, sa.localBlocks(), "the summary follows the tree's evictions");
    assertEquals(Set.copyOf(boxed(tree.blockHashes())).size(), (int) sa.localBlocks());
    // the peer's replica of a's summary is just as bounded
    assertEquals(LIMIT / BLOCK, b.stats().replicaBlocks());
    CacheEventStats counted = a.cacheEventStats().orElseThrow();
    assertEquals(prompts * 4L - LIMIT / BLOCK, counted.overflowBlocks());
    assertEquals(prompts - LIMIT / 64, counted.overflows());

    // the 16 prompts stored last are held, whole; the first ones are gone
    assertEquals(64, localMatch(a, prompt(prompts - 1)));
    assertEquals(64, localMatch(a, prompt(prompts - 16)));
    assertEquals(0, localMatch(a, prompt(prompts - 17)));
    assertEquals(0, localMatch(a, prompt(0)));

    // the removals arriving late name dropped blocks: counted, harmless
    for (long[] hashes : stored.subList(0, 10)) {
      engine.listener.onBlocksRemoved(hashes);
    }
    assertEquals(40, a.cacheEventStats().orElseThrow().unknownBlocks());
    assertEquals(LIMIT, a.stats().localCachedTokens());
    tree.checkInvariants();
    nodes.forEach(PrefixRouterNode::close);
  }

  /** Prompt p: 64 tokens no other prompt shares. */
  private static int[] prompt(int p) {
    int[] t = new int[4 * BLOCK];
    for (int i = 0; i < t.length; i++) {
      t[i] = 1_000 + p * 100 + i;
    }
    return t;
  }

  private static int localMatch(PrefixRouterNode node, int[] tokens) {
    RouteDecision d = node.explain(InferenceRequest.of("q", tokens));
    return d.candidates().stream().filter(RouteDecision.Candidate::local).findFirst()
        .orElseThrow().matchedTokens();
  }

  private static List<Long> boxed(long[] a) {
    return Arrays.stream(a).boxed().toList();
  }
}
