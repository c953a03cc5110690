package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.PeerAddress;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Forged and replayed gossip sent by a stranger ("evil", a sender the transport let through):
 * summaries claiming another origin, absurd generations and sequences, replayed old deltas,
 * snapshot bombs, members nobody else knows. Each must be ignored or rejected and counted, and
 * none may evict a peer's real state, change where a known peer is reached, or grow memory
 * without bound.
 */
class GossipForgeryTest {

  private static final GossipConfig CONFIG = GossipConfig.builder()
      .interval(Duration.ofMillis(100)).suspectAfter(Duration.ofMillis(500))
      .deadAfter(Duration.ofMillis(1500)).forgetAfter(Duration.ofSeconds(5))
      .maxGenerationJump(1_000).maxSequenceJump(1_000).build();
  private static final PeerAddress EVIL = new PeerAddress("evil", "sim:evil");
  private static final long[] OWN = {11, 12, 13, 14, 15};

  private SimCluster c;
  private GossipEngine victimHolder; // node-0: the receiver
  private GossipEngine owner; // node-1: owns OWN
  private final GossipCodec codec = new GossipCodec(CONFIG.messageByteCap(), CONFIG.maxPeers() + 1);

  @BeforeEach
  void converge() {
    c = SimCluster.of(3, 99, CONFIG);
    victimHolder = c.nodes.get(0);
    owner = c.nodes.get(1);
    owner.localSummary().onStored(OWN);
    assertTrue(c.runUntilConverged(100) >= 0, () -> c.firstDivergence());
  }

  private long[] replica() {
    long[] r = victimHolder.replicaOf("node-1");
    assertNotNull(r, "node-0 lost node-1");
    Arrays.sort(r);
    return r;
  }

  private long[] version() {
    return victimHolder.replicaVersion("node-1");
  }

  private void inject(GossipMessage m) {
    victimHolder.onMessage(EVIL, codec.encode(m));
    victimHolder.checkInvariants();
  }

  private static Update update(String origin, long gen, long version, long heartbeat,
      String address, long from, List<Delta> deltas) {
    return new Update(new DigestEntry(origin, gen, version, heartbeat, 0, 0, false), address,
        from, deltas);
  }

  /**
   * A summary of the receiver's own origin is not applied; the higher generation it claims is
   * refuted (the receiver continues above it), not taken.
   */
  @Test
  void aSummaryClaimingTheReceiversOwnOriginIsRejected() {
    long refuted = victimHolder.counter(GossipCounter.GENERATIONS_REFUTED);
    inject(new Ack2(1, List.of(update("node-0", 7, 5, 5, "sim:evil", 0,
        List.of(new Delta(1, Delta.STORE, new long[] {666}))))));
    assertEquals(refuted + 1, victimHolder.counter(GossipCounter.GENERATIONS_REFUTED));
    assertTrue(victimHolder.generation() > 7, "generation " + victimHolder.generation());
    assertEquals(0, victimHolder.localSummary().size());
    assertEquals(0, victimHolder.localSummary().version());
  }

  @Test
  void anAbsurdGenerationOrSequenceIsRejectedAndEvictsNothing() {
    long[] ver = version();
    long before = victimHolder.counter(GossipCounter.REJECTED);
    inject(new Ack2(1, List.of(update("node-1", ver[0] + 1_000_000, 1, 1, "sim:evil", 0,
        List.of(new Delta(1, Delta.CLEAR, Delta.NO_HASHES))))));
    inject(new Ack2(1, List.of(update("node-1", ver[0], ver[1] + 1_000_000, 1, "sim:evil",
        ver[1], List.of(new Delta(ver[1] + 1, Delta.CLEAR, Delta.NO_HASHES))))));
    inject(new SnapshotChunk("node-1", ver[0] + 1_000_000, 1, 1, 0, 1, new long[] {1},
        new long[] {666}));
    assertEquals(before + 3, victimHolder.counter(GossipCounter.REJECTED));
    assertArrayEquals(OWN, replica());
    assertArrayEquals(ver, version());
    assertEquals("sim:1", addressOfNode1());
  }

