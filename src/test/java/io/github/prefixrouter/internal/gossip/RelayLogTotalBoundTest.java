package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
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
 * The relay logs hold at most {@code relayLogMaxHashesTotal} hashes in all, not only at the
 * start of a round: peers that join one after another between two rounds, each filling its log
 * to the share it got when it joined, must not add up to more.
 */
class RelayLogTotalBoundTest {

  @Test
  void relayLogsStayWithinTheirTotalWhilePeersJoinBetweenRounds() {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .relayLogMaxHashesPerOrigin(1_000).relayLogMaxHashesTotal(1_000).build();
    GossipEngine engine = new GossipEngine(new PeerAddress("me", "sim:me"), 1, config,
        List.of(), time, time, new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> {});
    long fingerprint = 1;
    for (int i = 0; i < 10; i++) {
      PeerAddress peer = new PeerAddress("p" + i, "sim:p" + i);
      List<Delta> deltas = new ArrayList<>();
      for (int v = 1; v <= 100; v++) {
        long[] stored = new long[10];
        for (int k = 0; k < stored.length; k++) {
          stored[k] = fingerprint++;
        }
        deltas.add(new Delta(v, Delta.STORE, stored));
      }
      engine.handle(peer, new Ack2(1, List.of(new Update(
          new DigestEntry(peer.nodeId(), 1, 100, 1, 0, 0, false), null, 0, deltas))));
      engine.checkInvariants();
      assertTrue(engine.relayHashCount() <= 1_000,
          "relay logs hold " + engine.relayHashCount() + " hashes after " + (i + 1) + " peers");
    }
  }
}
