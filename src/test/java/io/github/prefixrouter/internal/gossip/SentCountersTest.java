package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.PeerAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The engine's "sent" counters count what the send function took (returned from without
 * throwing), not what the engine meant to send: a message whose send threw is a
 * {@code SEND_FAILURES} and nothing else. Checked against a tally of what the send function
 * took, decoded, in a cluster whose sends throw at random. Nor is what such a message carried
 * taken for in flight to its peer.
 */
class SentCountersTest {

  private static final List<GossipCounter> SENT = List.of(GossipCounter.MESSAGES_SENT,
      GossipCounter.BYTES_SENT, GossipCounter.DIGEST_BYTES_SENT,
      GossipCounter.PENDING_MARKS_SENT, GossipCounter.UPDATE_HEADER_BYTES_SENT,
      GossipCounter.OWN_DELTA_BYTES_SENT, GossipCounter.RELAYED_DELTA_BYTES_SENT,
      GossipCounter.SNAPSHOT_CHUNKS_SENT, GossipCounter.SNAPSHOT_BYTES_SENT);

  @Test
  void sentCountersCountWhatTheSendFunctionTook() throws Exception {
    for (boolean fullSnapshots : new boolean[] {false, true}) {
      GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
          .messageByteCap(2_048).snapshotBytesPerExchange(4_096)
          .relayLogMaxHashesPerOrigin(64).deltaLogMaxHashes(64)
          .fullSnapshotsOnly(fullSnapshots).build();
      SimCluster c = new SimCluster(7, config);
      GossipCodec codec = new GossipCodec(1 << 20, GossipConfig.MAX_PEERS_LIMIT + 1);
      Map<String, Map<GossipCounter, Long>> tally = new HashMap<>();
      SplittableRandom refusals = new SplittableRandom(11);
      long[] refused = new long[1];
      c.refuse = (from, payload) -> {
        boolean no = refusals.nextInt(3) == 0;
        refused[0] += no ? 1 : 0;
        return no;
      };
      // what the engine sent that does not decode: the hook runs inside the engine's send,
      // which takes what it throws for a failed send, so it is checked after the run instead
      List<AssertionError> undecoded = new ArrayList<>();
      c.taken = (from, payload) -> {
        try {
          tallyOf(codec, from, payload,
              tally.computeIfAbsent(from.nodeId(), k -> new EnumMap<>(GossipCounter.class)));
        } catch (AssertionError e) {
          undecoded.add(e);
          throw e;
        }
      };
      for (int i = 0; i < 5; i++) {
        c.add(i, 1, List.of(SimCluster.addressOf(0))).start();
      }
      for (int round = 0; round < 60; round++) {
        for (int i = 0; i < c.nodes.size(); i++) {
          long[] stored = new long[40];
          for (int b = 0; b < stored.length; b++) {
            stored[b] = (round * 100L + i) * 1_000L + b + 1;
          }
          c.nodes.get(i).localSummary().onStored(stored);
        }
        c.runFor(c.interval());
      }
      if (!undecoded.isEmpty()) {
        throw undecoded.get(0);
      }
      assertTrue(refused[0] > 0, "no send was refused");
      long chunks = 0;
      for (GossipEngine e : c.nodes) {
        Map<GossipCounter, Long> t = tally.get(e.self().nodeId());
        for (GossipCounter k : SENT) {
          assertEquals(t.getOrDefault(k, 0L), e.counter(k),
              (fullSnapshots ? "full snapshots, " : "") + e.self().nodeId() + " " + k);
        }
        chunks += e.counter(GossipCounter.SNAPSHOT_CHUNKS_SENT);
        assertTrue(e.counter(GossipCounter.SNAPSHOTS_SENT)
            <= e.counter(GossipCounter.SNAPSHOT_CHUNKS_SENT));
        assertTrue(e.counter(GossipCounter.SNAPSHOT_STORE_NUMBER_BYTES_SENT)
            <= e.counter(GossipCounter.SNAPSHOT_BYTES_SENT));
        assertTrue(e.counter(GossipCounter.SEND_FAILURES) > 0);
      }
      assertTrue(chunks > 0, "no snapshot chunk was sent");
    }
  }

