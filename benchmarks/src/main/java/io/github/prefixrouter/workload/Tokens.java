package io.github.prefixrouter.workload;

import java.util.Arrays;
import java.util.SplittableRandom;

/** Small token-array helpers for the simulated workloads. */
public final class Tokens {

  private Tokens() {}

  /**
   * {@code n} token ids drawn uniformly from {@code [0, vocabulary)}.
   *
   * @param r the workload's random source
   * @param n how many
   * @param vocabulary the number of distinct ids
   * @return a new array
   */
  public static int[] random(SplittableRandom r, int n, int vocabulary) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = r.nextInt(vocabulary);
    }
    return t;
  }

  /**
   * {@code a} followed by {@code b}.
   *
   * @param a the first part
   * @param b the second part
   * @return a new array
   */
  public static int[] concat(int[] a, int[] b) {
    int[] out = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }
}
