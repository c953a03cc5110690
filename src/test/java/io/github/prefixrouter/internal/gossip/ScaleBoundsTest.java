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

  /**
   * A formed cluster of 100 nodes in which every node's cache changes every interval: each node
   * sends at most {@code fanout} + 2 SYNs a round, no message above {@code messageByteCap}, and
   * once the changes stop every replica is its owner's exact set within 2 log2(N) + 3 rounds.
   */
  @Test
  void aBusyClusterOfManyNodesStaysWithinItsPerRoundBoundsAndConverges() {
    int n = 100;
    GossipConfig config = nodeLike(1024);
    SimCluster c = cluster(n, 5, config);
    for (int r = 0; r < 100 && !DisseminationMatrixTest.membershipComplete(c, n); r++) {
      c.runFor(c.interval());
    }
    assertTrue(DisseminationMatrixTest.membershipComplete(c, n), "the cluster did not form");
    java.util.Map<String, long[]> syns = new java.util.HashMap<>();
    int[] largest = new int[1];
    c.taken = (from, p) -> {
      if (p[0] == GossipMessage.TYPE_SYN) {
        syns.computeIfAbsent(from.nodeId(), k -> new long[1])[0]++;
      }
      largest[0] = Math.max(largest[0], p.length);
    };
    long[] roundsBefore = new long[n];
    for (int i = 0; i < n; i++) {
      roundsBefore[i] = c.nodes.get(i).counter(GossipCounter.ROUNDS);
    }
    SplittableRandom rnd = new SplittableRandom(5);
    long[][] held = new long[n][];
    for (int r = 0; r < 10; r++) {
      for (int i = 0; i < n; i++) {
        long[] add = new long[8];
        for (int k = 0; k < add.length; k++) {
          add[k] = rnd.nextLong();
        }
        LocalSummary s = c.nodes.get(i).localSummary();
        if (held[i] != null) {
          s.onEvicted(held[i]);
        }
        s.onStored(add);
        held[i] = add;
      }
      c.runFor(c.interval());
    }
    for (int i = 0; i < n; i++) {
      GossipEngine e = c.nodes.get(i);
      long rounds = e.counter(GossipCounter.ROUNDS) - roundsBefore[i];
      long sent = syns.getOrDefault(e.self().nodeId(), new long[1])[0];
      // the last round's spread SYNs may still be due: one round more
      long bound = (config.fanout() + 2L) * (rounds + 1);
      assertTrue(sent <= bound,
          e.self().nodeId() + " sent " + sent + " SYNs in " + rounds + " rounds, bound " + bound);
      assertEquals(0, e.counter(GossipCounter.SYNS_REFUSED), "SYNs " + e.self().nodeId()
          + " left unanswered (more than GossipEngine.SYNS_ANSWERED_PER_INTERVAL of a sender)");
      e.checkInvariants();
    }
    assertTrue(largest[0] <= config.messageByteCap(),
        "a message of " + largest[0] + " bytes, cap " + config.messageByteCap());
    int bound = (int) Math.ceil(2 * Math.log(n) / Math.log(2) + 3);
    int rounds = c.runUntilConverged(bound);
    assertTrue(rounds >= 0, "not converged in " + bound + " rounds: " + c.firstDivergence());
  }
}
