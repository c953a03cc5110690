package io.github.prefixrouter.sim;

import io.github.prefixrouter.spi.EngineResult;
import java.util.Arrays;
import java.util.BitSet;

/**
 * Per-request facts of one run, filled in as the simulation goes: a few primitive arrays indexed
 * by the request's index in the trace (about 37 bytes per request).
 */
final class RunRecorder {

  final long[] arrivalNanos;
  final long[] doneNanos;
  final int[] entry;
  final int[] subject;
  final int[] servedBy;
  final int[] promptTokens;
  final int[] cachedTokens;
  final boolean[] failed;
  private final BitSet submitted;
  private int unknownExecutions;

  RunRecorder(int n) {
    arrivalNanos = new long[n];
    doneNanos = new long[n];
    entry = new int[n];
    subject = new int[n];
    servedBy = new int[n];
    promptTokens = new int[n];
    cachedTokens = new int[n];
    failed = new boolean[n];
    submitted = new BitSet(n);
    Arrays.fill(servedBy, -1);
    Arrays.fill(doneNanos, -1);
  }

  /** The id of the request of trace index {@code index}: {@code r<index>}. */
  static String requestId(int index) {
    return "r" + index;
  }

  /**
   * The trace index of a submitted request's id, or -1 for any other id: one not of the form
   * {@link #requestId}, or of a request not submitted yet.
   */
  int indexOf(String id) {
    int len = id.length();
    // "r", then the index in decimal without a sign or a leading zero (at most 10 digits)
    if (len < 2 || len > 11 || id.charAt(0) != 'r' || (id.charAt(1) == '0' && len > 2)) {
      return -1;
    }
    long i = 0;
    for (int k = 1; k < len; k++) {
      char c = id.charAt(k);
      if (c < '0' || c > '9') {
        return -1;
      }
      i = i * 10 + (c - '0');
    }
    return i < arrivalNanos.length && submitted.get((int) i) ? (int) i : -1;
  }

  void submitted(Trace.Arrival a, int prompt) {
    submitted.set(a.index());
    arrivalNanos[a.index()] = a.atNanos();
    entry[a.index()] = a.entry();
    subject[a.index()] = a.subject();
    promptTokens[a.index()] = prompt;
  }

  /** An engine finished a request (the last successful execution counts). */
  void executed(String id, int node, EngineResult r) {
    int i = indexOf(id);
    if (i < 0) {
      unknownExecutions++;
      return;
    }
    servedBy[i] = node;
    cachedTokens[i] = Math.max(0, r.cachedPromptTokens());
  }

  void completed(int index, long atNanos, boolean ok) {
    doneNanos[index] = atNanos;
    failed[index] = !ok;
  }

  int unknownExecutions() {
    return unknownExecutions;
  }
}
