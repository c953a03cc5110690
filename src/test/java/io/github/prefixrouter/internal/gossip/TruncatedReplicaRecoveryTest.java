package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A replica truncated by its cap asks for a fresh snapshot once its origin's set would fit
 * again, so it converges to the exact set; and an origin hovering around the cap does not cause
 * a snapshot every round.
 */
class TruncatedReplicaRecoveryTest {

  static final int CAP = 200;

  static final GossipConfig CONFIG = GossipConfig.builder()
      .interval(Duration.ofMillis(100))
      .suspectAfter(Duration.ofSeconds(3))
      .deadAfter(Duration.ofSeconds(6))
      .forgetAfter(Duration.ofSeconds(12))
      .maxBlocksPerPeer(CAP)
      .deltaLogMaxHashes(4_096) // every change travels as a delta: no snapshot is needed
      .relayLogMaxHashesPerOrigin(4_096)
      .build();

  static long[] blocks(int from, int n) {
    long[] h = new long[n];
    for (int i = 0; i < n; i++) {
      h[i] = (from + i) * 0x9E3779B97F4A7C15L + 29;
    }
    return h;
  }

  static void converge(SimCluster c) {
    int rounds = c.runUntilConverged(300);
    assertTrue(rounds >= 0, c.firstDivergence());
    for (GossipEngine e : c.nodes) {
      e.checkInvariants();
      for (PeerView p : e.view().peers()) {
        assertFalse(p.replicaTruncated(), e.self().nodeId() + " truncated " + p.address());
      }
    }
  }

  /**
   * Node 0 of {@code c} grows to 300 blocks, 30 an interval, past the cap of 200, and every
   * peer's replica of it is truncated 30 intervals later.
   */
  static GossipEngine growPastTheCap(SimCluster c) {
    GossipEngine owner = c.nodes.get(0);
    for (int b = 0; b < 10; b++) {
      owner.localSummary().onStored(blocks(b * 30, 30));
      c.runFor(c.interval());
    }
    c.runFor(30 * c.interval());
    assertTrue(truncatedAtEveryPeer(c, "node-0"));
    return owner;
  }

  static boolean truncatedAtEveryPeer(SimCluster c, String origin) {
    for (GossipEngine e : c.nodes) {
      if (e.self().nodeId().equals(origin)) {
        continue;
      }
      boolean found = false;
      for (PeerView p : e.view().peers()) {
        if (p.address().nodeId().equals(origin)) {
          found = p.replicaTruncated();
        }
      }
      if (!found) {
        return false;
      }
    }
    return true;
  }

  /** The origin's log holds its whole history: the refresh is answered with deltas from 0. */
  @Test
  void aTruncatedReplicaConvergesOnceItsOriginShrinksFromTheWholeHistory() {
    long[] snapshots = growShrinkAndConverge(CONFIG, 11);
    assertEquals(0, snapshots[1]);
    assertEquals(0, snapshots[2]);
  }

  /**
   * Logs of 200 hashes: the eviction of 150 blocks travels as a delta, the history of 300 does
   * not, and after that eviction the log still reaches the version of a snapshot cached before.
   */
  private static final GossipConfig SHORT_LOGS = GossipConfig.builder()
      .interval(Duration.ofMillis(100))
      .suspectAfter(Duration.ofSeconds(3))
      .deadAfter(Duration.ofSeconds(6))
      .forgetAfter(Duration.ofSeconds(12))
      .maxBlocksPerPeer(CAP)
      .deltaLogMaxHashes(200)
      .relayLogMaxHashesPerOrigin(200)
      .build();

  /** The origin's log holds only the recent deltas: the refresh is answered with a snapshot. */
  @Test
  void aTruncatedReplicaConvergesOnceItsOriginShrinksFromASnapshot() {
    long[] snapshots = growShrinkAndConverge(SHORT_LOGS, 13);
    assertTrue(snapshots[1] >= 1 && snapshots[2] >= 1, java.util.Arrays.toString(snapshots));
  }

