package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.sim.DispatchCluster.Dispatcher;
import io.github.prefixrouter.sim.DispatchCluster.View;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

class BaselinesTest {

  private final SimulatedScheduler sim = new SimulatedScheduler();

  /** A view with settable loads over real engines. */
  private final class FakeView implements View {
    final int[] load;
    final SimulatedEngine[] engines;

    FakeView(int n) {
      load = new int[n];
      engines = new SimulatedEngine[n];
      for (int i = 0; i < n; i++) {
        engines[i] = SimulatedEngine.builder().scheduler(sim).capacityTokens(16 * 64).build();
      }
    }

    @Override
    public int nodes() {
      return load.length;
    }

    @Override
    public int outstanding(int node) {
      return load[node];
    }

    @Override
    public SimulatedEngine engine(int node) {
      return engines[node];
    }

    void warm(int node, int[] tokens) {
      CompletableFuture<?> f = engines[node].execute(InferenceRequest.of("w", tokens));
      sim.runUntilIdle(1000);
      assertTrue(f.isDone());
    }
  }

  private static int[] prompt(int base, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = base + i;
    }
    return t;
  }

  @Test
  void chwblIsStickyPerPrefixAndRespectsTheLoadBound() {
    Dispatcher d = Baselines.chwbl(4, 100, 1.25, 64);
    FakeView v = new FakeView(4);
    Map<Integer, Integer> home = new HashMap<>();
    for (int s = 0; s < 200; s++) {
      int[] p = prompt(s * 1000, 100);
      int a = d.choose(0, InferenceRequest.of("a", p), v);
      // same first 64 tokens, different tail: same node
      int[] q = p.clone();
      q[90] = 7;
      assertEquals(a, d.choose(3, InferenceRequest.of("b", q), v));
      home.merge(a, 1, Integer::sum);
    }
    assertEquals(4, home.size(), "keys spread over every node");
    for (int c : home.values()) {
      assertTrue(c > 20, "roughly even spread, got " + home);
    }
    // overload the home node of a key: total 10 -> cap ceil(1.25 * 11 / 4) = 4
    int[] p = prompt(5, 100);
    int h = d.choose(0, InferenceRequest.of("a", p), v);
    v.load[h] = 4;
    v.load[(h + 1) % 4] = 3;
    v.load[(h + 2) % 4] = 3;
    int other = d.choose(0, InferenceRequest.of("a", p), v);
    assertTrue(other != h, "a node at the bound is skipped");
    assertTrue(v.load[other] + 1 <= 4);
  }

  @Test
  void oracleFollowsSglangRules() {
    FakeView v = new FakeView(3);
    Dispatcher d = Baselines.sglangOracle(new SplittableRandom(1), 64, 1.5, 0.3);
    int[] shared = prompt(0, 320);
    v.warm(2, shared);
    int[] req = new int[400];
    System.arraycopy(shared, 0, req, 0, 320);
    System.arraycopy(prompt(9000, 80), 0, req, 320, 80);
    // balanced, 320/400 = 0.8 > 0.3: best match even when it is the busiest
    v.load[0] = 0;
    v.load[1] = 0;
    v.load[2] = 60;
    assertEquals(2, d.choose(0, InferenceRequest.of("x", req), v));
    // imbalanced: max - min = 70 > 64 and 70 > 1.5 * 0: least loaded
    v.load[2] = 70;
    v.load[1] = 5;
    assertEquals(0, d.choose(1, InferenceRequest.of("x", req), v));
    // balanced, no match above the threshold: smallest cache (nodes 0 and 1 are empty), then
    // lower load
    v.load[2] = 0;
    v.load[0] = 2;
    v.load[1] = 1;
    assertEquals(1, d.choose(2, InferenceRequest.of("y", prompt(50_000, 200)), v));
  }

  @Test
  void leastLoadedPrefersTheEntryNodeOnTies() {
    FakeView v = new FakeView(4);
    Dispatcher d = Baselines.leastLoaded(new SplittableRandom(3));
    v.load[0] = 2;
    v.load[1] = 1;
    v.load[2] = 1;
    v.load[3] = 3;
    assertEquals(2, d.choose(2, InferenceRequest.of("x", prompt(0, 10)), v));
    int c = d.choose(0, InferenceRequest.of("x", prompt(0, 10)), v);
    assertTrue(c == 1 || c == 2);
  }

  @Test
  void randomSpreadsUniformly() {
    FakeView v = new FakeView(4);
    Dispatcher d = Baselines.random(new SplittableRandom(5));
    int[] count = new int[4];
    for (int i = 0; i < 4000; i++) {
      count[d.choose(0, InferenceRequest.of("x", prompt(0, 10)), v)]++;
    }
    for (int c : count) {
      assertTrue(c > 850 && c < 1150, List.of(count[0], count[1], count[2], count[3]).toString());
    }
  }
}
