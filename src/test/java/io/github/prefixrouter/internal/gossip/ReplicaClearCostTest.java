package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Emptying one peer's replica costs the blocks it held, not a scan of the replica index, which
 * holds every peer's blocks. Peers can empty a replica with a few bytes: a STORE and a CLEAR
 * (6 bytes), a STORE and an eviction naming an unknown store number (the replica restarts), a
 * one-block snapshot, a new generation. Each of them scanned the whole table under the gossip
 * lock: 42 ms for a 28-byte message with 4,194,304 pairs replicated, and 441 s for one 60 KB
 * message of 10,000 STOREs each followed by a CLEAR.
 */
class ReplicaClearCostTest {

  static final PeerAddress ME = new PeerAddress("me", "sim:me");
  static final PeerAddress BIG = new PeerAddress("big", "sim:big");
  static final PeerAddress X = new PeerAddress("x", "sim:x");
  static final int BIG_BLOCKS = 20_000;

  SimulatedScheduler time;
  GossipEngine engine;
  long heartbeat;

  @BeforeEach
  void setUp() {
    time = new SimulatedScheduler();
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofMillis(500)).deadAfter(Duration.ofMillis(1_000))
        .forgetAfter(Duration.ofMillis(2_000)).build();
    engine = new GossipEngine(ME, 1, config, List.of(), time, time, new SplittableRandom(5),
        () -> EngineLoad.IDLE, (to, p) -> {});
    // a peer whose replica fills the table: a scan reads tens of thousands of slots
    long[] fps = new SplittableRandom(9).longs(BIG_BLOCKS, 1, 1L << 32).distinct().toArray();
    engine.handle(BIG, new Ack2(1, List.of(update("big", 1, 1, 0,
        new Delta(1, Delta.STORE, fps)))));
    assertEquals(fps.length, engine.replicaOf("big").length);
  }

  Update update(String id, long gen, long version, long from, Delta... deltas) {
    return update(id, gen, version, from, List.of(deltas));
  }

  Update update(String id, long gen, long version, long from, List<Delta> deltas) {
    return new Update(new DigestEntry(id, gen, version, ++heartbeat, 0, 0, false), "sim:" + id,
        from, deltas);
  }

  /** The replica of "x" at its version: a STORE of {@code fps}, from x itself. */
  void store(long gen, long... fps) {
    long v = engine.replicaVersion("x") == null ? 0 : engine.replicaVersion("x")[1];
    engine.handle(X, new Ack2(gen, List.of(update("x", gen, v + 1, v,
        new Delta(v + 1, Delta.STORE, fps)))));
  }

  void assertNoScanAndBigIntact(long[] xBlocks) {
    assertEquals(0, engine.clearSlotsScanned(), "table slots scanned to empty a replica");
    assertEquals(BIG_BLOCKS, engine.replicaOf("big").length);
    assertArrayEquals(xBlocks, HostileInputTest.sorted(engine.replicaOf("x")));
    engine.checkInvariants();
  }

  @Test
  void aStoreThenAnUnknownEvictionRestartsTheReplicaWithoutATableScan() {
    for (int i = 0; i < 100; i++) {
      engine.handle(X, new Ack2(1, List.of(update("x", 1, 2, 0,
          new Delta(1, Delta.STORE, new long[] {77}),
          new Delta(2, Delta.EVICT, new long[] {9})))));
    }
    assertEquals(100, engine.counter(GossipCounter.UNRESOLVED_EVICTIONS));
    assertEquals(0, engine.replicaVersion("x")[1]);
    assertNoScanAndBigIntact(new long[0]);
  }

  @Test
  void storesEachFollowedByAClearCostNoTableScan() {
    List<Delta> deltas = new ArrayList<>();
    for (int i = 0; i < 1_000; i++) {
      deltas.add(new Delta(2 * i + 1, Delta.STORE, new long[] {100 + i, 5_000 + i}));
      deltas.add(new Delta(2 * i + 2, Delta.CLEAR, Delta.NO_HASHES));
    }
    deltas.add(new Delta(2_001, Delta.STORE, new long[] {42}));
    engine.handle(X, new Ack2(1, List.of(update("x", 1, 2_001, 0, deltas))));
    assertEquals(2_001, engine.replicaVersion("x")[1]);
    assertNoScanAndBigIntact(new long[] {42});
    // the store numbers go on across clears: 2,001 fingerprints were stored, 42 last
    assertArrayEquals(new long[] {2_001}, engine.replicaStores("x")[0]);
  }

  @Test
  void snapshotsNewGenerationsAndDeathEmptyReplicasWithoutATableScan() {
    store(1, 1, 2, 3);
    assertNoScanAndBigIntact(new long[] {1, 2, 3});
    // a snapshot replaces the replica
    engine.handle(X, new SnapshotChunk("x", 1, 5, 9, 0, 1, new long[] {4, 9},
        new long[] {30, 31}));
    assertNoScanAndBigIntact(new long[] {30, 31});
    // an eviction resolved against the snapshot's store numbers
    engine.handle(X, new Ack2(1, List.of(update("x", 1, 6, 5,
        new Delta(6, Delta.EVICT, new long[] {4})))));
    assertNoScanAndBigIntact(new long[] {31});
    // a new generation empties it
    engine.handle(X, new Ack2(2, List.of(update("x", 2, 1, 0,
        new Delta(1, Delta.STORE, new long[] {50})))));
    assertNoScanAndBigIntact(new long[] {50});
    // death empties both replicas
    time.advanceBy(1_500_000_000L);
    engine.runRound();
    assertNull(engine.replicaOf("x"));
    assertNull(engine.replicaOf("big"));
    assertEquals(0, engine.replicatedPairs());
    assertEquals(0, engine.clearSlotsScanned());
    engine.checkInvariants();
  }
}
