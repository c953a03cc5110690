package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.LoggedLines;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * An engine that says it publishes cache events but reports none (a host's integration that
 * never wired its cache to the listener) leaves the node's tree empty: its peers never route
 * to its cache, and nothing else shows it but {@code storedEvents} staying 0. The node says so
 * once, after {@link RouterNode#EVENTLESS_RUNS} runs that computed a block or more; an engine
 * that reports its blocks gets no such line.
 */
class SilentCacheEventsTest {

  private static List<String> run(boolean reportsEvents) {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    SimulatedEngine engine = SimulatedEngine.builder().scheduler(sim).clock(sim).build();
    InferenceEngine spi = reportsEvents ? engine : new ForwardingEngine(engine) {
      @Override
      public void setCacheEventListener(CacheEventListener listener) {
        // never wired: the engine reports nothing
      }
    };
    PrefixRouterNode node = PrefixRouterNode.builder().nodeId("n0").transport(net.transport("n0"))
        .engine(spi).clock(sim).scheduler(sim).random(new SplittableRandom(1)).build();
    node.start();
    List<String> lines = LoggedLines.logged("has reported no stored block", () -> {
      for (int i = 0; i < 2 * RouterNode.EVENTLESS_RUNS; i++) {
        int[] prompt = new int[64];
        for (int k = 0; k < prompt.length; k++) {
          prompt[k] = 1000 * i + k;
        }
        node.submit(new InferenceRequest("q" + i, prompt, GenerationParams.greedy(2)));
        sim.advanceBy(Duration.ofSeconds(1).toNanos());
      }
    });
    assertEquals(reportsEvents, node.cacheEventStats().orElseThrow().storedEvents() > 0);
    assertEquals(2L * RouterNode.EVENTLESS_RUNS, node.stats().servedLocally());
    node.stop(Duration.ZERO);
    sim.runUntilIdle(100_000);
    return lines;
  }

  @Test
  void anEngineThatPublishesNoEventsIsReportedOnce() {
    List<String> lines = run(false);
    assertEquals(1, lines.size(), "lines: " + lines);
    assertTrue(lines.get(0).contains("WARN") && lines.get(0).contains("node n0")
        && lines.get(0).contains("publishesCacheEvents()"), lines.get(0));
  }

  @Test
  void anEngineThatPublishesEventsIsNotReported() {
    assertEquals(List.of(), run(true));
  }
}
