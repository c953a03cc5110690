package io.github.prefixrouter;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The stop fields of {@link GenerationParams}: checks, copies, equality. */
class GenerationParamsTest {

  @Test
  void theFourArgumentConstructorAndTheDefaultsHaveNoStops() {
    GenerationParams p = new GenerationParams(4, 0.5, 0.9, 3L);
    assertEquals(List.of(), p.stop());
    assertEquals(List.of(), p.stopTokenIds());
    assertFalse(p.hasStops());
    assertFalse(GenerationParams.DEFAULT.hasStops());
    assertFalse(GenerationParams.greedy(8).hasStops());
    // null lists are none
    assertEquals(p, new GenerationParams(4, 0.5, 0.9, 3L, null, null));
    assertEquals(p.hashCode(), new GenerationParams(4, 0.5, 0.9, 3L, List.of(), List.of())
        .hashCode());
  }

  @Test
  void stopsTakePartInEqualityAndAreCopiedIn() {
    List<String> stop = new ArrayList<>(List.of("\n", "END"));
    List<Integer> ids = new ArrayList<>(List.of(2, 7));
    GenerationParams p = new GenerationParams(4, 0.0, 1.0, 0L, stop, ids);
    stop.add("more");
    ids.set(0, 99);
    assertEquals(List.of("\n", "END"), p.stop());
    assertEquals(List.of(2, 7), p.stopTokenIds());
    assertThrows(UnsupportedOperationException.class, () -> p.stop().add("x"));
    assertThrows(UnsupportedOperationException.class, () -> p.stopTokenIds().add(1));
    GenerationParams same = GenerationParams.greedy(4).withStops(List.of("\n", "END"),
        List.of(2, 7));
    assertEquals(p, same);
    assertEquals(p.hashCode(), same.hashCode());
    assertNotEquals(p, p.withStops(List.of("\n"), List.of(2, 7)));
    assertNotEquals(p, p.withStops(List.of("\n", "END"), List.of(7, 2)));
    assertNotEquals(p, GenerationParams.greedy(4));
    assertTrue(p.hasStops());
    assertTrue(p.isStopToken(7));
    assertFalse(p.isStopToken(3));
    assertTrue(GenerationParams.greedy(1).withStops(null, List.of(0)).hasStops());
  }

  @Test
  void theLimitsAreInclusive() {
    List<String> stops = new ArrayList<>();
    for (int i = 0; i < GenerationParams.MAX_STOP_STRINGS; i++) {
      stops.add("x".repeat(GenerationParams.MAX_STOP_LENGTH - 1) + i % 10);
    }
    List<Integer> ids = new ArrayList<>();
    for (int i = 0; i < GenerationParams.MAX_STOP_TOKEN_IDS; i++) {
      ids.add(InferenceRequest.MAX_TOKEN_ID - 1 - i);
    }
    GenerationParams p = GenerationParams.greedy(1).withStops(stops, ids);
    assertEquals(GenerationParams.MAX_STOP_STRINGS, p.stop().size());
    assertEquals(GenerationParams.MAX_STOP_TOKEN_IDS, p.stopTokenIds().size());
    // a surrogate pair is well-formed text
    assertEquals(List.of("\uD83D\uDE00"),
        GenerationParams.greedy(1).withStops(List.of("\uD83D\uDE00"), null).stop());
  }

  @Test
  void badStopsAreRefusedWithAMessageSayingWhat() {
    GenerationParams g = GenerationParams.greedy(1);
    String[][] cases = {
        {"", "1 to 256 chars"},
        {"x".repeat(GenerationParams.MAX_STOP_LENGTH + 1), "1 to 256 chars"},
        {"a\uD800", "lone surrogate at 1"},
        {"\uDC00b", "lone surrogate at 0"},
    };
    for (String[] c : cases) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> g.withStops(List.of(c[0]), null), c[0]);
      assertTrue(e.getMessage().contains(c[1]), e.getMessage());
    }
    assertTrue(assertThrows(IllegalArgumentException.class,
        () -> g.withStops(Arrays.asList("a", null), null)).getMessage().contains("null"));
    List<String> many = new ArrayList<>();
    for (int i = 0; i <= GenerationParams.MAX_STOP_STRINGS; i++) {
      many.add("s" + i);
    }
    assertTrue(assertThrows(IllegalArgumentException.class, () -> g.withStops(many, null))
        .getMessage().contains("at most 16"));
    List<Integer> ids = new ArrayList<>();
    for (int i = 0; i <= GenerationParams.MAX_STOP_TOKEN_IDS; i++) {
      ids.add(i);
    }
    assertTrue(assertThrows(IllegalArgumentException.class, () -> g.withStops(null, ids))
        .getMessage().contains("stopTokenIds must have at most 256"));
    for (Integer bad : Arrays.asList(-1, InferenceRequest.MAX_TOKEN_ID, null)) {
      assertTrue(assertThrows(IllegalArgumentException.class,
          () -> g.withStops(null, Arrays.asList(1, bad))).getMessage()
          .contains("a stop token id must be in [0, 16777216)"), String.valueOf(bad));
    }
  }

  /**
   * A list another thread changes while the constructor reads it, at every point of the read:
   * the parameters keep what they checked, so they never hold more than {@code MAX_STOP_STRINGS}
   * strings or a token id out of range. (They checked one reading of the list and kept another:
   * the size before the strings were read, the ids before they were copied.)
   */
  @Test
  void aListChangedWhileItIsReadNeverGetsPastTheChecks() {
    GenerationParams g = GenerationParams.greedy(4);
    List<String> manyStops = new ArrayList<>();
    for (int i = 0; i <= GenerationParams.MAX_STOP_STRINGS; i++) {
      manyStops.add("s" + i);
    }
    List<Integer> badIds = Arrays.asList(1, -1);
    for (int at = 0; at < 40; at++) {
      GenerationParams p;
      try {
        p = g.withStops(new ChangingList<>(List.of("a"), manyStops, at), null);
      } catch (IllegalArgumentException refused) {
        p = null;
      }
      if (p != null) {
        assertTrue(p.stop().size() <= GenerationParams.MAX_STOP_STRINGS,
            "changed after " + at + " reads: " + p.stop().size() + " stop strings kept");
      }
      try {
        p = g.withStops(null, new ChangingList<>(List.of(1), badIds, at));
      } catch (IllegalArgumentException refused) {
        p = null;
      }
      if (p != null) {
        for (int id : p.stopTokenIds()) {
          assertTrue(id >= 0 && id < InferenceRequest.MAX_TOKEN_ID,
              "changed after " + at + " reads: stop token id " + id + " kept");
        }
      }
    }
  }

  /** Reads as {@code before} for its first {@code changeAt} reads, then as {@code after}. */
  private static final class ChangingList<E> extends java.util.AbstractList<E> {
    private final List<E> before;
    private final List<E> after;
    private final int changeAt;
    private int reads;

    ChangingList(List<E> before, List<E> after, int changeAt) {
      this.before = before;
      this.after = after;
      this.changeAt = changeAt;
    }

    private List<E> now() {
      return reads++ < changeAt ? before : after;
    }

    @Override
    public E get(int index) {
      return now().get(index);
    }

    @Override
    public int size() {
      return now().size();
    }
  }
}
