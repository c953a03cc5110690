package io.github.prefixrouter.testing;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineResult;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/**
 * Random request mixes against a naive model of the event stream: a plain map from block id to
 * parent id, rebuilt only from the events.
 */
class SimulatedEnginePropertyTest {

  private static final int BLOCK = 4;

  /** One step: submit a prompt of a family (shared prefix) or advance time or cancel. */
  record Step(int kind, int family, int suffixSeed, int length, int outputs, int advance) {}

  @Provide
  Arbitrary<List<Step>> steps() {
    Arbitrary<Step> step =
        Combinators.combine(
                Arbitraries.integers().between(0, 9),
                Arbitraries.integers().between(0, 5),
                Arbitraries.integers().between(0, 3),
                Arbitraries.integers().between(1, 40),
                Arbitraries.integers().between(1, 4),
                Arbitraries.integers().between(0, 30))
            .as(Step::new);
    return step.list().ofMinSize(1).ofMaxSize(60);
  }

  /** The cache scopes requests run in: the same prompts in each (a submitted step's advance picks). */
  static final io.github.prefixrouter.CacheScope[] SCOPES = {
    io.github.prefixrouter.CacheScope.DEFAULT, io.github.prefixrouter.CacheScope.adapter("lora-a"),
    io.github.prefixrouter.CacheScope.salt("tenant-1")
  };

  static io.github.prefixrouter.CacheScope scopeOf(Step s) {
    return SCOPES[s.advance() % SCOPES.length];
  }

  static int[] promptOf(Step s) {
    int[] t = new int[s.length()];
    for (int i = 0; i < t.length; i++) {
      // first 12 tokens shared per family, then per-suffix tokens
      t[i] = i < 12 ? s.family() * 1000 + i : s.family() * 1000 + 100 * (s.suffixSeed() + 1) + i;
    }
    return t;
  }

  @Property
  void eventReplayMatchesCacheAndInvariantsHold(
      @ForAll("steps") List<Step> steps,
      @ForAll @IntRange(min = 0, max = 12) int capacityBlocks,
      @ForAll @IntRange(min = 1, max = 3) int slots,
      @ForAll @IntRange(min = 0, max = 30) int listenAfter) {
    // the listener is set after listenAfter steps: it is first told of the blocks cached then
    SimulatedScheduler sim = new SimulatedScheduler();
    SimulatedEngine e =
        SimulatedEngine.builder()
            .scheduler(sim)
            .blockSize(BLOCK)
            .capacityTokens((long) capacityBlocks * BLOCK)
            .slots(slots)
            .prefillOverheadNanos(3)
            .prefillNanosPerToken(1)
            .decodeNanosPerToken(5)
            .build();
    Map<Long, Long> replay = new HashMap<>(); // block id -> parent id
    Map<Long, int[]> tokensOf = new HashMap<>();
    Map<Long, io.github.prefixrouter.CacheScope> scopeOf = new HashMap<>(); // chain start -> scope
    CacheEventListener mirror =
        new CacheEventListener() {
          @Override
          public void onBlocksStored(io.github.prefixrouter.CacheScope scope, long parent,
              long[] ids, int[] tokens) {
            if (parent == NO_PARENT) {
              scopeOf.put(ids[0], scope);
            }
            onBlocksStored(parent, ids, tokens);
          }

          @Override
          public void onBlocksStored(long parent, long[] ids, int[] tokens) {
            assertEquals(ids.length * BLOCK, tokens.length, "tokens of the stored blocks");
            assertTrue(parent == NO_PARENT || replay.containsKey(parent), "unknown parent");
            long p = parent;
            for (int i = 0; i < ids.length; i++) {
              assertFalse(replay.containsKey(ids[i]), "block stored twice");
              replay.put(ids[i], p);
              tokensOf.put(ids[i], java.util.Arrays.copyOfRange(tokens, i * BLOCK, i * BLOCK + BLOCK));
              p = ids[i];
            }
          }

          @Override
          public void onBlocksRemoved(long[] ids) {
            for (long id : ids) {
              assertTrue(replay.containsKey(id), "removed an unknown block");
              assertFalse(replay.containsValue(id), "removed a block that has children");
              replay.remove(id);
            }
          }

          @Override
          public void onAllCleared() {
            replay.clear();
          }
        };
    List<CompletableFuture<EngineResult>> futures = new ArrayList<>();
    List<int[]> prompts = new ArrayList<>();
    int n = 0;
    int done = 0;
    for (Step s : steps) {
      if (done++ == listenAfter) {
        e.setCacheEventListener(mirror);
      }
      if (s.kind() <= 6) {
        int[] p = promptOf(s);
        prompts.add(p);
        futures.add(
            e.execute(
                new InferenceRequest("r" + n++, p, GenerationParams.greedy(s.outputs()),
                    scopeOf(s))));
      } else if (s.kind() <= 8) {
        sim.advanceBy(s.advance());
      } else if (n > 0) {
        e.cancel("r" + (s.advance() % n));
      }
      if (done > listenAfter) {
        check(e, replay);
      }
    }
    if (done <= listenAfter) {
      e.setCacheEventListener(mirror);
      check(e, replay);
    }
    sim.runUntilIdle(1_000_000);
    check(e, replay);
    for (int i = 0; i < futures.size(); i++) {
      CompletableFuture<EngineResult> f = futures.get(i);
      assertTrue(f.isDone(), "every request completes exactly once");
      if (!f.isCompletedExceptionally()) {
        EngineResult r = f.join();
        int[] p = prompts.get(i);
        assertTrue(r.cachedPromptTokens() % BLOCK == 0);
        assertTrue(r.cachedPromptTokens() < p.length, "at least one token is computed");
        assertArrayEquals(
            SimulatedEngine.expectedOutput(p, GenerationParams.greedy(r.outputTokens().length), 151_936),
            r.outputTokens());
        assertEquals(3 + (p.length - r.cachedPromptTokens()), r.prefillNanos());
      }
    }
    // every cached chain is reachable from its scope's root with the tokens the events
    // carried, and from no other scope's
    for (long id : replay.keySet()) {
      List<int[]> chain = new ArrayList<>();
      long cur = id;
      long start = id;
      while (cur != CacheEventListener.NO_PARENT) {
        chain.add(0, tokensOf.get(cur));
        start = cur;
        cur = replay.get(cur);
      }
      int[] full = chain.stream().flatMapToInt(java.util.Arrays::stream).toArray();
      io.github.prefixrouter.CacheScope scope = scopeOf.get(start);
      assertEquals(full.length, e.cachedPrefixTokens(scope, full));
      assertEquals(id, e.blockIdOf(scope, full, chain.size() - 1));
      for (io.github.prefixrouter.CacheScope other : SCOPES) {
        if (!other.equals(scope)) {
          assertTrue(e.blockIdOf(other, full, 0) != start, "one block id in two scopes");
        }
      }
    }
  }

