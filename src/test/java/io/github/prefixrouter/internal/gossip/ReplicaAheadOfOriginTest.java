package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
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

/**
 * A replica can be pushed past its origin's version by a third party (a buggy relayer, a
 * corrupted update): deltas continuing the replica's version with blocks the origin never
 * stored. Such a replica ignores every real delta of the origin (all "old") until the origin's
 * version passes the invented one, which for an origin that changes little is never, and passes
 * the invented deltas on to every other node. Only the origin can tell: its own entry, in the
 * digests it receives, shows a version above its own. It moves its version past the claim, and
 * every replica below gets a snapshot of its real set.
 */
class ReplicaAheadOfOriginTest {

  static GossipConfig.Builder config() {
    return GossipConfig.builder().interval(Duration.ofMillis(100));
  }

  // the cluster of the tests that start settled, set by settle()
  private SimCluster c;
  private GossipEngine liar;
  private GossipEngine origin;
  private GossipEngine victim;
  private String id;

  /**
   * A cluster of {@code nodes} (2 ms a hop) in which node 1, the origin, stored three blocks
   * and every replica has them: node 0 then plays a third party misleading node 2, the victim.
   */
  private void settle(int nodes, GossipConfig config) {
    c = SimCluster.of(nodes, 11, config);
    c.delayNanos = 2_000_000;
    liar = c.nodes.get(0);
    origin = c.nodes.get(1);
    victim = c.nodes.get(2);
    id = origin.self().nodeId();
    origin.localSummary().onStored(new long[] {11, 12, 13});
    c.runFor(Duration.ofSeconds(1).toNanos());
    assertTrue(c.converged(), c.firstDivergence());
  }

  /**
   * The liar's update continuing the victim's replica, at version {@code at}, with {@code n}
   * deltas the origin never made, each storing a block of its own.
   */
  private Ack2 inventedDeltas(long[] at, int n) {
    List<Delta> invented = new ArrayList<>();
    for (int i = 1; i <= n; i++) {
      invented.add(new Delta(at[1] + i, Delta.STORE, new long[] {900 + i}));
    }
    return new Ack2(1, List.of(new Update(
        new DigestEntry(id, at[0], at[1] + n, 1, 0, 0, false), null, at[1], invented)));
  }

  /** Runs 2 s; then every replica is the origin's, or the failure says what the origin counted. */
  private void assertConvergedAfter2s() {
    c.runFor(Duration.ofSeconds(2).toNanos());
    assertTrue(c.converged(), () -> "after 2 s: " + c.firstDivergence()
        + "; origin VERSIONS_REFUTED=" + origin.counter(GossipCounter.VERSIONS_REFUTED)
        + " REJECTED=" + origin.counter(GossipCounter.REJECTED));
  }

  @Test
  void deltasAnOriginNeverMadeAreUndoneEverywhere() {
    settle(4, config().build());
    long[] at = victim.replicaVersion(id);
    // the liar continues the victim's replica with five deltas the origin never made
    victim.handle(liar.self(), inventedDeltas(at, 5));
    assertEquals(at[1] + 5, victim.replicaVersion(id)[1]);
    assertEquals(8, victim.replicaOf(id).length);
    // the origin is idle; the invented deltas spread, and the origin refutes them
    c.runFor(Duration.ofSeconds(2).toNanos());
    assertTrue(c.converged(), c.firstDivergence()); // every replica: the real set and version
    assertEquals(1, origin.counter(GossipCounter.VERSIONS_REFUTED));
    assertTrue(origin.localSummary().version() > at[1] + 5);
    // and the origin's later changes apply again
    origin.localSummary().onStored(new long[] {14});
    c.runFor(Duration.ofSeconds(1).toNanos());
    assertTrue(c.converged(), c.firstDivergence());
    assertEquals(4, victim.replicaOf(id).length);
    for (GossipEngine e : c.nodes) {
      e.checkInvariants();
    }
  }

