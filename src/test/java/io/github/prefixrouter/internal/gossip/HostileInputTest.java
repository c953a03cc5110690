package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.contract.ThrowingCacheEventListener;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Forged, replayed, absurd and malformed input is ignored or rejected, counted, and harmless. */
class HostileInputTest {

  final PeerAddress me = new PeerAddress("me", "sim:me");
  final PeerAddress honest = new PeerAddress("honest", "sim:honest");
  final PeerAddress liar = new PeerAddress("liar", "sim:liar");
  final List<byte[]> sent = new ArrayList<>();
  SimulatedScheduler time;
  GossipEngine engine;
  GossipCodec codec;

  @BeforeEach
  void setUp() {
    time = new SimulatedScheduler();
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .maxSequenceJump(1_000).maxGenerationJump(1_000).build();
    engine = new GossipEngine(me, 10, config, List.of(), time, time, new SplittableRandom(1),
        () -> EngineLoad.IDLE, (to, p) -> sent.add(p));
    codec = new GossipCodec(config.messageByteCap(), config.maxPeers() + 1);
    engine.localSummary().onStored(new long[] {1, 2, 3});
    // the honest peer tells us about itself: generation 5, version 2 (blocks 7 and 8)
    engine.handle(honest, new Ack2(5, List.of(update("honest", 5, 2, 1, 0,
        new Delta(1, Delta.STORE, new long[] {7}), new Delta(2, Delta.STORE, new long[] {8})))));
    assertArrayEquals(new long[] {7, 8}, sorted(engine.replicaOf("honest")));
  }

  static Update update(String id, long gen, long version, long hb, long from, Delta... deltas) {
    return new Update(new DigestEntry(id, gen, version, hb, 0, 0, false), "sim:" + id, from,
        List.of(deltas));
  }

  static long[] sorted(long[] a) {
    long[] c = a.clone();
    java.util.Arrays.sort(c);
    return c;
  }

  /**
   * Claims about this node's own state change nothing of it: deltas and chunks about it are
   * not applied. A higher generation claimed is refuted: the node continues above it
   * ({@link GenerationRefutationTest}), with the same set.
   */
  @Test
  void claimsAboutThisNodesOwnStateAreIgnored() {
    long generation = engine.generation();
    long before = engine.counter(GossipCounter.REJECTED);
    engine.handle(liar, new Ack2(1, List.of(update("me", 99, 50, 1, 0,
        new Delta(1, Delta.CLEAR, Delta.NO_HASHES)))));
    assertTrue(engine.generation() > 99
        && engine.generation() <= 99 + GossipEngine.GENERATION_REFUTATION_SPREAD,
        "refuted from " + generation + " to " + engine.generation());
    assertEquals(1, engine.counter(GossipCounter.GENERATIONS_REFUTED));
    engine.handle(liar, new SnapshotChunk("me", engine.generation() + 1, 5, 1, 0, 1,
        new long[] {1}, new long[] {666}));
    assertEquals(before + 1, engine.counter(GossipCounter.REJECTED), "the chunk");
    assertEquals(3, engine.localSummary().size());
    assertEquals(1, engine.localSummary().version());
  }

  @Test
  void absurdGenerationOrVersionFromAThirdPartyIsRejected() {
    long before = engine.counter(GossipCounter.REJECTED);
    // generation far in the future: would wipe the honest peer's replica
    engine.handle(liar, new Ack2(1, List.of(update("honest", 5 + 100_000, 0, 1, 0))));
    // version far in the future: would freeze the replica
    engine.handle(liar, new Ack2(1, List.of(update("honest", 5, 2 + 100_000, 1, 0))));
    engine.handle(liar, new Syn(1, 1, List.of(
        new DigestEntry("honest", 5, 2, 1_000_000, 0, 0, true))));
    engine.handle(liar, new SnapshotChunk("honest", 5, 500_000, 1, 0, 1, new long[] {1},
        new long[] {666}));
    assertEquals(before + 4, engine.counter(GossipCounter.REJECTED));
    assertArrayEquals(new long[] {7, 8}, sorted(engine.replicaOf("honest")));
    assertEquals(5, engine.replicaVersion("honest")[0]);
    assertEquals(2, engine.replicaVersion("honest")[1]);
    // the origin itself may jump (it restarted long after)
    engine.handle(honest, new Ack2(5 + 100_000, List.of(update("honest", 5 + 100_000, 0, 1, 0))));
    assertEquals(5 + 100_000, engine.replicaVersion("honest")[0]);
  }

