package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Request;
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
import org.junit.jupiter.api.Test;

/**
 * What serving and receiving snapshots costs a node, whatever its peers send: the work of one
 * exchange is bounded by its snapshot budget, and snapshots that are never completed do not hold
 * the pending-snapshot budget for ever.
 */
class SnapshotBoundsTest {

  static final PeerAddress ME = new PeerAddress("me", "sim:me");
  static final int CAP = 4_096; // messageByteCap: about 800 blocks per snapshot chunk

  final List<byte[]> sent = new ArrayList<>();
  SimulatedScheduler time;
  GossipEngine engine;

  GossipEngine engine(GossipConfig config) {
    time = new SimulatedScheduler();
    engine = new GossipEngine(ME, 10, config, List.of(), time, time, new SplittableRandom(3),
        () -> EngineLoad.IDLE, (to, p) -> sent.add(p));
    return engine;
  }

  static PeerAddress peer(String id) {
    return new PeerAddress(id, "sim:" + id);
  }

  /** {@code id} tells the node about itself: version 1, one STORE of {@code blocks} fingerprints. */
  void learn(String id, long generation, int blocks, long firstFingerprint) {
    long[] fps = new long[blocks];
    for (int i = 0; i < blocks; i++) {
      fps[i] = firstFingerprint + i;
    }
    engine.handle(peer(id), new Ack2(generation, List.of(new Update(
        new DigestEntry(id, generation, 1, 1, 0, 0, false), "sim:" + id, 0,
        List.of(new Delta(1, Delta.STORE, fps))))));
    assertEquals(blocks, engine.replicaOf(id).length);
  }

  // ------------------------------------------------------------ serving

  /**
   * A SYN that lists no origin (a new node's first SYN, or a forged one of a few bytes) asks
   * for every replica the node holds; an ACK requesting every origin from version 0 does the
   * same. Only {@code snapshotBytesPerExchange} of chunks may leave per exchange, so encoding
   * the snapshots that cannot be sent is wasted work under the gossip lock: it was done for
   * every replica the relay logs no longer cover (here 12 replicas of 4,000 blocks, 48,000
   * blocks encoded for 4 KiB sent, on every such message).
   */
  @Test
  void anExchangeEncodesNoMoreSnapshotsThanItsBudgetCanSend() {
    engine(GossipConfig.builder().messageByteCap(CAP).snapshotBytesPerExchange(CAP)
        .relayLogMaxHashesPerOrigin(100).build());
    int origins = 12;
    for (int i = 0; i < origins; i++) {
      learn("o" + i, 5, 4_000, 1_000_000L * (i + 1));
    }
    PeerAddress joiner = peer("joiner");
    for (int k = 0; k < 5; k++) {
      sent.clear();
      long encodedBefore = engine.counter(GossipCounter.SNAPSHOTS_ENCODED);
      long bytesBefore = engine.counter(GossipCounter.SNAPSHOT_BYTES_SENT);
      engine.handle(joiner, new Syn(k + 1, 1, List.of(
          new DigestEntry("joiner", 1, 0, k + 1, 0, 0, false))));
      long encoded = engine.counter(GossipCounter.SNAPSHOTS_ENCODED) - encodedBefore;
      long bytes = engine.counter(GossipCounter.SNAPSHOT_BYTES_SENT) - bytesBefore;
      assertTrue(bytes > 0 && bytes <= CAP, "snapshot bytes sent: " + bytes);
      // the first origin's snapshot fills the budget; nothing else can be sent
      assertTrue(encoded <= 1, "snapshots encoded for one SYN: " + encoded);
    }
    // the same through the requests of an ACK
    List<Request> all = new ArrayList<>();
    for (int i = 0; i < origins; i++) {
      all.add(new Request("o" + i, 0, 0));
    }
    long encodedBefore = engine.counter(GossipCounter.SNAPSHOTS_ENCODED);
    engine.handle(joiner, new Ack(1, 1, List.of(), all));
    long encoded = engine.counter(GossipCounter.SNAPSHOTS_ENCODED) - encodedBefore;
    assertTrue(encoded <= 1, "snapshots encoded for one ACK: " + encoded);
  }