  /**
   * Deltas taking a replica exactly {@code maxSequenceJump} past its origin: a third party's
   * claim is absurd only more than the jump above the replica, so peers take it, and the
   * origin refutes it as it does any claim they take. The origin refused claims of the jump or
   * more, and such a replica stayed ahead of an idle origin (its real changes all "old") for
   * the rest of the generation.
   */
  @Test
  void deltasExactlyTheJumpAheadAreUndone() {
    settle(4, config().maxSequenceJump(8).build());
    long[] at = victim.replicaVersion(id);
    victim.handle(liar.self(), inventedDeltas(at, 8));
    assertEquals(at[1] + 8, victim.replicaVersion(id)[1], "the victim took the claim");
    assertConvergedAfter2s(); // the origin is idle
    assertEquals(1, origin.counter(GossipCounter.VERSIONS_REFUTED));
    assertEquals(3, victim.replicaOf(id).length);
  }

  /** The same at the default jump, 2^32: one forged snapshot chunk exactly that far ahead. */
  @Test
  void aSnapshotExactlyTheDefaultJumpAheadIsUndone() {
    settle(3, config().build());
    long[] at = victim.replicaVersion(id);
    long claim = at[1] + (1L << 32);
    victim.handle(liar.self(), new SnapshotChunk(id, at[0], claim, 1, 0, 1,
        new long[] {1}, new long[] {777}));
    assertEquals(claim, victim.replicaVersion(id)[1], "the victim took the claim");
    assertConvergedAfter2s(); // the origin is idle
    assertEquals(3, victim.replicaOf(id).length);
  }

  /**
   * Two forged snapshots, each within the jump of the replica as it then was (7, then 14 ahead
   * with a jump of 8), take the replica more than the jump past its origin: beyond what the
   * origin refutes. Such a replica ignored every real delta and snapshot of the origin (all
   * "older") for the rest of the generation, and kept sending the origin snapshots of the
   * forged set. The origin's own word, showing a version beyond its reach below the replica's,
   * now restarts the replica, which then takes the origin's real set.
   */
  @Test
  void claimsChainedPastTheOriginsReachAreUndoneByItsOwnWord() {
    settle(3, config().maxSequenceJump(8).build());
    long[] at = victim.replicaVersion(id);
    victim.handle(liar.self(), new SnapshotChunk(id, at[0], at[1] + 7, 1, 0, 1,
        new long[] {1}, new long[] {777}));
    victim.handle(liar.self(), new SnapshotChunk(id, at[0], at[1] + 14, 1, 0, 1,
        new long[] {1}, new long[] {778}));
    assertEquals(at[1] + 14, victim.replicaVersion(id)[1], "the victim took both claims");
    origin.localSummary().onStored(new long[] {14, 15});
    assertConvergedAfter2s();
    assertEquals(5, victim.replicaOf(id).length);
    assertEquals(1, victim.counter(GossipCounter.REPLICAS_BEYOND_REACH_RESTARTED));
    assertEquals(0, origin.counter(GossipCounter.VERSIONS_REFUTED), "nothing to refute");
    for (GossipEngine e : c.nodes) {
      e.checkInvariants();
    }
  }