  @Test
  void replayedAndReorderedDeltasChangeNothing() {
    // fingerprint 7 was the honest node's first store: its eviction names store number 1
    Delta evict7 = new Delta(3, Delta.EVICT, new long[] {1});
    Delta store9 = new Delta(4, Delta.STORE, new long[] {9});
    // 4 before 3: the gap is not applied
    engine.handle(honest, new Ack2(5, List.of(update("honest", 5, 4, 2, 3, store9))));
    assertArrayEquals(new long[] {7, 8}, sorted(engine.replicaOf("honest")));
    engine.handle(honest, new Ack2(5, List.of(update("honest", 5, 4, 2, 2, evict7, store9))));
    assertArrayEquals(new long[] {8, 9}, sorted(engine.replicaOf("honest")));
    // replaying old deltas (1 and 2 stored 7 and 8; 3 evicted 7) changes nothing
    engine.handle(liar, new Ack2(1, List.of(update("honest", 5, 3, 2, 0,
        new Delta(1, Delta.STORE, new long[] {7}), new Delta(2, Delta.STORE, new long[] {8}),
        evict7))));
    engine.handle(honest, new Ack2(5, List.of(update("honest", 5, 4, 2, 2, evict7, store9))));
    assertArrayEquals(new long[] {8, 9}, sorted(engine.replicaOf("honest")));
    assertEquals(4, engine.replicaVersion("honest")[1]);
    // an older generation is ignored
    engine.handle(liar, new Ack2(1, List.of(update("honest", 4, 9, 9, 0,
        new Delta(1, Delta.CLEAR, Delta.NO_HASHES)))));
    assertArrayEquals(new long[] {8, 9}, sorted(engine.replicaOf("honest")));
  }

  /**
   * An update that starts below the replica (its first deltas already applied: several peers
   * answered the same digest, or an answer crossed a newer one) is applied from the delta that
   * follows the replica's version; the ones it holds already are counted as redundant.
   */
  @Test
  void anUpdateOverlappingTheReplicaAppliesTheDeltasPastIt() {
    long redundant = engine.counter(GossipCounter.DELTAS_REDUNDANT);
    engine.handle(honest, new Ack2(5, List.of(update("honest", 5, 3, 2, 1,
        new Delta(2, Delta.STORE, new long[] {8}), new Delta(3, Delta.STORE, new long[] {9})))));
    assertEquals(3, engine.replicaVersion("honest")[1]);
    assertArrayEquals(new long[] {7, 8, 9}, sorted(engine.replicaOf("honest")));
    assertEquals(redundant + 1, engine.counter(GossipCounter.DELTAS_REDUNDANT));
    engine.handle(honest, new Ack2(5, List.of(update("honest", 5, 5, 2, 0,
        new Delta(1, Delta.STORE, new long[] {7}), new Delta(2, Delta.STORE, new long[] {8}),
        new Delta(3, Delta.STORE, new long[] {9}), new Delta(4, Delta.EVICT, new long[] {2}),
        new Delta(5, Delta.STORE, new long[] {10})))));
    assertEquals(5, engine.replicaVersion("honest")[1]);
    assertArrayEquals(new long[] {7, 9, 10}, sorted(engine.replicaOf("honest")));
    assertEquals(redundant + 4, engine.counter(GossipCounter.DELTAS_REDUNDANT));
    engine.checkInvariants();
  }

  @Test
  void deltasWithoutHashesCannotGrowARelayLogWithoutBound() {
    // CLEAR deltas carry no hashes and cost one byte each on the wire: the relay log's bound
    // (relayLogMaxHashesPerOrigin, 8,192 by default) must still hold them to a bounded count
    long before = engine.retainedBytesEstimate();
    long seq = 2;
    for (int batch = 0; batch < 50; batch++) {
      List<Delta> clears = new ArrayList<>();
      for (int i = 0; i < 2_000; i++) {
        clears.add(new Delta(++seq, Delta.CLEAR, Delta.NO_HASHES));
      }
      engine.handle(honest, new Ack2(5, List.of(new Update(
          new DigestEntry("honest", 5, seq, 2 + batch, 0, 0, false), "sim:honest", seq - 2_000,
          clears))));
    }
    assertEquals(seq, engine.replicaVersion("honest")[1]);
    engine.checkInvariants();
    // at most the per-origin bound's worth of deltas stays (the estimate counts 56 bytes for
    // each: 48 for the delta, 8 for the one hash it counts as); 100,000 arrived
    long grown = engine.retainedBytesEstimate() - before;
    assertTrue(grown <= 56L * 8_192 + 4_096, "relay log grew by " + grown + " bytes");
  }

