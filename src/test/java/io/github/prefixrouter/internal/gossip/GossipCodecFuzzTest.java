package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Request;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.internal.wire.ByteWriter;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.internal.wire.MalformedMessageException.Reason;
import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * Every gossip message type: valid messages round-trip; random bytes and mutated valid messages
 * raise nothing but {@link MalformedMessageException}, and what does decode never holds more
 * hashes than its bytes could carry.
 */
class GossipCodecFuzzTest {

  static final int CAP = 4_096;
  final GossipCodec codec = new GossipCodec(CAP, 64);

  static Arbitrary<String> ids() {
    // random ids, and fleet-style ids sharing long prefixes (front coding), up to 64 characters
    return Arbitraries.oneOf(
        Arbitraries.strings().withCharRange('!', '~').ofMinLength(1).ofMaxLength(12),
        Arbitraries.integers().between(0, 30).map(i -> "node-" + i),
        Arbitraries.integers().between(0, 99).map(i -> "x".repeat(60) + i),
        Arbitraries.strings().withCharRange('!', '~').ofLength(64));
  }

  static Arbitrary<Long> counters() {
    return Arbitraries.oneOf(
        Arbitraries.longs().between(0, 1_000), Arbitraries.longs().between(0, GossipMessage.MAX_COUNTER));
  }

  static Arbitrary<DigestEntry> entries() {
    return Combinators.combine(ids(), counters(), counters(), counters(),
            Arbitraries.integers().between(0, Integer.MAX_VALUE),
            Arbitraries.integers().between(0, 1_000), Arbitraries.of(true, false),
            Arbitraries.of(true, false))
        .as(DigestEntry::new);
  }

  /** Deltas numbered 0: {@link #updates()} numbers them after its {@code fromVersion}. */
  static Arbitrary<Delta> deltas() {
    Arbitrary<Delta> byFingerprint = Combinators.combine(Arbitraries.of(Delta.STORE, Delta.CLEAR),
            fingerprints().array(long[].class).ofMaxSize(6))
        .as((op, h) -> new Delta(0, op, op == Delta.CLEAR ? Delta.NO_HASHES : h));
    Arbitrary<Delta> byStoreNumber = storeNumbers(6).map(r -> new Delta(0, Delta.EVICT, r));
    return Arbitraries.oneOf(byFingerprint, byStoreNumber);
  }

  /**
   * Strictly ascending store numbers in 1..2^62: runs of neighbours (what evictions of blocks
   * stored together look like), small numbers, far jumps and both edges.
   */
  static Arbitrary<long[]> storeNumbers(int max) {
    return Arbitraries.oneOf(
            Arbitraries.longs().between(1, 40),
            Arbitraries.longs().between(1, 100_000),
            Arbitraries.longs().between(1, GossipMessage.MAX_COUNTER),
            Arbitraries.of(1L, 127L, 128L, GossipMessage.MAX_COUNTER - 1, GossipMessage.MAX_COUNTER))
        .set().ofMaxSize(max)
        .map(set -> set.stream().mapToLong(Long::longValue).sorted().toArray());
  }

  /** Block fingerprints: 32-bit unsigned values, edges included. */
  static Arbitrary<Long> fingerprints() {
    return Arbitraries.oneOf(Arbitraries.longs().between(0, 0xFFFF_FFFFL),
        Arbitraries.of(0L, 1L, 0x7FFF_FFFFL, 0x8000_0000L, 0xFFFF_FFFFL));
  }

  static Arbitrary<Update> updates() {
    // a null address: the receiver knows the origin already. The deltas are one list, numbered
    // here, and the pending mark is a component of entries(), rather than arbitraries built
    // for each update or entry in a flatMap: jqwik built those arbitraries' edge cases anew
    // for each value (up to as many as the tries), which at the long run's 10,000 tries filled
    // over 1 GB of heap and spent most of the run collecting it
    return Combinators.combine(entries(), ids().injectNull(0.3), Arbitraries.longs().between(0, 100),
            deltas().list().ofMaxSize(3))
        .as((e, addr, from, drafts) -> {
          List<Delta> ds = new ArrayList<>();
          for (Delta d : drafts) {
            ds.add(new Delta(from + ds.size() + 1, d.op(), d.hashes()));
          }
          DigestEntry header = new DigestEntry(e.nodeId(), e.generation(),
              Math.max(e.version(), from + ds.size()), e.heartbeat(), e.queueDepth(),
              e.inFlight(), e.overloaded());
          return new Update(header, addr, from, ds);
        });
  }

