package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A snapshot larger than one exchange may send reaches a peer over several exchanges only if
 * every exchange sends chunks of the same version: the sender keeps the encoded snapshot while
 * its delta log still covers that version. An origin whose set is larger than half the snapshot
 * cache and that changes between two exchanges must still get its snapshot to a new peer.
 */
class LargeSnapshotDeliveryTest {

  @Test
  void aLargeOriginThatKeepsChangingReachesANewPeer() {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofSeconds(3)).deadAfter(Duration.ofSeconds(6))
        .forgetAfter(Duration.ofSeconds(12)).messageByteCap(1_024)
        .snapshotBytesPerExchange(1_024) // the snapshot cache holds 4 KiB
        .deltaLogMaxHashes(200).build();
    SimCluster c = new SimCluster(7, config);
    c.delayNanos = 1_000_000;
    GossipEngine origin = c.add(0, 1, List.of());
    origin.start();
    // 1,200 blocks: a snapshot of about 6 KB, more than half the cache, in 7 or more chunks
    long[] first = new long[1_200];
    for (int i = 0; i < first.length; i++) {
      first[i] = (i + 1) * 0x9E3779B97F4A7C15L;
    }
    origin.localSummary().onStored(first);
    GossipEngine joiner = c.add(1, 1, List.of(SimCluster.addressOf(0)));
    joiner.start();
    // the origin's set changes once per round (one block stored, one evicted), as a busy
    // node's does; its log covers the last 200 changes, 100 rounds
    for (int round = 0; round < 200; round++) {
      origin.localSummary().onStored(new long[] {(10_000L + round) * 0x9E3779B97F4A7C15L});
      origin.localSummary().onEvicted(new long[] {first[round]});
      c.runFor(c.interval());
      origin.checkInvariants();
      joiner.checkInvariants();
    }
    assertTrue(joiner.counter(GossipCounter.SNAPSHOTS_INSTALLED) > 0,
        "no snapshot installed in 200 rounds; chunks received: "
            + joiner.counter(GossipCounter.MESSAGES_RECEIVED) + ", snapshots encoded by the origin: "
            + origin.counter(GossipCounter.SNAPSHOTS_ENCODED));
    long[] own = origin.localSummary().snapshot().hashes();
    long[] replica = joiner.replicaOf(origin.self().nodeId());
    java.util.Arrays.sort(own);
    java.util.Arrays.sort(replica);
    long[] v = joiner.replicaVersion(origin.self().nodeId());
    assertTrue(origin.localSummary().version() - v[1] <= 4,
        "replica at v" + v[1] + ", origin at v" + origin.localSummary().version());
    if (v[1] == origin.localSummary().version()) {
      assertArrayEquals(own, replica);
    }
  }
  /**
   * Two busy origins whose snapshots each take more than half the snapshot cache, relayed by
   * one node to a new peer that reaches them only through it: encoding one must not push the
   * other out while the peer is still collecting it, or each exchange re-encodes it at the
   * origin's version of the moment and the peer, seeing the version change mid-assembly, starts
   * over, for ever (before: nothing installed in 300 rounds, 142 snapshots encoded).
   */
  @Test
  void twoLargeBusyOriginsRelayedByOneNodeBothReachANewPeer() {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofSeconds(3)).deadAfter(Duration.ofSeconds(6))
        .forgetAfter(Duration.ofSeconds(12)).messageByteCap(1_024)
        .snapshotBytesPerExchange(1_024) // the snapshot cache holds 4 KiB
        .deltaLogMaxHashes(200).relayLogMaxHashesPerOrigin(200).build();
    SimCluster c = new SimCluster(1, config);
    c.delayNanos = 1_000_000;
    GossipEngine relayer = c.add(0, 1, List.of());
    relayer.start();
    // 1,000 blocks each: snapshots of about 5 KB, more than half the cache, in 5 or more chunks
    GossipEngine[] origins = new GossipEngine[2];
    long[][] first = new long[2][1_000];
    for (int o = 0; o < 2; o++) {
      origins[o] = c.add(o + 1, 1, List.of(SimCluster.addressOf(0)));
      origins[o].start();
      for (int i = 0; i < first[o].length; i++) {
        first[o][i] = ((o + 1) * 100_000L + i) * 0x9E3779B97F4A7C15L;
      }
      origins[o].localSummary().onStored(first[o]);
    }
    assertTrue(c.runUntilConverged(200) >= 0, c.firstDivergence());
    GossipEngine joiner = c.add(3, 1, List.of(SimCluster.addressOf(0)));
    for (int o = 1; o <= 2; o++) {
      c.cut.add("sim:" + o + "|sim:3");
      c.cut.add("sim:3|sim:" + o);
    }
    joiner.start();
    // both origins change once per round; the logs cover the last 200 changes
    for (int round = 0; round < 300; round++) {
      for (int o = 0; o < 2; o++) {
        origins[o].localSummary().onStored(
            new long[] {((o + 1) * 1_000_000L + round) * 0x9E3779B97F4A7C15L});
        origins[o].localSummary().onEvicted(new long[] {first[o][round]});
      }
      c.runFor(c.interval());
      relayer.checkInvariants();
      joiner.checkInvariants();
    }
    for (GossipEngine origin : origins) {
      long[] v = joiner.replicaVersion(origin.self().nodeId());
      assertTrue(v != null && v[1] > 0 && origin.localSummary().version() - v[1] <= 4,
          origin.self().nodeId() + ": replica at " + (v == null ? "none" : "v" + v[1])
              + ", origin at v" + origin.localSummary().version() + "; snapshots installed "
              + joiner.counter(GossipCounter.SNAPSHOTS_INSTALLED) + ", encoded by the relayer "
              + relayer.counter(GossipCounter.SNAPSHOTS_ENCODED));
    }
    assertTrue(relayer.counter(GossipCounter.SNAPSHOTS_ENCODED) <= 4,
        relayer.counter(GossipCounter.SNAPSHOTS_ENCODED) + " snapshots encoded");
  }
}
