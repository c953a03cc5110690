package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Request;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
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
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.statistics.Statistics;

/**
 * A node fed any well-formed gossip, from any peer, in any order, with time passing and its own
 * cache changing: every message is decoded and applied without an internal error, every
 * internal invariant and cap holds after every step, and every message the node sends in return
 * decodes under its own strict decoder. The messages are drawn from small value domains (five
 * ids, generations 0..4, versions 0..12, 31 fingerprints, store numbers 1..25) so that they
 * collide with the node's state: deltas continuing, skipping or replaying a replica's version,
 * evictions naming held, evicted and never-stored blocks, snapshots of every shape, restarts,
 * claims about the node itself (which never change its own set, and move its version only to
 * refute a claim), members joining past the cap and dying.
 */
class ArbitraryPeerInputProperties {

  static final String[] IDS = {"a", "b", "c", "d", "me"};
  static final PeerAddress ME = new PeerAddress("me", "sim:me");

  @Property(tries = 60)
  void aNodeFedArbitraryWellFormedGossipStaysSound(@ForAll long seed) {
    SplittableRandom r = new SplittableRandom(seed);
    SimulatedScheduler time = new SimulatedScheduler();
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofMillis(500)).deadAfter(Duration.ofMillis(1_000))
        .forgetAfter(Duration.ofMillis(2_000)).maxPeers(4).maxBlocksPerPeer(5)
        .maxBlocksTotal(10).messageByteCap(1_024).snapshotBytesPerExchange(1_024)
        .deltaLogMaxHashes(10).relayLogMaxHashesPerOrigin(6).relayLogMaxHashesTotal(12)
        .maxGenerationJump(3).maxSequenceJump(8).build();
    List<byte[]> sent = new ArrayList<>();
    GossipEngine node = new GossipEngine(ME, 2, config, List.of(new PeerAddress("a", "sim:a")),
        time, time, new SplittableRandom(seed ^ 0x5DEECE66DL), () -> EngineLoad.IDLE,
        (to, p) -> sent.add(p));
    GossipCodec wire = new GossipCodec(1 << 20, 1_000); // writes what peers send
    GossipCodec strict = new GossipCodec(config.messageByteCap(), config.maxPeers() + 1);
    node.start();
    int delivered = 0;
    for (int step = 0; step < 300; step++) {
      int what = r.nextInt(100);
      if (what < 15) {
        time.advanceBy(r.nextLong(300_000_000L)); // rounds run, members age and die
      } else if (what < 25) {
        long[] hashes = r.longs(1 + r.nextInt(4), 0, 40).toArray();
        switch (r.nextInt(3)) {
          case 0 -> node.localSummary().onStored(hashes);
          case 1 -> node.localSummary().onEvicted(hashes);
          default -> {
            if (r.nextInt(4) == 0) {
              node.localSummary().onCleared();
            }
          }
        }
      } else {
        String from = IDS[r.nextInt(IDS.length - 1)]; // anyone but the node itself
        byte[] payload;
        try {
          payload = wire.encode(message(r, node));
        } catch (IllegalArgumentException notWireValid) {
          continue;
        }
        LocalSummary.Snapshot own = node.localSummary().snapshot();
        long refuted = node.counter(GossipCounter.VERSIONS_REFUTED);
        node.onMessage(new PeerAddress(from, "sim:" + from), payload);
        delivered++;
        // claims never change the node's own set; its version moves only to refute a claim
        LocalSummary.Snapshot now = node.localSummary().snapshot();
        assertArrayEquals(own.hashes(), now.hashes(), "claims changed the node's own set");
        assertArrayEquals(own.stores(), now.stores());
        assertEquals(node.counter(GossipCounter.VERSIONS_REFUTED) == refuted,
            own.version() == now.version(), "version " + own.version() + " -> " + now.version());
      }
      node.checkInvariants();
      assertEquals(0, node.counter(GossipCounter.INTERNAL_ERRORS), "step " + step);
      // emptying a replica costs its blocks, never a scan of every peer's blocks
      assertEquals(0, node.clearSlotsScanned(), "step " + step);
      for (byte[] p : sent) {
        try {
          strict.decode(p);
        } catch (MalformedMessageException e) {
          fail("the node sent a message its peers reject, at step " + step + ": " + e);
        }
      }
      sent.clear();
      assertTrue(node.memberCount() <= config.maxPeers());
      assertTrue(node.replicatedPairs() <= config.maxBlocksTotal());
    }
    assertTrue(delivered > 0);
    // the draws reach the paths they are meant to: deltas applied, evictions resolved and not,
    // snapshots installed, caps refusing blocks, restarts, members dying
    for (GossipCounter c : new GossipCounter[] {GossipCounter.DELTAS_APPLIED,
        GossipCounter.EVICTIONS_RESOLVED, GossipCounter.UNRESOLVED_EVICTIONS,
        GossipCounter.SNAPSHOTS_INSTALLED, GossipCounter.BLOCKS_REFUSED,
        GossipCounter.GENERATIONS_REPLACED, GossipCounter.MEMBERS_DEAD}) {
      Statistics.label(c.name()).collect(node.counter(c) > 0);
      Statistics.label(c.name()).coverage(k -> k.check(true).percentage(p -> p >= 20));
    }
  }

  /** A message; half of its updates continue the node's replica of their origin. */
  static GossipMessage message(SplittableRandom r, GossipEngine node) {
    return switch (r.nextInt(4)) {
      case 0 -> new Syn(r.nextLong(20), gen(r), entries(r, r.nextInt(5)));
      case 1 -> new Ack(r.nextLong(20), gen(r), updates(r, node), requests(r));
      case 2 -> new Ack2(gen(r), updates(r, node));
      default -> chunk(r);
    };
  }

  static String id(SplittableRandom r) {
    return IDS[r.nextInt(IDS.length)];
  }

  static long gen(SplittableRandom r) {
    return r.nextLong(5);
  }

  static DigestEntry entry(SplittableRandom r) {
    return new DigestEntry(id(r), gen(r), r.nextLong(13), r.nextLong(30), r.nextInt(3),
        r.nextInt(3), r.nextBoolean(), r.nextInt(4) == 0);
  }

  static List<DigestEntry> entries(SplittableRandom r, int n) {
    List<DigestEntry> l = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      l.add(entry(r));
    }
    return l;
  }

  static List<Update> updates(SplittableRandom r, GossipEngine node) {
    List<Update> l = new ArrayList<>();
    for (int i = r.nextInt(4); i > 0; i--) {
      DigestEntry h = entry(r);
      long[] at = node.replicaVersion(h.nodeId());
      long[][] held = node.replicaStores(h.nodeId());
      if (at != null && r.nextBoolean()) { // continue the replica: from its version on
        long to = at[1] + 1 + r.nextInt(3);
        h = new DigestEntry(h.nodeId(), at[0], to, h.heartbeat() + 1, 0, 0, false);
      }
      long back = r.nextLong(h.version() + 1);
      if (at != null && at[0] == h.generation() && at[1] < h.version() && r.nextBoolean()) {
        back = h.version() - at[1];
      }
      long from = h.version() - back;
      List<Delta> deltas = new ArrayList<>();
      for (int j = 0; j < r.nextInt((int) Math.min(back, 4) + 1); j++) {
        deltas.add(held != null && held[0].length > 0 && r.nextInt(3) == 0
            ? new Delta(from + j + 1, Delta.EVICT, pick(r, held[0]))
            : delta(r, from + j + 1));
      }
      l.add(new Update(h, r.nextBoolean() ? "sim:" + h.nodeId() : null, from, deltas));
    }
    return l;
  }

  static Delta delta(SplittableRandom r, long seq) {
    return switch (r.nextInt(5)) {
      case 0, 1 -> new Delta(seq, Delta.STORE, r.longs(r.nextInt(5), 0, 31).toArray());
      case 2, 3 -> new Delta(seq, Delta.EVICT, ascending(r, r.nextInt(4), 25));
      default -> new Delta(seq, Delta.CLEAR, Delta.NO_HASHES);
    };
  }

  /** Some of {@code stores} (ascending), ascending. */
  static long[] pick(SplittableRandom r, long[] stores) {
    return java.util.Arrays.stream(stores).filter(x -> r.nextInt(3) == 0).toArray();
  }

  /** {@code n} or fewer distinct store numbers in 1..max, ascending. */
  static long[] ascending(SplittableRandom r, int n, long max) {
    return r.longs(n, 1, max + 1).sorted().distinct().toArray();
  }

  static List<Request> requests(SplittableRandom r) {
    List<Request> l = new ArrayList<>();
    for (int i = r.nextInt(4); i > 0; i--) {
      l.add(new Request(id(r), gen(r), r.nextLong(13)));
    }
    return l;
  }

  static SnapshotChunk chunk(SplittableRandom r) {
    long storeCount = r.nextLong(26);
    long[] stores = storeCount == 0 ? new long[0] : ascending(r, r.nextInt(7), storeCount);
    int count = 1 + r.nextInt(3);
    return new SnapshotChunk(id(r), gen(r), r.nextLong(13), storeCount, r.nextInt(count), count,
        stores, r.longs(stores.length, 0, 31).toArray());
  }
}
