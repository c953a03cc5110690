package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Evictions travel as store numbers; a replica resolves them whether the blocks they name
 * reached it by delta, by snapshot or through a relaying peer, and they cost about a byte.
 */
class EvictionByStoreNumberTest {

  static final GossipConfig CONFIG = GossipConfig.builder()
      .interval(Duration.ofMillis(100))
      .suspectAfter(Duration.ofSeconds(3))
      .deadAfter(Duration.ofSeconds(6))
      .forgetAfter(Duration.ofSeconds(12))
      .deltaLogMaxHashes(16)
      .relayLogMaxHashesPerOrigin(16)
      .build();

  static long[] blocks(int from, int n) {
    long[] h = new long[n];
    for (int i = 0; i < n; i++) {
      h[i] = (from + i) * 0x9E3779B97F4A7C15L + 17;
    }
    return h;
  }

  static void converge(SimCluster c) {
    int rounds = c.runUntilConverged(200);
    assertTrue(rounds >= 0, c.firstDivergence());
  }

  @Test
  void evictionsResolveAgainstStoreNumbersInstalledFromASnapshot() {
    SimCluster c = SimCluster.of(2, 5, CONFIG);
    converge(c);
    GossipEngine owner = c.nodes.get(0);
    GossipEngine peer = c.nodes.get(1);
    // the peer is cut off while the owner stores 40 blocks: its 16-block log overflows
    c.cut.add("sim:0|sim:1");
    c.cut.add("sim:1|sim:0");
    owner.localSummary().onStored(blocks(0, 40));
    c.runFor(5 * c.interval());
    c.heal();
    converge(c);
    assertEquals(1, peer.counter(GossipCounter.SNAPSHOTS_INSTALLED));
    long applied = peer.counter(GossipCounter.DELTAS_APPLIED);
    // evict 8 of the blocks the peer learned from the snapshot, the oldest first
    owner.localSummary().onEvicted(blocks(0, 8));
    converge(c);
    assertEquals(1, peer.counter(GossipCounter.SNAPSHOTS_INSTALLED), "came as a delta");
    assertEquals(applied + 1, peer.counter(GossipCounter.DELTAS_APPLIED));
    assertEquals(8, peer.counter(GossipCounter.EVICTIONS_RESOLVED));
    assertEquals(0, peer.counter(GossipCounter.UNRESOLVED_EVICTIONS));
    assertEquals(32, peer.replicaOf("node-0").length);
    peer.checkInvariants();
  }

  @Test
  void aRelayingPeerForwardsTheSameStoreNumbers() {
    // node 0 and node 2 never hear each other: all news of node 0 reaches node 2 via node 1
    SimCluster c = new SimCluster(9, CONFIG);
    c.add(0, 1, List.of(SimCluster.addressOf(1))).start();
    c.add(1, 1, List.of(SimCluster.addressOf(0))).start();
    c.add(2, 1, List.of(SimCluster.addressOf(1))).start();
    c.cut.add("sim:0|sim:2");
    c.cut.add("sim:2|sim:0");
    GossipEngine owner = c.nodes.get(0);
    GossipEngine far = c.nodes.get(2);
    owner.localSummary().onStored(blocks(100, 12));
    c.runFor(20 * c.interval());
    converge(c);
    owner.localSummary().onEvicted(new long[] {blocks(100, 12)[3], blocks(100, 12)[7]});
    owner.localSummary().onStored(blocks(200, 2));
    owner.localSummary().onEvicted(blocks(200, 1));
    long relayedBefore = c.nodes.get(1).counter(GossipCounter.RELAYED_DELTA_BYTES_SENT);
    converge(c);
    assertTrue(c.nodes.get(1).counter(GossipCounter.RELAYED_DELTA_BYTES_SENT) > relayedBefore);
    assertEquals(3, far.counter(GossipCounter.EVICTIONS_RESOLVED));
    assertEquals(0, far.counter(GossipCounter.UNRESOLVED_EVICTIONS));
    assertEquals(11, far.replicaOf("node-0").length);
    far.checkInvariants();
  }

  @Test
  void anEvictionOfBlocksStoredTogetherCostsAboutAByteEach() {
    LocalSummary s = new LocalSummary(1, 1_000, 1_000);
    s.onStored(blocks(0, 300)); // store numbers 1..300
    s.onEvicted(blocks(100, 50)); // store numbers 101..150
    Delta evict = s.deltasAfter(1, 1 << 20, 1 << 20).get(0);
    assertEquals(Delta.EVICT, evict.op());
    // head (2 bytes for 50 << 2), first store number 101 as zigzag 202 (2 bytes), 49 gaps of 0
    assertEquals(2 + 2 + 49, evict.encodedSize(0));
    // against 4 bytes per fingerprint before
    assertTrue(evict.encodedSize(0) < 50 * BlockFingerprint.BYTES / 3);
  }
  /**
   * The size the engine counts and budgets for an update's deltas is the bytes they take on the
   * wire, with store-number gaps on both sides of each varint boundary (a gap of {@code g}
   * after the first number is coded as {@code g - 1}).
   */
  @Test
  void theCountedSizeOfEvictionsIsTheirSizeOnTheWire() {
    GossipCodec codec = new GossipCodec(1 << 20, GossipConfig.MAX_PEERS_LIMIT + 1);
    long[][] runs = {
        {1, 128, 256, 16_640, 16_641},
        {127, 255, 16_638, 16_639, 2_113_790},
        {1L << 40, (1L << 40) + 128, (1L << 40) + 129, GossipMessage.MAX_COUNTER}};
    for (long[] stores : runs) {
      List<Delta> deltas = List.of(new Delta(1, Delta.STORE, new long[] {7, 8}),
          new Delta(2, Delta.EVICT, stores), new Delta(3, Delta.EVICT, new long[] {stores[0]}),
          new Delta(4, Delta.CLEAR, Delta.NO_HASHES));
      DigestEntry e = new DigestEntry("a", 1, 4, 1, 0, 0, false);
      int with = codec.encode(new Ack2(1, List.of(new Update(e, null, 0, deltas)))).length;
      int without = codec.encode(new Ack2(1, List.of(new Update(e, null, 0, List.of())))).length;
      assertEquals(with - without, Delta.encodedSize(deltas), Arrays.toString(stores));
    }
  }
}