  @Provide
  Arbitrary<GossipMessage> messages() {
    Arbitrary<GossipMessage> syn = Combinators.combine(counters(), counters(),
        entries().list().ofMaxSize(8)).as(Syn::new);
    Arbitrary<Request> request = Combinators.combine(ids(), counters(), counters())
        .as(Request::new);
    Arbitrary<GossipMessage> ack = Combinators.combine(counters(), counters(),
        updates().list().ofMaxSize(4), request.list().ofMaxSize(4)).as(Ack::new);
    Arbitrary<GossipMessage> ack2 = Combinators.combine(counters(), updates().list().ofMaxSize(4))
        .as(Ack2::new);
    Arbitrary<GossipMessage> chunk = Combinators.combine(ids(), counters(), counters(),
            Arbitraries.integers().between(1, 50), storeNumbers(30),
            Arbitraries.longs().between(0, 1_000))
        .flatAs((id, g, v, count, stores, extra) -> Combinators.combine(
                Arbitraries.integers().between(0, count - 1),
                fingerprints().array(long[].class).ofSize(stores.length))
            .as((i, h) -> (GossipMessage) new SnapshotChunk(id, g, v,
                Math.min(GossipMessage.MAX_COUNTER,
                    (stores.length == 0 ? 0 : stores[stores.length - 1]) + extra),
                i, count, stores, h)));
    return Arbitraries.oneOf(syn, ack, ack2, chunk);
  }

  @Property
  void validMessagesRoundTrip(@ForAll("messages") GossipMessage m)
      throws MalformedMessageException {
    byte[] bytes = codec.encode(m);
    GossipMessage back = codec.decode(bytes);
    assertEquals(m.getClass(), back.getClass());
    assertArrayEquals(bytes, codec.encode(back));
    List<Update> sent = updatesOf(m);
    List<Update> got = updatesOf(back);
    assertEquals(sent.size(), got.size());
    for (int i = 0; i < sent.size(); i++) {
      assertEquals(sent.get(i).header(), got.get(i).header());
      assertEquals(sent.get(i).address(), got.get(i).address());
      assertEquals(sent.get(i).fromVersion(), got.get(i).fromVersion());
      assertEquals(sent.get(i).deltas().size(), got.get(i).deltas().size());
      for (int k = 0; k < sent.get(i).deltas().size(); k++) {
        Delta a = sent.get(i).deltas().get(k);
        Delta b = got.get(i).deltas().get(k);
        assertEquals(a.seq(), b.seq());
        assertEquals(a.op(), b.op());
        assertArrayEquals(a.hashes(), b.hashes());
      }
    }
    if (m instanceof SnapshotChunk c) {
      assertArrayEquals(c.hashes(), ((SnapshotChunk) back).hashes());
      assertArrayEquals(c.stores(), ((SnapshotChunk) back).stores());
      assertEquals(c.storeCount(), ((SnapshotChunk) back).storeCount());
    }
  }

  /** kind 0: flip a byte; 1: truncate; 2: insert a byte; 3: overwrite with 0xFF run; 4: 0x80 run */
  @Property
  void mutatedMessagesFailTyped(
      @ForAll("messages") GossipMessage m,
      @ForAll @IntRange(min = 0, max = 4) int kind,
      @ForAll @IntRange(min = 0, max = 10_000) int where,
      @ForAll byte value) {
    byte[] bytes = codec.encode(m);
    int at = where % (bytes.length + 1);
    byte[] mutated;
    switch (kind) {
      case 0 -> {
        mutated = bytes.clone();
        if (at < mutated.length) {
          mutated[at] ^= (byte) (value == 0 ? 1 : value);
        }
      }
      case 1 -> mutated = java.util.Arrays.copyOf(bytes, at);
      case 2 -> {
        mutated = new byte[bytes.length + 1];
        System.arraycopy(bytes, 0, mutated, 0, at);
        mutated[at] = value;
        System.arraycopy(bytes, at, mutated, at + 1, bytes.length - at);
      }
      default -> {
        mutated = bytes.clone();
        for (int i = at; i < Math.min(mutated.length, at + 10); i++) {
          mutated[i] = (byte) (kind == 3 ? 0xFF : 0x80);
        }
      }
    }
    decodeOnlyTyped(mutated);
  }