  @Test
  void anEvictionNamingAnUnknownStoreNumberRestartsTheReplicaInsteadOfGuessing() {
    // the honest node's store numbers 1 and 2 are blocks 7 and 8; number 5 names nothing
    engine.handle(liar, new Ack2(1, List.of(update("honest", 5, 3, 1, 2,
        new Delta(3, Delta.EVICT, new long[] {1, 5})))));
    assertEquals(1, engine.counter(GossipCounter.UNRESOLVED_EVICTIONS));
    // not applied, not even in part: the replica is the origin's true state at version 0
    assertArrayEquals(new long[0], engine.replicaOf("honest"));
    assertEquals(0, engine.replicaVersion("honest")[1]);
    engine.checkInvariants();
    // the next exchange refills it from version 0, and store numbers resolve again
    engine.handle(honest, new Ack2(5, List.of(update("honest", 5, 3, 2, 0,
        new Delta(1, Delta.STORE, new long[] {7}), new Delta(2, Delta.STORE, new long[] {8}),
        new Delta(3, Delta.EVICT, new long[] {1})))));
    assertArrayEquals(new long[] {8}, engine.replicaOf("honest"));
    assertEquals(3, engine.replicaVersion("honest")[1]);
    assertEquals(1, engine.counter(GossipCounter.UNRESOLVED_EVICTIONS));
    engine.checkInvariants();
  }

  @Test
  void messagesClaimingToComeFromThisNodeAreRejected() {
    long before = engine.counter(GossipCounter.REJECTED);
    engine.handle(me, new Ack2(1, List.of(update("ghost", 1, 0, 1, 0))));
    assertEquals(before + 1, engine.counter(GossipCounter.REJECTED));
    assertEquals(null, engine.statusOf("ghost"));
  }

  /**
   * A peer announces 4,095 origins whose ids share one {@code String.hashCode} (all the room
   * {@code maxPeers} leaves): in the table the decoder finds known ids in, they do not form one
   * run of slots, so decoding a digest that lists them reads a few slots per id, not one per
   * member (4,095 here, about 8 million for the digest). Each is still decoded as the member's
   * own string.
   */
  @Test
  void collidingNodeIdsDoNotMakeEveryDigestDecodeQuadratic() throws Exception {
    List<String> ids = IdTableFloodTest.colliding(4_096).subList(0, 4_095);
    List<Update> updates = new ArrayList<>();
    List<DigestEntry> digest = new ArrayList<>();
    for (String id : ids) {
      updates.add(update(id, 1, 0, 1, 0));
      digest.add(new DigestEntry(id, 1, 0, 1, 0, 0, false));
    }
    // larger than a default cap: a node reads messages up to the largest cap
    GossipCodec large = new GossipCodec(GossipConfig.MAX_MESSAGE_BYTE_CAP, 4_097);
    engine.onMessage(liar, large.encode(new Ack2(1, updates)));
    assertEquals(ids.size() + 1, engine.memberCount()); // and the honest peer
    engine.runRound(); // its digest sorts the members and builds the table
    IdTable table = engine.knownIds();
    assertTrue(table.longestLookup() <= IdTableFloodTest.MAX_LOOKUP,
        ids.size() + " colliding member ids: a lookup reads up to " + table.longestLookup()
            + " slots, want at most " + IdTableFloodTest.MAX_LOOKUP);
    Syn syn = (Syn) large.decode(large.encode(new Syn(1, 1, digest)), table);
    for (int i = 0; i < ids.size(); i++) {
      assertSame(IdTableFloodTest.find(table, ids.get(i)), syn.digest().get(i).nodeId(),
          "entry " + i + " decoded as the member's own string");
    }
    engine.checkInvariants();
  }

