package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
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
  /**
   * A node tracking {@code maxPeers} members requests no origin it has no room for: a digest
   * naming one is counted as a refusal and asks for nothing, so its peers send it no update or
   * snapshot of an origin it would refuse anyway.
   */
  @Test
  void aFullNodeRequestsNoOriginItCannotTrack() throws Exception {
    GossipConfig full = GossipConfig.builder().interval(Duration.ofMillis(100)).maxPeers(1)
        .build();
    SimulatedScheduler time = new SimulatedScheduler();
    List<byte[]> sent = new ArrayList<>();
    GossipEngine small = new GossipEngine(new PeerAddress("me", "sim:me"), 1, full, List.of(),
        time, time, new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> sent.add(p));
    PeerAddress peer = new PeerAddress("p", "sim:p");
    DigestEntry p = new DigestEntry("p", 1, 0, 1, 0, 0, false);
    small.handle(peer, new Ack2(1, List.of(new Update(p, "sim:p", 0, List.of()))));
    assertEquals(1, small.memberCount());
    long refused = small.counter(GossipCounter.MEMBERS_REFUSED);
    small.handle(peer, new Syn(1, 1, List.of(p, new DigestEntry("q", 1, 7, 1, 0, 0, false))));
    GossipCodec codec = new GossipCodec(65_536, GossipConfig.MAX_PEERS_LIMIT + 1);
    Ack ack = (Ack) codec.decode(sent.get(sent.size() - 1));
    assertEquals(List.of(), ack.requests(), "requests of a full node");
    assertEquals(refused + 1, small.counter(GossipCounter.MEMBERS_REFUSED));
  }
}
