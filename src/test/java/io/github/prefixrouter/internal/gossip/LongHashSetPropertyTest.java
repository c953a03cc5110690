package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

class LongHashSetPropertyTest {

  @Provide
  Arbitrary<List<Long>> ops() {
    // positive: add, negative: remove (of -x); small pool so removals hit; 0 included
    return Arbitraries.longs().between(-40, 40).list().ofMaxSize(400);
  }

  @Property
  void behavesLikeHashSet(@ForAll("ops") List<Long> ops) {
    LongHashSet set = new LongHashSet();
    Set<Long> model = new HashSet<>();
    for (long op : ops) {
      long key = Math.abs(op) * 0x9E3779B97F4A7C15L;
      if (op >= 0) {
        assertEquals(model.add(key), set.add(key));
      } else {
        assertEquals(model.remove(key), set.remove(key));
      }
      assertEquals(model.size(), set.size());
      for (long k = 0; k <= 40; k++) {
        long h = k * 0x9E3779B97F4A7C15L;
        assertEquals(model.contains(h), set.contains(h));
      }
    }
    long[] got = set.toArray();
    java.util.Arrays.sort(got);
    assertArrayEquals(model.stream().mapToLong(Long::longValue).sorted().toArray(), got);
  }
}
