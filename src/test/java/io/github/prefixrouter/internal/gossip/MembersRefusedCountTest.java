package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link GossipCounter#MEMBERS_REFUSED} counts refusals, not peers: every digest entry and
 * update naming a peer a full node does not track counts again, message after message, so an
 * untracked peer adds to it every round for as long as it runs (what the counter's
 * documentation, {@code GossipStats.membersRefused} and its metric say).
 */
class MembersRefusedCountTest {

  @Test
  void anUntrackedPeerCountsAgainWithEveryMessageNamingIt() {
    GossipConfig full = GossipConfig.builder().interval(Duration.ofMillis(100)).maxPeers(1)
        .build();
    SimCluster c = new SimCluster(7, full);
    c.delayNanos = 1_000_000;
    GossipEngine small = c.add(0, 1, List.of(SimCluster.addressOf(1)), full);
    small.start();
    for (int i = 1; i < 4; i++) {
      c.add(i, 1, List.of(SimCluster.addressOf(1)), GossipConfig.builder()
          .interval(Duration.ofMillis(100)).build()).start();
    }
    c.runFor(20 * c.interval());
    assertEquals(1, small.view().peers().size(), "node 0 tracks one peer");
    long after20 = small.counter(GossipCounter.MEMBERS_REFUSED);
    c.runFor(20 * c.interval());
    long after40 = small.counter(GossipCounter.MEMBERS_REFUSED);
    // two peers untracked, yet the count passes two and keeps growing
    assertTrue(after20 > 2, "refused after 20 rounds: " + after20);
    assertTrue(after40 >= after20 + 20, "refused after 20 and 40 rounds: " + after20 + ", "
        + after40);
  }
}
