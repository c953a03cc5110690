package io.github.prefixrouter.testing;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.contract.ThrowingCacheEventListener;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.Test;

class SimulatedEngineTest {

  private static final long MS = 1_000_000L;

  private final SimulatedScheduler sim = new SimulatedScheduler();

  private SimulatedEngine.Builder engine() {
    return SimulatedEngine.builder()
        .scheduler(sim)
        .blockSize(16)
        .capacityTokens(16 * 100)
        .prefillOverheadNanos(10 * MS)
        .prefillNanosPerToken(MS / 10) // 0.1 ms per token
        .decodeNanosPerToken(5 * MS);
  }

  /** Tokens {@code base, base+1, ...}: prompts with different bases share no block. */
  private static int[] prompt(int base, int length) {
    int[] t = new int[length];
    for (int i = 0; i < length; i++) {
      t[i] = base + i;
    }
    return t;
  }

  private static int[] concat(int[] a, int[] b) {
    int[] t = new int[a.length + b.length];
    System.arraycopy(a, 0, t, 0, a.length);
    System.arraycopy(b, 0, t, a.length, b.length);
    return t;
  }

  @Test
  void theResultIsHandedOverOutsideTheEnginesLock() throws Exception {
    // the future completed inside the engine's lock: while the host's callbacks on the result
    // ran, every other thread's load(), execute() and cancel() waited for them (load() must
    // never block), and a callback waiting for such a thread never returned
    try (io.github.prefixrouter.spi.Schedulers.ClosableScheduler real =
        io.github.prefixrouter.spi.Schedulers.newSingleThread("simulated-engine-test")) {
      SimulatedEngine e = SimulatedEngine.builder()
          .scheduler(real).clock(io.github.prefixrouter.spi.Clock.system())
          .prefillOverheadNanos(20 * MS).prefillNanosPerToken(0).decodeNanosPerToken(MS)
          .build();
      CompletableFuture<EngineResult> f = e.execute(InferenceRequest.of("r", prompt(1, 40)));
      CompletableFuture<EngineLoad> seenFromCallback = f.thenApply(result -> {
        CompletableFuture<EngineLoad> other = new CompletableFuture<>();
        Thread t = new Thread(() -> other.complete(e.load()), "another-caller");
        t.setDaemon(true);
        t.start();
        try {
          return other.get(5, java.util.concurrent.TimeUnit.SECONDS);
        } catch (Exception ex) {
          return null; // the other thread's load() did not return while this callback ran
        }
      });
      EngineLoad load = seenFromCallback.get(30, java.util.concurrent.TimeUnit.SECONDS);
      assertEquals(EngineLoad.IDLE, load,
          "another thread's load() while a callback on the result ran (null: it blocked)");
    }
  }

