package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouteDecision.Candidate;
import io.github.prefixrouter.RouteDecision.Reason;
import io.github.prefixrouter.RouteDecision.SkipReason;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.spi.EngineLoad;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * {@link PromptChain} with a {@link PrefixHashCache} against the naive model: the chain hashed
 * from scratch by the hasher, and the list of every prompt offered before (a block can only be
 * reused if some earlier prompt had the same tokens up to its end).
 */
class PrefixHashCacheTest {

  private static final int HEAD = PrefixHashCache.HEAD_BLOCKS;

  /** Counts the blocks the hasher really computes. */
  static final class CountingHasher implements ChainHasher {
    final BlockHasher hasher;
    long blocks;

    CountingHasher(int blockSize, long salt) {
      hasher = new BlockHasher(blockSize, salt);
    }

    @Override
    public int chain(int[] tokens, int length, long[] out) {
      return extend(tokens, 0, length, out);
    }

    @Override
    public int extend(int[] tokens, int done, int length, long[] out) {
      return extend(BlockHasher.ROOT_PARENT, tokens, done, length, out);
    }

    @Override
    public int extend(long scopeRoot, int[] tokens, int done, int length, long[] out) {
      int n = hasher.extend(scopeRoot, tokens, done, length, out);
      blocks += Math.max(0, n - done);
      return n;
    }
  }

  /** The cache scopes requests are drawn from (their chains' root parents). */
  static final long[] SCOPES = {
    BlockHasher.ROOT_PARENT, BlockHasher.scopeRoot("lora-a", ""), BlockHasher.scopeRoot("", "t1")
  };

  /** A workload of prompt families: a shared preamble per family, then a random tail. */
  static int[] prompt(SplittableRandom r, int[][] preambles, int maxTail) {
    int[] pre = preambles[r.nextInt(preambles.length)];
    int keep = r.nextInt(4) == 0 ? r.nextInt(pre.length + 1) : pre.length;
    int tail = r.nextInt(maxTail + 1);
    int[] t = Arrays.copyOf(pre, keep + tail);
    for (int i = keep; i < t.length; i++) {
      t[i] = r.nextInt(4) == 0 ? r.nextInt() : r.nextInt(1000);
    }
    return t;
  }

  /** {@code prefix} followed by {@code tail} random tokens below {@code bound}. */
  static int[] withRandomTail(SplittableRandom r, int[] prefix, int tail, int bound) {
    int[] t = Arrays.copyOf(prefix, prefix.length + tail);
    for (int i = prefix.length; i < t.length; i++) {
      t[i] = r.nextInt(bound);
    }
    return t;
  }

  static int[][] preambles(SplittableRandom r, int families, int blockSize) {
    int[][] p = new int[families][];
    int[] common = new int[r.nextInt(3 * blockSize)]; // families may share a first few tokens
    for (int i = 0; i < common.length; i++) {
      common[i] = r.nextInt(1000);
    }
    for (int f = 0; f < families; f++) {
      p[f] = Arrays.copyOf(common, common.length + r.nextInt(60 * blockSize));
      for (int i = common.length; i < p[f].length; i++) {
        p[f][i] = r.nextInt(1000);
      }
    }
    return p;
  }

  private static int commonBlocks(int[] a, int[] b, int blockSize) {
    int n = Math.min(a.length, b.length);
    int m = Arrays.mismatch(a, 0, n, b, 0, n);
    return (m < 0 ? n : m) / blockSize;
  }

