package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Assume;
import net.jqwik.api.Combinators;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.LongRange;

/**
 * The trust a peer's estimates get ({@link PeerHealth.PeerState#trust}): its measured accuracy,
 * whose shortfall from 1 halves every {@code distrustHalfLife} since the last measurement, over
 * any history of answered forwards, any half-life and any clock origin (readings may wrap).
 */
class PeerTrustProperties {

  /** An answered forward: {@code actual} of {@code estimated} tokens, after a gap. */
  record Answer(int estimated, int actual, long gapNanos) {}

  @Provide
  Arbitrary<List<Answer>> histories() {
    Arbitrary<Integer> estimated = Arbitraries.integers().between(1, 100_000);
    Arbitrary<Double> share = Arbitraries.oneOf(Arbitraries.of(0.0, 1.0, 2.0),
        Arbitraries.doubles().between(0, 1.5));
    Arbitrary<Long> gap = Arbitraries.oneOf(Arbitraries.of(0L, 1L),
        Arbitraries.longs().between(0, 3_600_000_000_000L));
    return Combinators.combine(estimated, share, gap)
        .as((e, s, g) -> new Answer(e, (int) Math.min(Integer.MAX_VALUE, e * s), g))
        .list().ofMaxSize(30);
  }

  @Provide
  Arbitrary<Long> halfLives() {
    return Arbitraries.oneOf(Arbitraries.of(1L, 60_000_000_000L),
        Arbitraries.longs().between(1, 365L * 86_400_000_000_000L));
  }

  @Provide
  Arbitrary<Long> origins() {
    return Arbitraries.oneOf(Arbitraries.of(0L, Long.MAX_VALUE, Long.MIN_VALUE, -1L),
        Arbitraries.longs());
  }

  /** Replays {@code history} from {@code origin}; returns the time of the last answer. */
  static long replay(PeerHealth.PeerState st, List<Answer> history, long origin, double half) {
    long t = origin;
    for (Answer a : history) {
      t += a.gapNanos();
      st.observeAccuracy(a.estimated(), a.actual(), t, half);
    }
    return t;
  }

  @Property
  void theShortfallHalvesEveryHalfLifeSinceTheLastAnswer(
      @ForAll("histories") List<Answer> history, @ForAll("halfLives") long halfLife,
      @ForAll("origins") long origin, @ForAll @LongRange(min = 0, max = 1L << 50) long since) {
    PeerHealth.PeerState st = new PeerHealth.PeerState();
    long last = replay(st, history, origin, halfLife);
    double a = st.accuracy;
    assertTrue(a >= 0 && a <= 1, "accuracy " + a);
    // as measured at the last answer, and never below it nor above 1 later
    assertEquals(a, st.trust(last, halfLife));
    double later = st.trust(last + since, halfLife);
    assertTrue(later >= a && later <= 1, a + " became " + later);
    // later still is never less
    assertTrue(st.trust(last + since + halfLife, halfLife) >= later);
    // one more half-life halves what is left
    double expected = 1 - (1 - later) / 2;
    assertEquals(expected, st.trust(last + since + halfLife, halfLife), 1e-9);
    // a reading before the last answer (another thread's, older) does not raise it
    assertEquals(a, st.trust(last - 1 - since, halfLife));
  }

  /**
   * Found by the long run (try 6,786 of 10,000): an accuracy whose complement does not round
   * back to it faded, a nanosecond after it was measured against a year's half-life, to one
   * unit in the last place below itself.
   */
  @Example
  void aTrustThatHasHardlyFadedIsNotBelowTheAccuracyMeasured() {
    PeerHealth.PeerState st = new PeerHealth.PeerState();
    st.accuracyAt = 0;
    st.accuracy = 0.2597152000000001;
    double later = st.trust(1, 365 * 86_400e9);
    assertTrue(later >= st.accuracy, st.accuracy + " became " + later);
  }

  @Property
  void aPeerThatNeverCameUpShortIsTrustedFullyAtAnyTime(
      @ForAll("histories") List<Answer> history, @ForAll("halfLives") long halfLife,
      @ForAll("origins") long origin, @ForAll long at) {
    PeerHealth.PeerState st = new PeerHealth.PeerState();
    List<Answer> exact = history.stream()
        .map(a -> new Answer(a.estimated(), Math.max(a.estimated(), a.actual()), a.gapNanos()))
        .toList();
    replay(st, exact, origin, halfLife);
    assertEquals(1.0, st.accuracy, "no sample below 1");
    assertEquals(1.0, st.trust(at, halfLife));
  }

  @Property
  void anAnswerIsAveragedWithTheFadedTrust(
      @ForAll("histories") List<Answer> history, @ForAll("halfLives") long halfLife,
      @ForAll("origins") long origin, @ForAll @LongRange(min = 0, max = 1L << 50) long since,
      @ForAll @LongRange(min = 1, max = 100_000) long estimated,
      @ForAll @LongRange(min = 0, max = 100_000) long actual) {
    PeerHealth.PeerState st = new PeerHealth.PeerState();
    long last = replay(st, history, origin, halfLife);
    double faded = st.trust(last + since, halfLife);
    st.observeAccuracy((int) estimated, (int) actual, last + since, halfLife);
    double sample = Math.min(1.0, (double) actual / estimated);
    assertEquals(0.8 * faded + 0.2 * sample, st.accuracy, 1e-12);
    assertEquals(st.accuracy, st.trust(last + since, halfLife));
  }

  @Property
  void anAnswerTimedBeforeTheLastFadesFromTheLast(
      @ForAll("histories") List<Answer> history, @ForAll("halfLives") long halfLife,
      @ForAll("origins") long origin, @ForAll @LongRange(min = 1, max = 1L << 50) long earlier,
      @ForAll @LongRange(min = 0, max = 100_000) long actual) {
    // threads ending forwards read the clock before they take the peer's lock: the one with
    // the earlier reading may record its answer second
    Assume.that(!history.isEmpty());
    PeerHealth.PeerState st = new PeerHealth.PeerState();
    long last = replay(st, history, origin, halfLife);
    st.observeAccuracy(100_000, (int) actual, last - earlier, halfLife);
    double a = st.accuracy;
    assertEquals(a, st.trust(last, halfLife), "no fading before the last answer");
    if (a < 1) {
      assertEquals(1 - (1 - a) / 2, st.trust(last + halfLife, halfLife), 1e-9);
    }
  }
}
