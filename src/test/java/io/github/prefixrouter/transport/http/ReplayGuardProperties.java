package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/**
 * {@link ReplayGuard} against a model that remembers every accepted message forever, on a clock
 * that never goes back: a message (a sender's nonce, sent once with its timestamp and then
 * replayed as it is) is STALE when its timestamp is more than the window from the clock, a
 * REPLAY when it was accepted before, FULL when its sender has {@code maxNoncesPerSender}
 * messages accepted within the last two windows, and accepted otherwise; and the guard remembers
 * exactly the messages accepted within the last two windows. Timestamps and clock steps are
 * drawn around the edges: exactly one window off, one past it, two windows on.
 */
class ReplayGuardProperties {

  /** One check: a sender's nonce, where its timestamp lies when first sent, a clock step. */
  record Op(int sender, int nonce, int offsetChoice, int stepChoice, int stepExtra) {}

  @Provide
  Arbitrary<List<Op>> ops() {
    Arbitrary<Op> op = Combinators.combine(
        Arbitraries.integers().between(0, 2),
        Arbitraries.integers().between(0, 24),
        Arbitraries.integers().between(0, 6),
        Arbitraries.integers().between(0, 6),
        Arbitraries.integers().between(0, 50)).as(Op::new);
    return op.list().ofMinSize(1).ofMaxSize(200);
  }

  @Property(tries = 300)
  void verdictsAndMemoryMatchAModelThatForgetsNothing(
      @ForAll("ops") List<Op> ops,
      @ForAll @IntRange(min = 1, max = 1_000) int window,
      @ForAll @IntRange(min = 1, max = 6) int maxPerSender) {
    ReplayGuard guard = new ReplayGuard(window, maxPerSender);
    long w = window;
    long now = 1_700_000_000_000L;
    Map<String, Long> timestamps = new HashMap<>(); // a message's timestamp, fixed when first sent
    Map<String, Long> accepted = new HashMap<>(); // message to the time it was accepted at
    for (Op op : ops) {
      long[] steps = {0, 1, w / 2, w, 2 * w, 2 * w + 1, op.stepExtra()};
      now += steps[op.stepChoice()];
      long[] offsets = {-(w + 1), -w, -w / 2, 0, w / 2, w, w + 1};
      String sender = "s" + op.sender();
      String message = sender + "/n" + op.nonce();
      long t = now;
      long ts = timestamps.computeIfAbsent(message, m -> t + offsets[op.offsetChoice()]);
      ReplayGuard.Verdict expected;
      long horizon = now - 2 * w;
      if (Math.abs(now - ts) > w) {
        expected = ReplayGuard.Verdict.STALE;
      } else if (accepted.containsKey(message)) {
        expected = ReplayGuard.Verdict.REPLAY;
      } else if (accepted.entrySet().stream()
          .filter(e -> e.getKey().startsWith(sender + "/") && e.getValue() >= horizon)
          .count() >= maxPerSender) {
        expected = ReplayGuard.Verdict.FULL;
      } else {
        expected = ReplayGuard.Verdict.ACCEPT;
        accepted.put(message, now);
      }
      assertEquals(expected, guard.check(sender, "n" + op.nonce(), ts, now), message + " at " + now);
      if (expected != ReplayGuard.Verdict.STALE) { // a stale message is refused before any forgetting
        assertEquals(accepted.values().stream().filter(r -> r >= horizon).count(), guard.size(),
            "messages remembered at " + now);
      }
    }
  }
}