  @Property
  void chainsEqualTheHashersAndReuseOnlyWhatAnEarlierPromptShared(
      @ForAll @IntRange(min = 1, max = 6) int blockSize,
      @ForAll long salt,
      @ForAll long seed,
      @ForAll @IntRange(min = 1, max = 70) int families,
      @ForAll @IntRange(min = 1, max = 60) int requests,
      @ForAll @IntRange(min = 1, max = 3) int scopes) {
    SplittableRandom r = new SplittableRandom(seed);
    int[][] pre = preambles(r, families, blockSize);
    CountingHasher hasher = new CountingHasher(blockSize, salt);
    PrefixHashCache cache = new PrefixHashCache(blockSize);
    PromptChain chain = new PromptChain();
    List<int[]> offered = new ArrayList<>();
    List<Long> offeredScopes = new ArrayList<>();
    for (int q = 0; q < requests; q++) {
      int[] t = prompt(r, pre, 20 * blockSize);
      long scope = SCOPES[r.nextInt(scopes)]; // the same prompts in several scopes
      int maxBlocks = t.length / blockSize;
      if (scope == BlockHasher.ROOT_PARENT && r.nextBoolean()) {
        chain.reset(t, hasher, blockSize, cache);
      } else {
        chain.reset(scope, t, hasher, blockSize, cache);
      }
      long before = hasher.blocks;
      // ask in chunks as the replica query does, and stop at a random point
      int stop = r.nextInt(maxBlocks + 2);
      int asked = 0;
      while (asked < stop) {
        asked += 1 + r.nextInt(20);
        assertEquals(Math.min(asked, maxBlocks), chain.ensure(asked));
      }
      int done = chain.hashed();
      long[] expected = hasher.hasher.chain(scope, t);
      assertArrayEquals(Arrays.copyOf(expected, done), Arrays.copyOf(chain.hashes(), done));
      if (maxBlocks <= PrefixHashCache.MIN_PROMPT_BLOCKS) {
        assertEquals(0, chain.reused(), "a short prompt bypasses the cache");
      }
      assertEquals(done, chain.reused() + (hasher.blocks - before), "reused + hashed = done");
      int shared = 0;
      for (int i = 0; i < offered.size(); i++) {
        if (offeredScopes.get(i) == scope) { // only a prompt of the same scope can lend hashes
          shared = Math.max(shared, commonBlocks(t, offered.get(i), blockSize));
        }
      }
      assertTrue(chain.reused() <= Math.max(0, shared - HEAD),
          "reused " + chain.reused() + " blocks, but earlier prompts share only " + shared);
      chain.finish();
      offered.add(t);
      offeredScopes.add(scope);
      checkInvariants(cache, hasher.hasher);
    }
  }

  @Property(tries = 60)
  void decisionsAreTheSameWithAndWithoutTheCache(
      @ForAll long seed,
      @ForAll @IntRange(min = 1, max = 12) int peers,
      @ForAll boolean longestPrefix) {
    SplittableRandom r = new SplittableRandom(seed);
    int[][] pre = preambles(r, 4, 16);
    RouterConfig cfg = RouterConfig.builder()
        .policy(longestPrefix ? RoutingPolicy.LONGEST_PREFIX : RoutingPolicy.COST_AWARE)
        .initialPrefillNanosPerToken(1 + r.nextInt(200_000)).build();
    RoutePlannerTest.ScriptedView v = new RoutePlannerTest.ScriptedView();
    for (int p = 0; p < peers; p++) {
      String id = "p" + p;
      v.peer(id, r.nextInt(4) == 0 ? -1 : r.nextLong(50_000_000L));
      int[] held = prompt(r, pre, 16 * 20);
      v.holds(id, held, r.nextInt(held.length + 1));
      v.queue.put(id, r.nextInt(3));
      if (r.nextInt(3) == 0) {
        v.age.put(id, r.nextLong(60_000_000_000L));
      }
      if (r.nextInt(6) == 0) {
        v.overloaded.add(id);
      }
    }
    int localMatch = r.nextInt(16 * 20);
    PeerHealth health = new PeerHealth();
    RoutePlanner cached = RoutePlannerTest.planner(cfg, "me", v, localMatch, health, true);
    RoutePlanner plain = RoutePlannerTest.planner(cfg, "me", v, localMatch, health, false);
    for (int q = 0; q < 40; q++) {
      int[] t = prompt(r, pre, 16 * 20);
      RouteDecision a = cached.decide(t);
      RouteDecision b = plain.decide(t);
      assertEquals(b.toString(), a.toString());
      checkChoice(a, longestPrefix);
    }
  }

