package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * What gossip promises as a cluster grows (docs/gossip.md, "Memory bounds and drop policy" and
 * "Message size"), checked in simulated time on clusters of many nodes.
 */
class ScaleBoundsTest {

  private static final int BLOCKS = 200;

  /** A node's gossip settings ({@code RouterConfig}'s defaults), with {@code maxPeers}. */
  static GossipConfig nodeLike(int maxPeers) {
    return GossipConfig.builder().interval(Duration.ofMillis(200)).fanout(3)
        .suspectAfter(Duration.ofSeconds(2)).deadAfter(Duration.ofSeconds(10))
        .forgetAfter(Duration.ofSeconds(40)).maxPeers(maxPeers).build();
  }

  static SimCluster cluster(int n, long seed, GossipConfig config) {
    SimCluster c = new SimCluster(seed, config);
    List<PeerAddress> seeds =
        List.of(SimCluster.addressOf(0), SimCluster.addressOf(1), SimCluster.addressOf(2));
    for (int i = 0; i < n; i++) {
      c.add(i, 1, seeds).start();
    }
    c.delayNanos = 2_000_000;
    c.extraDelayNanos = 1_000_000;
    return c;
  }

  static long sum(SimCluster c, GossipCounter... counters) {
    long s = 0;
    for (GossipEngine e : c.nodes) {
      for (GossipCounter k : counters) {
        s += e.counter(k);
      }
    }
    return s;
  }

  /**
   * A cluster larger than its nodes' {@code maxPeers}: each node tracks {@code maxPeers}
   * origins and refuses the others. A refused origin's blocks are of no use to the node, so
   * each peer sends them to it at most once every 32 intervals (its header, a few bytes, in
   * every exchange, as a digest entry); they used to go with every exchange, for ever, in an
   * idle cluster.
   */
  @Test
  void originsANodeHasNoRoomForAreNotSentToItInEveryExchange() {
    int n = 24;
    int maxPeers = 8;
    SimCluster c = cluster(n, 11, nodeLike(maxPeers));
    SplittableRandom rnd = new SplittableRandom(11);
    for (GossipEngine e : c.nodes) {
      long[] blocks = new long[BLOCKS];
      for (int k = 0; k < BLOCKS; k++) {
        blocks[k] = rnd.nextLong();
      }
      e.localSummary().onStored(blocks);
    }
    c.runFor(40 * c.interval()); // settled: every node holds maxPeers members
    for (GossipEngine e : c.nodes) {
      assertEquals(maxPeers, e.memberCount(), e.self().nodeId() + "'s members");
    }
    long before = sum(c, GossipCounter.RELAYED_DELTA_BYTES_SENT,
        GossipCounter.OWN_DELTA_BYTES_SENT, GossipCounter.SNAPSHOT_BYTES_SENT);
    long refusedBefore = sum(c, GossipCounter.MEMBERS_REFUSED);
    int rounds = 30; // fewer than 32: each origin goes to each peer at most once
    c.runFor(rounds * c.interval());
    long sent = sum(c, GossipCounter.RELAYED_DELTA_BYTES_SENT,
        GossipCounter.OWN_DELTA_BYTES_SENT, GossipCounter.SNAPSHOT_BYTES_SENT) - before;
    System.out.printf("%d nodes, maxPeers %d: %d bytes of blocks sent in %d intervals%n", n,
        maxPeers, sent, rounds);
    assertTrue(sum(c, GossipCounter.MEMBERS_REFUSED) > refusedBefore,
        "the nodes refused no origin: the test tests nothing");
    // one origin's set, as deltas or a snapshot: at most 5 bytes a block, plus framing
    long oneOrigin = 5L * BLOCKS + 128;
    long bound = (long) n * (n - 1) * oneOrigin;
    assertTrue(sent <= bound, "the idle cluster sent " + sent + " bytes of blocks in " + rounds
        + " intervals, bound " + bound + " (each origin once to each peer)");
  }
}