  /**
   * The origin's own word restarts a replica only when the replica is beyond the origin's
   * reach: more than {@code maxSequenceJump} above the version the origin shows. An older
   * message of the origin arriving after newer state relayed by a peer (reordered or delayed in
   * flight) is legitimate and costs nothing; so is a replica within the jump, which the origin
   * refutes itself.
   */
  @Test
  void theOriginsWordRestartsOnlyAReplicaBeyondItsReach() {
    settle(3, config().maxSequenceJump(8).build());
    // a SYN of the origin to the victim, held back in flight while the origin changes three
    // times and the victim learns the changes
    List<Syn> held = new ArrayList<>();
    GossipCodec wire = new GossipCodec(1 << 20, 1_000);
    // what the origin sent that does not decode: the hook runs inside the engine's send, which
    // takes what it throws for a failed send, so it is checked after the run instead
    List<Exception> undecoded = new ArrayList<>();
    c.taken = (from, p) -> {
      try {
        if (from.nodeId().equals(id) && wire.decode(p) instanceof Syn s
            && s.digest().stream().anyMatch(e -> e.nodeId().equals(id))) {
          held.add(s);
        }
      } catch (Exception e) {
        undecoded.add(e);
        throw new AssertionError(e);
      }
    };
    c.runFor(Duration.ofMillis(300).toNanos());
    c.taken = null;
    assertEquals(List.of(), undecoded, "messages of the origin that do not decode");
    Syn old = held.get(held.size() - 1);
    long oldVersion = old.digest().stream().filter(e -> e.nodeId().equals(id)).findFirst()
        .orElseThrow().version();
    for (int i = 0; i < 3; i++) {
      origin.localSummary().onStored(new long[] {20 + i});
    }
    c.runFor(Duration.ofSeconds(1).toNanos());
    assertTrue(c.converged(), c.firstDivergence());
    long v = victim.replicaVersion(id)[1];
    assertEquals(oldVersion + 3, v);
    c.down.add(victim.self().address()); // what follows is handed to the victim alone
    victim.handle(origin.self(), old);
    assertEquals(v, victim.replicaVersion(id)[1], "an older word of the origin, within the jump");
    assertEquals(6, victim.replicaOf(id).length);
    // a forged snapshot exactly the jump above the version the origin shows: within its reach,
    // left to the origin to refute
    long gen = victim.replicaVersion(id)[0];
    victim.handle(liar.self(), new SnapshotChunk(id, gen, oldVersion + 8, 1, 0, 1,
        new long[] {1}, new long[] {777}));
    assertEquals(oldVersion + 8, victim.replicaVersion(id)[1]);
    victim.handle(origin.self(), old);
    assertEquals(oldVersion + 8, victim.replicaVersion(id)[1], "within the origin's reach");
    // one more step: beyond it
    victim.handle(liar.self(), new SnapshotChunk(id, gen, oldVersion + 9, 1, 0, 1,
        new long[] {1}, new long[] {778}));
    assertEquals(oldVersion + 9, victim.replicaVersion(id)[1]);
    victim.handle(origin.self(), old);
    assertEquals(0, victim.replicaVersion(id)[1], "restarted");
    assertEquals(1, victim.counter(GossipCounter.REPLICAS_BEYOND_REACH_RESTARTED));
    assertEquals(0, victim.replicaOf(id).length);
    c.down.clear();
    c.runFor(Duration.ofSeconds(1).toNanos());
    assertTrue(c.converged(), c.firstDivergence());
    assertEquals(6, victim.replicaOf(id).length);
  }

  /**
   * The origin's word restarts a replica beyond its reach together with an assembly beyond it:
   * a forged snapshot still arriving, left in place, kept out the origin's own snapshot (of an
   * older version, and the assembly not stale), so the restarted replica stayed empty instead
   * of taking the real set in the exchange that brought the word.
   */
  @Test
  void theOriginsWordDropsAnAssemblyBeyondItsReachAndItsOwnSnapshotInstalls() {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipEngine node = new GossipEngine(new PeerAddress("me", "sim:me"), 1,
        config().maxSequenceJump(8).build(), List.of(), time, time, new SplittableRandom(1),
        () -> EngineLoad.IDLE, (to, p) -> { });
    PeerAddress origin = new PeerAddress("origin", "sim:origin");
    PeerAddress liar = new PeerAddress("liar", "sim:liar");
    node.handle(origin, new Ack2(1, List.of(history("origin", 1, 4, null))));
    assertArrayEquals(new long[] {1, 4}, node.replicaVersion("origin"));
    // claims in steps within the jump: a replica at 12, then 20, then a snapshot at 28 half
    // arrived
    node.handle(liar, new SnapshotChunk("origin", 1, 12, 1, 0, 1, new long[] {1},
        new long[] {777}));
    node.handle(liar, new SnapshotChunk("origin", 1, 20, 1, 0, 1, new long[] {1},
        new long[] {778}));
    node.handle(liar, new SnapshotChunk("origin", 1, 28, 2, 0, 2, new long[] {1},
        new long[] {779}));
    assertArrayEquals(new long[] {1, 20}, node.replicaVersion("origin"));
    // the origin's own snapshot of its real set, version 4
    node.handle(origin, new SnapshotChunk("origin", 1, 4, 4, 0, 1, new long[] {1, 2, 3, 4},
        new long[] {501, 502, 503, 504}));
    assertArrayEquals(new long[] {1, 4}, node.replicaVersion("origin"));
    long[] replica = node.replicaOf("origin");
    java.util.Arrays.sort(replica);
    assertArrayEquals(new long[] {501, 502, 503, 504}, replica);
    assertEquals(1, node.counter(GossipCounter.REPLICAS_BEYOND_REACH_RESTARTED));
    node.checkInvariants();
  }

