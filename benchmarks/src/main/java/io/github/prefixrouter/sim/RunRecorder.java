package io.github.prefixrouter.sim;

import io.github.prefixrouter.spi.EngineResult;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/** Per-request facts of one run, filled in as the simulation goes. */
final class RunRecorder {

  final long[] arrivalNanos;
  final long[] doneNanos;
  final int[] entry;
  final int[] subject;
  final int[] servedBy;
  final int[] promptTokens;
  final int[] cachedTokens;
  final int[] executions;
  final boolean[] failed;
  private final Map<String, Integer> indexById = new HashMap<>();
  private int unknownExecutions;

  RunRecorder(int n) {
    arrivalNanos = new long[n];
    doneNanos = new long[n];
    entry = new int[n];
    subject = new int[n];
    servedBy = new int[n];
    promptTokens = new int[n];
    cachedTokens = new int[n];
    executions = new int[n];
    failed = new boolean[n];
    Arrays.fill(servedBy, -1);
    Arrays.fill(doneNanos, -1);
  }

  void submitted(String id, Trace.Arrival a, int prompt) {
    indexById.put(id, a.index());
    arrivalNanos[a.index()] = a.atNanos();
    entry[a.index()] = a.entry();
    subject[a.index()] = a.subject();
    promptTokens[a.index()] = prompt;
  }

  /** An engine finished a request (the last successful execution counts). */
  void executed(String id, int node, EngineResult r) {
    Integer i = indexById.get(id);
    if (i == null) {
      unknownExecutions++;
      return;
    }
    servedBy[i] = node;
    cachedTokens[i] = Math.max(0, r.cachedPromptTokens());
    executions[i]++;
  }

  void completed(int index, long atNanos, boolean ok) {
    doneNanos[index] = atNanos;
    failed[index] = !ok;
  }

  int unknownExecutions() {
    return unknownExecutions;
  }
}