  @Property
  void randomBytesFailTyped(@ForAll byte[] junk, @ForAll @IntRange(min = 0x10, max = 0x13) int type) {
    decodeOnlyTyped(junk);
    byte[] framed = new byte[junk.length + 2];
    framed[0] = (byte) type;
    framed[1] = (byte) GossipMessage.VERSION;
    System.arraycopy(junk, 0, framed, 2, junk.length);
    decodeOnlyTyped(framed);
  }

  private void decodeOnlyTyped(byte[] bytes) {
    try {
      GossipMessage m = codec.decode(bytes);
      assertTrue(minimumBytes(m) <= bytes.length,
          "decoded more fingerprints and store numbers than bytes allow");
      assertDocumentedRanges(m);
    } catch (MalformedMessageException expected) {
      assertTrue(expected.field() != null && !expected.field().isEmpty());
    }
  }

  /** Whatever decodes holds the ranges docs/wire-format.md promises. */
  private static void assertDocumentedRanges(GossipMessage m) {
    for (Update u : updatesOf(m)) {
      long v = u.header().version();
      assertTrue(u.header().generation() >= 0 && u.header().generation() <= GossipMessage.MAX_COUNTER);
      assertTrue(v >= 0 && v <= GossipMessage.MAX_COUNTER && u.fromVersion() >= 0
          && u.fromVersion() <= v && u.deltas().size() <= v - u.fromVersion());
      for (Delta d : u.deltas()) {
        if (d.op() == Delta.EVICT) {
          long prev = 0;
          for (long s : d.hashes()) {
            assertTrue(s >= 1 && s <= Delta.MAX_STORE && s > prev, "store number " + s);
            prev = s;
          }
        } else {
          for (long h : d.hashes()) {
            assertTrue(BlockFingerprint.valid(h));
          }
        }
      }
    }
    if (m instanceof SnapshotChunk c) {
      assertTrue(c.chunkIndex() >= 0 && c.chunkIndex() < c.chunkCount());
      long prev = 0;
      for (long s : c.stores()) {
        assertTrue(s > prev && s <= c.storeCount(), "store " + s + " after " + prev
            + " with store count " + c.storeCount());
        prev = s;
      }
    }
  }

  private static List<Update> updatesOf(GossipMessage m) {
    return m instanceof Ack a ? a.updates() : m instanceof Ack2 a ? a.updates() : List.of();
  }

  /** Bytes the decoded elements need at least: 4 per fingerprint, 1 per store number. */
  private static long minimumBytes(GossipMessage m) {
    long n = 0;
    for (Update u : updatesOf(m)) {
      for (Delta d : u.deltas()) {
        n += (long) d.hashes().length * (d.op() == Delta.EVICT ? 1 : BlockFingerprint.BYTES);
      }
    }
    if (m instanceof SnapshotChunk c) {
      n += (long) c.hashes().length * (1 + BlockFingerprint.BYTES);
    }
    return n;
  }