  /** The target against a naive scan of the decision's own candidates. */
  private static void checkChoice(RouteDecision d, boolean longestPrefix) {
    List<Candidate> c = d.candidates();
    int best = -1;
    for (int k = 1; k < c.size(); k++) {
      Candidate x = c.get(k);
      if (x.skipped() != SkipReason.NONE) {
        continue;
      }
      boolean better;
      if (best < 0) {
        better = true;
      } else if (longestPrefix) {
        Candidate y = c.get(best);
        better = x.matchedTokens() > y.matchedTokens()
            || (x.matchedTokens() == y.matchedTokens() && x.load() < y.load());
      } else {
        better = x.costNanos() < c.get(best).costNanos();
      }
      if (better) {
        best = k;
      }
    }
    if (d.reason() == Reason.PEER_LONGEST || d.reason() == Reason.PEER_CHEAPER) {
      assertEquals(c.get(best).nodeId(), d.targetNodeId(), d.toString());
    }
    if (longestPrefix && best > 0) {
      boolean peerWins = c.get(best).matchedTokens() > c.get(0).matchedTokens();
      assertEquals(peerWins ? Reason.PEER_LONGEST : Reason.LOCAL_LONGEST_OR_TIE, d.reason(),
          d.toString());
    }
  }

  static void checkInvariants(PrefixHashCache cache, BlockHasher reference) {
    int bs = cache.blockSize();
    PrefixHashCache.Entry[] entries = cache.snapshot();
    assertEquals(PrefixHashCache.SETS * PrefixHashCache.WAYS, entries.length);
    for (int s = 0; s < PrefixHashCache.SETS; s++) {
      Set<Long> heads = new HashSet<>();
      for (int w = 0; w < PrefixHashCache.WAYS; w++) {
        PrefixHashCache.Entry e = entries[s * PrefixHashCache.WAYS + w];
        if (e == null) {
          continue;
        }
        assertTrue(e.blocks() > HEAD && e.blocks() <= PrefixHashCache.MAX_ENTRY_BLOCKS);
        assertEquals(e.blocks() * bs, e.tokens.length);
        assertArrayEquals(reference.chain(e.scopeRoot, e.tokens), e.hashes,
            "an entry's hashes are its chain");
        assertTrue(heads.add(e.headKey()), "two entries for one head in a set");
      }
    }
  }

  /**
   * Blocks the hasher computed for each of four requests of one family: a random preamble of
   * {@code preambleBlocks} blocks, then a fresh 40-block tail; {@code use} asks the chain for
   * blocks as a decision would, and the chain is then offered to the cache.
   */
  private static long[] hashedPerRequestOfOneFamily(
      long seed, int preambleBlocks, java.util.function.BiConsumer<PromptChain, int[]> use) {
    SplittableRandom r = new SplittableRandom(seed);
    int[] preamble = withRandomTail(r, new int[0], 16 * preambleBlocks, 50_000);
    CountingHasher hasher = new CountingHasher(16, 0);
    PrefixHashCache cache = new PrefixHashCache(16);
    PromptChain chain = new PromptChain();
    long[] hashedPerRequest = new long[4];
    for (int q = 0; q < 4; q++) {
      int[] t = withRandomTail(r, preamble, 16 * 40, 50_000);
      chain.reset(t, hasher, 16, cache);
      long before = hasher.blocks;
      use.accept(chain, t);
      hashedPerRequest[q] = hasher.blocks - before;
      assertArrayEquals(Arrays.copyOf(hasher.hasher.chain(t), chain.hashed()),
          Arrays.copyOf(chain.hashes(), chain.hashed()));
      chain.finish();
    }
    return hashedPerRequest;
  }

  @Test
  void aFamilyIsAdmittedOnItsSecondRequestAndThenReusesItsPreamble() {
    long[] hashed = hashedPerRequestOfOneFamily(3, 200,
        (chain, t) -> assertEquals(240, chain.ensure(240)));
    // 1st: all hashed, remembered by the filter; 2nd: all hashed, admitted; 3rd and 4th: the
    // head and the tail hashed, the preamble's other 192 blocks copied
    assertArrayEquals(new long[] {240, 240, 48, 48}, hashed);
  }

