package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The byte-by-byte examples of docs/wire-format.md, encoded and decoded by the codec. */
class WireFormatGoldenTest {

  final GossipCodec codec = new GossipCodec(65_536, 4_097);

  static String hex(byte[] b) {
    return HexFormat.ofDelimiter(" ").formatHex(b);
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
    Update back = ((Ack2) codec.decode(b)).updates().get(0);
    assertEquals(40, back.fromVersion());
    assertEquals(List.of(41L, 42L), back.deltas().stream().map(Delta::seq).toList());
    assertArrayEquals(new long[] {37, 38, 40}, back.deltas().get(1).hashes());
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
    SnapshotChunk back = (SnapshotChunk) codec.decode(b);
    assertArrayEquals(c.stores(), back.stores());
    assertArrayEquals(c.hashes(), back.hashes());
    assertEquals(102, back.storeCount());
  }
}
