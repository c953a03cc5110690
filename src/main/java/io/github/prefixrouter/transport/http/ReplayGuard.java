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
 * nonce is remembered for 2·window and then forgotten: memory is bounded by the message rate,
 * and by {@code maxNoncesPerSender} in any case (beyond it new messages are refused rather than
 * weakening the check). Only messages whose MAC verified reach this class, so only cluster
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
  private final Map<String, LinkedHashMap<String, Long>> seen = new HashMap<>();

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
    LinkedHashMap<String, Long> nonces = seen.computeIfAbsent(sender, k -> new LinkedHashMap<>());
    // forget nonces that can no longer pass the timestamp check
    long horizon = nowMillis - 2 * windowMillis;
    Iterator<Long> it = nonces.values().iterator();
    while (it.hasNext()) {
      if (it.next() < horizon) {
        it.remove();
      } else {
        break;
      }
    }
    if (nonces.containsKey(nonce)) {
      return Verdict.REPLAY;
    }
    if (nonces.size() >= maxNoncesPerSender) {
      return Verdict.FULL;
    }
    nonces.put(nonce, nowMillis);
    return Verdict.ACCEPT;
  }

  /** Nonces currently remembered, over all senders (for tests and stats). */
  synchronized int size() {
    int n = 0;
    for (LinkedHashMap<String, Long> m : seen.values()) {
      n += m.size();
    }
    return n;
  }
}
