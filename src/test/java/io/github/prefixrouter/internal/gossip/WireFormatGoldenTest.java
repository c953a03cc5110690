package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Request;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.internal.wire.WireFormatPage;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The byte-by-byte examples of docs/wire-format.md, encoded and decoded by the codec: each is
 * written here and compared with the page as well ({@link WireFormatPage}).
 */
class WireFormatGoldenTest {

  final GossipCodec codec = new GossipCodec(65_536, 4_097);

  static String hex(byte[] b) {
    return HexFormat.ofDelimiter(" ").formatHex(b);
  }

  /**
   * The page's examples are these eight, each compared with its encoder: the gossip ones here,
   * FORWARD versions 3, 4 and 5 and STREAM by StreamCodecTest, StopsForwardCodecTest,
   * ModelIdForwardCodecProperties and StreamCodecTest. An example added to the page needs a test of its own.
   */
  @Test
  void everyExampleOnThePageIsCheckedByATest() {
    assertEquals(List.of("10 03", "12 03", "11 03", "13 03", "21 03", "21 04", "21 05", "26 01"),
        WireFormatPage.examples().stream().map(e -> e.substring(0, 5)).toList());
  }

  /**
   * The bounds the page's layouts state are the codec's: the least bytes of each list element,
   * the most origins a list may hold, the largest digest entry (by which a receiver tells a
   * digest that may have left origins out) and the least bytes of a snapshot block.
   */
  @Test
  void theBoundsOnThePageAreTheCodecs() throws java.io.IOException {
    String page = java.nio.file.Files.readString(java.nio.file.Path.of("docs", "wire-format.md"))
        .replaceAll("\\s+", " ");
    java.util.function.Consumer<String> says = text ->
        org.junit.jupiter.api.Assertions.assertTrue(page.contains(text),
            "docs/wire-format.md should say: " + text);
    says.accept("`maxOrigins` is " + String.format("%,d", GossipConfig.MAX_PEERS_LIMIT + 1)
        + " (the most peers any node may be configured for, "
        + String.format("%,d", GossipConfig.MAX_PEERS_LIMIT) + ", plus the sender)");
    says.accept("digest count(maxOrigins, " + GossipCodec.MIN_DIGEST_ENTRY_BYTES + ")");
    says.accept("updates count(maxOrigins, " + GossipCodec.MIN_UPDATE_BYTES + ")");
    says.accept("requests count(maxOrigins, " + GossipCodec.MIN_REQUEST_BYTES + ")");
    // a node reads messages up to the largest cap whatever its own
    says.accept("`readCap` is " + String.format("%,d", GossipConfig.MAX_MESSAGE_BYTE_CAP)
        + " (" + (GossipConfig.MAX_MESSAGE_BYTE_CAP >> 20) + " MiB, the largest `messageByteCap`)");
    says.accept("count(readCap, " + GossipCodec.MIN_DELTA_BYTES + ") x Delta");
    says.accept("blocks count(readCap/" + GossipCodec.MIN_CHUNK_BLOCK_BYTES + ", "
        + GossipCodec.MIN_CHUNK_BLOCK_BYTES + ") x Block");
    says.accept("within " + GossipCodec.MAX_DIGEST_ENTRY_BYTES + " bytes (the largest entry)");
    // the largest entry, as its codec writes it: a 64-character id first in its list, a
    // generation 2^62 above the previous one (zigzag 2^63: 10 bytes), version and heartbeat
    // 2^62, the load at its most
    DigestEntry largest = new DigestEntry("x".repeat(64), GossipMessage.MAX_COUNTER,
        GossipMessage.MAX_COUNTER, GossipMessage.MAX_COUNTER, Integer.MAX_VALUE,
        Integer.MAX_VALUE, true, true);
    GossipCodec.Prev prev = new GossipCodec.Prev();
    assertEquals(GossipCodec.MAX_DIGEST_ENTRY_BYTES, GossipCodec.sizeOf(largest, prev));
    // a SYN of round 0, generation 0 and that entry alone: 5 bytes of framing
    assertEquals(5 + GossipCodec.MAX_DIGEST_ENTRY_BYTES,
        codec.encode(new Syn(0, 0, List.of(largest))).length);
  }