  /**
   * {@link PromptChain#ensureSome} as the replica query calls it (chunks of 8, then 16 more),
   * stopping at a random block as if no peer held it: the chain is the hasher's, every call
   * makes progress and never passes what was asked, {@link PromptChain#ensure} still gives all
   * that is asked, and past a copied stretch at most {@code max(MIN_STEP, 2 × needed)} blocks are
   * hashed for the {@code needed} blocks the query went on to read.
   */
  @Property
  void ensureSomeProgressesAndHashesLittlePastACopiedStretch(
      @ForAll long seed,
      @ForAll @IntRange(min = 1, max = 8) int families,
      @ForAll @IntRange(min = 1, max = 40) int requests) {
    SplittableRandom r = new SplittableRandom(seed);
    int blockSize = 16;
    int[][] pre = new int[families][];
    for (int f = 0; f < families; f++) {
      pre[f] = withRandomTail(r, new int[0], blockSize * (HEAD + 30 + r.nextInt(100)), 1000);
    }
    CountingHasher hasher = new CountingHasher(blockSize, 0);
    PrefixHashCache cache = new PrefixHashCache(blockSize);
    PromptChain chain = new PromptChain();
    for (int q = 0; q < requests; q++) {
      int[] t = withRandomTail(r, pre[r.nextInt(families)], blockSize * r.nextInt(60), 1000);
      int maxBlocks = t.length / blockSize;
      long[] expected = hasher.hasher.chain(t);
      int stop = r.nextInt(maxBlocks + 1); // the first block no peer holds
      chain.reset(t, hasher, blockSize, cache);
      long before = hasher.blocks;
      int i = 0;
      int avail = 0;
      while (i < stop) {
        if (i == avail) {
          int asked = i == 0 ? HEAD : i + 16;
          int got = chain.ensureSome(asked);
          assertTrue(got > avail || avail == maxBlocks, "no progress at " + avail);
          assertTrue(got <= Math.min(asked, maxBlocks), got + " blocks for " + asked);
          avail = got;
        }
        i++;
      }
      int done = chain.hashed();
      assertArrayEquals(Arrays.copyOf(expected, done), Arrays.copyOf(chain.hashes(), done));
      long hashed = hasher.blocks - before;
      assertEquals(done, chain.reused() + hashed, "reused + hashed = done");
      int copyEnd = HEAD + chain.reused();
      if (chain.reused() > 0 && done > copyEnd) {
        int needed = Math.max(0, stop - copyEnd);
        assertTrue(done - copyEnd <= Math.max(PromptChain.MIN_STEP, 2 * needed),
            (done - copyEnd) + " blocks hashed past the copy for " + needed + " needed");
      }
      // ensure still gives everything asked
      assertEquals(maxBlocks, chain.ensure(maxBlocks));
      assertArrayEquals(expected, Arrays.copyOf(chain.hashes(), maxBlocks));
      chain.finish();
      checkInvariants(cache, hasher.hasher);
    }
  }

  /**
   * The common served prompt, a cached preamble then a user turn no peer holds: the query reads
   * up to the first block of the turn, so past the preamble two blocks are hashed, not a chunk.
   */
  @Test
  void aTurnAfterACachedPreambleIsHashedTwoBlocksFar() {
    long[] hashed = hashedPerRequestOfOneFamily(9, 140, (chain, t) -> {
      int avail = 0;
      for (int i = 0; i <= 140; i++) { // peers hold the preamble, nobody the turn (block 140)
        if (i == avail) {
          avail = chain.ensureSome(i == 0 ? HEAD : i + 16);
        }
      }
    });
    // 1st and 2nd: hashed to the end of the chunk holding block 140 (152 = 8 + 9 x 16), the 2nd
    // admitted with the preamble; 3rd and 4th: the head, then two blocks past the copied
    // preamble (a whole chunk would have been 12)
    assertArrayEquals(new long[] {152, 152, HEAD + PromptChain.MIN_STEP,
        HEAD + PromptChain.MIN_STEP}, hashed);
  }

