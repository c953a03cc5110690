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
 * them would expire, and busy senders would be refused as {@code FULL} meanwhile. At most
 * {@code maxNoncesPerSender} nonces are remembered whole per sender, and at most
 * {@link #MAX_NONCES} (or {@code maxNoncesPerSender} if larger) over all senders; beyond either,
 * new messages are refused as {@code FULL} rather than weakening the check. Only messages whose
 * MAC verified reach this class, so only cluster members can occupy its memory; without the
 * bound over all senders, a holder of the cluster key sending under ever-new sender ids held
 * about 270 bytes per message for two windows, without limit for a long window.
 *
 * <p><b>Counter nonces.</b> Remembering every nonce caps what one sender may send at
 * {@code maxNoncesPerSender} per two windows (131,072 per minute by default, about 2,180 a
 * second), which a busy peer streaming many forwarded answers (a STREAM message per answer
 * every 20 ms) reaches. The transport's own nonces are {@code <boot>-<counter>}: a boot id
 * random per transport instance, 16 lower-case hex digits, and a counter from 1 up, in 1 to 15
 * hex digits. Such a nonce is checked
 * against a sliding window instead, as IPsec and DTLS do: per (sender, boot), the highest
 * counter accepted and a bitmap of which of the {@code counterWindow} counters up to it (the
 * highest and the {@code counterWindow - 1} below) were accepted. A counter above the highest
 * is accepted and moves the window; one inside it is accepted once; one below it
 * ({@code counterWindow} or more below the highest) is refused as a {@code REPLAY}, since it
 * can no longer be told
 * from one (a message overtaken by {@code counterWindow} later ones of its sender: 16,384 by
 * default, about 5 seconds of a sender at 3,200 messages a second). So a sender's rate is not
 * capped and its memory is one bitmap (2 KiB) per boot. A window is forgotten two windows after
 * its last acceptance, as a nonce is (every counter it remembers was accepted by then); at most
 * {@link #MAX_BOOTS_PER_SENDER} are remembered per sender, and at most {@link #MAX_WINDOWS} in
 * all (8 MiB); a message of a further boot is refused as {@code FULL} (a sender restarting more
 * than that within two windows, or a holder of the cluster key sending under ever-new sender
 * ids and boots, which would otherwise cost 2 KiB per message). It is never checked as a whole
 * nonce instead: the same nonce could then pass both checks, once each. Any other nonce is
 * remembered whole, as above, a random one that happens to hold a dash and hex digits (a UUID)
 * included.
 */
final class ReplayGuard {

  /** Outcome of {@link #check}. */
  enum Verdict {
    ACCEPT,
    STALE,
    REPLAY,
    FULL
  }

  /** Counters per sliding window of a counter nonce's boot (a power of two). */
  static final int COUNTER_WINDOW = 1 << 14;
  /** Boots whose counter windows are remembered at once per sender. */
  static final int MAX_BOOTS_PER_SENDER = 8;
  /** Boots whose counter windows are remembered at once, over all senders. */
  static final int MAX_WINDOWS = 1 << 12;
  /**
   * Nonces remembered whole over all senders at most, unless {@code maxNoncesPerSender} is
   * larger (about 36 MB: 272 bytes a nonce, measured with 20-character nonces of distinct
   * senders).
   */
  static final int MAX_NONCES = 1 << 17;
  /**
   * Length of a boot id: the transport's are 16 lower-case hex digits. A nonce whose part before
   * its last dash is of another shape is remembered whole, as another implementation's: random
   * nonces (UUIDs, base64url) often hold a dash followed by hex digits, and taken for a boot and
   * a counter each was a boot of its own, refused as {@code FULL} past
   * {@link #MAX_BOOTS_PER_SENDER} of them.
   */
  static final int BOOT_LENGTH = 16;

  private final long windowMillis;
  private final int maxNoncesPerSender;
  /** Nonces remembered whole over all senders at most. */
  private final int maxNonces;
  private final int counterWindow;
  /** (sender, nonce) to the receive time it was accepted at, in acceptance order. */
  private final LinkedHashMap<Pair, Long> seen = new LinkedHashMap<>();
  /** Nonces remembered per sender; a sender with none has no entry. */
  private final Map<String, Integer> perSender = new HashMap<>();
  /** (sender, boot) to its counter window, in order of their last acceptance. */
  private final LinkedHashMap<Pair, Counters> boots = new LinkedHashMap<>();
  /** Counter windows remembered per sender; a sender with none has no entry. */
  private final Map<String, Integer> bootsPerSender = new HashMap<>();

  private record Pair(String sender, String nonce) {}

  /** The counters of one (sender, boot) accepted lately: the highest, and a bitmap below it. */
  private static final class Counters {
    final long[] bits;
    long highest;
    long lastAcceptedAt;

    Counters(int window) {
      bits = new long[window >>> 6];
    }
  }

  ReplayGuard(long windowMillis, int maxNoncesPerSender) {
    this(windowMillis, maxNoncesPerSender, COUNTER_WINDOW);
  }

  /** With a counter window of {@code counterWindow} (a power of two, at least 64) counters. */
  ReplayGuard(long windowMillis, int maxNoncesPerSender, int counterWindow) {
    this(windowMillis, maxNoncesPerSender, counterWindow,
        Math.max(MAX_NONCES, maxNoncesPerSender));
  }

  /** With at most {@code maxNonces} nonces remembered whole over all senders. */
  ReplayGuard(long windowMillis, int maxNoncesPerSender, int counterWindow, int maxNonces) {
    if (counterWindow < 64 || Integer.bitCount(counterWindow) != 1) {
      throw new IllegalArgumentException("counterWindow must be a power of two >= 64, was "
          + counterWindow);
    }
    this.windowMillis = windowMillis;
    this.maxNoncesPerSender = maxNoncesPerSender;
    this.counterWindow = counterWindow;
    this.maxNonces = maxNonces;
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
    Iterator<Map.Entry<Pair, Counters>> bt = boots.entrySet().iterator();
    while (bt.hasNext()) {
      Map.Entry<Pair, Counters> e = bt.next();
      long at = e.getValue().lastAcceptedAt;
      if (at >= horizon && at <= future) {
        break;
      }
      bt.remove();
      bootsPerSender.computeIfPresent(e.getKey().sender(), (k, n) -> n == 1 ? null : n - 1);
    }
    int dash = nonce.lastIndexOf('-');
    long counter = isBoot(nonce, dash) ? counterOf(nonce, dash + 1) : -1;
    if (counter >= 0) {
      return checkCounter(new Pair(sender, nonce.substring(0, dash)), counter, nowMillis);
    }
    Pair p = new Pair(sender, nonce);
    if (seen.containsKey(p)) {
      return Verdict.REPLAY;
    }
    if (perSender.getOrDefault(sender, 0) >= maxNoncesPerSender || seen.size() >= maxNonces) {
      return Verdict.FULL;
    }
    seen.put(p, nowMillis);
    perSender.merge(sender, 1, Integer::sum);
    return Verdict.ACCEPT;
  }

  /** The sliding-window check of a counter nonce (see the class notes). */
  private Verdict checkCounter(Pair boot, long counter, long nowMillis) {
    Counters c = boots.get(boot);
    if (c == null) {
      if (bootsPerSender.getOrDefault(boot.sender(), 0) >= MAX_BOOTS_PER_SENDER
          || boots.size() >= MAX_WINDOWS) {
        return Verdict.FULL;
      }
      c = new Counters(counterWindow);
      c.highest = counter;
      bootsPerSender.merge(boot.sender(), 1, Integer::sum);
    } else if (counter > c.highest) {
      clearAbove(c, counter);
      c.highest = counter;
    } else if (c.highest - counter >= counterWindow || isSet(c, counter)) {
      return Verdict.REPLAY;
    }
    int i = (int) (counter & (counterWindow - 1));
    c.bits[i >>> 6] |= 1L << i;
    c.lastAcceptedAt = nowMillis;
    boots.remove(boot);
    boots.put(boot, c); // last in order of acceptance
    return Verdict.ACCEPT;
  }

  private boolean isSet(Counters c, long counter) {
    int i = (int) (counter & (counterWindow - 1));
    return (c.bits[i >>> 6] & (1L << i)) != 0;
  }

  /**
   * Clears the bits of the counters from {@code c.highest + 1} to {@code to}, which the window
   * is about to take in: whole words where it can, so a jump costs at most
   * {@code counterWindow / 64} word writes.
   */
  private void clearAbove(Counters c, long to) {
    if (to - c.highest >= counterWindow) {
      java.util.Arrays.fill(c.bits, 0L);
      return;
    }
    long k = c.highest + 1;
    while (k <= to) {
      int i = (int) (k & (counterWindow - 1));
      if ((i & 63) == 0 && to - k >= 63) {
        c.bits[i >>> 6] = 0L;
        k += 64;
      } else {
        c.bits[i >>> 6] &= ~(1L << i);
        k++;
      }
    }
  }

  /**
   * Whether the part of {@code nonce} before {@code dash} is a boot id: {@link #BOOT_LENGTH}
   * lower-case hex digits.
   */
  static boolean isBoot(String nonce, int dash) {
    if (dash != BOOT_LENGTH) {
      return false;
    }
    for (int i = 0; i < dash; i++) {
      char c = nonce.charAt(i);
      if ((c < '0' || c > '9') && (c < 'a' || c > 'f')) {
        return false;
      }
    }
    return true;
  }

  /**
   * The counter of a nonce whose part from {@code from} on is 1 to 15 hex digits; -1 for any
   * other nonce (checked whole).
   */
  static long counterOf(String nonce, int from) {
    int n = nonce.length() - from;
    if (n < 1 || n > 15) {
      return -1;
    }
    long v = 0;
    for (int i = from; i < nonce.length(); i++) {
      int d = Character.digit(nonce.charAt(i), 16);
      if (d < 0 || nonce.charAt(i) > 'f') { // ASCII hex digits only
        return -1;
      }
      v = v << 4 | d;
    }
    return v;
  }

  /** Counter windows currently remembered, over all senders (for tests). */
  synchronized int counterWindows() {
    return boots.size();
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