  /**
   * The origin cached a snapshot for a peer that joined while it was past the cap, and its log
   * still reaches that snapshot's version after it shrank: the snapshot is older than the
   * truncated replicas asking for a fresh copy, which cannot take it, so the refresh must be
   * answered with the set as it is now.
   */
  @Test
  void aTruncatedReplicaConvergesThoughItsOriginCachedAnOlderSnapshot() {
    SimCluster c = SimCluster.of(3, 13, SHORT_LOGS);
    converge(c);
    GossipEngine owner = growPastTheCap(c);
    // a peer joins: the origin's log no longer reaches version 0, so it encodes its snapshot
    // (version 10, 300 blocks) and keeps it while its log reaches that version
    GossipEngine joiner = c.add(3, 1, List.of(SimCluster.addressOf(0)));
    joiner.start();
    c.runFor(30 * c.interval());
    assertEquals(1, owner.counter(GossipCounter.SNAPSHOTS_ENCODED));
    assertEquals(CAP, joiner.replicaOf("node-0").length);
    long sentBefore = owner.counter(GossipCounter.SNAPSHOTS_SENT);
    // shrinks to 150 in one delta: the log (200 hashes) still reaches version 10
    owner.localSummary().onEvicted(blocks(0, 150));
    converge(c);
    for (GossipEngine e : c.nodes.subList(1, 4)) {
      assertEquals(150, e.replicaOf("node-0").length);
    }
    // a snapshot for each of the three refreshing replicas, not one in every exchange
    long sent = owner.counter(GossipCounter.SNAPSHOTS_SENT) - sentBefore;
    assertTrue(sent <= 12, sent + " snapshots sent");
  }

  /**
   * The refresh waits until the origin's set is at most 7/8 of the cap: an origin shrunk to 180
   * blocks (cap 200) would fit, but sits within the eighth below the cap, so its truncated
   * replicas do not ask for it; at 170 they do, and converge.
   */
  @Test
  void aTruncatedReplicaAsksForAFreshCopyOnlyOnceItsOriginIsAtMostSevenEighthsOfTheCap() {
    SimCluster c = SimCluster.of(3, 19, CONFIG);
    converge(c);
    GossipEngine owner = growPastTheCap(c);
    owner.localSummary().onEvicted(blocks(0, 120)); // 180: above 7/8 of the cap (175)
    c.runFor(100 * c.interval());
    for (GossipEngine e : c.nodes.subList(1, 3)) {
      assertEquals(0, e.counter(GossipCounter.REPLICA_REFRESHES), e.self().nodeId());
    }
    assertTrue(truncatedAtEveryPeer(c, "node-0"));
    owner.localSummary().onEvicted(blocks(120, 10)); // 170
    converge(c);
    for (GossipEngine e : c.nodes.subList(1, 3)) {
      assertTrue(e.counter(GossipCounter.REPLICA_REFRESHES) >= 1, e.self().nodeId());
      assertEquals(170, e.replicaOf("node-0").length);
    }
  }

  /**
   * A refreshing replica asks for the fresh copy in the exchanges its origin starts as well as
   * in its own: here every SYN of the replica is lost, so only the origin's exchanges, which
   * bring news of an origin still storing, can bring it the whole set again.
   */
  @Test
  void aRefreshIsAnsweredInTheExchangesTheOriginStarts() {
    SimCluster c = SimCluster.of(2, 23, CONFIG);
    converge(c);
    GossipEngine owner = growPastTheCap(c);
    GossipEngine replica = c.nodes.get(1);
    GossipCodec wire = new GossipCodec(1 << 20, 1_000);
    c.drop = (from, p) -> from.nodeId().equals(replica.self().nodeId()) && isSyn(wire, p);
    owner.localSummary().onEvicted(blocks(0, 150)); // 150 left: below 7/8 of the cap
    c.runFor(5 * c.interval());
    for (int b = 0; b < 10; b++) { // one more block an interval: 160
      owner.localSummary().onStored(blocks(1_000 + b, 1));
      c.runFor(c.interval());
    }
    c.runFor(5 * c.interval());
    assertTrue(replica.counter(GossipCounter.REPLICA_REFRESHES) >= 1);
    assertEquals(160, replica.replicaOf("node-0").length);
    assertFalse(truncatedAtEveryPeer(c, "node-0"));
  }

