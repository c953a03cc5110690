package io.github.prefixrouter.engine.openai;

import static io.github.prefixrouter.testing.LoggedLines.logged;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.spi.EngineException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A node whose tree is self-managed (an OpenAI-compatible server without KV events: llama.cpp,
 * or vLLM without {@code --kv-events}) in front of a server that is killed and started again.
 * The new process's cache is empty; the node's estimate of it, and what it advertises to its
 * peers, must be too.
 */
class EngineRestartNodeTest {

  private static int[] prompt(int first, int length) {
    int[] t = new int[length];
    for (int i = 0; i < length; i++) {
      t[i] = first + i;
    }
    return t;
  }

  @Test
  void aServerThatWentAwayTakesTheSelfManagedTreeWithIt() throws Exception {
    FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO);
    int port = server.port();
    OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(server.baseUrl())
        .requestTimeout(Duration.ofSeconds(20)).build();
    PrefixRouterNode node = LoneNode.started(e, RouterConfig.defaults());
    try {
      int[] before = prompt(1_000, 64);
      node.submit(new InferenceRequest("before", before, GenerationParams.greedy(2)))
          .get(20, TimeUnit.SECONDS);
      NodeStats warm = node.stats();
      assertEquals(64, warm.localCachedTokens(), warm.toString());
      assertEquals(4, warm.localBlocks(), warm.toString());

      // killed: nothing listens on its port, and its cache is gone with the process
      server.close();
      List<String> warned = logged("cache is lost", () -> {
        for (int i = 0; i < 3; i++) {
          InferenceRequest r = new InferenceRequest("down-" + i, prompt(2_000 + 100 * i, 32),
              GenerationParams.greedy(2));
          ExecutionException x = assertThrows(ExecutionException.class,
              () -> node.submit(r).get(20, TimeUnit.SECONDS));
          RequestFailedException failed =
              assertInstanceOf(RequestFailedException.class, x.getCause());
          EngineException refused = assertInstanceOf(EngineException.class, failed.getCause());
          assertTrue(refused.getMessage().contains("server unreachable"), refused.getMessage());
        }
      });
      assertEquals(1, warned.size(), "logged once: " + warned);
      assertTrue(warned.get(0).contains("WARN") && warned.get(0).contains("64 tokens"),
          warned.get(0));
      NodeStats down = node.stats();
      assertEquals(0, down.localCachedTokens(), "the server's connection was refused after it "
          + "had answered (its process gone, and its cache with it), and the node still "
          + "estimates " + down.localCachedTokens() + " tokens cached there and advertises "
          + down.localBlocks() + " blocks to its peers");
      assertEquals(0, down.localBlocks(), down.toString());
      assertEquals(1, node.engineStallStats().orElseThrow().cacheLosses(),
          "one loss, however many requests were refused");

      // started again, its cache empty: the node estimates what it sends it from now on
      server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO, port);
      node.submit(new InferenceRequest("after", prompt(3_000, 32), GenerationParams.greedy(2)))
          .get(20, TimeUnit.SECONDS);
      NodeStats after = node.stats();
      assertEquals(32, after.localCachedTokens(), after.toString());
      assertEquals(2, after.localBlocks(), after.toString());
      assertEquals(1, node.engineStallStats().orElseThrow().cacheLosses());
    } finally {
      node.close();
      e.close();
      server.close();
    }
  }
}