  private static void check(SimulatedEngine e, Map<Long, Long> replay) {
    Set<Long> engineSet = new HashSet<>();
    for (long id : e.cachedBlockIds()) {
      engineSet.add(id);
    }
    assertEquals(replay.keySet(), engineSet, "replayed events == engine's cached blocks");
    assertTrue(e.cachedBlocks() <= e.capacityBlocks(), "capacity respected");
  }

  /**
   * A deliberately naive LRU model of the cache for requests run one at a time: a list of block
   * chains (token prefixes) with a last-use stamp, evicting the least recently used leaf by a
   * linear scan.
   */
  static final class NaiveCache {
    final int capacity;
    /** Cached prefixes, each a whole number of blocks long: key = the prefix's tokens. */
    final java.util.LinkedHashMap<java.util.List<Integer>, long[]> blocks =
        new java.util.LinkedHashMap<>(); // value: {lastUsed, insertionSeq}
    long tick;
    long seq;

    NaiveCache(int capacityBlocks) {
      this.capacity = capacityBlocks;
    }

    static java.util.List<Integer> prefix(int[] t, int blocks) {
      java.util.List<Integer> l = new java.util.ArrayList<>();
      for (int i = 0; i < blocks * BLOCK; i++) {
        l.add(t[i]);
      }
      return l;
    }

    boolean isLeaf(java.util.List<Integer> key) {
      for (java.util.List<Integer> k : blocks.keySet()) {
        if (k.size() == key.size() + BLOCK && k.subList(0, key.size()).equals(key)) {
          return false;
        }
      }
      return true;
    }

    /** Runs one request alone; returns the cached-token count the engine must report. */
    int run(int[] t) {
      int full = t.length / BLOCK;
      int matched = 0;
      while (matched < full && blocks.containsKey(prefix(t, matched + 1))) {
        matched++;
      }
      long start = ++tick;
      java.util.Set<java.util.List<Integer>> pinned = new java.util.HashSet<>();
      for (int b = 1; b <= matched; b++) {
        blocks.get(prefix(t, b))[0] = start;
        pinned.add(prefix(t, b));
      }
      int need = full - matched;
      while (blocks.size() + need > capacity) {
        java.util.List<Integer> victim = null;
        long[] best = null;
        for (var e : blocks.entrySet()) {
          if (pinned.contains(e.getKey()) || !isLeaf(e.getKey())) {
            continue;
          }
          long[] v = e.getValue();
          if (best == null || v[0] < best[0] || (v[0] == best[0] && v[1] < best[1])) {
            best = v;
            victim = e.getKey();
          }
        }
        if (victim == null) {
          break;
        }
        blocks.remove(victim);
      }
      int room = Math.max(0, Math.min(need, capacity - blocks.size()));
      long stored = ++tick;
      for (int b = matched + 1; b <= matched + room; b++) {
        blocks.put(prefix(t, b), new long[] {stored, seq++});
      }
      long end = ++tick;
      for (int b = 1; b <= matched + room; b++) {
        blocks.get(prefix(t, b))[0] = end;
      }
      return Math.min(matched * BLOCK, ((t.length - 1) / BLOCK) * BLOCK);
    }
  }

  @Property
  void sequentialRequestsMatchANaiveLruModel(
      @ForAll("steps") List<Step> steps, @ForAll @IntRange(min = 0, max = 12) int capacityBlocks) {
    SimulatedScheduler sim = new SimulatedScheduler();
    SimulatedEngine e =
        SimulatedEngine.builder()
            .scheduler(sim)
            .blockSize(BLOCK)
            .capacityTokens((long) capacityBlocks * BLOCK)
            .build();
    NaiveCache model = new NaiveCache(capacityBlocks);
    int n = 0;
    for (Step s : steps) {
      int[] p = promptOf(s);
      CompletableFuture<EngineResult> f = e.execute(InferenceRequest.of("r" + n++, p));
      sim.runUntilIdle(10_000);
      assertEquals(model.run(p), f.join().cachedPromptTokens(), "cached tokens of request " + n);
      assertEquals(model.blocks.size(), e.cachedBlocks(), "cached block count");
      for (java.util.List<Integer> k : model.blocks.keySet()) {
        int[] t = k.stream().mapToInt(Integer::intValue).toArray();
        assertEquals(t.length, e.cachedPrefixTokens(t), "model's block is cached");
      }
    }
  }
}
