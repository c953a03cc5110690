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
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

class LocalSummaryPropertyTest {

  @Provide
  Arbitrary<List<List<Long>>> batches() {
    // each batch: first element picks the op (0 store, 1 evict, 2 clear), rest are hashes
    return Arbitraries.longs().between(0, 30).list().ofMinSize(1).ofMaxSize(12).list()
        .ofMaxSize(60);
  }

  /** Replaying the delta log from any covered version onto that version's set gives the set. */
  @Property
  void deltasReplayToTheExactSet(@ForAll("batches") List<List<Long>> batches) {
    LocalSummary s = new LocalSummary(7, 1_000_000, 3);
    Set<Long> model = new HashSet<>();
    for (List<Long> b : batches) {
      long[] hashes = b.subList(1, b.size()).stream().mapToLong(Long::longValue).toArray();
      switch ((int) (b.get(0) % 3)) {
        case 0 -> {
          s.onStored(hashes);
          for (long h : hashes) {
            model.add(h);
          }
        }
        case 1 -> {
          s.onEvicted(hashes);
          for (long h : hashes) {
            model.remove(h);
          }
        }
        default -> {
          s.onCleared();
          model.clear();
        }
      }
      assertEquals(model.size(), s.size());
    }
    Set<Long> replay = new HashSet<>();
    long v = 0;
    for (Delta d : s.deltasAfter(0, Integer.MAX_VALUE, Integer.MAX_VALUE)) {
      assertEquals(v + 1, d.seq());
      assertTrue(d.hashes().length <= 3);
      v = d.seq();
      switch (d.op()) {
        case Delta.STORE -> Arrays.stream(d.hashes()).forEach(replay::add);
        case Delta.EVICT -> Arrays.stream(d.hashes()).forEach(replay::remove);
        default -> replay.clear();
      }
    }
    assertEquals(s.version(), v);
    assertEquals(model, replay);
    long[] snap = s.snapshot().hashes();
    Arrays.sort(snap);
    assertArrayEquals(model.stream().mapToLong(Long::longValue).sorted().toArray(), snap);
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
    // byte budget: each single-hash delta is 1 + 1 + 8 = 10 bytes
    assertEquals(3, s.deltasAfter(10, 35, 1 << 20).size());
    // no-op events bump nothing
    s.onStored(new long[] {20});
    s.onEvicted(new long[] {999});
    assertEquals(20, s.version());
  }
}