  @Test
  void evictionsByStoreNumberAreCodedAgainstThePreviousOneAndChecked()
      throws MalformedMessageException {
    DigestEntry e = new DigestEntry("a", 1, 3, 1, 0, 0, false);
    // three evictions: 1000..1002, then 1005 and 1010 in the next delta, then 7 (backwards)
    Update u = new Update(e, null, 0, List.of(
        new Delta(1, Delta.EVICT, new long[] {1_000, 1_001, 1_002}),
        new Delta(2, Delta.EVICT, new long[] {1_005, 1_010}),
        new Delta(3, Delta.EVICT, new long[] {7})));
    byte[] b = codec.encode(new Ack2(1, List.of(u)));
    Update back = ((Ack2) codec.decode(b)).updates().get(0);
    for (int i = 0; i < 3; i++) {
      assertArrayEquals(u.deltas().get(i).hashes(), back.deltas().get(i).hashes());
    }
    // 1000 costs 2 bytes (zigzag 2000), its neighbours 1 each; 1005 one byte (zigzag +3), 1010
    // one (gap 4); 7 two (zigzag -1003): 8 bytes of store numbers plus 3 head bytes
    assertEquals(8 + 3, Delta.encodedSize(u.deltas()));
    // the encoder refuses store numbers that do not ascend, or lie outside 1..2^62
    for (long[] bad : new long[][] {{5, 5}, {6, 5}, {0}, {GossipMessage.MAX_COUNTER + 1}}) {
      assertThrows(IllegalArgumentException.class, () -> codec.encode(new Ack2(1, List.of(
          new Update(e, null, 2, List.of(new Delta(3, Delta.EVICT, bad)))))));
    }
    // the decoder: a first store number below 1, one past 2^62, and a truncated list
    for (int k = 0; k < 3; k++) {
      ByteWriter w = new ByteWriter(64, 64);
      w.writeByte(GossipMessage.TYPE_ACK2).writeByte(GossipMessage.VERSION).writeVarLong(1);
      w.writeVarInt(1);
      rawEntry(w, "a", 1, 5, 1);
      w.writeByte(0).writeVarLong(5).writeVarInt(1); // no address, back 5, one delta
      if (k == 0) {
        w.writeVarLong((1L << 2) | Delta.EVICT).writeZigZagLong(0); // store number 0
      } else if (k == 1) {
        w.writeVarLong((2L << 2) | Delta.EVICT).writeZigZagLong(GossipMessage.MAX_COUNTER)
            .writeVarLong(0); // 2^62, then 2^62 + 1
      } else {
        w.writeVarLong((9L << 2) | Delta.EVICT).writeZigZagLong(1).writeVarLong(0);
      }
      MalformedMessageException x =
          assertThrows(MalformedMessageException.class, () -> codec.decode(w.toByteArray()));
      assertEquals(k == 2 ? Reason.TRUNCATED : Reason.OUT_OF_RANGE, x.reason());
      assertEquals("delta.stores", x.field());
    }
  }

  /**
   * An eviction's store number or an entry's generation beyond its range is reported as the
   * number the peer claims (Long.MAX_VALUE where that passes 2^63), as a snapshot's store number
   * already was: the first store number of an eviction 2^62 + 5 past the previous one was
   * reported as -1, and sums past 2^63 wrapped to negative values.
   */
  @Test
  void outOfRangeStoreNumbersAndGenerationsAreReportedAsClaimed() {
    long max = GossipMessage.MAX_COUNTER;
    // {first store's zigzag difference, the next one's gap or -1 for none, value reported}
    long[][] evictions = {
        {max + 5, -1, max + 5},
        {max, max, Long.MAX_VALUE}, // 2^62, then 2^62 + 2^62 + 1
        {Long.MAX_VALUE, -1, Long.MAX_VALUE},
        {Long.MIN_VALUE, -1, Long.MIN_VALUE}};
    for (long[] ev : evictions) {
      ByteWriter w = new ByteWriter(64, 64);
      w.writeByte(GossipMessage.TYPE_ACK2).writeByte(GossipMessage.VERSION).writeVarLong(1);
      w.writeVarInt(1);
      rawEntry(w, "a", 1, 5, 1);
      w.writeByte(0).writeVarLong(5).writeVarInt(1); // no address, back 5, one delta
      w.writeVarLong(((ev[1] < 0 ? 1L : 2L) << 2) | Delta.EVICT).writeZigZagLong(ev[0]);
      if (ev[1] >= 0) {
        w.writeVarLong(ev[1]);
      }
      MalformedMessageException x =
          assertThrows(MalformedMessageException.class, () -> codec.decode(w.toByteArray()));
      assertEquals(Reason.OUT_OF_RANGE, x.reason());
      assertEquals("delta.stores", x.field());
      assertEquals(ev[2], x.value(), x.getMessage());
    }
    // {first generation's difference, the second's, value reported}
    long[][] generations = {
        {Long.MAX_VALUE, 0, Long.MAX_VALUE},
        {max, Long.MAX_VALUE, Long.MAX_VALUE}, // 2^62, then 2^62 + 2^63 - 1
        {max, -max - 1, -1}};
    for (long[] g : generations) {
      ByteWriter w = new ByteWriter(64, 64);
      w.writeByte(GossipMessage.TYPE_SYN).writeByte(GossipMessage.VERSION).writeVarLong(1)
          .writeVarLong(1).writeVarInt(2);
      rawEntry(w, "a", g[0], 1, 1);
      w.writeVarInt(0).writeBytes(new byte[] {'b'});
      w.writeZigZagLong(g[1]).writeVarLong(1).writeVarLong(1).writeByte(0);
      MalformedMessageException x =
          assertThrows(MalformedMessageException.class, () -> codec.decode(w.toByteArray()));
      assertEquals(Reason.OUT_OF_RANGE, x.reason());
      assertEquals("entry.generation", x.field());
      assertEquals(g[2], x.value(), x.getMessage());
    }
  }

