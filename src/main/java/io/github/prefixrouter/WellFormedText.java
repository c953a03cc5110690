package io.github.prefixrouter;

/** Checks of text that must survive a round trip through UTF-8 unchanged. */
final class WellFormedText {

  private WellFormedText() {}

  /**
   * Where {@code s} has its first lone surrogate (a high surrogate not followed by a low one, or
   * a low one not preceded by a high one), which UTF-8 cannot carry.
   *
   * @return the index of the first lone surrogate, or -1 if there is none
   */
  static int loneSurrogateAt(CharSequence s) {
    return badCharAt(s, false);
  }

  /**
   * Where {@code s} has its first lone surrogate or, with {@code controls}, its first lone
   * surrogate or ISO control character, whichever comes first.
   *
   * @return the index of that char, or -1 if there is none
   */
  static int badCharAt(CharSequence s, boolean controls) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < s.length()
          && Character.isLowSurrogate(s.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c) || (controls && Character.isISOControl(c))) {
        return i;
      }
    }
    return -1;
  }
}
