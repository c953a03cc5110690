package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

class LocalDemandTest {

  static final long S = 1_000_000_000L;

  @Test
  void residencyIsCapacityOverInsertionRate() {
    LocalDemand d = new LocalDemand(60_000);
    assertEquals(LocalDemand.MAX_RESIDENCY_NANOS, d.residencyNanos(0));
    // 1,000 tokens/s for ten minutes: the decayed rate converges to 1,000 tokens/s
    for (int t = 0; t < 600; t++) {
      d.inserted(1_000, t * S);
    }
    double tau = d.residencyNanos(600 * S - 1) / (double) S;
    assertTrue(tau > 55 && tau < 65, "60,000 tokens at 1,000 tokens/s stay about 60 s: " + tau);
  }

  /** A node whose cache turns over in about {@code residencyS} seconds. */
  private static LocalDemand withResidency(int residencyS) {
    return new LocalDemand(1_000L * residencyS); // fed 1,000 tokens/s by insertAndAsk
  }

  /** Feeds 1,000 inserted tokens/s from {@code from} to {@code to} s, asking for key 7 every {@code everyS}. */
  private static void insertAndAsk(LocalDemand d, int from, int to, int everyS) {
    for (int t = from; t < to; t++) {
      d.inserted(1_000, t * S);
      if (everyS > 0 && t % everyS == 0) {
        d.requested(7, t * S);
      }
    }
  }

  @Test
  void aPrefixRequestedManyTimesPerResidencyIsExpectedForTheWholeHorizon() {
    LocalDemand d = withResidency(60);
    insertAndAsk(d, 0, 600, 2); // one request every 2 s, 30 per 60 s residency
    double e = d.expectedRequests(7, 599 * S);
    // an LRU cache keeps it (no 60 s gap between its requests): what bounds the expectation
    // is the planning horizon, one hour of requests at one every 2 s
    assertTrue(e > 1_400 && e < 2_100, "about 1,800 requests in an hour: " + e);
    assertEquals(0, d.expectedRequests(8, 599 * S));
    // a minute (one residency) without requests for it: the estimated rate drops by about e
    insertAndAsk(d, 600, 660, 0);
    double later = d.expectedRequests(7, 660 * S);
    assertTrue(later < e / 2, later + " vs " + e);
  }

  @Test
  void aPrefixRequestedAFewTimesPerResidencyOutlivesIt() {
    LocalDemand d = withResidency(60);
    insertAndAsk(d, 0, 1_200, 20); // 3 requests per residency
    d.requested(7, 1_200 * S);
    double e = d.expectedRequests(7, 1_200 * S);
    // gaps above 60 s are rare at one request per 20 s: it is hit many residencies' worth of
    // times before eviction, far more than the 3 of one residency, yet fewer than an hour's 180
    assertTrue(e > 6 && e < 40, "expected hits before eviction: " + e);
  }

  @Test
  void aPrefixRequestedLessThanOncePerResidencyIsExpectedLessThanOnceMore() {
    LocalDemand d = withResidency(60);
    insertAndAsk(d, 0, 1_200, 120); // one request every two residencies
    d.requested(7, 1_200 * S);
    double e = d.expectedRequests(7, 1_200 * S);
    assertTrue(e < 1, "evicted before its next request, most of the time: " + e);
  }

  @Test
  void aNodeThatJustStartedLearnsTheRateNotTheCount() {
    // nothing inserted: the residency is the 10-minute cap
    LocalDemand young = new LocalDemand(1_000_000);
    LocalDemand old = new LocalDemand(1_000_000);
    for (int t = 0; t <= 3_000; t += 10) {
      old.requested(7, t * S);
      if (t <= 60) {
        young.requested(7, t * S); // the same rate, observed for one minute only
      }
    }
    double y = young.expectedRequests(7, 60 * S);
    double o = old.expectedRequests(7, 3_000 * S);
    // six past requests in a minute: far more than a residency's 6 at the raw count would say
    // (e^6 - 1 = 402 hits before eviction are capped), the young node expects several times
    // what it saw, but an hour's worth only of what it saw, not of a rate it guessed
    assertTrue(y > 3 * 6 && y <= 6 * 6, "young " + y);
    // the old node has seen 60 per residency: an hour of them
    assertTrue(o > 300 && o < 400, "old " + o);
  }

