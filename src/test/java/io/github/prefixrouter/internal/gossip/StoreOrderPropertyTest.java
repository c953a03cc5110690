package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

/** {@link StoreOrder} against a naive sorted map, invariants checked after every operation. */
class StoreOrderPropertyTest {

  @Provide
  Arbitrary<List<Integer>> ops() {
    // 0..5 append (with a gap of 1..op+1 store numbers), 6..8 remove, 9 clear (rare)
    return Arbitraries.integers().between(0, 9).list().ofMaxSize(600);
  }

  @Property
  void behavesLikeASortedMap(@ForAll("ops") List<Integer> ops, @ForAll long seed) {
    StoreOrder order = new StoreOrder();
    TreeMap<Long, Long> model = new TreeMap<>();
    java.util.SplittableRandom r = new java.util.SplittableRandom(seed);
    long next = 1 + r.nextLong(1_000);
    for (int op : ops) {
      if (op <= 5) {
        long fp = r.nextLong(1L << 32);
        assertTrue(order.append(next, fp));
        model.put(next, fp);
        next += 1 + r.nextInt(op + 1) + (r.nextInt(50) == 0 ? 100_000 : 0);
      } else if (op <= 8) {
        // remove a held store number, or look up one that is not held
        long probe = model.isEmpty() || r.nextInt(4) == 0 ? next + r.nextLong(10)
            : model.ceilingKey(model.firstKey() + r.nextLong(model.lastKey() - model.firstKey() + 1));
        int i = order.find(probe);
        Long fp = model.remove(probe);
        if (fp == null) {
          assertEquals(-1, i);
        } else {
          assertEquals((long) fp, order.fingerprintAt(i));
          order.removeAt(i);
          assertEquals(-1, order.find(probe));
        }
      } else if (r.nextInt(5) == 0) {
        order.clear();
        model.clear();
      }
      order.checkInvariants();
      assertEquals(model.size(), order.size());
      long[][] arrays = order.toArrays();
      assertArrayEquals(model.keySet().stream().mapToLong(Long::longValue).toArray(), arrays[0]);
      assertArrayEquals(model.values().stream().mapToLong(Long::longValue).toArray(), arrays[1]);
      assertArrayEquals(arrays[1], order.fingerprints());
      for (Map.Entry<Long, Long> e : model.entrySet()) {
        int i = order.find(e.getKey());
        assertTrue(i >= 0);
        assertEquals((long) e.getValue(), order.fingerprintAt(i));
      }
      // memory: 8 bytes per live entry, at most 8/7 dead and 9/8 growth slack (plus a floor
      // of 16 entries and the 8 dead entries always tolerated)
      assertTrue(order.retainedBytes() <= 48 + 8 * (16 + 9) + 8.0 * model.size() * 8 / 7 * 9 / 8,
          "retained " + order.retainedBytes() + " for " + model.size());
    }
  }

  @Test
  void storeNumbersMustAscendAndStayWithin31BitsOfTheOldestLiveOne() {
    StoreOrder order = new StoreOrder();
    assertTrue(order.append(10, 1));
    org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
        () -> order.append(10, 2));
    // the oldest block is still held: a block 2^31 stores later cannot be placed
    assertFalse(order.append(10 + (1L << 31), 3));
    assertEquals(1, order.size());
    // once the old block is gone, compaction rebases and the new one fits
    order.removeAt(order.find(10));
    assertTrue(order.append(10 + (1L << 31), 3));
    assertEquals(3, order.fingerprintAt(order.find(10 + (1L << 31))));
    order.checkInvariants();
  }

  /**
   * While the oldest entry is held, a block 2^31 stores later is refused in constant time: no
   * compaction (linear in the entries) is run for it, since it could not move the base. Once the
   * oldest entry goes, the next such append compacts once and is placed.
   */
  @Test
  void refusingAFarStoreDoesNotCompactUntilTheOldestEntryGoes() {
    StoreOrder order = new StoreOrder();
    for (long s = 1; s <= 1_000; s++) {
      assertTrue(order.append(s, s));
    }
    long far = 1 + (1L << 31);
    for (int k = 0; k < 100; k++) {
      assertFalse(order.append(far + k, 7));
    }
    assertEquals(0, order.compactions(), "compactions for refused appends");
    assertEquals(1_000, order.size());
    // removing a later entry does not move the base either
    order.removeAt(order.find(500));
    assertFalse(order.append(far, 7));
    assertEquals(0, order.compactions());
    // the oldest goes: one compaction moves the base to store 2, and the far block fits
    order.removeAt(order.find(1));
    assertTrue(order.append(far, 7));
    assertEquals(1, order.compactions());
    // store 2 is held now: one store further is refused, again without compacting
    assertFalse(order.append(far + 1, 8));
    assertEquals(1, order.compactions());
    assertEquals(7, order.fingerprintAt(order.find(far)));
    assertEquals(2, order.fingerprintAt(order.find(2)));
    order.checkInvariants();
    // every entry dead: the next far append compacts to empty and starts a new base
    StoreOrder gone = new StoreOrder();
    assertTrue(gone.append(5, 1));
    gone.removeAt(gone.find(5));
    assertTrue(gone.append(5 + (1L << 40), 2));
    assertEquals(1, gone.size());
    gone.checkInvariants();
  }
}