  @Test
  void promptsWithoutSharedPrefixesAreNeverAdmitted() {
    SplittableRandom r = new SplittableRandom(5);
    PrefixHashCache cache = new PrefixHashCache(16);
    PromptChain chain = new PromptChain();
    BlockHasher hasher = new BlockHasher(16, 0);
    for (int q = 0; q < 2_000; q++) {
      int[] t = new int[16 * (PrefixHashCache.MIN_PROMPT_BLOCKS + 1 + r.nextInt(300))];
      for (int i = 0; i < t.length; i++) {
        t[i] = r.nextInt();
      }
      chain.reset(t, new BlockChain(hasher), 16, cache);
      chain.ensure(t.length / 16);
      assertFalse(cache.offer(t, chain.hashes(), chain.hashed(), chain.reused(), chain.hashed()));
    }
    for (PrefixHashCache.Entry e : cache.snapshot()) {
      assertNull(e);
    }
  }

  @Test
  void memoryStaysBoundedUnderManyFamiliesOfLongPrompts() {
    SplittableRandom r = new SplittableRandom(6);
    int[][] pre = new int[300][];
    for (int f = 0; f < pre.length; f++) {
      pre[f] = new int[16 * 1200]; // longer than an entry keeps
      for (int i = 0; i < pre[f].length; i++) {
        pre[f][i] = r.nextInt(50_000);
      }
    }
    BlockHasher reference = new BlockHasher(16, 0);
    PrefixHashCache cache = new PrefixHashCache(16);
    PromptChain chain = new PromptChain();
    for (int q = 0; q < 900; q++) {
      int[] t = pre[q % pre.length];
      chain.reset(t, new BlockChain(reference), 16, cache);
      chain.ensure(t.length / 16);
      chain.finish();
    }
    long tokens = 0;
    for (PrefixHashCache.Entry e : cache.snapshot()) {
      tokens += e == null ? 0 : e.tokens.length;
    }
    assertTrue(tokens <= (long) PrefixHashCache.SETS * PrefixHashCache.WAYS
        * PrefixHashCache.MAX_ENTRY_BLOCKS * 16, tokens + " tokens cached");
    assertTrue(tokens > 0, "families repeating should have been admitted");
    checkInvariants(cache, reference);
  }

  @Test
  void concurrentChainsOverOneCacheAlwaysEqualTheHashers() throws Exception {
    int threads = 4;
    BlockHasher reference = new BlockHasher(16, 7);
    PrefixHashCache cache = new PrefixHashCache(16);
    int[][] pre = preambles(new SplittableRandom(8), 6, 16);
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    CountDownLatch start = new CountDownLatch(1);
    try {
      List<Future<Long>> results = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        long seed = 100 + t;
        results.add(pool.submit(() -> {
          SplittableRandom r = new SplittableRandom(seed);
          PromptChain chain = new PromptChain();
          long reused = 0;
          start.await();
          for (int q = 0; q < 3_000; q++) {
            int[] p = prompt(r, pre, 16 * 20);
            chain.reset(p, new BlockChain(reference), 16, cache);
            int done = chain.ensure(p.length / 16);
            long[] expected = reference.chain(p);
            if (!Arrays.equals(expected, Arrays.copyOf(chain.hashes(), done))) {
              throw new AssertionError("wrong chain for request " + q + " of thread " + seed);
            }
            reused += chain.reused();
            chain.finish();
          }
          return reused;
        }));
      }
      start.countDown();
      long reused = 0;
      for (Future<Long> f : results) {
        reused += f.get(60, TimeUnit.SECONDS);
      }
      assertTrue(reused > 0, "the families' preambles should have been reused");
      checkInvariants(cache, reference);
    } finally {
      pool.shutdownNow();
    }
  }
}
