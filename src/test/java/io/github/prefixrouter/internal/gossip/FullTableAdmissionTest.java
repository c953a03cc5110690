package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.PeerAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A node whose membership table is full ({@code maxPeers}) of entries it only heard of from a
 * third party, or of tombstones, still takes a node that speaks to it for itself: such a node
 * takes the place of one of those entries, the oldest first. Before, a peer relaying made-up
 * origins (kept alive by relayed heartbeats) kept every real node that joined later out of the
 * table for as long as it went on, and tombstones of departed nodes kept new ones out for
 * {@code deadAfter + forgetAfter}.
 */
class FullTableAdmissionTest {

  static final int MAX_PEERS = 8;

  static GossipConfig config() {
    return GossipConfig.builder().interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofSeconds(2)).deadAfter(Duration.ofSeconds(4))
        .forgetAfter(Duration.ofSeconds(60)).maxPeers(MAX_PEERS).build();
  }

  /** The relayer's digest listing the made-up origins at heartbeat {@code hb}. */
  static Syn junkDigest(long round, long hb) {
    List<DigestEntry> d = new ArrayList<>();
    for (int i = 0; i < MAX_PEERS; i++) {
      d.add(new DigestEntry("junk-" + i, 1, 0, hb, 0, 0, false));
    }
    return new Syn(round, 1, d);
  }

  @Test
  void aNodeSpeakingForItselfTakesThePlaceOfRelayedJunk() {
    SimCluster c = new SimCluster(11, config());
    c.delayNanos = 1_000_000;
    GossipEngine victim = c.add(0, 1, List.of());
    victim.start();
    PeerAddress relayer = new PeerAddress("relayer", "sim:relayer");
    List<Update> junk = new ArrayList<>();
    for (int i = 0; i < MAX_PEERS; i++) {
      junk.add(new Update(new DigestEntry("junk-" + i, 1, 0, 1, 0, 0, false),
          "sim:junk-" + i, 0, List.of()));
    }
    victim.handle(relayer, new Ack2(1, junk));
    assertEquals(MAX_PEERS, victim.memberCount(), "the table is full of made-up origins");
    GossipEngine real = c.add(1, 1, List.of(SimCluster.addressOf(0)));
    real.start();
    real.localSummary().onStored(new long[] {0x9E3779B97F4A7C15L, 0x3C6EF372FE94F82AL});
    // the relayer keeps its made-up origins alive, round after round
    for (int r = 0; r < 20; r++) {
      victim.handle(relayer, junkDigest(r + 1, r + 2));
      c.runFor(c.interval());
    }
    victim.checkInvariants();
    assertEquals(MAX_PEERS, victim.memberCount());
    assertNotNull(victim.statusOf("node-1"), "the real node is a member of the victim");
    assertTrue(victim.view().peers().stream()
        .anyMatch(p -> p.address().equals(SimCluster.addressOf(1))),
        "the real node is in the victim's view: " + victim.view().peers());
    long[] own = real.localSummary().snapshot().hashes();
    long[] rep = victim.replicaOf("node-1");
    Arrays.sort(own);
    Arrays.sort(rep);
    assertArrayEquals(own, rep, "the victim replicates the real node");
  }

  @Test
  void aNewNodeTakesThePlaceOfATombstone() {
    SimCluster c = new SimCluster(13, config());
    c.delayNanos = 1_000_000;
    GossipEngine victim = c.add(0, 1, List.of());
    victim.start();
    List<GossipEngine> first = new ArrayList<>();
    for (int i = 1; i <= MAX_PEERS; i++) {
      GossipEngine e = c.add(i, 1, List.of(SimCluster.addressOf(0)));
      e.start();
      first.add(e);
    }
    c.runFor(20 * c.interval());
    assertEquals(MAX_PEERS, victim.memberCount());
    for (GossipEngine e : first) { // they all leave, for good
      c.crash(e);
    }
    c.runFor(50 * c.interval()); // deadAfter: all tombstones now, forgetAfter far off
    assertEquals(MAX_PEERS, victim.memberCount());
    assertEquals(0, victim.view().peers().size());
    GossipEngine late = c.add(100, 1, List.of(SimCluster.addressOf(0)));
    late.start();
    c.runFor(10 * c.interval());
    victim.checkInvariants();
    assertEquals(GossipEngine.Status.ALIVE, victim.statusOf("node-100"),
        "a node joining while the table holds only tombstones");
    assertEquals(1, victim.view().peers().size());
  }

  static final PeerAddress RELAYER = new PeerAddress("relayer", "sim:relayer");

  /**
   * A node (of a cluster seeded with {@code seed}) whose table is full of members relayed by
   * {@link #RELAYER}, {@code relayed-0} to {@code relayed-(MAX_PEERS - 1)}, each holding one
   * block ({@code 1000 + i}) at version 1.
   */
  static GossipEngine fullOfRelayedMembers(long seed) {
    SimCluster c = new SimCluster(seed, config());
    GossipEngine victim = c.add(0, 1, List.of());
    List<Update> relayed = new ArrayList<>();
    for (int i = 0; i < MAX_PEERS; i++) {
      relayed.add(new Update(new DigestEntry("relayed-" + i, 1, 1, 1, 0, 0, false),
          "sim:relayed-" + i, 0, List.of(new Delta(1, Delta.STORE, new long[] {1000 + i}))));
    }
    victim.handle(RELAYER, new Ack2(1, relayed));
    return victim;
  }

  /**
   * A live member dropped to make room takes its replica with it: its blocks are no longer
   * counted as held by anyone, least of all by the node that takes its slot.
   */
  @Test
  void aDisplacedMembersReplicaGoesWithIt() {
    GossipEngine victim = fullOfRelayedMembers(19);
    assertEquals(MAX_PEERS, victim.memberCount());
    assertEquals(MAX_PEERS, victim.replicatedPairs(), "one block replicated per relayed member");
    PeerAddress newcomer = new PeerAddress("newcomer", "sim:newcomer");
    victim.handle(newcomer, new Ack2(1, List.of(new Update(
        new DigestEntry("newcomer", 1, 0, 1, 0, 0, false), null, 0, List.of()))));
    victim.checkInvariants();
    assertEquals(1, victim.counter(GossipCounter.MEMBERS_DISPLACED));
    assertEquals(GossipEngine.Status.ALIVE, victim.statusOf("newcomer"));
    assertArrayEquals(new long[0], victim.replicaOf("newcomer"),
        "the newcomer's replica, in the slot of the member it displaced");
    assertEquals(MAX_PEERS - 1, victim.replicatedPairs(),
        "pairs replicated once a member holding one block was displaced");
  }

  /**
   * A live member dropped to make room while a snapshot of it was arriving takes the snapshot
   * with it: the blocks it held of the pending snapshots' budget are given back.
   */
  @Test
  void aDisplacedMembersPendingSnapshotGoesWithIt() {
    GossipEngine victim = fullOfRelayedMembers(23);
    for (int i = 0; i < MAX_PEERS; i++) { // the first of two chunks of a newer snapshot of each
      victim.handle(RELAYER, new SnapshotChunk("relayed-" + i, 1, 5, 2, 0, 2, new long[] {1},
          new long[] {2000 + i}));
    }
    victim.checkInvariants();
    PeerAddress newcomer = new PeerAddress("newcomer", "sim:newcomer");
    victim.handle(newcomer, new Ack2(1, List.of(new Update(
        new DigestEntry("newcomer", 1, 0, 1, 0, 0, false), null, 0, List.of()))));
    assertEquals(1, victim.counter(GossipCounter.MEMBERS_DISPLACED));
    assertEquals(1, victim.counter(GossipCounter.SNAPSHOTS_ABANDONED),
        "the displaced member's pending snapshot");
    victim.checkInvariants();
  }

  /**
   * Members heard from directly are never dropped: neither a relayed origin nor another origin
   * speaking for itself takes their place, and both are refused as before.
   */
  @Test
  void membersHeardFromDirectlyStay() {
    SimCluster c = new SimCluster(17, config());
    GossipEngine victim = c.add(0, 1, List.of());
    for (int i = 0; i < MAX_PEERS; i++) {
      PeerAddress p = new PeerAddress("direct-" + i, "sim:direct-" + i);
      victim.handle(p, new Ack2(1, List.of(new Update(
          new DigestEntry(p.nodeId(), 1, 0, 1, 0, 0, false), null, 0, List.of()))));
    }
    assertEquals(MAX_PEERS, victim.memberCount());
    long refused = victim.counter(GossipCounter.MEMBERS_REFUSED);
    PeerAddress relayer = new PeerAddress("direct-0", "sim:direct-0");
    victim.handle(relayer, new Ack2(1, List.of(new Update(
        new DigestEntry("relayed", 1, 0, 1, 0, 0, false), "sim:relayed", 0, List.of()))));
    PeerAddress newcomer = new PeerAddress("newcomer", "sim:newcomer");
    List<Update> repeats = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      repeats.add(new Update(new DigestEntry("newcomer", 1, 0, 1, 0, 0, false), null, 0,
          List.of()));
    }
    victim.handle(newcomer, new Ack2(1, repeats));
    victim.checkInvariants();
    assertEquals(null, victim.statusOf("relayed"));
    assertEquals(null, victim.statusOf("newcomer"));
    for (int i = 0; i < MAX_PEERS; i++) {
      assertEquals(GossipEngine.Status.ALIVE, victim.statusOf("direct-" + i));
    }
    assertEquals(refused + 4, victim.counter(GossipCounter.MEMBERS_REFUSED));
    assertEquals(0, victim.counter(GossipCounter.MEMBERS_DISPLACED));
  }
}
