package io.github.prefixrouter.transport.http;

import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Rejects authenticated messages that are stale or were seen before.
 *
 * <p>A message carries its sender's wall-clock timestamp and a nonce unique per sender. It is
 * accepted only if the timestamp is within {@code window} of the receiver's clock and the
 * (sender, nonce) pair has not been accepted before. A pair accepted at receive time R with
 * timestamp T can only pass the timestamp check again until T + window ≤ R + 2·window, so each
 * nonce is remembered for 2·window and then forgotten, whoever sends next: the pairs are kept in
 * one list in acceptance order, and every check drops the expired ones at its head (so a sender
 * that left the cluster leaves nothing behind). If the receiver's clock steps back by more than
 * 2·window, the pairs accepted before the step can no longer pass the timestamp check either
 * (their timestamps are more than a window ahead of the clock) and are dropped the same way;
 * otherwise they would hold the head of the list until the clock caught up, nothing behind
 * them would expire, and busy senders would be refused as {@code FULL} meanwhile. Memory is bounded by the message rate, and by
 * {@code maxNoncesPerSender} per sender in any case (beyond it new messages are refused rather
 * than weakening the check). Only messages whose MAC verified reach this class, so only cluster
 * members can occupy its memory.
 */
final class ReplayGuard {

  /** Outcome of {@link #check}. */
  enum Verdict {
    ACCEPT,
    STALE,
    REPLAY,
    FULL
  }

  private final long windowMillis;
  private final int maxNoncesPerSender;
  /** (sender, nonce) to the receive time it was accepted at, in acceptance order. */
  private final LinkedHashMap<Pair, Long> seen = new LinkedHashMap<>();
  /** Nonces remembered per sender; a sender with none has no entry. */
  private final Map<String, Integer> perSender = new HashMap<>();

  private record Pair(String sender, String nonce) {}

  ReplayGuard(long windowMillis, int maxNoncesPerSender) {
    this.windowMillis = windowMillis;
    this.maxNoncesPerSender = maxNoncesPerSender;
  }

  synchronized Verdict check(String sender, String nonce, long timestampMillis, long nowMillis) {
    long skew = nowMillis - timestampMillis;
    boolean overflowed = ((nowMillis ^ timestampMillis) & (nowMillis ^ skew)) < 0;
    // not Math.abs: abs(Long.MIN_VALUE) is negative and would pass as fresh
    if (overflowed || skew > windowMillis || skew < -windowMillis) {
      return Verdict.STALE;
    }
    // forget nonces that can no longer pass the timestamp check, whoever sent them: accepted
    // two windows ago, or (the clock stepped back) more than two windows from now, so that their
    // timestamps are more than a window ahead of it
    long horizon = nowMillis - 2 * windowMillis;
    long future = nowMillis + 2 * windowMillis;
    Iterator<Map.Entry<Pair, Long>> it = seen.entrySet().iterator();
    while (it.hasNext()) {
      Map.Entry<Pair, Long> e = it.next();
      if (e.getValue() >= horizon && e.getValue() <= future) {
        break;
      }
      it.remove();
      perSender.computeIfPresent(e.getKey().sender(), (k, n) -> n == 1 ? null : n - 1);
    }
    Pair p = new Pair(sender, nonce);
    if (seen.containsKey(p)) {
      return Verdict.REPLAY;
    }
    if (perSender.getOrDefault(sender, 0) >= maxNoncesPerSender) {
      return Verdict.FULL;
    }
    seen.put(p, nowMillis);
    perSender.merge(sender, 1, Integer::sum);
    return Verdict.ACCEPT;
  }

  /** Nonces currently remembered, over all senders (for tests and stats). */
  synchronized int size() {
    return seen.size();
  }

  /** Senders with at least one nonce remembered (for tests). */
  synchronized int senders() {
    return perSender.size();
  }
}