  @Test
  void snapshotStoreNumbersMustAscendWithinTheStoreCount() {
    for (int k = 0; k < 2; k++) {
      ByteWriter c = new ByteWriter(64, 64);
      c.writeByte(GossipMessage.TYPE_SNAPSHOT_CHUNK).writeByte(GossipMessage.VERSION)
          .writeAscii("x", 64);
      c.writeVarLong(1).writeVarLong(1).writeVarLong(10).writeVarLong(0).writeVarLong(1);
      c.writeVarLong(2); // two blocks
      c.writeVarLong(3).writeFixedInt(1);
      c.writeVarLong(k == 0 ? 0 : 8).writeFixedInt(2); // gap 0, or store 11 > storeCount 10
      MalformedMessageException x =
          assertThrows(MalformedMessageException.class, () -> codec.decode(c.toByteArray()));
      assertEquals(Reason.OUT_OF_RANGE, x.reason());
      assertEquals(k == 0 ? "chunk.storeGap" : "chunk.store", x.field());
    }
  }

  @Test
  void snapshotStoreGapsThatOverflowAreOutOfRange() {
    // store 2^62 (the largest), then a gap of 2^62: the sum passes 2^63 and must not wrap
    ByteWriter c = new ByteWriter(64, 64);
    c.writeByte(GossipMessage.TYPE_SNAPSHOT_CHUNK).writeByte(GossipMessage.VERSION)
        .writeAscii("x", 64);
    c.writeVarLong(1).writeVarLong(1).writeVarLong(GossipMessage.MAX_COUNTER)
        .writeVarLong(0).writeVarLong(1);
    c.writeVarLong(2);
    c.writeVarLong(GossipMessage.MAX_COUNTER).writeFixedInt(1);
    c.writeVarLong(GossipMessage.MAX_COUNTER).writeFixedInt(2);
    MalformedMessageException x =
        assertThrows(MalformedMessageException.class, () -> codec.decode(c.toByteArray()));
    assertEquals(Reason.OUT_OF_RANGE, x.reason());
    assertEquals("chunk.store", x.field());
  }

