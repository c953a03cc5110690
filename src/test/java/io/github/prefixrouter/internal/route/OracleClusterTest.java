package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.tree.BlockHasher;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * The oracle cluster's nodes decide over the prompts they route as a real node's do: the chain
 * their planners see is the prompt's own, so what depends on it (cold placement, local-caching
 * demand per prompt head) does not depend on the decisions made before on the test thread.
 */
class OracleClusterTest {

  @Test
  void eachColdPromptIsPlacedByItsOwnFirstBlock() {
    // nobody holds these prompts and every load is 0: each goes to the rendezvous winner of its
    // first block's hash, as every node computes it. A harness that hashed nothing left the
    // planner whatever hashes an earlier decision on the thread had written: every cold prompt
    // went to one node, which one depending on the tests that ran before
    OracleCluster c = new OracleCluster(4, RouterConfig.defaults(), 1)
        .rtt(Duration.ofMillis(1)).start();
    BlockHasher hasher = new BlockHasher(16, 0);
    List<String> ids = List.of("n0", "n1", "n2", "n3");
    Map<String, Integer> placed = new TreeMap<>();
    for (int seed = 1; seed <= 40; seed++) {
      int[] t = prompt(seed, 256);
      long first = hasher.chain(t)[0];
      String winner = null;
      for (String id : ids) {
        if (winner == null || Long.compareUnsigned(Rendezvous.score(first, Rendezvous.nodeHash(id)),
            Rendezvous.score(first, Rendezvous.nodeHash(winner))) > 0) {
          winner = id;
        }
      }
      RouteDecision d = c.node("n0").explain(
          new InferenceRequest("q" + seed, t, GenerationParams.greedy(4)));
      assertEquals(RouteDecision.Reason.COLD_PLACEMENT, d.reason(), d.toString());
      assertEquals(winner, d.targetNodeId(), "prompt " + seed + ": " + d);
      placed.merge(d.targetNodeId(), 1, Integer::sum);
    }
    assertEquals(4, placed.size(), "40 cold prompts went to " + placed);
  }
}
