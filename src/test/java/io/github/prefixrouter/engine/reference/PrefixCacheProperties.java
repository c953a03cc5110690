package io.github.prefixrouter.engine.reference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.EngineResult;
import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/**
 * The reference engine's prefix cache against a naive model: the list of every prompt seen.
 * With room for everything, the cached tokens of a request are exactly its longest whole-block
 * common prefix with an earlier prompt (capped at length - 1); with a small cache they never
 * exceed it, and the structure and the event mirror stay consistent after every request.
 */
class PrefixCacheProperties {

  static final int BS = 4;

  @Property(tries = 60)
  void cachedTokensMatchTheNaiveModel(
      @ForAll("prompts") List<int[]> prompts, @ForAll @IntRange(min = 1, max = 12) int capacityBlocks,
      @ForAll boolean unbounded, @ForAll @IntRange(min = 1, max = 3) int scopeCount,
      @ForAll long scopeSeed, @ForAll @IntRange(min = 0, max = 30) int listenAfter)
      throws Exception {
    // the mirror is set after listenAfter prompts: it is first told of the blocks cached then
    // each prompt runs in one of scopeCount cache scopes: it may hit only its own scope's blocks
    io.github.prefixrouter.CacheScope[] scopes = {io.github.prefixrouter.CacheScope.DEFAULT,
        io.github.prefixrouter.CacheScope.adapter("lora-a"),
        io.github.prefixrouter.CacheScope.salt("tenant-1")};
    java.util.SplittableRandom pick = new java.util.SplittableRandom(scopeSeed);
    List<io.github.prefixrouter.CacheScope> seenScopes = new ArrayList<>();
    ReferenceEngineTest.Mirror mirror = new ReferenceEngineTest.Mirror();
    mirror.blockSize = BS;
    int capacity = unbounded ? 1 << 20 : capacityBlocks * BS;
    List<int[]> seen = new ArrayList<>();
    try (ReferenceEngine e = ReferenceEngine.builder().layers(1).modelDim(8).heads(2).ffnDim(8)
        .vocabBuckets(16).blockSize(BS).cacheCapacityTokens(capacity).build();
        ReferenceEngine cold = ReferenceEngine.builder().layers(1).modelDim(8).heads(2).ffnDim(8)
            .vocabBuckets(16).blockSize(BS).cacheCapacityTokens(BS).build()) {
      int i = 0;
      for (int[] p : prompts) {
        if (i == listenAfter) {
          e.setCacheEventListener(mirror);
        }
        io.github.prefixrouter.CacheScope scope = scopes[pick.nextInt(scopeCount)];
        EngineResult r = e.execute(new InferenceRequest("r" + i++, p, GenerationParams.greedy(2),
            scope)).get();
        int bound = 0;
        for (int k = 0; k < seen.size(); k++) {
          if (seenScopes.get(k).equals(scope)) {
            bound = Math.max(bound, commonBlocks(seen.get(k), p) * BS);
          }
        }
        bound = Math.min(bound, p.length - 1);
        if (unbounded) {
          assertEquals(bound, r.cachedPromptTokens());
        } else {
          assertTrue(r.cachedPromptTokens() <= bound, r.cachedPromptTokens() + " > " + bound);
        }
        // the cache never changes the answer
        cold.clearCache();
        int[] reference = cold.execute(new InferenceRequest("c", p, GenerationParams.greedy(2))).get().outputTokens();
        assertEquals(java.util.Arrays.toString(reference), java.util.Arrays.toString(r.outputTokens()));
        assertNull(e.checkCacheInvariants());
        if (i > listenAfter) {
          assertNull(mirror.problem);
          assertEquals(e.stats().cachedTokens(), (long) mirror.parentOf.size() * BS);
        }
        seen.add(p);
        seenScopes.add(scope);
        if (p.length >= BS && r.cachedPromptTokens() == 0 && mirror.parentOf.size() > 0) {
          // a chain this request started is reported under its scope
          long first = PrefixKvCache.chain(PrefixKvCache.scopeSeed(scope), p, 0, BS);
          if (mirror.rootScope.containsKey(first) && mirror.parentOf.containsKey(first)) {
            assertEquals(scope, mirror.rootScope.get(first));
          }
        }
      }
      if (i <= listenAfter) {
        e.setCacheEventListener(mirror);
      }
      assertNull(mirror.problem);
      assertEquals(e.stats().cachedTokens(), (long) mirror.parentOf.size() * BS);
    }
  }

  private static int commonBlocks(int[] a, int[] b) {
    int n = Math.min(a.length, b.length) / BS;
    for (int k = 0; k < n; k++) {
      for (int j = k * BS; j < (k + 1) * BS; j++) {
        if (a[j] != b[j]) {
          return k;
        }
      }
    }
    return n;
  }

  @Provide
  Arbitrary<List<int[]>> prompts() {
    // a few shared stems and short random tails over a tiny alphabet, so prefixes collide often
    Arbitrary<int[]> stem = Arbitraries.integers().between(0, 2).array(int[].class).ofMinSize(0).ofMaxSize(12);
    Arbitrary<int[]> prompt = stem.flatMap(s -> Arbitraries.integers().between(0, 2).array(int[].class)
        .ofMinSize(1).ofMaxSize(10).map(t -> {
          int[] p = java.util.Arrays.copyOf(s, s.length + t.length);
          System.arraycopy(t, 0, p, s.length, t.length);
          return p;
        }));
    return prompt.list().ofMinSize(1).ofMaxSize(25);
  }
}
