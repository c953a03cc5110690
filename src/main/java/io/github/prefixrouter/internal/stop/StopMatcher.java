package io.github.prefixrouter.internal.stop;

import io.github.prefixrouter.GenerationParams;
import java.util.Arrays;
import java.util.List;

/**
 * Finds the first stop string in an output text that arrives piece by piece, and says which part
 * of the text may be shown: everything before the earliest occurrence of any stop string, and
 * nothing that a stop string still to come could cut.
 *
 * <p>{@link #push} takes the next piece and releases the text that no stop can cut any more: it
 * holds back the longest tail of the text that is the beginning (a proper prefix) of a stop
 * string, as vLLM does when it streams with stop strings, and releases that tail once the
 * following text shows it is no stop (or at {@link #finish}). When a stop string is complete,
 * the text before it is released and the matcher is {@link #stopped}: it releases nothing more.
 * Stop strings are looked for in the output only, so an occurrence may start at any position of
 * it, including one split over many pieces. The text is cut at the start of the first stop
 * string to be complete, as a generation that stops there would be (vLLM's semantics): the
 * occurrence that ends first, and of two that end at the same char the one listed first (as
 * vLLM breaks that tie).
 * So with the stops {@code "abcd"} and {@code "c"}, {@code "abcd"} is cut to {@code "ab"}: the
 * generation ended at {@code "c"}, before {@code "d"} was written.
 *
 * <p>The texts released, concatenated, are always a prefix of {@link #cut} of the whole text,
 * and, with {@link #finish}, equal to it. Not thread-safe: one per output.
 */
public final class StopMatcher {

  private final List<String> stops;
  private final StringBuilder held = new StringBuilder();
  private boolean stopped;
  private String matched;

  /**
   * @param stops the stop strings, each at least one char (none: the text is released as it
   *     comes)
   * @throws IllegalArgumentException if a stop string is empty
   */
  public StopMatcher(List<String> stops) {
    for (String s : stops) {
      if (s.isEmpty()) {
        throw new IllegalArgumentException("a stop string is empty");
      }
    }
    this.stops = List.copyOf(stops);
  }

  /**
   * Adds the next piece of the text.
   *
   * @return the text that may be shown now, after what was released before (empty once stopped)
   */
  public String push(String piece) {
    if (stopped) {
      return "";
    }
    if (stops.isEmpty()) {
      return piece;
    }
    held.append(piece);
    // a stop cannot start in text already released (its beginning would have been held back),
    // so the earliest occurrence, if any, starts in what is held
    String text = held.toString();
    int which = firstStop(text, stops);
    if (which >= 0) {
      stopped = true;
      matched = stops.get(which);
      String out = text.substring(0, text.indexOf(matched));
      held.setLength(0);
      return out;
    }
    int keep = heldTail();
    String out = held.substring(0, held.length() - keep);
    held.delete(0, held.length() - keep);
    return out;
  }

  /**
   * Whether the occurrence of {@code s} at {@code i} comes before that of {@code t} at
   * {@code j}: it ends first (of two that end together, the one listed first comes first: the
   * caller looks at the stops in their order and keeps the first).
   */
  private static boolean ends(int i, String s, int j, String t) {
    return i + s.length() < j + t.length();
  }

  /** The longest tail of {@code held} that is a proper prefix of a stop string. */
  private int heldTail() {
    int keep = 0;
    int n = held.length();
    for (String s : stops) {
      for (int k = Math.min(s.length() - 1, n); k > keep; k--) {
        if (endsWith(s, k, n)) {
          keep = k;
          break;
        }
      }
    }
    return keep;
  }

  /** Whether {@code held} ends with the first {@code k} chars of {@code s}. */
  private boolean endsWith(String s, int k, int n) {
    for (int i = 0; i < k; i++) {
      if (held.charAt(n - k + i) != s.charAt(i)) {
        return false;
      }
    }
    return true;
  }

  /**
   * The text has ended: releases what was held back, which no stop can cut any more.
   *
   * @return the rest of the text to show (empty if stopped)
   */
  public String finish() {
    String out = held.toString();
    held.setLength(0);
    return out;
  }

  /** Whether a stop string has occurred: the text ended before it. */
  public boolean stopped() {
    return stopped;
  }

  /** The stop string that ended the text, or null. */
  public String matched() {
    return matched;
  }

  /** How many chars are held back now. */
  public int heldBack() {
    return held.length();
  }

  /**
   * The output tokens up to and including the first of the request's stop token ids (all of
   * them without one): the token that ended the output stays in it, as vLLM keeps it.
   */
  public static int[] throughFirstStopToken(int[] tokens, GenerationParams params) {
    for (int i = 0; i < tokens.length; i++) {
      if (params.isStopToken(tokens[i])) {
        return i + 1 == tokens.length ? tokens : Arrays.copyOf(tokens, i + 1);
      }
    }
    return tokens;
  }

  /**
   * Where {@code text} is cut by its first stop string: the start of the occurrence of any of
   * {@code stops} that ends first (the one listed first, of those ending together), or -1 if
   * none occurs.
   */
  public static int cut(String text, List<String> stops) {
    int which = firstStop(text, stops);
    return which < 0 ? -1 : text.indexOf(stops.get(which));
  }

  /**
   * Which of {@code stops} is completed first in {@code text}: the one whose first occurrence
   * ends first (the one listed first, of those ending together), or -1 if none occurs.
   */
  private static int firstStop(String text, List<String> stops) {
    int at = -1;
    int which = -1;
    for (int k = 0; k < stops.size(); k++) {
      String s = stops.get(k);
      int i = text.indexOf(s);
      if (i >= 0 && (which < 0 || ends(i, s, at, stops.get(which)))) {
        at = i;
        which = k;
      }
    }
    return which;
  }
}
