package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.LoggedLines;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * An engine whose {@code cancel} throws breaks its contract: its run of the cancelled request
 * goes on, holding a slot, unseen. The node still cancels the request's future, and logs the
 * failure at WARN naming what was thrown, the first time and then each time their count
 * reaches a power of two, as it logs runs that break the engine's contract.
 */
class EngineCancelThrowsTest {

  @Test
  void aCancelThatThrowsIsLoggedAtEachDoublingOfItsCount() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    AtomicInteger cancels = new AtomicInteger();
    SimulatedEngine engine = SimulatedEngine.builder().scheduler(sim).clock(sim).build();
    PrefixRouterNode node = PrefixRouterNode.builder().nodeId("n0").transport(net.transport("n0"))
        .engine(new ForwardingEngine(engine) {
          @Override
          public void cancel(String requestId) {
            cancels.incrementAndGet();
            throw new IllegalStateException("the host's cancel is broken");
          }
        })
        .clock(sim).scheduler(sim).random(new SplittableRandom(1)).build();
    node.start();
    List<String> lines = LoggedLines.logged("its engine's cancel", () -> {
      for (int i = 0; i < 9; i++) {
        int[] prompt = new int[64];
        for (int k = 0; k < prompt.length; k++) {
          prompt[k] = 100 + 7 * i + k;
        }
        CompletableFuture<InferenceResponse> f =
            node.submit(new InferenceRequest("q" + i, prompt, GenerationParams.greedy(200)));
        sim.advanceBy(Duration.ofMillis(5).toNanos());
        assertTrue(f.cancel(true), "q" + i + " was still running");
        assertTrue(f.isCancelled());
      }
    });
    assertEquals(9, cancels.get(), "the node called the engine's cancel for each request");
    assertEquals(9, node.stats().failed());
    assertEquals(4, lines.size(), "logged lines: " + lines);
    assertTrue(lines.get(0).contains("WARN") && lines.get(0).contains("request q0")
        && lines.get(0).contains("IllegalStateException: the host's cancel is broken"),
        lines.get(0));
    for (int i = 1; i < 4; i++) {
      assertTrue(lines.get(i).contains("its engine's cancel has thrown " + (1 << i) + " times"),
          lines.get(i));
    }
    node.stop(Duration.ZERO);
    sim.runUntilIdle(100_000);
  }
}