  /**
   * A peer that knew this node's secret announces ids aimed at one home slot of its table of
   * known ids: the table leaves out those with no free slot within {@link IdTable#MAX_PROBES} of
   * it, and a message naming them is still applied to the members they name.
   */
  @Test
  void membersWhoseIdsTheTableLeavesOutAreStillFound() throws Exception {
    engine.runRound(); // builds the table: its seed is the engine's secret
    long secret = engine.knownIds().start();
    // with this node and the honest peer, 256 ids: a table of 512 slots
    List<String> ids = IdTableFloodTest.aimed(secret, 512, 254);
    List<Update> announced = new ArrayList<>();
    List<Update> stored = new ArrayList<>();
    for (String id : ids) {
      announced.add(update(id, 1, 0, 1, 0));
      stored.add(update(id, 1, 1, 2, 0, new Delta(1, Delta.STORE, new long[] {9})));
    }
    GossipCodec large = new GossipCodec(GossipConfig.MAX_MESSAGE_BYTE_CAP, 4_097);
    engine.onMessage(liar, large.encode(new Ack2(1, announced)));
    engine.runRound(); // its digest sorts the members and builds the table
    IdTable table = engine.knownIds();
    assertEquals(secret, table.start());
    long leftOut = ids.stream().filter(id -> IdTableFloodTest.find(table, id) == null).count();
    assertTrue(leftOut >= ids.size() - IdTable.MAX_PROBES, "the table leaves out " + leftOut
        + " of " + ids.size() + " aimed ids, want all but at most " + IdTable.MAX_PROBES);
    engine.onMessage(liar, large.encode(new Ack2(1, stored)));
    assertEquals(ids.size() + 1, engine.memberCount()); // and the honest peer
    for (String id : ids) {
      assertArrayEquals(new long[] {9}, engine.replicaOf(id), id + "'s stored block applied");
    }
    engine.checkInvariants();
  }

  @Property(tries = 300)
  void malformedPayloadsAreCountedAndChangeNothing(@ForAll byte[] junk) {
    setUp();
    long[] before = sorted(engine.replicaOf("honest"));
    int members = engine.memberCount();
    long dropped = engine.counter(GossipCounter.MALFORMED_DROPPED);
    byte[] framed = new byte[junk.length + 2];
    framed[0] = GossipMessage.TYPE_ACK2;
    framed[1] = GossipMessage.VERSION; // version 1 was refused before the body was read
    System.arraycopy(junk, 0, framed, 2, junk.length);
    for (byte[] p : new byte[][] {junk, framed}) {
      boolean valid;
      try {
        codec.decode(p);
        valid = true;
      } catch (Exception e) {
        valid = false;
      }
      engine.onMessage(liar, p);
      if (!valid) {
        dropped++;
      }
    }
    assertEquals(dropped, engine.counter(GossipCounter.MALFORMED_DROPPED));
    if (engine.memberCount() == members) {
      assertArrayEquals(before, sorted(engine.replicaOf("honest")));
    }
    assertEquals(0, engine.counter(GossipCounter.INTERNAL_ERRORS));
    engine.checkInvariants();
  }

