package io.github.prefixrouter.engine.reference;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.contract.ThrowingCacheEventListener;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InvalidRequestException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class ReferenceEngineTest {

  /**
   * A host executor that fails in any way (not only with RejectedExecutionException, which was
   * the only failure handled) fails the request retryably, and the engine counts nothing queued:
   * the request was left registered and counted as queued for ever.
   */
  @Test
  void anExecutorThatThrowsAnythingFailsTheRequestAndLeavesNothingQueued() throws Exception {
    List<Throwable> failures = List.of(new IllegalStateException("pool broken"),
        new OutOfMemoryError("unable to create native thread"), new java.io.IOException("gone"));
    for (Throwable thrown : failures) {
      java.util.concurrent.Executor failing = job -> {
        throw ReferenceEngineTest.<RuntimeException>undeclared(thrown);
      };
      try (ReferenceEngine e = ReferenceEngine.builder().executor(failing).build()) {
        CompletableFuture<EngineResult> f =
            e.execute(InferenceRequest.of("x", new int[] {1, 2, 3}), OutputListener.IGNORE);
        assertTrue(f.isDone(), thrown + ": the request was left open");
        ExecutionException ex = assertThrows(ExecutionException.class, f::get);
        EngineException cause = (EngineException) ex.getCause();
        assertTrue(cause.retryable(), thrown + ": " + cause);
        assertEquals(0, e.load().queueDepth(), thrown + ": still counted as queued");
        assertEquals(0, e.load().inFlight(), thrown + ": still counted in flight");
      }
    }
  }

  @SuppressWarnings("unchecked")
  private static <T extends Throwable> T undeclared(Throwable t) throws T {
    throw (T) t;
  }

  @Test
  void streamsEachTokenAsItIsDecodedAndTheWholeOutputBeforeCompleting() throws Exception {
    int[] p = prompt(11, 50);
    for (GenerationParams g : List.of(GenerationParams.greedy(6), new GenerationParams(6, 0.8, 0.9, 99L))) {
      try (ReferenceEngine e = ReferenceEngine.builder().build()) {
        EngineResult plain = e.execute(new InferenceRequest("p", p, g)).get(60, TimeUnit.SECONDS);
        List<int[]> pieces = new ArrayList<>();
        List<String> problems = new ArrayList<>();
        java.util.concurrent.atomic.AtomicReference<CompletableFuture<EngineResult>> future =
            new java.util.concurrent.atomic.AtomicReference<>();
        CompletableFuture<EngineResult> f = e.execute(new InferenceRequest("s", p, g), (tokens, text) -> {
          CompletableFuture<EngineResult> mine = future.get();
          if (mine != null && mine.isDone()) {
            problems.add("a piece after completion");
          }
          if (e.load().inFlight() != 1) {
            problems.add("a piece while the request was not running: " + e.load());
          }
          if (!text.isEmpty()) {
            problems.add("text " + text);
          }
          pieces.add(tokens);
        });
        future.set(f);
        EngineResult streamed = f.get(60, TimeUnit.SECONDS);
        assertEquals(List.of(), problems);
        assertEquals(6, pieces.size(), "one piece per token");
        int[] all = pieces.stream().flatMapToInt(Arrays::stream).toArray();
        assertArrayEquals(streamed.outputTokens(), all);
        assertArrayEquals(plain.outputTokens(), streamed.outputTokens());
        assertEquals("", streamed.text());
      }
    }
  }

  @Test
  void aListenerThatThrowsIsNotCalledAgainAndTheRequestCompletes() throws Exception {
    int[] p = prompt(12, 40);
    try (ReferenceEngine e = ReferenceEngine.builder().build()) {
      EngineResult plain = run(e, "p", p, 5);
      int[] calls = new int[1];
      OutputListener throwing = (tokens, text) -> {
        calls[0]++;
        throw new IllegalStateException("client gone");
      };
      EngineResult r = e.execute(new InferenceRequest("s", p, GenerationParams.greedy(5)), throwing)
          .get(60, TimeUnit.SECONDS);
      assertEquals(1, calls[0]);
      assertArrayEquals(plain.outputTokens(), r.outputTokens());
      assertEquals(2, e.stats().requests());
    }
  }

  /**
   * A listener that throws a checked exception without declaring it (as code in a language
   * without checked exceptions can): it got past the catches of the streaming and of the run,
   * out of the task into the executor, and the request's future never completed. It is handled
   * as any listener that throws: not called again, and the request completes with its output.
   */
  @Test
  void aListenerThatThrowsACheckedExceptionIsNotCalledAgainAndTheRequestCompletes()
      throws Exception {
    int[] p = prompt(12, 40);
    List<Throwable> escaped = new ArrayList<>();
    java.util.concurrent.Executor direct = task -> {
      try {
        task.run();
      } catch (Throwable t) {
        escaped.add(t);
      }
    };
    try (ReferenceEngine e = ReferenceEngine.builder().executor(direct).build()) {
      EngineResult plain = run(e, "p", p, 5);
      int[] calls = new int[1];
      OutputListener throwing = (tokens, text) -> {
        calls[0]++;
        throw ThrowingCacheEventListener.<RuntimeException>undeclared(new java.io.IOException("client gone"));
      };
      CompletableFuture<EngineResult> f =
          e.execute(new InferenceRequest("s", p, GenerationParams.greedy(5)), throwing);
      assertEquals(List.of(), escaped, "what the listener threw reached the executor");
      assertTrue(f.isDone(), "the request never completed");
      assertEquals(1, calls[0]);
      assertArrayEquals(plain.outputTokens(), f.join().outputTokens());
      assertEquals(0, e.load().inFlight());
    }
  }

  static int[] prompt(long seed, int n) {
    SplittableRandom r = new SplittableRandom(seed);
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = r.nextInt(100_000);
    }
    return t;
  }

  static int[] concat(int[] a, int[] b) {
    int[] c = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, c, a.length, b.length);
    return c;
  }

  static EngineResult run(ReferenceEngine e, String id, int[] tokens, int maxTokens) throws Exception {
    return e.execute(new InferenceRequest(id, tokens, GenerationParams.greedy(maxTokens))).get(60, TimeUnit.SECONDS);
  }

  @Test
  void reusingACachedPrefixSkipsItsComputeAndKeepsTheAnswer() throws Exception {
    int[] shared = prompt(1, 200);
    int[] q = concat(shared, prompt(2, 40));
    try (ReferenceEngine warm = ReferenceEngine.builder().build();
        ReferenceEngine cold = ReferenceEngine.builder().build()) {
      run(warm, "a", concat(shared, prompt(3, 30)), 1);
      ReferenceEngine.Stats before = warm.stats();
      EngineResult hit = run(warm, "b", q, 4);
      ReferenceEngine.Stats after = warm.stats();
      EngineResult miss = run(cold, "b", q, 4);

      // 200 shared tokens = 12 full blocks of 16 = 192 cached tokens
      assertEquals(192, hit.cachedPromptTokens());
      assertEquals(0, miss.cachedPromptTokens());
      assertEquals(240, hit.promptTokens());
      // the work: only 48 prompt positions evaluated instead of 240 (plus 3 decode steps each)
      assertEquals(48 + 3, after.evaluatedPositions() - before.evaluatedPositions());
      assertEquals(240 + 3, cold.stats().evaluatedPositions());
      long hitMacs = after.multiplyAdds() - before.multiplyAdds();
      long missMacs = cold.stats().multiplyAdds();
      assertTrue(hitMacs * 3 < missMacs, "hit " + hitMacs + " vs miss " + missMacs);
      // and the answer is bit-identical
      assertArrayEquals(miss.outputTokens(), hit.outputTokens());
    }
  }

  @Test
  void fullyCachedPromptStillEvaluatesItsLastToken() throws Exception {
    int[] p = prompt(5, 64); // exactly 4 blocks
    try (ReferenceEngine e = ReferenceEngine.builder().build()) {
      EngineResult first = run(e, "a", p, 2);
      long positions = e.stats().evaluatedPositions();
      EngineResult second = run(e, "b", p, 2);
      assertEquals(63, second.cachedPromptTokens());
      assertEquals(1 + 1, e.stats().evaluatedPositions() - positions);
      assertArrayEquals(first.outputTokens(), second.outputTokens());
    }
  }

  @Test
  void outputIsDeterministicAcrossEnginesAndDependsOnSeedAndPrompt() throws Exception {
    int[] p = prompt(9, 50);
    try (ReferenceEngine a = ReferenceEngine.builder().seed(7).build();
        ReferenceEngine b = ReferenceEngine.builder().seed(7).threads(2).build();
        ReferenceEngine c = ReferenceEngine.builder().seed(8).build()) {
      int[] out = run(a, "x", p, 16).outputTokens();
      assertEquals(16, out.length);
      assertArrayEquals(out, run(b, "x", p, 16).outputTokens());
      assertFalse(Arrays.equals(out, run(c, "x", p, 16).outputTokens()));
      int[] p2 = p.clone();
      p2[49]++;
      assertFalse(Arrays.equals(out, run(a, "y", p2, 16).outputTokens()));
      for (int t : out) {
        assertTrue(t >= 0 && t < 1024);
      }
      // seeded sampling is deterministic too, and seeds matter
      GenerationParams s1 = new GenerationParams(16, 0.8, 0.9, 123);
      GenerationParams s2 = new GenerationParams(16, 0.8, 0.9, 124);
      int[] x1 = a.execute(new InferenceRequest("s", p, s1)).get().outputTokens();
      assertArrayEquals(x1, b.execute(new InferenceRequest("s", p, s1)).get().outputTokens());
      assertNotEquals(Arrays.toString(x1), Arrays.toString(a.execute(new InferenceRequest("t", p, s2)).get().outputTokens()));
    }
  }

  @Test
  void concurrentRequestsSharingPrefixesAnswerAsEachAloneOnAFreshEngine() throws Exception {
    // requests of 4 prompt families (shared prefixes: cache hits, stores of the same blocks at
    // once, evictions from a cache of 8 blocks), greedy and sampled, some with stop token ids,
    // all at once on 4 threads: each answers, and streams, what it answers alone on a fresh
    // engine with an empty cache; the cache stays consistent
    SplittableRandom rnd = new SplittableRandom(77);
    List<InferenceRequest> requests = new ArrayList<>();
    for (int i = 0; i < 32; i++) {
      int family = rnd.nextInt(4);
      int[] tokens = concat(prompt(100 + family, 16 * (1 + rnd.nextInt(3))), prompt(1000 + i, 1 + rnd.nextInt(20)));
      GenerationParams g = rnd.nextBoolean() ? GenerationParams.greedy(8)
          : new GenerationParams(8, 0.9, 0.95, rnd.nextLong());
      if (rnd.nextInt(3) == 0) {
        g = g.withStops(List.of(), List.of(rnd.nextInt(1024), rnd.nextInt(1024)));
      }
      requests.add(new InferenceRequest("q" + i, tokens, g));
    }
    List<int[]> alone = new ArrayList<>();
    for (InferenceRequest r : requests) {
      try (ReferenceEngine fresh = ReferenceEngine.builder().build()) {
        alone.add(fresh.execute(r).get(60, TimeUnit.SECONDS).outputTokens());
      }
    }
    try (ReferenceEngine shared = ReferenceEngine.builder().threads(4).cacheCapacityTokens(128).build()) {
      List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
      List<List<Integer>> streamed = new ArrayList<>();
      for (InferenceRequest r : requests) {
        List<Integer> pieces = java.util.Collections.synchronizedList(new ArrayList<>());
        streamed.add(pieces);
        fs.add(shared.execute(r, (tokens, text) -> Arrays.stream(tokens).forEach(pieces::add)));
      }
      for (int i = 0; i < requests.size(); i++) {
        int[] out = fs.get(i).get(60, TimeUnit.SECONDS).outputTokens();
        assertArrayEquals(alone.get(i), out, requests.get(i).id());
        assertArrayEquals(out, streamed.get(i).stream().mapToInt(Integer::intValue).toArray());
      }
      assertTrue(shared.stats().cachedPromptTokens() > 0, "some requests hit the cache");
      assertTrue(shared.stats().blocksEvicted() > 0, "the cache evicted");
      assertNull(shared.checkCacheInvariants());
      assertEquals(0, shared.load().total());
    }
  }

  /** Records events and rebuilds the engine's cache contents from them. */
  static final class Mirror implements CacheEventListener {
    final java.util.Map<Long, Long> parentOf = new java.util.HashMap<>();
    final List<String> log = new ArrayList<>();
    int blockSize = 16;
    String problem;

    @Override
    public synchronized void onBlocksStored(long parentBlockHash, long[] blockHashes, int[] tokenIds) {
      log.add("stored " + blockHashes.length);
      if (tokenIds.length != blockHashes.length * blockSize) {
        problem = "token count " + tokenIds.length + " for " + blockHashes.length + " blocks";
      }
      if (parentBlockHash != NO_PARENT && !parentOf.containsKey(parentBlockHash)) {
        problem = "stored under unknown parent";
      }
      long p = parentBlockHash;
      for (long h : blockHashes) {
        if (parentOf.put(h, p) != null) {
          problem = "stored twice";
        }
        p = h;
      }
    }

    /** The scope each chain start was stored under. */
    final java.util.Map<Long, io.github.prefixrouter.CacheScope> rootScope =
        new java.util.HashMap<>();

    @Override
    public synchronized void onBlocksStored(io.github.prefixrouter.CacheScope scope,
        long parentBlockHash, long[] blockHashes, int[] tokenIds) {
      if (parentBlockHash == NO_PARENT) {
        rootScope.put(blockHashes[0], scope);
      }
      onBlocksStored(parentBlockHash, blockHashes, tokenIds);
    }

    @Override
    public synchronized void onBlocksRemoved(long[] blockHashes) {
      log.add("removed " + blockHashes.length);
      for (long h : blockHashes) {
        if (parentOf.remove(h) == null) {
          problem = "removed unknown block";
        }
        if (parentOf.containsValue(h)) {
          problem = "removed a block that still has children";
        }
      }
    }

    @Override
    public synchronized void onAllCleared() {
      log.add("cleared");
      parentOf.clear();
    }
  }

  @Test
  void ofTwoCallersSettingTheCacheEventListenerAtOnceOneSucceeds() throws Exception {
    // the check of "already set" and the set were two steps: two callers could both pass the
    // check, both succeed, and the second's listener silently replaced the first's. Each round,
    // two threads waiting for it without parking (a parked thread wakes too late to meet the
    // other) set a listener on each of a row of new engines, one from each end: where they cross
    // they call on one engine at about the same time, whatever the delay between their starts.
    int rounds = 20_000;
    int row = 8;
    java.util.concurrent.atomic.AtomicInteger round = new java.util.concurrent.atomic.AtomicInteger();
    ReferenceEngine[] engines = new ReferenceEngine[row]; // published by the round's set
    java.util.concurrent.atomic.AtomicInteger succeeded = new java.util.concurrent.atomic.AtomicInteger();
    java.util.concurrent.atomic.AtomicInteger refused = new java.util.concurrent.atomic.AtomicInteger();
    java.util.concurrent.Phaser ended = new java.util.concurrent.Phaser(3);
    java.util.function.IntFunction<Runnable> caller = from -> () -> {
      for (int r = 1; r <= rounds && round.get() >= 0; r++) {
        while (round.get() < r && round.get() >= 0) {
          Thread.yield();
        }
        for (int k = 0; k < row; k++) {
          try {
            engines[from == 0 ? k : row - 1 - k].setCacheEventListener(new Mirror());
            succeeded.incrementAndGet();
          } catch (IllegalStateException already) {
            refused.incrementAndGet();
          }
        }
        ended.arrive();
      }
    };
    List<Thread> callers = List.of(new Thread(caller.apply(0)), new Thread(caller.apply(1)));
    callers.forEach(t -> t.setDaemon(true));
    callers.forEach(Thread::start);
    try {
      for (int r = 1; r <= rounds; r++) {
        for (int k = 0; k < row; k++) {
          engines[k] = ReferenceEngine.builder().layers(1).modelDim(4).heads(1).ffnDim(1)
              .vocabBuckets(2).executor(Runnable::run).build();
        }
        succeeded.set(0);
        refused.set(0);
        int phase = ended.arrive();
        round.set(r);
        ended.awaitAdvanceInterruptibly(phase, 10, TimeUnit.SECONDS);
        assertEquals(row, succeeded.get(), "round " + r + ": calls that set a listener, one per engine");
        assertEquals(row, refused.get(), "round " + r + ": calls refused");
      }
    } finally {
      round.set(-1);
      for (Thread t : callers) {
        t.join(10_000);
      }
    }
  }

  @Test
  void publishesStoredAndRemovedEventsThatMirrorTheCache() throws Exception {
    Mirror m = new Mirror();
    try (ReferenceEngine e = ReferenceEngine.builder().cacheCapacityTokens(64).build()) {
      assertTrue(e.publishesCacheEvents());
      e.setCacheEventListener(m);
      assertThrows(IllegalStateException.class, () -> e.setCacheEventListener(m));
      int[] a = prompt(1, 40); // 2 full blocks
      run(e, "a", a, 1);
      assertEquals(List.of("stored 2"), m.log);
      run(e, "b", concat(Arrays.copyOf(a, 32), prompt(2, 16)), 1); // shares 2 blocks, adds 1
      assertEquals(List.of("stored 2", "stored 1"), m.log);
      run(e, "c", prompt(3, 32), 1); // capacity 4 blocks: one eviction needed for 2 new blocks
      assertEquals(List.of("stored 2", "stored 1", "removed 1", "stored 2"), m.log);
      assertNull(m.problem);
      assertEquals(4, m.parentOf.size());
      assertEquals(64, e.stats().cachedTokens());
      assertNull(e.checkCacheInvariants());
      e.clearCache();
      assertEquals("cleared", m.log.get(m.log.size() - 1));
      assertEquals(0, e.stats().cachedTokens());
    }
  }

  @Test
  void aCacheEventListenerThatThrowsLeavesTheCacheAsWithoutItAndClearable() throws Exception {
    // the engine contract kit checks the requests, hits and later events with such a listener;
    // here what only the engine shows: its cache holds what it holds without the listener,
    // keeps its invariants, and clearCache() empties it although the listener throws
    ThrowingCacheEventListener throwing = new ThrowingCacheEventListener();
    try (ReferenceEngine e = ReferenceEngine.builder().cacheCapacityTokens(64).build();
        ReferenceEngine plain = ReferenceEngine.builder().cacheCapacityTokens(64).build()) {
      e.setCacheEventListener(throwing);
      for (int i = 0; i < 6; i++) {
        int[] p = prompt(i % 3, 40);
        run(plain, "p" + i, p, 2);
        run(e, "r" + i, p, 2);
      }
      assertTrue(e.stats().blocksEvicted() > 0, "the cache evicted");
      assertEquals(plain.stats().cachedTokens(), e.stats().cachedTokens());
      assertNull(e.checkCacheInvariants());
      int before = throwing.calls();
      e.clearCache(); // the listener throws: the cache is cleared all the same
      assertEquals(0, e.stats().cachedTokens());
      assertEquals(before + 1, throwing.calls(), "the listener was told of the clear");
    }
  }

  /**
   * A cache event listener that throws a checked exception without declaring it: it got past
   * the cache's catches, out of the store in the middle of a request (whose evictions and
   * recency updates it cut short) and failed that request. Handled as any listener that throws:
   * every request completes, the cache holds what it holds without the listener, and
   * clearCache() empties it.
   */
  @Test
  void aCacheEventListenerThatThrowsACheckedExceptionBreaksNeitherRequestsNorTheCache()
      throws Exception {
    int[] calls = new int[1];
    CacheEventListener throwing = new CacheEventListener() {
      private void fail() {
        calls[0]++;
        throw ThrowingCacheEventListener.<RuntimeException>undeclared(new java.io.IOException("sink gone"));
      }

      @Override
      public void onBlocksStored(long parentBlockHash, long[] blockHashes, int[] tokenIds) {
        fail();
      }

      @Override
      public void onBlocksRemoved(long[] blockHashes) {
        fail();
      }

      @Override
      public void onAllCleared() {
        fail();
      }
    };
    try (ReferenceEngine e = ReferenceEngine.builder().cacheCapacityTokens(64).build();
        ReferenceEngine plain = ReferenceEngine.builder().cacheCapacityTokens(64).build()) {
      e.setCacheEventListener(throwing);
      for (int i = 0; i < 6; i++) {
        int[] p = prompt(i % 3, 40);
        EngineResult want = run(plain, "p" + i, p, 2);
        EngineResult got;
        try {
          got = run(e, "r" + i, p, 2);
        } catch (ExecutionException x) {
          throw new AssertionError("request r" + i + " failed: " + x.getCause(), x);
        }
        assertArrayEquals(want.outputTokens(), got.outputTokens());
        assertEquals(want.cachedPromptTokens(), got.cachedPromptTokens(), "r" + i + "'s hit");
      }
      assertTrue(e.stats().blocksEvicted() > 0, "the cache evicted");
      assertEquals(plain.stats().blocksEvicted(), e.stats().blocksEvicted());
      assertEquals(plain.stats().cachedTokens(), e.stats().cachedTokens());
      assertNull(e.checkCacheInvariants());
      int before = calls[0];
      assertTrue(before > 0, "the listener was told of the stores");
      e.clearCache(); // the listener throws: the cache is cleared all the same
      assertEquals(0, e.stats().cachedTokens());
      assertEquals(before + 1, calls[0], "the listener was told of the clear");
    }
  }

  @Test
  void lruEvictsTheLeastRecentlyUsedLeafNeverAnAncestor() throws Exception {
    Mirror m = new Mirror();
    try (ReferenceEngine e = ReferenceEngine.builder().cacheCapacityTokens(48).build()) {
      e.setCacheEventListener(m);
      int[] root = prompt(1, 16);
      int[] x = concat(root, prompt(2, 16));
      int[] y = concat(root, prompt(3, 16));
      run(e, "x", x, 1); // root, x1
      run(e, "y", y, 1); // root, y1 (3 blocks, full)
      run(e, "x2", x, 1); // touches root and x1: y1 is now least recently used
      run(e, "z", concat(root, prompt(4, 16)), 1); // needs one block: evicts y1, not root
      assertEquals(31, run(e, "x3", x, 1).cachedPromptTokens());
      assertEquals(16, run(e, "y2", concat(y, new int[] {1}), 1).cachedPromptTokens(),
          "y's own block was evicted, the shared root was kept");
      assertNull(m.problem);
      assertNull(e.checkCacheInvariants());
    }
  }

  @Test
  void rejectsOversizedRequestsWithNonRetryableErrors() {
    try (ReferenceEngine e = ReferenceEngine.builder().maxPromptTokens(10).maxOutputTokens(5).build()) {
      ExecutionException x = assertThrows(ExecutionException.class,
          () -> e.execute(InferenceRequest.of("a", new int[11])).get());
      assertFalse(((EngineException) x.getCause()).retryable());
      assertTrue(x.getCause() instanceof InvalidRequestException, x.getCause().toString());
      assertTrue(x.getCause().getMessage().contains("maxPromptTokens"));
      x = assertThrows(ExecutionException.class,
          () -> e.execute(new InferenceRequest("b", new int[1], GenerationParams.greedy(6))).get());
      assertTrue(x.getCause() instanceof InvalidRequestException, x.getCause().toString());
      assertTrue(x.getCause().getMessage().contains("maxOutputTokens"));
    }
  }

  @Test
  void loadReportsQueueAndRunningAndCancelStopsQueuedWork() throws Exception {
    CountDownLatch gate = new CountDownLatch(1);
    java.util.concurrent.ExecutorService ex = java.util.concurrent.Executors.newSingleThreadExecutor();
    try (ReferenceEngine e = ReferenceEngine.builder().executor(ex).build()) {
      ex.execute(() -> {
        try {
          gate.await();
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
        }
      });
      CompletableFuture<EngineResult> f1 = e.execute(InferenceRequest.of("a", prompt(1, 20)));
      CompletableFuture<EngineResult> f2 = e.execute(InferenceRequest.of("b", prompt(2, 20)));
      assertEquals(2, e.load().queueDepth());
      e.cancel("b");
      gate.countDown();
      assertEquals(1, f1.get(30, TimeUnit.SECONDS).outputTokens().length);
      ExecutionException x = assertThrows(ExecutionException.class, () -> f2.get(30, TimeUnit.SECONDS));
      assertFalse(((EngineException) x.getCause()).retryable());
      assertEquals(0, e.load().total());
    } finally {
      ex.shutdownNow();
    }
  }

  @Test
  void cancelReachesEveryRunOfTheIdAlsoOneQueuedBeforeAnotherOfTheSameId() throws Exception {
    // ids are unique per origin only: two runs of one id may overlap. Once the later one is
    // over, cancelling the id must still stop the earlier one.
    List<Runnable> queue = new ArrayList<>();
    try (ReferenceEngine e = ReferenceEngine.builder().executor(queue::add).build()) {
      CompletableFuture<EngineResult> first = e.execute(InferenceRequest.of("a", prompt(1, 20)));
      CompletableFuture<EngineResult> second = e.execute(InferenceRequest.of("a", prompt(2, 20)));
      assertEquals(2, queue.size());
      queue.get(1).run();
      assertEquals(1, second.get(30, TimeUnit.SECONDS).outputTokens().length);
      e.cancel("a");
      queue.get(0).run();
      ExecutionException x = assertThrows(ExecutionException.class, () -> first.get(30, TimeUnit.SECONDS));
      assertFalse(((EngineException) x.getCause()).retryable(), x.toString());
      assertTrue(x.getCause().getMessage().contains("cancelled"), x.toString());
      assertEquals(0, e.load().total());
    }
  }

  @Test
  void aCompletedRequestIsNoLongerInTheLoadWhenItsFutureCompletes() throws Exception {
    // the node reads load() in its completion callbacks (is the engine idle for the next
    // request?): the request that completed must not count as running there any more
    List<Runnable> queue = new ArrayList<>();
    try (ReferenceEngine e = ReferenceEngine.builder().executor(queue::add).build()) {
      CompletableFuture<EngineResult> f = e.execute(InferenceRequest.of("a", prompt(1, 20)));
      int[] seen = {-1};
      f.whenComplete((r, x) -> seen[0] = e.load().total());
      assertEquals(1, e.load().queueDepth());
      queue.get(0).run();
      assertTrue(f.isDone());
      assertEquals(0, seen[0], "load() in the future's callback");
    }
  }

  @Test
  void closeFailsQueuedRequestsAndRefusesNewOnes() throws Exception {
    ReferenceEngine e = ReferenceEngine.builder().build();
    List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      fs.add(e.execute(InferenceRequest.of("r" + i, prompt(i, 300))));
    }
    e.close();
    for (CompletableFuture<EngineResult> f : fs) {
      try {
        f.get(30, TimeUnit.SECONDS);
      } catch (ExecutionException x) {
        assertTrue(x.getCause() instanceof EngineException, x.toString());
      }
    }
    ExecutionException x = assertThrows(ExecutionException.class,
        () -> e.execute(InferenceRequest.of("late", new int[] {1})).get());
    assertTrue(((EngineException) x.getCause()).retryable());
  }

  @Test
  void closeFailsRunningRequestsAndThoseQueuedOnTheHostsExecutorAsRetryable() throws Exception {
    // they failed as cancelled, not retryable, so their node gave them up instead of running
    // them elsewhere
    List<Runnable> queue = new ArrayList<>();
    ReferenceEngine e = ReferenceEngine.builder().executor(queue::add).build();
    CompletableFuture<EngineResult> running = e.execute(
        new InferenceRequest("running", prompt(1, 40), GenerationParams.greedy(8)),
        (tokens, text) -> e.close()); // closes at its first token
    CompletableFuture<EngineResult> queued =
        e.execute(InferenceRequest.of("queued", prompt(2, 40)));
    assertEquals(2, queue.size());
    queue.get(0).run();
    queue.get(1).run();
    for (CompletableFuture<EngineResult> f : List.of(running, queued)) {
      ExecutionException x = assertThrows(ExecutionException.class, f::get);
      assertTrue(((EngineException) x.getCause()).retryable(), x.getCause().toString());
    }
    // a request cancelled before the engine closed stays cancelled: not retryable
    List<Runnable> queue2 = new ArrayList<>();
    ReferenceEngine e2 = ReferenceEngine.builder().executor(queue2::add).build();
    CompletableFuture<EngineResult> cancelled = e2.execute(InferenceRequest.of("c", prompt(3, 8)));
    e2.cancel("c");
    e2.close();
    queue2.get(0).run();
    ExecutionException x = assertThrows(ExecutionException.class, cancelled::get);
    assertFalse(((EngineException) x.getCause()).retryable());
    assertEquals(0, e.load().total());
  }

  /**
   * A close() that runs while execute() is between its closed check and registering the job
   * (two threads at once) failed that request with the pool's rejection text on the engine's own
   * threads ("engine cannot accept work: Task ...Job@... rejected from ThreadPoolExecutor"), and
   * on a host's executor let it run to its end after close() returned.
   */
  @Test
  void aRequestAcceptedAsTheEngineClosesFailsOnceAsEngineClosed() throws Exception {
    List<Runnable> queue = new ArrayList<>();
    ReferenceEngine host = ReferenceEngine.builder().executor(queue::add).build();
    ReferenceEngine own = ReferenceEngine.builder().threads(1).build();
    for (ReferenceEngine e : List.of(own, host)) {
      e.beforeRegister = e::close;
      CompletableFuture<EngineResult> f = e.execute(InferenceRequest.of("late", prompt(5, 8)));
      queue.forEach(Runnable::run);
      queue.clear();
      assertTrue(f.isDone(), "no answer");
      ExecutionException x = assertThrows(ExecutionException.class, f::get,
          () -> "ran after close(): " + f.join().outputTokens().length + " tokens");
      EngineException c = (EngineException) x.getCause();
      assertTrue(c.retryable(), c.toString());
      assertEquals("request late: engine closed", c.getMessage());
      assertEquals(0, e.load().total());
    }
  }

  @Test
  void aRequestCancelledWhileQueuedOnTheEnginesOwnThreadsStaysCancelledWhenTheEngineCloses()
      throws Exception {
    // the engine's own thread is busy with a first request, so the second waits in its queue;
    // close() takes it out of that queue: cancelled before, it must not come back retryable
    // (its node would run the request its client gave up on again, on a peer)
    ReferenceEngine e = ReferenceEngine.builder().threads(1).build();
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    CompletableFuture<EngineResult> running = e.execute(
        new InferenceRequest("running", prompt(1, 40), GenerationParams.greedy(8)),
        (tokens, text) -> {
          started.countDown();
          try {
            release.await(10, TimeUnit.SECONDS);
          } catch (InterruptedException x) {
            Thread.currentThread().interrupt();
          }
        });
    assertTrue(started.await(10, TimeUnit.SECONDS));
    CompletableFuture<EngineResult> cancelled = e.execute(InferenceRequest.of("c", prompt(3, 8)));
    CompletableFuture<EngineResult> queued = e.execute(InferenceRequest.of("q", prompt(4, 8)));
    assertEquals(2, e.load().queueDepth());
    e.cancel("c");
    e.close();
    release.countDown();
    ExecutionException x = assertThrows(ExecutionException.class,
        () -> cancelled.get(10, TimeUnit.SECONDS));
    EngineException c = (EngineException) x.getCause();
    assertFalse(c.retryable(), c.toString());
    assertTrue(c.getMessage().contains("request c cancelled"), c.getMessage());
    x = assertThrows(ExecutionException.class, () -> queued.get(10, TimeUnit.SECONDS));
    EngineException q = (EngineException) x.getCause();
    assertTrue(q.retryable(), q.toString());
    assertTrue(q.getMessage().contains("request q"), q.getMessage());
    x = assertThrows(ExecutionException.class, () -> running.get(10, TimeUnit.SECONDS));
    assertTrue(((EngineException) x.getCause()).retryable(), x.getCause().toString());
    assertEquals(0, e.load().total());
  }

  @Test
  void invalidConfigurationNamesTheSetting() {
    IllegalArgumentException x = assertThrows(IllegalArgumentException.class,
        () -> ReferenceEngine.builder().modelDim(63).build());
    assertTrue(x.getMessage().contains("modelDim"), x.getMessage());
    x = assertThrows(IllegalArgumentException.class, () -> ReferenceEngine.builder().blockSize(0).build());
    assertTrue(x.getMessage().contains("blockSize"), x.getMessage());
    x = assertThrows(IllegalArgumentException.class,
        () -> ReferenceEngine.builder().cacheCapacityTokens(8).build());
    assertTrue(x.getMessage().contains("cacheCapacityTokens"), x.getMessage());
  }

  @Test
  void expApproximationIsAccurate() {
    for (float x = -80f; x <= 0f; x += 0.01f) {
      double want = Math.exp(x);
      double got = TinyTransformer.expNonPositive(x);
      assertTrue(Math.abs(got - want) <= 1e-6 * want + 1e-30, "x=" + x + " got " + got + " want " + want);
    }
  }

  @Test
  void decodingEndsAfterTheFirstStopTokenIdWhichIsTheLastOfTheOutput() throws Exception {
    int[] p = prompt(21, 40);
    for (GenerationParams g : List.of(GenerationParams.greedy(24),
        new GenerationParams(24, 0.9, 0.95, 5L))) {
      try (ReferenceEngine e = ReferenceEngine.builder().build()) {
        int[] plain = e.execute(new InferenceRequest("p", p, g)).get(60, TimeUnit.SECONDS)
            .outputTokens();
        // stop at the token at position 5 (and at one id that never comes)
        int stop = plain[5];
        int first = 0;
        while (plain[first] != stop) {
          first++;
        }
        GenerationParams withStop = g.withStops(List.of("ignored: no text"), List.of(1 << 23, stop));
        List<int[]> pieces = new ArrayList<>();
        EngineResult r = e.execute(new InferenceRequest("s", p, withStop),
            (tokens, text) -> pieces.add(tokens)).get(60, TimeUnit.SECONDS);
        assertArrayEquals(Arrays.copyOf(plain, first + 1), r.outputTokens());
        assertArrayEquals(r.outputTokens(),
            pieces.stream().flatMapToInt(Arrays::stream).toArray(), "no piece after the stop");
        // the same request without a listener stops alike
        assertArrayEquals(r.outputTokens(), e.execute(new InferenceRequest("w", p, withStop))
            .get(60, TimeUnit.SECONDS).outputTokens());
      }
    }
  }

  @Test
  void withTheTextOfEachTokenDecodingEndsAtAStopString() throws Exception {
    int[] p = prompt(22, 40);
    // the text of a token: a letter per id, so the output reads as a string
    java.util.function.IntFunction<String> letters = id -> String.valueOf((char) ('a' + id % 26));
    try (ReferenceEngine plainEngine = ReferenceEngine.builder().build();
         ReferenceEngine reading = ReferenceEngine.builder().stopText(letters).build()) {
      GenerationParams g = new GenerationParams(30, 0.9, 0.95, 3L);
      int[] whole = plainEngine.execute(new InferenceRequest("p", p, g)).get(60, TimeUnit.SECONDS)
          .outputTokens();
      StringBuilder text = new StringBuilder();
      for (int t : whole) {
        text.append(letters.apply(t));
      }
      // a stop string of two letters that first ends at the 8th token or later
      String stop = text.substring(6, 8);
      int end = text.indexOf(stop) + stop.length(); // the tokens through the one completing it
      GenerationParams withStop = g.withStops(List.of("never-in-letters-1", stop), List.of());
      EngineResult r = reading.execute(new InferenceRequest("s", p, withStop))
          .get(60, TimeUnit.SECONDS);
      assertArrayEquals(Arrays.copyOf(whole, end), r.outputTokens());
      assertEquals("", r.text(), "the text is the node's");
      // without the text of its tokens, an engine cannot see stop strings
      assertArrayEquals(whole, plainEngine.execute(new InferenceRequest("w", p, withStop))
          .get(60, TimeUnit.SECONDS).outputTokens());
    }
  }
}
