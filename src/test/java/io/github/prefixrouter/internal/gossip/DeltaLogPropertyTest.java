package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/** DeltaLog against a naive list that scans every retained delta. */
class DeltaLogPropertyTest {

  @Property
  void afterMatchesANaiveScan(
      @ForAll @Size(max = 200) List<@IntRange(min = 0, max = 9) Integer> sizes,
      @ForAll @IntRange(min = 1, max = 60) int maxHashes,
      @ForAll @IntRange(min = 0, max = 300) int budget,
      @ForAll @IntRange(min = 0, max = 100) int maxSingle) {
    long start = 7;
    DeltaLog log = new DeltaLog(maxHashes, start);
    List<Delta> model = new ArrayList<>();
    long modelFloor = start;
    long seq = start;
    for (int n : sizes) {
      Delta d = new Delta(++seq, Delta.STORE, new long[n]);
      log.append(d);
      model.add(d);
      long total = model.stream().mapToLong(x -> Math.max(1, x.hashes().length)).sum();
      while (!model.isEmpty() && total > maxHashes) {
        Delta old = model.remove(0);
        total -= Math.max(1, old.hashes().length);
        modelFloor = old.seq();
      }
      assertEquals(modelFloor, log.floor());
      assertEquals(seq, log.last());
      assertEquals(model.size(), log.size());
      assertEquals(total, log.hashCount());
      for (long v = start - 1; v <= seq + 1; v++) {
        List<Delta> expected = naiveAfter(model, modelFloor, seq, v, budget, maxSingle);
        List<Delta> actual = log.after(v, budget, maxSingle);
        if (expected == null) {
          assertNull(actual, "version " + v);
        } else {
          assertEquals(expected, actual, "version " + v);
        }
      }
    }
  }

  private static List<Delta> naiveAfter(
      List<Delta> model, long floor, long last, long v, int budget, int maxSingle) {
    if (v < floor || v > last) {
      return null;
    }
    List<Delta> out = new ArrayList<>();
    int used = 0;
    long prevRef = 0;
    for (Delta d : model) {
      if (d.seq() <= v) {
        continue;
      }
      int size = d.encodedSize(prevRef);
      if (out.isEmpty() && size > maxSingle) {
        return null;
      }
      if (used + size > budget) {
        break;
      }
      out.add(d);
      used += size;
      prevRef = d.lastRef(prevRef);
    }
    return out;
  }
}
