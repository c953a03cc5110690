package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import net.jqwik.api.statistics.Statistics;
import net.jqwik.api.Tag;
import net.jqwik.api.constraints.DoubleRange;
import net.jqwik.api.constraints.IntRange;

/**
 * After any interleaving of loss, duplication, reordering, one-way cuts, owner changes and
 * restarts (some at a generation below the node's earlier ones), once messages flow again every
 * replica converges to its owner's exact set and version. Small caps force the delta logs to overflow and snapshots to span many chunks.
 */
class ConvergencePropertyTest {

  /** The generation every node starts with, far enough above 1 for restarts below it. */
  static final long FIRST_GENERATION = 1_000_000;

  static GossipConfig tight() {
    return GossipConfig.builder()
        .interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofSeconds(3))
        .deadAfter(Duration.ofSeconds(6))
        .forgetAfter(Duration.ofSeconds(12))
        .messageByteCap(1_024)
        .snapshotBytesPerExchange(2_048)
        .deltaLogMaxHashes(40)
        .relayLogMaxHashesPerOrigin(24)
        .relayLogMaxHashesTotal(60)
        .build();
  }

  @Property(tries = 30)
  void replicasConvergeOnceDeliveryResumes(
      @ForAll long seed,
      @ForAll @IntRange(min = 3, max = 6) int n,
      @ForAll @DoubleRange(min = 0, max = 0.5) double loss,
      @ForAll @DoubleRange(min = 0, max = 0.3) double dup,
      @ForAll @IntRange(min = 0, max = 300) int reorderMillis,
      @ForAll("clockOffsets") long clockOffset) {
    collect(check(seed, n, loss, dup, reorderMillis, clockOffset));
  }

  /**
   * How far the nodes' clock is ahead of the scheduler's time ({@link SimCluster}): 0; any
   * origin; or one whose readings pass {@code Long.MAX_VALUE} and wrap during the run (its 60
   * steps take at most 18 s, converging at most 30 s more), since readings mean something only
   * as differences.
   */
  @Provide
  Arbitrary<Long> clockOffsets() {
    return Arbitraries.frequencyOf(
        Tuple.of(2, Arbitraries.just(0L)),
        Tuple.of(1, Arbitraries.longs()),
        Tuple.of(2, Arbitraries.longs().between(0, Duration.ofSeconds(30).toNanos())
            .map(before -> Long.MAX_VALUE - before)));
  }

  /**
   * Evictions name blocks by store number; the tries must exercise that path together with
   * snapshots (store numbers installed from chunks) and relaying (third-party deltas).
   */
  static void collect(long[] totals) {
    Statistics.label("evictions resolved").collect(totals[0] > 0);
    Statistics.label("evictions resolved and snapshots installed")
        .collect(totals[0] > 0 && totals[1] > 0);
    Statistics.label("evictions resolved and relayed")
        .collect(totals[0] > 0 && totals[2] > 0);
    Statistics.label("a generation refuted").collect(totals[3] > 0);
    Statistics.label("evictions resolved").coverage(c -> c.check(true).percentage(p -> p >= 80));
    Statistics.label("evictions resolved and snapshots installed")
        .coverage(c -> c.check(true).percentage(p -> p >= 50));
    Statistics.label("evictions resolved and relayed")
        .coverage(c -> c.check(true).percentage(p -> p >= 50));
    Statistics.label("a generation refuted")
        .coverage(c -> c.check(true).percentage(p -> p >= 10));
  }

  @Property(tries = 300)
  @Tag("long")
  void replicasConvergeOnceDeliveryResumesManySeeds(
      @ForAll long seed,
      @ForAll @IntRange(min = 3, max = 8) int n,
      @ForAll @DoubleRange(min = 0, max = 0.5) double loss,
      @ForAll @DoubleRange(min = 0, max = 0.3) double dup,
      @ForAll @IntRange(min = 0, max = 300) int reorderMillis,
      @ForAll("clockOffsets") long clockOffset) {
    collect(check(seed, n, loss, dup, reorderMillis, clockOffset));
  }

  /**
   * Runs one scenario, the nodes' clock {@code clockOffset} ahead of the scheduler's; returns,
   * summed over every engine of the run, {evictions resolved by store number, snapshots
   * installed, relayed delta bytes sent, generations refuted}.
   */
  static long[] check(long seed, int n, double loss, double dup, int reorderMillis,
      long clockOffset) {
    SimCluster c = new SimCluster(seed, tight(), clockOffset);
    for (int i = 0; i < n; i++) {
      c.add(i, FIRST_GENERATION, List.of(SimCluster.addressOf(0))).start();
    }
    SplittableRandom ops = new SplittableRandom(seed ^ 0x5DEECE66DL);
    // whether a restart's generation is below the node's earlier ones, from a stream of its own
    SplittableRandom clocks = new SplittableRandom(seed ^ 0x510E527FADE682D1L);
    c.delayNanos = 1_000_000;
    c.loss = loss;
    c.duplication = dup;
    c.extraDelayNanos = reorderMillis * 1_000_000L;
    List<GossipEngine> retired = new java.util.ArrayList<>();
    long[] highest = new long[n]; // the highest generation each node has had
    long[] lowest = new long[n]; // the lowest generation each node was started with
    java.util.Arrays.fill(highest, FIRST_GENERATION);
    java.util.Arrays.fill(lowest, FIRST_GENERATION);
    for (int step = 0; step < 60; step++) {
      int who = ops.nextInt(n);
      GossipEngine e = c.nodes.get(who);
      int what = ops.nextInt(100);
      long[] hashes = new long[1 + ops.nextInt(30)];
      for (int i = 0; i < hashes.length; i++) {
        hashes[i] = ops.nextLong(200) * 0x9E3779B97F4A7C15L;
      }
      if (what < 55) {
        e.localSummary().onStored(hashes);
      } else if (what < 85) {
        e.localSummary().onEvicted(hashes);
      } else if (what < 90) {
        e.localSummary().onCleared();
      } else if (what < 95) {
        // one-way cut between two nodes for a while
        int other = ops.nextInt(n);
        c.cut.add(SimCluster.addressOf(who).address() + "|" + SimCluster.addressOf(other).address());
      } else {
        // restart with an empty cache, at the same address: with a new generation above every
        // earlier one, or (a quarter of restarts: its clock set back) below every earlier one,
        // which the node must refute (GENERATIONS_REFUTED) for its peers to take it back
        GossipEngine old = c.nodes.get(who);
        old.stop();
        retired.add(old);
        highest[who] = Math.max(highest[who], old.generation());
        long gen;
        if (clocks.nextInt(4) == 0) {
          gen = lowest[who] - 1 - clocks.nextInt(1_000);
          lowest[who] = gen;
        } else {
          gen = highest[who] + 1;
          highest[who] = gen;
        }
        GossipEngine fresh = c.add(who, gen, List.of(SimCluster.addressOf((who + 1) % n)));
        c.nodes.remove(fresh);
        c.nodes.add(who, fresh);
        fresh.start();
      }
      c.runFor(ops.nextLong(3 * c.interval()));
      for (GossipEngine g : c.nodes) {
        g.checkInvariants();
      }
    }
    c.heal();
    int rounds = c.runUntilConverged(300);
    for (GossipEngine g : c.nodes) {
      g.checkInvariants();
    }
    assertTrue(rounds >= 0, "seed " + seed + ", clock offset " + clockOffset
        + ": not converged after 300 intervals: " + c.firstDivergence());
    List<GossipEngine> all = new java.util.ArrayList<>(c.nodes);
    all.addAll(retired);
    long[] totals = new long[4];
    for (GossipEngine g : all) {
      // between correct nodes every store number an eviction names resolves: a replica at
      // version v holds exactly its origin's blocks and store numbers at v, however the deltas
      // were lost, duplicated, reordered, relayed or replaced by a snapshot
      assertEquals(0, g.counter(GossipCounter.UNRESOLVED_EVICTIONS), "seed " + seed);
      assertEquals(0, g.counter(GossipCounter.INTERNAL_ERRORS), "seed " + seed);
      // restarts below earlier generations, however many, under loss and reordering, are
      // refuted without being taken for another process with the node's id
      assertEquals(0, g.counter(GossipCounter.NODE_ID_IN_USE_REPORTS), "seed " + seed + ": "
          + g.self() + " reported its id in use, "
          + g.counter(GossipCounter.GENERATIONS_REFUTED) + " generations refuted");
      totals[0] += g.counter(GossipCounter.EVICTIONS_RESOLVED);
      totals[1] += g.counter(GossipCounter.SNAPSHOTS_INSTALLED);
      totals[2] += g.counter(GossipCounter.RELAYED_DELTA_BYTES_SENT);
      totals[3] += g.counter(GossipCounter.GENERATIONS_REFUTED);
    }
    return totals;
  }

  static PeerAddress addr(int i) {
    return SimCluster.addressOf(i);
  }
}
