package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A node answers at most {@link GossipEngine#SYNS_ANSWERED_PER_INTERVAL} SYNs of one sender per
 * interval: an ACK is far larger than the SYN it answers, and a peer sending SYNs at a high
 * rate used to get an ACK for every one. Honest initiators never reach the cap.
 */
class SynRateCapTest {

  @Test
  void synsBeyondTheCapOfOneSenderInOneIntervalAreNotAnswered() {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100)).build();
    SimulatedScheduler time = new SimulatedScheduler();
    List<PeerAddress> sentTo = new ArrayList<>();
    GossipEngine node = new GossipEngine(new PeerAddress("me", "sim:me"), 1, config, List.of(),
        time, time, new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> sentTo.add(to));
    node.localSummary().onStored(new long[] {1, 2, 3, 4, 5, 6, 7, 8});
    PeerAddress flooder = new PeerAddress("flooder", "sim:flooder");
    PeerAddress other = new PeerAddress("other", "sim:other");
    List<DigestEntry> digest = List.of(new DigestEntry("flooder", 1, 0, 1, 0, 0, false));
    for (int i = 0; i < 100; i++) {
      node.handle(flooder, new Syn(i + 1, 1, digest));
      time.advanceBy(config.intervalNanos() / 200); // 100 SYNs in half an interval
    }
    node.handle(other, new Syn(1, 1, List.of(new DigestEntry("other", 1, 0, 1, 0, 0, false))));
    long acks = sentTo.stream().filter(flooder::equals).count();
    assertEquals(GossipEngine.SYNS_ANSWERED_PER_INTERVAL, acks,
        "ACKs to a peer that sent 100 SYNs in half an interval");
    assertEquals(100 - GossipEngine.SYNS_ANSWERED_PER_INTERVAL,
        node.counter(GossipCounter.SYNS_REFUSED));
    assertEquals(1, sentTo.stream().filter(other::equals).count(), "another sender's SYN");
    time.advanceBy(config.intervalNanos());
    node.handle(flooder, new Syn(101, 1, digest));
    assertEquals(acks + 1, sentTo.stream().filter(flooder::equals).count(),
        "a SYN of the next interval is answered");
    node.checkInvariants();
  }

  /**
   * The window is one interval from the first SYN it answers: SYNs spread over that interval
   * share its cap of {@link GossipEngine#SYNS_ANSWERED_PER_INTERVAL}, rounds run meanwhile
   * keep it, and a SYN exactly one interval after the window's first opens the next window.
   */
  @Test
  void theCapHoldsForAWholeIntervalFromTheWindowsFirstSyn() {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100)).build();
    SimulatedScheduler time = new SimulatedScheduler();
    GossipEngine node = new GossipEngine(new PeerAddress("me", "sim:me"), 1, config, List.of(),
        time, time, new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> { });
    PeerAddress flooder = new PeerAddress("flooder", "sim:flooder");
    List<DigestEntry> digest = List.of(new DigestEntry("flooder", 1, 0, 1, 0, 0, false));
    long step = config.intervalNanos() / 16;
    for (int i = 0; i < 16; i++) { // 16 SYNs within the window's interval, the last at 15/16
      node.handle(flooder, new Syn(i + 1, 1, digest));
      node.runRound(); // drops the windows that ended only
      time.advanceBy(step);
    }
    assertEquals(16 - GossipEngine.SYNS_ANSWERED_PER_INTERVAL,
        node.counter(GossipCounter.SYNS_REFUSED), "SYNs refused within one interval");
    // now exactly one interval after the window's first SYN
    node.handle(flooder, new Syn(17, 1, digest));
    assertEquals(16 - GossipEngine.SYNS_ANSWERED_PER_INTERVAL,
        node.counter(GossipCounter.SYNS_REFUSED), "the SYN one interval after the first");
    node.checkInvariants();
  }

  /**
   * The windows of at most {@link GossipEngine#SYN_SENDERS_TRACKED} senders are kept: a new
   * sender beyond them is answered, and once a round has dropped the windows that ended, a new
   * sender's SYNs are counted again.
   */
  @Test
  void sendersBeyondThoseTrackedAreAnsweredAndCountedOnceARoundDropsEndedWindows() {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100)).build();
    SimulatedScheduler time = new SimulatedScheduler();
    GossipEngine node = new GossipEngine(new PeerAddress("me", "sim:me"), 1, config, List.of(),
        time, time, new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> { });
    for (int i = 0; i < GossipEngine.SYN_SENDERS_TRACKED; i++) {
      node.handle(new PeerAddress("s" + i, "sim:s" + i), new Syn(1, 1, List.of()));
    }
    PeerAddress late = new PeerAddress("late", "sim:late");
    for (int i = 0; i < 2 * GossipEngine.SYNS_ANSWERED_PER_INTERVAL; i++) {
      node.handle(late, new Syn(i + 1, 1, List.of()));
    }
    assertEquals(0, node.counter(GossipCounter.SYNS_REFUSED),
        "SYNs refused of a sender beyond those tracked");
    time.advanceBy(config.intervalNanos());
    node.runRound(); // drops the windows that ended
    for (int i = 0; i < 2 * GossipEngine.SYNS_ANSWERED_PER_INTERVAL; i++) {
      node.handle(late, new Syn(100 + i, 1, List.of()));
    }
    assertEquals(GossipEngine.SYNS_ANSWERED_PER_INTERVAL,
        node.counter(GossipCounter.SYNS_REFUSED),
        "SYNs refused of a sender once the ended windows were dropped");
    node.checkInvariants();
  }

  /**
   * Honest clusters never reach the cap: rounds jittered as far as allowed (±50%), a large
   * fanout, seeds among the targets, delays that vary by more than an interval and loss.
   */
  @Test
  void honestInitiatorsNeverReachTheCap() {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(200)).jitter(0.5)
        .fanout(8).suspectAfter(Duration.ofSeconds(2)).deadAfter(Duration.ofSeconds(10))
        .forgetAfter(Duration.ofSeconds(40)).build();
    for (long seed = 1; seed <= 3; seed++) {
      SimCluster c = new SimCluster(seed, config);
      List<PeerAddress> seeds = List.of(SimCluster.addressOf(0), SimCluster.addressOf(1));
      for (int i = 0; i < 12; i++) {
        c.add(i, 1, seeds).start();
      }
      c.delayNanos = 2_000_000;
      c.extraDelayNanos = 300_000_000;
      c.loss = 0.05;
      SplittableRandom rnd = new SplittableRandom(seed);
      for (int r = 0; r < 150; r++) {
        c.nodes.get(rnd.nextInt(c.nodes.size())).localSummary()
            .onStored(new long[] {rnd.nextLong()});
        c.runFor(c.interval());
      }
      long syns = 0;
      for (GossipEngine e : c.nodes) {
        assertEquals(0, e.counter(GossipCounter.SYNS_REFUSED), e.self().nodeId() + ", seed "
            + seed);
        syns += e.counter(GossipCounter.DIGEST_BYTES_SENT) > 0 ? 1 : 0;
      }
      assertTrue(syns == c.nodes.size(), "every node sent digests");
      c.heal();
      c.runFor(20 * c.interval());
      assertTrue(c.converged(), c.firstDivergence());
    }
  }
}
