package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
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

/**
 * A heartbeat above a node's own is something no honest peer can know: peers take the highest
 * heartbeat they hear of, from anyone, so one such value (a peer's bug, a corrupted relay) would
 * stand above every heartbeat the node really sends, and every peer would see the node's
 * heartbeat stop and declare it dead, although it keeps talking to all of them. The node refutes
 * it, as SWIM nodes refute a suspicion: on seeing its own entry with a higher heartbeat, it
 * continues from above it, and its next digests spread again.
 */
class HeartbeatRefutationTest {

  static GossipConfig config() {
    return GossipConfig.builder().interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofMillis(500)).deadAfter(Duration.ofMillis(1_500))
        .forgetAfter(Duration.ofMillis(5_000)).build();
  }

  @Test
  void aNodeWhoseHeartbeatWasInflatedByAPeerStaysAliveEverywhere() {
    SimCluster c = SimCluster.of(4, 7, config());
    c.delayNanos = 2_000_000;
    c.runFor(Duration.ofSeconds(2).toNanos());
    GossipEngine victim = c.nodes.get(1);
    String id = victim.self().nodeId();
    for (GossipEngine e : c.nodes) {
      if (e != victim) {
        assertEquals(Status.ALIVE, e.statusOf(id));
      }
    }
    // one SYN from node 3 to node 2 carries the victim's heartbeat, a million rounds ahead
    GossipEngine liar = c.nodes.get(3);
    GossipEngine told = c.nodes.get(2);
    long[] version = told.replicaVersion(id);
    told.handle(liar.self(), new Syn(1, 1, List.of(
        new DigestEntry(id, version[0], version[1], 1_000_000, 0, 0, false))));
    long refutedBefore = victim.counter(GossipCounter.HEARTBEATS_REFUTED);
    // the value spreads to every node within a few rounds; the victim keeps running meanwhile
    for (int k = 0; k < 30; k++) { // 3 s: twice deadAfter
      c.runFor(Duration.ofMillis(100).toNanos());
      for (GossipEngine e : c.nodes) {
        if (e != victim) {
          assertTrue(e.statusOf(id) != Status.DEAD, id + " declared dead by "
              + e.self().nodeId() + " at round " + k);
        }
      }
    }
    assertTrue(victim.counter(GossipCounter.HEARTBEATS_REFUTED) > refutedBefore);
    for (GossipEngine e : c.nodes) {
      if (e != victim) {
        assertEquals(Status.ALIVE, e.statusOf(id), "at " + e.self().nodeId());
      }
    }
  }

  /**
   * A node that learns an origin from a third party has no heartbeat of it to measure the claim
   * against, so it takes the one it is told: a value far above the origin's real heartbeat (more
   * than maxSequenceJump, which the origin does not refute) would stand above every heartbeat the
   * origin sends, and the node declared the origin dead although the origin kept talking to it.
   * The origin's own word about its heartbeat is believed over such a value.
   */
  @Test
  void anOriginIntroducedWithAnInflatedHeartbeatStaysAliveAtTheNodeThatLearnedIt() {
    SimCluster c = SimCluster.of(4, 7, config());
    c.delayNanos = 2_000_000;
    c.runFor(Duration.ofSeconds(2).toNanos());
    GossipEngine victim = c.nodes.get(1);
    GossipEngine liar = c.nodes.get(3);
    String id = victim.self().nodeId();
    // a node joins; before it hears from anyone else, the liar introduces the victim to it
    GossipEngine late = c.add(4, 1, List.of(SimCluster.addressOf(0)));
    long inflated = 1L << 40; // past the default maxSequenceJump (2^32)
    late.handle(liar.self(), new Ack2(1, List.of(new Update(new DigestEntry(id,
        victim.generation(), 0, inflated, 0, 0, false), victim.self().address(), 0,
        List.of()))));
    assertEquals(Status.ALIVE, late.statusOf(id));
    late.start();
    for (int k = 0; k < 30; k++) { // 3 s: twice deadAfter
      c.runFor(Duration.ofMillis(100).toNanos());
      assertTrue(late.statusOf(id) != Status.DEAD, id + " declared dead at round " + k);
    }
    assertEquals(Status.ALIVE, late.statusOf(id));
    assertTrue(late.counter(GossipCounter.REJECTED) > 0);
    for (GossipEngine e : c.nodes) {
      if (e != victim) {
        assertEquals(Status.ALIVE, e.statusOf(id), "at " + e.self().nodeId());
      }
    }
    assertTrue(c.converged(), c.firstDivergence());
  }

  /**
   * The origin's own word sets back a heartbeat held for it only when it is more than
   * {@code maxSequenceJump} below: a third party may have raised the held value by up to the
   * jump, which the origin refutes itself, so a word exactly the jump below changes nothing.
   */
  @Test
  void aHeldHeartbeatIsSetBackOnlyByTheOriginsWordMoreThanTheJumpBelow() {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipEngine node = new GossipEngine(new PeerAddress("me", "sim:me"), 1,
        GossipConfig.builder().interval(Duration.ofMillis(100)).maxSequenceJump(1_000).build(),
        List.of(), time, time, new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> { });
    PeerAddress x = new PeerAddress("x", "sim:x");
    node.handle(new PeerAddress("y", "sim:y"), new Ack2(1, List.of(new Update(
        new DigestEntry("x", 1, 0, 10_000, 0, 0, false), "sim:x", 0, List.of()))));
    long rejected = node.counter(GossipCounter.REJECTED);
    node.handle(x, new Syn(1, 1, List.of(new DigestEntry("x", 1, 0, 9_000, 0, 0, false))));
    assertEquals(rejected, node.counter(GossipCounter.REJECTED), "exactly the jump below");
    node.handle(x, new Syn(2, 1, List.of(new DigestEntry("x", 1, 0, 8_999, 0, 0, false))));
    assertEquals(rejected + 1, node.counter(GossipCounter.REJECTED), "more than the jump below");
    node.handle(x, new Syn(3, 1, List.of(new DigestEntry("x", 1, 0, 9_000, 0, 0, false))));
    assertEquals(rejected + 1, node.counter(GossipCounter.REJECTED), "then its heartbeats go on");
    assertEquals(Status.ALIVE, node.statusOf("x"));
  }

  /**
   * A node that sees its own entry with a heartbeat it does not follow (more than
   * maxSequenceJump above its own) answers with its own header, which the peer believes over
   * the claim: before, the answer said nothing of the node, and the peer kept the claim until the
   * node happened to send it a SYN of its own.
   */
  @Test
  void aNodeAnswersAnInflatedHeartbeatOfItsOwnWithItsOwnHeader() throws Exception {
    SimulatedScheduler time = new SimulatedScheduler();
    List<byte[]> sent = new ArrayList<>();
    GossipConfig config = config();
    PeerAddress self = new PeerAddress("me", "sim:me");
    GossipEngine me = new GossipEngine(self, 1, config, List.of(), time, time,
        new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> sent.add(p));
    me.runRound();
    me.runRound(); // heartbeat 2
    PeerAddress other = new PeerAddress("other", "sim:other");
    sent.clear();
    me.handle(other, new Syn(1, 1, List.of(new DigestEntry("other", 1, 0, 1, 0, 0, false),
        new DigestEntry("me", 1, 0, 2 + (1L << 40), 0, 0, false))));
    GossipCodec codec = new GossipCodec(config.messageByteCap(), GossipConfig.MAX_PEERS_LIMIT + 1);
    List<Long> told = new ArrayList<>();
    for (byte[] p : sent) {
      if (codec.decode(p) instanceof Ack a) {
        for (Update u : a.updates()) {
          if (u.header().nodeId().equals("me")) {
            told.add(u.header().heartbeat());
          }
        }
      }
    }
    assertEquals(List.of(2L), told);
  }

  @Test
  void aClaimBeyondTheSequenceJumpIsNotFollowed() {
    GossipEngine me = SimCluster.of(2, 3, GossipConfig.builder()
        .interval(Duration.ofMillis(100)).maxSequenceJump(1_000).build()).nodes.get(0);
    PeerAddress other = SimCluster.addressOf(1);
    long before = me.counter(GossipCounter.REJECTED);
    // peers refuse such a jump from a third party: only an impersonation could spread it, and
    // following it would let a liar push the node's counter to its limit
    me.handle(other, new Syn(1, 1, List.of(new DigestEntry(me.self().nodeId(), 1, 0,
        5_000, 0, 0, false))));
    assertEquals(0, me.counter(GossipCounter.HEARTBEATS_REFUTED));
    assertEquals(before + 1, me.counter(GossipCounter.REJECTED));
    me.handle(other, new Syn(2, 1, List.of(new DigestEntry(me.self().nodeId(), 1, 0,
        900, 0, 0, false))));
    assertEquals(1, me.counter(GossipCounter.HEARTBEATS_REFUTED));
    // no round ran: the node's heartbeat is now 901. A claim exactly the jump above it is
    // followed (peers take such a step from third parties), one more is not
    me.handle(other, new Syn(3, 1, List.of(new DigestEntry(me.self().nodeId(), 1, 0,
        901 + 1_000, 0, 0, false))));
    assertEquals(2, me.counter(GossipCounter.HEARTBEATS_REFUTED));
    assertEquals(before + 1, me.counter(GossipCounter.REJECTED));
    me.handle(other, new Syn(4, 1, List.of(new DigestEntry(me.self().nodeId(), 1, 0,
        1_902 + 1_001, 0, 0, false))));
    assertEquals(2, me.counter(GossipCounter.HEARTBEATS_REFUTED));
    assertEquals(before + 2, me.counter(GossipCounter.REJECTED));
  }
}
