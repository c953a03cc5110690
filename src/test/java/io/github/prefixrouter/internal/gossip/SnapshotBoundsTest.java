package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Request;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * What serving and receiving snapshots costs a node, whatever its peers send: the work of one
 * exchange is bounded by its snapshot budget, and snapshots that are never completed do not hold
 * the pending-snapshot budget for ever.
 */
class SnapshotBoundsTest {

  static final PeerAddress ME = new PeerAddress("me", "sim:me");
  static final int CAP = 4_096; // messageByteCap: about 800 blocks per snapshot chunk

  final List<byte[]> sent = new ArrayList<>();
  SimulatedScheduler time;
  GossipEngine engine;

  GossipEngine engine(GossipConfig config) {
    time = new SimulatedScheduler();
    engine = new GossipEngine(ME, 10, config, List.of(), time, time, new SplittableRandom(3),
        () -> EngineLoad.IDLE, (to, p) -> sent.add(p));
    return engine;
  }

  static PeerAddress peer(String id) {
    return new PeerAddress(id, "sim:" + id);
  }

  /** {@code id} tells the node about itself: version 1, one STORE of {@code blocks} fingerprints. */
  void learn(String id, long generation, int blocks, long firstFingerprint) {
    long[] fps = new long[blocks];
    for (int i = 0; i < blocks; i++) {
      fps[i] = firstFingerprint + i;
    }
    engine.handle(peer(id), new Ack2(generation, List.of(new Update(
        new DigestEntry(id, generation, 1, 1, 0, 0, false), "sim:" + id, 0,
        List.of(new Delta(1, Delta.STORE, fps))))));
    assertEquals(blocks, engine.replicaOf(id).length);
  }

  // ------------------------------------------------------------ serving

  /**
   * A SYN that lists no origin (a new node's first SYN, or a forged one of a few bytes) asks
   * for every replica the node holds; an ACK requesting every origin from version 0 does the
   * same. Only {@code snapshotBytesPerExchange} of chunks may leave per exchange, so encoding
   * the snapshots that cannot be sent is wasted work under the gossip lock: it was done for
   * every replica the relay logs no longer cover (here 12 replicas of 4,000 blocks, 48,000
   * blocks encoded for 4 KiB sent, on every such message).
   */
  @Test
  void anExchangeEncodesNoMoreSnapshotsThanItsBudgetCanSend() {
    engine(GossipConfig.builder().messageByteCap(CAP).snapshotBytesPerExchange(CAP)
        .relayLogMaxHashesPerOrigin(100).build());
    int origins = 12;
    for (int i = 0; i < origins; i++) {
      learn("o" + i, 5, 4_000, 1_000_000L * (i + 1));
    }
    PeerAddress joiner = peer("joiner");
    for (int k = 0; k < 5; k++) {
      sent.clear();
      long encodedBefore = engine.counter(GossipCounter.SNAPSHOTS_ENCODED);
      long bytesBefore = engine.counter(GossipCounter.SNAPSHOT_BYTES_SENT);
      engine.handle(joiner, new Syn(k + 1, 1, List.of(
          new DigestEntry("joiner", 1, 0, k + 1, 0, 0, false))));
      long encoded = engine.counter(GossipCounter.SNAPSHOTS_ENCODED) - encodedBefore;
      long bytes = engine.counter(GossipCounter.SNAPSHOT_BYTES_SENT) - bytesBefore;
      assertTrue(bytes > 0 && bytes <= CAP, "snapshot bytes sent: " + bytes);
      // the first origin's snapshot fills the budget; nothing else can be sent
      assertTrue(encoded <= 1, "snapshots encoded for one SYN: " + encoded);
    }
    // the same through the requests of an ACK
    List<Request> all = new ArrayList<>();
    for (int i = 0; i < origins; i++) {
      all.add(new Request("o" + i, 0, 0));
    }
    long encodedBefore = engine.counter(GossipCounter.SNAPSHOTS_ENCODED);
    engine.handle(joiner, new Ack(1, 1, List.of(), all));
    long encoded = engine.counter(GossipCounter.SNAPSHOTS_ENCODED) - encodedBefore;
    assertTrue(encoded <= 1, "snapshots encoded for one ACK: " + encoded);
  }

  /** With room for them, every lagging origin still gets its snapshot in one exchange. */
  @Test
  void aBudgetWithRoomStillServesEverySnapshot() {
    engine(GossipConfig.builder().messageByteCap(CAP).snapshotBytesPerExchange(1 << 20)
        .relayLogMaxHashesPerOrigin(100).build());
    for (int i = 0; i < 6; i++) {
      learn("o" + i, 5, 300, 1_000_000L * (i + 1));
    }
    engine.handle(peer("joiner"), new Syn(1, 1, List.of(
        new DigestEntry("joiner", 1, 0, 1, 0, 0, false))));
    assertEquals(6, engine.counter(GossipCounter.SNAPSHOTS_SENT));
    assertEquals(6, engine.counter(GossipCounter.SNAPSHOTS_ENCODED));
  }
}
