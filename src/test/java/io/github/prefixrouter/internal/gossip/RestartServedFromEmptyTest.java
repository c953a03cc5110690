package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A restarted node answering a peer that still holds its previous generation serves the new
 * generation from the empty set (docs/gossip.md, "Restart": a new generation replaces the
 * replica), not from the version the peer held of the old one: the new generation's deltas
 * after that version would leave the peer's restarted replica with a gap, and it would get the
 * new set only an exchange later.
 */
class RestartServedFromEmptyTest {

  @Test
  void aPeerHoldingTheOldGenerationGetsTheNewSetInOneExchange() throws Exception {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipConfig config = MembershipTest.config();
    PeerAddress bAddr = new PeerAddress("b", "sim:b");
    PeerAddress cAddr = new PeerAddress("c", "sim:c");
    List<byte[]> sentByB = new ArrayList<>();
    GossipEngine c = new GossipEngine(cAddr, 1, config, List.of(), time, time,
        new SplittableRandom(3), () -> EngineLoad.IDLE, (to, p) -> { });
    // c holds b's generation 1 at version 2
    c.handle(bAddr, new Ack2(1, List.of(new Update(new DigestEntry("b", 1, 2, 4, 0, 0, false),
        "sim:b", 0, List.of(new Delta(1, Delta.STORE, new long[] {100}),
            new Delta(2, Delta.STORE, new long[] {101}))))));
    assertArrayEquals(new long[] {1, 2}, c.replicaVersion("b"));

    // b restarted as generation 2 and stored five blocks, one change at a time
    GossipEngine b = new GossipEngine(bAddr, 2, config, List.of(), time, time,
        new SplittableRandom(5), () -> EngineLoad.IDLE, (to, p) -> sentByB.add(p));
    long[] expected = new long[5];
    for (int i = 0; i < 5; i++) {
      b.localSummary().onStored(new long[] {1_000 + i});
      expected[i] = BlockFingerprint.of(1_000 + i);
    }
    Arrays.sort(expected);

    b.handle(cAddr, new Syn(1, 1, List.of(new DigestEntry("b", 1, 2, 4, 0, 0, false),
        new DigestEntry("c", 1, 0, 1, 0, 0, false))));
    GossipCodec codec = new GossipCodec(65_536, GossipConfig.MAX_PEERS_LIMIT + 1);
    Ack ack = null;
    for (byte[] p : sentByB) {
      if (codec.decode(p) instanceof Ack a) {
        ack = a;
      }
    }
    Update self = ack.updates().stream().filter(u -> u.header().nodeId().equals("b"))
        .findFirst().orElseThrow();
    assertEquals(2, self.header().generation());
    assertEquals(0, self.fromVersion(), "the new generation is served from the empty set");

    c.handle(bAddr, ack);
    assertArrayEquals(new long[] {2, 5}, c.replicaVersion("b"));
    long[] got = c.replicaOf("b");
    Arrays.sort(got);
    assertArrayEquals(expected, got);
  }
}
