package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Request;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

/**
 * A running gossip engine fed mutated gossip frames from a peer it knows: whatever fails to
 * decode is counted as malformed and changes nothing (replica, version, membership); whatever
 * still decodes is handled without an internal error; nothing is thrown out of
 * {@link GossipEngine#onMessage}.
 */
class GossipMalformedInputTest {

  private static final GossipConfig CONFIG = GossipConfig.builder()
      .interval(Duration.ofMillis(100)).suspectAfter(Duration.ofMillis(500))
      .deadAfter(Duration.ofMillis(1500)).forgetAfter(Duration.ofSeconds(5)).build();
  private static final long[] OWN = {21, 22, 23};

  private final SimCluster c;
  private final GossipEngine receiver;
  private final GossipCodec codec = new GossipCodec(CONFIG.messageByteCap(), CONFIG.maxPeers() + 1);
  private final List<byte[]> valid;

  GossipMalformedInputTest() {
    c = SimCluster.of(2, 3, CONFIG);
    receiver = c.nodes.get(0);
    c.nodes.get(1).localSummary().onStored(OWN);
    if (c.runUntilConverged(100) < 0) {
      throw new IllegalStateException(c.firstDivergence());
    }
    c.nodes.get(1).stop();
    DigestEntry e = new DigestEntry("node-1", 1, 9, 40, 3, 1, true);
    Update u = new Update(e, "sim:1", 2, List.of(new Delta(3, Delta.STORE, new long[] {5, 6}),
        new Delta(4, Delta.EVICT, new long[] {5}), new Delta(5, Delta.CLEAR, Delta.NO_HASHES)));
    valid = List.of(
        codec.encode(new Syn(7, 1, List.of(e, new DigestEntry("x", 2, 3, 4, 0, 0, false)))),
        codec.encode(new Ack(7, 1, List.of(u), List.of(new Request("node-0", 1, 0)))),
        codec.encode(new Ack2(1, List.of(u))),
        codec.encode(new SnapshotChunk("node-1", 1, 12, 9, 0, 2, new long[] {1, 4, 9},
            new long[] {1, 2, 3})));
  }

  @Property(tries = 500)
  void undecodableFramesAreCountedAndChangeNothing(
      @ForAll @IntRange(min = 0, max = 3) int which,
      @ForAll @IntRange(min = 0, max = 1 << 20) int where,
      @ForAll @IntRange(min = 0, max = 8) int how,
      @ForAll byte b) {
    byte[] m = io.github.prefixrouter.internal.route.FrameMutations.mutate(
        valid.get(which), where, how, b);
    boolean malformed;
    try {
      codec.decode(m);
      malformed = false;
    } catch (MalformedMessageException e) {
      malformed = true;
    }
    if (!malformed) {
      // a mutation that still decodes is a well-formed message and may change state, but it
      // must be handled without an internal error and leave the engine consistent
      long errors = receiver.counter(GossipCounter.INTERNAL_ERRORS);
      receiver.onMessage(c.nodes.get(1).self(), m);
      receiver.checkInvariants();
      assertEquals(errors, receiver.counter(GossipCounter.INTERNAL_ERRORS));
      return;
    }
    long dropped = receiver.counter(GossipCounter.MALFORMED_DROPPED);
    long[] replica = receiver.replicaOf("node-1");
    long[] version = receiver.replicaVersion("node-1");
    int members = receiver.memberCount();
    receiver.onMessage(c.nodes.get(1).self(), m);
    assertEquals(dropped + 1, receiver.counter(GossipCounter.MALFORMED_DROPPED));
    long[] after = receiver.replicaOf("node-1");
    Arrays.sort(replica);
    Arrays.sort(after);
    assertArrayEquals(replica, after);
    assertArrayEquals(version, receiver.replicaVersion("node-1"));
    assertEquals(members, receiver.memberCount());
    receiver.checkInvariants();
    assertTrue(receiver.counter(GossipCounter.INTERNAL_ERRORS) == 0);
  }
}
