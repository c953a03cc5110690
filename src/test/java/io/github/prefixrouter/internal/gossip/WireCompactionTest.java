package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * What wire format version 2 leaves out: block hashes are replicated as 32-bit fingerprints
 * (a false match costs one block of overestimate), and an update omits the origin's address
 * when the receiver listed the origin.
 */
class WireCompactionTest {

  final PeerAddress me = new PeerAddress("me", "sim:me");
  final PeerAddress peer = new PeerAddress("peer", "sim:peer");
  final List<byte[]> sent = new ArrayList<>();
  final SimulatedScheduler time = new SimulatedScheduler();
  final GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100)).build();
  final GossipEngine engine = new GossipEngine(me, 10, config, List.of(), time, time,
      new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> sent.add(p));
  final GossipCodec codec = new GossipCodec(config.messageByteCap(), config.maxPeers() + 1);

  @Test
  void replicasHoldFingerprintsAndAFalseMatchExtendsTheEstimateByOneBlock() {
    long a = 0x1234_5678_9ABC_DEF0L;
    long b = 0x0FED_CBA9_8765_4321L;
    long f = BlockFingerprint.of(b);
    long collidesWithB = (1L << 32) | (f ^ 1); // folds to f as well: (f ^ 1) ^ 1
    assertEquals(f, BlockFingerprint.of(collidesWithB));
    engine.handle(peer, new Ack2(3, List.of(new Update(
        new DigestEntry("peer", 3, 1, 1, 0, 0, false), "sim:peer", 0,
        List.of(new Delta(1, Delta.STORE,
            new long[] {BlockFingerprint.of(a), BlockFingerprint.of(b)}))))));
    int[] out = new int[engine.slotCapacity()];
    assertEquals(2, engine.leadingBlocks(new long[] {a, b, 99}, 3, out));
    assertEquals(2, engine.leadingBlocks(new long[] {a, collidesWithB, 99}, 3, out));
    assertEquals(1, engine.leadingBlocks(new long[] {a, b + 1, 99}, 3, out));
  }

  @Test
  void anAnswerOmitsTheAddressOfOriginsTheInitiatorListed() throws MalformedMessageException {
    engine.localSummary().onStored(new long[] {5});
    // the peer lists us at version 0 and lists itself: our update needs no address
    engine.handle(peer, new Syn(1, 3, List.of(new DigestEntry("peer", 3, 0, 1, 0, 0, false),
        new DigestEntry("me", 10, 0, 0, 0, 0, false))));
    Ack listed = (Ack) codec.decode(sent.remove(sent.size() - 1));
    Update u = listed.updates().get(0);
    assertEquals("me", u.header().nodeId());
    assertNull(u.address());
    assertEquals(1, u.deltas().size());
    // a newcomer that does not list us gets our address
    PeerAddress other = new PeerAddress("other", "sim:other");
    engine.handle(other, new Syn(1, 4, List.of(new DigestEntry("other", 4, 0, 1, 0, 0, false))));
    Ack fresh = (Ack) codec.decode(sent.remove(sent.size() - 1));
    Update mine = fresh.updates().stream().filter(x -> x.header().nodeId().equals("me"))
        .findFirst().orElseThrow();
    assertEquals("sim:me", mine.address());
  }

  @Test
  void aThirdPartyUpdateWithoutAddressTeachesNoUnknownOriginUntilOneWithAddressArrives() {
    Update noAddress = new Update(new DigestEntry("third", 2, 1, 1, 0, 0, false), null, 0,
        List.of(new Delta(1, Delta.STORE, new long[] {42})));
    engine.handle(peer, new Ack2(3, List.of(noAddress)));
    assertNull(engine.replicaOf("third"));
    engine.handle(peer, new Ack2(3, List.of(new Update(noAddress.header(), "sim:third", 0,
        noAddress.deltas()))));
    assertNotNull(engine.replicaOf("third"));
    assertArrayEquals(new long[] {42}, engine.replicaOf("third"));
    engine.checkInvariants();
  }
}
