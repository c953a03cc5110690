package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

/**
 * Nodes with different {@code messageByteCap}s (a rolling change of the setting) gossip with each
 * other. A node used to decode only messages within its own cap, so a node of a smaller cap
 * rejected as malformed every digest, update and snapshot chunk of a peer that were larger, and
 * never replicated a peer whose deltas or snapshot did not fit; and a node of a larger cap took
 * a snapshot of a smaller-cap peer, split into more chunks, for one of an origin too large to
 * assemble, and kept a truncated replica of it. Messages are now read up to the largest cap any
 * node may have, and a snapshot's chunks are bounded by the smallest cap's.
 */
class MixedMessageCapTest {

  static GossipConfig config(int cap) {
    return config(cap, 65_536);
  }

  static GossipConfig config(int cap, long deltaLog) {
    return GossipConfig.builder().interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofSeconds(2)).deadAfter(Duration.ofSeconds(4))
        .forgetAfter(Duration.ofSeconds(8)).messageByteCap(cap)
        .snapshotBytesPerExchange(Math.max(1 << 20, cap)).deltaLogMaxHashes(deltaLog).build();
  }

  static long[] blocks(int seed, int n) {
    SplittableRandom r = new SplittableRandom(seed);
    long[] h = new long[n];
    for (int i = 0; i < n; i++) {
      h[i] = r.nextLong();
    }
    return h;
  }

  /** What went wrong, if the cluster has not converged. */
  static String divergence(SimCluster c, List<Integer> caps) {
    StringBuilder s = new StringBuilder(String.valueOf(c.firstDivergence()));
    for (int i = 0; i < c.nodes.size(); i++) {
      GossipEngine e = c.nodes.get(i);
      s.append("; node-").append(i).append(" (cap ").append(caps.get(i)).append(") dropped ")
          .append(e.counter(GossipCounter.MALFORMED_DROPPED)).append(" as malformed");
    }
    return s.toString();
  }

  @Test
  void aNodeOfASmallerCapTakesTheLargerMessagesOfItsPeers() {
    List<Integer> caps = List.of(1 << 20, 65_536, 65_536);
    SimCluster c = new SimCluster(11, config(65_536));
    for (int i = 0; i < caps.size(); i++) {
      c.add(i, 1, List.of(SimCluster.addressOf(0)), config(caps.get(i))).start();
    }
    c.delayNanos = 1_000_000;
    c.runFor(10 * c.interval());
    // 20,000 blocks at once: one delta of 80 KB, and a snapshot of about 100 KB in one chunk
    c.nodes.get(0).localSummary().onStored(blocks(1, 20_000));
    int rounds = c.runUntilConverged(100);
    assertTrue(rounds >= 0, "not converged in 100 rounds: " + divergence(c, caps));
    for (GossipEngine e : c.nodes) {
      e.checkInvariants();
      assertEquals(0, e.counter(GossipCounter.MALFORMED_DROPPED), divergence(c, caps));
    }
    // a node that joins later gets the big node's set as a snapshot, from it or from a relayer
    GossipEngine late = c.add(3, 1, List.of(SimCluster.addressOf(1)), config(65_536));
    late.start();
    List<Integer> all = List.of(1 << 20, 65_536, 65_536, 65_536);
    int lateRounds = c.runUntilConverged(100);
    assertTrue(lateRounds >= 0, "the late node: " + divergence(c, all));
    assertEquals(0, late.counter(GossipCounter.MALFORMED_DROPPED), divergence(c, all));
  }

  @Test
  void aNodeOfALargerCapAssemblesTheManyChunksOfASmallerCapsSnapshot() {
    // the origin's log is too short for its 5,000 blocks: a new peer gets a snapshot, in
    // 26 chunks of 1 KiB, where a 16 MiB node assembled at most 6
    List<Integer> caps = List.of(1_024, 16 << 20);
    SimCluster c = new SimCluster(13, config(1_024));
    GossipEngine origin = c.add(0, 1, List.of(), config(1_024, 100));
    origin.start();
    origin.localSummary().onStored(blocks(2, 5_000));
    c.delayNanos = 1_000_000;
    GossipEngine big = c.add(1, 1, List.of(SimCluster.addressOf(0)), config(16 << 20));
    big.start();
    int rounds = c.runUntilConverged(100);
    assertTrue(rounds >= 0, "not converged in 100 rounds: " + divergence(c, caps));
    assertEquals(false, big.view().peers().get(0).replicaTruncated(),
        "the 16 MiB node's replica of the 1 KiB node is truncated");
    for (GossipEngine e : c.nodes) {
      e.checkInvariants();
      assertEquals(0, e.counter(GossipCounter.MALFORMED_DROPPED), divergence(c, caps));
    }
  }

  @Provide
  Arbitrary<List<Integer>> caps() {
    return Arbitraries.of(1_024, 4_096, 65_536, 1 << 20).list().ofMinSize(2).ofMaxSize(4);
  }

  /**
   * Any mix of caps converges: every node's set reaches every other node exactly, through
   * deltas, relayed deltas and snapshots, some of them larger than the receiver's own cap, under
   * loss and reordering, with a node restarting at a new generation meanwhile.
   */
  @Property(tries = 12)
  void aClusterOfMixedCapsConverges(@ForAll("caps") List<Integer> caps,
      @ForAll @Size(4) List<@IntRange(min = 0, max = 12_000) Integer> batches,
      @ForAll @IntRange(min = 0, max = 1_000) int seed) {
    SimCluster c = new SimCluster(seed, config(65_536));
    for (int i = 0; i < caps.size(); i++) {
      // short delta logs on some nodes: their peers get snapshots
      c.add(i, 1, List.of(SimCluster.addressOf(0)),
          config(caps.get(i), i % 2 == 0 ? 65_536 : 200)).start();
    }
    c.delayNanos = 1_000_000;
    c.extraDelayNanos = 20_000_000;
    c.loss = 0.1;
    SplittableRandom r = new SplittableRandom(seed);
    for (int b = 0; b < batches.size(); b++) {
      GossipEngine e = c.nodes.get(r.nextInt(c.nodes.size()));
      long[] add = blocks(seed * 31 + b, batches.get(b));
      e.localSummary().onStored(add);
      if (add.length > 1) {
        e.localSummary().onEvicted(java.util.Arrays.copyOf(add, add.length / 3));
      }
      c.runFor(3 * c.interval());
    }
    // a node restarts at a new generation, with a set of its own
    int restarted = r.nextInt(caps.size());
    GossipEngine again = c.add(restarted, 2, List.of(SimCluster.addressOf(0)),
        config(caps.get(restarted)));
    again.start();
    again.localSummary().onStored(blocks(seed + 7, 3_000));
    c.heal();
    List<Integer> names = new ArrayList<>(caps);
    assertTrue(c.runUntilConverged(300) >= 0,
        "not converged in 300 rounds: " + divergence(c, names));
    for (GossipEngine e : c.nodes) {
      e.checkInvariants();
      assertEquals(0, e.counter(GossipCounter.MALFORMED_DROPPED), divergence(c, names));
    }
  }

  static GossipEngine engine(int cap) {
    SimulatedScheduler time = new SimulatedScheduler();
    return new GossipEngine(new PeerAddress("me", "sim:me"), 1, config(cap), List.of(), time,
        time, new SplittableRandom(5), () -> EngineLoad.IDLE, (to, p) -> {});
  }

  /**
   * A message above the largest cap is still malformed, whatever the receiver's own cap, and is
   * refused from its length before anything is decoded; one within it but lying about its
   * counts is refused before anything is allocated, as before.
   */
  @Test
  void aMessageAboveTheLargestCapOrForgedIsStillMalformed() {
    GossipEngine e = engine(1_024);
    PeerAddress peer = new PeerAddress("p", "sim:p");
    e.onMessage(peer, new byte[GossipConfig.MAX_MESSAGE_BYTE_CAP + 1]);
    assertEquals(1, e.counter(GossipCounter.MALFORMED_DROPPED), "a message of 16 MiB + 1");
    // an ACK2 of 2 MiB, within the largest cap, whose update count is far beyond its bytes
    byte[] forged = new byte[2 << 20];
    forged[0] = GossipMessage.TYPE_ACK2;
    forged[1] = GossipMessage.VERSION;
    forged[2] = 1; // sender generation
    forged[3] = (byte) 0xFF; // update count 2^21 - 1 ...
    forged[4] = (byte) 0xFF;
    forged[5] = 0x7F;
    e.onMessage(peer, forged);
    assertEquals(2, e.counter(GossipCounter.MALFORMED_DROPPED), "a forged count");
    assertNull(e.replicaOf("p"), "nothing applied");
    // the codec names the limit it refused the first message against: the largest cap
    GossipCodec codec = new GossipCodec(1_024, GossipConfig.MAX_MESSAGE_BYTE_CAP, 65_537);
    MalformedMessageException x = assertThrows(MalformedMessageException.class,
        () -> codec.decode(new byte[GossipConfig.MAX_MESSAGE_BYTE_CAP + 1]));
    assertEquals(MalformedMessageException.Reason.TOO_LARGE, x.reason());
    assertTrue(x.getMessage().contains("exceeds limit 16777216"), x.getMessage());
  }

  /** A well-formed update larger than the receiver's own cap is applied. */
  @Test
  void anUpdateLargerThanTheReceiversCapIsApplied() {
    GossipEngine e = engine(1_024);
    PeerAddress origin = new PeerAddress("o", "sim:o");
    long[] fps = new long[1_000]; // 4 KB of fingerprints
    for (int i = 0; i < fps.length; i++) {
      fps[i] = 10_000 + i;
    }
    Ack2 ack2 = new Ack2(1, List.of(new Update(new DigestEntry("o", 1, 1, 1, 0, 0, false),
        "sim:o", 0, List.of(new Delta(1, Delta.STORE, fps)))));
    byte[] payload = new GossipCodec(1 << 20, 65_537).encode(ack2);
    assertTrue(payload.length > 4_000, "a message of " + payload.length + " bytes");
    e.onMessage(origin, payload);
    assertEquals(0, e.counter(GossipCounter.MALFORMED_DROPPED),
        "a " + payload.length + "-byte update was dropped by a node of a 1 KiB cap");
    long[] replica = e.replicaOf("o");
    java.util.Arrays.sort(replica);
    assertArrayEquals(fps, replica);
  }
}