  /** With room for them, every lagging origin still gets its snapshot in one exchange. */
  @Test
  void aBudgetWithRoomStillServesEverySnapshot() {
    engine(GossipConfig.builder().messageByteCap(CAP).snapshotBytesPerExchange(1 << 20)
        .relayLogMaxHashesPerOrigin(100).build());
    for (int i = 0; i < 6; i++) {
      learn("o" + i, 5, 300, 1_000_000L * (i + 1));
    }
    engine.handle(peer("joiner"), new Syn(1, 1, List.of(
        new DigestEntry("joiner", 1, 0, 1, 0, 0, false))));
    assertEquals(6, engine.counter(GossipCounter.SNAPSHOTS_SENT));
    assertEquals(6, engine.counter(GossipCounter.SNAPSHOTS_ENCODED));
  }

  /**
   * A digest too large for one message lists a rotating subset of its sender's origins, and
   * nothing on the wire says so: an origin it leaves out is not one its sender lacks. Each such
   * origin was answered with its whole snapshot, in every exchange (150 idle nodes of 20 blocks
   * with 1 KiB messages and 100 ms rounds sent 44 MB in 5 s, 18 MB of them snapshots of origins
   * their receivers held; now 26 MB and none). A digest with room for one more entry still gets
   * them all.
   */
  @Test
  void originsLeftOutOfAFullDigestGetNoSnapshot() {
    engine(GossipConfig.builder().messageByteCap(CAP).snapshotBytesPerExchange(1 << 20)
        .relayLogMaxHashesPerOrigin(100).build());
    for (int i = 0; i < 6; i++) {
      learn("o" + i, 5, 300, 1_000_000L * (i + 1));
    }
    // the sender's own entry, then other origins (unknown here) while the next one still fits,
    // as a sender that knows more origins than a message holds builds its digest
    GossipCodec codec = new GossipCodec(1 << 20, GossipConfig.MAX_PEERS_LIMIT + 1);
    List<DigestEntry> digest = new ArrayList<>();
    digest.add(new DigestEntry("sender", 1, 0, 1, 0, 0, false));
    for (int i = 0; ; i++) {
      String id = Integer.toString(i, 36) + "-" + "x".repeat(60);
      List<DigestEntry> more = new ArrayList<>(digest);
      more.add(new DigestEntry(id, 3, 40, 7, 0, 0, false));
      if (codec.encode(new Syn(1, 1, more)).length + 64 > CAP) {
        break;
      }
      digest = more;
    }
    engine.handle(peer("sender"), new Syn(1, 1, digest));
    assertEquals(0, engine.counter(GossipCounter.SNAPSHOTS_ENCODED));
    assertEquals(0, engine.counter(GossipCounter.SNAPSHOT_BYTES_SENT));
    // the same origins left out of a digest with room to spare: the sender lacks them
    engine.handle(peer("sender"), new Syn(2, 1, digest.subList(0, digest.size() / 2)));
    assertEquals(6, engine.counter(GossipCounter.SNAPSHOTS_SENT));
  }

