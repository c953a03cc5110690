package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A restarted origin answers with its new generation's header and a snapshot in chunks; the
 * network may deliver a chunk before the header. The header then replaces the old generation's
 * replica but keeps the snapshot of the new generation being assembled, which installs when its
 * last chunk comes: dropped at the header, the origin's set arrived only with a later snapshot.
 */
class RestartSnapshotOvertakesHeaderTest {

  @Test
  void aChunkOfTheNewGenerationArrivingBeforeItsHeaderIsKept() {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipEngine node = new GossipEngine(new PeerAddress("node", "sim:node"), 1,
        MembershipTest.config(), List.of(), time, time, new SplittableRandom(1),
        () -> EngineLoad.IDLE, (to, p) -> { });
    PeerAddress x = new PeerAddress("x", "sim:x");
    node.handle(x, new Ack2(1, List.of(new Update(new DigestEntry("x", 1, 1, 50, 0, 0, false),
        "sim:x", 0, List.of(new Delta(1, Delta.STORE, new long[] {5}))))));
    assertArrayEquals(new long[] {1, 1}, node.replicaVersion("x"));

    // x restarted as generation 2 at version 3: chunk 0 of 2, then the header, then chunk 1
    node.handle(x, new SnapshotChunk("x", 2, 3, 4, 0, 2, new long[] {1, 2},
        new long[] {7, 8}));
    node.handle(x, new Ack2(2, List.of(new Update(new DigestEntry("x", 2, 3, 1, 0, 0, false),
        "sim:x", 0, List.of()))));
    assertArrayEquals(new long[] {2, 0}, node.replicaVersion("x"));
    node.handle(x, new SnapshotChunk("x", 2, 3, 4, 1, 2, new long[] {3, 4},
        new long[] {9, 10}));

    assertArrayEquals(new long[] {2, 3}, node.replicaVersion("x"));
    long[] got = node.replicaOf("x");
    Arrays.sort(got);
    assertArrayEquals(new long[] {7, 8, 9, 10}, got);
    assertEquals(0, node.counter(GossipCounter.SNAPSHOTS_ABANDONED));
    assertEquals(1, node.counter(GossipCounter.SNAPSHOTS_INSTALLED));
    node.checkInvariants();
  }
}
