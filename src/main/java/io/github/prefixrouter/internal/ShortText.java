package io.github.prefixrouter.internal;

/** Shortening a message (a server's error text, say) to a length limit without breaking it. */
public final class ShortText {

  private ShortText() {}

  /**
   * The longest prefix of {@code s} of at most {@code maxChars} UTF-16 chars that does not end in
   * a high surrogate: a surrogate pair the limit falls inside is left out whole, and so is a high
   * surrogate that ends {@code s} (half a pair, which JSON and UTF-8 cannot carry). {@code s}
   * itself when it is short enough and ends in no high surrogate.
   *
   * @param s the text
   * @param maxChars the most chars the result may have, at least 0
   * @return a prefix of {@code s}, at most {@code maxChars} long, not ending in a high surrogate
   * @throws IllegalArgumentException if {@code maxChars} is negative
   */
  public static String prefix(String s, int maxChars) {
    if (maxChars < 0) {
      throw new IllegalArgumentException("maxChars must be at least 0, was " + maxChars);
    }
    int end = Math.min(s.length(), maxChars);
    while (end > 0 && Character.isHighSurrogate(s.charAt(end - 1))) {
      end--;
    }
    return end == s.length() ? s : s.substring(0, end);
  }
}
