package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.SplittableRandom;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * Two senders with different {@code messageByteCap}s (a rolling change of the setting) send
 * chunks of the same snapshot, and a peer assembles one snapshot from the chunks of several
 * senders. Filled to the cap, the same number of chunks split at different boundaries, and
 * nothing in a chunk pins its boundaries: chunk 0 of {1..4 | 5..8} with chunk 1 of
 * {1..6 | 7, 8} installed a replica marked exact that lacked blocks 5 and 6. Snapshots are now
 * split evenly, so chunks of the same count are the same chunks whatever the cap, and a mix of
 * chunks that is not an even split is not installed.
 */
class MixedChunkBoundariesTest {

  static final PeerAddress ORIGIN = new PeerAddress("node-0", "sim:0");
  static final PeerAddress RELAYER = new PeerAddress("node-1", "sim:1");

  static GossipEngine engine(String id, int cap) {
    SimulatedScheduler time = new SimulatedScheduler();
    return new GossipEngine(new PeerAddress(id, "sim:" + id), 1,
        GossipConfig.builder().interval(Duration.ofMillis(100)).messageByteCap(cap).build(),
        List.of(), time, time, new SplittableRandom(5), () -> EngineLoad.IDLE, (to, p) -> {});
  }

  /** A receiver that knows the origin at version 0. */
  static GossipEngine receiver() {
    GossipEngine e = engine("me", 65_536);
    e.handle(ORIGIN, new Ack2(1, List.of(new Update(
        new DigestEntry(ORIGIN.nodeId(), 1, 0, 1, 0, 0, false), null, 0, List.of()))));
    return e;
  }

  static SnapshotChunk chunk(int index, long... stores) {
    long[] fps = new long[stores.length];
    for (int i = 0; i < stores.length; i++) {
      fps[i] = 1_000 + stores[i];
    }
    return new SnapshotChunk(ORIGIN.nodeId(), 1, 5, 8, index, 2, stores, fps);
  }

  static final long[] ALL = {1_001, 1_002, 1_003, 1_004, 1_005, 1_006, 1_007, 1_008};

  static long[] replica(GossipEngine e) {
    long[] r = e.replicaOf(ORIGIN.nodeId());
    Arrays.sort(r);
    return r;
  }

  @Test
  void chunksOfTwoSendersSplitAtDifferentBoundariesAreNotInstalledTogether() {
    GossipEngine engine = receiver();
    engine.handle(ORIGIN, chunk(0, 1, 2, 3, 4)); // split {1..4 | 5..8}
    engine.handle(RELAYER, chunk(1, 7, 8)); // split {1..6 | 7, 8}
    assertEquals(0, engine.replicaVersion(ORIGIN.nodeId())[1],
        "installed " + Arrays.toString(replica(engine)) + " at version "
            + engine.replicaVersion(ORIGIN.nodeId())[1]);
    assertEquals(0, engine.counter(GossipCounter.SNAPSHOTS_INSTALLED));
    assertEquals(1, engine.counter(GossipCounter.REJECTED));
    // one sender's chunks are one split, even or not (as a node of an earlier release sends)
    engine.handle(RELAYER, chunk(1, 7, 8));
    engine.handle(RELAYER, chunk(0, 1, 2, 3, 4, 5, 6));
    assertEquals(5, engine.replicaVersion(ORIGIN.nodeId())[1]);
    assertArrayEquals(ALL, replica(engine));
    engine.checkInvariants();
  }

  @Test
  void anEvenSplitIsAssembledFromTheChunksOfSeveralSenders() {
    GossipEngine engine = receiver();
    engine.handle(ORIGIN, chunk(0, 1, 2, 3, 4));
    engine.handle(RELAYER, chunk(1, 5, 6, 7, 8));
    assertEquals(5, engine.replicaVersion(ORIGIN.nodeId())[1]);
    assertArrayEquals(ALL, replica(engine));
    engine.checkInvariants();
  }

  @Test
  void theSameChunkCountAtTwoCapsIsTheSameChunks() {
    long[][] s = blocks(new Random(3), 600);
    LocalSummary.Snapshot snap = new LocalSummary.Snapshot(5, s[0][s[0].length - 1], s[0], s[1]);
    List<byte[]> a = engine("a", 1_200).snapshotChunks(ORIGIN.nodeId(), 1, snap);
    List<byte[]> b = engine("b", 1_400).snapshotChunks(ORIGIN.nodeId(), 1, snap);
    assertEquals(a.size(), b.size(), "chunk counts");
    for (int i = 0; i < a.size(); i++) {
      assertArrayEquals(a.get(i), b.get(i), "chunk " + i);
    }
  }

  /** {@code n} ascending store numbers with gaps of 1 to 3 varint bytes, and fingerprints. */
  static long[][] blocks(Random r, int n) {
    long[] stores = new long[n];
    long[] fps = new long[n];
    long next = 1 + r.nextInt(100);
    for (int i = 0; i < n; i++) {
      stores[i] = next;
      fps[i] = i * 7_919L + 13;
      int kind = r.nextInt(10);
      next += kind < 7 ? 1 : kind < 9 ? 1 + r.nextInt(1_000) : 1 + r.nextInt(100_000);
    }
    return new long[][] {stores, fps};
  }

  /**
   * Chunks of one snapshot from two senders with any two caps, arriving in any order, install
   * the origin's exact set or nothing; every sender's chunks fit its cap.
   */
  @Property(tries = 300)
  void chunksOfSendersWithDifferentCapsInstallTheExactSetOrNothing(
      @ForAll @IntRange(min = 1_024, max = 2_500) int capA,
      @ForAll @IntRange(min = 1_024, max = 2_500) int capB,
      @ForAll @IntRange(min = 0, max = 1_500) int n, @ForAll long seed) {
    Random r = new Random(seed);
    long[][] s = blocks(r, n);
    long storeCount = n == 0 ? 0 : s[0][n - 1] + r.nextInt(3);
    LocalSummary.Snapshot snap = new LocalSummary.Snapshot(5, storeCount, s[0], s[1]);
    List<byte[]> a = engine("a", capA).snapshotChunks(ORIGIN.nodeId(), 1, snap);
    List<byte[]> b = engine("b", capB).snapshotChunks(ORIGIN.nodeId(), 1, snap);
    for (byte[] c : a) {
      assertTrue(c.length <= capA);
    }
    for (byte[] c : b) {
      assertTrue(c.length <= capB);
    }
    List<Object[]> arrivals = new ArrayList<>();
    for (byte[] c : a) {
      arrivals.add(new Object[] {ORIGIN, c});
    }
    for (byte[] c : b) {
      arrivals.add(new Object[] {RELAYER, c});
    }
    Collections.shuffle(arrivals, r);
    GossipEngine engine = receiver();
    long[] exact = s[1].clone();
    Arrays.sort(exact);
    for (Object[] m : arrivals) {
      engine.onMessage((PeerAddress) m[0], (byte[]) m[1]);
      if (engine.replicaVersion(ORIGIN.nodeId())[1] != 0) {
        assertArrayEquals(exact, replica(engine), "caps " + capA + " (" + a.size()
            + " chunks) and " + capB + " (" + b.size() + " chunks)");
        assertArrayEquals(s[0], engine.replicaStores(ORIGIN.nodeId())[0]);
      }
    }
    // the first sender's assembly holds its place: every chunk arrived, so it installed
    assertEquals(5, engine.replicaVersion(ORIGIN.nodeId())[1]);
    engine.checkInvariants();
  }
}
