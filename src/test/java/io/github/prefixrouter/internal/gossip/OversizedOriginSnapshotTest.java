package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * An origin holding more blocks than {@code maxBlocksPerPeer}, met by a peer that needs a
 * snapshot (it joined after the origin's delta log moved on): the snapshot installs as a
 * truncated replica, as deltas would have built it, instead of being refused chunk after chunk
 * while the origin sends it again on every exchange.
 */
class OversizedOriginSnapshotTest {

  static long[] blocks(int from, int to) {
    long[] h = new long[to - from];
    for (int i = from; i < to; i++) {
      h[i - from] = i * 7_919L + 13;
    }
    return h;
  }

  /**
   * Node 0, an origin of 800 blocks, and node 1, which joins it after its delta log (50 hashes)
   * moved on, with a replica cap of 500 blocks, run for 100 intervals.
   */
  private static SimCluster anOriginPastTheCapMetLate() {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .messageByteCap(1_024).maxBlocksPerPeer(500).deltaLogMaxHashes(50).build();
    SimCluster c = new SimCluster(7, config);
    GossipEngine origin = c.add(0, 1, List.of());
    origin.start();
    origin.localSummary().onStored(blocks(0, 800));
    GossipEngine late = c.add(1, 1, List.of(SimCluster.addressOf(0)));
    late.start();
    c.runFor(100 * c.interval());
    return c;
  }

  @Test
  void aSnapshotAboveThePerPeerCapInstallsTruncatedAndIsNotSentAgainAndAgain() {
    SimCluster c = anOriginPastTheCapMetLate();
    GossipEngine origin = c.nodes.get(0);
    GossipEngine late = c.nodes.get(1);
    for (GossipEngine e : c.nodes) {
      e.checkInvariants();
    }

    long[] replica = late.replicaOf("node-0");
    assertNotNull(replica);
    assertEquals(500, replica.length, "the replica holds as many blocks as the cap allows");
    Set<Long> own = new HashSet<>();
    for (long f : origin.localSummary().snapshot().hashes()) {
      own.add(f);
    }
    for (long f : replica) {
      assertTrue(own.contains(f), "a block the origin does not hold: " + f);
    }
    assertEquals(origin.localSummary().version(), late.replicaVersion("node-0")[1]);
    PeerView p = late.view().peers().get(0);
    assertTrue(p.replicaTruncated());
    // one snapshot, not one per exchange (it was 199 in these 100 rounds)
    assertTrue(origin.counter(GossipCounter.SNAPSHOTS_SENT) <= 3,
        "snapshots sent: " + origin.counter(GossipCounter.SNAPSHOTS_SENT));

    // the origin shrinks below 7/8 of the cap: the truncated replica refreshes to the exact set
    long[] all = blocks(0, 800);
    for (int i = 0; i < 500; i++) {
      origin.localSummary().onEvicted(new long[] {all[i]});
      c.runFor(c.interval() / 10);
    }
    assertTrue(c.runUntilConverged(200) >= 0, c.firstDivergence());
    assertEquals(0, late.counter(GossipCounter.UNRESOLVED_EVICTIONS));
  }

  /**
   * An origin so large that its snapshot has more chunks than the receiver assembles (an origin
   * of 16 times the per-peer cap at the densest chunks; here about 54 times at the real ones):
   * the receiver refused every chunk, kept no replica at all, and every exchange sent the
   * snapshot again. It now takes the first chunk as the start of a truncated replica at the
   * snapshot's version, and deltas carry it on from there, as past the cap they would have.
   */
  @Test
  void aSnapshotOfMoreChunksThanAssembledStartsATruncatedReplicaAndIsNotSentAgainAndAgain() {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .messageByteCap(1_024).maxBlocksPerPeer(100).deltaLogMaxHashes(50).build();
    SimCluster c = new SimCluster(7, config);
    GossipEngine origin = c.add(0, 1, List.of());
    origin.start();
    origin.localSummary().onStored(blocks(0, 8_000));
    GossipEngine late = c.add(1, 1, List.of(SimCluster.addressOf(0)));
    late.start();
    c.runFor(100 * c.interval());
    for (GossipEngine e : c.nodes) {
      e.checkInvariants();
    }
    long[] replica = late.replicaOf("node-0");
    assertNotNull(replica);
    assertTrue(replica.length > 0 && replica.length <= 100, "replica of " + replica.length);
    Set<Long> own = new HashSet<>();
    for (long f : origin.localSummary().snapshot().hashes()) {
      own.add(f);
    }
    for (long f : replica) {
      assertTrue(own.contains(f), "a block the origin does not hold: " + f);
    }
    assertEquals(origin.localSummary().version(), late.replicaVersion("node-0")[1]);
    assertTrue(late.view().peers().get(0).replicaTruncated());
    assertTrue(origin.counter(GossipCounter.SNAPSHOTS_SENT) <= 3,
        "snapshots sent: " + origin.counter(GossipCounter.SNAPSHOTS_SENT));
    // the origin's next blocks reach the replica by deltas (while it is below the cap)
    int held = replica.length;
    long[] next = blocks(8_000, 8_000 + Math.min(20, 100 - held));
    origin.localSummary().onStored(next);
    c.runFor(10 * c.interval());
    Set<Long> now = new HashSet<>();
    for (long f : late.replicaOf("node-0")) {
      now.add(f);
    }
    for (long h : next) {
      assertTrue(now.contains(BlockFingerprint.of(h)), "a new block reached the replica");
    }
    assertEquals(origin.localSummary().version(), late.replicaVersion("node-0")[1]);
    // it shrinks below 7/8 of the cap: the truncated replica refreshes to the exact set
    long[] all = blocks(0, 8_000);
    origin.localSummary().onEvicted(Arrays.copyOfRange(all, 0, 7_990));
    origin.localSummary().onEvicted(next);
    assertTrue(c.runUntilConverged(400) >= 0, c.firstDivergence());
    for (GossipEngine e : c.nodes) {
      e.checkInvariants();
    }
  }

  @Test
  void snapshotsOfManyChunksHoldBoundedMemory() {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .maxPeers(64).maxBlocksTotal(100_000).build();
    GossipEngine engine = new GossipEngine(new PeerAddress("me", "sim:me"), 1, config,
        List.of(), time, time, new SplittableRandom(3), () -> EngineLoad.IDLE, (to, p) -> {});
    long before = engine.retainedBytesEstimate();
    for (int i = 0; i < 60; i++) {
      PeerAddress peer = new PeerAddress("p" + i, "sim:p" + i);
      engine.handle(peer, new Ack2(1, List.of(new Update(
          new DigestEntry(peer.nodeId(), 1, 0, 1, 0, 0, false), null, 0, List.of()))));
      // a million chunks is more than an assembly takes: the replica starts truncated from
      // the chunk, and nothing is allocated for the others
      engine.handle(peer, new SnapshotChunk(peer.nodeId(), 1, 5, 3, 0, 1 << 20,
          new long[] {1, 2, 3}, new long[] {11, 12, 13}));
      assertEquals(5, engine.replicaVersion(peer.nodeId())[1]);
      assertEquals(3, engine.replicaOf(peer.nodeId()).length);
      // 16 times the per-peer cap's worth is assembled
      engine.handle(peer, new SnapshotChunk(peer.nodeId(), 1, 6, 3, 0, 16 * 64 + 2,
          new long[] {1, 2, 3}, new long[] {11, 12, 13}));
    }
    engine.checkInvariants();
    assertEquals(0, engine.counter(GossipCounter.REJECTED));
    assertEquals(60, engine.counter(GossipCounter.SNAPSHOTS_INSTALLED));
    // the chunk slots of all assemblies are held to maxBlocksTotal (8 bytes each)
    long grown = engine.retainedBytesEstimate() - before;
    assertTrue(grown < 60 * 1_000 + 32L * 100_000 + 16L * 100_000, "grew by " + grown);
  }
  /**
   * A replica installed truncated from a snapshot counts its origin's blocks as the snapshot
   * listed them, the ones it dropped included: an origin of 800 blocks that shrinks to 550,
   * still past the cap of 500, draws no refresh, for its set would not fit. Counted as the
   * blocks kept, the replica took the origin for smaller than the cap and asked for a fresh
   * copy, a snapshot that installed truncated again.
   */
  @Test
  void aReplicaInstalledTruncatedCountsTheBlocksItsSnapshotDropped() {
    SimCluster c = anOriginPastTheCapMetLate();
    GossipEngine origin = c.nodes.get(0);
    GossipEngine late = c.nodes.get(1);
    assertTrue(late.view().peers().get(0).replicaTruncated());
    long[] all = blocks(0, 800);
    for (int i = 0; i < 250; i++) { // down to 550 blocks: still past the cap
      origin.localSummary().onEvicted(new long[] {all[i]});
      c.runFor(c.interval() / 10);
    }
    c.runFor(100 * c.interval());
    assertEquals(0, late.counter(GossipCounter.REPLICA_REFRESHES));
    assertTrue(late.view().peers().get(0).replicaTruncated());
    late.checkInvariants();
  }

  /**
   * A snapshot whose chunks passed the pending budget ({@code maxBlocksTotal} blocks over all
   * assemblies: another origin's snapshot was assembling meanwhile) installs as a truncated
   * replica, flagged as such, even though every block it kept fits in the replica index: it is
   * a subset, must say so to the router, and must ask for a fresh copy later.
   */
  @Test
  void aSnapshotThatPassedThePendingBudgetInstallsTruncated() {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .maxBlocksTotal(300).build();
    SimulatedScheduler time = new SimulatedScheduler();
    GossipEngine node = new GossipEngine(new PeerAddress("me", "sim:me"), 1, config, List.of(),
        time, time, new SplittableRandom(3), () -> EngineLoad.IDLE, (to, p) -> { });
    PeerAddress a = new PeerAddress("a", "sim:a");
    PeerAddress b = new PeerAddress("b", "sim:b");
    node.handle(a, new Ack2(1, List.of(new Update(new DigestEntry("a", 1, 1, 1, 0, 0, false),
        "sim:a", 1, List.of()))));
    node.handle(b, new Ack2(1, List.of(new Update(new DigestEntry("b", 1, 1, 1, 0, 0, false),
        "sim:b", 1, List.of()))));
    // a's snapshot: 3 chunks of 100, two of them in; b's: 2 chunks of 100
    node.handle(a, chunk("a", 0, 3, 0));
    node.handle(a, chunk("a", 1, 3, 100));
    node.handle(b, chunk("b", 0, 2, 0));
    node.handle(b, chunk("b", 1, 2, 100)); // past the 300 blocks pending: taken without them
    node.checkInvariants();
    assertEquals(100, node.replicaOf("b").length);
    PeerView pb = node.view().peers().stream().filter(p -> p.address().nodeId().equals("b"))
        .findFirst().orElseThrow();
    assertTrue(pb.replicaTruncated(), "b's replica holds 100 of its 200 blocks");
  }

  private static SnapshotChunk chunk(String origin, int index, int count, int first) {
    long[] stores = new long[100];
    long[] hashes = new long[100];
    for (int i = 0; i < 100; i++) {
      stores[i] = first + i + 1;
      hashes[i] = (origin.hashCode() * 1_000L + first + i) & 0xFFFF_FFFFL;
    }
    return new SnapshotChunk(origin, 1, 1, 100L * count, index, count, stores, hashes);
  }
}