  /**
   * An ACK naming one origin many times gets one answer about it. Each repeat was served again:
   * its deltas sent once more while they fit, then a header per repeat, and, once the message
   * was full, the size of the next delta computed again for every repeat (O(its store numbers)
   * for an EVICT): 16,000 requests in a 64 KB ACK held the gossip lock about 100 ms.
   */
  @Test
  void anAckNamingAnOriginManyTimesIsAnsweredOnce() {
    engine(GossipConfig.builder().messageByteCap(CAP).build());
    learn("o", 5, 300, 1_000);
    long[] stores = new long[300];
    for (int i = 0; i < stores.length; i++) {
      stores[i] = i + 1;
    }
    engine.handle(peer("o"), new Ack2(5, List.of(new Update(
        new DigestEntry("o", 5, 2, 2, 0, 0, false), null, 1,
        List.of(new Delta(2, Delta.EVICT, stores))))));
    assertArrayEquals(new long[] {5, 2}, engine.replicaVersion("o"));
    engine.localSummary().onStored(new long[] {11, 12});
    engine.localSummary().onEvicted(new long[] {11});
    List<Request> repeated = new ArrayList<>();
    for (int i = 0; i < 500; i++) {
      repeated.add(new Request("o", 5, 1));
      repeated.add(new Request("me", 10, 0));
    }
    sent.clear();
    engine.handle(peer("joiner"), new Ack(1, 1, List.of(), repeated));
    GossipCodec codec = new GossipCodec(1 << 20, GossipConfig.MAX_PEERS_LIMIT + 1);
    List<String> origins = new ArrayList<>();
    for (byte[] p : sent) {
      try {
        if (codec.decode(p) instanceof Ack2 a) {
          for (Update u : a.updates()) {
            origins.add(u.header().nodeId() + " from " + u.fromVersion() + " with "
                + u.deltas().size());
          }
        }
      } catch (io.github.prefixrouter.internal.wire.MalformedMessageException e) {
        throw new AssertionError(e);
      }
    }
    assertEquals(List.of("o from 1 with 1", "me from 0 with 2"), origins);
  }

  /**
   * A digest naming an origin this node does not know many times gets one request for it, as a
   * known origin named many times gets one answer: each repeat was requested again, so that one
   * digest of a thousand repeats filled the ACK with the same request, and counted a refusal per
   * repeat once the membership was full.
   */
  @Test
  void aDigestNamingAnUnknownOriginManyTimesGetsOneRequestForIt() throws Exception {
    engine(GossipConfig.builder().messageByteCap(CAP).build());
    List<DigestEntry> digest = new ArrayList<>();
    digest.add(new DigestEntry("joiner", 1, 0, 1, 0, 0, false));
    for (int i = 0; i < 1_000; i++) {
      digest.add(new DigestEntry("stranger", 3, 7, 9, 0, 0, false));
    }
    digest.add(new DigestEntry("other", 2, 0, 1, 0, 0, false));
    sent.clear();
    engine.handle(peer("joiner"), new Syn(1, 1, digest));
    GossipCodec codec = new GossipCodec(1 << 20, GossipConfig.MAX_PEERS_LIMIT + 1);
    List<String> requested = new ArrayList<>();
    for (byte[] p : sent) {
      if (codec.decode(p) instanceof Ack a) {
        for (Request r : a.requests()) {
          requested.add(r.nodeId());
        }
      }
    }
    assertEquals(List.of("joiner", "stranger", "other"), requested);
  }

  // ------------------------------------------------------------ receiving

  /** Chunk {@code index} of {@code count} of a snapshot whose origin handed out 10,000 stores. */
  static SnapshotChunk chunk(String id, long gen, long version, int index, int count,
      long firstStore, int blocks, long firstFingerprint) {
    long[] stores = new long[blocks];
    long[] fps = new long[blocks];
    for (int i = 0; i < blocks; i++) {
      stores[i] = firstStore + i;
      fps[i] = firstFingerprint + i;
    }
    return new SnapshotChunk(id, gen, version, 10_000, index, count, stores, fps);
  }

