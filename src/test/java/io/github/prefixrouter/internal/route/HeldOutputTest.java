package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
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

  @Test
  void anOutputOfExactlyTheBoundsIsHeld() {
    HeldOutput tokens = new HeldOutput(1, new ExecutionOutput.Attempt(), 4);
    tokens.add(new int[] {1, 2, 3}, "x");
    tokens.add(new int[] {4}, "y");
    assertFalse(tokens.broken(), "maxTokens tokens: the whole of a full answer");
    assertArrayEquals(new int[] {1, 2, 3, 4}, tokens.tokens());

    HeldOutput text = new HeldOutput(1, new ExecutionOutput.Attempt(), 100);
    text.add(new int[] {1}, "a".repeat(ExecutionOutput.MAX_TEXT_CHARS - 1));
    text.add(new int[] {2}, "b");
    assertFalse(text.broken(), "MAX_TEXT_CHARS characters");
    assertEquals(ExecutionOutput.MAX_TEXT_CHARS, text.text().length());
  }

  @Provide
  Arbitrary<List<int[]>> pieces() {
    return Arbitraries.integers().between(-1, 9).array(int[].class).ofMaxSize(4)
        .list().ofMaxSize(6);
  }

  /** Against a model: everything added while within maxTokens and free of negative ids. */
  @Property
  void holdsWhatAFullAnswerCouldHoldAndNothingOnceAPieceCannotBelong(
      @ForAll("pieces") List<int[]> pieces, @ForAll @IntRange(min = 1, max = 12) int maxTokens) {
    HeldOutput h = new HeldOutput(1, new ExecutionOutput.Attempt(), maxTokens);
    List<Integer> model = new ArrayList<>();
    StringBuilder modelText = new StringBuilder();
    boolean broken = false;
    for (int[] piece : pieces) {
      String text = "t" + piece.length;
      h.add(piece, text);
      if (broken) {
        continue;
      }
      boolean negative = false;
      for (int t : piece) {
        negative |= t < 0;
      }
      if (negative || model.size() + piece.length > maxTokens) {
        broken = true;
        model.clear();
        modelText.setLength(0);
        continue;
      }
      for (int t : piece) {
        model.add(t);
      }
      modelText.append(text);
    }
    assertEquals(broken, h.broken());
    assertArrayEquals(model.stream().mapToInt(Integer::intValue).toArray(), h.tokens());
    assertEquals(modelText.toString(), h.text());
  }
}