  /** A node whose every send throws has sent nothing, whatever it meant to send. */
  @Test
  void aNodeWhoseSendsAllThrowHasSentNothing() {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .messageByteCap(2_048).deltaLogMaxHashes(64).build();
    SimCluster c = new SimCluster(3, config);
    GossipEngine a = c.add(0, 1, List.of(SimCluster.addressOf(1)));
    GossipEngine b = c.add(1, 1, List.of(SimCluster.addressOf(0)));
    long[] stored = new long[2_000];
    for (int i = 0; i < stored.length; i++) {
      stored[i] = i + 1;
    }
    b.localSummary().onStored(stored);
    PeerAddress bAt = b.self();
    c.refuse = (from, payload) -> from.equals(bAt);
    a.start();
    b.start();
    c.runFor(20 * c.interval());
    assertTrue(b.counter(GossipCounter.SEND_FAILURES) > 0);
    assertTrue(b.counter(GossipCounter.SNAPSHOTS_ENCODED) > 0, "b never served a snapshot");
    for (GossipCounter k : List.of(GossipCounter.MESSAGES_SENT, GossipCounter.BYTES_SENT,
        GossipCounter.SNAPSHOTS_SENT, GossipCounter.SNAPSHOT_CHUNKS_SENT,
        GossipCounter.SNAPSHOT_BYTES_SENT, GossipCounter.SNAPSHOT_STORE_NUMBER_BYTES_SENT,
        GossipCounter.DIGEST_BYTES_SENT, GossipCounter.UPDATE_HEADER_BYTES_SENT,
        GossipCounter.OWN_DELTA_BYTES_SENT)) {
      assertEquals(0, b.counter(k), k + " of a node that sent nothing");
    }
  }

  /**
   * An answer whose send threw never left: the deltas it carried are not in flight to the peer,
   * so the peer's next SYN gets them at once, not only after the in-flight window.
   */
  @Test
  void deltasOfAnAnswerWhoseSendThrewAreSentAgainAtOnce() throws Exception {
    PeerAddress me = new PeerAddress("me", "sim:me");
    PeerAddress peer = new PeerAddress("peer", "sim:peer");
    io.github.prefixrouter.testing.SimulatedScheduler time =
        new io.github.prefixrouter.testing.SimulatedScheduler();
    boolean[] refuse = {false};
    List<byte[]> taken = new java.util.ArrayList<>();
    GossipEngine e = new GossipEngine(me, 10, GossipConfig.defaults(), List.of(), time, time,
        new SplittableRandom(3), () -> io.github.prefixrouter.spi.EngineLoad.IDLE,
        (to, p) -> {
          if (refuse[0]) {
            throw new IllegalStateException("send refused");
          }
          taken.add(p);
        });
    e.localSummary().onStored(new long[] {11, 12, 13});
    // the peer tells the node about itself: it is a member
    e.handle(peer, new Ack2(5, List.of(new Update(new DigestEntry("peer", 5, 1, 1, 0, 0, false),
        "sim:peer", 0, List.of(new Delta(1, Delta.STORE, new long[] {7}))))));
    assertEquals(1, e.replicaOf("peer").length);
    refuse[0] = true;
    Syn syn = new Syn(1, 5, List.of(new DigestEntry("peer", 5, 1, 1, 0, 0, false),
        new DigestEntry("me", 10, 0, 1, 0, 0, false)));
    e.handle(peer, syn);
    assertEquals(1, e.counter(GossipCounter.SEND_FAILURES));
    refuse[0] = false;
    e.handle(peer, new Syn(2, 5, syn.digest()));
    assertEquals(0, e.counter(GossipCounter.DELTAS_IN_FLIGHT_SKIPPED));
    assertEquals(1, taken.size());
    Ack ack = (Ack) new GossipCodec(1 << 20, 16).decode(taken.get(0));
    assertTrue(ack.updates().stream().anyMatch(u -> u.header().nodeId().equals("me")
        && !u.deltas().isEmpty()), "the answer carries none of this node's deltas: " + ack);
  }