  /**
   * Snapshot chunks are held until the last one of their snapshot arrives, within
   * {@code maxBlocksTotal} blocks over all origins. Snapshots that never complete (chunks lost
   * for good, or a peer that sends the first chunks of snapshots it never finishes) were held
   * until another chunk of the same origin came: for origins that deltas keep current, never.
   * Once they filled the budget, every later snapshot chunk of any origin was refused, and a
   * new or restarted peer could never be replicated from a snapshot.
   */
  @Test
  void snapshotsThatNeverCompleteStopHoldingThePendingBudget() {
    engine(GossipConfig.builder().interval(Duration.ofMillis(100)).messageByteCap(CAP)
        .maxBlocksPerPeer(1_000).maxBlocksTotal(2_000).build());
    learn("a", 5, 10, 100);
    learn("b", 5, 10, 200);
    learn("c", 5, 10, 300);
    // a liar sends the first half of newer snapshots of a and b, then nothing more
    PeerAddress liar = peer("liar");
    engine.handle(liar, chunk("a", 5, 2, 0, 2, 11, 700, 10_000));
    engine.handle(liar, chunk("b", 5, 2, 0, 2, 11, 700, 20_000));
    long refusedBefore = engine.counter(GossipCounter.BLOCKS_REFUSED);
    // (while they are fresh, the total budget is what it is: 1,400 of 2,000 held)
    for (int r = 0; r < 20; r++) {
      time.advanceBy(Duration.ofMillis(100).toNanos());
      engine.runRound();
    }
    assertEquals(2, engine.counter(GossipCounter.SNAPSHOTS_ABANDONED));
    // c restarts and sends its whole set as a snapshot of two chunks of 400 blocks
    engine.handle(peer("c"), chunk("c", 6, 3, 0, 2, 1, 400, 30_000));
    engine.handle(peer("c"), chunk("c", 6, 3, 1, 2, 401, 400, 30_400));
    assertEquals(refusedBefore, engine.counter(GossipCounter.BLOCKS_REFUSED));
    long[] c = engine.replicaOf("c");
    assertNotNull(c);
    assertEquals(800, c.length);
    assertArrayEquals(new long[] {6, 3}, engine.replicaVersion("c"));
    // the abandoned halves were dropped: a and b keep their replicas, and the memory is back
    assertEquals(10, engine.replicaOf("a").length);
    assertEquals(10, engine.replicaOf("b").length);
    engine.checkInvariants();
  }

  /**
   * A third party's snapshot of a newer generation of an origin that is visibly alive (its
   * heartbeat just advanced) would be rejected once complete, as a forged restart: its chunks
   * are refused as they arrive. They were assembled, holding the pending budget until the last
   * one came or the assembly went stale, and the origin's own snapshot meanwhile found the
   * budget taken and installed truncated.
   */
  @Test
  void aThirdPartysSnapshotOfAnUnadoptableGenerationTakesNoBudget() {
    engine(GossipConfig.builder().interval(Duration.ofMillis(100)).messageByteCap(CAP)
        .maxBlocksPerPeer(1_500).maxBlocksTotal(2_000).build());
    learn("a", 5, 10, 100);
    learn("b", 5, 10, 200);
    long rejected = engine.counter(GossipCounter.REJECTED);
    engine.handle(peer("liar"), chunk("a", 6, 2, 0, 2, 1, 700, 10_000));
    assertEquals(rejected + 1, engine.counter(GossipCounter.REJECTED));
    // b's own snapshot of two chunks of 700: with the liar's 700 held, 2,100 of 2,000
    engine.handle(peer("b"), chunk("b", 5, 4, 0, 2, 1, 700, 20_000));
    engine.handle(peer("b"), chunk("b", 5, 4, 1, 2, 701, 700, 21_000));
    assertEquals(0, engine.counter(GossipCounter.BLOCKS_REFUSED));
    assertEquals(1_400, engine.replicaOf("b").length);
    // a keeps its generation and replica
    assertArrayEquals(new long[] {5, 1}, engine.replicaVersion("a"));
    assertEquals(10, engine.replicaOf("a").length);
    engine.checkInvariants();
  }

