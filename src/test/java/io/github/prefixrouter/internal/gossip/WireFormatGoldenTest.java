package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
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
    String expected = "10 02 07 01 02"
        + " 00 06 6e 6f 64 65 2d 31 02 05 09 00"
        + " 06 01 32 00 ac 02 09 03 02 01";
    byte[] b = codec.encode(syn);
    assertEquals(expected, hex(b));
    assertEquals(syn, codec.decode(HexFormat.ofDelimiter(" ").parseHex(expected)));
  }

  @Test
  void ack2Example() throws MalformedMessageException {
    Update u = new Update(new DigestEntry("node-3", 1, 42, 17, 0, 0, false), null, 40, List.of(
        new Delta(41, Delta.STORE, new long[] {0x0A0B0C0DL, 0x01020304L}),
        new Delta(42, Delta.EVICT, new long[] {0xFFFF_FFFFL})));
    String expected = "12 02 01 01"
        + " 00 06 6e 6f 64 65 2d 33 02 2a 11 00"
        + " 00 02 02"
        + " 09 0a 0b 0c 0d 01 02 03 04"
        + " 06 ff ff ff ff";
    byte[] b = codec.encode(new Ack2(1, List.of(u)));
    assertEquals(expected, hex(b));
    Update back = ((Ack2) codec.decode(b)).updates().get(0);
    assertEquals(40, back.fromVersion());
    assertEquals(List.of(41L, 42L), back.deltas().stream().map(Delta::seq).toList());
  }
}
