package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A restart heard only from a third party is adopted once the origin's heartbeat has stopped
 * advancing for half of {@code suspectAfter}, not before (docs/gossip.md, "Restart"): a forged
 * "restart" of a peer that is visibly alive cannot wipe its replica.
 */
class ThirdPartyRestartTest {

  @Test
  void aThirdPartysRestartIsAdoptedOnlyOnceTheHeartbeatStopsForHalfTheSuspicionTime() {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipConfig config = MembershipTest.config();
    long half = config.suspectAfter().toNanos() / 2;
    GossipEngine b = new GossipEngine(new PeerAddress("b", "sim:b"), 1, config, List.of(),
        time, time, new SplittableRandom(5), () -> EngineLoad.IDLE, (to, p) -> { });
    PeerAddress a = new PeerAddress("a", "sim:a");
    PeerAddress relay = new PeerAddress("r", "sim:r");
    b.handle(a, new Ack2(1, List.of(new Update(new DigestEntry("a", 1, 1, 3, 0, 0, false),
        "sim:a", 0, List.of(new Delta(1, Delta.STORE, new long[] {77}))))));
    Ack2 restart = new Ack2(1, List.of(new Update(new DigestEntry("a", 2, 0, 1, 0, 0, false),
        "sim:a", 0, List.of())));

    time.advanceBy(half - 1);
    long rejected = b.counter(GossipCounter.REJECTED);
    b.handle(relay, restart);
    assertEquals(rejected + 1, b.counter(GossipCounter.REJECTED));
    assertArrayEquals(new long[] {1, 1}, b.replicaVersion("a"), "the replica is kept");
    assertArrayEquals(new long[] {77}, b.replicaOf("a"));

    time.advanceBy(1);
    b.handle(relay, restart);
    assertArrayEquals(new long[] {2, 0}, b.replicaVersion("a"), "the restart is adopted");
    assertEquals(0, b.replicaOf("a").length);
    assertEquals(1, b.counter(GossipCounter.GENERATIONS_REPLACED));
  }
}