  /**
   * Assemblies expire in rounds only. A stopped engine still applies messages: its assemblies
   * stay within the same budget (a chunk past it is refused) and are dropped at the first round
   * once it starts again.
   */
  @Test
  void aStoppedEnginesAssembliesStayWithinTheBudgetUntilItStartsAgain() {
    engine(GossipConfig.builder().interval(Duration.ofMillis(100)).messageByteCap(CAP)
        .maxBlocksPerPeer(1_500).maxBlocksTotal(2_000).build());
    learn("a", 5, 10, 100);
    learn("b", 5, 10, 200);
    learn("c", 5, 10, 300);
    engine.start();
    engine.stop();
    engine.handle(peer("a"), chunk("a", 5, 2, 0, 2, 1, 700, 10_000));
    engine.handle(peer("b"), chunk("b", 5, 2, 0, 2, 1, 700, 20_000));
    time.advanceBy(Duration.ofSeconds(60).toNanos());
    assertEquals(0, engine.counter(GossipCounter.SNAPSHOTS_ABANDONED));
    // c's first chunk passes the budget (700 + 700 + 700 of 2,000): its blocks are refused
    engine.handle(peer("c"), chunk("c", 5, 2, 0, 2, 1, 700, 30_000));
    assertEquals(700, engine.counter(GossipCounter.BLOCKS_REFUSED));
    engine.checkInvariants();
    engine.start();
    time.advanceBy(Duration.ofMillis(200).toNanos());
    // gone at the first round (a and b abandoned or dropped with their silent origins): the
    // budget is free again for a new origin's snapshot of 1,400 blocks
    learn("d", 5, 10, 400);
    engine.handle(peer("d"), chunk("d", 5, 2, 0, 2, 1, 700, 40_000));
    engine.handle(peer("d"), chunk("d", 5, 2, 1, 2, 701, 700, 40_700));
    assertEquals(700, engine.counter(GossipCounter.BLOCKS_REFUSED));
    assertEquals(1_400, engine.replicaOf("d").length);
    engine.checkInvariants();
  }

  /** A snapshot the replica has caught up with by deltas is dropped at the next round. */
  @Test
  void aSnapshotOvertakenByDeltasIsDroppedAtOnce() {
    engine(GossipConfig.builder().interval(Duration.ofMillis(100)).messageByteCap(CAP)
        .maxBlocksPerPeer(1_500).maxBlocksTotal(2_000).build());
    learn("a", 5, 10, 100);
    engine.handle(peer("a"), chunk("a", 5, 3, 0, 3, 1, 700, 5_000));
    engine.runRound();
    assertEquals(0, engine.counter(GossipCounter.SNAPSHOTS_ABANDONED));
    engine.handle(peer("a"), new Ack2(5, List.of(new Update(
        new DigestEntry("a", 5, 3, 2, 0, 0, false), null, 1, List.of(
            new Delta(2, Delta.STORE, new long[] {7}), new Delta(3, Delta.STORE, new long[] {8}))))));
    assertArrayEquals(new long[] {5, 3}, engine.replicaVersion("a"));
    time.advanceBy(Duration.ofMillis(100).toNanos());
    engine.runRound();
    assertEquals(1, engine.counter(GossipCounter.SNAPSHOTS_ABANDONED));
    // its memory is free for another origin's snapshot (700 + 1,400 would pass maxBlocksTotal)
    learn("b", 5, 10, 200);
    engine.handle(peer("b"), chunk("b", 5, 4, 0, 2, 1, 700, 20_000));
    engine.handle(peer("b"), chunk("b", 5, 4, 1, 2, 701, 700, 21_000));
    assertEquals(0, engine.counter(GossipCounter.BLOCKS_REFUSED));
    assertEquals(1_400, engine.replicaOf("b").length);
  }

