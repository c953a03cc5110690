package io.github.prefixrouter.bench.tree;

/**
 * Encodes token sequences as strings for the string-keyed baseline tries, as densely as a simple
 * lossless code allows: an id below 0x8000 is one char; a larger id (below 2^30) is two chars,
 * {@code 0x8000 | id >>> 15} then {@code id & 0x7FFF}. The code is prefix-free, so a string
 * prefix of whole tokens is exactly a token prefix.
 */
final class TokenStrings {

  private TokenStrings() {}

  static String encode(int[] tokens) {
    StringBuilder b = new StringBuilder(tokens.length + tokens.length / 2);
    for (int t : tokens) {
      if (t < 0 || t >= 1 << 30) {
        throw new IllegalArgumentException("token id out of range: " + t);
      }
      if (t < 0x8000) {
        b.append((char) t);
      } else {
        b.append((char) (0x8000 | (t >>> 15))).append((char) (t & 0x7FFF));
      }
    }
    return b.toString();
  }

  /** The number of whole tokens of {@code tokens} within its first {@code chars} encoded chars. */
  static int tokensIn(int[] tokens, int chars) {
    int used = 0;
    for (int i = 0; i < tokens.length; i++) {
      used += tokens[i] < 0x8000 ? 1 : 2;
      if (used > chars) {
        return i;
      }
    }
    return tokens.length;
  }
}
