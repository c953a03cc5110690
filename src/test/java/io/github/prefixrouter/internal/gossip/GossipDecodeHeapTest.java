package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.internal.wire.ByteWriter;
import io.github.prefixrouter.testing.Allocations;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What decoding an update takes of the heap: deltas are held packed ({@link PackedDeltas}), at
 * most 8 bytes per byte of the message, however small the deltas; and an update as large as an
 * origin sends at the largest message cap still round-trips.
 */
class GossipDecodeHeapTest {

  private static final int CAP = 1 << 20;
  private final GossipCodec codec = new GossipCodec(CAP, GossipConfig.MAX_PEERS_LIMIT + 1);

  /** An ACK2 with one update of {@code n} deltas, each the bytes {@code delta}. */
  private static byte[] ack2(int n, byte... delta) {
    ByteWriter w = new ByteWriter(CAP, CAP);
    w.writeByte(GossipMessage.TYPE_ACK2).writeByte(GossipMessage.VERSION).writeVarLong(1);
    w.writeVarInt(1);
    w.writeVarInt(0).writeBytes(new byte[] {'a'}).writeVarLong(2); // id "a", generation 1
    w.writeVarLong(n).writeVarLong(0).writeByte(0); // version n, heartbeat 0, no flags
    w.writeByte(0).writeVarLong(n).writeVarInt(n); // no address, back n, n deltas
    for (int i = 0; i < n; i++) {
      w.writeRaw(delta, 0, delta.length);
    }
    return w.toByteArray();
  }

  /** As many deltas of {@code delta} as fit in the cap. */
  private static byte[] fullOf(byte... delta) {
    return ack2((CAP - 32) / delta.length, delta);
  }

  @ParameterizedTest(name = "op {0}")
  @ValueSource(ints = {Delta.STORE, Delta.EVICT, Delta.CLEAR})
  void oneByteDeltasTakeAtMostEightBytesOfHeapEach(int op) throws Exception {
    byte[] m = fullOf((byte) op); // CLEAR, or a STORE or EVICT of nothing
    long before = Allocations.ofThisThread();
    Ack2 a = (Ack2) codec.decode(m);
    long allocated = Allocations.ofThisThread() - before;
    List<Delta> deltas = a.updates().get(0).deltas();
    int n = CAP - 32;
    assertEquals(n, deltas.size());
    for (int i : new int[] {0, 1, n / 2, n - 1}) {
      Delta d = deltas.get(i);
      assertEquals(i + 1, d.seq());
      assertEquals(op, d.op());
      assertEquals(0, d.hashes().length);
    }
    // one Delta object and its list slot per byte took 36 bytes
    assertTrue(allocated <= 8L * m.length,
        "decoding " + m.length + " bytes allocated " + allocated);
  }

  @Test
  void evictionsOfOneBlockTakeAtMostEightBytesOfHeapPerByte() throws Exception {
    // EVICT of one store number each, 2 bytes: the first names store 1, the others the same
    byte[] m = fullOf((byte) ((1 << 2) | Delta.EVICT), (byte) 2);
    long before = Allocations.ofThisThread();
    Ack2 a = (Ack2) codec.decode(m);
    long allocated = Allocations.ofThisThread() - before;
    List<Delta> deltas = a.updates().get(0).deltas();
    assertEquals((CAP - 32) / 2, deltas.size());
    assertArrayEquals(new long[] {1}, deltas.get(0).hashes());
    assertArrayEquals(new long[] {2}, deltas.get(1).hashes());
    assertArrayEquals(new long[] {deltas.size()}, deltas.get(deltas.size() - 1).hashes());
    // a Delta object, its one-element array and its list slot took 60 bytes
    assertTrue(allocated <= 8L * m.length,
        "decoding " + m.length + " bytes allocated " + allocated);
  }

  @Test
  void theLargestUpdateAnOriginSendsAtTheLargestCapRoundTrips() throws Exception {
    GossipConfig config = GossipConfig.builder().messageByteCap(16 << 20)
        .snapshotBytesPerExchange(16 << 20).deltaLogMaxHashes(1L << 26).build();
    int cap = config.messageByteCap();
    // as GossipEngine sizes its summary and serves its own deltas
    LocalSummary summary = new LocalSummary(1, config.deltaLogMaxHashes(),
        Math.max(1, (cap - 1_024) / 8 / 2));
    int blocks = 3_000_000;
    long[] hashes = new long[blocks];
    for (int i = 0; i < blocks; i++) {
      hashes[i] = i + 1;
    }
    summary.onStored(hashes); // 3 STOREs of about a million fingerprints
    summary.onEvicted(Arrays.copyOf(hashes, blocks - 1)); // 3 EVICTs
    summary.onCleared();
    summary.onStored(new long[] {7});
    summary.onEvicted(new long[] {7});
    long version = summary.version();
    DigestEntry me = new DigestEntry("node-0", 1, version, 5, 0, 0, false);
    int headerSize = GossipCodec.headerOnlySize(me, "sim:0", 0) + 8;
    List<Delta> sent = summary.deltasAfter(0, cap - 64 - headerSize, cap - 256 - headerSize);
    assertEquals(version, sent.size());
    GossipCodec big = new GossipCodec(cap, GossipConfig.MAX_PEERS_LIMIT + 1);
    byte[] m = big.encode(new Ack2(1, List.of(new Update(me, "sim:0", 0, sent))));
    assertTrue(m.length > 14 << 20, "message of " + m.length + " bytes");
    Update got = ((Ack2) big.decode(m)).updates().get(0);
    assertEquals(me, got.header());
    assertEquals(sent.size(), got.deltas().size());
    for (int i = 0; i < sent.size(); i++) {
      Delta a = sent.get(i);
      Delta b = got.deltas().get(i);
      assertEquals(a.seq(), b.seq());
      assertEquals(a.op(), b.op());
      assertArrayEquals(a.hashes(), b.hashes(), "delta " + i);
    }
  }

  /** Bytes allocated by this thread so far. */
}