  @Test
  void claimsTooFarAheadAreRejectedAndRefutationsAreSpaced() {
    SimCluster c = SimCluster.of(2, 3, config().maxSequenceJump(1_000).build());
    GossipEngine me = c.nodes.get(0);
    GossipEngine other = c.nodes.get(1);
    String id = me.self().nodeId();
    long rejected = me.counter(GossipCounter.REJECTED);
    // a claim peers would refuse from a third party (more than the jump above) is not followed
    me.handle(other.self(), new Syn(1, 1, List.of(new DigestEntry(id, 1, 1_001, 0, 0, 0, false))));
    assertEquals(rejected + 1, me.counter(GossipCounter.REJECTED));
    assertEquals(0, me.localSummary().version());
    // one exactly the jump above, which peers take from a third party, is
    me.handle(other.self(), new Syn(2, 1, List.of(new DigestEntry(id, 1, 1_000, 0, 0, 0, false))));
    assertEquals(1_001, me.localSummary().version());
    // another claim right after waits for the spacing: each costs every peer a snapshot
    me.handle(other.self(), new Syn(3, 1, List.of(new DigestEntry(id, 1, 1_500, 0, 0, 0, false))));
    assertEquals(1_001, me.localSummary().version());
    c.runFor(Duration.ofMillis(100L * 33).toNanos());
    me.handle(other.self(), new Syn(4, 1, List.of(new DigestEntry(id, 1, 1_500, 0, 0, 0, false))));
    assertEquals(1_501, me.localSummary().version());
    assertEquals(2, me.counter(GossipCounter.VERSIONS_REFUTED));
  }

  /**
   * The spacing holds whatever the clock's origin: readings mean something only as differences,
   * so a clock a second short of {@code Long.MAX_VALUE}, whose readings wrap during the spacing,
   * is as good as any.
   */
  @Test
  void refutationsAreSpacedWhateverTheClocksOrigin() {
    SimCluster c = SimCluster.of(2, 3, config().maxSequenceJump(1_000).build(),
        Long.MAX_VALUE - Duration.ofSeconds(1).toNanos());
    GossipEngine me = c.nodes.get(0);
    GossipEngine other = c.nodes.get(1);
    String id = me.self().nodeId();
    me.handle(other.self(), new Syn(1, 1, List.of(new DigestEntry(id, 1, 999, 0, 0, 0, false))));
    assertEquals(1_000, me.localSummary().version());
    me.handle(other.self(), new Syn(2, 1, List.of(new DigestEntry(id, 1, 1_500, 0, 0, 0, false))));
    assertEquals(1_000, me.localSummary().version());
    c.runFor(Duration.ofMillis(100L * 16).toNanos()); // past the wrap, half the spacing
    me.handle(other.self(), new Syn(3, 1, List.of(new DigestEntry(id, 1, 1_500, 0, 0, 0, false))));
    assertEquals(1_000, me.localSummary().version());
    c.runFor(Duration.ofMillis(100L * 17).toNanos());
    me.handle(other.self(), new Syn(4, 1, List.of(new DigestEntry(id, 1, 1_500, 0, 0, 0, false))));
    assertEquals(1_501, me.localSummary().version());
    assertEquals(2, me.counter(GossipCounter.VERSIONS_REFUTED));
  }

