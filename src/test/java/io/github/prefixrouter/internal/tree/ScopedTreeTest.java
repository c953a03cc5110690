package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.spi.CacheEventListener;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** Cache scopes in the tree: isolation, shared capacity, no empty roots left behind. */
class ScopedTreeTest {

  private static final int[] PROMPT = IntStream.range(0, 40).toArray();
  private static final long A = BlockHasher.scopeRoot("lora-a", "");
  private static final long S = BlockHasher.scopeRoot("", "tenant-1");

  @Test
  void scopesDoNotMatchEachOthersPrefixes() {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.selfManaged(1000);
    tree.insert(A, PROMPT, PROMPT.length);
    assertEquals(40, tree.match(A, PROMPT));
    assertEquals(0, tree.match(PROMPT));
    assertEquals(0, tree.match(BlockHasher.ROOT_PARENT, PROMPT));
    assertEquals(0, tree.match(S, PROMPT));
    try (ConcurrentPrefixTree.Lease l = tree.acquire(S, PROMPT)) {
      assertEquals(0, l.lockedTokens());
    }
    try (ConcurrentPrefixTree.Lease l = tree.acquire(A, PROMPT)) {
      assertEquals(40, l.lockedTokens());
    }
    tree.insert(PROMPT);
    assertEquals(40, tree.match(PROMPT));
    assertEquals(80, tree.sizeTokens()); // the same tokens, held twice
    assertEquals(1, tree.scopeCount());
    tree.checkInvariants();
  }

  @Test
  void scopedBlocksCarryTheScopedChain() {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.selfManaged(1000);
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    tree.addListener(replay);
    tree.insert(A, PROMPT, PROMPT.length);
    long[] chain = tree.hasher().chain(A, PROMPT);
    assertEquals(java.util.Set.of(chain[0], chain[1]), replay.held);
    assertEquals(java.util.Set.of(chain[0], chain[1]),
        java.util.Set.of(tree.blockHashes()[0], tree.blockHashes()[1]));
    tree.evictTo(0);
    assertTrue(replay.held.isEmpty());
    replay.assertConsistent();
  }

  @Test
  void capacityAndLruAreSharedByAllScopes() {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.selfManaged(80);
    tree.insert(A, PROMPT, PROMPT.length); // oldest
    tree.insert(S, PROMPT, PROMPT.length);
    tree.insert(PROMPT); // 120 tokens: the oldest scope's prompt goes
    assertEquals(80, tree.sizeTokens());
    assertEquals(0, tree.match(A, PROMPT));
    assertEquals(40, tree.match(S, PROMPT));
    assertEquals(40, tree.match(PROMPT));
    assertEquals(1, tree.scopeCount());
    tree.checkInvariants();
  }

  @Test
  void aMillionSaltsLeaveNoEmptyRoots() {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.selfManaged(800);
    int[] p = new int[8];
    for (int i = 0; i < 1_000_000; i++) {
      p[0] = i;
      tree.insert(BlockHasher.scopeRoot("", "salt-" + i), p, p.length);
      if (i % 100_000 == 0) {
        assertTrue(tree.scopeCount() <= 100, "scope roots: " + tree.scopeCount());
      }
    }
    assertEquals(100, tree.scopeCount()); // 800 tokens of 8-token prompts
    tree.checkInvariants();
    tree.evictTo(0);
    assertEquals(0, tree.scopeCount());
    tree.checkInvariants();
  }

  @Test
  void engineDrivenScopesComeAndGo() {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(16);
    CacheEventListener events = tree.engineEvents();
    for (int i = 0; i < 10_000; i++) {
      CacheScope scope = CacheScope.salt("salt-" + i);
      events.onBlocksStored(scope, CacheEventListener.NO_PARENT, new long[] {1000 + i},
          IntStream.range(0, 16).toArray());
      assertEquals(16, tree.match(BlockHasher.scopeRoot(scope), PROMPT));
      assertEquals(0, tree.match(PROMPT));
      events.onBlocksRemoved(new long[] {1000 + i});
    }
    assertEquals(0, tree.scopeCount());
    // an event that cannot be applied leaves no root either
    events.onBlocksStored(CacheScope.salt("x"), CacheEventListener.NO_PARENT, new long[] {5, 5},
        IntStream.range(0, 32).toArray()); // one hash twice
    events.onBlocksStored(CacheScope.salt("y"), CacheEventListener.NO_PARENT, new long[] {6},
        new int[3]); // malformed
    assertEquals(0, tree.scopeCount());
    assertEquals(1, tree.engineEventStats().conflictingEvents());
    tree.checkInvariants();
  }

  @Test
  void engineDrivenChildrenFollowTheirParentsScope() {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(16);
    CacheEventListener events = tree.engineEvents();
    CacheScope a = CacheScope.adapter("lora-a");
    events.onBlocksStored(a, CacheEventListener.NO_PARENT, new long[] {7},
        IntStream.range(0, 16).toArray());
    events.onBlocksStored(7, new long[] {8}, IntStream.range(16, 32).toArray()); // no scope
    assertEquals(32, tree.match(A, PROMPT));
    assertEquals(0, tree.match(PROMPT));
    tree.checkInvariants();
  }

  @Test
  void aListenerThatKnowsNoScopesDropsScopedRootChains() {
    List<Long> stored = new ArrayList<>();
    CacheEventListener plain = new CacheEventListener() {
      @Override
      public void onBlocksStored(long parent, long[] hashes, int[] tokens) {
        stored.add(parent);
        stored.add(hashes[0]);
      }
    };
    plain.onBlocksStored(CacheScope.adapter("a"), CacheEventListener.NO_PARENT, new long[] {1},
        new int[16]);
    plain.onBlocksStored(CacheScope.adapter("a"), 1, new long[] {2}, new int[16]);
    plain.onBlocksStored(CacheScope.DEFAULT, CacheEventListener.NO_PARENT, new long[] {3},
        new int[16]);
    assertArrayEquals(new Object[] {1L, 2L, 0L, 3L}, stored.toArray());
  }
}
