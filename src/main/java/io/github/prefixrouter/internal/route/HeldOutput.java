package io.github.prefixrouter.internal.route;

import java.util.Arrays;

/**
 * The output so far of a local run of a peer's request that nobody streams yet, kept so that a
 * duplicate FORWARD of the request that asks for streaming can join the run and get it: what
 * was generated before it joined, then the rest as it comes (see {@code RouterNode}'s
 * {@code streamAlsoTo}). It holds the engine's pieces in order, as they follow each other, and
 * is used under the execution's lock.
 *
 * <p>Bounded by the answer: at most the request's {@code maxTokens} tokens and
 * {@link ExecutionOutput#MAX_TEXT_CHARS} chars of text, as the copy of the emitted output of a
 * streamed run is. A piece beyond those bounds, or with a negative token id, could not belong to
 * the answer (an engine that breaks its contract): what is held is dropped and nothing more is
 * kept ({@link #broken()}), so a duplicate joining afterwards gets nothing of this run streamed.
 */
final class HeldOutput {

  private static final int[] NONE = new int[0];

  /** The attempt number of the run whose output this is. */
  final int seq;
  /** That run's position in the execution's output, once a duplicate's stream is attached. */
  final ExecutionOutput.Attempt run;
  private final int maxTokens;
  private int[] tokens = NONE;
  private int count;
  private StringBuilder text = new StringBuilder();
  private boolean broken;

  HeldOutput(int seq, ExecutionOutput.Attempt run, int maxTokens) {
    this.seq = seq;
    this.run = run;
    this.maxTokens = maxTokens;
  }

  /** Appends the run's next piece (the listener's arrays are not kept). */
  void add(int[] piece, String pieceText) {
    if (broken) {
      return;
    }
    if ((long) count + piece.length > maxTokens
        || (long) text.length() + pieceText.length() > ExecutionOutput.MAX_TEXT_CHARS) {
      drop();
      return;
    }
    for (int t : piece) {
      if (t < 0) {
        drop();
        return;
      }
    }
    if (count + piece.length > tokens.length) {
      tokens = Arrays.copyOf(tokens,
          Math.min(maxTokens, Math.max(count + piece.length, Math.max(16, tokens.length * 2))));
    }
    System.arraycopy(piece, 0, tokens, count, piece.length);
    count += piece.length;
    text.append(pieceText);
  }

  /** Whether a piece could not be held: the run's output so far is not known. */
  boolean broken() {
    return broken;
  }

  /** The tokens held, in order. */
  int[] tokens() {
    return Arrays.copyOf(tokens, count);
  }

  /** The text held. */
  String text() {
    return text.toString();
  }

  private void drop() {
    broken = true;
    tokens = NONE;
    count = 0;
    text = new StringBuilder(0);
  }
}
