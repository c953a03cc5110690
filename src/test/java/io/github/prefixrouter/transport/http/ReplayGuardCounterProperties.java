package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * {@link ReplayGuard}'s sliding windows for counter nonces ({@code <boot>-<hex counter>}, the
 * transport's own) against a model that keeps, per sender and boot, the set of counters accepted
 * and the highest: a message is STALE when its timestamp is more than the window from the clock;
 * a boot not accepted within the last two windows is forgotten whole; a message of an unknown
 * boot is FULL when its sender has {@link ReplayGuard#MAX_BOOTS_PER_SENDER} boots remembered,
 * else accepted; of a known boot, a REPLAY when its counter was accepted or lies a whole counter
 * window or more below the highest, else accepted. The clock never goes back here (the
 * step-back rule is the nonces' own, tested with them).
 */
class ReplayGuardCounterProperties {

  private static final int WINDOW = 64;

  /** One check: sender, boot, counter, where its timestamp lies when first sent, a clock step. */
  record Op(int sender, int boot, int counter, int offsetChoice, int stepChoice) {}

  @Provide
  Arbitrary<List<Op>> ops() {
    Arbitrary<Integer> counters = Arbitraries.oneOf(
        Arbitraries.integers().between(0, 10), // crowded: replays
        Arbitraries.integers().between(0, 300), // across the window's edge
        Arbitraries.integers().between(0, 100_000)); // jumps past the whole window
    Arbitrary<Op> op = Combinators.combine(
        Arbitraries.integers().between(0, 1),
        Arbitraries.integers().between(0, ReplayGuard.MAX_BOOTS_PER_SENDER + 1),
        counters,
        Arbitraries.integers().between(0, 6),
        Arbitraries.integers().between(0, 5)).as(Op::new);
    return op.list().ofMinSize(1).ofMaxSize(300);
  }

  private static final class Boot {
    final Set<Long> accepted = new HashSet<>();
    long highest;
    long lastAcceptedAt;
  }

  @Property(tries = 300)
  void verdictsAndWindowsMatchAModelOfSets(@ForAll("ops") List<Op> ops,
      @ForAll @IntRange(min = 1, max = 1_000) int window) {
    ReplayGuard guard = new ReplayGuard(window, 4, WINDOW);
    long w = window;
    long now = 1_700_000_000_000L;
    Map<String, Long> timestamps = new HashMap<>(); // a message's timestamp, fixed when first sent
    Map<String, Boot> boots = new HashMap<>(); // "sender/boot" to its model
    for (Op op : ops) {
      long[] steps = {0, 1, w / 2, w, 2 * w, 2 * w + 1};
      now += steps[op.stepChoice()];
      long[] offsets = {-(w + 1), -w, -w / 2, 0, w / 2, w, w + 1};
      String sender = "s" + op.sender();
      String boot = boot(op.boot());
      long counter = op.counter();
      String nonce = boot + "-" + Long.toHexString(counter);
      long t = now;
      long ts = timestamps.computeIfAbsent(sender + "/" + nonce,
          m -> t + offsets[op.offsetChoice()]);
      ReplayGuard.Verdict expected;
      if (Math.abs(now - ts) > w) {
        expected = ReplayGuard.Verdict.STALE;
      } else {
        long horizon = now - 2 * w;
        boots.values().removeIf(b -> b.lastAcceptedAt < horizon);
        Boot b = boots.get(sender + "/" + boot);
        if (b == null) {
          long live = boots.keySet().stream().filter(k -> k.startsWith(sender + "/")).count();
          if (live >= ReplayGuard.MAX_BOOTS_PER_SENDER) {
            expected = ReplayGuard.Verdict.FULL;
          } else {
            b = new Boot();
            b.highest = counter;
            boots.put(sender + "/" + boot, b);
            expected = ReplayGuard.Verdict.ACCEPT;
          }
        } else if (b.accepted.contains(counter) || b.highest - counter >= WINDOW) {
          expected = ReplayGuard.Verdict.REPLAY;
        } else {
          expected = ReplayGuard.Verdict.ACCEPT;
        }
        if (expected == ReplayGuard.Verdict.ACCEPT) {
          b.accepted.add(counter);
          b.highest = Math.max(b.highest, counter);
          b.lastAcceptedAt = now;
        }
      }
      assertEquals(expected, guard.check(sender, nonce, ts, now), sender + " " + nonce + " at "
          + now);
      if (expected != ReplayGuard.Verdict.STALE) {
        assertEquals(boots.size(), guard.counterWindows(), "windows remembered at " + now);
        assertEquals(0, guard.size(), "no counter nonce is remembered whole");
      }
    }
  }

  /**
   * A peer sending 5,000 messages a second for two minutes, each overtaken by up to 1,000 later
   * ones: every message is accepted once and its replay refused, in one window of 2 KiB. When
   * every nonce was remembered whole, the sender was refused as FULL once it had 131,072
   * messages accepted within two windows (after 26 seconds at this rate).
   */
  @Test
  void aBusySenderIsNotCappedAndItsReplaysAreRefused() {
    ReplayGuard guard = new ReplayGuard(30_000, 1 << 17);
    Random random = new Random(7);
    int messages = 600_000;
    long[] order = new long[messages];
    for (int i = 0; i < messages; i++) {
      order[i] = i + 1;
    }
    for (int i = 0; i < messages; i++) { // each swapped with one up to 1,000 places on
      int j = Math.min(messages - 1, i + random.nextInt(1_000));
      long x = order[i];
      order[i] = order[j];
      order[j] = x;
    }
    long start = 1_700_000_000_000L;
    List<String> refused = new ArrayList<>();
    for (int i = 0; i < messages; i++) {
      long now = start + i / 5;
      String nonce = "0123456789abcdef-" + Long.toHexString(order[i]);
      ReplayGuard.Verdict v = guard.check("peer", nonce, now, now);
      if (v != ReplayGuard.Verdict.ACCEPT && refused.size() < 5) {
        refused.add(i + ": " + v);
      }
      if (i % 1_000 == 999) { // and a replay of a message accepted a moment ago
        assertEquals(ReplayGuard.Verdict.REPLAY, guard.check("peer", nonce, now, now + 1));
      }
    }
    assertEquals(List.of(), refused);
    assertEquals(1, guard.counterWindows());
    assertEquals(0, guard.size());
  }

  /**
   * Ever-new senders and boots (a holder of the cluster key could send them) are remembered up
   * to {@link ReplayGuard#MAX_WINDOWS} windows; beyond, a new boot is refused as FULL, never
   * checked as a whole nonce, until windows are forgotten two windows after their last message.
   */
  @Test
  void windowsAreBoundedOverAllSenders() {
    ReplayGuard guard = new ReplayGuard(1_000, 16);
    long now = 1_700_000_000_000L;
    for (int i = 0; i < ReplayGuard.MAX_WINDOWS; i++) {
      assertEquals(ReplayGuard.Verdict.ACCEPT, guard.check("s" + i, boot(1) + "-1", now, now));
    }
    assertEquals(ReplayGuard.Verdict.FULL, guard.check("new", boot(1) + "-1", now, now));
    assertEquals(ReplayGuard.Verdict.ACCEPT, guard.check("s7", boot(1) + "-2", now, now),
        "a known boot goes on");
    assertEquals(ReplayGuard.MAX_WINDOWS, guard.counterWindows());
    assertEquals(0, guard.size());
    long later = now + 2_001;
    assertEquals(ReplayGuard.Verdict.ACCEPT, guard.check("new", boot(1) + "-1", later, later));
    assertEquals(1, guard.counterWindows());
  }

  /**
   * Nonces of another implementation are remembered whole (docs/deployment.md,
   * "Authentication"), also when they happen to hold a dash followed by hex digits: random UUIDs,
   * random base64url. Taken for a boot and a counter, each was a boot of its own, and the sender
   * was refused as FULL from its ninth message on, for two windows.
   */
  @Test
  void randomNoncesWithADashAreRememberedWhole() {
    ReplayGuard guard = new ReplayGuard(30_000, 1 << 17);
    Random random = new Random(11);
    long now = 1_700_000_000_000L;
    List<String> nonces = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      nonces.add(new java.util.UUID(random.nextLong(), random.nextLong()).toString());
    }
    java.util.Base64.Encoder base64url = java.util.Base64.getUrlEncoder().withoutPadding();
    while (nonces.size() < 100) {
      byte[] b = new byte[16];
      random.nextBytes(b);
      String n = base64url.encodeToString(b);
      int dash = n.lastIndexOf('-');
      if (dash > 0 && ReplayGuard.counterOf(n, dash + 1) >= 0) {
        nonces.add(n); // what the guard took for a boot and a counter
      }
    }
    List<String> refused = new ArrayList<>();
    for (String n : nonces) {
      ReplayGuard.Verdict v = guard.check("other", n, now, now);
      if (v != ReplayGuard.Verdict.ACCEPT) {
        refused.add(n + ": " + v);
      }
    }
    assertEquals(List.of(), refused);
    assertEquals(nonces.size(), guard.size());
    assertEquals(0, guard.counterWindows());
    for (String n : nonces) {
      assertEquals(ReplayGuard.Verdict.REPLAY, guard.check("other", n, now, now + 1), n);
    }
  }

  /**
   * The default window, as docs/deployment.md states it: the highest counter and the 16,383
   * below it are remembered, so a counter 16,384 or more below the highest (a message overtaken
   * by 16,384 later ones) is refused as a replay, one 16,383 below is accepted once.
   */
  @Test
  void theDefaultWindowHoldsTheHighestCounterAndThe16383BelowIt() {
    assertEquals(16_384, ReplayGuard.COUNTER_WINDOW);
    ReplayGuard guard = new ReplayGuard(30_000, 1 << 17);
    long now = 1_700_000_000_000L;
    String b = boot(7) + "-";
    assertEquals(ReplayGuard.Verdict.ACCEPT, guard.check("s", b + Long.toHexString(1), now, now));
    assertEquals(ReplayGuard.Verdict.ACCEPT,
        guard.check("s", b + Long.toHexString(1 + 16_384), now, now));
    assertEquals(ReplayGuard.Verdict.REPLAY, guard.check("s", b + Long.toHexString(1), now, now),
        "accepted before, and 16,384 below the highest");
    assertEquals(ReplayGuard.Verdict.ACCEPT, guard.check("s", b + Long.toHexString(2), now, now),
        "16,383 below the highest");
    assertEquals(ReplayGuard.Verdict.REPLAY, guard.check("s", b + Long.toHexString(2), now, now));
    assertEquals(ReplayGuard.Verdict.ACCEPT,
        guard.check("s", b + Long.toHexString(3 + 16_384), now, now));
    assertEquals(ReplayGuard.Verdict.REPLAY, guard.check("s", b + Long.toHexString(3), now, now),
        "never accepted, but 16,384 below the highest");
  }

  /** A boot id as the transport makes them: 16 lower-case hex digits. */
  static String boot(int i) {
    return String.format("%016x", i);
  }

  @Test
  void onlyHexCountersOfUpTo15DigitsAreCounters() {
    assertEquals(0x1f, ReplayGuard.counterOf("boot-1f", 5));
    assertEquals(0x1F, ReplayGuard.counterOf("boot-1F", 5));
    assertEquals(0xfffffffffffffffL, ReplayGuard.counterOf("b-fffffffffffffff", 2));
    assertEquals(-1, ReplayGuard.counterOf("b-1000000000000000", 2)); // 16 digits
    assertEquals(-1, ReplayGuard.counterOf("b-", 2));
    assertEquals(-1, ReplayGuard.counterOf("b-1g", 2));
    assertEquals(-1, ReplayGuard.counterOf("b-\u0661", 2)); // an Arabic-Indic one
    assertEquals(-1, ReplayGuard.counterOf("b-\uff11", 2)); // a fullwidth one
    // a nonce without a boot, or with a boot of another shape than 16 lower-case hex digits,
    // is remembered whole
    ReplayGuard g = new ReplayGuard(1_000, 16);
    assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("s", "-1", 10_000, 10_000));
    assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("s", "b".repeat(33) + "-1", 10_000, 10_000));
    assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("s", "b-1", 10_000, 10_000));
    assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("s", "0123456789abcdef0-1", 10_000, 10_000));
    assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("s", "0123456789ABCDEF-1", 10_000, 10_000));
    assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("s", "0123456789abcdeg-1", 10_000, 10_000));
    assertEquals(ReplayGuard.Verdict.ACCEPT, g.check("s", "0123456789abcdef-1", 10_000, 10_000));
    assertEquals(6, g.size());
    assertEquals(1, g.counterWindows());
  }
}