  @Test
  void streamedPiecesAreHandedOverOutsideTheEnginesLockInOrderBeforeTheResult()
      throws Exception {
    // pieces went to the host's listener inside the engine's lock: while a slow listener ran,
    // every other thread's load() (which must never block), execute() and cancel() waited for
    // it. On four scheduler threads the pieces must still come in order, all before the result
    java.util.concurrent.ScheduledExecutorService pool =
        java.util.concurrent.Executors.newScheduledThreadPool(4, r -> {
          Thread t = new Thread(r, "simulated-engine-test");
          t.setDaemon(true);
          return t;
        });
    try {
      SimulatedEngine e = SimulatedEngine.builder()
          .scheduler(io.github.prefixrouter.spi.Schedulers.of(pool))
          .clock(io.github.prefixrouter.spi.Clock.system())
          .prefillOverheadNanos(MS).prefillNanosPerToken(0).decodeNanosPerToken(MS / 10)
          .streamChunkTokens(2).slots(2)
          .build();
      java.util.concurrent.CountDownLatch inFirstPiece = new java.util.concurrent.CountDownLatch(1);
      java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
      List<int[]> pieces = new java.util.concurrent.CopyOnWriteArrayList<>();
      java.util.concurrent.atomic.AtomicReference<CompletableFuture<EngineResult>> f =
          new java.util.concurrent.atomic.AtomicReference<>();
      java.util.concurrent.atomic.AtomicBoolean afterResult =
          new java.util.concurrent.atomic.AtomicBoolean();
      f.set(e.execute(new InferenceRequest("s", prompt(1, 32), GenerationParams.greedy(40)),
          (tokens, text) -> {
            if (f.get() != null && f.get().isDone()) {
              afterResult.set(true);
            }
            pieces.add(tokens);
            if (pieces.size() == 1) {
              inFirstPiece.countDown();
              try {
                release.await(30, java.util.concurrent.TimeUnit.SECONDS); // a slow listener
              } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
              }
            }
          }));
      assertTrue(inFirstPiece.await(30, java.util.concurrent.TimeUnit.SECONDS));
      CompletableFuture<EngineLoad> other = new CompletableFuture<>();
      Thread t = new Thread(() -> {
        e.execute(InferenceRequest.of("other", prompt(100, 32)));
        other.complete(e.load());
      }, "another-caller");
      t.setDaemon(true);
      t.start();
      EngineLoad load;
      try {
        load = other.get(5, java.util.concurrent.TimeUnit.SECONDS);
      } catch (java.util.concurrent.TimeoutException ex) {
        load = null;
      }
      Thread.sleep(20); // the decode (4 ms) ends meanwhile, on another scheduler thread
      release.countDown();
      assertNotEquals(null, load,
          "another thread's execute() and load() while the listener ran did not return");
      EngineResult res = f.get().get(30, java.util.concurrent.TimeUnit.SECONDS);
      assertFalse(afterResult.get(), "a piece came after the result");
      assertArrayEquals(res.outputTokens(),
          pieces.stream().flatMapToInt(java.util.Arrays::stream).toArray(),
          "the pieces in order are the result's tokens");
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aReservationThatTakesTheCacheBeyondAnIntOfBlocksStillEvicts() throws Exception {
    // the room check summed cached, reserved and needed blocks in an int: near 2^31 blocks the
    // sum overflowed to a negative one and the evictions a new request needed were skipped.
    // One block per token; 2,047 stalled requests of 2^20 tokens reserve 2^31 - 2^20 blocks
    SimulatedEngine e = engine().blockSize(1).capacityTokens(Integer.MAX_VALUE).slots(4096)
        .build();
    run(e, "small", prompt(1, 5));
    assertEquals(5, e.cachedBlocks());
    InferenceRequest big = InferenceRequest.of("big", prompt(10_000_000, 1 << 20));
    e.stallNext(2048);
    for (int i = 0; i < 2047; i++) {
      e.execute(big);
    }
    sim.runUntilIdle(1_000_000);
    assertEquals(0, e.stats().evictedBlocks(), "room for all of them");
    e.execute(big); // 5 + (2^31 - 2^20) + 2^20 blocks: more than the capacity
    sim.runUntilIdle(1_000_000);
    assertEquals(5, e.stats().evictedBlocks(), "the unpinned blocks are evicted to make room");
    assertEquals(0, e.cachedBlocks());
  }

  @Test
  void aBlockIndexBeyondThePromptIsRefusedWhateverItsSize() {
    // the check computed (index + 1) in an int: for Integer.MAX_VALUE it overflowed to a
    // negative bound that passed, and the lookup ran off the prompt's end instead
    SimulatedEngine e = engine().build();
    int[] p = prompt(1, 32);
    assertEquals(e.blockIdOf(p, 1), e.blockIdOf(CacheScope.DEFAULT, p, 1));
    for (int index : new int[] {2, Integer.MAX_VALUE, -1, Integer.MIN_VALUE}) {
      IllegalArgumentException x = assertThrows(IllegalArgumentException.class,
          () -> e.blockIdOf(p, index), "block " + index);
      assertTrue(x.getMessage().contains("is not a full block"), x.getMessage());
    }
  }

  private EngineResult run(SimulatedEngine e, String id, int[] tokens) throws Exception {
    CompletableFuture<EngineResult> f = e.execute(InferenceRequest.of(id, tokens));
    sim.runUntilIdle(1_000_000);
    assertTrue(f.isDone(), "request " + id + " did not complete");
    return f.get();
  }

  @Test
  void aCacheEventListenerThatThrowsLeavesTheCacheAsWithoutItAndClearable() throws Exception {
    // the engine contract kit checks the requests, hits and later events with such a listener;
    // here what only the engine shows: it caches the very blocks it caches without the
    // listener, and clearCache() empties it although the listener throws
    ThrowingCacheEventListener throwing = new ThrowingCacheEventListener();
    SimulatedEngine e = engine().capacityTokens(16 * 4).build();
    SimulatedEngine quiet = engine().capacityTokens(16 * 4).build();
    e.setCacheEventListener(throwing);
    for (int i = 0; i < 6; i++) {
      int[] p = prompt(1000 * (i % 3), 40);
      run(quiet, "q" + i, p);
      run(e, "r" + i, p);
    }
    assertTrue(e.stats().evictedBlocks() > 0, "the cache evicted");
    assertArrayEquals(quiet.cachedBlockIds(), e.cachedBlockIds());
    int before = throwing.calls();
    e.clearCache(); // the listener throws: the cache is cleared all the same
    assertEquals(0, e.cachedBlocks());
    assertEquals(before + 1, throwing.calls(), "the listener was told of the clear");
  }

  /**
   * A cache event listener that throws a checked exception without declaring it: it got past
   * the engine's catches out of the request's prefill (or of an eviction, or of the clear), so
   * that the request was never answered and held its slot for ever. Handled as any listener
   * that throws: every request completes, the cache is as without the listener.
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
    SimulatedEngine e = engine().capacityTokens(16 * 4).build();
    SimulatedEngine quiet = engine().capacityTokens(16 * 4).build();
    e.setCacheEventListener(throwing);
    for (int i = 0; i < 6; i++) {
      int[] p = prompt(1000 * (i % 3), 40);
      run(quiet, "q" + i, p);
      CompletableFuture<EngineResult> f =
          e.execute(InferenceRequest.of("r" + i, p));
      List<Throwable> escaped = new ArrayList<>();
      for (int k = 0; k < 10_000 && sim.pendingTasks() > 0; k++) {
        try {
          sim.runNext();
        } catch (Throwable t) {
          escaped.add(t);
        }
      }
      assertEquals(List.of(), escaped, "what the listener threw reached the scheduler");
      assertTrue(f.isDone(), "request r" + i + " was never answered");
      f.get();
    }
    assertTrue(e.stats().evictedBlocks() > 0, "the cache evicted");
    assertArrayEquals(quiet.cachedBlockIds(), e.cachedBlockIds());
    assertEquals(0, e.load().total());
    int before = calls[0];
    assertTrue(before > 0, "the listener was told of the stores");
    e.clearCache(); // the listener throws: the cache is cleared all the same
    assertEquals(0, e.cachedBlocks());
    assertEquals(before + 1, calls[0], "the listener was told of the clear");
  }

  @Test
  void hugeTimesPerTokenSaturateInsteadOfLeavingTheRequestInItsSlot() throws Exception {
    // prefill, decode and stream delays overflowed to negative ones, which the scheduler
    // refused: the request held its slot for ever and its future never completed
    long huge = Long.MAX_VALUE / 3;
    SimulatedEngine e = engine().prefillOverheadNanos(huge).prefillNanosPerToken(huge)
        .decodeNanosPerToken(huge).build();
    List<int[]> pieces = new ArrayList<>();
    CompletableFuture<EngineResult> f = e.execute(
        new InferenceRequest("a", prompt(1, 40), GenerationParams.greedy(8)),
        (tokens, text) -> pieces.add(tokens));
    sim.runUntilIdle(1_000);
    assertTrue(f.isDone(), "the request never completed");
    EngineResult r = f.get();
    assertEquals(Long.MAX_VALUE, r.prefillNanos());
    assertEquals(Long.MAX_VALUE, r.decodeNanos());
    assertArrayEquals(r.outputTokens(),
        pieces.stream().flatMapToInt(java.util.Arrays::stream).toArray());
    assertEquals(0, e.load().total());
    assertEquals(Long.MAX_VALUE, e.stats().busyNanos());
  }

  @Test
  void theQueueWaitSaturatesInsteadOfOverflowing() throws Exception {
    // one slot and requests as long as simulated time: the second and third request each wait
    // until its end, and the sum of their waits overflowed to a negative total
    long huge = Long.MAX_VALUE / 3;
    SimulatedEngine e = engine().slots(1).prefillOverheadNanos(huge).prefillNanosPerToken(huge)
        .decodeNanosPerToken(huge).build();
    List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      fs.add(e.execute(new InferenceRequest("w" + i, prompt(1000 * i, 40),
          GenerationParams.greedy(2))));
    }
    sim.runUntilIdle(1_000);
    assertTrue(fs.stream().allMatch(CompletableFuture::isDone), "a request never completed");
    assertEquals(3, e.stats().completed());
    assertEquals(Long.MAX_VALUE, e.stats().queueWaitNanos());
  }

  @Test
  void countsCachedTokensInWholeBlocksAndAlwaysComputesOneToken() throws Exception {
    SimulatedEngine e = engine().build();
    int[] p100 = prompt(1000, 100); // 6 full blocks + 4 tokens
    assertEquals(0, run(e, "a", p100).cachedPromptTokens());
    assertEquals(96, run(e, "b", p100).cachedPromptTokens());
    // a prompt sharing the first 40 tokens: 2 full blocks are shared
    int[] other = concat(prompt(1000, 40), prompt(50_000, 60));
    assertEquals(32, run(e, "c", other).cachedPromptTokens());
    // an exactly block-aligned, fully cached prompt recomputes its last block
    int[] p96 = prompt(1000, 96);
    EngineResult r = run(e, "d", p96);
    assertEquals(80, r.cachedPromptTokens());
    assertEquals(96, r.promptTokens());
    SimulatedEngine.Stats s = e.stats();
    assertEquals(4, s.completed());
    assertEquals(100 + 100 + 100 + 96, s.promptTokens());
    assertEquals(0 + 96 + 32 + 80, s.cachedPromptTokens());
  }

  @Test
  void prefillAndDecodeTakeTheConfiguredSimulatedTime() throws Exception {
    SimulatedEngine e = engine().build();
    int[] p = prompt(7, 200);
    CompletableFuture<EngineResult> f =
        e.execute(new InferenceRequest("x", p, GenerationParams.greedy(3)));
    // prefill 10 ms + 200 * 0.1 ms = 30 ms; decode 3 * 5 ms = 15 ms
    sim.advanceTo(45 * MS - 1);
    assertFalse(f.isDone());
    sim.advanceTo(45 * MS);
    assertTrue(f.isDone());
    EngineResult r = f.get();
    assertEquals(30 * MS, r.prefillNanos());
    assertEquals(15 * MS, r.decodeNanos());
    assertEquals(3, r.outputTokens().length);
    // again: 192 tokens cached, 8 computed
    long t0 = sim.nanoTime();
    CompletableFuture<EngineResult> g = e.execute(InferenceRequest.of("y", p));
    sim.runUntilIdle(1000);
    assertEquals(10 * MS + 8 * MS / 10, g.get().prefillNanos());
    assertEquals(t0 + 10 * MS + 8 * MS / 10 + 5 * MS, sim.nanoTime());
  }

  @Test
  void pendingWorkIsWhatIsLeftOfTheRunningRequestAndTheQueuedOnesPricedOnTheCache()
      throws Exception {
    SimulatedEngine e = engine().build();
    assertEquals(0, e.pendingWorkNanos(), "an idle engine has no work");
    int[] p = prompt(7, 200);
    e.execute(new InferenceRequest("warm", p, GenerationParams.greedy(1)));
    sim.runUntilIdle(1000);
    long t0 = sim.nanoTime();
    // cold, 100 tokens: prefill 10 + 10 ms, decode 2 x 5 ms = 30 ms
    CompletableFuture<EngineResult> a =
        e.execute(new InferenceRequest("a", prompt(50_000, 100), GenerationParams.greedy(2)));
    // 192 of 200 tokens cached: prefill 10 + 0.8 ms, decode 3 x 5 ms = 25.8 ms
    CompletableFuture<EngineResult> b =
        e.execute(new InferenceRequest("b", p, GenerationParams.greedy(3)));
    assertEquals(55_800_000L, e.pendingWorkNanos(), "queued work, priced on the cache");
    sim.runNext(); // a starts
    assertEquals(new EngineLoad(1, 1), e.load());
    assertEquals(55_800_000L, e.pendingWorkNanos(), "a just started: all of it is left");
    sim.advanceTo(t0 + 12 * MS);
    assertEquals(43_800_000L, e.pendingWorkNanos(), "18 ms left of a, b still queued");
    sim.advanceTo(t0 + 40 * MS);
    assertTrue(a.isDone());
    assertEquals(15_800_000L, e.pendingWorkNanos(), "b started at 30 ms: 15.8 ms left");
    sim.runUntilIdle(1000);
    assertTrue(b.isDone());
    assertEquals(0, e.pendingWorkNanos(), "nothing left once every request is answered");
  }

  @Test
  void queuesFifoBehindBusySlots() throws Exception {
    SimulatedEngine e = engine().slots(2).build();
    List<String> order = new ArrayList<>();
    List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      String id = "r" + i;
      CompletableFuture<EngineResult> f = e.execute(InferenceRequest.of(id, prompt(i * 10_000, 100)));
      f.thenRun(() -> order.add(id));
      fs.add(f);
    }
    assertEquals(new EngineLoad(5, 0), e.load());
    sim.runNext(); // dispatch
    assertEquals(new EngineLoad(3, 2), e.load());
    sim.runUntilIdle(10_000);
    assertEquals(List.of("r0", "r1", "r2", "r3", "r4"), order);
    assertEquals(EngineLoad.IDLE, e.load());
    // each request: 10 + 10 ms prefill, 5 ms decode = 25 ms; three waves on two slots
    assertEquals(75 * MS, sim.nanoTime());
    // r2 and r3 wait 25 ms, r4 waits 50 ms
    assertEquals(100 * MS, e.stats().queueWaitNanos());
  }

  @Test
  void evictsTheLeastRecentlyUsedBlocksFirst() throws Exception {
    SimulatedEngine e = engine().capacityTokens(16 * 4).build();
    int[] a = prompt(0, 33); // 2 full blocks
    int[] b = prompt(10_000, 33);
    int[] c = prompt(20_000, 33);
    run(e, "a", a);
    run(e, "b", b);
    run(e, "a2", a); // a is now more recent than b
    run(e, "c", c); // needs 2 blocks: b's go
    assertEquals(32, e.cachedPrefixTokens(a));
    assertEquals(0, e.cachedPrefixTokens(b));
    assertEquals(32, e.cachedPrefixTokens(c));
    assertEquals(4, e.cachedBlocks());
    assertEquals(2, e.stats().evictedBlocks());
  }

  @Test
  void evictsSuffixBlocksBeforeTheSharedPrefix() throws Exception {
    SimulatedEngine e = engine().capacityTokens(16 * 4).build();
    int[] shared = prompt(0, 32);
    int[] x = concat(shared, prompt(10_000, 17)); // blocks S1 S2 X1
    int[] y = concat(shared, prompt(20_000, 17)); // S1 S2 Y1
    int[] z = concat(shared, prompt(30_000, 17)); // S1 S2 Z1
    run(e, "x", x);
    run(e, "y", y);
    assertEquals(4, e.cachedBlocks());
    run(e, "z", z); // full: the LRU leaf X1 goes, the shared blocks stay
    assertEquals(32, e.cachedPrefixTokens(x));
    assertEquals(48, e.cachedPrefixTokens(y));
    assertEquals(48, e.cachedPrefixTokens(z));
  }

  @Test
  void pinnedBlocksOfRunningRequestsAreNeverEvicted() throws Exception {
    SimulatedEngine e = engine().capacityTokens(16 * 2).slots(2).build();
    int[] a = prompt(0, 33);
    int[] b = prompt(10_000, 33);
    // a decodes for a long time after its prefill stored its 2 blocks
    CompletableFuture<EngineResult> fa =
        e.execute(new InferenceRequest("a", a, GenerationParams.greedy(100)));
    sim.advanceBy(50 * MS);
    assertEquals(32, e.cachedPrefixTokens(a));
    EngineResult rb = run(e, "b", b.clone());
    assertTrue(fa.isDone(), "runUntilIdle also finished a");
    assertEquals(0, rb.cachedPromptTokens());
    // b could not cache anything while a pinned the whole cache
    assertEquals(0, e.cachedPrefixTokens(b));
    assertEquals(32, e.cachedPrefixTokens(a));
    // once a is done, b's blocks can replace a's
    run(e, "b2", b);
    assertEquals(32, e.cachedPrefixTokens(b));
    assertEquals(0, e.cachedPrefixTokens(a));
  }

  @Test
  void answersArePureFunctionsOfPromptAndParameters() throws Exception {
    SimulatedEngine e1 = engine().blockIdSeed(1).build();
    SimulatedEngine e2 = engine().blockIdSeed(2).capacityTokens(0).build();
    int[] p = prompt(5, 70);
    GenerationParams g = new GenerationParams(4, 0.7, 0.9, 42);
    run(e1, "warm", p);
    CompletableFuture<EngineResult> f1 = e1.execute(new InferenceRequest("a", p, g));
    CompletableFuture<EngineResult> f2 = e2.execute(new InferenceRequest("b", p, g));
    sim.runUntilIdle(1000);
    assertNotEquals(f1.get().cachedPromptTokens(), f2.get().cachedPromptTokens());
    assertArrayEquals(f1.get().outputTokens(), f2.get().outputTokens());
    assertArrayEquals(SimulatedEngine.expectedOutput(p, g, 151_936), f1.get().outputTokens());
    GenerationParams otherSeed = new GenerationParams(4, 0.7, 0.9, 43);
    assertFalse(
        java.util.Arrays.equals(
            SimulatedEngine.expectedOutput(p, g, 151_936),
            SimulatedEngine.expectedOutput(p, otherSeed, 151_936)));
    int[] q = p.clone();
    q[69]++;
    assertFalse(
        java.util.Arrays.equals(
            SimulatedEngine.expectedOutput(p, g, 151_936),
            SimulatedEngine.expectedOutput(q, g, 151_936)));
  }

  @Test
  void publishesVllmShapedEvents() throws Exception {
    SimulatedEngine e = engine().capacityTokens(16 * 3).build();
    List<String> log = new ArrayList<>();
    e.setCacheEventListener(
        new CacheEventListener() {
          @Override
          public void onBlocksStored(long parent, long[] ids, int[] tokens) {
            log.add("stored parent=" + parent + " n=" + ids.length + " tokens=" + tokens.length
                + " first=" + tokens[0]);
          }

          @Override
          public void onBlocksRemoved(long[] ids) {
            log.add("removed n=" + ids.length);
          }

          @Override
          public void onAllCleared() {
            log.add("cleared");
          }
        });
    int[] a = prompt(100, 40); // 2 blocks
    int[] a2 = concat(prompt(100, 32), prompt(9000, 20)); // shares 2 blocks, adds 1
    int[] b = prompt(5000, 20); // 1 block: evicts a2's leaf
    run(e, "a", a);
    run(e, "a2", a2);
    run(e, "b", b);
    long a1id = e.blockIdOf(a, 1);
    assertEquals(
        List.of(
            "stored parent=0 n=2 tokens=32 first=100",
            "stored parent=" + a1id + " n=1 tokens=16 first=9000",
            "removed n=1",
            "stored parent=0 n=1 tokens=16 first=5000"),
        log);
    e.clearCache();
    assertEquals("cleared", log.get(log.size() - 1));
    assertEquals(0, e.cachedBlocks());
    assertThrows(IllegalStateException.class, () -> e.setCacheEventListener(new CacheEventListener() {}));
  }

  @Test
  void noEventsWhenDisabled() throws Exception {
    SimulatedEngine e = engine().publishesCacheEvents(false).build();
    assertFalse(e.publishesCacheEvents());
    List<String> log = new ArrayList<>();
    e.setCacheEventListener(
        new CacheEventListener() {
          @Override
          public void onBlocksStored(long parent, long[] ids, int[] tokens) {
            log.add("stored");
          }
        });
    run(e, "a", prompt(0, 64));
    assertEquals(List.of(), log);
    assertEquals(48, run(e, "b", prompt(0, 64)).cachedPromptTokens());
  }

  @Test
  void injectedFailuresAreRetryableAndNeverCompleteOnTheCallersThread() throws Exception {
    SimulatedEngine e = engine().build();
    e.failNext(2);
    CompletableFuture<EngineResult> f1 = e.execute(InferenceRequest.of("1", prompt(0, 20)));
    CompletableFuture<EngineResult> f2 = e.execute(InferenceRequest.of("2", prompt(0, 20)));
    CompletableFuture<EngineResult> f3 = e.execute(InferenceRequest.of("3", prompt(0, 20)));
    assertFalse(f1.isDone());
    sim.runUntilIdle(1000);
    for (CompletableFuture<EngineResult> f : List.of(f1, f2)) {
      ExecutionException ex = assertThrows(ExecutionException.class, f::get);
      assertTrue(ex.getCause() instanceof EngineException);
      assertTrue(((EngineException) ex.getCause()).retryable());
    }
    assertEquals(1, f3.get().outputTokens().length);
    assertEquals(2, e.stats().failed());
  }

  @Test
  void probabilisticFailuresReplayFromTheSeed() {
    List<Boolean> first = failurePattern(99);
    assertEquals(first, failurePattern(99));
    long failures = first.stream().filter(b -> b).count();
    assertTrue(failures > 20 && failures < 80, "about 50 of 200 should fail, was " + failures);
  }

  private List<Boolean> failurePattern(long seed) {
    SimulatedScheduler s = new SimulatedScheduler();
    SimulatedEngine e =
        SimulatedEngine.builder()
            .scheduler(s)
            .random(new SplittableRandom(seed))
            .failureProbability(0.25)
            .build();
    List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
    for (int i = 0; i < 200; i++) {
      fs.add(e.execute(InferenceRequest.of("r" + i, prompt(i, 20))));
    }
    s.runUntilIdle(1_000_000);
    List<Boolean> out = new ArrayList<>();
    for (CompletableFuture<EngineResult> f : fs) {
      assertTrue(f.isDone());
      out.add(f.isCompletedExceptionally());
    }
    return out;
  }

  @Test
  void stalledRequestsHoldTheirSlotUntilCancelled() throws Exception {
    SimulatedEngine e = engine().slots(1).build();
    e.stallNext(1);
    CompletableFuture<EngineResult> stuck = e.execute(InferenceRequest.of("stuck", prompt(0, 40)));
    CompletableFuture<EngineResult> next = e.execute(InferenceRequest.of("next", prompt(0, 40)));
    sim.advanceBy(10_000 * MS);
    assertFalse(stuck.isDone());
    assertFalse(next.isDone());
    assertEquals(new EngineLoad(1, 1), e.load());
    e.cancel("stuck");
    sim.runUntilIdle(1000);
    ExecutionException ex = assertThrows(ExecutionException.class, stuck::get);
    assertTrue(ex.getCause() instanceof EngineException);
    assertFalse(((EngineException) ex.getCause()).retryable());
    assertEquals(0, next.get().cachedPromptTokens()); // the stalled prefill stored nothing
    assertEquals(1, e.stats().cancelled());
  }

  @Test
  void cancelsQueuedAndRunningRequests() throws Exception {
    SimulatedEngine e = engine().slots(1).build();
    CompletableFuture<EngineResult> running =
        e.execute(new InferenceRequest("run", prompt(0, 40), GenerationParams.greedy(50)));
    CompletableFuture<EngineResult> queued = e.execute(InferenceRequest.of("q", prompt(500, 40)));
    sim.advanceBy(100 * MS); // run is decoding: its blocks are stored
    e.cancel("q");
    e.cancel("run");
    e.cancel("unknown");
    sim.runUntilIdle(1000);
    assertTrue(running.isCompletedExceptionally());
    assertTrue(queued.isCompletedExceptionally());
    assertEquals(EngineLoad.IDLE, e.load());
    assertEquals(32, e.cachedPrefixTokens(prompt(0, 40)));
    assertEquals(2, e.stats().cancelled());
  }

  @Test
  void rejectsInvalidConfigurationWithClearMessages() {
    SimulatedEngine.Builder b = SimulatedEngine.builder();
    assertTrue(
        assertThrows(IllegalArgumentException.class, () -> b.blockSize(0))
            .getMessage().contains("blockSize"));
    assertTrue(
        assertThrows(IllegalArgumentException.class, () -> b.capacityTokens(-1))
            .getMessage().contains("capacityTokens"));
    assertTrue(
        assertThrows(IllegalArgumentException.class, () -> b.slots(0))
            .getMessage().contains("slots"));
    assertTrue(
        assertThrows(IllegalArgumentException.class, () -> b.prefillNanosPerToken(-5))
            .getMessage().contains("prefillNanosPerToken"));
    assertTrue(
        assertThrows(IllegalArgumentException.class, () -> b.failureProbability(1.5))
            .getMessage().contains("failureProbability"));
    assertTrue(
        assertThrows(IllegalArgumentException.class, () -> b.stallProbability(Double.NaN))
            .getMessage().contains("stallProbability"));
    assertTrue(
        assertThrows(IllegalStateException.class, b::build).getMessage().contains("scheduler"));
    b.scheduler((d, t) -> () -> false);
    assertTrue(assertThrows(IllegalStateException.class, b::build).getMessage().contains("clock"));
    b.clock(() -> 0L).failureProbability(0.1);
    assertTrue(assertThrows(IllegalStateException.class, b::build).getMessage().contains("random"));
    SimulatedEngine e = engine().build();
    assertThrows(IllegalArgumentException.class, () -> e.failNext(-1));
    assertThrows(NullPointerException.class, () -> e.execute(null));
  }

  @Test
  void itStreamsPiecesWhileDecodingThatAddUpToTheResult() throws Exception {
    SimulatedEngine e = engine().streamChunkTokens(3).build();
    InferenceRequest r = new InferenceRequest("s1", prompt(1, 32),
        io.github.prefixrouter.GenerationParams.greedy(10));
    java.util.List<int[]> pieces = new java.util.ArrayList<>();
    java.util.List<Long> times = new java.util.ArrayList<>();
    CompletableFuture<EngineResult> f = e.execute(r, (t, text) -> {
      pieces.add(t);
      times.add(sim.nanoTime());
      assertEquals("", text);
    });
    sim.runUntilIdle(1_000_000);
    EngineResult res = f.get();
    // pieces of 3, 3, 3 at each third token, then the last token with the result
    assertEquals(4, pieces.size());
    int[] all = pieces.stream().flatMapToInt(java.util.Arrays::stream).toArray();
    assertArrayEquals(res.outputTokens(), all);
    assertArrayEquals(SimulatedEngine.expectedOutput(r.tokens(), r.params(), 151_936), all);
    long prefillEnd = 10 * MS + 32 * MS / 10;
    assertEquals(java.util.List.of(prefillEnd + 15 * MS, prefillEnd + 30 * MS,
        prefillEnd + 45 * MS, prefillEnd + 50 * MS), times);
  }

  @Test
  void aCancelledRequestStreamsNoMoreAndNobodyListeningSchedulesNothing() throws Exception {
    SimulatedEngine e = engine().streamChunkTokens(2).build();
    InferenceRequest r = new InferenceRequest("s1", prompt(1, 32),
        io.github.prefixrouter.GenerationParams.greedy(20));
    java.util.List<int[]> pieces = new java.util.ArrayList<>();
    CompletableFuture<EngineResult> f = e.execute(r, (t, text) -> pieces.add(t));
    sim.advanceBy(10 * MS + 32 * MS / 10 + 25 * MS); // 5 tokens decoded: 2 pieces of 2
    assertEquals(2, pieces.size());
    e.cancel("s1");
    sim.runUntilIdle(1_000_000);
    assertTrue(f.isCompletedExceptionally());
    assertEquals(2, pieces.size(), "a piece after the cancel");
    // without a listener: one timer for the prefill, one for the decode
    SimulatedEngine quiet = engine().streamChunkTokens(1).build();
    long before = sim.executedTasks();
    quiet.execute(new InferenceRequest("q1", prompt(500, 32),
        io.github.prefixrouter.GenerationParams.greedy(20)));
    sim.runUntilIdle(1_000_000);
    assertEquals(3, sim.executedTasks() - before, "dispatch, prefill end, decode end");
  }

  @Test
  void theOutputEndsAfterTheFirstStopTokenIdAndTakesOnlyItsDecodeTime() throws Exception {
    GenerationParams plain = new GenerationParams(40, 0.0, 1.0, 3L);
    int[] p = prompt(7000, 64);
    int[] whole = SimulatedEngine.expectedOutput(p, plain, 50);
    int stop = whole[9];
    int first = 0;
    while (whole[first] != stop) {
      first++;
    }
    GenerationParams withStop = plain.withStops(List.of(), List.of(stop));
    int[] cut = SimulatedEngine.expectedOutput(p, withStop, 50);
    assertArrayEquals(java.util.Arrays.copyOf(whole, first + 1), cut);
    SimulatedEngine e = engine().vocabularySize(50).build();
    List<int[]> pieces = new ArrayList<>();
    long t0 = sim.nanoTime();
    CompletableFuture<EngineResult> f = e.execute(new InferenceRequest("s", p, withStop),
        (tokens, text) -> pieces.add(tokens));
    long[] doneAt = new long[1];
    f.thenRun(() -> doneAt[0] = sim.nanoTime());
    sim.runUntilIdle(1_000_000);
    EngineResult r = f.join();
    assertArrayEquals(cut, r.outputTokens());
    assertArrayEquals(cut, pieces.stream().flatMapToInt(java.util.Arrays::stream).toArray());
    assertEquals(5 * MS * cut.length, r.decodeNanos(), "decode time of the tokens generated");
    assertEquals(10 * MS + MS / 10 * 64 + 5 * MS * cut.length, doneAt[0] - t0);
  }

  /**
   * A listener that throws a checked exception (thrown without declaring it, as code in a
   * language without checked exceptions does) on the last piece: it escaped the catch of
   * unchecked ones, ended the hand-over with the result still queued behind the piece, and the
   * request was never answered. It is treated as any listener that throws: it gets no more
   * pieces, and the result is still handed over.
   */
  @Test
  void aListenerThatThrowsACheckedExceptionStillGetsTheRequestAnswered() {
    SimulatedEngine e = engine().streamChunkTokens(4).build();
    int[] calls = new int[2];
    CompletableFuture<EngineResult> early = e.execute(
        new InferenceRequest("early", prompt(1, 32), GenerationParams.greedy(12)),
        (tokens, text) -> {
          calls[0]++;
          throw ThrowingCacheEventListener.<RuntimeException>undeclared(new java.io.IOException("early"));
        });
    CompletableFuture<EngineResult> last = e.execute(
        new InferenceRequest("last", prompt(200, 32), GenerationParams.greedy(1)),
        (tokens, text) -> {
          calls[1]++;
          throw ThrowingCacheEventListener.<RuntimeException>undeclared(new java.io.IOException("last"));
        });
    List<Throwable> escaped = new ArrayList<>();
    for (int i = 0; i < 10_000 && sim.pendingTasks() > 0; i++) {
      try {
        sim.runNext();
      } catch (Throwable t) {
        escaped.add(t);
      }
    }
    assertEquals(List.of(), escaped, "what a listener threw reached the scheduler");
    assertTrue(early.isDone() && last.isDone(), "a request was never answered");
    assertEquals(12, early.join().outputTokens().length);
    assertEquals(1, last.join().outputTokens().length);
    assertEquals(1, calls[0], "a listener that threw got more pieces");
    assertEquals(1, calls[1]);
  }
}
