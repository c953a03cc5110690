package io.github.prefixrouter.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** The README's example, compiled and run so it cannot rot. */
class ReadmeExampleTest {

  @Test
  void aRequestGoesToThePeerThatCachedItsPrefix() throws Exception {
    // --- README example start
    SimulatedScheduler time = new SimulatedScheduler();          // simulated clock + timers
    InMemoryNetwork network = new InMemoryNetwork(time, 42);     // seeded in-memory network
    network.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(2)));

    List<PrefixRouterNode> nodes = new ArrayList<>();
    for (String id : List.of("a", "b", "c")) {
      SimulatedEngine engine = SimulatedEngine.builder()         // stands in for vLLM/SGLang
          .scheduler(time).clock(time).capacityTokens(64_000).build();
      nodes.add(PrefixRouterNode.builder()
          .nodeId(id)
          .config(RouterConfig.defaults())                       // cost-aware routing
          .transport(network.transport(id))
          .engine(engine)
          .clock(time).scheduler(time).random(new SplittableRandom(id.hashCode()))
          .seeds(List.of(InMemoryNetwork.addressOf("a")))
          .build());
    }
    nodes.forEach(PrefixRouterNode::start);

    int[] systemPrompt = new int[2_000];                         // a long shared prefix
    for (int i = 0; i < systemPrompt.length; i++) systemPrompt[i] = 1_000 + i;

    // b serves the first request with this prefix and caches it ...
    CompletableFuture<InferenceResponse> first =
        nodes.get(1).submit(InferenceRequest.of("r1", withQuestion(systemPrompt, 1)));
    time.advanceBy(Duration.ofSeconds(3).toNanos());             // let gossip spread b's summary

    // ... so a request with the same prefix entering at a is forwarded to b.
    CompletableFuture<InferenceResponse> second =
        nodes.get(0).submit(InferenceRequest.of("r2", withQuestion(systemPrompt, 2)));
    time.advanceBy(Duration.ofSeconds(3).toNanos());
    InferenceResponse answer = second.join();
    System.out.println(answer.servedBy() + " " + answer.decision());
    // --- README example end

    assertFalse(first.join().forwarded());
    assertEquals("b", answer.servedBy());
    assertTrue(answer.forwarded());
    assertTrue(answer.cachedPromptTokens() >= 1_984, "cached " + answer.cachedPromptTokens());
    nodes.forEach(n -> n.stop());
    time.advanceBy(Duration.ofSeconds(30).toNanos());
    nodes.forEach(n -> assertEquals(PrefixRouterNode.State.STOPPED, n.state()));
  }

  private static int[] withQuestion(int[] prefix, int question) {
    int[] tokens = new int[prefix.length + 40];
    System.arraycopy(prefix, 0, tokens, 0, prefix.length);
    for (int i = prefix.length; i < tokens.length; i++) tokens[i] = 90_000 + question * 100 + i % 100;
    return tokens;
  }
}