  private static boolean isSyn(GossipCodec wire, byte[] payload) {
    try {
      return wire.decode(payload) instanceof Syn;
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }

  /** Returns the snapshots each node installed after the origin shrank. */
  static long[] growShrinkAndConverge(GossipConfig config, long seed) {
    SimCluster c = SimCluster.of(3, seed, config);
    converge(c);
    GossipEngine owner = growPastTheCap(c);
    long[] installed = new long[3];
    for (int i = 1; i < 3; i++) {
      GossipEngine e = c.nodes.get(i);
      assertEquals(CAP, e.replicaOf("node-0").length);
      assertEquals(0, e.counter(GossipCounter.REPLICA_REFRESHES));
      installed[i] = e.counter(GossipCounter.SNAPSHOTS_INSTALLED);
      e.checkInvariants();
    }
    assertFalse(c.converged());
    // shrinks to 150, evicting the oldest: deltas alone leave the replicas the 50 blocks
    // 150..199 of the 150 blocks 150..299
    owner.localSummary().onEvicted(blocks(0, 150));
    converge(c);
    long[] snapshots = new long[3];
    for (int i = 1; i < 3; i++) {
      GossipEngine e = c.nodes.get(i);
      assertEquals(150, e.replicaOf("node-0").length);
      assertTrue(e.counter(GossipCounter.REPLICA_REFRESHES) >= 1);
      snapshots[i] = e.counter(GossipCounter.SNAPSHOTS_INSTALLED) - installed[i];
    }
    return snapshots;
  }

  /**
   * A fresh copy that takes longer to arrive than the 16 rounds a refresh first asks for it:
   * one chunk an exchange, and only the origin holds its whole set (every other replica of it is
   * truncated too), so a peer in a cluster of eight, which exchanges with the origin about once
   * a round, collects the 17 chunks of the origin's 6,800 blocks over many rounds. The refresh
   * stays open while the snapshot keeps arriving (converged in 86 to 233 rounds over five
   * seeds); it used to end after 16 rounds, dropping the chunks collected, and every later
   * refresh did the same, so the replicas stayed truncated (133 refreshes in 600 rounds).
   */
  @Test
  void aRefreshWhoseSnapshotTakesManyRoundsStillConverges() {
    int cap = 8_000;
    GossipConfig config = GossipConfig.builder()
        .interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofSeconds(3))
        .deadAfter(Duration.ofSeconds(6))
        .forgetAfter(Duration.ofSeconds(12))
        .maxBlocksPerPeer(cap)
        .messageByteCap(2_048)
        .snapshotChunksPerExchange(1)
        .deltaLogMaxHashes(4_000) // the replicas follow every change by deltas
        .relayLogMaxHashesPerOrigin(4_000)
        .build();
    SimCluster c = SimCluster.of(8, 17, config);
    converge(c);
    GossipEngine owner = c.nodes.get(0);
    for (int b = 0; b < 45; b++) { // 9,000 blocks: past the cap
      owner.localSummary().onStored(blocks(b * 200, 200));
      c.runFor(c.interval());
    }
    c.runFor(10 * c.interval());
    assertTrue(truncatedAtEveryPeer(c, "node-0"));
    // down to 6,800, below 7/8 of the cap: each replica holds 5,800 of them
    owner.localSummary().onEvicted(blocks(0, 2_200));
    int rounds = c.runUntilConverged(600);
    long refreshes = 0;
    for (GossipEngine e : c.nodes.subList(1, 8)) {
      refreshes += e.counter(GossipCounter.REPLICA_REFRESHES);
    }
    long r = refreshes;
    assertTrue(rounds >= 0, () -> "not converged in 600 rounds after " + r
        + " refreshes: " + c.firstDivergence());
    for (GossipEngine e : c.nodes.subList(1, 8)) {
      assertEquals(6_800, e.replicaOf("node-0").length);
      e.checkInvariants();
    }
  }

  @Test
  void anOriginHoveringAroundTheCapDoesNotCauseASnapshotEveryRound() {
    hoverAroundTheCap(SimCluster.of(3, 12, CONFIG));
  }

  /**
   * The same with the nodes' clock 10 s short of {@code Long.MAX_VALUE}: its readings wrap in
   * the middle of the hovering, and a clock's origin is arbitrary, so the spacing must hold.
   */
  @Test
  void anOriginHoveringAroundTheCapIsSpacedWhateverTheClocksOrigin() {
    hoverAroundTheCap(SimCluster.of(3, 12, CONFIG,
        Long.MAX_VALUE - Duration.ofSeconds(10).toNanos()));
  }

