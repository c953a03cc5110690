package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.EngineResult;
import org.junit.jupiter.api.Test;

/**
 * The answers a node takes as ones an engine could give (docs/routing.md, "Failures and
 * fallbacks"; docs/reliability.md, "Byzantine peers"): the prompt's length or up to 4 more
 * prompt tokens (special tokens a server adds), never fewer; at most {@code maxTokens} outputs;
 * no negative token id. Each bound is checked on both sides.
 */
class CouldAnswerTest {

  private static final InferenceRequest REQUEST =
      new InferenceRequest("q", OracleCluster.prompt(1, 100), GenerationParams.greedy(8));

  private static EngineResult result(int promptTokens, int... out) {
    return new EngineResult(out, "", promptTokens, -1, -1, -1);
  }

  @Test
  void thePromptMayGrowByUpToFourTokensAndNeverShrink() {
    assertTrue(RouterNode.couldAnswer(result(100, 1), REQUEST));
    assertTrue(RouterNode.couldAnswer(result(104, 1), REQUEST));
    assertFalse(RouterNode.couldAnswer(result(105, 1), REQUEST));
    assertFalse(RouterNode.couldAnswer(result(99, 1), REQUEST));
  }

  @Test
  void theOutputMayHaveAtMostMaxTokensOfNoNegativeId() {
    assertTrue(RouterNode.couldAnswer(result(100, 1, 2, 3, 4, 5, 6, 7, 8), REQUEST));
    assertTrue(RouterNode.couldAnswer(result(100), REQUEST));
    assertFalse(RouterNode.couldAnswer(result(100, 1, 2, 3, 4, 5, 6, 7, 8, 9), REQUEST));
    assertFalse(RouterNode.couldAnswer(result(100, 1, -1), REQUEST));
  }
}
