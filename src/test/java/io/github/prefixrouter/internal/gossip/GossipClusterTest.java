package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class GossipClusterTest {

  static GossipConfig fast() {
    return GossipConfig.builder().interval(Duration.ofMillis(100)).suspectAfter(Duration.ofMillis(500))
        .deadAfter(Duration.ofMillis(1_500)).forgetAfter(Duration.ofSeconds(6)).build();
  }

  @Test
  void smallClusterConvergesOnEveryonesBlocks() {
    SimCluster c = SimCluster.of(4, 42, fast());
    c.delayNanos = 2_000_000;
    for (int i = 0; i < 4; i++) {
      GossipEngine e = c.nodes.get(i);
      for (int b = 0; b < 50; b++) {
        e.localSummary().onStored(new long[] {i * 1000L + b + 1});
      }
    }
    int rounds = c.runUntilConverged(50);
    assertTrue(rounds >= 0, c.firstDivergence());
    // converging does not need node 0 to have sent a SYN to every peer (relays carry the
    // blocks), but round trips are sampled only from its own SYNs: give it a few more rounds
    c.runFor(20 * c.interval());
    GossipEngine n0 = c.nodes.get(0);
    GossipView v = n0.view();
    assertEquals(3, v.peers().size());
    for (PeerView p : v.peers()) {
      assertEquals(50, p.replicaBlocks());
      assertTrue(p.rttNanos() >= 4_000_000, "rtt " + p.rttNanos());
    }
    // query: node 2 holds 1..50 at chain hashes 2001..2050
    long[] chain = {2001, 2002, 2003, 9999};
    int[] out = new int[n0.slotCapacity()];
    assertEquals(3, n0.leadingBlocks(chain, chain.length, out));
    PeerView p2 = v.peers().stream().filter(p -> p.address().nodeId().equals("node-2"))
        .findFirst().orElseThrow();
    assertEquals(3, out[p2.slot()]);
    for (GossipEngine e : c.nodes) {
      e.checkInvariants();
    }
    assertNotNull(n0.stats());
  }
}
