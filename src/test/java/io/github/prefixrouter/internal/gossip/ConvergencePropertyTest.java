package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Tag;
import net.jqwik.api.constraints.DoubleRange;
import net.jqwik.api.constraints.IntRange;

/**
 * After any interleaving of loss, duplication, reordering, one-way cuts, owner changes and
 * restarts, once messages flow again every replica converges to its owner's exact set and
 * version. Small caps force the delta logs to overflow and snapshots to span many chunks.
 */
class ConvergencePropertyTest {

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
      @ForAll @IntRange(min = 0, max = 300) int reorderMillis) {
    check(seed, n, loss, dup, reorderMillis);
  }

  @Property(tries = 300)
  @Tag("long")
  void replicasConvergeOnceDeliveryResumesManySeeds(
      @ForAll long seed,
      @ForAll @IntRange(min = 3, max = 8) int n,
      @ForAll @DoubleRange(min = 0, max = 0.5) double loss,
      @ForAll @DoubleRange(min = 0, max = 0.3) double dup,
      @ForAll @IntRange(min = 0, max = 300) int reorderMillis) {
    check(seed, n, loss, dup, reorderMillis);
  }

  static void check(long seed, int n, double loss, double dup, int reorderMillis) {
    SimCluster c = SimCluster.of(n, seed, tight());
    SplittableRandom ops = new SplittableRandom(seed ^ 0x5DEECE66DL);
    c.delayNanos = 1_000_000;
    c.loss = loss;
    c.duplication = dup;
    c.extraDelayNanos = reorderMillis * 1_000_000L;
    long[] gens = new long[n];
    java.util.Arrays.fill(gens, 1);
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
        // restart with a new generation and an empty cache, at the same address
        GossipEngine old = c.nodes.get(who);
        old.stop();
        gens[who]++;
        GossipEngine fresh = c.add(who, gens[who], List.of(SimCluster.addressOf((who + 1) % n)));
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
    assertTrue(rounds >= 0, "seed " + seed + ": not converged after 300 intervals: "
        + c.firstDivergence());
  }

  static PeerAddress addr(int i) {
    return SimCluster.addressOf(i);
  }
}