  @Test
  void hugeCountsAreRejectedBeforeAllocating() {
    ByteWriter w = new ByteWriter(64, 64);
    w.writeByte(GossipMessage.TYPE_SYN).writeByte(GossipMessage.VERSION).writeVarLong(1)
        .writeVarLong(1);
    w.writeVarLong(Integer.MAX_VALUE); // digest count
    MalformedMessageException e =
        assertThrows(MalformedMessageException.class, () -> codec.decode(w.toByteArray()));
    assertEquals(Reason.TOO_LARGE, e.reason());
    assertEquals("digest.count", e.field());

    ByteWriter c = new ByteWriter(64, 64);
    c.writeByte(GossipMessage.TYPE_SNAPSHOT_CHUNK).writeByte(GossipMessage.VERSION)
        .writeAscii("x", 64);
    c.writeVarLong(1).writeVarLong(1).writeVarLong(400).writeVarLong(0).writeVarLong(1);
    c.writeVarLong(400); // 400 blocks claimed, within cap/5 = 819, but none present
    MalformedMessageException e2 =
        assertThrows(MalformedMessageException.class, () -> codec.decode(c.toByteArray()));
    assertEquals(Reason.TRUNCATED, e2.reason());
    assertEquals("chunk.blocks", e2.field());
  }

  @Test
  void unknownVersionTypeAndOversizeAreRejected() {
    // versions 1 (8-byte hashes) and 2 (evictions by fingerprint) are no longer spoken
    for (int v : new int[] {1, 2, 4}) {
      assertEquals(Reason.UNKNOWN_VERSION, assertThrows(MalformedMessageException.class,
          () -> codec.decode(new byte[] {0x10, (byte) v, 0, 0, 0})).reason());
    }
    assertEquals(Reason.UNKNOWN_TYPE, assertThrows(MalformedMessageException.class,
        () -> codec.decode(new byte[] {0x20, 1})).reason());
    assertEquals(Reason.TOO_LARGE, assertThrows(MalformedMessageException.class,
        () -> codec.decode(new byte[CAP + 1])).reason());
    assertEquals(Reason.TRUNCATED, assertThrows(MalformedMessageException.class,
        () -> codec.decode(new byte[0])).reason());
  }

  /** A digest entry as version 2 lays it out: no shared prefix, no load figures. */
  static void rawEntry(ByteWriter w, String id, long gen, long version, long heartbeat) {
    w.writeVarInt(0).writeBytes(id.getBytes(java.nio.charset.StandardCharsets.US_ASCII));
    w.writeZigZagLong(gen).writeVarLong(version).writeVarLong(heartbeat).writeByte(0);
  }

