package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.sim.DispatchCluster.Dispatcher;
import io.github.prefixrouter.sim.DispatchCluster.View;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.Arrays;
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

    /** Engines of the given profile. */
    FakeView(int n, EngineProfile profile) {
      load = new int[n];
      engines = new SimulatedEngine[n];
      for (int i = 0; i < n; i++) {
        engines[i] = profile.newEngine(sim, i + 1);
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
    int[] req = sharedThenOwn(shared, 80);
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

  private static final long MS = 1_000_000L;

  /** 16-token blocks, 1,024-token caches, one slot, 10 ms + 1 ms per token prefill, 5 ms decode. */
  private static final EngineProfile PROFILE =
      new EngineProfile(16, 16 * 64, 1, 10 * MS, MS, 5 * MS);

  @Test
  void earliestCompletionPicksTheNodeWhereTheRequestEndsFirst() {
    FakeView v = new FakeView(3, PROFILE);
    Dispatcher d = Baselines.earliestCompletion(new SplittableRandom(7), 2 * MS, PROFILE);
    int[] shared = prompt(0, 320);
    v.warm(2, shared);
    int[] req = sharedThenOwn(shared, 80);
    // node 0 (entry): 10 + 400 = 410 ms; node 1: 410 + 4 = 414 ms; node 2, which holds the
    // first 320 tokens: 10 + 80 + 4 = 94 ms
    assertEquals(2, d.choose(0, InferenceRequest.of("x", req), v),
        "an idle holder of the prefix 2 ms away beats a cold entry node");
    // node 2 starts a 300-token miss with 3 output tokens: 10 + 300 + 15 = 325 ms of work, so
    // node 2 costs 325 + 94 = 419 ms against the entry node's 410 ms
    v.engines[2].execute(
        new InferenceRequest("busy", prompt(60_000, 300), GenerationParams.greedy(3)));
    sim.runNext();
    assertEquals(325 * MS, v.engines[2].pendingWorkNanos());
    assertEquals(0, d.choose(0, InferenceRequest.of("x", req), v),
        "the holder's queued work outweighs the prefix it holds");
    // 20 ms later 305 ms are left: 305 + 94 = 399 ms, below 410 again
    sim.advanceTo(sim.nanoTime() + 20 * MS);
    assertEquals(2, d.choose(0, InferenceRequest.of("x", req), v),
        "the holder is chosen again once its work left makes it the earliest");
  }

  /** A prompt of {@code shared} then {@code own} tokens no other prompt of these tests has. */
  private static int[] sharedThenOwn(int[] shared, int own) {
    int[] req = Arrays.copyOf(shared, shared.length + own);
    System.arraycopy(prompt(9000, own), 0, req, shared.length, own);
    return req;
  }

  @Test
  void earliestCompletionKeepsTiesAndSlowLinksOnTheEntryNode() {
    FakeView idle = new FakeView(4, PROFILE);
    Dispatcher noDelay = Baselines.earliestCompletion(new SplittableRandom(7), 0, PROFILE);
    for (int entry = 0; entry < 4; entry++) {
      assertEquals(entry, noDelay.choose(entry, InferenceRequest.of("x", prompt(0, 200)), idle),
          "idle, empty engines cost the same: the entry node keeps the request");
    }
    // one-way 1,000 ms: a forward costs 2 s more, more than any of these prompts' full prefill
    // (at most 10 + 500 ms), so every request stays where it entered, even where a peer holds
    // the prompt's prefix
    FakeView v = new FakeView(4, PROFILE);
    Dispatcher slow = Baselines.earliestCompletion(new SplittableRandom(7), 1000 * MS, PROFILE);
    int[] shared = prompt(0, 480);
    v.warm(3, shared);
    int[] req = sharedThenOwn(shared, 20);
    for (int entry = 0; entry < 3; entry++) {
      assertEquals(entry, slow.choose(entry, InferenceRequest.of("x", req), v),
          "a 2 s round trip never pays for a prefill of at most 510 ms");
    }
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
