package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
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
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * One exchange's snapshot chunks are bounded by a message count as well as by bytes. At a
 * small {@code messageByteCap} the byte budget of a node (1 MiB) is about a thousand 1 KiB
 * chunks, while the HTTP transport keeps at most 64 messages outstanding to a peer and drops
 * the rest: an exchange that hands it more chunks than that encodes and sends bytes that never
 * arrive.
 */
class SnapshotChunksPerExchangeTest {

  /** Three quarters of the HTTP transport's default window of 64 messages to a peer. */
  static final int CHUNKS_PER_EXCHANGE = 48;

  @Test
  void anExchangeAtA1KibCapSendsNoMoreChunksThanTheTransportWindowTakes() {
    // as a node of gossipMessageBytes 1,024 is configured: 200 ms rounds, 1 MiB of snapshot
    // bytes per exchange; a short delta log, so that a new peer gets the origin's snapshot
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(200))
        .suspectAfter(Duration.ofSeconds(2)).deadAfter(Duration.ofSeconds(10))
        .forgetAfter(Duration.ofSeconds(40)).messageByteCap(1_024)
        .snapshotBytesPerExchange(1 << 20).deltaLogMaxHashes(1_000).build();
    SimCluster c = new SimCluster(11, config);
    c.delayNanos = 2_000_000;
    GossipEngine origin = c.add(0, 1, List.of());
    origin.start();
    // 20,000 blocks: a snapshot of about 100 KB, about 100 chunks of 1 KiB
    long[] blocks = new long[20_000];
    for (int i = 0; i < blocks.length; i++) {
      blocks[i] = (i + 1) * 0x9E3779B97F4A7C15L;
    }
    origin.localSummary().onStored(blocks);
    // the origin's chunks after each of its ACKs and ACK2s: the chunks of one exchange
    String from = origin.self().address();
    int[] current = new int[1];
    int[] most = new int[1];
    c.taken = (sender, payload) -> {
      if (!sender.address().equals(from)) {
        return;
      }
      int type = payload[0] & 0xFF;
      if (type == GossipMessage.TYPE_ACK || type == GossipMessage.TYPE_ACK2) {
        current[0] = 0;
      } else if (type == GossipMessage.TYPE_SNAPSHOT_CHUNK) {
        most[0] = Math.max(most[0], ++current[0]);
      }
    };
    GossipEngine joiner = c.add(1, 1, List.of(SimCluster.addressOf(0)));
    joiner.start();
    for (int round = 0; round < 20
        && joiner.counter(GossipCounter.SNAPSHOTS_INSTALLED) == 0; round++) {
      c.runFor(c.interval());
      origin.checkInvariants();
      joiner.checkInvariants();
    }
    assertTrue(most[0] <= CHUNKS_PER_EXCHANGE, "one exchange handed the transport " + most[0]
        + " snapshot chunks for one peer, more than " + CHUNKS_PER_EXCHANGE
        + " (the HTTP transport keeps 64 messages outstanding to a peer and drops the rest)");
    long[] own = origin.localSummary().snapshot().hashes();
    long[] replica = joiner.replicaOf(origin.self().nodeId());
    assertTrue(replica != null, "the joiner does not know the origin");
    Arrays.sort(own);
    Arrays.sort(replica);
    assertArrayEquals(own, replica, "the joiner's replica of the origin after "
        + joiner.counter(GossipCounter.SNAPSHOTS_INSTALLED) + " snapshots installed");
  }

  @Test
  void theCountIsASettingOfAtLeastOneChunk() {
    assertEquals(CHUNKS_PER_EXCHANGE, GossipConfig.defaults().snapshotChunksPerExchange());
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().snapshotChunksPerExchange(0).build());
    assertEquals("gossip setting snapshotChunksPerExchange = 0 is invalid: must be in "
        + "1..2147483647", e.getMessage());
    assertEquals(1, GossipConfig.builder().snapshotChunksPerExchange(1).build()
        .snapshotChunksPerExchange());
  }

  /**
   * The count holds over the snapshots of several origins too: a new peer lacking 60 small
   * origins, one chunk each, gets 48 of them in one exchange (no further snapshot encoded) and,
   * once it lists those, the others in the next.
   */
  @Test
  void theCountHoldsOverTheSnapshotsOfSeveralOrigins() throws Exception {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipConfig config = GossipConfig.builder().messageByteCap(1_024)
        .snapshotBytesPerExchange(1 << 20).relayLogMaxHashesPerOrigin(10).build();
    List<byte[]> sent = new ArrayList<>();
    GossipEngine engine = new GossipEngine(new PeerAddress("me", "sim:me"), 10, config,
        List.of(), time, time, new SplittableRandom(3), () -> EngineLoad.IDLE,
        (to, p) -> sent.add(p));
    int origins = 60;
    for (int i = 0; i < origins; i++) {
      String id = "o" + i;
      long[] fps = new long[20]; // more than the relay log keeps: a new peer gets a snapshot
      for (int k = 0; k < fps.length; k++) {
        fps[k] = 1_000L * (i + 1) + k;
      }
      engine.handle(new PeerAddress(id, "sim:" + id), new Ack2(5, List.of(new Update(
          new DigestEntry(id, 5, 1, 1, 0, 0, false), "sim:" + id, 0,
          List.of(new Delta(1, Delta.STORE, fps))))));
    }
    PeerAddress joiner = new PeerAddress("joiner", "sim:joiner");
    sent.clear();
    engine.handle(joiner, new Syn(1, 1, List.of(new DigestEntry("joiner", 1, 0, 1, 0, 0, false))));
    assertEquals(CHUNKS_PER_EXCHANGE, engine.counter(GossipCounter.SNAPSHOT_CHUNKS_SENT),
        "snapshot chunks sent in one exchange");
    assertEquals(CHUNKS_PER_EXCHANGE, engine.counter(GossipCounter.SNAPSHOTS_ENCODED),
        "snapshots encoded for one exchange");
    // the joiner installed them, and lists them in its next digest
    GossipCodec codec = new GossipCodec(1 << 20, GossipConfig.MAX_PEERS_LIMIT + 1);
    List<DigestEntry> digest = new ArrayList<>();
    digest.add(new DigestEntry("joiner", 1, 0, 2, 0, 0, false));
    for (byte[] p : sent) {
      if (codec.decode(p) instanceof SnapshotChunk chunk) {
        digest.add(new DigestEntry(chunk.nodeId(), 5, 1, 1, 0, 0, false));
      }
    }
    digest.sort(java.util.Comparator.comparing(DigestEntry::nodeId));
    engine.handle(joiner, new Syn(2, 1, digest));
    assertEquals(origins, engine.counter(GossipCounter.SNAPSHOTS_ENCODED),
        "snapshots encoded after two exchanges");
    assertEquals(origins, engine.counter(GossipCounter.SNAPSHOT_CHUNKS_SENT),
        "snapshot chunks sent after two exchanges");
  }
}
