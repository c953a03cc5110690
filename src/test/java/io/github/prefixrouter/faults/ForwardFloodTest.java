package io.github.prefixrouter.faults;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.testing.SimulatedEngine;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * A flood of forwarded work aimed at one node whose advertised load its peers never see (their
 * view claims it is idle and holds every prefix): it must refuse above its high watermark
 * instead of queueing without bound, and the origins must fall back and still answer every
 * request correctly.
 */
class ForwardFloodTest {

  @Test
  void aHotNodeRefusesAboveItsHighWatermarkAndOriginsFallBack() {
    int low = 2;
    int high = 4;
    RouterConfig config = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .coldPlacement(false).watermarks(low, high).busyCooldown(Duration.ofMillis(50))
        .forwardTimeout(Duration.ofSeconds(30), Duration.ofSeconds(120)).build();
    List<String> ids = List.of("hot", "o1", "o2", "o3", "o4", "o5", "o6");
    // the origins cache nothing, so the hot node always looks like the best place
    ScriptedCluster c = new ScriptedCluster(config, 42, ids,
        java.util.Map.of("hot", e -> e.prefillOverheadNanos(40_000_000L)),
        e -> e.prefillOverheadNanos(40_000_000L).capacityTokens(0)).start();
    int[] prefix = ScriptedCluster.prompt(1, 512);
    c.warm("hot", prefix);
    for (String o : ids.subList(1, ids.size())) {
      c.sees.get(o).add("hot");
    }
    SimulatedEngine hot = c.engines.get("hot");
    int[] maxQueue = new int[1];
    // sample the hot engine's queue every simulated millisecond
    Runnable[] sampler = new Runnable[1];
    sampler[0] = () -> {
      maxQueue[0] = Math.max(maxQueue[0], hot.load().queueDepth());
      c.clock.schedule(1_000_000L, sampler[0]);
    };
    c.clock.schedule(0, sampler[0]);

    List<InferenceRequest> reqs = new ArrayList<>();
    List<CompletableFuture<InferenceResponse>> futures = new ArrayList<>();
    int total = 300;
    for (int i = 0; i < total; i++) {
      int[] t = new int[prefix.length + 8];
      System.arraycopy(prefix, 0, t, 0, prefix.length);
      for (int k = 0; k < 8; k++) {
        t[prefix.length + k] = (i * 31 + k) % ScriptedCluster.VOCABULARY;
      }
      InferenceRequest r = new InferenceRequest("f" + i, t, GenerationParams.greedy(1));
      reqs.add(r);
      String origin = ids.get(1 + i % (ids.size() - 1));
      CompletableFuture<InferenceResponse> f = new CompletableFuture<>();
      futures.add(f);
      // one request every 5 ms: eight times what the hot node can serve
      c.clock.schedule(i * 5_000_000L, () -> c.nodes.get(origin).submit(r).whenComplete(
          (resp, err) -> {
            if (err != null) {
              f.completeExceptionally(err);
            } else {
              f.complete(resp);
            }
          }));
    }
    c.clock.runUntil(() -> futures.stream().allMatch(CompletableFuture::isDone),
        c.sim.nanoTime() + 3_600_000_000_000L, 10_000_000L);

    int servedByHot = 0;
    for (int i = 0; i < total; i++) {
      InferenceResponse resp = futures.get(i).join();
      assertArrayEquals(ScriptedCluster.expected(reqs.get(i)), resp.result().outputTokens());
      servedByHot += resp.servedBy().equals("hot") ? 1 : 0;
    }
    NodeStats hs = c.nodes.get("hot").stats();
    long pushedBack = 0;
    long busyFallbacks = 0;
    long local = 0;
    for (String o : ids.subList(1, ids.size())) {
      NodeStats s = c.nodes.get(o).stats();
      pushedBack += s.pushedBack();
      busyFallbacks += s.fallbacks().get(FallbackCause.BUSY);
      local += s.servedLocally();
    }
    System.out.printf("flood: %d requests, hot served %d, refused %d, max queue %d (high %d), "
        + "origins ran %d locally%n", total, servedByHot, hs.refusedForPeers(), maxQueue[0],
        high, local);
    assertTrue(maxQueue[0] <= high, "hot queued " + maxQueue[0] + " > high watermark " + high);
    assertTrue(hs.refusedForPeers() > 0, "hot never pushed back");
    assertEquals(hs.refusedForPeers(), pushedBack, "every refusal reaches an origin as BUSY");
    assertEquals(pushedBack, busyFallbacks);
    assertTrue(local > 0, "origins must fall back to local execution");
    assertTrue(servedByHot > high, "the hot node keeps serving while it pushes back");
    assertEquals(servedByHot, hs.servedForPeers());
    assertEquals(total, servedByHot + local);
    assertTrue(c.clock.escaped().isEmpty(), c.clock.escaped()::toString);
  }
}
