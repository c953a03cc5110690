package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A peer's address follows the peer's own word: a node that restarts at a new address (a pod
 * rescheduled with a new IP under the same node id) is reached at the new one even when a third
 * party told of its new generation first, and an address relayed wrongly for an unknown peer
 * does not outlive the peer's own messages.
 */
class PeerAddressChangeTest {

  final PeerAddress me = new PeerAddress("me", "sim:me");
  final PeerAddress relayer = new PeerAddress("b", "sim:b");
  final PeerAddress xOld = new PeerAddress("x", "sim:x-old");
  final PeerAddress xNew = new PeerAddress("x", "sim:x-new");
  final List<PeerAddress> sentTo = new ArrayList<>();
  SimulatedScheduler time;
  GossipEngine engine;

  @BeforeEach
  void setUp() {
    time = new SimulatedScheduler();
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100)).build();
    engine = new GossipEngine(me, 10, config, List.of(), time, time, new SplittableRandom(1),
        () -> EngineLoad.IDLE, (to, p) -> sentTo.add(to));
    engine.handle(relayer, new Ack2(1, List.of(header("b", 1, 1, null))));
  }

  static Update header(String id, long gen, long hb, String address) {
    return new Update(new DigestEntry(id, gen, 0, hb, 0, 0, false), address, 0, List.of());
  }

  PeerAddress addressInView(String nodeId) {
    return engine.view().peers().stream().filter(p -> p.address().nodeId().equals(nodeId))
        .findFirst().orElseThrow().address();
  }

  /** Runs one round and returns where its SYNs went (all peers: fanout 3 > 2 peers). */
  List<PeerAddress> synTargets() {
    sentTo.clear();
    engine.runRound();
    time.advanceBy(Duration.ofMillis(100).toNanos());
    return List.copyOf(sentTo);
  }

  @Test
  void aPeerRestartedAtANewAddressIsReachedThereAfterAThirdPartyToldOfItsRestart() {
    engine.handle(xOld, new Ack2(1, List.of(header("x", 1, 1, null))));
    assertEquals(xOld, addressInView("x"));
    // x stops (its heartbeat stalls for more than half the suspicion time) and restarts at a
    // new address; the relayer's word of the new generation comes first and is adopted
    time.advanceBy(Duration.ofSeconds(3).toNanos());
    engine.handle(relayer, new Ack2(1, List.of(header("b", 1, 30, null),
        header("x", 2, 1, "sim:x-new"))));
    assertEquals(2, engine.replicaVersion("x")[0]);
    // then x itself, at its new address and in its new generation
    engine.handle(xNew, new Syn(1, 2, List.of(new DigestEntry("x", 2, 0, 2, 0, 0, false))));
    assertEquals(xNew, addressInView("x"));
    List<PeerAddress> targets = synTargets();
    assertTrue(targets.contains(xNew), "SYNs went to " + targets);
    assertFalse(targets.contains(xOld), "SYNs went to " + targets);
  }

  /**
   * A restart adopted on a third party's word keeps the address the peer was known at: only the
   * peer's own message moves it. The relayer's address (and node id) must not take its place.
   */
  @Test
  void aRestartHeardFromAThirdPartyKeepsThePeersAddress() {
    engine.handle(xOld, new Ack2(1, List.of(header("x", 1, 1, null))));
    time.advanceBy(Duration.ofSeconds(3).toNanos());
    engine.handle(relayer, new Ack2(1, List.of(header("b", 1, 30, null),
        header("x", 2, 1, "sim:x-new"))));
    assertEquals(2, engine.replicaVersion("x")[0]);
    assertEquals(List.of(relayer, xOld), engine.view().peers().stream().map(PeerView::address)
        .sorted(java.util.Comparator.comparing(PeerAddress::nodeId)).toList());
  }

  @Test
  void aWrongAddressRelayedForAnUnknownPeerGivesWayToThePeersOwnWord() {
    engine.handle(relayer, new Ack2(1, List.of(header("x", 1, 1, "sim:somewhere-else"))));
    engine.handle(xNew, new Syn(1, 1, List.of(new DigestEntry("x", 1, 0, 2, 0, 0, false))));
    assertEquals(xNew, addressInView("x"));
    assertTrue(synTargets().contains(xNew));
  }

  @Test
  void aLateMessageOfTheOldGenerationDoesNotMoveTheAddressBack() {
    engine.handle(xOld, new Ack2(1, List.of(header("x", 1, 1, null))));
    engine.handle(xNew, new Ack2(2, List.of(header("x", 2, 1, null))));
    assertEquals(xNew, addressInView("x"));
    engine.handle(xOld, new Syn(7, 1, List.of(new DigestEntry("x", 1, 0, 9, 0, 0, false))));
    assertEquals(xNew, addressInView("x"));
  }

  /** One step: x speaks for itself, the relayer speaks of x, or time passes. */
  record Step(int kind, int generation, int address, int millis) {}

  @Provide
  Arbitrary<List<Step>> steps() {
    Arbitrary<Step> step = Arbitraries.integers().between(0, 2).flatMap(kind ->
        Arbitraries.integers().between(1, 3).flatMap(gen ->
            Arbitraries.integers().between(0, 2).flatMap(addr ->
                Arbitraries.of(0, 300, 3_000, 20_000).map(ms -> new Step(kind, gen, addr, ms)))));
    return step.list().ofMinSize(1).ofMaxSize(40);
  }

  /**
   * Against the rule "a peer's own message in the generation known for it gives its address":
   * whatever mix of relayed words (any generation, any address), messages from the peer itself
   * (any generation, any address) and time passing, right after a message from the peer in the
   * generation this node then holds for it, the view shows the address it came from.
   */
  @Property(tries = 300)
  void aPeersOwnMessageInItsKnownGenerationAlwaysSetsItsAddress(
      @ForAll("steps") List<Step> steps) {
    setUp();
    long heartbeat = 1;
    for (Step s : steps) {
      heartbeat++;
      PeerAddress x = new PeerAddress("x", "sim:x" + s.address());
      Update about = new Update(new DigestEntry("x", s.generation(), 0, heartbeat, 0, 0, false),
          s.kind() == 1 ? x.address() : null, 0, List.of());
      switch (s.kind()) {
        case 0 -> engine.handle(x, new Ack2(s.generation(), List.of(about)));
        case 1 -> engine.handle(relayer, new Ack2(1, List.of(header("b", 1, heartbeat, null),
            about)));
        default -> time.advanceBy(Duration.ofMillis(s.millis()).toNanos());
      }
      engine.checkInvariants();
      long[] known = engine.replicaVersion("x");
      if (s.kind() == 0 && known != null && known[0] == s.generation()
          && engine.statusOf("x") != GossipEngine.Status.DEAD) {
        assertEquals(x, addressInView("x"), "after " + s);
      }
    }
  }
}