  /**
   * Every snapshot assembly that starts and never installs counts once in
   * {@code SNAPSHOTS_ABANDONED}, whatever ends it. Only the ones that expired in a round were
   * counted: one pushed out by a newer snapshot of its origin, dropped when its origin restarted
   * or died, or refused once complete, left nothing behind in the counter.
   */
  @Test
  void everySnapshotStartedAndNeverInstalledCountsOnceAsAbandoned() {
    engine(GossipConfig.builder().interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofMillis(200)).deadAfter(Duration.ofMillis(300))
        .forgetAfter(Duration.ofSeconds(10)).messageByteCap(CAP)
        .maxBlocksPerPeer(1_500).maxBlocksTotal(10_000).build());
    learn("a", 5, 10, 100);
    learn("b", 5, 10, 200);
    learn("c", 5, 10, 300);
    learn("d", 5, 10, 400);
    // half of a's snapshot at version 2, pushed out by a newer one, which installs
    engine.handle(peer("a"), chunk("a", 5, 2, 0, 2, 1, 100, 10_000));
    engine.handle(peer("a"), chunk("a", 5, 3, 0, 2, 1, 100, 11_000));
    assertEquals(1, engine.counter(GossipCounter.SNAPSHOTS_ABANDONED));
    engine.handle(peer("a"), chunk("a", 5, 3, 1, 2, 101, 100, 11_100));
    assertArrayEquals(new long[] {5, 3}, engine.replicaVersion("a"));
    assertEquals(1, engine.counter(GossipCounter.SNAPSHOTS_ABANDONED));
    // half of b's snapshot, then b restarts: its own word of generation 6
    engine.handle(peer("b"), chunk("b", 5, 2, 0, 2, 1, 100, 20_000));
    engine.handle(peer("b"), new Ack2(6, List.of(new Update(
        new DigestEntry("b", 6, 0, 1, 0, 0, false), "sim:b", 0, List.of()))));
    assertArrayEquals(new long[] {6, 0}, engine.replicaVersion("b"));
    assertEquals(2, engine.counter(GossipCounter.SNAPSHOTS_ABANDONED));
    // all of c's snapshot, its store numbers not ascending: refused once complete
    long rejected = engine.counter(GossipCounter.REJECTED);
    engine.handle(peer("c"), chunk("c", 5, 2, 0, 2, 1, 100, 30_000));
    engine.handle(peer("c"), chunk("c", 5, 2, 1, 2, 50, 100, 30_100));
    assertEquals(rejected + 1, engine.counter(GossipCounter.REJECTED));
    assertEquals(3, engine.counter(GossipCounter.SNAPSHOTS_ABANDONED));
    // half of d's snapshot, then d falls silent and is declared dead within the patience
    engine.handle(peer("d"), chunk("d", 5, 2, 0, 2, 1, 100, 40_000));
    time.advanceBy(Duration.ofMillis(400).toNanos());
    engine.runRound();
    assertEquals(GossipEngine.Status.DEAD, engine.statusOf("d"));
    assertEquals(4, engine.counter(GossipCounter.SNAPSHOTS_ABANDONED));
    // nothing is counted twice: later rounds find no assembly left to expire
    for (int r = 0; r < 40; r++) {
      time.advanceBy(Duration.ofMillis(100).toNanos());
      engine.runRound();
    }
    assertEquals(4, engine.counter(GossipCounter.SNAPSHOTS_ABANDONED));
    assertEquals(1, engine.counter(GossipCounter.SNAPSHOTS_INSTALLED));
    engine.checkInvariants();
  }

  /** A snapshot whose chunks keep arriving, however slowly, is still assembled. */
  @Test
  void aSnapshotStillArrivingIsKeptAcrossRounds() {
    engine(GossipConfig.builder().interval(Duration.ofMillis(100)).messageByteCap(CAP)
        .maxBlocksPerPeer(1_000).maxBlocksTotal(2_000).build());
    learn("a", 5, 10, 100);
    int chunks = 5;
    for (int k = 0; k < chunks; k++) {
      engine.handle(peer("a"), chunk("a", 5, 9, k, chunks, 1 + 100L * k, 100, 5_000 + 100L * k));
      for (int r = 0; r < 12; r++) { // 1.2 s between chunks: less than 16 intervals
        time.advanceBy(Duration.ofMillis(100).toNanos());
        engine.runRound();
      }
    }
    assertEquals(0, engine.counter(GossipCounter.SNAPSHOTS_ABANDONED));
    assertEquals(500, engine.replicaOf("a").length);
    assertArrayEquals(new long[] {5, 9}, engine.replicaVersion("a"));
  }
}
