package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;

/**
 * A peer's record ({@link PeerHealth}) over any interleaving of lookups by decisions over
 * snapshots old and new (the peer restarting in between), forwards counted, forwards ended with
 * a failure, and prunes forgetting the peer: a forward is counted on the record a lookup for its
 * incarnation finds, that record is about the incarnation the forward goes to (the one its end
 * reports), and so what its end teaches lands on the record it counted on while lookups find
 * that record.
 */
class PeerRecordProperties {

  static final long LONG = 1_000_000_000L;

  /** A forward out: the record it counted on, and the incarnation its end reports. */
  record Out(PeerHealth.PeerState peer, long incarnation) {}

  @Property
  void aForwardsCountAndItsEndLandOnOneRecord(
      @ForAll @LongRange(min = 1, max = 1_000_000_000L) long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    PeerHealth health = new PeerHealth();
    List<Out> out = new ArrayList<>();
    long newest = 1; // the peer's newest incarnation; older snapshots show earlier ones
    for (int step = 0; step < 60; step++) {
      if (rnd.nextInt(8) == 0) {
        newest++; // the peer restarts
      }
      // a snapshot shows the newest incarnation, or one up to two restarts older
      long seen = Math.max(1, newest - rnd.nextInt(3));
      switch (rnd.nextInt(4)) {
        case 0 -> health.get("p1", seen);
        case 1 -> {
          PeerHealth.PeerState counted = health.forwarded("p1", seen);
          assertTrue(counted.generation >= seen,
              "a forward decided over incarnation " + seen + " counted on a record about "
                  + counted.generation);
          assertSame(health.get("p1", seen), counted,
              "counted on a record the next lookup replaces (seed " + seed + ")");
          out.add(new Out(counted, counted.generation));
        }
        case 2 -> {
          if (!out.isEmpty()) {
            Out o = out.remove(rnd.nextInt(out.size()));
            o.peer().answered();
            health.coolDownFailed("p1", o.incarnation(), 0, LONG);
            if (health.get("p1", 0) == o.peer()) {
              assertTrue(o.peer().failed(0),
                  "a forward's failure did not cool down the record it counted on, which"
                      + " lookups still find (seed " + seed + ")");
            }
          }
        }
        default -> health.prune(Set.of(), 0); // the peer is missing from a snapshot
      }
    }
    int counted = 0;
    PeerHealth.PeerState current = health.get("p1", 0);
    for (Out o : out) {
      if (o.peer() == current) {
        counted++;
      }
    }
    assertEquals(counted, current.outstanding,
        "the forwards out on the record lookups find (seed " + seed + ")");
  }
}
