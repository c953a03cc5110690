package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
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
 * that record. The record notes where its incarnation listens, which a forward decided over an
 * older snapshot goes to.
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
          PeerHealth.PeerState counted = health.forwarded(at(seen, 0), seen);
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

  /** Where incarnation {@code generation} of p1 listens: each restart moves it. */
  static PeerAddress at(long generation, int corrected) {
    return new PeerAddress("p1", "10.0." + corrected + "." + generation + ":7070");
  }

  /** A snapshot of the live peers that shows p1 in incarnation {@code generation} at {@code a}. */
  static PeerSet snapshot(long generation, PeerAddress a) {
    return new PeerSet(new PeerAddress[] {a}, new int[1], new int[1], new int[1],
        new boolean[1], new boolean[1], new long[] {-1}, new long[1], new long[] {generation});
  }

  /**
   * Over the same interleavings, with every incarnation of the peer at another address (each
   * shown, for a while, at a first address gossip corrects later): the record a lookup or a
   * forward finds notes the address the latest snapshot of its incarnation (a lookup's, or a
   * counted forward's) showed, and none while no snapshot of its incarnation has shown one. So a
   * forward decided over a snapshot older than its peer's restart, counted on the restarted
   * peer's record once a snapshot of the restart looked it up, finds where the new process
   * listens there.
   */
  @Property
  void aRecordNotesWhereItsIncarnationListens(
      @ForAll @LongRange(min = 1, max = 1_000_000_000L) long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    PeerHealth health = new PeerHealth();
    // the address each record was last shown at for its incarnation (absent: none yet)
    Map<PeerHealth.PeerState, PeerAddress> shown = new IdentityHashMap<>();
    List<Out> out = new ArrayList<>();
    long newest = 1;
    for (int step = 0; step < 60; step++) {
      if (rnd.nextInt(8) == 0) {
        newest++; // the peer restarts, elsewhere
      }
      long seen = Math.max(1, newest - rnd.nextInt(3));
      PeerAddress a = at(seen, rnd.nextInt(2));
      PeerHealth.PeerState found;
      boolean showsAddress = true; // a lookup or forward over a snapshot that shows p1 at a
      switch (rnd.nextInt(4)) {
        case 0 -> found = health.get(snapshot(seen, a), 0);
        case 1 -> {
          found = health.forwarded(a, seen);
          out.add(new Out(found, found.generation));
          if (found.generation > seen && shown.containsKey(found)) {
            PeerAddress to = found.address;
            assertTrue(at(found.generation, 0).equals(to) || at(found.generation, 1).equals(to),
                "a forward decided over incarnation " + seen + ", counted on incarnation "
                    + found.generation + "'s record, finds " + to + " there (seed " + seed
                    + ")");
          }
        }
        case 2 -> {
          if (!out.isEmpty()) {
            Out o = out.remove(rnd.nextInt(out.size()));
            o.peer().answered();
            health.coolDownFailed("p1", o.incarnation(), 0, LONG);
          }
          found = health.get("p1", 0);
          showsAddress = false;
        }
        default -> {
          health.prune(Set.of(), 0); // the peer is missing from a snapshot
          found = health.get("p1", 0);
          showsAddress = false;
        }
      }
      if (showsAddress && found.generation == seen) {
        shown.put(found, a);
      }
      assertEquals(shown.get(found), found.address,
          "the address the record notes for incarnation " + found.generation + " (seed " + seed
              + ")");
    }
  }
}
