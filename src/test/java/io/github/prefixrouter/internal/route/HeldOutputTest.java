package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * The output so far of a run nobody streams, held for a streamed duplicate: the pieces in
 * order, within the answer's bounds; a piece that cannot belong to the answer drops what is
 * held and stops holding.
 */
class HeldOutputTest {

  @Test
  void holdsThePiecesInOrder() {
    HeldOutput h = new HeldOutput(3, new ExecutionOutput.Attempt(), 40);
    for (int i = 0; i < 10; i++) {
      h.add(new int[] {i * 3, i * 3 + 1, i * 3 + 2}, "ab");
    }
    h.add(new int[0], "c");
    assertFalse(h.broken());
    int[] want = new int[30];
    for (int i = 0; i < 30; i++) {
      want[i] = i;
    }
    assertArrayEquals(want, h.tokens());
    assertEquals("ab".repeat(10) + "c", h.text());
  }

  @Test
  void aPiecePastMaxTokensDropsWhatIsHeld() {
    HeldOutput h = new HeldOutput(1, new ExecutionOutput.Attempt(), 4);
    h.add(new int[] {1, 2, 3}, "x");
    h.add(new int[] {4, 5}, "y");
    assertTrue(h.broken());
    assertEquals(0, h.tokens().length);
    assertEquals("", h.text());
    h.add(new int[] {6}, "z"); // nothing more is held
    assertEquals(0, h.tokens().length);
    assertEquals("", h.text());
  }

  @Test
  void aNegativeTokenOrTooMuchTextDropsWhatIsHeld() {
    HeldOutput negative = new HeldOutput(1, new ExecutionOutput.Attempt(), 100);
    negative.add(new int[] {1}, "a");
    negative.add(new int[] {2, -1}, "b");
    assertTrue(negative.broken());
    assertEquals(0, negative.tokens().length);

    HeldOutput text = new HeldOutput(1, new ExecutionOutput.Attempt(), 100);
    text.add(new int[] {1}, "a".repeat(ExecutionOutput.MAX_TEXT_CHARS - 1));
    assertFalse(text.broken());
    text.add(new int[] {2}, "bc");
    assertTrue(text.broken());
    assertEquals("", text.text());
  }
}
