package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.LoggedLines;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import org.junit.jupiter.api.Test;

/**
 * A scheduler that refuses the node's guard timers (a host's executor shut down under the
 * running node) costs no request its answer, and is logged as other repeated failures are: the
 * first refusal at ERROR with what was thrown, later ones when their count reaches a power of
 * two, not one line and stack trace per request.
 */
class GuardTimerRefusedLogTest {

  @Test
  void refusedGuardTimersAreLoggedAtEachDoublingOfTheirCount() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    boolean[] shutDown = {false};
    Scheduler refusing = (delayNanos, task) -> {
      if (shutDown[0]) {
        throw new RejectedExecutionException("executor shut down");
      }
      return sim.schedule(delayNanos, task);
    };
    PrefixRouterNode node = PrefixRouterNode.builder().nodeId("n0").transport(net.transport("n0"))
        .engine(SimulatedEngine.builder().scheduler(sim).clock(sim).build())
        .config(RouterConfig.builder().policy(RoutingPolicy.LOCAL_ONLY).build())
        .clock(sim).scheduler(refusing).random(new SplittableRandom(1)).build();
    node.start();
    shutDown[0] = true;
    List<CompletableFuture<InferenceResponse>> answers = new ArrayList<>();
    List<String> lines = LoggedLines.logged("guard timer", () -> {
      for (int i = 0; i < 9; i++) {
        int[] prompt = new int[32];
        for (int k = 0; k < prompt.length; k++) {
          prompt[k] = 100 + 7 * i + k;
        }
        answers.add(node.submit(new InferenceRequest("q" + i, prompt, GenerationParams.greedy(4))));
        sim.advanceBy(Duration.ofSeconds(1).toNanos());
      }
    });
    for (CompletableFuture<InferenceResponse> a : answers) {
      assertTrue(a.isDone() && !a.isCompletedExceptionally(), "answered: " + a);
    }
    assertEquals(4, lines.size(), "logged lines: " + lines);
    assertTrue(lines.get(0).contains("ERROR") && lines.get(0).contains("refused a guard timer")
        && lines.get(0).contains("RejectedExecutionException: executor shut down"), lines.get(0));
    for (int i = 1; i < 4; i++) {
      assertTrue(lines.get(i).contains("refused " + (1 << i) + " guard timers"), lines.get(i));
    }
    node.stop(Duration.ZERO);
    sim.runUntilIdle(100_000);
  }
}
