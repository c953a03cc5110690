package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.Schedulers;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.LoggedLines;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.Test;

/**
 * A host that waits for its last answer and then stops its node with no grace period, while
 * the engine's thread that gave the answer is still returning from completing it, is not told
 * that a function depending on the answered future was still running: it had none. The engine
 * answers on a thread of its own, so the host's {@code get()} returns as the future is
 * completed, before that thread has left the node's code; over many runs the stop comes at that
 * moment in some of them.
 */
class StopRightAfterAnswerTest {

  @Test
  void aStopRightAfterTheLastAnswerReportsNoRunningFunction() throws Exception {
    ExecutorService engineThread = Executors.newSingleThreadExecutor();
    InferenceEngine engine = new InferenceEngine() {
      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest r) {
        return CompletableFuture.supplyAsync(
            () -> new EngineResult(new int[] {7}, "", r.length(), 0, -1, -1), engineThread);
      }
    };
    try (Schedulers.ClosableScheduler scheduler = Schedulers.newSingleThread("stop-after")) {
      InMemoryNetwork net = new InMemoryNetwork(Clock.system(), scheduler, new SplittableRandom(1));
      List<String> lines = LoggedLines.logged("was still running", () -> {
        for (int i = 0; i < 300; i++) {
          PrefixRouterNode node = PrefixRouterNode.builder().nodeId("n" + i)
              .transport(net.transport("n" + i)).engine(engine).config(RouterConfig.defaults())
              .clock(Clock.system()).scheduler(scheduler).random(new SplittableRandom(i)).build();
          node.start();
          node.submit(new InferenceRequest("q" + i, new int[] {1, 2, 3}, GenerationParams.greedy(1)))
              .join();
          node.stop(Duration.ZERO).join();
        }
      });
      assertEquals(List.of(), lines, "no function depended on the answered futures");
    } finally {
      engineThread.shutdownNow();
    }
  }
}
