package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Store numbers are counters of the protocol, in {@code 1..2^62}. A peer that installs a
 * snapshot claiming the last store number 2^62 and then sends a STORE pushes the replica's
 * store count past the range: the replica must not take it, or every snapshot this node then
 * serves of that origin carries a store count its peers reject as malformed.
 */
class StoreCountRangeTest {

  private static final long MAX = GossipMessage.MAX_COUNTER;
  private static final PeerAddress ME = new PeerAddress("me", "sim:me");
  private static final PeerAddress A = new PeerAddress("a", "sim:a");
  private static final PeerAddress B = new PeerAddress("b", "sim:b");

  @Test
  void aStorePastTheLastStoreNumberIsNotTakenAndEverySnapshotServedDecodes() {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100)).build();
    List<byte[]> sent = new ArrayList<>();
    GossipEngine node = new GossipEngine(ME, 1, config, List.of(A), time, time,
        new SplittableRandom(7), () -> EngineLoad.IDLE, (to, p) -> sent.add(p));
    GossipCodec codec = new GossipCodec(config.messageByteCap(), config.maxPeers() + 1);
    node.start();

    // a introduces itself, then sends a snapshot whose last store number is 2^62
    node.onMessage(A, codec.encode(new Ack2(1, List.of(new Update(
        new DigestEntry("a", 1, 0, 1, 0, 0, false), "sim:a", 0, List.of())))));
    node.onMessage(A, codec.encode(new SnapshotChunk("a", 1, 1, MAX, 0, 1,
        new long[] {MAX}, new long[] {7})));
    assertEquals(1, node.replicaVersion("a")[1]);
    // and a STORE, which would take store number 2^62 + 1
    node.onMessage(A, codec.encode(new Ack2(1, List.of(new Update(
        new DigestEntry("a", 1, 2, 2, 0, 0, false), null, 1,
        List.of(new Delta(2, Delta.STORE, new long[] {9})))))));
    node.checkInvariants();
    assertEquals(0, node.counter(GossipCounter.INTERNAL_ERRORS));
    long[][] held = node.replicaStores("a");
    assertNotNull(held);
    for (long store : held[0]) {
      assertTrue(store >= 1 && store <= MAX, "store number " + store + " held");
    }

    // b, which knows nothing, asks for everything: what this node sends must decode
    sent.clear();
    node.onMessage(B, codec.encode(new Syn(1, 1, List.of(
        new DigestEntry("b", 1, 0, 1, 0, 0, false)))));
    assertFalse(sent.isEmpty());
    for (byte[] p : sent) {
      try {
        codec.decode(p);
      } catch (MalformedMessageException e) {
        fail("the node sent a message its peers reject: " + e.getMessage());
      }
    }
  }
  /** A STORE that numbers its last block exactly 2^62, the last store number, is taken. */
  @Test
  void aStoreUpToTheLastStoreNumberIsTaken() {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100)).build();
    GossipEngine node = new GossipEngine(ME, 1, config, List.of(A), time, time,
        new SplittableRandom(7), () -> EngineLoad.IDLE, (to, p) -> { });
    node.handle(A, new Ack2(1, List.of(new Update(new DigestEntry("a", 1, 0, 1, 0, 0, false),
        "sim:a", 0, List.of()))));
    node.handle(A, new SnapshotChunk("a", 1, 1, MAX - 2, 0, 1, new long[] {MAX - 2},
        new long[] {7}));
    node.handle(A, new Ack2(1, List.of(new Update(new DigestEntry("a", 1, 2, 2, 0, 0, false),
        null, 1, List.of(new Delta(2, Delta.STORE, new long[] {8, 9}))))));
    assertEquals(2, node.replicaVersion("a")[1]);
    assertEquals(MAX, node.replicaStores("a")[2][0]);
    assertEquals(0, node.counter(GossipCounter.REJECTED));
    node.checkInvariants();
  }
}
