package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A peer slower than the gossip interval: a round does not send a SYN to a peer whose last SYN
 * is still unanswered (over HTTP/1.1 every message in flight holds a connection of its own, and
 * every new one a handshake), yet a peer whose SYNs are all lost still gets one now and then.
 */
class SynInFlightTest {

  static final long MS = 1_000_000L;

  /** Two engines; everything node 0 sends to node 1 takes {@code slowMs} to arrive. */
  static final class Pair {
    final SimulatedScheduler time = new SimulatedScheduler();
    final GossipCodec codec = new GossipCodec(65_536, GossipConfig.MAX_PEERS_LIMIT + 1);
    final PeerAddress a0 = new PeerAddress("node-0", "sim:0");
    final PeerAddress a1 = new PeerAddress("node-1", "sim:1");
    final GossipEngine n0;
    final GossipEngine n1;
    final long slowNanos;
    boolean lose01;
    int synsInFlight01;
    int maxSynsInFlight01;
    int synsSent01;

    Pair(GossipConfig config, long slowMs) {
      slowNanos = slowMs * MS;
      n0 = new GossipEngine(a0, 1, config, List.of(a1), time, time, new SplittableRandom(1),
          () -> EngineLoad.IDLE, (to, p) -> send(a0, to, p));
      n1 = new GossipEngine(a1, 1, config, List.of(a0), time, time, new SplittableRandom(2),
          () -> EngineLoad.IDLE, (to, p) -> send(a1, to, p));
    }

    boolean isSyn(byte[] payload) {
      try {
        return codec.decode(payload) instanceof GossipMessage.Syn;
      } catch (io.github.prefixrouter.internal.wire.MalformedMessageException e) {
        throw new AssertionError(e);
      }
    }

    void send(PeerAddress from, PeerAddress to, byte[] payload) {
      boolean syn01 = from.equals(a0) && isSyn(payload);
      if (syn01) {
        synsSent01++;
      }
      if (from.equals(a0) && lose01) {
        return;
      }
      if (syn01) {
        synsInFlight01++;
        maxSynsInFlight01 = Math.max(maxSynsInFlight01, synsInFlight01);
      }
      GossipEngine target = to.equals(a0) ? n0 : n1;
      time.schedule(from.equals(a0) ? slowNanos : 1 * MS, () -> {
        if (syn01) {
          synsInFlight01--;
        }
        target.onMessage(from, payload);
      });
    }
  }

  static GossipConfig config() {
    return GossipConfig.builder().interval(Duration.ofMillis(50)).fanout(3)
        .suspectAfter(Duration.ofSeconds(2)).deadAfter(Duration.ofSeconds(10))
        .forgetAfter(Duration.ofSeconds(40)).build();
  }

  @Test
  void aSlowPeerHasOneSynInFlightAtATimeOnceItHasAnswered() {
    Pair p = new Pair(config(), 1_000);
    p.n0.start();
    p.n1.start();
    p.time.advanceBy(5_000 * MS); // the first answer arrives after about 1 s
    assertTrue(p.n0.counter(GossipCounter.RTT_SAMPLES) > 0);
    int early = p.maxSynsInFlight01;
    p.maxSynsInFlight01 = 0;
    p.n0.localSummary().onStored(new long[] {7, 8, 9});
    p.time.advanceBy(20_000 * MS);
    // without the check: 21 SYNs on the 1 s link at once, one per 50 ms round
    assertEquals(1, p.maxSynsInFlight01, "SYNs in flight to the slow peer at once");
    // before the first answer the engine backs off: 75, 150, 300, 600 ms, then every 1 s
    assertTrue(early <= 5, early + " SYNs in flight at once before the first answer");
    assertTrue(p.n0.counter(GossipCounter.SYNS_IN_FLIGHT_SKIPPED) > 0);
    // and the slow peer still gets node 0's news
    long[] rep = p.n1.replicaOf("node-0");
    java.util.Arrays.sort(rep);
    assertTrue(java.util.Arrays.equals(new long[] {7, 8, 9}, rep), java.util.Arrays.toString(rep));
  }

  @Test
  void aPeerWhoseSynsAreLostStillGetsOneAtLeastEverySuspectAfterHalf() {
    Pair p = new Pair(config(), 1);
    p.n0.start();
    p.n1.start();
    p.time.advanceBy(2_000 * MS);
    p.lose01 = true; // node 0's messages to node 1 are all lost (node 1 still answers none)
    int before = p.synsSent01;
    p.time.advanceBy(9_000 * MS); // less than deadAfter: node 1 stays a live member
    int sent = p.synsSent01 - before;
    // one every 50 ms without the check (180); with it, backing off to one a second
    assertTrue(sent >= 9 && sent <= 20, sent + " SYNs in 9 s to a peer that answers none");
    p.lose01 = false;
    long answered = p.n0.counter(GossipCounter.RTT_SAMPLES);
    p.time.advanceBy(1_100 * MS);
    assertTrue(p.n0.counter(GossipCounter.RTT_SAMPLES) > answered,
        "a SYN within suspectAfter / 2 of the link coming back is answered");
  }
  /**
   * An ACK ends the wait for the SYNs to that peer sent before the one it answers too: they are
   * taken for lost, and the next SYN waits one window again. Here the first SYN is lost and the
   * second answered after 1 s, which makes the peer's window 2 s: the lost SYN, kept, would hold
   * the next one back for 2 s from when it was sent.
   */
  @Test
  void anAckEndsTheWaitForTheEarlierSynsToThatPeer() throws Exception {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipCodec codec = new GossipCodec(65_536, GossipConfig.MAX_PEERS_LIMIT + 1);
    List<Long> rounds = new ArrayList<>();
    PeerAddress a1 = new PeerAddress("node-1", "sim:1");
    GossipEngine n0 = new GossipEngine(new PeerAddress("node-0", "sim:0"), 1, config(),
        List.of(), time, time, new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> {
          try {
            if (codec.decode(p) instanceof GossipMessage.Syn syn && to.equals(a1)) {
              rounds.add(syn.round());
            }
          } catch (io.github.prefixrouter.internal.wire.MalformedMessageException e) {
            throw new AssertionError(e);
          }
        });
    n0.handle(a1, new GossipMessage.Ack2(1, List.of(new GossipMessage.Update(
        new GossipMessage.DigestEntry("node-1", 1, 0, 1, 0, 0, false), "sim:1", 0, List.of()))));
    n0.runRound(); // lost
    time.advanceBy(80 * MS); // past the window of 75 ms before any round trip is known
    n0.runRound(); // answered after 1 s
    assertEquals(2, rounds.size(), "SYNs " + rounds);
    time.advanceBy(1_000 * MS);
    n0.handle(a1, new GossipMessage.Ack(rounds.get(1), 1, List.of(), List.of()));
    assertEquals(1_000 * MS, n0.view().peers().get(0).rttNanos());
    n0.runRound();
    assertEquals(3, rounds.size(), "a SYN right after the answer: SYNs " + rounds);
  }
}
