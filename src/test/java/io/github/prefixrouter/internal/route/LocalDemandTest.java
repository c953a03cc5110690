package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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

  @Test
  void expectedRequestsCountPastRequestsWithinAResidency() {
    LocalDemand d = new LocalDemand(60_000);
    for (int t = 0; t < 600; t++) {
      d.inserted(1_000, t * S); // residency ~60 s
      if (t % 2 == 0) {
        d.requested(7, t * S); // one request every 2 s
      }
    }
    double e = d.expectedRequests(7, 599 * S);
    assertTrue(e > 25 && e < 32, "about 30 requests per 60 s residency, the current excluded: " + e);
    assertEquals(0, d.expectedRequests(8, 599 * S));
    // a minute (one residency) without requests for it: the count decays by about e
    for (int t = 600; t < 660; t++) {
      d.inserted(1_000, t * S);
    }
    double later = d.expectedRequests(7, 660 * S);
    assertTrue(later < e / 2, later + " vs " + e);
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
    d.reserve(100);
    assertEquals(100, d.reservedNanos(0));
    assertEquals(60, d.reservedNanos(40));
    d.reserve(80); // an earlier end never shortens the reservation
    assertEquals(60, d.reservedNanos(40));
    d.reserve(150);
    assertEquals(110, d.reservedNanos(40));
    assertEquals(0, d.reservedNanos(150));
    assertEquals(0, d.reservedNanos(1_000));
  }
}