  @Test
  void aReplayedOldDeltaIsIgnored() {
    long[] ver = version();
    // the owner's first delta, replayed, and an old CLEAR at an already applied sequence
    inject(new Ack2(1, List.of(update("node-1", ver[0], 1, 1, "sim:1", 0,
        List.of(new Delta(1, Delta.STORE, new long[] {777})))))); 
    inject(new Ack2(1, List.of(update("node-1", ver[0], ver[1], 1, "sim:1", ver[1] - 1,
        List.of(new Delta(ver[1], Delta.CLEAR, Delta.NO_HASHES))))));
    assertArrayEquals(OWN, replica());
    assertArrayEquals(ver, version());
  }

  /**
   * A snapshot claiming a million chunks is not assembled: like any snapshot of an origin too
   * large to assemble, its chunk starts a truncated replica, and nothing is allocated for the
   * other chunks. Forged, it is a forged snapshot like any other (one of one chunk installs as
   * well), which the origin refutes: it sees a version of its own above its own.
   */
  @Test
  void aSnapshotBombAllocatesNothingForItsChunksAndIsRefuted() {
    long[] ver = version();
    long bytes = victimHolder.retainedBytesEstimate();
    inject(new SnapshotChunk("node-1", ver[0], ver[1] + 1, 1, 0, 1 << 20, new long[] {1},
        new long[] {1}));
    assertTrue(victimHolder.retainedBytesEstimate() <= bytes + 1_024,
        () -> "retained " + victimHolder.retainedBytesEstimate() + ", was " + bytes);
    assertEquals(ver[1] + 1, version()[1]);
    assertTrue(c.runUntilConverged(100) >= 0, () -> c.firstDivergence());
    assertArrayEquals(OWN, replica());
    assertEquals(1, owner.counter(GossipCounter.VERSIONS_REFUTED));
  }

  @Test
  void aMemberNobodyVouchesForIsForgottenAndMemoryReturns() {
    int members = victimHolder.memberCount();
    long bytes = victimHolder.retainedBytesEstimate();
    for (int i = 0; i < 50; i++) {
      inject(new Ack2(1, List.of(update("ghost-" + i, 1, 1, 1, "sim:ghost" + i, 0,
          List.of(new Delta(1, Delta.STORE, new long[] {1000 + i}))))));
    }
    assertTrue(victimHolder.memberCount() <= members + 50);
    // the ghosts never heartbeat: suspected, dead, then forgotten
    c.runFor(Duration.ofSeconds(8).toNanos());
    victimHolder.checkInvariants();
    for (int i = 0; i < 50; i++) {
      assertNull(victimHolder.replicaOf("ghost-" + i), "ghost-" + i + " still replicated");
    }
    assertEquals(members, victimHolder.memberCount());
    assertTrue(victimHolder.retainedBytesEstimate() <= bytes * 1.1,
        () -> "retained " + victimHolder.retainedBytesEstimate() + " > 110% of " + bytes);
    assertArrayEquals(OWN, replica());
  }

  @Test
  void aForgedRestartCannotEvictAPeerOrRedirectIt() {
    long[] ver = version();
    inject(new Ack2(1, List.of(update("node-1", ver[0] + 1, 0, 1, "sim:evil", 0, List.of()))));
    assertEquals("sim:1", addressOfNode1(), "node-1 must still be reached at its own address");
    c.runFor(20 * c.interval());
    assertArrayEquals(OWN, replica(), "node-1's real state must come back");
  }

  private String addressOfNode1() {
    for (PeerView p : victimHolder.view().peers()) {
      if (p.address().nodeId().equals("node-1")) {
        return p.address().address();
      }
    }
    return null;
  }
}
