package io.github.prefixrouter.internal.tree;

/**
 * The compact encoding of a tree edge's token ids in one {@code char[]}.
 *
 * <h2>Design notes</h2>
 *
 * An edge of {@code n} tokens has one of two layouts, told apart by the array length:
 *
 * <ul>
 *   <li><b>Narrow</b> ({@code n + ceil(n / 16)} chars), when every id is in {@code [0, 2^17)}:
 *       chars {@code [0, n)} hold the low 16 bits of each id, then one bit per token (bit
 *       {@code i mod 16} of char {@code n + i / 16}) holds bit 16. That covers the ids of every
 *       tokenizer vocabulary up to 131,072 entries (cl100k_base has 100,256), at 2.125 bytes per
 *       token instead of 4.
 *   <li><b>Wide</b> ({@code 2n} chars), for any other id: chars {@code [0, n)} hold the low and
 *       chars {@code [n, 2n)} the high 16 bits.
 * </ul>
 *
 * The two lengths coincide only for {@code n = 1}, where both layouts put {@code id >>> 16} in
 * the second char, so reading a one-token edge as wide is always right. Comparisons read the
 * low half as a {@code char} widened to {@code int}, so a query id outside the edge's layout
 * simply mismatches. The length in tokens is kept by the owner (the node), not in the array.
 */
final class PackedTokens {

  static final char[] EMPTY = new char[0];

  private static final int NARROW_LIMIT = 1 << 17;

  private PackedTokens() {}

  /** Encodes t[from..to). */
  static char[] encode(int[] t, int from, int to) {
    int n = to - from;
    if (n == 0) {
      return EMPTY;
    }
    boolean narrow = true;
    for (int i = from; i < to; i++) {
      if (t[i] >>> 17 != 0) {
        narrow = false;
        break;
      }
    }
    char[] e;
    if (narrow) {
      e = new char[n + ((n + 15) >>> 4)];
      for (int i = 0; i < n; i++) {
        int v = t[from + i];
        e[i] = (char) v;
        e[n + (i >>> 4)] |= (char) (((v >>> 16) & 1) << (i & 15));
      }
    } else {
      e = new char[2 * n];
      for (int i = 0; i < n; i++) {
        int v = t[from + i];
        e[i] = (char) v;
        e[n + i] = (char) (v >>> 16);
      }
    }
    return e;
  }

  /** Whether an edge of n tokens uses the wide layout (or is a single token). */
  static boolean isWide(char[] e, int n) {
    return e.length == 2 * n;
  }

  /** The id at index i of an edge of n tokens. */
  static int get(char[] e, int n, int i) {
    if (e.length == 2 * n) {
      return e[i] | e[n + i] << 16;
    }
    return e[i] | ((e[n + (i >>> 4)] >>> (i & 15)) & 1) << 16;
  }

  /** Writes the ids [from, to) of an edge of n tokens to dst[at..]. */
  static void decode(char[] e, int n, int from, int to, int[] dst, int at) {
    if (e.length == 2 * n) {
      for (int i = from; i < to; i++) {
        dst[at++] = e[i] | e[n + i] << 16;
      }
    } else {
      for (int i = from; i < to; i++) {
        dst[at++] = e[i] | ((e[n + (i >>> 4)] >>> (i & 15)) & 1) << 16;
      }
    }
  }

  /** The ids of an edge of n tokens. */
  static int[] decode(char[] e, int n) {
    int[] out = new int[n];
    decode(e, n, 0, n, out, 0);
    return out;
  }

  /** The encoding of ids [from, to) of an edge of n tokens (its layout may differ). */
  static char[] slice(char[] e, int n, int from, int to) {
    int[] ids = new int[to - from];
    decode(e, n, from, to, ids, 0);
    return encode(ids, 0, ids.length);
  }

  /** The encoding of edge a (na tokens) followed by t[from..to). */
  static char[] append(char[] a, int na, int[] t, int from, int to) {
    int[] ids = new int[na + to - from];
    decode(a, na, 0, na, ids, 0);
    System.arraycopy(t, from, ids, na, to - from);
    return encode(ids, 0, ids.length);
  }

  /** The encoding of edge a (na tokens) followed by edge b (nb tokens). */
  static char[] concat(char[] a, int na, char[] b, int nb) {
    int[] ids = new int[na + nb];
    decode(a, na, 0, na, ids, 0);
    decode(b, nb, 0, nb, ids, na);
    return encode(ids, 0, ids.length);
  }

  /**
   * Compares ids [from, from + m) of an edge of n tokens with q[qoff..qoff + m): the index
   * (relative to {@code from}) of the first difference, or -1 if they are equal. Allocates
   * nothing.
   */
  static int mismatch(char[] e, int n, int from, int[] q, int qoff, int m) {
    if (e.length == 2 * n) {
      for (int k = 0; k < m; k++) {
        int i = from + k;
        if ((e[i] | e[n + i] << 16) != q[qoff + k]) {
          return k;
        }
      }
      return -1;
    }
    int d = qoff - from; // q index = edge index + d
    int i = from;
    int end = from + m;
    while (i < end) {
      int w = e[n + (i >>> 4)] >>> (i & 15);
      int stop = Math.min(end, (i | 15) + 1);
      if (w == 0) { // no id of this group needs bit 16: compare the chars directly
        for (; i < stop; i++) {
          if (e[i] != q[i + d]) {
            return i - from;
          }
        }
      } else {
        for (; i < stop; i++, w >>>= 1) {
          if ((e[i] | (w & 1) << 16) != q[i + d]) {
            return i - from;
          }
        }
      }
    }
    return -1;
  }
}