  /**
   * A cached snapshot whose every chunk's send threw was marked sent all the same, so that it
   * counted as one peers were still assembling and was kept beside the next snapshot encoded,
   * over the cache's bound, for 16 rounds. Its mark is now taken back: the next snapshot pushes
   * it out (and a later exchange encodes it again).
   */
  @Test
  void aSnapshotWhoseChunksAllFailedIsNotKeptAsInUse() {
    PeerAddress me = new PeerAddress("me", "sim:me");
    io.github.prefixrouter.testing.SimulatedScheduler time =
        new io.github.prefixrouter.testing.SimulatedScheduler();
    boolean[] refuse = {false};
    // a cache of 16 KiB; snapshots of 4,000 blocks (about 20 KB each), one chunk per exchange
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .messageByteCap(4_096).snapshotBytesPerExchange(4_096)
        .relayLogMaxHashesPerOrigin(100).build();
    GossipEngine e = new GossipEngine(me, 10, config, List.of(), time, time,
        new SplittableRandom(3), () -> io.github.prefixrouter.spi.EngineLoad.IDLE,
        (to, p) -> {
          if (refuse[0]) {
            throw new IllegalStateException("send refused");
          }
        });
    for (String o : List.of("o0", "o1")) {
      long[] fps = new long[4_000];
      for (int i = 0; i < fps.length; i++) {
        fps[i] = (o.equals("o0") ? 1_000_000L : 2_000_000L) + i;
      }
      e.handle(new PeerAddress(o, "sim:" + o), new Ack2(5, List.of(new Update(
          new DigestEntry(o, 5, 1, 1, 0, 0, false), "sim:" + o, 0,
          List.of(new Delta(1, Delta.STORE, fps))))));
      assertEquals(4_000, e.replicaOf(o).length);
    }
    PeerAddress joiner = new PeerAddress("joiner", "sim:joiner");
    DigestEntry self = new DigestEntry("joiner", 1, 0, 1, 0, 0, false);
    DigestEntry meHeld = new DigestEntry("me", 10, 0, 1, 0, 0, false);
    // lacking only o0, then only o1
    Syn wantsO0 = new Syn(1, 1, List.of(self, meHeld, new DigestEntry("o1", 5, 1, 1, 0, 0, false)));
    Syn wantsO1 = new Syn(2, 1, List.of(self, meHeld, new DigestEntry("o0", 5, 1, 1, 0, 0, false)));
    e.handle(joiner, wantsO0);
    assertEquals(1, e.counter(GossipCounter.SNAPSHOTS_ENCODED));
    assertEquals(1, e.counter(GossipCounter.SNAPSHOTS_SENT));
    time.advanceBy(Duration.ofSeconds(5).toNanos()); // o0's snapshot is no longer in use
    refuse[0] = true;
    e.handle(joiner, wantsO0); // its cached chunk's send throws: nothing went
    assertTrue(e.counter(GossipCounter.SEND_FAILURES) >= 1);
    assertEquals(1, e.counter(GossipCounter.SNAPSHOTS_SENT));
    refuse[0] = false;
    e.handle(joiner, wantsO1); // o1's snapshot is encoded: the cache is over its bound
    assertEquals(2, e.counter(GossipCounter.SNAPSHOTS_ENCODED));
    e.handle(joiner, wantsO0);
    assertEquals(3, e.counter(GossipCounter.SNAPSHOTS_ENCODED),
        "o0's snapshot, never sent since it went out of use, was kept in the cache");
  }

  private static void tallyOf(GossipCodec codec, PeerAddress from, byte[] payload,
      Map<GossipCounter, Long> t) {
    GossipMessage m;
    try {
      m = codec.decode(payload);
    } catch (Exception e) {
      throw new AssertionError("the engine sent what does not decode", e);
    }
    t.merge(GossipCounter.MESSAGES_SENT, 1L, Long::sum);
    t.merge(GossipCounter.BYTES_SENT, (long) payload.length, Long::sum);
    if (m instanceof Syn syn) {
      t.merge(GossipCounter.DIGEST_BYTES_SENT, (long) payload.length, Long::sum);
      t.merge(GossipCounter.PENDING_MARKS_SENT,
          syn.digest().stream().filter(DigestEntry::pending).count(), Long::sum);
    } else if (m instanceof SnapshotChunk) {
      t.merge(GossipCounter.SNAPSHOT_CHUNKS_SENT, 1L, Long::sum);
      t.merge(GossipCounter.SNAPSHOT_BYTES_SENT, (long) payload.length, Long::sum);
    } else {
      List<Update> updates = m instanceof Ack ack ? ack.updates() : ((Ack2) m).updates();
      long all = 0;
      for (Update u : updates) {
        long d = Delta.encodedSize(u.deltas());
        all += d;
        t.merge(u.header().nodeId().equals(from.nodeId()) ? GossipCounter.OWN_DELTA_BYTES_SENT
            : GossipCounter.RELAYED_DELTA_BYTES_SENT, d, Long::sum);
      }
      t.merge(GossipCounter.UPDATE_HEADER_BYTES_SENT, GossipCodec.updatesSize(updates) - all,
          Long::sum);
    }
  }
}
