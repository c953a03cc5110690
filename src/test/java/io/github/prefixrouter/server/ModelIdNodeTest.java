package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.internal.route.RouterNode;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Two {@link NodeMain} nodes over HTTP: with one model id, a request whose prefix the other
 * holds is forwarded there; with two model ids (two pools that found each other), it is refused
 * there and runs at its origin, and the origin then skips that node ({@code OTHER_MODEL}).
 */
class ModelIdNodeTest {

  private static NodeMain.Running start(String id, String modelId, String seeds) throws Exception {
    return NodeMain.start(NodeOptions.parse(new String[] {"--id", id, "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0", "--policy", "longest-prefix", "--gossip-interval-ms", "50",
        "--model-id", modelId, "--seeds", seeds},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX)));
  }

  private static int[] prompt(int prefixSeed, int question) {
    int[] p = new int[420];
    for (int i = 0; i < 400; i++) {
      p[i] = 1 + (prefixSeed * 7919 + i * 104_729) % 90_000;
    }
    for (int i = 400; i < p.length; i++) {
      p[i] = 95_000 + question * 20 + (i - 400);
    }
    return p;
  }

  private static InferenceResponse ask(NodeMain.Running r, String id, int[] tokens)
      throws Exception {
    return r.node.submit(new InferenceRequest(id, tokens, GenerationParams.greedy(1)))
        .get(60, TimeUnit.SECONDS);
  }

  /** b serves a prompt of this prefix, and a learns by gossip that b holds it. */
  private static void bHolds(NodeMain.Running a, NodeMain.Running b, int prefixSeed)
      throws Exception {
    long before = a.node.stats().replicaBlocks();
    assertEquals("b", ask(b, "warm-" + prefixSeed, prompt(prefixSeed, 0)).servedBy());
    for (int i = 0; i < 400 && a.node.stats().replicaBlocks() < before + 20; i++) {
      Thread.sleep(25);
    }
    assertTrue(a.node.stats().replicaBlocks() >= before + 20, "a learned b's blocks: "
        + a.node.stats());
  }

  @Test
  void nodesOfOneModelIdForwardToEachOther() throws Exception {
    try (NodeMain.Running a = start("a", "pool-model", "");
        NodeMain.Running b = start("b", "pool-model", "a@" + a.transport.localAddress().address())) {
      bHolds(a, b, 1);
      InferenceResponse r = ask(a, "q1", prompt(1, 1));
      assertEquals("b", r.servedBy(), r.toString());
      assertTrue(r.forwarded());
    }
  }

  @Test
  void aNodeOfAnotherModelIdIsRefusedOnceAndThenSkipped() throws Exception {
    try (NodeMain.Running a = start("a", "model-a", "");
        NodeMain.Running b = start("b", "model-b", "a@" + a.transport.localAddress().address())) {
      bHolds(a, b, 2);
      InferenceResponse r = ask(a, "q1", prompt(2, 1));
      assertEquals("a", r.servedBy(), r.toString());
      assertEquals(FallbackCause.PROTOCOL_ERROR, r.fallbackCause(), r.toString());
      assertEquals(1, ((RouterNode) b.node).otherModelRefusals());
      InferenceResponse next = ask(a, "q2", prompt(2, 2));
      assertEquals("a", next.servedBy(), next.toString());
      assertEquals(1, next.attempts(), next.toString());
      assertTrue(next.decision().candidates().stream()
          .anyMatch(c -> c.skipped() == RouteDecision.SkipReason.OTHER_MODEL),
          next.decision().toString());
      assertEquals(1, ((RouterNode) b.node).otherModelRefusals());
      // what a answered is its own engine's: the answer a single engine gives
      assertEquals(Arrays.toString(ask(a, "again", prompt(2, 1)).result().outputTokens()),
          Arrays.toString(r.result().outputTokens()));
    }
  }

  @Test
  void theModelIdDefaultsToTheBaseModelAndNoneTurnsItOff() {
    Map<String, String> env = Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX);
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1"}, env);
    assertEquals(null, o.modelId);
    assertEquals("reference", NodeMain.withModelId(o.config, o.modelId, "reference").modelId());
    assertEquals("", NodeMain.withModelId(o.config, o.modelId, null).modelId(), "none known");
    NodeOptions none = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--model-id", "none"}, env);
    assertEquals("", NodeMain.withModelId(none.config, none.modelId, "reference").modelId());
    NodeOptions given = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--model-id", "llama-3.1-8b@awq"}, env);
    assertEquals("llama-3.1-8b@awq",
        NodeMain.withModelId(given.config, given.modelId, "reference").modelId());
    IllegalArgumentException empty = org.junit.jupiter.api.Assertions.assertThrows(
        IllegalArgumentException.class, () -> NodeOptions.parse(new String[] {"--id", "a",
            "--listen", "h:1", "--model-id", ""}, env));
    assertTrue(empty.getMessage().contains("--model-id must not be empty"), empty.getMessage());
  }

  /**
   * A model id the config refuses is a bad flag, and a base model's name that cannot be one
   * leaves the node without a model id: both made the node fail while starting (status 1, a
   * stack trace), the second whatever the flags, for a server naming its model so.
   */
  @Test
  void aModelIdTheConfigRefusesIsABadFlagAndABaseModelsNameOneIsNone() {
    Map<String, String> env = Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX);
    for (String[] bad : new String[][] {
        {"x".repeat(257), "--model-id must be at most 256 UTF-8 bytes, was 257"},
        {"llama\t8b", "--model-id must be text without control characters, had U+0009"}}) {
      IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(
          IllegalArgumentException.class, () -> NodeOptions.parse(new String[] {"--id", "a",
              "--listen", "h:1", "--model-id", bad[0]}, env));
      assertTrue(e.getMessage().startsWith(bad[1]), e.getMessage());
    }
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--model-id", "x".repeat(256)}, env);
    assertEquals("x".repeat(256), NodeMain.withModelId(o.config, o.modelId, "m").modelId());
    NodeOptions dflt = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1"}, env);
    String longPath = "/models/" + "x".repeat(300);
    assertEquals("", NodeMain.withModelId(dflt.config, dflt.modelId, longPath).modelId());
    assertEquals("", NodeMain.withModelId(dflt.config, dflt.modelId, "a\nb").modelId());
  }
}
