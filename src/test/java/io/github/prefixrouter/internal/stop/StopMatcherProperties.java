package io.github.prefixrouter.internal.stop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

/**
 * The stop-string matcher against a naive model: the text generated one char at a time, ended at
 * the first char after which it ends with a stop string, and cut before that stop string.
 */
public class StopMatcherProperties {

  /** A text, stop strings and the points where the text is split into pieces. */
  record Case(String text, List<String> stops, List<Integer> splits) {}

  @Provide
  Arbitrary<Case> cases() {
    // a small alphabet, so that stops occur, overlap and share beginnings often
    Arbitrary<String> text = Arbitraries.strings().withChars("abc").ofMinLength(0).ofMaxLength(40);
    Arbitrary<List<String>> stops = Arbitraries.strings().withChars("abc").ofMinLength(1)
        .ofMaxLength(5).list().ofMinSize(0).ofMaxSize(4);
    Arbitrary<List<Integer>> splits = Arbitraries.integers().between(0, 40).list().ofMaxSize(12);
    return Combinators.combine(text, stops, splits).as(Case::new);
  }

  /**
   * The model: generation char by char, ended by the first stop string it completes (of two
   * completed by the same char, the one listed first).
   */
  public static String naive(String text, List<String> stops) {
    for (int end = 1; end <= text.length(); end++) {
      String generated = text.substring(0, end);
      for (String s : stops) {
        if (generated.endsWith(s)) {
          return generated.substring(0, end - s.length());
        }
      }
    }
    return text;
  }

  static List<String> pieces(String text, List<Integer> splits) {
    List<Integer> at = new ArrayList<>();
    for (int s : splits) {
      at.add(Math.min(s, text.length()));
    }
    at.sort(null);
    List<String> out = new ArrayList<>();
    int from = 0;
    for (int s : at) {
      out.add(text.substring(from, s)); // empty pieces included
      from = s;
    }
    out.add(text.substring(from));
    return out;
  }

  @Property(tries = 2000)
  void releasedTextIsTheNaiveCutAndNeverCutLater(@ForAll("cases") Case c) {
    String want = naive(c.text(), c.stops());
    StopMatcher m = new StopMatcher(c.stops());
    StringBuilder released = new StringBuilder();
    int longest = c.stops().stream().mapToInt(String::length).max().orElse(1);
    for (String piece : pieces(c.text(), c.splits())) {
      released.append(m.push(piece));
      // nothing released is ever cut later: it is a prefix of the final answer
      assertTrue(want.startsWith(released.toString()),
          () -> "released " + released + " but the answer is " + want);
      // the holdback is bounded: less than the longest stop string
      assertTrue(m.heldBack() < longest, () -> "held back " + m.heldBack());
    }
    released.append(m.finish());
    assertEquals(want, released.toString());
    assertEquals(want.length() < c.text().length(), m.stopped());
    assertEquals(StopMatcher.cut(c.text(), c.stops()) < 0 ? c.text().length()
        : StopMatcher.cut(c.text(), c.stops()), want.length());
  }

  @Property(tries = 500)
  void withoutStopsEverythingIsReleasedAtOnce(@ForAll("cases") Case c) {
    StopMatcher m = new StopMatcher(List.of());
    for (String piece : pieces(c.text(), c.splits())) {
      assertEquals(piece, m.push(piece));
    }
    assertEquals("", m.finish());
    assertTrue(!m.stopped());
  }

  @Test
  void theStopCompleteFirstWinsOverOneThatStartsEarlier() {
    // "c" is complete after "abc", before "abcd" could be: the generation stops there
    assertEquals("ab", naive("abcd", List.of("abcd", "c")));
    StopMatcher m = new StopMatcher(List.of("abcd", "c"));
    assertEquals("", m.push("ab"));
    assertEquals(2, m.heldBack());
    assertEquals("ab", m.push("cd"));
    assertEquals("c", m.matched());
    assertEquals("", m.push("more"));
    assertEquals("", m.finish());
  }

  @Test
  void ofTwoStopsCompletedByTheSameCharTheOneListedFirstCuts() {
    assertEquals("xa", naive("xabc", List.of("bc", "abc")));
    assertEquals("x", naive("xabc", List.of("abc", "bc")));
    StopMatcher m = new StopMatcher(List.of("bc", "abc"));
    assertEquals("xa", m.push("xab") + m.push("c"));
    assertEquals("bc", m.matched());
    assertEquals(1, StopMatcher.cut("xabc", List.of("abc", "bc")));
  }

  @Test
  void aTailThatTurnsOutNoStopIsReleased() {
    StopMatcher m = new StopMatcher(List.of("\nObservation:"));
    assertEquals("Thought", m.push("Thought\nObs"));
    assertEquals("\nObsolete", m.push("olete"));
    assertNull(m.matched());
    assertEquals("x\nObs", m.push("x\nObs") + m.finish());
  }

  @Test
  void emptyStopStringsAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> new StopMatcher(List.of("a", "")));
  }
}
