package io.github.prefixrouter.internal.collect;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

class LongHashSetPropertyTest {

  static final int POOL = LongLongMapPropertyTest.POOL;

  /** Key k of the pool: 0 for k = 0; the map test's keys, half of which share a home slot. */
  static long key(int k) {
    return LongLongMapPropertyTest.key(k);
  }

  @Provide
  Arbitrary<List<Long>> ops() {
    // x >= 0: add key(x); x < 0: remove key(-x - 1), so that the zero key is removed too; a
    // small pool so that removals hit, half of it sharing the last slot as home (see key)
    return Arbitraries.longs().between(-POOL, POOL - 1).list().ofMaxSize(400);
  }

  @Property
  void behavesLikeHashSet(@ForAll("ops") List<Long> ops) {
    LongHashSet set = new LongHashSet();
    Set<Long> model = new HashSet<>();
    for (long op : ops) {
      long key = key((int) (op >= 0 ? op : -op - 1));
      if (op >= 0) {
        assertEquals(model.add(key), set.add(key), () -> "add " + key);
      } else {
        assertEquals(model.remove(key), set.remove(key), () -> "remove " + key);
      }
      assertEquals(model.size(), set.size(), () -> "size after " + op);
      for (int k = 0; k < POOL; k++) {
        long h = key(k);
        assertEquals(model.contains(h), set.contains(h), () -> "contains " + h + " after " + op);
      }
    }
    long[] got = set.toArray();
    java.util.Arrays.sort(got);
    assertArrayEquals(model.stream().mapToLong(Long::longValue).sorted().toArray(), got);
  }

  /**
   * Keys that differ only in their high bits ({@code i << 44}) spread over the table: every key
   * bit reaches the home slot. With a mix that ignored them, all 2,048 went to slot 0 of the
   * 4,096-slot table and the last one sat 2,047 slots from home.
   */
  @Test
  void keysDifferingOnlyInHighBitsSpread() {
    for (int shift : new int[] {32, 40, 44, 52}) {
      LongHashSet set = new LongHashSet();
      for (long i = 1; i <= 2_048; i++) {
        assertTrue(set.add(i << shift));
      }
      for (long i = 1; i <= 2_048; i++) {
        assertTrue(set.contains(i << shift));
      }
      assertEquals(2_048, set.size());
      int d = set.maxDisplacement();
      assertTrue(d <= 64, "keys i << " + shift + ": a key sits " + d + " slots from home");
    }
  }
}
