package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The local tree changes the summary from its own thread while gossip answers a peer: an
 * update about this node must still carry no delta past its header's version, or the peer's
 * strict decoder drops the whole message (every other update in it included). The clock, which
 * the engine reads between taking its own entry and its deltas, stores a block each time it is
 * read: the tree's thread acting at exactly that moment, deterministically.
 */
class ConcurrentLocalChangeTest {

  @Test
  void anUpdateAboutThisNodeNeverCarriesDeltasPastItsHeader() throws MalformedMessageException {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100)).build();
    PeerAddress me = new PeerAddress("me", "sim:me");
    PeerAddress peer = new PeerAddress("peer", "sim:peer");
    List<byte[]> sent = new ArrayList<>();
    long[] nextBlock = {1_000};
    boolean[] treeActive = {false};
    GossipEngine[] engine = new GossipEngine[1];
    Clock clock = () -> {
      if (treeActive[0]) {
        engine[0].localSummary().onStored(new long[] {nextBlock[0]++});
      }
      return time.nanoTime();
    };
    engine[0] = new GossipEngine(me, 1, config, List.of(), clock, time, new SplittableRandom(1),
        () -> EngineLoad.IDLE, (to, p) -> sent.add(p));
    GossipEngine e = engine[0];
    GossipCodec codec = new GossipCodec(config.messageByteCap(), config.maxPeers() + 1);
    e.handle(peer, new Ack2(1, List.of(new Update(new DigestEntry("peer", 1, 0, 1, 0, 0, false),
        null, 0, List.of()))));
    e.localSummary().onStored(new long[] {1, 2});

    // the peer lacks this node's version 1: the answer carries delta 1, remembered in flight
    e.handle(peer, new Syn(1, 1, List.of(new DigestEntry("peer", 1, 0, 2, 0, 0, false),
        new DigestEntry("me", 1, 0, 0, 0, 0, false))));
    // that answer was lost: past the in-flight window the peer asks again, while the tree
    // stores blocks whenever the engine reads the clock
    time.advanceBy(Duration.ofSeconds(1).toNanos());
    sent.clear();
    treeActive[0] = true;
    e.handle(peer, new Syn(2, 1, List.of(new DigestEntry("peer", 1, 0, 3, 0, 0, false),
        new DigestEntry("me", 1, 0, 0, 0, 0, false))));
    treeActive[0] = false;

    assertEquals(1, sent.size());
    Ack ack = (Ack) codec.decode(sent.get(0)); // MalformedMessageException before the fix
    Update own = ack.updates().stream().filter(u -> u.header().nodeId().equals("me"))
        .findFirst().orElseThrow();
    assertTrue(own.fromVersion() + own.deltas().size() <= own.header().version());
    assertTrue(!own.deltas().isEmpty());
  }
}