  private static void hoverAroundTheCap(SimCluster c) {
    converge(c);
    GossipEngine owner = c.nodes.get(0);
    ArrayDeque<long[]> held = new ArrayDeque<>();
    int next = 0;
    for (int b = 0; b < 21; b++) { // 210 blocks in batches of 10: past the cap
      long[] batch = blocks(next, 10);
      next += 10;
      owner.localSummary().onStored(batch);
      held.add(batch);
      c.runFor(c.interval() / 3);
    }
    c.runFor(30 * c.interval());
    assertTrue(truncatedAtEveryPeer(c, "node-0"));
    long[] refreshes = new long[3];
    long[] installed = new long[3];
    for (int i = 1; i < 3; i++) {
      refreshes[i] = c.nodes.get(i).counter(GossipCounter.REPLICA_REFRESHES);
      installed[i] = c.nodes.get(i).counter(GossipCounter.SNAPSHOTS_INSTALLED);
    }
    // every 4 rounds: down to 170 blocks (would fit: below 7/8 of the cap) for two rounds, then
    // back to 210 (past the cap) for two
    int rounds = 200;
    for (int r = 0; r < rounds; r++) {
      for (int k = 0; k < 4; k++) {
        if (r % 4 == 0) {
          owner.localSummary().onEvicted(held.poll());
        } else if (r % 4 == 2) {
          long[] batch = blocks(next, 10);
          next += 10;
          owner.localSummary().onStored(batch);
          held.add(batch);
        }
      }
      c.runFor(c.interval());
    }
    for (int i = 1; i < 3; i++) {
      GossipEngine e = c.nodes.get(i);
      long asked = e.counter(GossipCounter.REPLICA_REFRESHES) - refreshes[i];
      long got = e.counter(GossipCounter.SNAPSHOTS_INSTALLED) - installed[i];
      // at most one refresh per origin every 32 rounds
      assertTrue(asked >= 1 && asked <= rounds / 32 + 1, "refreshes asked " + asked);
      assertTrue(got <= rounds / 32 + 1, "snapshots installed " + got);
      e.checkInvariants();
    }
    // the origin settles below the cap: exact again
    owner.localSummary().onEvicted(held.poll());
    owner.localSummary().onEvicted(held.poll());
    owner.localSummary().onEvicted(held.poll());
    owner.localSummary().onEvicted(held.poll());
    converge(c);
  }
  /**
   * A cached snapshot older than its origin's version serves a peer asking for the whole set
   * until that peer was sent every chunk of it twice; its next ask gets the set as it is now (a
   * truncated replica asking for a fresh copy is at a version above the cached one and cannot
   * take it).
   */
  @Test
  void aPeerSentAnOlderSnapshotTwiceGetsTheCurrentOneNext() throws Exception {
    SimulatedScheduler time = new SimulatedScheduler();
    List<byte[]> sent = new ArrayList<>();
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .deltaLogMaxHashes(2).build();
    GossipEngine origin = new GossipEngine(new PeerAddress("o", "sim:o"), 1, config, List.of(),
        time, time, new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> sent.add(p));
    GossipCodec codec = new GossipCodec(65_536, GossipConfig.MAX_PEERS_LIMIT + 1);
    for (long b = 1; b <= 3; b++) {
      origin.localSummary().onStored(new long[] {b});
    }
    // a new peer asks for everything: the log no longer reaches version 0, so the snapshot of
    // version 3 is encoded and cached; then the origin changes, its log still reaching 3
    List<Long> versions = askForEverything(origin, "q", codec, sent);
    assertEquals(List.of(3L), versions);
    origin.localSummary().onStored(new long[] {4});
    List<Long> served = new ArrayList<>();
    for (int k = 0; k < 4; k++) {
      served.addAll(askForEverything(origin, "p", codec, sent));
    }
    assertEquals(List.of(3L, 3L, 4L, 4L), served, "versions of the snapshots sent to p");
  }

  /** Versions of the snapshot chunks {@code origin} sends a peer whose digest lists it at 0. */
  private static List<Long> askForEverything(GossipEngine origin, String peer, GossipCodec codec,
      List<byte[]> sent) throws Exception {
    sent.clear();
    origin.handle(new PeerAddress(peer, "sim:" + peer), new Syn(1, 1, List.of(
        new DigestEntry(peer, 1, 0, 1, 0, 0, false), new DigestEntry("o", 1, 0, 1, 0, 0, false))));
    List<Long> versions = new ArrayList<>();
    for (byte[] p : sent) {
      if (codec.decode(p) instanceof SnapshotChunk c) {
        versions.add(c.version());
      }
    }
    return versions;
  }
}
