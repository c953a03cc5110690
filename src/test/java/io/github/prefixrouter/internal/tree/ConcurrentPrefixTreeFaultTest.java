package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Timeout.ThreadMode.SEPARATE_THREAD;

import io.github.prefixrouter.spi.CacheEventListener;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.statistics.Statistics;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Self-managed writes that fail part-way (an {@link OutOfMemoryError} where a write allocates):
 * the tree must be left consistent, with its listeners' replicas and its leases whole.
 *
 * <p>A write that loops forever fails its test after 2 minutes instead of stalling the build
 * (each test takes well under a second, the property's 300 tries about 1.5 s together). The
 * limit is on each test, not on the class, whose annotations jqwik does not read; the property
 * puts each try under it itself. A test runs on a thread of its own, since a loop holding the
 * write lock does not stop when interrupted.
 */
class ConcurrentPrefixTreeFaultTest {

  /** Throws an {@link OutOfMemoryError} the first time it runs (not again in the repair). */
  private static Runnable oom() {
    boolean[] thrown = {false};
    return () -> {
      if (!thrown[0]) {
        thrown[0] = true;
        throw new OutOfMemoryError("test");
      }
    };
  }

  private static Set<Long> held(ConcurrentPrefixTree t) {
    return Arrays.stream(t.blockHashes()).boxed().collect(Collectors.toSet());
  }

  /** After a failed write: consistent, the replayed events equal the blocks held. */
  private static void assertWhole(ConcurrentPrefixTree t, ConcurrentPrefixTreeTest.Replay replay) {
    t.checkInvariants();
    replay.assertConsistent();
    assertEquals(held(t), replay.held, "replayed blocks");
  }

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = SEPARATE_THREAD)
  void anInsertWhoseEvictionFailsPartWayLeavesAConsistentTree() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(10).blockSize(2)
        .build();
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    t.insert(new int[] {1, 2, 3, 4, 5, 6, 7, 8});
    t.midWriteFaultForTest = oom();
    // 14 tokens: the eviction trims the older prompt by 4, and fails while it does
    assertThrows(OutOfMemoryError.class, () -> t.insert(new int[] {20, 21, 22, 23, 24, 25}));
    t.midWriteFaultForTest = () -> { };
    assertWhole(t, replay);
    assertEquals(1, t.repairsForTest());

    t.insert(new int[] {1, 2, 3, 4});
    t.insert(new int[] {30, 31, 32, 33, 34, 35, 36, 37});
    assertEquals(10, t.sizeTokens());
    assertWhole(t, replay);
  }

  /**
   * A write that fails after hashing its new blocks and before linking them leaves the tree as
   * it was, and its listeners must not be told of blocks it never held (they were: the repair
   * gave the write's buffered events, and a replica claimed blocks the node did not cache).
   */
  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = SEPARATE_THREAD)
  void aWriteThatFailsBeforeLinkingItsBlocksReportsNoneOfThem() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(100).blockSize(2)
        .build();
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    t.insert(new int[] {1, 2, 3, 4});
    t.midWriteFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, () -> t.insert(new int[] {5, 6, 7, 8}));
    t.midWriteFaultForTest = () -> { };
    assertEquals(4, t.sizeTokens(), "the tree as it was");
    assertWhole(t, replay);
    assertEquals(List.of("stored 2", "cleared", "stored 2"), replay.log);

    ConcurrentPrefixTree e = ConcurrentPrefixTree.engineDriven(2);
    ConcurrentPrefixTreeTest.Replay mirror = new ConcurrentPrefixTreeTest.Replay();
    e.addListener(mirror);
    CacheEventListener engine = e.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    e.midWriteFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, () -> engine.onBlocksStored(
        CacheEventListener.NO_PARENT, new long[] {2}, new int[] {7, 8}));
    e.midWriteFaultForTest = () -> { };
    assertEquals(1, e.engineEventFailures());
    assertEquals(2, e.sizeTokens(), "the tree as it was");
    assertWhole(e, mirror);
    engine.onBlocksRemoved(new long[] {1});
    assertWhole(e, mirror);
    assertEquals(Set.of(), mirror.held);
  }

  /**
   * An engine event whose failure the tree throws on (out of memory) must still give the
   * listeners the events of its repair before it returns, as every other write does: they
   * waited for the next write, and a replica held the blocks of the cleared tree meanwhile.
   */
  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = SEPARATE_THREAD)
  void anEngineEventThatThrowsOnTellsTheListenersAtOnce() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.engineDriven(2);
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    CacheEventListener engine = t.engineEvents();
    engine.onBlocksStored(CacheEventListener.NO_PARENT, new long[] {1}, new int[] {5, 6});
    t.midStoreFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, () -> engine.onBlocksStored(
        1, new long[] {2}, new int[] {7, 8}));
    t.midStoreFaultForTest = () -> { };
    assertEquals(0, t.sizeTokens(), "cleared: the store left a block no removal reaches");
    assertWhole(t, replay);
    assertEquals(List.of("stored 1", "cleared"), replay.log);
  }

  /**
   * Random self-managed writes (inserts, acquires, releases, evictions, clears) over a small
   * alphabet, each failing with some chance at one of the points where a write allocates: after
   * every write the tree is consistent and the replayed events equal the blocks held; every
   * lease is released exactly once (a failed release counts, a second one is refused), and once
   * all are released nothing is pinned and everything can be evicted.
   */
  @Property(tries = 300)
  void writesFailingAnywhereLoseAndDoubleNothing(@ForAll("writes") List<int[]> writes) {
    // jqwik does not apply the class's @Timeout: each try has the same limit of its own
    int failed = assertTimeoutPreemptively(Duration.ofSeconds(120), () -> applyFailing(writes));
    Statistics.label("a write failed").collect(failed > 0);
    Statistics.label("a write failed").coverage(c -> c.check(true).percentage(p -> p >= 30));
  }

  /** Applies the writes of one try and checks the tree; returns how many writes failed. */
  private static int applyFailing(List<int[]> writes) {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(24).blockSize(2)
        .build();
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    List<ConcurrentPrefixTree.Lease> leases = new ArrayList<>();
    int[] countdown = {0};
    t.midWriteFaultForTest = () -> {
      if (--countdown[0] == 0) {
        throw new OutOfMemoryError("test");
      }
    };
    int failed = 0;
    for (int[] w : writes) {
      countdown[0] = w[1]; // 0: no failure; else at the w[1]-th allocation point of this write
      int[] prompt = Arrays.copyOfRange(w, 2, w.length);
      try {
        switch (w[0]) {
          case 0 -> t.insert(prompt);
          case 1 -> leases.add(t.acquire(prompt));
          case 2 -> {
            if (!leases.isEmpty()) {
              ConcurrentPrefixTree.Lease l = leases.remove(prompt[0] % leases.size());
              try {
                l.release();
              } finally {
                assertThrows(IllegalStateException.class, l::release, "released twice");
              }
            }
          }
          case 3 -> t.evictTo(prompt.length);
          default -> t.clear();
        }
      } catch (OutOfMemoryError expected) {
        failed++;
      }
      countdown[0] = 0;
      assertWhole(t, replay);
    }
    for (ConcurrentPrefixTree.Lease l : leases) {
      l.release();
    }
    assertEquals(0, t.pinnedTokens(), "pinned once every lease is released");
    t.evictTo(0);
    assertEquals(0, t.sizeTokens());
    assertWhole(t, replay);
    return failed;
  }

  @Provide
  Arbitrary<List<int[]>> writes() {
    return net.jqwik.api.Combinators.combine(
            Arbitraries.frequency(
                net.jqwik.api.Tuple.of(5, 0), net.jqwik.api.Tuple.of(3, 1),
                net.jqwik.api.Tuple.of(3, 2), net.jqwik.api.Tuple.of(1, 3),
                net.jqwik.api.Tuple.of(1, 4)),
            Arbitraries.frequency(net.jqwik.api.Tuple.of(6, 0), net.jqwik.api.Tuple.of(1, 1),
                net.jqwik.api.Tuple.of(1, 2), net.jqwik.api.Tuple.of(1, 3)),
            Arbitraries.integers().between(0, 2).array(int[].class).ofMinSize(1).ofMaxSize(10))
        .as((kind, fault, prompt) -> {
          int[] w = new int[prompt.length + 2];
          w[0] = kind;
          w[1] = fault;
          System.arraycopy(prompt, 0, w, 2, prompt.length);
          return w;
        }).list().ofMaxSize(40);
  }

  /**
   * A listener whose registration throws (its snapshot could not be taken) must not be left
   * registered: its owner never got the snapshot, and its replica would hear of evictions of
   * blocks it was never told of.
   */
  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = SEPARATE_THREAD)
  void aListenerWhoseSnapshotFailsIsNotRegistered() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(100).blockSize(2)
        .build();
    t.insert(new int[] {1, 2, 3, 4});
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.midWriteFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, () -> t.addListenerWithSnapshot(replay));
    t.midWriteFaultForTest = () -> { };
    t.insert(new int[] {5, 6});
    t.evictTo(0);
    assertEquals(List.of(), replay.log, "events to a listener that was not added");
  }

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = SEPARATE_THREAD)
  void anEvictToThatFailsPartWayLeavesAConsistentTree() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(100).blockSize(2)
        .build();
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    t.insert(new int[] {1, 2, 3, 4, 5, 6, 7, 8});
    t.midWriteFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, () -> t.evictTo(5));
    t.midWriteFaultForTest = () -> { };
    assertWhole(t, replay);
    assertEquals(0, t.evictTo(t.sizeTokens()));
  }

  /**
   * A lease taken before a write whose repair cleared the tree pins nothing and is released
   * once, quietly; a release that itself fails has still released its lease (a second release
   * is refused as for any lease), and leaves no count behind.
   */
  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = SEPARATE_THREAD)
  void leasesAreNeitherLostNorDoubledByARepair() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(12).blockSize(2)
        .build();
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    t.insert(new int[] {1, 2, 3, 4});
    ConcurrentPrefixTree.Lease before = t.acquire(new int[] {1, 2, 3, 4, 9});
    assertEquals(4, before.lockedTokens());
    t.insert(new int[] {5, 6, 7, 8, 9, 10});
    t.midWriteFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, () -> t.insert(new int[] {20, 21, 22, 23, 24}));
    t.midWriteFaultForTest = () -> { };
    assertWhole(t, replay);
    assertDoesNotThrow(before::release);
    assertThrows(IllegalStateException.class, before::release);
    assertEquals(0, t.pinnedTokens());

    // the release itself fails: its leaf goes back to the LRU heap, which fails to grow
    t.insert(new int[] {1, 2, 3, 4});
    ConcurrentPrefixTree.Lease failing = t.acquire(new int[] {1, 2, 3, 4});
    t.midWriteFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, failing::release);
    t.midWriteFaultForTest = () -> { };
    assertWhole(t, replay);
    assertEquals(0, t.pinnedTokens());
    assertThrows(IllegalStateException.class, failing::release, "released once already");
    assertDoesNotThrow(failing::close);

    // an acquire that fails once it pinned its path hands out no lease: it must pin nothing
    t.insert(new int[] {1, 2, 3, 4, 5, 6});
    t.insert(new int[] {1, 2}); // a recency boundary after 2, which the acquire's use removes
    t.midWriteFaultForTest = oom();
    assertThrows(OutOfMemoryError.class, () -> t.acquire(new int[] {1, 2, 3, 4, 5, 6}));
    t.midWriteFaultForTest = () -> { };
    assertWhole(t, replay);
    assertEquals(0, t.pinnedTokens());
    t.evictTo(0);
    assertEquals(0, t.sizeTokens(), "nothing left pinned");
  }

  /**
   * close() is quiet only about a second release: an IllegalStateException of the release
   * itself (here from where it puts the leaf back on the LRU heap) must reach the caller, not
   * be taken for "already released". The lease is released all the same.
   */
  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = SEPARATE_THREAD)
  void aLeasesCloseHidesOnlyASecondRelease() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(12).blockSize(2)
        .build();
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    t.addListener(replay);
    t.insert(new int[] {1, 2, 3, 4});
    ConcurrentPrefixTree.Lease lease = t.acquire(new int[] {1, 2, 3, 4});
    boolean[] thrown = {false};
    t.midWriteFaultForTest = () -> {
      if (!thrown[0]) {
        thrown[0] = true;
        throw new IllegalStateException("unexpected, in the release");
      }
    };
    IllegalStateException e = assertThrows(IllegalStateException.class, lease::close,
        "the release's own failure");
    t.midWriteFaultForTest = () -> { };
    assertEquals("unexpected, in the release", e.getMessage());
    assertWhole(t, replay);
    assertEquals(0, t.pinnedTokens());
    assertDoesNotThrow(lease::close, "a second close");
    IllegalStateException twice = assertThrows(IllegalStateException.class, lease::release);
    assertTrue(twice.getMessage().contains("already released"), twice.getMessage());
  }
}
