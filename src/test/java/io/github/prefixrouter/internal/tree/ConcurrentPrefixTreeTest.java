package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheEventStats;
import io.github.prefixrouter.spi.CacheEventListener;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class ConcurrentPrefixTreeTest {

  static int[] seq(int from, int to) {
    return IntStream.range(from, to).toArray();
  }

  static int[] cat(int[] a, int[] b) {
    int[] r = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, r, a.length, b.length);
    return r;
  }

  /**
   * Replays block events into a set, and records each event that does not fit it (a block
   * stored while held, or evicted while not held). It records rather than asserts: the tree
   * counts and logs what a listener throws, Errors included, so an assertion thrown here would
   * fail no test; {@link #assertConsistent} checks the record instead.
   */
  static final class Replay implements BlockEventListener {
    final Set<Long> held = new HashSet<>();
    final List<String> log = new ArrayList<>();
    final List<String> errors = new ArrayList<>();

    @Override
    public void onStored(long[] hashes) {
      for (long h : hashes) {
        if (!held.add(h)) {
          errors.add("stored twice: " + h);
        }
      }
      log.add("stored " + hashes.length);
    }

    @Override
    public void onEvicted(long[] hashes) {
      for (long h : hashes) {
        if (!held.remove(h)) {
          errors.add("evicted but not held: " + h);
        }
      }
      log.add("evicted " + hashes.length);
    }

    @Override
    public void onCleared() {
      held.clear();
      log.add("cleared");
    }

    /** Fails if any event so far stored a held block or evicted one not held. */
    void assertConsistent(String when) {
      assertEquals(List.of(), errors, "block events that do not replay, " + when);
    }

    void assertConsistent() {
      assertConsistent("at the end");
    }
  }

  /**
   * A node's children go from dense arrays to a child table and back as they come and go: the
   * root here gets up to 200 children whose first tokens collide in small tables, then loses
   * them in LRU order; every step keeps the invariants and every match.
   */
  @Test
  void childTablesGrowAndShrinkWithTheChildren() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.selfManaged(10_000);
    int n = 200;
    int[][] prompts = new int[n][];
    for (int i = 0; i < n; i++) {
      int first = (i % 2 == 0 ? i : -i) * 1024; // equal low bits: many share a home slot
      prompts[i] = new int[] {first, i, i + 1};
      t.insert(prompts[i]);
      t.checkInvariants();
      assertEquals(i + 1, ConcurrentPrefixTree.childCount(t.rootForTest()));
    }
    assertTrue(t.rootForTest().kids.length > n, "a table, not dense arrays");
    for (int i = 0; i < n; i++) {
      assertEquals(3, t.match(prompts[i]), "prompt " + i);
      assertEquals(1, t.match(new int[] {prompts[i][0], -7}));
    }
    assertEquals(0, t.match(new int[] {5 * 1024 + 1}));
    for (int i = 0; i < n; i++) { // evicts prompt i, the least recently used
      t.evictTo(3L * (n - i - 1));
      t.checkInvariants();
      assertEquals(n - i - 1, ConcurrentPrefixTree.childCount(t.rootForTest()));
      assertEquals(0, t.match(prompts[i]));
      if (i + 1 < n) {
        assertEquals(3, t.match(prompts[n - 1]));
        assertEquals(3, t.match(prompts[i + 1]));
      }
    }
    assertEquals(0, t.rootForTest().kids.length);
  }

  @Test
  void matchesLongestCachedPrefix() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.selfManaged(1000);
    assertEquals(0, t.match(seq(0, 10)));
    t.insert(seq(0, 10));
    t.checkInvariants();
    assertEquals(10, t.match(seq(0, 10)));
    assertEquals(5, t.match(seq(0, 5)));
    assertEquals(10, t.match(seq(0, 20)));
    assertEquals(3, t.match(new int[] {0, 1, 2, 99}));
    assertEquals(0, t.match(new int[] {1}));
    assertEquals(4, t.match(seq(0, 10), 4));
    assertEquals(0, t.match(new int[0]));
    t.insert(new int[] {0, 1, 2, 7, 7});
    t.checkInvariants();
    assertEquals(5, t.match(new int[] {0, 1, 2, 7, 7, 7}));
    assertEquals(10, t.match(seq(0, 12)));
    assertEquals(12, t.sizeTokens());
  }

  @Test
  void evictsLeastRecentlyUsedTokensDownToCapacity() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(20).blockSize(4).build();
    int[] a = cat(seq(0, 5), seq(100, 110)); // 15 tokens
    int[] b = cat(seq(0, 5), seq(200, 210)); // shares 5
    t.insert(a);
    t.insert(b); // 25 tokens > 20: 5 tokens of a's tail go
    t.checkInvariants();
    assertEquals(20, t.sizeTokens());
    assertEquals(10, t.match(a));
    assertEquals(15, t.match(b));
    t.insert(a); // touches a's remaining prefix, re-adds its tail; b's tail now older
    t.checkInvariants();
    assertEquals(20, t.sizeTokens());
    assertEquals(15, t.match(a));
    assertEquals(10, t.match(b));
  }

  /**
   * Evicting a sibling leaves a node with one older child: the two stay apart, so the node's
   * prefix keeps its later use and outlives a leaf used in between.
   */
  @Test
  void aNodeLeftWithOneOlderChildKeepsItsOwnRecency() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(100).blockSize(1).build();
    t.insert(new int[] {1, 2, 5}); // use 1
    t.insert(new int[] {1, 2, 3, 4}); // use 2: [1, 2] splits off, [5] keeps use 1
    t.insert(new int[] {9}); // use 3
    t.insert(new int[] {1, 2}); // use 4: only the prefix [1, 2]
    assertEquals(1, t.evictTo(5)); // [5], the oldest; [1, 2] is left with the child [3, 4]
    t.checkInvariants();
    assertEquals(2, t.evictTo(3)); // [3, 4] (use 2)
    assertEquals(1, t.evictTo(2)); // then [9] (use 3), not [1, 2] (use 4)
    t.checkInvariants();
    assertEquals(0, t.match(new int[] {9}));
    assertEquals(2, t.match(new int[] {1, 2, 3}));
  }

  /** A released lease leaves its later-used prefix apart from the older rest of the edge. */
  @Test
  void aReleasedPrefixKeepsItsRecencyAboveAnOlderChild() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(100).blockSize(1).build();
    t.insert(new int[] {1, 2, 3, 4}); // use 1
    t.insert(new int[] {9}); // use 2
    t.acquire(new int[] {1, 2}).release(); // use 3 of [1, 2]; [3, 4] keeps use 1
    t.checkInvariants();
    assertEquals(2, t.evictTo(3)); // [3, 4] (use 1)
    assertEquals(1, t.evictTo(2)); // then [9] (use 2), not [1, 2] (use 3)
    t.checkInvariants();
    assertEquals(0, t.match(new int[] {9}));
    assertEquals(2, t.match(new int[] {1, 2, 3}));
  }

  @Test
  void leasePinsThePrefixUntilReleased() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(10).blockSize(4).build();
    int[] a = seq(0, 10);
    t.insert(a);
    ConcurrentPrefixTree.Lease lease = t.acquire(cat(seq(0, 6), seq(50, 60)));
    assertEquals(6, lease.lockedTokens());
    assertEquals(6, t.pinnedTokens());
    t.insert(seq(500, 510)); // a's unpinned tail goes, then the new prompt's own tail
    t.checkInvariants();
    assertEquals(6, t.match(a));
    assertEquals(4, t.match(seq(500, 510)));
    assertEquals(10, t.sizeTokens());
    lease.release();
    assertEquals(0, t.pinnedTokens());
    t.checkInvariants();
    assertEquals(6, t.match(a));
    t.insert(seq(500, 510)); // now a's prefix is unpinned and older
    t.checkInvariants();
    assertEquals(10, t.sizeTokens());
    assertEquals(0, t.match(a));
    assertEquals(10, t.match(seq(500, 510)));
    IllegalStateException e = assertThrows(IllegalStateException.class, lease::release);
    assertTrue(e.getMessage().contains("already released"), e.getMessage());
    lease.close(); // idempotent
  }

  /**
   * Leases never push the size above the capacity: with every cached token pinned, a new
   * prompt, a prompt continuing a leased one and one leaving a leased edge part-way are all
   * evicted at once, and a release then has nothing to evict.
   */
  @Test
  void leasesNeverPushTheSizeAboveTheCapacity() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(6).blockSize(2).build();
    t.insert(seq(0, 6));
    ConcurrentPrefixTree.Lease lease = t.acquire(seq(0, 6));
    assertEquals(6, t.pinnedTokens());
    int[][] prompts = {seq(100, 104), seq(0, 9), cat(seq(0, 3), seq(200, 205))};
    for (int[] p : prompts) {
      t.insert(p);
      t.checkInvariants();
      assertEquals(6, t.sizeTokens());
      assertEquals(6, t.match(seq(0, 9)));
      assertEquals(3, t.match(cat(seq(0, 3), seq(200, 205))));
      assertEquals(0, t.match(seq(100, 104)));
    }
    assertEquals(0, t.evictTo(0), "everything is pinned");
    lease.release();
    t.checkInvariants();
    assertEquals(6, t.sizeTokens(), "the release evicts nothing");
    assertEquals(6, t.match(seq(0, 6)));
    assertEquals(6, t.evictTo(0));
  }

  @Test
  void eventsReplayToTheHeldBlocks() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(30).blockSize(4).build();
    Replay r = new Replay();
    t.addListener(r);
    BlockHasher h = t.hasher();
    int[] a = seq(0, 18);
    t.insert(a);
    assertEquals(Set.of(h.chain(a)[0], h.chain(a)[1], h.chain(a)[2], h.chain(a)[3]), r.held);
    int[] b = cat(seq(0, 6), seq(100, 120)); // 26 tokens, shares 6: a loses tokens
    t.insert(b);
    t.checkInvariants();
    Set<Long> expect = new HashSet<>();
    for (long x : h.chain(java.util.Arrays.copyOf(a, t.match(a)))) {
      expect.add(x);
    }
    for (long x : h.chain(b)) {
      expect.add(x);
    }
    assertEquals(expect, r.held);
    t.clear();
    assertEquals(Set.of(), r.held);
    assertEquals(0, t.sizeTokens());
    r.assertConsistent();
  }

  @Test
  void engineDrivenMirrorsStoredAndRemovedBlocks() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(4);
    Replay r = new Replay();
    t.addListener(r);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {11, 12}, seq(0, 8));
    engine.onBlocksStored(12, new long[] {13}, seq(8, 12));
    engine.onBlocksStored(11, new long[] {22}, new int[] {4, 5, 9, 9}); // branch mid-block
    t.checkInvariants();
    assertEquals(12, t.match(seq(0, 14)));
    assertEquals(4, t.match(new int[] {0, 1, 2, 3, 4, 5, 6})); // partial block: not served
    assertEquals(8, t.match(new int[] {0, 1, 2, 3, 4, 5, 9, 9, 1}));
    assertEquals(5, r.held.size() + 1); // 4 distinct blocks
    engine.onBlocksRemoved(new long[] {12}); // and 13 with it
    t.checkInvariants();
    assertEquals(4, t.match(seq(0, 14)));
    assertEquals(8, t.match(new int[] {0, 1, 2, 3, 4, 5, 9, 9}));
    assertEquals(2, r.held.size());
    engine.onBlocksStored(99, new long[] {1}, seq(0, 4)); // unknown parent
    engine.onBlocksStored(0, new long[] {1}, seq(0, 3)); // wrong token count
    engine.onBlocksRemoved(new long[] {77}); // unknown
    CacheEventStats s = t.engineEventStats();
    assertEquals(1, s.unknownParents());
    assertEquals(1, s.malformedEvents());
    assertEquals(1, s.unknownBlocks());
    engine.onAllCleared();
    assertEquals(0, t.sizeTokens());
    assertEquals(0, r.held.size());
    t.checkInvariants();
    r.assertConsistent();
  }

  /**
   * SGLang removes a radix node's pages in one event, from the node's first page on; removing
   * the first takes the rest, which must then not count as unknown blocks. The same removal in
   * the other order, or with an unknown hash and a branch's block among them, leaves the same
   * tree and counts only the unknown hash.
   */
  @Test
  void aRemovalNamingAChainRootFirstCountsNoneOfItsBlocksUnknown() {
    for (int order = 0; order < 3; order++) {
      ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(4);
      Replay r = new Replay();
      t.addListener(r);
      CacheEventListener engine = t.engineEvents();
      engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {11}, seq(0, 4));
      engine.onBlocksStored(11, new long[] {12, 13, 14}, seq(4, 16)); // one radix node's pages
      engine.onBlocksStored(12, new long[] {22}, new int[] {9, 9, 9, 9}); // a branch off it
      long[] removal = switch (order) {
        case 0 -> new long[] {12, 13, 14};
        case 1 -> new long[] {14, 13, 12};
        default -> new long[] {13, 77, 22, 12, 14};
      };
      engine.onBlocksRemoved(removal);
      t.checkInvariants();
      assertEquals(4, t.match(seq(0, 16)), "order " + order);
      assertEquals(4, t.match(new int[] {0, 1, 2, 3, 4, 5, 6, 7, 9, 9, 9, 9}), "order " + order);
      assertEquals(1, r.held.size(), "order " + order);
      assertEquals(order == 2 ? 1 : 0, t.engineEventStats().unknownBlocks(), "order " + order);
      r.assertConsistent("order " + order);
    }
  }

  /**
   * vLLM frees a request's blocks one at a time, last block first. Removing a 256-block chain
   * that way reports each block's own hash, in that order, keeps the invariants (the cached
   * hashes of the trimmed edge among them) and recomputes about one hash per block: the edge's
   * hashes once, not once per removal (which would be 256 * 257 / 2 = 32,896). The chain hangs
   * below a 2-block preamble and starts mid-block (a sibling shares its first 5 tokens), so the
   * first recomputed block takes tokens from above the edge and the preamble's hash.
   */
  @Test
  void removingAChainBlockByBlockReportsEachBlockAndRehashesItOnce() {
    int b = 16;
    int blocks = 256;
    java.util.SplittableRandom rnd = new java.util.SplittableRandom(7);
    int[] preamble = rnd.ints(2 * b, 0, 50_000).toArray();
    int[] chain = rnd.ints(blocks * b, 0, 50_000).toArray();
    int[] sibling = rnd.ints(b, 0, 50_000).toArray();
    System.arraycopy(chain, 0, sibling, 0, 5);
    sibling[5] = chain[5] + 1;
    long[] expected = new BlockHasher(b, 0).chain(cat(preamble, chain));
    for (boolean listening : new boolean[] {true, false}) {
      ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(b);
      List<Long> evicted = new ArrayList<>();
      List<Long> stored = new ArrayList<>();
      if (listening) {
        t.addListener(new BlockEventListener() {
          @Override
          public void onStored(long[] hashes) {
            for (long h : hashes) {
              stored.add(h);
            }
          }

          @Override
          public void onEvicted(long[] hashes) {
            for (long h : hashes) {
              evicted.add(h);
            }
          }
        });
      }
      CacheEventListener engine = t.engineEvents();
      engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1, 2}, preamble);
      long[] engineHashes = new long[blocks];
      for (int i = 0; i < blocks; i++) {
        engineHashes[i] = 1000 + i;
      }
      engine.onBlocksStored(2, engineHashes, chain);
      engine.onBlocksStored(2, new long[] {999}, sibling);
      t.checkInvariants();
      if (listening) {
        assertEquals(blocks + 3, stored.size());
        for (int i = 0; i < blocks + 2; i++) {
          assertEquals(expected[i], stored.get(i), "stored hash of block " + i);
        }
      }
      long rehashed = 0;
      for (int i = blocks - 1; i >= 0; i--) {
        long before = t.rehashedBlocksForTest();
        engine.onBlocksRemoved(new long[] {engineHashes[i]});
        rehashed += t.rehashedBlocksForTest() - before;
        t.checkInvariants();
        assertEquals(2 * b + i * b, t.match(cat(preamble, chain)));
      }
      assertEquals(0, t.engineEventStats().unknownBlocks());
      assertEquals(3 * b, t.sizeTokens()); // the preamble and the sibling
      assertTrue(rehashed <= blocks + 1, "recomputed " + rehashed + " block hashes");
      if (listening) {
        assertEquals(blocks, evicted.size());
        for (int k = 0; k < blocks; k++) {
          assertEquals(expected[2 + blocks - 1 - k], evicted.get(k), "evicted hash " + k);
        }
      }
    }
  }

  /**
   * An engine may hold two physical blocks with the same hash (two requests computed the same
   * block before either was cached): each is stored and later removed on its own, and the block
   * is cached until the last copy goes. Listeners hear of it once each way.
   */
  @Test
  void aBlockStoredTwiceStaysUntilItsLastCopyIsRemoved() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    Replay r = new Replay();
    t.addListener(r);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    engine.onBlocksStored(1, new long[] {2}, new int[] {7, 8});
    t.checkInvariants();
    assertEquals(1, t.engineEventStats().duplicateBlocks());
    assertEquals(4, t.match(new int[] {5, 6, 7, 8}));
    engine.onBlocksRemoved(new long[] {1}); // one copy goes, the other is still held
    t.checkInvariants();
    assertEquals(4, t.match(new int[] {5, 6, 7, 8}));
    assertEquals(2, r.held.size());
    engine.onBlocksStored(1, new long[] {3}, new int[] {7, 9}); // block 1 still names a parent
    assertEquals(4, t.match(new int[] {5, 6, 7, 9}));
    engine.onBlocksRemoved(new long[] {1}); // the last copy: the block and its continuations go
    t.checkInvariants();
    assertEquals(0, t.match(new int[] {5, 6, 7, 8}));
    assertEquals(0, t.sizeTokens());
    assertEquals(Set.of(), r.held);
    assertEquals(List.of("stored 1", "stored 1", "stored 1", "evicted 3"), r.log);
    engine.onBlocksRemoved(new long[] {1}); // not held any more
    CacheEventStats s = t.engineEventStats();
    assertEquals(1, s.unknownBlocks());
    assertEquals(0, s.unknownParents());
    r.assertConsistent();
  }

  /** Copies die with their block when a block they continue goes, and with a clear. */
  @Test
  void copiesGoWithTheirBlockAndWithAClear() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    Replay r = new Replay();
    t.addListener(r);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1, 2}, new int[] {5, 6, 7, 8});
    engine.onBlocksStored(1, new long[] {2}, new int[] {7, 8}); // a second copy of block 2
    engine.onBlocksRemoved(new long[] {1}); // block 2 continues block 1: both go
    t.checkInvariants();
    assertEquals(0, t.sizeTokens());
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1, 2}, new int[] {5, 6, 7, 8});
    engine.onBlocksRemoved(new long[] {2}); // one copy only now: it goes
    t.checkInvariants();
    assertEquals(2, t.match(new int[] {5, 6, 7, 8}));
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    engine.onAllCleared(); // forgets every copy
    t.checkInvariants();
    assertEquals(0, t.engineCopies(1));
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    engine.onBlocksRemoved(new long[] {1});
    t.checkInvariants();
    assertEquals(0, t.sizeTokens());
    assertEquals(Set.of(), r.held);
    assertEquals(0, t.engineEventStats().unknownBlocks());
    r.assertConsistent();
  }

  /**
   * An engine that reuses a hash for another block (a hash that is not chained through the
   * parent, or a broken hasher) must not tie two blocks to one hash: the store is refused and
   * counted, and everything the tree holds can still be removed by the engine's removals.
   */
  @Test
  void aStoreReusingAHashHeldForAnotherBlockIsRefusedAndCounted() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    // hash 1 again for other tokens, for the same tokens one block deeper, twice in one event
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {7, 8});
    engine.onBlocksStored(1, new long[] {1}, new int[] {5, 6});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {3, 3}, new int[] {9, 9, 9, 9});
    engine.onBlocksStored(1, new long[] {4, 1}, new int[] {1, 2, 3, 4});
    t.checkInvariants();
    assertEquals(4, t.engineEventStats().conflictingEvents());
    assertEquals(0, t.engineEventStats().duplicateBlocks());
    assertEquals(2, t.sizeTokens());
    assertEquals(0, t.match(new int[] {7, 8}));
    assertEquals(0, t.match(new int[] {9, 9}));
    assertEquals(2, t.match(new int[] {5, 6, 1, 2}));
    // a real copy of the held block is still a copy, and the removals empty the tree
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    assertEquals(1, t.engineEventStats().duplicateBlocks());
    engine.onBlocksRemoved(new long[] {1});
    engine.onBlocksRemoved(new long[] {1});
    t.checkInvariants();
    assertEquals(0, t.sizeTokens());
  }

  /**
   * A misbehaving engine that repeats a store many times holds a count, not a list: the copies
   * are all removed in the end and nothing is left behind.
   */
  @Test
  void repeatedStoresAreCountedAndAllRemoved() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    CacheEventListener engine = t.engineEvents();
    for (int i = 0; i < 1_000; i++) {
      engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    }
    assertEquals(1_000, t.engineCopies(1));
    assertEquals(999, t.engineEventStats().duplicateBlocks());
    for (int i = 0; i < 999; i++) {
      engine.onBlocksRemoved(new long[] {1});
    }
    t.checkInvariants();
    assertEquals(2, t.match(new int[] {5, 6}));
    assertEquals(1, t.engineCopies(1));
    engine.onBlocksRemoved(new long[] {1});
    assertEquals(0, t.sizeTokens());
    assertEquals(0, t.engineCopies(1));
    t.checkInvariants();
  }

  @Test
  void aSelfManagedTreeNeedsACapacity() {
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> ConcurrentPrefixTree.builder().build());
    assertTrue(e.getMessage().contains("capacityTokens"), e.getMessage());
  }

  @Test
  void rejectsInvalidArguments() {
    assertMessage(() -> ConcurrentPrefixTree.selfManaged(0), "capacityTokens");
    assertMessage(() -> ConcurrentPrefixTree.selfManaged(-5), "-5");
    assertMessage(() -> ConcurrentPrefixTree.builder().blockSize(0), "blockSize");
    ConcurrentPrefixTree t = ConcurrentPrefixTree.selfManaged(100);
    assertMessage(() -> t.insert(new int[0]), "empty");
    assertMessage(() -> t.acquire(new int[0]), "empty");
    assertMessage(() -> t.match(new int[3], 4), "length");
    assertMessage(() -> t.evictTo(-1), "targetTokens");
    assertThrows(NullPointerException.class, () -> t.insert(null));
    assertThrows(IllegalStateException.class, t::engineEvents);
    ConcurrentPrefixTree e = ConcurrentPrefixTree.engineDriven(16);
    assertThrows(IllegalStateException.class, () -> e.insert(new int[] {1}));
  }

  @Test
  void aMirrorLimitIsForEngineDrivenTreesOfAtLeastOneBlock() {
    assertMessage(() -> ConcurrentPrefixTree.builder().mirrorLimitTokens(0), "mirrorLimitTokens");
    assertMessage(() -> ConcurrentPrefixTree.builder().mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN)
        .blockSize(16).mirrorLimitTokens(15).build(), "block size");
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> ConcurrentPrefixTree.builder().capacityTokens(100).mirrorLimitTokens(100).build());
    assertTrue(e.getMessage().contains("engine-driven"), e.getMessage());
    assertEquals(Long.MAX_VALUE, ConcurrentPrefixTree.engineDriven(16).mirrorLimitTokens());
  }

  static ConcurrentPrefixTree limited(int blockSize, long limit) {
    return ConcurrentPrefixTree.builder().mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN)
        .blockSize(blockSize).mirrorLimitTokens(limit).build();
  }

  /**
   * An engine that never removes: the mirror drops the least recently stored chain's last
   * blocks, reports them evicted, unindexes them, and takes later events naming them calmly.
   */
  @Test
  void overTheMirrorLimitTheLeastRecentlyStoredBlocksGo() {
    ConcurrentPrefixTree t = limited(2, 8);
    Replay replay = new Replay();
    t.addListener(replay);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1, 2}, new int[] {1, 1, 2, 2});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {3, 4}, new int[] {3, 3, 4, 4});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {1, 1}); // used
    assertEquals(8, t.sizeTokens());
    assertEquals(0, t.engineEventStats().overflowBlocks());
    // 2 more tokens: the chain of 3 and 4 was stored least recently, its last block goes
    engine.onBlocksStored(2, new long[] {5}, new int[] {5, 5});
    t.checkInvariants();
    assertEquals(8, t.sizeTokens());
    assertEquals(6, t.match(new int[] {1, 1, 2, 2, 5, 5}));
    assertEquals(2, t.match(new int[] {3, 3, 4, 4}));
    assertEquals(t.blockHashes().length, replay.held.size());
    assertEquals(Set.of(), diff(replay.held, t.blockHashes()));
    // 4 more tokens: block 3 (now the oldest leaf) goes, then the leaf 5 of the older chain
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {6, 7}, new int[] {6, 6, 7, 7});
    t.checkInvariants();
    assertEquals(8, t.sizeTokens());
    assertEquals(0, t.match(new int[] {3, 3}));
    assertEquals(4, t.match(new int[] {1, 1, 2, 2, 5, 5}));
    assertEquals(4, t.match(new int[] {6, 6, 7, 7}));
    CacheEventStats s = t.engineEventStats();
    assertEquals(3, s.overflowBlocks());
    assertEquals(2, s.overflows());
    assertEquals(Set.of(), diff(replay.held, t.blockHashes()));
    // the engine's late removals of dropped blocks and a store continuing one are harmless
    engine.onBlocksRemoved(new long[] {4, 3, 5});
    engine.onBlocksStored(5, new long[] {8}, new int[] {8, 8});
    t.checkInvariants();
    s = t.engineEventStats();
    assertEquals(3, s.unknownBlocks());
    assertEquals(1, s.unknownParents());
    assertEquals(8, t.sizeTokens());
    assertEquals(0, t.engineCopies(3));
    // a chain longer than the limit keeps its first blocks
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {11, 12, 13, 14, 15},
        new int[] {9, 9, 9, 9, 9, 9, 9, 9, 9, 9});
    t.checkInvariants();
    assertEquals(8, t.match(new int[] {9, 9, 9, 9, 9, 9, 9, 9, 9, 9}));
    assertEquals(8, t.sizeTokens());
    assertEquals(Set.of(), diff(replay.held, t.blockHashes()));
    replay.assertConsistent();
  }

  /**
   * A removal that leaves a node with one child does not merge the two when a later store used
   * the node: the recency boundary stays, so the limit drops the child's older block and then
   * an older chain, not the node's block that the later store used. (Merging them regardless
   * gave the merged leaf the child's old stamp, and the limit dropped both blocks.)
   */
  @Test
  void aRemovalKeepsTheRecencyBoundaryThatTheLimitDropsBy() {
    ConcurrentPrefixTree t = limited(2, 8); // 4 blocks
    Replay replay = new Replay();
    t.addListener(replay);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1, 2}, new int[] {1, 1, 2, 2});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {4}, new int[] {4, 4});
    engine.onBlocksStored(1, new long[] {3}, new int[] {3, 3}); // uses block 1 after block 4
    t.checkInvariants();
    engine.onBlocksRemoved(new long[] {3}); // block 1 keeps that use; block 2 is older than 4
    t.checkInvariants();
    assertEquals(6, t.sizeTokens());
    assertEquals(4, t.match(new int[] {1, 1, 2, 2}));
    // 6 more tokens, 4 over the limit: block 2 goes, then block 4, the oldest leaves in turn
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {5, 6, 7},
        new int[] {5, 5, 6, 6, 7, 7});
    t.checkInvariants();
    assertEquals(8, t.sizeTokens());
    assertEquals(2, t.match(new int[] {1, 1, 2, 2}), "block 1, used after block 4, is kept");
    assertEquals(0, t.match(new int[] {4, 4}), "block 4 was stored before block 1's last use");
    assertEquals(6, t.match(new int[] {5, 5, 6, 6, 7, 7}));
    assertEquals(4, replay.held.size());
    assertEquals(Set.of(), diff(replay.held, t.blockHashes()));
    assertEquals(2, t.engineEventStats().overflowBlocks());
    replay.assertConsistent();
  }

  /** Copies and aliases of the blocks dropped over the limit are forgotten with them. */
  @Test
  void blocksDroppedOverTheLimitTakeTheirCopiesAndAliases() {
    ConcurrentPrefixTree t = limited(2, 4);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {1, 1});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {1, 1}); // copy
    assertEquals(2, t.engineCopies(1));
    for (int i = 0; i < 100; i++) { // aliases of block 1, each dropped with it, re-stored after
      engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1000 + i}, new int[] {1, 1});
      engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {2000 + i}, new int[] {2, 2});
      engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {3000 + i}, new int[] {3, 3});
      engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {1, 1});
      t.checkInvariants();
    }
    assertEquals(4, t.sizeTokens());
    // the aliases were swept as they piled up: at most 64 plus those since the last sweep
    assertTrue(t.aliasCountForTest() <= 2 * 64, "aliases kept: " + t.aliasCountForTest());
    // block 1 was dropped in every round and stored afresh: one copy, not the first two
    engine.onBlocksRemoved(new long[] {1});
    assertEquals(0, t.match(new int[] {1, 1}));
  }

  private static Set<Long> diff(Set<Long> held, long[] hashes) {
    Set<Long> a = new HashSet<>(held);
    Set<Long> b = new HashSet<>();
    for (long h : hashes) {
      b.add(h);
    }
    Set<Long> out = new HashSet<>(a);
    out.removeAll(b);
    b.removeAll(a);
    out.addAll(b);
    return out;
  }

  private static void assertMessage(Runnable r, String part) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, r::run);
    assertTrue(e.getMessage().contains(part), e.getMessage());
  }

  @Test
  void leafSequencesListsWhatIsCached() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.selfManaged(100);
    t.insert(new int[] {1, 2, 3});
    t.insert(new int[] {1, 2, 4});
    List<int[]> leaves = t.leafSequences();
    assertEquals(2, leaves.size());
    assertArrayEquals(new int[] {1, 2, 3}, leaves.get(0));
  }

  @Test
  void engineAliasesKeepTheBlockUntilItsFirstHashGoes() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1, 2}, new int[] {5, 6, 7, 8});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {9}, new int[] {5, 6}); // alias
    engine.onBlocksStored(9, new long[] {10}, new int[] {0, 0}); // continues the alias
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6}); // dup
    t.checkInvariants();
    CacheEventStats s = t.engineEventStats();
    assertEquals(1, s.aliasedBlocks());
    assertEquals(1, s.duplicateBlocks());
    assertEquals(4, t.match(new int[] {5, 6, 0, 0}));
    engine.onBlocksRemoved(new long[] {9}); // the alias goes; the block stays under hash 1
    t.checkInvariants();
    assertEquals(4, t.match(new int[] {5, 6, 7, 8}));
    assertEquals(4, t.match(new int[] {5, 6, 0, 0}));
    engine.onBlocksRemoved(new long[] {1}); // one of the two copies of block 1 goes
    t.checkInvariants();
    assertEquals(4, t.match(new int[] {5, 6, 0, 0}));
    engine.onBlocksRemoved(new long[] {1}); // the last copy: everything continuing block 1 goes
    t.checkInvariants();
    assertEquals(0, t.sizeTokens());
    engine.onBlocksStored(9, new long[] {11}, new int[] {1, 1}); // a forgotten alias: unknown
    assertEquals(1, t.engineEventStats().unknownParents());
  }

  /** An alias stored twice names the block until both copies are removed. */
  @Test
  void anAliasStoredTwiceStaysUntilItsLastCopyIsRemoved() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {9}, new int[] {5, 6}); // alias
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {9}, new int[] {5, 6}); // again
    assertEquals(1, t.engineEventStats().aliasedBlocks());
    assertEquals(1, t.engineEventStats().duplicateBlocks());
    engine.onBlocksRemoved(new long[] {9}); // one copy of the alias goes
    engine.onBlocksStored(9, new long[] {10}, new int[] {0, 0}); // continues the alias
    t.checkInvariants();
    assertEquals(4, t.match(new int[] {5, 6, 0, 0}));
    engine.onBlocksRemoved(new long[] {9}); // the alias is forgotten, the block stays
    engine.onBlocksRemoved(new long[] {9}); // not held any more
    t.checkInvariants();
    assertEquals(4, t.match(new int[] {5, 6, 0, 0}));
    CacheEventStats s = t.engineEventStats();
    assertEquals(0, s.unknownParents());
    assertEquals(1, s.unknownBlocks());
  }

  /**
   * A hash remembered as an alias whose first hash has gone, then stored again on its own: it
   * is the block's hash now, and its removal must remove the block (a stale alias entry used to
   * turn that removal into "forget the alias", keeping the block and its index entry forever).
   */
  @Test
  void aStaleAliasStoredAgainIsRemovedByItsRemoval() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    Replay replay = new Replay();
    t.addListener(replay);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {9}, new int[] {5, 6}); // alias
    engine.onBlocksRemoved(new long[] {1}); // the block goes with its first hash
    assertEquals(0, t.sizeTokens());
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {9}, new int[] {5, 6});
    engine.onBlocksStored(9, new long[] {10}, new int[] {7, 8}); // continues block 9
    t.checkInvariants();
    assertEquals(4, t.match(new int[] {5, 6, 7, 8}));
    engine.onBlocksRemoved(new long[] {9});
    t.checkInvariants();
    assertEquals(0, t.sizeTokens());
    assertEquals(0, t.match(new int[] {5, 6, 7, 8}));
    assertEquals(Set.of(), replay.held);
    assertEquals(0, t.engineEventStats().unknownBlocks());
    replay.assertConsistent();
  }

  /**
   * An alias of a block that has gone, stored again for the block now at its place, is a new
   * alias: over the limit on aliases, the oldest is forgotten, not this one (it kept the place
   * in the order it had when first remembered, and was forgotten before older ones, so that a
   * store continuing it was dropped as continuing an unknown block).
   */
  @Test
  void anAliasStoredAgainForAnotherBlockIsTheNewestAlias() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder()
        .mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN).blockSize(2).mirrorLimitTokens(6).build();
    CacheEventListener engine = t.engineEvents(); // keeps up to 3 aliases
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {9}, new int[] {5, 6}); // alias
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {2}, new int[] {7, 8});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {20}, new int[] {7, 8});
    engine.onBlocksRemoved(new long[] {1}); // the block goes; alias 9 stays
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {3}, new int[] {5, 6});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {9}, new int[] {5, 6}); // of 3
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {30}, new int[] {7, 8});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {31}, new int[] {7, 8});
    t.checkInvariants();
    assertEquals(3, t.aliasCountForTest());
    assertEquals(0, t.engineCopies(20), "the oldest alias is forgotten");
    assertEquals(1, t.engineCopies(9), "the alias stored last but two is kept");
    engine.onBlocksStored(9, new long[] {40}, new int[] {1, 1}); // continues the alias
    t.checkInvariants();
    assertEquals(0, t.engineEventStats().unknownParents());
    assertEquals(4, t.match(new int[] {5, 6, 1, 1}));
  }

  @Test
  void engineListenerNeverThrowsOnGarbage() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, null, new int[0]);
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, null);
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {0}, new int[] {1, 2});
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[0], new int[0]);
    engine.onBlocksRemoved(null);
    engine.onBlocksRemoved(new long[0]);
    assertEquals(4, t.engineEventStats().malformedEvents());
    assertEquals(0, t.sizeTokens());
    t.checkInvariants();
  }

  /**
   * The 32-bit use counter runs into its real threshold (2^31 - 1) and is renumbered there: a
   * tree whose counter starts just below it evicts, leases and matches exactly as one whose
   * counter starts at 0, through the renumbering and well past it.
   */
  @Test
  void useCounterRenumbersAtTheRealThresholdWithoutChangingTheLru() {
    for (long seed = 1; seed <= 20; seed++) {
      ConcurrentPrefixTree fresh = ConcurrentPrefixTree.builder().capacityTokens(40).blockSize(3)
          .build();
      ConcurrentPrefixTree old = ConcurrentPrefixTree.builder().capacityTokens(40).blockSize(3)
          .build();
      old.clockForTest(Integer.MAX_VALUE - 60);
      Replay freshEvents = new Replay();
      Replay oldEvents = new Replay();
      fresh.addListener(freshEvents);
      old.addListener(oldEvents);
      java.util.SplittableRandom r = new java.util.SplittableRandom(seed);
      List<ConcurrentPrefixTree.Lease[]> leases = new ArrayList<>();
      for (int op = 0; op < 200; op++) {
        int[] p = r.ints(1 + r.nextInt(12), 0, 3).toArray();
        int roll = r.nextInt(10);
        if (roll < 6) {
          fresh.insert(p);
          old.insert(p);
        } else if (roll < 8) {
          leases.add(new ConcurrentPrefixTree.Lease[] {fresh.acquire(p), old.acquire(p)});
        } else if (!leases.isEmpty()) {
          ConcurrentPrefixTree.Lease[] l = leases.remove(r.nextInt(leases.size()));
          l[0].release();
          l[1].release();
        }
        String when = "seed " + seed + ", operation " + op;
        old.checkInvariants();
        assertEquals(SelfManagedTreePropertyTest.sorted(SelfManagedTreePropertyTest.asLists(
                fresh.leafSequences())),
            SelfManagedTreePropertyTest.sorted(SelfManagedTreePropertyTest.asLists(
                old.leafSequences())), when);
        assertEquals(fresh.pinnedTokens(), old.pinnedTokens(), when);
        assertEquals(freshEvents.held, oldEvents.held, when);
      }
    }
  }

  @Test
  void leasesInEngineModePinNothingButReleaseOnce() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    t.engineEvents().onBlocksStored(0, new long[] {1}, new int[] {3, 4});
    ConcurrentPrefixTree.Lease l = t.acquire(new int[] {3, 4, 5});
    assertEquals(2, l.lockedTokens());
    assertEquals(0, t.pinnedTokens());
    t.engineEvents().onBlocksRemoved(new long[] {1});
    assertEquals(0, t.match(new int[] {3, 4}));
    l.release();
    assertThrows(IllegalStateException.class, l::release);
  }

  @Test
  void leaseOnAnUncachedPromptAndAcrossClear() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.selfManaged(100);
    ConcurrentPrefixTree.Lease none = t.acquire(new int[] {1, 2});
    assertEquals(0, none.lockedTokens());
    t.insert(new int[] {1, 2, 3});
    ConcurrentPrefixTree.Lease l = t.acquire(new int[] {1, 2, 3});
    assertEquals(3, t.pinnedTokens());
    t.clear();
    t.insert(new int[] {1, 2, 3, 4});
    assertEquals(0, t.pinnedTokens()); // a lease from before the clear pins nothing
    l.release(); // the tree was cleared since: nothing to unpin, but it counts once
    none.release();
    t.checkInvariants();
    assertEquals(4, t.evictTo(0)); // nothing stayed pinned
    assertThrows(IllegalStateException.class, l::release);
  }

  @Test
  void aThrowingListenerDoesNotBreakTheTreeOrOtherListeners() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().blockSize(2).capacityTokens(1000).build();
    t.addListener(new BlockEventListener() {
      @Override
      public void onStored(long[] hashes) {
        throw new IllegalStateException("listener bug");
      }
    });
    Replay r = new Replay();
    t.addListener(r);
    t.insert(new int[] {1, 2, 3, 4});
    assertEquals(1, t.listenerFailures());
    assertEquals(2, r.held.size());
    assertEquals(4, t.match(new int[] {1, 2, 3, 4}));
    r.assertConsistent();
  }

  /**
   * A listener that throws a checked exception undeclared (as code in a language without
   * checked exceptions may) is a failing listener like any other: counted, and the write and the
   * other listeners go on. It used to escape to the writer (an engine's event call included)
   * and keep the event from the listeners after it.
   */
  @Test
  void aListenerThrowingACheckedExceptionUndeclaredIsCountedLikeAnyOther() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().blockSize(2).capacityTokens(1000).build();
    t.addListener(new BlockEventListener() {
      @Override
      public void onStored(long[] hashes) {
        ConcurrentPrefixTreeTest.<RuntimeException>sneakyThrow(
            new java.io.IOException("listener wrote to a closed stream"));
      }
    });
    Replay r = new Replay();
    t.addListener(r);
    t.insert(new int[] {1, 2, 3, 4});
    assertEquals(1, t.listenerFailures());
    assertEquals(2, r.held.size());
    r.assertConsistent();
  }

  @SuppressWarnings("unchecked")
  private static <T extends Throwable> void sneakyThrow(Throwable t) throws T {
    throw (T) t;
  }

  @Test
  void aListenerMayReadAndWriteTheTreeFromItsCallback() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().blockSize(2).capacityTokens(1000).build();
    List<Integer> seen = new ArrayList<>();
    t.addListener(new BlockEventListener() {
      @Override
      public void onStored(long[] hashes) {
        seen.add(t.match(new int[] {1, 2, 3, 4}));
        if (seen.size() == 1) {
          t.insert(new int[] {9, 9}); // a nested write delivers its event after this one
        }
      }
    });
    t.insert(new int[] {1, 2, 3, 4});
    assertEquals(List.of(4, 4), seen);
  }

  /**
   * A listener that writes to the tree from its callback: every listener, not only the writing
   * one, must still receive the events in the order of the writes (here the nested eviction of
   * the blocks must not reach the second listener before their storing).
   */
  @Test
  void aNestedWriteFromAListenerReachesEveryListenerInWriteOrder() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().blockSize(2).capacityTokens(1000).build();
    List<String> order = new ArrayList<>();
    t.addListener(new BlockEventListener() {
      @Override
      public void onStored(long[] hashes) {
        if (t.sizeTokens() > 0) {
          t.evictTo(0); // memory pressure noticed by the first listener
        }
      }
    });
    Replay second = new Replay();
    t.addListener(second);
    t.insert(new int[] {1, 2, 3, 4});
    t.checkInvariants();
    assertEquals(0, t.sizeTokens());
    assertEquals(List.of("stored 2", "evicted 2"), second.log);
    assertEquals(Set.of(), second.held);
    second.assertConsistent();
  }

  @Test
  void storedEventsComeInPrefixOrderAndEvictionsAfterThem() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().blockSize(2).capacityTokens(6)
        .build();
    List<long[]> stored = new ArrayList<>();
    List<String> order = new ArrayList<>();
    t.addListener(new BlockEventListener() {
      @Override
      public void onStored(long[] hashes) {
        stored.add(hashes);
        order.add("stored");
      }

      @Override
      public void onEvicted(long[] hashes) {
        order.add("evicted " + hashes.length);
      }
    });
    int[] a = {1, 2, 3, 4, 5, 6};
    t.insert(a);
    assertArrayEquals(t.hasher().chain(a), stored.get(0));
    t.insert(new int[] {7, 8, 9, 10}); // 10 tokens > 6: the 4 oldest go, a keeps 2
    assertEquals(List.of("stored", "stored", "evicted 2"), order);
    assertEquals(2, t.match(a));
  }

  @Test
  void largeIdsSurviveSplitTrimAndMerge() {
    // 40 ids, a third of them above 65,535, one above 131,071
    int[] a = IntStream.range(0, 40).map(i -> i * 7 + (i % 3 == 0 ? 65_536 : 0)).toArray();
    a[30] = 200_000;
    int[] b = cat(java.util.Arrays.copyOf(a, 20), seq(500, 530));
    ConcurrentPrefixTree t = ConcurrentPrefixTree.selfManaged(10_000);
    t.insert(a);
    t.checkInvariants();
    t.insert(b); // splits the edge at 20
    t.checkInvariants();
    assertEquals(40, t.match(a));
    assertEquals(50, t.match(b));
    int[] q = a.clone();
    q[30] = 200_000 & 0xFFFF; // same low 16 bits
    assertEquals(30, t.match(q));
    q = a.clone();
    q[25] ^= 1 << 16;
    assertEquals(25, t.match(q));
    q = a.clone();
    q[3] = 3 * 7; // bit 16 missing
    assertEquals(3, t.match(q));

    t.evictTo(t.sizeTokens() - 15); // a's leaf is the oldest: trimmed to 5 ids
    t.checkInvariants();
    assertEquals(25, t.match(a));
    assertEquals(50, t.match(b));

    t.insert(a); // extends the trimmed leaf again
    t.checkInvariants();
    assertEquals(40, t.match(a));
    t.evictTo(t.sizeTokens() - 30); // removes b's leaf; the rest of a merges into one edge
    t.checkInvariants();
    assertEquals(40, t.match(a));
    assertEquals(20, t.match(b));
    assertEquals(List.of(java.util.Arrays.stream(a).boxed().toList()),
        t.leafSequences().stream().map(x -> java.util.Arrays.stream(x).boxed().toList()).toList());
  }
}
