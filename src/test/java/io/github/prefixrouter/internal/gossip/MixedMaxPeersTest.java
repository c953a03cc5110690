package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Nodes configured with different {@code maxPeers} gossip with each other. A cluster changing
 * the setting by a rolling restart has both values at once, and a node with the smaller one
 * used to reject every digest listing more origins than it tracks as malformed: it then heard
 * nothing from the larger nodes, in a cluster larger than its own setting.
 */
class MixedMaxPeersTest {

  static GossipConfig config(int maxPeers) {
    return GossipConfig.builder().interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofSeconds(2)).deadAfter(Duration.ofSeconds(4))
        .forgetAfter(Duration.ofSeconds(8)).maxPeers(maxPeers).build();
  }

  @Test
  void aNodeTrackingFewerPeersStillTakesTheOthersGossip() {
    SimCluster c = new SimCluster(7, config(64));
    for (int i = 0; i < 8; i++) {
      c.add(i, 1, List.of(SimCluster.addressOf(0))).start();
    }
    GossipEngine small = c.add(8, 1, List.of(SimCluster.addressOf(0)), config(3));
    small.start();
    c.delayNanos = 1_000_000;
    long[] hashes = {0x9E3779B97F4A7C15L, 0x3C6EF372FE94F82AL, 0xDAA66D2C7DDF743FL};
    c.nodes.get(0).localSummary().onStored(hashes);
    c.runFor(50 * c.interval());
    small.checkInvariants();
    assertEquals(0, small.counter(GossipCounter.MALFORMED_DROPPED),
        "digests of nine origins are well formed for a node that tracks three");
    assertEquals(3, small.memberCount());
    assertTrue(small.counter(GossipCounter.MEMBERS_REFUSED) > 0);
    PeerView origin = small.view().peers().stream()
        .filter(p -> p.address().equals(SimCluster.addressOf(0))).findFirst().orElseThrow();
    assertEquals(3, origin.replicaBlocks(), "node 0's blocks are replicated on the small node");
    for (GossipEngine e : c.nodes) {
      e.checkInvariants();
      assertEquals(0, e.counter(GossipCounter.MALFORMED_DROPPED));
    }
  }
}
