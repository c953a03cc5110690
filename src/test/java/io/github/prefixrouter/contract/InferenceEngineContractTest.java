package io.github.prefixrouter.contract;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The {@link InferenceEngine} contract, as a test kit any engine adapter can run.
 *
 * <p>Extend it in your test tree and supply {@link #createEngine()} (a fresh engine with an empty
 * cache). Engines in simulated time override {@link #awaitCondition(BooleanSupplier, Duration)}
 * to advance their clock; engines that can be told to fail override
 * {@link #failNextRequest(InferenceEngine)}. Depend on the {@code tests} classifier of
 * {@code prefix-router}.
 *
 * <p>Checked: {@code execute} returns without blocking and its future completes exactly once;
 * results are well formed (prompt tokens, cached tokens within bounds, 1..maxTokens outputs);
 * the same request gives the same output, also when sampled, on two engines; {@code load()} is
 * cheap and sane; cancelling an unknown request is harmless; a cancelled request's future still
 * completes and cancelling one request leaves the others alone; failures surface as
 * {@link EngineException}; engines that
 * publish cache events announce the blocks of a prompt they ran, and report a cache hit when the
 * same prompt runs again; a request of another cache scope (by default a cache salt, see
 * {@link #scopeForTests()}) is served, does not hit the prefix the default scope cached, hits
 * its own when repeated, and (for engines whose events name scopes) has its chain's first blocks
 * reported under its scope.
 */
public abstract class InferenceEngineContractTest {

  /** A fresh engine with an empty cache. */
  protected abstract InferenceEngine createEngine();

  /** Longest any request may take in these tests. */
  protected Duration patience() {
    return Duration.ofSeconds(60);
  }

  /** Vocabulary the sample prompts draw from (ids in {@code [0, vocabulary)}). */
  protected int vocabulary() {
    return 1000;
  }

  /** Prompt length of the sample prompts: a few blocks of any usual block size. */
  protected int promptTokens() {
    return 96;
  }

  /**
   * Makes the engine fail its next request, if it can be told to.
   *
   * @return false if the engine has no such hook (the failure test is then skipped)
   */
  protected boolean failNextRequest(InferenceEngine engine) {
    return false;
  }

  /**
   * Waits until {@code condition} holds or {@code max} elapses, returning the condition's final
   * value. The default polls in real time; simulated engines advance their clock instead.
   */
  protected boolean awaitCondition(BooleanSupplier condition, Duration max) {
    return RealTimeWait.await(condition, max);
  }

  /**
   * The cache scope of the scoped-request check: by default a cache salt, which any engine
   * accepts (an adapter must be one the engine serves; override to test one).
   */
  protected CacheScope scopeForTests() {
    return CacheScope.salt("contract-tenant-1");
  }

  /**
   * Whether the engine's cache events name the scope of a chain's first blocks (vLLM's events
   * name the adapter but not the cache salt: override to false for such an engine).
   */
  protected boolean cacheEventsNameTheScope() {
    return true;
  }

  /** A deterministic sample prompt. */
  protected int[] prompt(long seed) {
    int[] t = new int[promptTokens()];
    long x = seed * 0x9E3779B97F4A7C15L + 1;
    for (int i = 0; i < t.length; i++) {
      x ^= x << 13;
      x ^= x >>> 7;
      x ^= x << 17;
      t[i] = (int) Math.floorMod(x, (long) vocabulary());
    }
    return t;
  }

  private EngineResult run(InferenceEngine e, InferenceRequest r) {
    CompletableFuture<EngineResult> f = assertTimeoutPreemptively(Duration.ofSeconds(5),
        () -> e.execute(r), "execute blocked the caller");
    assertNotNull(f, "execute returned null");
    assertTrue(awaitCondition(f::isDone, patience()), "request " + r.id() + " never completed");
    return f.join();
  }

  @Test
  void resultIsWellFormed() {
    InferenceEngine e = createEngine();
    int[] p = prompt(1);
    EngineResult r = run(e, new InferenceRequest("r1", p, GenerationParams.greedy(4)));
    assertEquals(p.length, r.promptTokens(), "promptTokens");
    assertTrue(r.cachedPromptTokens() >= -1 && r.cachedPromptTokens() <= p.length, "cached");
    int out = r.outputTokens().length;
    assertTrue(out >= 1 && out <= 4, "between 1 and maxTokens outputs, got " + out);
  }

  @Test
  void sameRequestGivesTheSameOutput() {
    InferenceEngine e = createEngine();
    int[] p = prompt(2);
    EngineResult a = run(e, new InferenceRequest("a", p, GenerationParams.greedy(3)));
    EngineResult b = run(e, new InferenceRequest("b", p, GenerationParams.greedy(3)));
    assertArrayEquals(a.outputTokens(), b.outputTokens());
    assertEquals(a.text(), b.text());
  }

  @Test
  void everyFutureCompletesExactlyOnce() {
    InferenceEngine e = createEngine();
    int n = 20;
    AtomicInteger completions = new AtomicInteger();
    List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      CompletableFuture<EngineResult> f = e.execute(
          new InferenceRequest("c" + i, prompt(100 + i % 5), GenerationParams.DEFAULT));
      assertNotNull(f);
      f.whenComplete((v, err) -> completions.incrementAndGet());
      fs.add(f);
    }
    assertTrue(awaitCondition(() -> fs.stream().allMatch(CompletableFuture::isDone), patience()));
    awaitCondition(() -> false, Duration.ofMillis(50));
    assertEquals(n, completions.get());
    for (CompletableFuture<EngineResult> f : fs) {
      assertNotNull(f.join());
    }
  }

  @Test
  void loadIsSaneAndCheap() {
    InferenceEngine e = createEngine();
    EngineLoad l = assertTimeoutPreemptively(Duration.ofSeconds(1), e::load);
    assertNotNull(l, "load() returned null");
    CompletableFuture<EngineResult> f = e.execute(
        new InferenceRequest("l", prompt(3), GenerationParams.DEFAULT));
    EngineLoad busy = e.load();
    assertNotNull(busy);
    assertTrue(f.isDone() || busy.total() >= 1,
        "a request not yet complete must show in the load, got " + busy);
    assertTrue(awaitCondition(f::isDone, patience()));
  }

  @Test
  void cancellingAnUnknownRequestIsHarmless() {
    InferenceEngine e = createEngine();
    e.cancel("no-such-request");
    EngineResult r = run(e, new InferenceRequest("after", prompt(4), GenerationParams.DEFAULT));
    assertNotNull(r);
  }

  @Test
  void sampledRequestsGiveTheSameOutputOnEveryEngine() {
    // a forwarded request must get the answer the origin's own engine would give: with
    // sampling, that takes the request's seed, not a per-engine or per-call random source
    GenerationParams sampled = new GenerationParams(4, 0.9, 0.95, 1234L);
    int[] p = prompt(7);
    EngineResult a = run(createEngine(), new InferenceRequest("s1", p, sampled));
    EngineResult b = run(createEngine(), new InferenceRequest("s2", p, sampled));
    assertArrayEquals(a.outputTokens(), b.outputTokens(),
        "two engines sampled different outputs for the same tokens, parameters and seed");
    assertEquals(a.text(), b.text());
  }

  @Test
  void cancelledRequestsStillCompleteAndOthersAreUntouched() {
    // the library cancels a request it has given up on and relies on its future completing
    InferenceEngine e = createEngine();
    int n = 6;
    List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      fs.add(e.execute(new InferenceRequest("k" + i, prompt(200 + i), GenerationParams.greedy(8))));
    }
    e.cancel("k" + (n - 1)); // the last one: most likely still queued
    e.cancel("k0"); // the first one: most likely running
    assertTrue(awaitCondition(() -> fs.stream().allMatch(CompletableFuture::isDone), patience()),
        "a cancelled request's future never completed");
    for (int i = 1; i < n - 1; i++) {
      assertNotNull(fs.get(i).join(), "request k" + i + " was not cancelled and must answer");
    }
    for (int i : new int[] {0, n - 1}) {
      try {
        fs.get(i).join(); // answering anyway is allowed: cancel is best effort
      } catch (CompletionException ex) {
        assertInstanceOf(EngineException.class, ex.getCause(),
            "a cancelled request must fail with EngineException");
      }
    }
  }

  @Test
  void failuresSurfaceAsEngineException() {
    InferenceEngine e = createEngine();
    Assumptions.assumeTrue(failNextRequest(e), "engine cannot be told to fail");
    CompletableFuture<EngineResult> f = e.execute(
        new InferenceRequest("f", prompt(5), GenerationParams.DEFAULT));
    assertTrue(awaitCondition(f::isDone, patience()));
    try {
      f.join();
      fail("the request should have failed");
    } catch (CompletionException ex) {
      assertInstanceOf(EngineException.class, ex.getCause());
    }
  }

  @Test
  void aScopedRequestIsServedAndHitsOnlyItsOwnScopesCache() {
    InferenceEngine e = createEngine();
    CacheScope scope = scopeForTests();
    List<CacheScope> rootScopes = java.util.Collections.synchronizedList(new ArrayList<>());
    boolean events = e.publishesCacheEvents() && cacheEventsNameTheScope();
    if (events) {
      e.setCacheEventListener(new CacheEventListener() {
        @Override
        public void onBlocksStored(CacheScope s, long parent, long[] hashes, int[] tokenIds) {
          if (parent == NO_PARENT) {
            rootScopes.add(s);
          }
        }
      });
    }
    int[] p = prompt(7);
    GenerationParams g = GenerationParams.greedy(3);
    run(e, new InferenceRequest("d1", p, g));
    EngineResult plain = run(e, new InferenceRequest("d2", p, g));
    EngineResult scoped = run(e, new InferenceRequest("s1", p, g, scope));
    assertEquals(p.length, scoped.promptTokens(), "promptTokens of a scoped request");
    int out = scoped.outputTokens().length;
    assertTrue(out >= 1 && out <= 3, "between 1 and maxTokens outputs, got " + out);
    if (scope.adapter().isEmpty()) { // a salt changes what is cached, not what is computed
      assertArrayEquals(plain.outputTokens(), scoped.outputTokens(),
          "a cache salt changed the output");
    }
    if (plain.cachedPromptTokens() > 0 && scoped.cachedPromptTokens() >= 0) {
      assertEquals(0, scoped.cachedPromptTokens(),
          "a request of " + scope + " hit the prefix cached for the default scope");
      EngineResult again = run(e, new InferenceRequest("s2", p, g, scope));
      assertTrue(again.cachedPromptTokens() > 0, "a repeated scoped request must hit its cache");
    }
    if (events) {
      long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
      while (!rootScopes.contains(scope) && System.nanoTime() < deadline) {
        Thread.onSpinWait();
        Thread.yield();
      }
      assertTrue(rootScopes.contains(scope),
          "the first blocks of a " + scope + " request were reported under " + rootScopes);
    }
  }

  @Test
  void publishedCacheEventsAnnounceTheBlocksAndRepeatsHitTheCache() {
    InferenceEngine e = createEngine();
    Assumptions.assumeTrue(e.publishesCacheEvents(), "engine publishes no cache events");
    AtomicLong storedBlocks = new AtomicLong();
    AtomicLong storedTokens = new AtomicLong();
    AtomicInteger badEvents = new AtomicInteger();
    e.setCacheEventListener(new CacheEventListener() {
      @Override
      public void onBlocksStored(long parent, long[] hashes, int[] tokenIds) {
        if (hashes.length == 0 || tokenIds.length % hashes.length != 0) {
          badEvents.incrementAndGet();
        }
        storedBlocks.addAndGet(hashes.length);
        storedTokens.addAndGet(tokenIds.length);
      }
    });
    int[] p = prompt(6);
    EngineResult first = run(e, new InferenceRequest("e1", p, GenerationParams.DEFAULT));
    // events may arrive asynchronously (vLLM publishes them over ZeroMQ): soon, not at once
    long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
    while (storedBlocks.get() == 0 && System.nanoTime() < deadline) {
      Thread.onSpinWait();
      Thread.yield();
    }
    assertEquals(0, badEvents.get(), "stored events must carry blockSize tokens per block");
    assertTrue(storedBlocks.get() >= 1, "a " + p.length + "-token prompt stored no block");
    assertTrue(storedTokens.get() <= p.length, "more tokens stored than the prompt has");
    EngineResult second = run(e, new InferenceRequest("e2", p, GenerationParams.DEFAULT));
    if (second.cachedPromptTokens() >= 0) {
      assertTrue(second.cachedPromptTokens() > Math.max(0, first.cachedPromptTokens()),
          "running the same prompt again must hit the cache");
    }
  }
}