  /**
   * A replica at version 0 (an origin just learned, or a new generation) measures a third
   * party's claim against version 0: of an origin already more than {@code maxSequenceJump}
   * changes along (2^32 by default), it takes no digest entry, update or snapshot from a third
   * party, and gets its first copy in an exchange with the origin itself. Deliberate: with no
   * version of its own to measure against, following a third party there would let one forged
   * claim beyond the origin's reach (the origin refutes only claims within the jump of its own
   * version) hold the replica for the whole generation.
   */
  @Test
  void aReplicaAtVersionZeroTakesAnOriginFarAlongOnlyFromTheOrigin() {
    // no relay log: a node that joins late needs snapshots, which the relay serves
    SimCluster c = new SimCluster(5, config().maxSequenceJump(8).deltaLogMaxHashes(4)
        .relayLogMaxHashesPerOrigin(0).build());
    GossipEngine relay = c.add(0, 1, List.of());
    GossipEngine far = c.add(1, 1, List.of(SimCluster.addressOf(0)));
    GossipEngine near = c.add(2, 1, List.of(SimCluster.addressOf(0)));
    for (GossipEngine e : c.nodes) {
      e.start();
    }
    for (int i = 0; i < 20; i++) {
      far.localSummary().onStored(new long[] {100 + i}); // 20 versions: past the jump of 8
    }
    for (int i = 0; i < 5; i++) {
      near.localSummary().onStored(new long[] {200 + i}); // 5 versions: within it
    }
    c.runFor(Duration.ofSeconds(2).toNanos());
    assertTrue(c.converged(), c.firstDivergence());
    assertEquals(20, relay.replicaVersion("node-1")[1]);
    // a node that joins late and reaches the others only through the relay
    for (int i = 1; i <= 2; i++) {
      c.cut.add("sim:3|sim:" + i);
      c.cut.add("sim:" + i + "|sim:3");
    }
    GossipEngine late = c.add(3, 1, List.of(SimCluster.addressOf(0)));
    late.start();
    c.runFor(Duration.ofSeconds(3).toNanos());
    assertEquals(5, late.replicaVersion("node-2")[1], "within the jump: from the relay");
    assertEquals(0, late.replicaVersion("node-1")[1], "past the jump: not from the relay");
    assertTrue(late.counter(GossipCounter.REJECTED) > 0);
    // once it can reach the origin, the origin's own snapshot is taken
    c.heal();
    assertTrue(c.runUntilConverged(100) >= 0, c.firstDivergence());
    assertEquals(20, late.replicaVersion("node-1")[1]);
  }

