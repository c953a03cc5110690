package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

class LocalSummaryPropertyTest {

  /**
   * The naive receiver: a map store number -> fingerprint, filled by STOREs in order (each
   * fingerprint takes the next store number), emptied by EVICTs that name store numbers.
   */
  static final class Replay {
    final java.util.TreeMap<Long, Long> byStore = new java.util.TreeMap<>();
    final Set<Long> set = new HashSet<>();
    long stores;

    void apply(Delta d) {
      switch (d.op()) {
        case Delta.STORE -> {
          for (long f : d.hashes()) {
            byStore.put(++stores, f);
            assertTrue(set.add(f), "STORE of a fingerprint already published: " + f);
          }
        }
        case Delta.EVICT -> {
          long prev = 0;
          for (long r : d.hashes()) {
            assertTrue(r > prev, "EVICT store numbers not ascending");
            prev = r;
            Long f = byStore.remove(r);
            assertTrue(f != null, "EVICT names store number " + r + ", which holds nothing");
            assertTrue(set.remove(f));
          }
        }
        default -> {
          byStore.clear();
          set.clear();
        }
      }
    }

    /** The snapshot carries exactly this replay's store numbers and fingerprints. */
    void checkSnapshot(LocalSummary.Snapshot snap) {
      assertEquals(stores, snap.storeCount());
      assertArrayEquals(byStore.keySet().stream().mapToLong(Long::longValue).toArray(),
          snap.stores());
      assertArrayEquals(byStore.values().stream().mapToLong(Long::longValue).toArray(),
          snap.hashes());
    }
  }

  @Provide
  Arbitrary<List<List<Long>>> batches() {
    // each batch: first element picks the op (0 store, 1 evict, 2 clear), rest are hashes
    return Arbitraries.longs().between(0, 30).list().ofMinSize(1).ofMaxSize(12).list()
        .ofMaxSize(60);
  }

  /**
   * Replaying the delta log from any covered version onto that version's set gives the set; and
   * only a change bumps the version: one per delta of at most 3 changed blocks, none for blocks
   * stored that are present, evicted that are absent, or a clear of the empty set.
   */
  @Property
  void deltasReplayToTheExactSet(@ForAll("batches") List<List<Long>> batches) {
    LocalSummary s = new LocalSummary(7, 1_000_000, 3);
    Set<Long> model = new HashSet<>();
    for (List<Long> b : batches) {
      long[] hashes = b.subList(1, b.size()).stream().mapToLong(Long::longValue).toArray();
      long before = s.version();
      int changed = 0;
      switch ((int) (b.get(0) % 3)) {
        case 0 -> {
          s.onStored(hashes);
          for (long h : hashes) {
            changed += model.add(h) ? 1 : 0;
          }
        }
        case 1 -> {
          s.onEvicted(hashes);
          for (long h : hashes) {
            changed += model.remove(h) ? 1 : 0;
          }
        }
        default -> {
          s.onCleared();
          changed = model.isEmpty() ? 0 : 3;
          model.clear();
        }
      }
      assertEquals(model.size(), s.size());
      assertEquals(before + (changed + 2) / 3, s.version(), "version after " + b);
    }
    Replay replay = new Replay();
    long v = 0;
    for (Delta d : s.deltasAfter(0, Integer.MAX_VALUE, Integer.MAX_VALUE)) {
      assertEquals(v + 1, d.seq());
      assertTrue(d.hashes().length <= 3);
      v = d.seq();
      replay.apply(d);
    }
    assertEquals(s.version(), v);
    Set<Long> fingerprints = new HashSet<>();
    model.forEach(h -> fingerprints.add(BlockFingerprint.of(h)));
    assertEquals(fingerprints, replay.set);
    replay.checkSnapshot(s.snapshot());
    long[] snap = s.snapshot().hashes();
    Arrays.sort(snap);
    assertArrayEquals(model.stream().mapToLong(Long::longValue).sorted().toArray(), snap);
  }

  @Provide
  Arbitrary<List<List<Long>>> collidingBatches() {
    // hashes a | b << 32 with a, b in 0..5: fingerprint a ^ b, so distinct blocks often share one
    Arbitrary<Long> hash = Arbitraries.longs().between(0, 5).list().ofSize(2)
        .map(ab -> ab.get(0) | (ab.get(1) << 32));
    return Combinators.combine(Arbitraries.longs().between(0, 8), hash.list().ofMaxSize(6))
        .as((op, hs) -> {
          List<Long> b = new java.util.ArrayList<>();
          b.add(op);
          b.addAll(hs);
          return b;
        }).list().ofMaxSize(80);
  }

  /**
   * With fingerprints shared by distinct blocks, the deltas publish exactly the set of
   * fingerprints of the blocks held: every STORE adds a fingerprint not yet published, every
   * EVICT removes one that is, and after every batch the replayed set equals the naive model's.
   */
  @Property
  void sharedFingerprintsPublishTheExactFingerprintSet(
      @ForAll("collidingBatches") List<List<Long>> batches) {
    LocalSummary s = new LocalSummary(1, 1_000_000, 4);
    Set<Long> blocks = new HashSet<>();
    Replay replay = new Replay();
    long v = 0;
    for (List<Long> b : batches) {
      long[] hashes = b.subList(1, b.size()).stream().mapToLong(Long::longValue).toArray();
      switch ((int) (b.get(0) % 9)) {
        case 8 -> {
          s.onCleared();
          blocks.clear();
        }
        case 0, 1, 2, 3 -> {
          s.onEvicted(hashes);
          for (long h : hashes) {
            blocks.remove(h);
          }
        }
        default -> {
          s.onStored(hashes);
          for (long h : hashes) {
            blocks.add(h);
          }
        }
      }
      for (Delta d : s.deltasAfter(v, Integer.MAX_VALUE, Integer.MAX_VALUE)) {
        assertEquals(v + 1, d.seq());
        v = d.seq();
        replay.apply(d);
      }
      Set<Long> expected = new HashSet<>();
      for (long h : blocks) {
        expected.add((h ^ (h >>> 32)) & 0xFFFF_FFFFL);
      }
      assertEquals(expected, replay.set);
      replay.checkSnapshot(s.snapshot());
      assertEquals(blocks.size(), s.size());
      assertEquals(expected.size(), s.fingerprintCount());
      long[] snap = s.snapshot().hashes();
      Arrays.sort(snap);
      assertArrayEquals(expected.stream().mapToLong(Long::longValue).sorted().toArray(), snap);
    }
  }

  @Test
  void logIsBoundedAndReportsWhatItNoLongerCovers() {
    LocalSummary s = new LocalSummary(1, 10, 4);
    for (long i = 1; i <= 20; i++) {
      s.onStored(new long[] {i});
    }
    assertEquals(20, s.version());
    assertTrue(s.logCovers(10));
    assertTrue(!s.logCovers(9));
    assertNull(s.deltasAfter(5, 1 << 20, 1 << 20));
    assertEquals(10, s.deltasAfter(10, 1 << 20, 1 << 20).size());
    // byte budget: each single-fingerprint delta is 1 (head) + 4 = 5 bytes
    assertEquals(3, s.deltasAfter(10, 17, 1 << 20).size());
    // no-op events bump nothing
    s.onStored(new long[] {20});
    s.onEvicted(new long[] {999});
    assertEquals(20, s.version());
  }
}
