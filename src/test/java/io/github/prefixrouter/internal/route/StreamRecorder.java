package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * An {@link OutputListener} that records every piece and every breach of the listener's
 * contract as it happens: a call after the future completed, a call while another is running,
 * a piece that does not continue the expected output (a repeat, a gap or other tokens).
 */
final class StreamRecorder implements OutputListener {

  /** The output the pieces must follow, or null to check nothing of their content. */
  private final int[] expected;
  volatile CompletableFuture<InferenceResponse> future;
  final List<int[]> pieces = new ArrayList<>();
  final List<Long> times = new ArrayList<>();
  private int[] tokens = new int[0];
  final StringBuilder text = new StringBuilder();
  int afterCompletion;
  int concurrentCalls;
  int notAPrefix;
  private boolean inCall;
  private final java.util.function.LongSupplier clock;

  StreamRecorder(int[] expected, java.util.function.LongSupplier clock) {
    this.expected = expected;
    this.clock = clock;
  }

  @Override
  public synchronized void onOutput(int[] piece, String t) {
    if (inCall) {
      concurrentCalls++;
    }
    inCall = true;
    try {
      CompletableFuture<InferenceResponse> f = future;
      if (f != null && f.isDone()) {
        afterCompletion++;
      }
      int from = tokens.length;
      tokens = Arrays.copyOf(tokens, from + piece.length);
      System.arraycopy(piece, 0, tokens, from, piece.length);
      text.append(t);
      pieces.add(piece.clone());
      times.add(clock.getAsLong());
      if (expected != null && (tokens.length > expected.length
          || !Arrays.equals(tokens, Arrays.copyOf(expected, tokens.length)))) {
        notAPrefix++;
      }
    } finally {
      inCall = false;
    }
  }

  synchronized int[] tokens() {
    return tokens.clone();
  }

  /** Whether no breach was seen. */
  synchronized boolean clean() {
    return afterCompletion == 0 && concurrentCalls == 0 && notAPrefix == 0;
  }

  @Override
  public synchronized String toString() {
    return pieces.size() + " pieces, " + tokens.length + " tokens; after completion "
        + afterCompletion + ", concurrent " + concurrentCalls + ", not a prefix " + notAPrefix;
  }
}