  @Test
  void synExample() throws MalformedMessageException {
    Syn syn = new Syn(7, 1, List.of(
        new DigestEntry("node-1", 1, 5, 9, 0, 0, false),
        new DigestEntry("node-12", 1, 300, 9, 2, 1, true)));
    String expected = "10 03 07 01 02"
        + " 00 06 6e 6f 64 65 2d 31 02 05 09 00"
        + " 06 01 32 00 ac 02 09 03 02 01";
    byte[] b = codec.encode(syn);
    assertEquals(expected, hex(b));
    assertEquals(expected, WireFormatPage.example("10 03"));
    assertEquals(syn, codec.decode(HexFormat.ofDelimiter(" ").parseHex(expected)));
  }

  @Test
  void ack2Example() throws MalformedMessageException {
    // node-3 had handed out store numbers 1..100: the two stored fingerprints become 101 and
    // 102; the eviction names the blocks stored 37th, 38th and 40th
    Update u = new Update(new DigestEntry("node-3", 1, 42, 17, 0, 0, false), null, 40, List.of(
        new Delta(41, Delta.STORE, new long[] {0x0A0B0C0DL, 0x01020304L}),
        new Delta(42, Delta.EVICT, new long[] {37, 38, 40})));
    String expected = "12 03 01 01"
        + " 00 06 6e 6f 64 65 2d 33 02 2a 11 00"
        + " 00 02 02"
        + " 09 0a 0b 0c 0d 01 02 03 04"
        + " 0e 4a 00 01";
    byte[] b = codec.encode(new Ack2(1, List.of(u)));
    assertEquals(expected, hex(b));
    assertEquals(expected, WireFormatPage.example("12 03"));
    Update back = ((Ack2) codec.decode(b)).updates().get(0);
    assertEquals(40, back.fromVersion());
    assertEquals(List.of(41L, 42L), back.deltas().stream().map(Delta::seq).toList());
    assertArrayEquals(new long[] {37, 38, 40}, back.deltas().get(1).hashes());
  }

  /**
   * The page's ACK example, laid out as "0x11 ACK" and "Shared structures" say, field by field:
   * an update with its address and a CLEAR, then the requests, whose ids and generations are
   * coded against the previous request, not against the updates before them.
   */
  @Test
  void ackExample() throws MalformedMessageException {
    Update u = new Update(new DigestEntry("node-7", 3, 5, 9, 0, 0, false), "10.0.0.7:7000", 4,
        List.of(new Delta(5, Delta.CLEAR, Delta.NO_HASHES)));
    Ack ack = new Ack(300, 2, List.of(u),
        List.of(new Request("node-10", 1, 4), new Request("node-11", 0, 0)));
    String expected = "11 03 ac 02 02" // type ACK, version 3, round 300, senderGeneration 2
        + " 01" // 1 update
        + " 00 06 6e 6f 64 65 2d 37 06 05 09 00" // "node-7", generation +3, version 5, hb 9
        + " 01 0d 31 30 2e 30 2e 30 2e 37 3a 37 30 30 30" // address "10.0.0.7:7000"
        + " 01 01 03" // back 1 (from version 4), 1 delta: head (0 << 2) | CLEAR
        + " 02" // 2 requests
        + " 00 07 6e 6f 64 65 2d 31 30 02 04" // "node-10" (against the empty id), +1, version 4
        + " 06 01 31 01 00"; // shared 6, rest "1", generation -1 (zigzag 1), version 0
    byte[] b = codec.encode(ack);
    assertEquals(expected, hex(b));
    assertEquals(expected, WireFormatPage.example("11 03"));
    Ack back = (Ack) codec.decode(b);
    assertEquals(ack.requests(), back.requests());
    assertEquals("10.0.0.7:7000", back.updates().get(0).address());
    assertEquals(4, back.updates().get(0).fromVersion());
    assertEquals(Delta.CLEAR, back.updates().get(0).deltas().get(0).op());
  }

