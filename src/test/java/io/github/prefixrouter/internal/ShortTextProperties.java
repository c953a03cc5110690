package io.github.prefixrouter.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/**
 * {@link ShortText#prefix} against its model: the longest prefix within the limit that ends in
 * no high surrogate. Texts are drawn from ASCII, BMP letters, surrogate pairs and lone halves.
 */
class ShortTextProperties {

  @Provide
  Arbitrary<String> texts() {
    return Arbitraries.strings()
        .withChars("ab \u00e9\u4e2d")
        .withChars('\uD83D', '\uDE00', '\uD800', '\uDC00') // halves: paired or lone
        .ofMaxLength(40);
  }

  @Property
  void isThePrefixWithinTheLimitThatEndsInNoHighSurrogate(@ForAll("texts") String s,
      @ForAll @IntRange(min = 0, max = 45) int limit) {
    String p = ShortText.prefix(s, limit);
    assertTrue(p.length() <= limit, "longer than the limit: " + p.length());
    assertTrue(s.startsWith(p), "not a prefix of the input");
    int end = p.length();
    assertFalse(end < s.length() && end > 0 && Character.isHighSurrogate(s.charAt(end - 1))
        && Character.isLowSurrogate(s.charAt(end)), "splits a surrogate pair at " + end);
    assertFalse(end > 0 && Character.isHighSurrogate(p.charAt(end - 1)),
        "ends in a high surrogate");
    // the longest such prefix: the model
    int want = Math.min(limit, s.length());
    while (want > 0 && Character.isHighSurrogate(s.charAt(want - 1))) {
      want--;
    }
    assertEquals(want, end);
  }

  @Example
  void aPairAtTheLimitIsLeftOutWholeAndANegativeLimitIsRefused() {
    assertEquals("ab", ShortText.prefix("ab\uD83D\uDE00", 3));
    assertEquals("ab\uD83D\uDE00", ShortText.prefix("ab\uD83D\uDE00", 4));
    assertEquals("ab", ShortText.prefix("ab\uD83D", 10), "a lone high surrogate at the end");
    assertThrows(IllegalArgumentException.class, () -> ShortText.prefix("ab", -1));
  }
}