  @Test
  void configurationErrorsNameTheSetting() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().fanout(0).build());
    assertTrue(e.getMessage().contains("fanout"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().lowWatermark(70).build());
    assertTrue(e.getMessage().contains("lowWatermark") && e.getMessage().contains("64"),
        e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().deadAfter(Duration.ofSeconds(2)).build());
    assertTrue(e.getMessage().contains("deadAfter"), e.getMessage());
    // interval < suspectAfter < deadAfter < forgetAfter, each strictly
    Duration t = Duration.ofSeconds(30);
    e = assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().interval(t).suspectAfter(t).build());
    assertTrue(e.getMessage().contains("suspectAfter"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().suspectAfter(t).deadAfter(t).build());
    assertTrue(e.getMessage().contains("deadAfter"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().deadAfter(t).forgetAfter(t).build());
    assertTrue(e.getMessage().contains("forgetAfter"), e.getMessage());
    GossipConfig ordered = GossipConfig.builder().interval(t).suspectAfter(t.plusNanos(1))
        .deadAfter(t.plusNanos(2)).forgetAfter(t.plusNanos(3)).build();
    assertEquals(t.plusNanos(2), ordered.deadAfter());
    // rounds of a nanosecond kept the scheduler's thread busy with nothing but rounds: the
    // interval is at least a millisecond (what --gossip-interval-ms can give)
    e = assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().interval(Duration.ofNanos(1)).build());
    assertTrue(e.getMessage().contains("interval") && e.getMessage().contains("1 ms"),
        e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().interval(Duration.ofNanos(999_999)).build());
    assertTrue(e.getMessage().contains("interval"), e.getMessage());
    assertEquals(Duration.ofMillis(1), GossipConfig.builder().interval(Duration.ofMillis(1))
        .suspectAfter(Duration.ofMillis(2)).deadAfter(Duration.ofMillis(3))
        .forgetAfter(Duration.ofMillis(4)).build().interval());
    e = assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().jitter(0.9).build());
    assertTrue(e.getMessage().contains("jitter"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().messageByteCap(100).build());
    assertTrue(e.getMessage().contains("messageByteCap"), e.getMessage());
    // an exchange may always send at least one whole message of snapshot chunks
    e = assertThrows(IllegalArgumentException.class, () -> GossipConfig.builder()
        .messageByteCap(4_096).snapshotBytesPerExchange(4_095).build());
    assertTrue(e.getMessage().contains("snapshotBytesPerExchange"), e.getMessage());
    assertEquals(4_096, GossipConfig.builder().messageByteCap(4_096)
        .snapshotBytesPerExchange(4_096).build().snapshotBytesPerExchange());
    assertThrows(NullPointerException.class,
        () -> GossipConfig.builder().interval(null).build());
    assertThrows(IllegalArgumentException.class, () -> new GossipEngine(me, 0,
        GossipConfig.defaults(), List.of(), time, time, new SplittableRandom(1),
        () -> EngineLoad.IDLE, (to, p) -> {}));
  }

  @Test
  void maxBlocksTotalIsHeldToWhatTheReplicaIndexCanHold() {
    // up to 2^31 was accepted, but the index's table cannot grow past 2^30 slots (3/4 full:
    // 805,306,368 keys), and the resize beyond failed with NegativeArraySizeException
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().maxBlocksTotal(1L << 31).build());
    assertTrue(e.getMessage().contains("maxBlocksTotal")
        && e.getMessage().contains("805306368"), e.getMessage());
    assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().maxBlocksTotal(GossipConfig.MAX_BLOCKS_TOTAL + 1).build());
    assertEquals(805_306_368L, GossipConfig.MAX_BLOCKS_TOTAL);
    assertEquals((long) ReplicaIndex.MAX_CAPACITY / 4 * 3, GossipConfig.MAX_BLOCKS_TOTAL,
        "the largest table, at the load that makes it grow");
    // the largest accepted value builds an engine (the table starts small)
    GossipConfig largest = GossipConfig.builder().maxBlocksTotal(GossipConfig.MAX_BLOCKS_TOTAL).build();
    assertEquals(GossipConfig.MAX_BLOCKS_TOTAL, largest.maxBlocksTotal());
    new GossipEngine(me, 1, largest, List.of(), time, time, new SplittableRandom(1),
        () -> EngineLoad.IDLE, (to, p) -> {});
    assertThrows(IllegalArgumentException.class,
        () -> new ReplicaIndex(4, 1, GossipConfig.MAX_BLOCKS_TOTAL + 1, 1));
  }

  @Test
  void durationsBeyondWhatTheEngineCountsInNanosecondsFailBuild() {
    // a "never forget" of 1,000 years passed build() and then every round failed converting it
    // to nanoseconds: no SYN ever left, and every peer declared the node dead
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> GossipConfig.builder().forgetAfter(Duration.ofDays(365L * 1_000)).build());
    assertTrue(e.getMessage().contains("forgetAfter"), e.getMessage());
    // rounds multiply the interval by up to 64 (patience and spacing windows)
    e = assertThrows(IllegalArgumentException.class, () -> GossipConfig.builder()
        .interval(Duration.ofDays(365L * 10)).suspectAfter(Duration.ofDays(365L * 11))
        .deadAfter(Duration.ofDays(365L * 12)).forgetAfter(Duration.ofDays(365L * 13)).build());
    assertTrue(e.getMessage().contains("interval"), e.getMessage());
    // a century still works: tombstones are simply kept that long
    GossipConfig century = GossipConfig.builder().forgetAfter(Duration.ofDays(365L * 100)).build();
    SimCluster c = SimCluster.of(3, 5, century);
    c.runFor(20 * c.interval());
    assertTrue(c.converged(), c.firstDivergence());
    for (GossipEngine n : c.nodes) {
      assertEquals(0, n.counter(GossipCounter.INTERNAL_ERRORS));
    }
  }

  @Test
  void aThrowingSenderOrLoadSupplierDoesNotBreakTheEngine() {
    GossipEngine e = new GossipEngine(me, 1, GossipConfig.defaults(),
        List.of(honest), time, time, new SplittableRandom(1),
        () -> {
          throw new IllegalStateException("engine down");
        },
        (to, p) -> {
          throw new IllegalStateException("network down");
        });
    e.runRound();
    e.runRound();
    assertTrue(e.counter(GossipCounter.SEND_FAILURES) >= 2);
    assertEquals(0, e.counter(GossipCounter.INTERNAL_ERRORS));
  }

  /**
   * A transport whose send throws what a catch of RuntimeException does not catch: an Error, or
   * a checked exception thrown undeclared (as code in a language without checked exceptions may
   * throw it). It got out of the round's send, before the next round was scheduled: the node
   * never gossiped again. Now it is a failed send like any other, and the rounds go on.
   */
  @Test
  void aSenderThatThrowsAnErrorOrACheckedExceptionDoesNotStopTheRounds() {
    for (Throwable thrown : List.of(new java.io.IOException("connection reset"),
        new StackOverflowError("the transport overflowed its stack"))) {
      SimulatedScheduler sim = new SimulatedScheduler();
      GossipEngine e = new GossipEngine(me, 1, GossipConfig.builder()
          .interval(Duration.ofMillis(100)).build(), List.of(honest), sim, sim,
          new SplittableRandom(1), () -> EngineLoad.IDLE,
          (to, p) -> {
            throw ThrowingCacheEventListener.<RuntimeException>undeclared(thrown);
          });
      e.start();
      List<Throwable> escaped = runTwoSeconds(sim);
      String what = thrown.getClass().getSimpleName();
      assertEquals(List.of(), escaped, what + " reached the scheduler");
      assertTrue(e.counter(GossipCounter.ROUNDS) >= 10,
          what + ": rounds in 2 s of 100 ms: " + e.counter(GossipCounter.ROUNDS));
      assertTrue(e.counter(GossipCounter.SEND_FAILURES) >= 10,
          what + ": failed sends: " + e.counter(GossipCounter.SEND_FAILURES));
      e.stop();
    }
  }

  /**
   * A load supplier or push-back condition that throws an Error or a checked exception
   * (undeclared) costs that round's figures only: the rounds go on. Both were caught as
   * RuntimeException alone, so such a throw left the round before the next one was scheduled,
   * and the node gossiped no more.
   */
  @Test
  void aLoadSupplierOrPushBackThatThrowsAnErrorOrACheckedExceptionDoesNotStopTheRounds() {
    for (boolean pushBack : new boolean[] {false, true}) {
      for (Throwable thrown : List.of(new java.io.IOException("engine gone"),
          new StackOverflowError("the supplier overflowed its stack"))) {
        SimulatedScheduler sim = new SimulatedScheduler();
        GossipEngine e = new GossipEngine(me, 1, GossipConfig.builder()
            .interval(Duration.ofMillis(100)).build(), List.of(honest), sim, sim,
            new SplittableRandom(1), () -> {
              if (!pushBack) {
                throw ThrowingCacheEventListener.<RuntimeException>undeclared(thrown);
              }
              return EngineLoad.IDLE;
            },
            (to, p) -> { });
        if (pushBack) {
          e.pushBackWhen(() -> {
            throw ThrowingCacheEventListener.<RuntimeException>undeclared(thrown);
          });
        }
        e.start();
        List<Throwable> escaped = runTwoSeconds(sim);
        String what = (pushBack ? "push-back " : "load ") + thrown.getClass().getSimpleName();
        assertEquals(List.of(), escaped, what + " reached the scheduler");
        assertTrue(e.counter(GossipCounter.ROUNDS) >= 10,
            what + ": rounds in 2 s of 100 ms: " + e.counter(GossipCounter.ROUNDS));
        e.stop();
      }
    }
  }

  /** Runs 2 s of simulated time task by task; returns what escaped the tasks. */
  private static List<Throwable> runTwoSeconds(SimulatedScheduler sim) {
    List<Throwable> escaped = new ArrayList<>();
    long end = sim.nanoTime() + Duration.ofSeconds(2).toNanos();
    while (sim.nanoTime() < end) {
      try {
        if (!sim.runNext()) {
          break;
        }
      } catch (Throwable t) {
        if (Thread.currentThread().isInterrupted()) {
          throw new AssertionError("interrupted (the test timed out)", t);
        }
        escaped.add(t);
      }
    }
    return escaped;
  }
}
