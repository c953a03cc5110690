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
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < s.length()
          && Character.isLowSurrogate(s.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c)) {
        return i;
      }
    }
    return -1;
  }
}