  @Test
  void frontCodedIdsAreCheckedAndShareTheirPrefix() throws MalformedMessageException {
    List<DigestEntry> digest = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      digest.add(new DigestEntry("gpu-node-" + (100 + i), 1_700_000_000_000_000L + i, i, i, 0,
          0, false));
    }
    byte[] b = codec.encode(new Syn(1, 1, digest));
    assertEquals(digest, ((Syn) codec.decode(b)).digest());
    // after the first, each entry costs 1 (shared) + 2 (rest "NN") + 1 (generation +1) + 3
    assertTrue(b.length < 40 + 20 * 8, "front coding not applied: " + b.length + " bytes");
    // a shared prefix longer than the previous id
    ByteWriter w = new ByteWriter(64, 64);
    w.writeByte(GossipMessage.TYPE_SYN).writeByte(GossipMessage.VERSION).writeVarLong(1)
        .writeVarLong(1).writeVarInt(2);
    rawEntry(w, "ab", 1, 0, 0);
    w.writeVarInt(3).writeBytes(new byte[] {'c'});
    w.writeZigZagLong(0).writeVarLong(0).writeVarLong(0).writeByte(0);
    assertEquals("entry.nodeId.shared", assertThrows(MalformedMessageException.class,
        () -> codec.decode(w.toByteArray())).field());
    // an empty id, a non-printable character, a generation below zero
    for (int k = 0; k < 3; k++) {
      ByteWriter v = new ByteWriter(64, 64);
      v.writeByte(GossipMessage.TYPE_SYN).writeByte(GossipMessage.VERSION).writeVarLong(1)
          .writeVarLong(1).writeVarInt(1);
      v.writeVarInt(0).writeBytes(k == 0 ? new byte[0] : new byte[] {(byte) (k == 1 ? ' ' : 'a')});
      v.writeZigZagLong(k == 2 ? -1 : 1).writeVarLong(0).writeVarLong(0).writeByte(0);
      MalformedMessageException e = assertThrows(MalformedMessageException.class,
          () -> codec.decode(v.toByteArray()));
      assertEquals(k == 2 ? "entry.generation" : "entry.nodeId", e.field());
    }
  }

  @Test
  void inconsistentFieldsAreRejected() throws MalformedMessageException {
    // a delta run past the header's version
    DigestEntry e = new DigestEntry("a", 1, 1, 1, 0, 0, false);
    Update u = new Update(e, "addr", 1, List.of(new Delta(2, Delta.STORE, new long[] {5})));
    byte[] b = codec.encode(new Ack2(1, List.of(u)));
    assertEquals(Reason.INCONSISTENT,
        assertThrows(MalformedMessageException.class, () -> codec.decode(b)).reason());
    // a delta whose head claims more fingerprints than the message holds
    ByteWriter w = new ByteWriter(64, 64);
    w.writeByte(GossipMessage.TYPE_ACK2).writeByte(GossipMessage.VERSION).writeVarLong(1);
    w.writeVarInt(1);
    rawEntry(w, "a", 1, 5, 1); // entry at version 5
    w.writeByte(0).writeVarLong(5).writeVarInt(1); // no address, back 5, one delta
    w.writeVarLong((100L << 2) | Delta.STORE); // 100 fingerprints, none present
    MalformedMessageException t =
        assertThrows(MalformedMessageException.class, () -> codec.decode(w.toByteArray()));
    assertEquals(Reason.TRUNCATED, t.reason());
    assertEquals("delta.hashes", t.field());
    // op 0 in a delta head, and a CLEAR that carries fingerprints
    for (long head : new long[] {1L << 2, (1L << 2) | Delta.CLEAR}) {
      ByteWriter h = new ByteWriter(64, 64);
      h.writeByte(GossipMessage.TYPE_ACK2).writeByte(GossipMessage.VERSION).writeVarLong(1);
      h.writeVarInt(1);
      rawEntry(h, "a", 1, 5, 1);
      h.writeByte(0).writeVarLong(5).writeVarInt(1).writeVarLong(head).writeFixedInt(7);
      assertThrows(MalformedMessageException.class, () -> codec.decode(h.toByteArray()));
    }
    // back past the header's version, and an unknown update flag
    byte[] ok = codec.encode(new Ack2(1, List.of(new Update(e, null, 1, List.of()))));
    byte[] past = ok.clone();
    past[past.length - 2] = 2; // back = 2 > version 1
    assertEquals("update.back",
        assertThrows(MalformedMessageException.class, () -> codec.decode(past)).field());
    byte[] flag = ok.clone();
    flag[flag.length - 3] = 2;
    assertEquals("update.flags",
        assertThrows(MalformedMessageException.class, () -> codec.decode(flag)).field());
    // an encoder never writes a value that is not a 32-bit fingerprint
    assertThrows(IllegalArgumentException.class, () -> codec.encode(new Ack2(1, List.of(
        new Update(new DigestEntry("a", 1, 1, 1, 0, 0, false), null, 0,
            List.of(new Delta(1, Delta.STORE, new long[] {1L << 32})))))));
    // an unknown flag bit
    byte[] syn = codec.encode(new Syn(1, 1, List.of(new DigestEntry("a", 1, 1, 1, 0, 0, true))));
    syn[syn.length - 1] = 8;
    assertEquals("entry.flags",
        assertThrows(MalformedMessageException.class, () -> codec.decode(syn)).field());
    // a chunk index at or past the chunk count (the last chunk of 2 is index 1)
    for (int index : new int[] {2, 3}) {
      byte[] chunk = codec.encode(new SnapshotChunk("a", 1, 1, 1, index, 2, new long[] {1},
          new long[] {7}));
      MalformedMessageException x =
          assertThrows(MalformedMessageException.class, () -> codec.decode(chunk));
      assertEquals("chunk.index", x.field());
      assertEquals(Reason.OUT_OF_RANGE, x.reason());
    }
    assertEquals(1, ((SnapshotChunk) codec.decode(codec.encode(new SnapshotChunk("a", 1, 1, 1,
        1, 2, new long[] {1}, new long[] {7})))).chunkIndex());
  }
}