  @Test
  void aNodeObservingForPartOfAResidencyScalesItsCountToAWholeOne() {
    // nothing inserted: the residency is the 10-minute cap; the same two requests, 30 s apart
    LocalDemand young = new LocalDemand(1_000_000);
    LocalDemand old = new LocalDemand(1_000_000);
    old.requested(99, 0); // observing since 0: five residencies before the requests
    young.requested(7, 3_000 * S);
    old.requested(7, 3_000 * S);
    young.requested(7, 3_030 * S);
    old.requested(7, 3_030 * S);
    double past = Math.exp(-30.0 / 600); // the first request, decayed over the 30 s
    double y = young.expectedRequests(7, 3_030 * S);
    double o = old.expectedRequests(7, 3_030 * S);
    // the young node has observed 30 s of a 600 s residency, 5%: its count is scaled up at most
    // tenfold, e^9.5 - 1 hits, which an hour's worth of the count seen (6 x 0.95) caps
    assertEquals(past * 6, y, 1e-9, "young");
    // the old node takes the count for a residency's: e^0.95 - 1 = 1.6 hits before eviction
    assertEquals(Math.expm1(past / -Math.expm1(-3_030.0 / 600)), o, 1e-9, "old");
    assertTrue(y > 3 * o, "young " + y + ", old " + o);
  }

  @Test
  void arrivalsPerSecondCountsEveryRequestFromTheStart() {
    LocalDemand d = new LocalDemand(1_000);
    assertEquals(0, d.arrivalsPerSecond(0));
    for (int i = 0; i < 20; i++) {
      d.requested(i, i * S / 2); // 2 per second, 20 keys
    }
    double early = d.arrivalsPerSecond(10 * S);
    assertTrue(early > 1.5 && early < 2.5, "2/s after 10 s: " + early);
    for (int i = 20; i < 1_200; i++) {
      d.requested(i % 20, i * S / 2);
    }
    double later = d.arrivalsPerSecond(600 * S);
    assertTrue(later > 1.8 && later < 2.2, "2/s after 10 min: " + later);
    assertTrue(d.arrivalsPerSecond(1_200 * S) < later / 2, "decays without requests");
  }

  @Test
  void aSingleRequestPredictsNothing() {
    LocalDemand d = new LocalDemand(1_000);
    d.requested(42, 0);
    assertEquals(0, d.expectedRequests(42, 0));
    d.requested(42, 1);
    assertTrue(d.expectedRequests(42, 1) > 0.99);
  }

  @Test
  void theTableStaysBoundedAndKeepsTheBusierKey() {
    LocalDemand d = new LocalDemand(1_000_000);
    for (int i = 0; i < 100; i++) {
      d.requested(1, i);
    }
    for (long k = 2; k < 100_000; k++) {
      d.requested(k, 200);
    }
    // the hot key survives as long as colliding newcomers are colder than it
    assertTrue(d.expectedRequests(1, 300) > 90);
  }

  @Test
  void aReservationIsWhatIsLeftOfTheBoughtMiss() {
    LocalDemand d = new LocalDemand(1_000);
    assertEquals(0, d.reservedNanos(0));
    d.reserve(0, 100);
    assertEquals(100, d.reservedNanos(0));
    assertEquals(60, d.reservedNanos(40));
    d.reserve(40, 80); // an earlier end never shortens the reservation
    assertEquals(60, d.reservedNanos(40));
    d.reserve(40, 150);
    assertEquals(110, d.reservedNanos(40));
    assertEquals(0, d.reservedNanos(150));
    assertEquals(0, d.reservedNanos(1_000));
  }

  @Test
  void aReservationEndsWithItsRun() {
    LocalDemand d = new LocalDemand(1_000);
    LocalDemand.Reservation first = d.reserve(0, 100);
    LocalDemand.Reservation second = d.reserve(10, 150);
    d.release(second); // its run failed at once: the first miss is still ahead
    assertEquals(80, d.reservedNanos(20), "what is left of the first miss");
    d.release(first);
    assertEquals(0, d.reservedNanos(20), "both runs ended before their misses were expected to");
    d.release(first); // ended twice: nothing
    assertEquals(0, d.reservedNanos(20));
  }

  /**
   * Reservations made, released and read at times that go forward, against a model: what is
   * ahead is the most left of the reservations not released, none below 0.
   */
  @Property(tries = 300)
  void aReservationCountsUntilItsEndOrItsRelease(
      @ForAll @LongRange(min = 1, max = 1_000_000_000L) long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    LocalDemand d = new LocalDemand(1_000);
    List<LocalDemand.Reservation> held = new ArrayList<>();
    List<Long> ends = new ArrayList<>(); // the model: the ends of those not released
    long now = rnd.nextLong(-1_000, 1_000); // a clock's readings may start anywhere
    for (int step = 0; step < 40; step++) {
      now += rnd.nextInt(4) == 0 ? 0 : rnd.nextLong(1, 200);
      int op = rnd.nextInt(3);
      if (op == 0) {
        long until = now + rnd.nextLong(1, 500);
        held.add(d.reserve(now, until));
        ends.add(until);
      } else if (op == 1 && !held.isEmpty()) {
        int i = rnd.nextInt(held.size());
        d.release(held.remove(i));
        ends.remove(i);
      }
      long expected = 0;
      for (long end : ends) {
        expected = Math.max(expected, end - now);
      }
      assertEquals(expected, d.reservedNanos(now), "step " + step + " at " + now + ": " + ends);
    }
  }
}