  /**
   * The same holds for a replica that a third party's word of a restart would start at version
   * 0 of a new generation, and for an origin a third party introduces together with its history
   * from version 0: a claim more than {@code maxSequenceJump} along is measured against 0 and
   * refused, whether it comes as a snapshot or as deltas. Taken, a forged one put the replica
   * beyond the reach of the restarted origin's refutation, as the chained claims above did.
   */
  @Test
  void aNewGenerationOrANewOriginFarAlongIsTakenOnlyFromTheOrigin() {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipConfig config = config().maxSequenceJump(8).build();
    GossipEngine node = new GossipEngine(new PeerAddress("node", "sim:node"), 1, config,
        List.of(), time, time, new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> { });
    PeerAddress origin = new PeerAddress("origin", "sim:origin");
    PeerAddress relay = new PeerAddress("relay", "sim:relay");
    node.handle(origin, new Ack2(1, List.of(new Update(
        new DigestEntry("origin", 1, 1, 1, 0, 0, false), "sim:origin", 0,
        List.of(new Delta(1, Delta.STORE, new long[] {7}))))));
    // the origin falls silent (it restarts): a third party's word of a new generation is taken
    time.advanceBy(config.suspectAfter().toNanos());

    long rejected = node.counter(GossipCounter.REJECTED);
    node.handle(relay, new SnapshotChunk("origin", 2, 20, 20, 0, 1, new long[] {20},
        new long[] {99}));
    assertTrue(node.replicaVersion("origin")[1] <= 8,
        () -> "a third party's snapshot 20 versions along taken: "
            + java.util.Arrays.toString(node.replicaVersion("origin")));
    assertEquals(rejected + 1, node.counter(GossipCounter.REJECTED), "snapshot not refused");

    node.handle(relay, new Ack2(1, List.of(history("origin", 2, 20, "sim:origin"))));
    assertTrue(node.replicaVersion("origin")[1] <= 8,
        () -> "a third party's history 20 versions along taken: "
            + java.util.Arrays.toString(node.replicaVersion("origin")));
    assertEquals(rejected + 2, node.counter(GossipCounter.REJECTED), "history not refused");

    node.handle(relay, new Ack2(1, List.of(history("newcomer", 1, 20, "sim:newcomer"))));
    assertArrayEquals(new long[] {1, 0}, node.replicaVersion("newcomer"),
        "a new origin is learned from a third party, its history 20 versions along is not");
    assertEquals(rejected + 3, node.counter(GossipCounter.REJECTED), "newcomer not refused");

    // the origins' own word is taken
    node.handle(origin, new Ack2(2, List.of(history("origin", 2, 20, null))));
    node.handle(new PeerAddress("newcomer", "sim:newcomer"),
        new Ack2(1, List.of(history("newcomer", 1, 20, null))));
    assertArrayEquals(new long[] {2, 20}, node.replicaVersion("origin"));
    assertArrayEquals(new long[] {1, 20}, node.replicaVersion("newcomer"));
    assertEquals(20, node.replicaOf("origin").length);
  }

  /** An update about {@code id} with its whole history: {@code n} single-block STOREs. */
  private static Update history(String id, long gen, int n, String address) {
    List<Delta> deltas = new ArrayList<>();
    for (int i = 1; i <= n; i++) {
      deltas.add(new Delta(i, Delta.STORE, new long[] {500 + i}));
    }
    return new Update(new DigestEntry(id, gen, n, 1, 0, 0, false), address, 0, deltas);
  }

  @Test
  void inAnHonestClusterNoVersionIsEverRefuted() {
    // churn, loss, duplication and reordering: between honest nodes no peer ever shows a node
    // a version of its own above its own, and no older word of an origin, reordered behind
    // newer state, restarts a replica (a jump of 8, above the changes an origin makes in flight)
    SimCluster c = SimCluster.of(5, 5, config().deltaLogMaxHashes(40).maxSequenceJump(8).build());
    c.delayNanos = 2_000_000;
    c.extraDelayNanos = 150_000_000;
    c.loss = 0.2;
    c.duplication = 0.2;
    SplittableRandom r = new SplittableRandom(9);
    for (int step = 0; step < 200; step++) {
      GossipEngine n = c.nodes.get(r.nextInt(c.nodes.size()));
      long[] hashes = r.longs(1 + r.nextInt(5), 0, 200).toArray();
      if (r.nextInt(3) == 0) {
        n.localSummary().onEvicted(hashes);
      } else {
        n.localSummary().onStored(hashes);
      }
      c.runFor(Duration.ofMillis(50).toNanos());
    }
    c.heal();
    c.runFor(Duration.ofSeconds(5).toNanos());
    assertTrue(c.converged(), c.firstDivergence());
    for (GossipEngine e : c.nodes) {
      assertEquals(0, e.counter(GossipCounter.VERSIONS_REFUTED), e.self().nodeId());
      assertEquals(0, e.counter(GossipCounter.REPLICAS_BEYOND_REACH_RESTARTED), e.self().nodeId());
    }
  }
}
