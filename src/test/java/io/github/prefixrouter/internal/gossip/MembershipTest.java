package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipEngine.Status;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class MembershipTest {

  static GossipConfig config() {
    return GossipConfig.builder()
        .interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofMillis(500))
        .deadAfter(Duration.ofMillis(1_000))
        .forgetAfter(Duration.ofMillis(2_000))
        .highWatermark(10)
        .lowWatermark(4)
        .build();
  }

  /**
   * Runs a round of {@code e}, whose messages go to {@code sent}, and returns the round number
   * of the SYN it sent (of the last, if several), failing if it sent none.
   */
  static long synRound(GossipEngine e, List<byte[]> sent) throws Exception {
    e.runRound();
    GossipCodec codec = new GossipCodec(65_536, GossipConfig.MAX_PEERS_LIMIT + 1);
    long round = -1;
    for (byte[] p : sent) {
      if (codec.decode(p) instanceof Syn syn) {
        round = syn.round();
      }
    }
    assertTrue(round >= 0, "the round sent a SYN");
    return round;
  }

  static PeerView peer(GossipEngine e, String id) {
    return e.view().peers().stream().filter(p -> p.address().nodeId().equals(id)).findFirst()
        .orElse(null);
  }

  @Test
  void joinSuspectDeathForgetAndRestartWithNewGeneration() {
    SimCluster c = new SimCluster(7, config());
    c.delayNanos = 1_000_000;
    GossipEngine a = c.add(0, 1, List.of());
    GossipEngine b = c.add(1, 1, List.of(SimCluster.addressOf(0)));
    GossipEngine d = c.add(2, 1, List.of(SimCluster.addressOf(0)));
    a.start();
    b.start();
    d.start();
    b.localSummary().onStored(new long[] {11, 12, 13});

    // join: d only knows a as a seed but learns b from a's digest, with b's blocks
    c.runFor(2 * c.interval() * 10);
    assertEquals(Status.ALIVE, d.statusOf("node-1"));
    long[] rep = d.replicaOf("node-1");
    java.util.Arrays.sort(rep);
    assertArrayEquals(new long[] {11, 12, 13}, rep);
    assertEquals(2, d.view().peers().size());

    // suspicion, then death: b stops
    c.crash(b);
    c.runFor(600_000_000L + c.interval());
    assertEquals(Status.SUSPECT, d.statusOf("node-1"));
    assertTrue(peer(d, "node-1").suspect());
    c.runFor(600_000_000L);
    assertEquals(Status.DEAD, d.statusOf("node-1"));
    assertNull(peer(d, "node-1"), "a dead peer is not in the view");
    assertNull(d.replicaOf("node-1"));
    assertEquals(0, d.replicatedPairs());

    // stale gossip does not revive it; after forgetAfter it is gone
    c.runFor(2_100_000_000L);
    assertNull(d.statusOf("node-1"));
    assertNull(a.statusOf("node-1"));
    assertEquals(1, d.memberCount());

    // restart with a new generation at the same address: replaces the old replica
    GossipEngine b2 = c.add(1, 2, List.of(SimCluster.addressOf(0)));
    b2.start();
    b2.localSummary().onStored(new long[] {21});
    c.runFor(20 * c.interval());
    assertEquals(Status.ALIVE, d.statusOf("node-1"));
    assertArrayEquals(new long[] {21}, d.replicaOf("node-1"));
    assertEquals(2, peer(d, "node-1").generation());
    assertTrue(c.converged(), c.firstDivergence());
  }

  /**
   * A tombstone is kept for {@code forgetAfter} from the peer's death, not from its last
   * heartbeat: the peer is forgotten (its slot freed) {@code deadAfter + forgetAfter} after its
   * heartbeat stopped, as docs/gossip.md ("Forgetting", and the restart below a known
   * generation that peers ignored for {@code deadAfter + forgetAfter}) says.
   */
  @Test
  void aTombstoneIsKeptForgetAfterFromTheDeathNotFromTheLastHeartbeat() {
    SimCluster c = new SimCluster(7, config());
    c.delayNanos = 1_000_000;
    GossipEngine a = c.add(0, 1, List.of());
    GossipEngine b = c.add(1, 1, List.of(SimCluster.addressOf(0)));
    a.start();
    b.start();
    c.runFor(10 * c.interval());
    assertEquals(Status.ALIVE, a.statusOf("node-1"));
    c.crash(b);
    long crashed = c.time.nanoTime();
    for (int step = 0; step < 200 && a.statusOf("node-1") != Status.DEAD; step++) {
      c.runFor(c.interval() / 10);
    }
    assertEquals(Status.DEAD, a.statusOf("node-1"));
    long died = c.time.nanoTime();
    assertTrue(died - crashed >= config().deadAfter().toNanos(), "died after deadAfter");
    c.runFor(config().forgetAfter().toNanos() - 2 * c.interval());
    assertEquals(Status.DEAD, a.statusOf("node-1"),
        "the tombstone is kept forgetAfter from the death ("
            + (c.time.nanoTime() - died) / 1_000_000 + " ms ago)");
    c.runFor(4 * c.interval());
    assertNull(a.statusOf("node-1"), "forgotten forgetAfter after its death");
    assertEquals(0, a.memberCount());
  }

  /**
   * A round adds a dead peer now and then ("so partitions heal"): two nodes cut from each other
   * long enough to declare each other dead, whose only seed is down for good, find each other
   * again through their tombstones once the cut heals.
   */
  @Test
  void aPartitionHealsThroughDeadPeersWhenNoSeedIsReachable() {
    SimCluster c = SimCluster.of(3, 23, config());
    c.delayNanos = 1_000_000;
    assertTrue(c.runUntilConverged(50) >= 0, c.firstDivergence());
    GossipEngine b = c.nodes.get(1);
    GossipEngine d = c.nodes.get(2);
    c.crash(c.nodes.get(0)); // the seed of both, gone
    c.cut.add(b.self().address() + "|" + d.self().address());
    c.cut.add(d.self().address() + "|" + b.self().address());
    c.runFor(1_300_000_000L); // past deadAfter
    assertEquals(Status.DEAD, b.statusOf("node-2"));
    assertEquals(Status.DEAD, d.statusOf("node-1"));
    c.heal();
    c.runFor(10 * c.interval()); // within forgetAfter of their deaths
    assertEquals(Status.ALIVE, b.statusOf("node-2"));
    assertEquals(Status.ALIVE, d.statusOf("node-1"));
  }

  @Test
  void restartBeforeDeathReplacesTheReplica() {
    SimCluster c = SimCluster.of(3, 11, config());
    c.delayNanos = 1_000_000;
    c.nodes.get(1).localSummary().onStored(new long[] {1, 2, 3});
    assertTrue(c.runUntilConverged(50) >= 0);
    GossipEngine b2 = c.add(1, 5, List.of(SimCluster.addressOf(0)));
    b2.start();
    b2.localSummary().onStored(new long[] {4});
    assertTrue(c.runUntilConverged(50) >= 0, c.firstDivergence());
    assertArrayEquals(new long[] {4}, c.nodes.get(0).replicaOf("node-1"));
    assertTrue(c.nodes.get(0).counter(GossipCounter.GENERATIONS_REPLACED) >= 1);
  }

  /**
   * A restart first heard of in a chunk of the new run's snapshot (its update lost, or overtaken
   * by the chunk on the way), or in one chunk of a snapshot too large to assemble: a chunk
   * carries no heartbeat, and the new run's heartbeats count again from 1. The replica took the
   * new generation with the old run's heartbeat, which none of the new run's passed for as many
   * rounds as the old run had lived, so the node, gossiping with this one every round, was
   * suspected and declared dead.
   */
  @Test
  void aRestartFirstHeardOfInASnapshotChunkTakesTheNewRunsHeartbeats() {
    for (int chunks : new int[] {1, 1 << 20}) { // assembled; too large, so started truncated
      SimulatedScheduler time = new SimulatedScheduler();
      GossipEngine node = new GossipEngine(new PeerAddress("node", "sim:node"), 1, config(),
          List.of(), time, time, new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> { });
      PeerAddress x = new PeerAddress("x", "sim:x");
      // x's first run, up for a while: heartbeat 5,000
      node.handle(x, new Ack2(1, List.of(new Update(
          new DigestEntry("x", 1, 0, 5_000, 0, 0, false), "sim:x", 0, List.of()))));
      node.handle(x, new GossipMessage.SnapshotChunk("x", 2, 1, 1, 0, chunks, new long[] {1},
          new long[] {7}));
      assertArrayEquals(new long[] {2, 1}, node.replicaVersion("x"));
      for (int r = 1; r <= 30; r++) { // 3 s, past deadAfter: the new run's digests
        time.advanceBy(Duration.ofMillis(100).toNanos());
        node.handle(x, new Syn(r, 2, List.of(new DigestEntry("x", 2, 1, r, 0, 0, false))));
        node.runRound();
      }
      assertEquals(Status.ALIVE, node.statusOf("x"),
          "after 3 s of digests of the run heard of in a snapshot of " + chunks + " chunks");
      node.checkInvariants();
    }
  }

  @Test
  void loadIsAdvertisedWithHysteresis() {
    SimCluster c = SimCluster.of(2, 3, config());
    c.delayNanos = 1_000_000;
    GossipEngine a = c.nodes.get(0);
    GossipEngine b = c.nodes.get(1);
    String bAddr = b.self().address();
    c.runFor(10 * c.interval());
    // running requests are capacity in use, not overload: only the queue counts
    c.loads.put(bAddr, new EngineLoad(9, 200)); // queue 9 < high 10
    c.runFor(5 * c.interval());
    assertFalse(peer(a, "node-1").overloaded());
    assertEquals(9, peer(a, "node-1").queueDepth());
    assertEquals(200, peer(a, "node-1").inFlight());
    c.loads.put(bAddr, new EngineLoad(10, 2)); // 10: set
    c.runFor(5 * c.interval());
    assertTrue(b.localOverloaded());
    assertTrue(peer(a, "node-1").overloaded());
    c.loads.put(bAddr, new EngineLoad(5, 0)); // 5 > low 4: stays set
    c.runFor(5 * c.interval());
    assertTrue(peer(a, "node-1").overloaded());
    c.loads.put(bAddr, new EngineLoad(4, 2)); // 4: cleared
    c.runFor(5 * c.interval());
    assertFalse(peer(a, "node-1").overloaded());
    assertEquals(2, peer(a, "node-1").inFlight());
    c.loads.put(bAddr, new EngineLoad(0, 7)); // requests running, none queued
    c.runFor(5 * c.interval());
    assertEquals(0, peer(a, "node-1").queueDepth());
    assertEquals(7, peer(a, "node-1").inFlight());
    c.loads.put(bAddr, new EngineLoad(3, 0));
    c.runFor(5 * c.interval());
    assertEquals(3, peer(a, "node-1").queueDepth());
    assertEquals(0, peer(a, "node-1").inFlight());
  }

  /**
   * A digest lists every live origin it knows with its load as last heard (queue depth, in
   * flight, overload flag), so a peer that hears of an overloaded origin from third parties
   * sees it overloaded too, not only one that exchanges with the origin itself.
   */
  @Test
  void aDigestRelaysEachOriginsLoadAndOverloadFlag() throws Exception {
    SimulatedScheduler time = new SimulatedScheduler();
    List<byte[]> sent = new ArrayList<>();
    GossipEngine b = new GossipEngine(new PeerAddress("b", "sim:b"), 1, config(), List.of(),
        time, time, new SplittableRandom(5), () -> EngineLoad.IDLE, (to, p) -> sent.add(p));
    b.handle(new PeerAddress("a", "sim:a"), new Ack2(1, List.of(new Update(
        new DigestEntry("a", 1, 0, 7, 12, 3, true), "sim:a", 0, List.of()))));
    b.runRound();
    GossipCodec codec = new GossipCodec(65_536, GossipConfig.MAX_PEERS_LIMIT + 1);
    Syn syn = (Syn) codec.decode(sent.get(0));
    DigestEntry a = syn.digest().stream().filter(e -> e.nodeId().equals("a")).findFirst()
        .orElseThrow();
    assertEquals(new DigestEntry("a", 1, 0, 7, 12, 3, true), a);
  }

  /**
   * A stalled engine (push-back) is advertised as overload whatever the queue, and the node's
   * own view says so too: it gave the queue's flag alone, so a host reading the view saw a node
   * advertising overload as not overloaded.
   */
  @Test
  void pushBackIsAdvertisedAndShownInTheNodesOwnView() {
    SimCluster c = SimCluster.of(2, 3, config());
    c.delayNanos = 1_000_000;
    GossipEngine a = c.nodes.get(0);
    GossipEngine b = c.nodes.get(1);
    boolean[] stalled = {false};
    b.pushBackWhen(() -> stalled[0]);
    c.runFor(10 * c.interval());
    assertFalse(b.view().localOverloaded());
    stalled[0] = true;
    c.runFor(5 * c.interval());
    assertTrue(b.localOverloaded());
    assertTrue(peer(a, "node-1").overloaded());
    assertTrue(b.view().localOverloaded());
    stalled[0] = false;
    c.runFor(5 * c.interval());
    assertFalse(b.localOverloaded());
    assertFalse(peer(a, "node-1").overloaded());
    assertFalse(b.view().localOverloaded());
  }

  @Test
  void roundTripIsMeasuredAndSmoothed() {
    SimCluster c = SimCluster.of(2, 5, config());
    c.delayNanos = 10_000_000; // 20 ms round trip
    c.runFor(20 * c.interval());
    PeerView p = peer(c.nodes.get(0), "node-1");
    assertNotNull(p);
    assertEquals(20_000_000, p.rttNanos());
    c.delayNanos = 30_000_000; // 60 ms: the estimate moves towards it, smoothly
    c.runFor(2 * c.interval());
    long after1 = peer(c.nodes.get(0), "node-1").rttNanos();
    assertTrue(after1 > 20_000_000 && after1 < 60_000_000, "rtt " + after1);
    c.runFor(60 * c.interval());
    long later = peer(c.nodes.get(0), "node-1").rttNanos();
    assertTrue(Math.abs(later - 60_000_000) < 2_000_000, "rtt " + later);
  }

  /**
   * One ACK is one round-trip sample, counted once. An ACK carrying its sender's own restart
   * (a new generation at the address the SYN went to) was counted twice: once as it arrived,
   * and again after the restart reset the peer's round trip to unknown. A duplicate of an ACK
   * already sampled adds nothing.
   */
  @Test
  void anAckIsOneRoundTripSampleEvenWhenItCarriesItsSendersRestart() throws Exception {
    SimulatedScheduler time = new SimulatedScheduler();
    List<byte[]> sent = new ArrayList<>();
    PeerAddress b = new PeerAddress("b", "sim:b");
    GossipEngine e = knowingB(time, sent);
    long round = synRound(e, sent);
    time.advanceBy(20_000_000);
    Ack ack = new Ack(round, 6, List.of(new Update(new DigestEntry("b", 6, 0, 1, 0, 0, false),
        "sim:b", 0, List.of())), List.of());
    e.handle(b, ack);
    assertEquals(6, peer(e, "b").generation());
    assertEquals(20_000_000, peer(e, "b").rttNanos());
    assertEquals(1, e.counter(GossipCounter.RTT_SAMPLES));
    time.advanceBy(20_000_000);
    e.handle(b, ack);
    assertEquals(1, e.counter(GossipCounter.RTT_SAMPLES));
    assertEquals(20_000_000, peer(e, "b").rttNanos());
  }

  /**
   * A restart makes the peer's round trip unknown again (the new run may listen elsewhere): the
   * view shows none until the next sample, which is taken as it is rather than smoothed with the
   * old run's.
   */
  @Test
  void aRestartMakesThePeersRoundTripUnknownUntilItsNextSample() throws Exception {
    SimulatedScheduler time = new SimulatedScheduler();
    List<byte[]> sent = new ArrayList<>();
    PeerAddress b = new PeerAddress("b", "sim:b");
    GossipEngine e = knowingB(time, sent);
    long[] delays = {20_000_000, 60_000_000};
    for (int run = 0; run < 2; run++) {
      sent.clear();
      long round = synRound(e, sent);
      time.advanceBy(delays[run]);
      e.handle(b, new Ack(round, 5 + run, List.of(), List.of()));
      assertEquals(delays[run], peer(e, "b").rttNanos(), "run " + (5 + run));
      if (run == 0) { // b restarts; its new run says so
        time.advanceBy(config().interval().toNanos());
        e.handle(b, new Ack2(6, List.of(new Update(new DigestEntry("b", 6, 0, 1, 0, 0, false),
            "sim:b", 0, List.of()))));
        assertEquals(6, peer(e, "b").generation());
        assertEquals(-1, peer(e, "b").rttNanos(), "round trip of the new run");
      }
    }
  }

  /**
   * An engine "me" that knows peer b (at sim:b) in its generation 5, with no round trip yet; what
   * it sends goes to {@code sent}.
   */
  private static GossipEngine knowingB(SimulatedScheduler time, List<byte[]> sent) {
    GossipEngine e = new GossipEngine(new PeerAddress("me", "sim:me"), 1, config(), List.of(),
        time, time, new SplittableRandom(5), () -> EngineLoad.IDLE, (to, p) -> sent.add(p));
    e.handle(new PeerAddress("b", "sim:b"), new Ack2(5, List.of(new Update(
        new DigestEntry("b", 5, 0, 1, 0, 0, false), "sim:b", 0, List.of()))));
    return e;
  }

  /**
   * Heartbeats travel in the digests; an ACK corrects a heartbeat-only difference only when the
   * initiator lags by more than half the suspicion time (here 500 ms of 100 ms rounds: more than
   * 2 heartbeats), with the origin's header, so that an initiator that hears of the origin
   * mostly from this node does not come to suspect it.
   */
  @Test
  void anAckCorrectsAHeartbeatOnlyLagOfMoreThanHalfTheSuspicionTime() throws Exception {
    SimulatedScheduler time = new SimulatedScheduler();
    List<byte[]> sent = new ArrayList<>();
    GossipEngine e = new GossipEngine(new PeerAddress("me", "sim:me"), 1, config(), List.of(),
        time, time, new SplittableRandom(5), () -> EngineLoad.IDLE, (to, p) -> sent.add(p));
    PeerAddress o = new PeerAddress("o", "sim:o");
    PeerAddress i = new PeerAddress("i", "sim:i");
    e.handle(o, new Ack2(1, List.of(new Update(new DigestEntry("o", 1, 0, 100, 0, 0, false),
        "sim:o", 0, List.of()))));
    e.handle(i, new Ack2(1, List.of(new Update(new DigestEntry("i", 1, 0, 1, 0, 0, false),
        "sim:i", 0, List.of()))));
    GossipCodec codec = new GossipCodec(65_536, GossipConfig.MAX_PEERS_LIMIT + 1);
    long round = 0;
    for (long lag : new long[] {0, 1, 2, 3, 50}) {
      sent.clear();
      e.handle(i, new Syn(++round, 1, List.of(
          new DigestEntry("me", 1, 0, 0, 0, 0, false),
          new DigestEntry("i", 1, 0, 1 + round, 0, 0, false),
          new DigestEntry("o", 1, 0, 100 - lag, 0, 0, false))));
      Ack ack = null;
      for (byte[] p : sent) {
        if (codec.decode(p) instanceof Ack a) {
          ack = a;
        }
      }
      assertNotNull(ack, "answered");
      List<Update> aboutO = ack.updates().stream().filter(u -> u.header().nodeId().equals("o"))
          .toList();
      if (lag <= 2) {
        assertEquals(List.of(), aboutO, "a lag of " + lag + " heartbeats");
      } else {
        assertEquals(1, aboutO.size(), "a lag of " + lag + " heartbeats");
        assertEquals(100, aboutO.get(0).header().heartbeat());
        assertEquals(List.of(), aboutO.get(0).deltas());
      }
    }
  }

  /** Suspicions in a healthy two-node cluster of 200 ms rounds over 500 rounds. */
  static long suspicionsOfAHealthyPeer(Duration suspectAfter, double jitter) {
    SimCluster c = SimCluster.of(2, 11, GossipConfig.builder().interval(Duration.ofMillis(200))
        .jitter(jitter).suspectAfter(suspectAfter).deadAfter(Duration.ofSeconds(10))
        .forgetAfter(Duration.ofSeconds(40)).build());
    c.delayNanos = 1_000_000;
    c.runFor(500 * c.interval());
    assertEquals(Status.ALIVE, c.nodes.get(0).statusOf("node-1"));
    assertEquals(Status.ALIVE, c.nodes.get(1).statusOf("node-0"));
    return c.nodes.get(0).counter(GossipCounter.MEMBERS_SUSPECTED)
        + c.nodes.get(1).counter(GossipCounter.MEMBERS_SUSPECTED);
  }

  /**
   * A peer's rounds come up to (1 + jitter) intervals apart, so a suspicion time just above one
   * interval (what a node's configuration used to accept) suspects a healthy peer again and
   * again: its heartbeat, sent each round, is late whenever a round of its falls late. Twice the
   * interval, the least a node's configuration now accepts, exceeds the longest gap between two
   * rounds at any jitter the engine takes (at most 0.5), and a healthy peer is never suspected.
   */
  @Test
  void aSuspicionTimeJustAboveTheIntervalSuspectsAHealthyPeerAndTwiceItDoesNot() {
    long flaps = suspicionsOfAHealthyPeer(Duration.ofMillis(201), 0.1);
    assertTrue(flaps >= 10, flaps + " suspicions of a healthy peer in 500 rounds");
    assertEquals(0, suspicionsOfAHealthyPeer(Duration.ofMillis(400), 0.1));
    assertEquals(0, suspicionsOfAHealthyPeer(Duration.ofMillis(400), 0.5));
  }

  @Test
  void summaryAgeReflectsStaleness() {
    SimCluster c = SimCluster.of(2, 9, config());
    c.delayNanos = 1_000_000;
    c.runFor(10 * c.interval());
    GossipEngine a = c.nodes.get(0);
    assertTrue(peer(a, "node-1").summaryAgeNanos(c.time.nanoTime()) <= 2 * c.interval());
    c.cut.add(c.nodes.get(1).self().address() + "|" + a.self().address());
    c.cut.add(a.self().address() + "|" + c.nodes.get(1).self().address());
    c.runFor(4 * c.interval());
    assertTrue(peer(a, "node-1").summaryAgeNanos(c.time.nanoTime()) >= 3 * c.interval());
  }

  /** 1,000 peers join (each with blocks) and leave; membership and replica memory return. */
  @Test
  void thousandJoinLeaveCyclesReturnMemoryToItsStart() {
    SimCluster c = SimCluster.of(3, 13, config());
    c.delayNanos = 1_000_000;
    for (int i = 0; i < 3; i++) {
      long[] blocks = new long[200];
      for (int k = 0; k < blocks.length; k++) {
        blocks[k] = (i + 1) * 100_000L + k;
      }
      c.nodes.get(i).localSummary().onStored(blocks);
    }
    assertTrue(c.runUntilConverged(100) >= 0);
    c.runFor(50 * c.interval());
    GossipEngine watcher = c.nodes.get(0);
    long startBytes = watcher.retainedBytesEstimate();
    int startMembers = watcher.memberCount();
    long startPairs = watcher.replicatedPairs();
    for (int k = 0; k < 1_000; k++) {
      int id = 1_000 + k;
      GossipEngine j = c.add(id, 1, List.of(SimCluster.addressOf(k % 3)));
      j.start();
      j.localSummary().onStored(new long[] {id * 7L, id * 7L + 1, id * 7L + 2});
      c.runFor(3 * c.interval());
      c.crash(j);
      c.byAddress.remove(j.self().address());
      c.nodes.remove(j);
      if (k % 100 == 0) {
        watcher.checkInvariants();
      }
    }
    assertTrue(watcher.counter(GossipCounter.MEMBERS_JOINED) >= 900,
        "joined " + watcher.counter(GossipCounter.MEMBERS_JOINED));
    c.runFor(40 * c.interval()); // deadAfter + forgetAfter
    for (GossipEngine e : c.nodes) {
      e.checkInvariants();
      assertEquals(startMembers, e.memberCount());
    }
    assertEquals(startPairs, watcher.replicatedPairs());
    long endBytes = watcher.retainedBytesEstimate();
    assertTrue(Math.abs(endBytes - startBytes) <= startBytes / 10,
        "memory " + startBytes + " -> " + endBytes);
    assertTrue(c.converged(), c.firstDivergence());
  }

  @Test
  void membersBeyondMaxPeersAreRefusedAndCounted() {
    GossipConfig small = GossipConfig.builder().interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofMillis(500)).deadAfter(Duration.ofMillis(1_000))
        .forgetAfter(Duration.ofMillis(2_000)).maxPeers(2).build();
    SimCluster c = SimCluster.of(5, 17, small);
    c.delayNanos = 1_000_000;
    c.runFor(30 * c.interval());
    for (GossipEngine e : c.nodes) {
      assertTrue(e.memberCount() <= 2);
      e.checkInvariants();
    }
    assertTrue(c.nodes.get(0).counter(GossipCounter.MEMBERS_REFUSED) > 0);
  }

  static PeerAddress addr(int i) {
    return SimCluster.addressOf(i);
  }
}