  /**
   * "Strict decoding": a varint of 2^63 or more is written unsigned in the error, as the page
   * shows it for a SYN claiming 2^64 - 1 digest entries.
   */
  @Test
  void aCountOfTwoToThe64MinusOneIsReportedUnsigned() {
    byte[] syn = HexFormat.ofDelimiter(" ").parseHex(
        "10 03 07 01 ff ff ff ff ff ff ff ff ff 01");
    MalformedMessageException e =
        org.junit.jupiter.api.Assertions.assertThrows(MalformedMessageException.class,
            () -> new GossipCodec(65_536, 65_537).decode(syn));
    assertEquals(-1, e.value());
    org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains(
        "TOO_LARGE in field 'digest.count': 18446744073709551615 exceeds limit 65537"),
        e.getMessage());
  }

  /**
   * "Sizes": the first block of an update's first EVICT is coded against 0, so it costs the
   * varint of twice its store number (3 bytes below 2^20, 4 below 2^27, 5 below 2^34); the first
   * of a later EVICT of the same update costs its distance from the previous one's last.
   */
  @Test
  void theFirstEvictionOfAnUpdateCostsTheVarintOfTwiceItsStoreNumber() {
    long[][] cases = {{1, 1}, {63, 1}, {64, 2}, (new long[] {(1 << 20) - 1, 3}),
        {1 << 20, 4}, {(1 << 27) - 1, 4}, {1 << 27, 5}, {(1L << 34) - 1, 5}, {1L << 34, 6}};
    for (long[] c : cases) {
      assertEquals(c[1], storeBytes(List.of(new Delta(1, Delta.EVICT, new long[] {c[0]}))),
          "store number " + c[0]);
    }
    // a later EVICT of the same update, near the previous one's last: one byte
    long far = 1L << 30;
    assertEquals(5 + 1, storeBytes(List.of(new Delta(1, Delta.EVICT, new long[] {far}),
        new Delta(2, Delta.EVICT, new long[] {far + 40}))));
  }

  /** Bytes of the store numbers of {@code deltas}, EVICTs of one update: their heads taken off. */
  private long storeBytes(List<Delta> deltas) {
    Update with = new Update(new DigestEntry("o", 1, deltas.size(), 1, 0, 0, false), null, 0,
        deltas);
    List<Delta> clears = new java.util.ArrayList<>();
    for (Delta d : deltas) {
      clears.add(new Delta(d.seq(), Delta.CLEAR, Delta.NO_HASHES)); // a one-byte head alone
    }
    Update without = new Update(with.header(), null, 0, clears);
    return codec.encode(new Ack2(1, List.of(with))).length
        - codec.encode(new Ack2(1, List.of(without))).length;
  }

  @Test
  void snapshotChunkExample() throws MalformedMessageException {
    SnapshotChunk c = new SnapshotChunk("node-3", 1, 42, 102, 0, 1, new long[] {38, 40},
        new long[] {0x0A0B0C0DL, 0x01020304L});
    String expected = "13 03 06 6e 6f 64 65 2d 33 01 2a 66 00 01 02"
        + " 26 0a 0b 0c 0d"
        + " 02 01 02 03 04";
    byte[] b = codec.encode(c);
    assertEquals(expected, hex(b));
    assertEquals(expected, WireFormatPage.example("13 03"));
    SnapshotChunk back = (SnapshotChunk) codec.decode(b);
    assertArrayEquals(c.stores(), back.stores());
    assertArrayEquals(c.hashes(), back.hashes());
    assertEquals(102, back.storeCount());
  }
}
