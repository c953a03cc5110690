package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.internal.tree.TreeProbe;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * A self-managed node pins the cached prefix of each request its engine runs, as the engine
 * keeps the blocks of a running request: prompts that run meanwhile and fill the tree do not
 * evict it, and the pin goes when the run ends, whether it answered or failed.
 */
class SelfManagedPinTest {

  static int[] prompt(int family, int length) {
    int[] t = new int[length];
    for (int i = 0; i < length; i++) {
      t[i] = family * 1_000 + i;
    }
    return t;
  }

  @Test
  void aRunningRequestsCachedPrefixOutlivesTheLruUntilItsRunEnds() {
    SimulatedScheduler time = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(time, 1);
    // one slow request at a time would serialise everything: many slots, slow decoding
    SimulatedEngine engine = SimulatedEngine.builder().scheduler(time).clock(time)
        .publishesCacheEvents(false).slots(16).capacityTokens(1 << 20)
        .decodeNanosPerToken(Duration.ofMillis(100).toNanos()).vocabularySize(100_000).build();
    PrefixRouterNode node = PrefixRouterNode.builder().nodeId("a").transport(net.transport("a"))
        .engine(engine).clock(time).scheduler(time).random(new SplittableRandom(1))
        .config(RouterConfig.builder().policy(RoutingPolicy.LOCAL_ONLY)
            .treeCapacityTokens(256).build())
        .build();
    node.start();
    ConcurrentPrefixTree tree = NodeProbe.treeOf(node);

    // 128 tokens of family 1 cached, then a long request continuing them starts
    CompletableFuture<InferenceResponse> warm =
        node.submit(InferenceRequest.of("warm", prompt(1, 128)));
    time.advanceBy(Duration.ofSeconds(1).toNanos());
    assertEquals(128, tree.match(prompt(1, 128)), "cached once answered");
    assertTrue(warm.isDone());
    int[] longRun = prompt(1, 160);
    CompletableFuture<InferenceResponse> running = node.submit(new InferenceRequest("long",
        longRun, io.github.prefixrouter.GenerationParams.greedy(50)));
    time.advanceBy(Duration.ofMillis(50).toNanos());
    assertEquals(128, TreeProbe.pinnedTokens(tree), "the running request's cached prefix");

    // short requests of other families fill the 256-token tree several times over meanwhile
    List<CompletableFuture<InferenceResponse>> others = new ArrayList<>();
    for (int f = 2; f < 10; f++) {
      others.add(node.submit(InferenceRequest.of("o" + f, prompt(f, 96))));
      time.advanceBy(Duration.ofMillis(300).toNanos());
    }
    others.forEach(o -> assertTrue(o.isDone(), "answered"));
    assertTrue(!running.isDone(), "still generating");
    assertEquals(128, tree.match(longRun), "the pinned prefix stayed while the engine used it");

    time.advanceBy(Duration.ofSeconds(10).toNanos());
    assertTrue(running.isDone());
    assertEquals(0, TreeProbe.pinnedTokens(tree), "released when the run ended");
    tree.checkInvariants();
    node.close();
  }
}
