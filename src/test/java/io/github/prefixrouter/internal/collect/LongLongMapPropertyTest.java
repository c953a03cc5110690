package io.github.prefixrouter.internal.collect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

/**
 * LongLongMap against a HashMap, every key of the pool looked up after every operation. The
 * pool holds key 0 (kept aside) and keys chosen (by search under the map's mix) to share the
 * last slot as their home in every table this test reaches, so that probe clusters form, wrap
 * around the end of the table and are shifted back on removal.
 */
class LongLongMapPropertyTest {

  static final int POOL = 48;

  /** Non-zero keys whose home is the last slot of every table up to 128 slots. */
  static final long[] SHARED_HOME = new long[POOL / 2];

  static {
    int n = 0;
    for (long x = 1; n < SHARED_HOME.length; x++) {
      long candidate = x * 0x9E3779B97F4A7C15L;
      if ((LongHashSet.mix(candidate) & 127) == 127) {
        SHARED_HOME[n++] = candidate;
      }
    }
  }

  static long key(int k) {
    if (k == 0) {
      return 0;
    }
    return k % 2 == 0 ? SHARED_HOME[k / 2] : k * 0x9E3779B97F4A7C15L;
  }

  record Op(int kind, int key, long value) {}

  @Provide
  Arbitrary<List<Op>> ops() {
    Arbitrary<Op> op = Combinators.combine(
        Arbitraries.integers().between(0, 3), // 0, 1: put; 2: remove; 3: clear (rarely)
        Arbitraries.integers().between(0, POOL - 1),
        Arbitraries.longs().between(-5, 5)).as((kind, k, v) -> new Op(kind, k, v));
    return op.list().ofMaxSize(400);
  }

  @Property
  void behavesLikeHashMap(@ForAll("ops") List<Op> ops) {
    LongLongMap map = new LongLongMap();
    Map<Long, Long> model = new HashMap<>();
    int step = 0;
    for (Op op : ops) {
      long key = key(op.key());
      switch (op.kind()) {
        case 0, 1 -> {
          map.put(key, op.value());
          model.put(key, op.value());
        }
        case 2 -> assertEquals(model.containsKey(key) ? model.remove(key) : LongLongMap.ABSENT,
            map.remove(key), "remove " + key);
        default -> {
          if (step++ % 8 == 0) {
            map.clear();
            model.clear();
          }
        }
      }
      assertEquals(model.size(), map.size(), "size after " + op);
      for (int k = 0; k < POOL; k++) {
        long kk = key(k);
        assertEquals(model.getOrDefault(kk, LongLongMap.ABSENT), map.get(kk), "get " + kk);
      }
    }
    Map<Long, Long> seen = new HashMap<>();
    map.forEach((k, v) -> assertEquals(null, seen.put(k, v), "key listed twice: " + k));
    assertEquals(model, seen);
  }

  /**
   * Keys that differ only in their high bits ({@code i << 44}) spread over the table: with a mix
   * that ignored those bits they all shared slot 0 of the 4,096-slot table.
   */
  @Test
  void keysDifferingOnlyInHighBitsSpread() {
    LongLongMap map = new LongLongMap();
    for (long i = 1; i <= 2_048; i++) {
      map.put(i << 44, i);
    }
    for (long i = 1; i <= 2_048; i++) {
      assertEquals(i, map.get(i << 44));
    }
    int d = map.maxDisplacement();
    assertTrue(d <= 64, "a key sits " + d + " slots from home");
  }
}
