package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/** The packed edge encoding against plain int arrays. */
class PackedTokensTest {

  /** Ids that stress the layouts: equal low halves, bit 16 set, ids needing the wide layout. */
  @Provide
  Arbitrary<int[]> ids() {
    Arbitrary<Integer> id = Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(6, Arbitraries.integers().between(0, 3)),
        net.jqwik.api.Tuple.of(3, Arbitraries.integers().between(0, 3).map(x -> x | 1 << 16)),
        net.jqwik.api.Tuple.of(2, Arbitraries.integers().between(0, 65_535)),
        net.jqwik.api.Tuple.of(2, Arbitraries.integers().between(65_536, 131_071)),
        net.jqwik.api.Tuple.of(1, Arbitraries.of(131_072, 131_073, 1 << 20 | 1, -1, -65_535,
            Integer.MIN_VALUE, Integer.MAX_VALUE)));
    // mostly one layout per array, sometimes a single wide id among narrow ones
    return Arbitraries.integers().between(0, 2).flatMap(kind -> {
      Arbitrary<Integer> pick = kind == 0
          ? Arbitraries.integers().between(0, 131_071)
          : kind == 1 ? id.filter(x -> x >>> 17 == 0) : id;
      return pick.array(int[].class).ofMaxSize(70);
    });
  }

  @Property
  void roundTripsAndPicksTheSmallerLayout(@ForAll("ids") int[] t) {
    char[] e = PackedTokens.encode(t, 0, t.length);
    assertArrayEquals(t, PackedTokens.decode(e, t.length));
    for (int i = 0; i < t.length; i++) {
      assertEquals(t[i], PackedTokens.get(e, t.length, i), "id " + i);
    }
    boolean narrow = Arrays.stream(t).allMatch(x -> x >= 0 && x < 131_072);
    int expected = narrow ? t.length + (t.length + 15) / 16 : 2 * t.length;
    assertEquals(expected, e.length, "chars for " + t.length + " ids, narrow " + narrow);
  }

  @Property
  void slicesAppendsAndConcatenatesLikeIntArrays(
      @ForAll("ids") int[] a, @ForAll("ids") int[] b,
      @ForAll @IntRange(min = 0, max = 70) int x, @ForAll @IntRange(min = 0, max = 70) int y) {
    int from = Math.min(Math.min(x, y), a.length);
    int to = Math.min(Math.max(x, y), a.length);
    char[] ea = PackedTokens.encode(a, 0, a.length);
    char[] eb = PackedTokens.encode(b, 0, b.length);
    int[] slice = Arrays.copyOfRange(a, from, to);
    // results must be the canonical encoding, whatever layout the parts had
    assertArrayEquals(PackedTokens.encode(slice, 0, slice.length),
        PackedTokens.slice(ea, a.length, from, to));
    int[] ab = ConcurrentPrefixTreeTest.cat(a, b);
    char[] canonical = PackedTokens.encode(ab, 0, ab.length);
    assertArrayEquals(canonical, PackedTokens.concat(ea, a.length, eb, b.length));
    assertArrayEquals(canonical, PackedTokens.append(ea, a.length, b, 0, b.length));
    assertArrayEquals(PackedTokens.encode(ab, from, ab.length),
        PackedTokens.encode(Arrays.copyOfRange(ab, from, ab.length), 0, ab.length - from));
  }

  @Property
  void mismatchFindsTheFirstDifference(
      @ForAll("ids") int[] a, @ForAll("ids") int[] q,
      @ForAll @IntRange(min = 0, max = 70) int from, @ForAll @IntRange(min = 0, max = 70) int qoff,
      @ForAll @IntRange(min = 0, max = 70) int copied) {
    from = Math.min(from, a.length);
    // make q share a run with a from `from` on, so that equal stretches of all lengths occur
    int[] query = Arrays.copyOf(q, Math.max(q.length, Math.min(qoff, q.length) + copied));
    qoff = Math.min(qoff, q.length);
    for (int k = 0; k < copied && from + k < a.length; k++) {
      query[qoff + k] = a[from + k];
    }
    int m = Math.min(a.length - from, query.length - qoff);
    int expected = -1;
    for (int k = 0; k < m; k++) {
      if (a[from + k] != query[qoff + k]) {
        expected = k;
        break;
      }
    }
    char[] e = PackedTokens.encode(a, 0, a.length);
    assertEquals(expected, PackedTokens.mismatch(e, a.length, from, query, qoff, m));
  }

  @Test
  void idsWithEqualLowHalvesNeverCompareEqual() {
    int[] edge = {1, 65_537, 1, 65_537};
    char[] e = PackedTokens.encode(edge, 0, 4);
    assertEquals(5, e.length, "narrow: four chars and one bit group");
    assertEquals(1, PackedTokens.mismatch(e, 4, 0, new int[] {1, 1, 1, 65_537}, 0, 4));
    assertEquals(0, PackedTokens.mismatch(e, 4, 1, new int[] {131_073}, 0, 1));
    assertEquals(0, PackedTokens.mismatch(e, 4, 0, new int[] {1 - (1 << 16)}, 0, 1));
    assertEquals(-1, PackedTokens.mismatch(e, 4, 1, new int[] {65_537, 1, 65_537}, 0, 3));
    char[] wide = PackedTokens.encode(new int[] {1, 131_073, -1}, 0, 3);
    assertEquals(6, wide.length);
    assertEquals(1, PackedTokens.mismatch(wide, 3, 0, new int[] {1, 65_537, -1}, 0, 3));
    assertEquals(-1, PackedTokens.mismatch(wide, 3, 0, new int[] {1, 131_073, -1}, 0, 3));
  }
}
