package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.internal.wire.ByteWriter;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.internal.wire.MalformedMessageException.Reason;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.constraints.StringLength;
import org.junit.jupiter.api.Test;

/** The STREAM message and the streaming (version 3) FORWARD. */
class StreamCodecTest {

  @Property
  void streamRoundTrips(@ForAll @StringLength(min = 1, max = 128) String id, @ForAll long tag,
      @ForAll @IntRange(min = 0, max = 1 << 19) int tokenOffset,
      @ForAll @Size(max = 64) int[] tokens,
      @ForAll @IntRange(min = 0, max = 1 << 19) int charOffset,
      @ForAll @StringLength(max = 200) String text) throws Exception {
    // the codec carries well-formed text (a lone surrogate has no UTF-8 encoding)
    String t = new String(text.getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8);
    String i = new String(id.getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8);
    byte[] m = ForwardCodec.stream(i, tag, tokenOffset, tokens, charOffset, t);
    ForwardCodec.Stream s = (ForwardCodec.Stream) ForwardCodec.decode(m);
    assertEquals(new ForwardCodec.Stream(i, tag, tokenOffset, tokens, charOffset, t), s);
    assertArrayEquals(tokens, s.tokens());
    assertTrue(ForwardCodec.isForwarding(m));
  }

  @Property
  void everyTruncationIsRejected(@ForAll @Size(max = 20) int[] tokens,
      @ForAll @StringLength(max = 20) String text) {
    String t = new String(text.getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8);
    byte[] m = ForwardCodec.stream("r1", 42, 3, tokens, 5, t);
    for (int n = 0; n < m.length; n++) {
      byte[] cut = Arrays.copyOf(m, n);
      assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(cut));
    }
  }

  @Test
  void theExampleOfTheWireFormatPageIsExact() {
    byte[] m = ForwardCodec.stream("r1", 7, 4, new int[] {3, 300}, 9, "ab");
    assertEquals("26 01 02 72 31 00 00 00 00 00 00 00 07 04 02 03 ac 02 09 02 61 62",
        java.util.HexFormat.ofDelimiter(" ").formatHex(m));
    assertEquals("26 01 02 72 31 00 00 00 00 00 00 00 07 04 02 03 ac 02 09 02 61 62",
        io.github.prefixrouter.internal.wire.WireFormatPage.example("26 01"));
  }

  /** docs/wire-format.md, "FORWARD, version 3", byte for byte, decoded back as laid out. */
  @Test
  void theVersion3ForwardExampleOfTheWireFormatPageIsExact() throws Exception {
    InferenceRequest r = new InferenceRequest("q-1", new int[] {1, 300, 70000},
        new GenerationParams(16, 0.5, 0.9, 42));
    String want = "21 03 03 71 2d 31 06 6f 72 69 67 69 6e 02 10 3f e0 00 00 00 00 00 00"
        + " 3f ec cc cc cc cc cc cd 00 00 00 00 00 00 00 2a 03 01 ac 02 f0 a2 04 00 00"
        + " 00 00 00 00 00 00 00 07";
    byte[] m = ForwardCodec.forward(r, "origin", 2, true, 7);
    assertEquals(want, java.util.HexFormat.ofDelimiter(" ").formatHex(m));
    assertEquals(want, io.github.prefixrouter.internal.wire.WireFormatPage.example("21 03"));
    ForwardCodec.Forward f = (ForwardCodec.Forward) ForwardCodec.decode(m);
    assertEquals(r, f.request());
    assertEquals(7, f.streamTag());
  }

  @Test
  void trailingBytesAreRejected() {
    byte[] m = ForwardCodec.stream("r1", 42, 0, new int[] {1, 2}, 0, "ab");
    byte[] longer = Arrays.copyOf(m, m.length + 1);
    MalformedMessageException e = assertThrows(MalformedMessageException.class,
        () -> ForwardCodec.decode(longer));
    assertEquals(Reason.TRAILING_BYTES, e.reason());
  }

  /** A STREAM written field by field, for frames the encoder refuses to write. */
  static byte[] raw(int version, int tokenOffset, int count, int charOffset, byte[] text) {
    ByteWriter w = new ByteWriter(64, 1 << 24);
    w.writeByte(ForwardCodec.STREAM).writeByte(version);
    w.writeBytes("r1".getBytes(StandardCharsets.UTF_8));
    w.writeFixedLong(7);
    w.writeVarInt(tokenOffset);
    w.writeVarInt(count);
    for (int k = 0; k < count; k++) {
      w.writeVarInt(k);
    }
    w.writeVarInt(charOffset);
    w.writeBytes(text);
    return w.toByteArray();
  }

  static Reason reason(byte[] m) {
    return assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(m)).reason();
  }

  @Test
  void oversizedAndOutOfRangeStreamsAreRejected() throws Exception {
    byte[] ok = raw(1, 10, 3, 4, "abc".getBytes(StandardCharsets.UTF_8));
    assertEquals(3, ((ForwardCodec.Stream) ForwardCodec.decode(ok)).tokens().length);
    // more tokens than a STREAM carries
    assertEquals(Reason.TOO_LARGE, reason(raw(1, 0, ForwardCodec.MAX_STREAM_TOKENS + 1, 0,
        new byte[0])));
    // more text than a STREAM carries
    assertEquals(Reason.TOO_LARGE, reason(raw(1, 0, 0, 0,
        new byte[ForwardCodec.MAX_STREAM_TEXT_BYTES + 1])));
    // a piece ending past the longest output
    assertEquals(Reason.OUT_OF_RANGE, reason(raw(1, ForwardCodec.MAX_STREAM_OFFSET - 1, 2, 0,
        new byte[0])));
    assertEquals(Reason.OUT_OF_RANGE, reason(raw(1, ForwardCodec.MAX_STREAM_OFFSET + 1, 0, 0,
        new byte[0])));
    assertEquals(Reason.OUT_OF_RANGE, reason(raw(1, 0, 0, ForwardCodec.MAX_STREAM_OFFSET,
        "x".getBytes(StandardCharsets.UTF_8))));
    // text that is not UTF-8
    assertEquals(Reason.BAD_CHARACTER, reason(raw(1, 0, 0, 0, new byte[] {(byte) 0xC3})));
    // an unknown version
    assertEquals(Reason.UNKNOWN_VERSION, reason(raw(2, 0, 0, 0, new byte[0])));
    // a lying count is rejected before allocating
    byte[] lie = raw(1, 0, 0, 0, new byte[0]);
    int countAt = 2 + 1 + 2 + 8 + 1;
    lie[countAt] = (byte) 0x7F;
    assertEquals(Reason.TRUNCATED, reason(lie));
  }

  @Test
  void theEncoderRefusesPiecesPastTheLimits() {
    assertThrows(IllegalArgumentException.class, () -> ForwardCodec.stream("r", 1, 0,
        new int[ForwardCodec.MAX_STREAM_TOKENS + 1], 0, ""));
    assertThrows(IllegalArgumentException.class, () -> ForwardCodec.stream("r", 1,
        ForwardCodec.MAX_STREAM_OFFSET, new int[1], 0, ""));
    assertThrows(IllegalArgumentException.class, () -> ForwardCodec.stream("r", 1, 0,
        new int[0], ForwardCodec.MAX_STREAM_OFFSET, "x"));
  }

  @Property
  void aStreamingForwardRoundTripsInEveryScope(@ForAll long tag, @ForAll boolean scoped,
      @ForAll @IntRange(min = 1, max = 64) int hops) throws Exception {
    InferenceRequest r = new InferenceRequest("r1", new int[] {5, 6, 7},
        GenerationParams.greedy(9));
    if (scoped) {
      r = r.withScope(CacheScope.of("adapter-a", "salt"));
    }
    byte[] m = ForwardCodec.forward(r, "o", hops, true, tag);
    assertEquals(ForwardCodec.STREAMING_FORWARD_VERSION, m[1]);
    ForwardCodec.Forward f = (ForwardCodec.Forward) ForwardCodec.decode(m);
    assertEquals(r, f.request());
    assertTrue(f.stream());
    assertEquals(tag, f.streamTag());
    assertEquals(hops, f.hops());
  }

  @Test
  void aForwardWithoutStreamingIsEncodedAsBefore() throws Exception {
    InferenceRequest r = new InferenceRequest("r1", new int[] {5, 6, 7},
        GenerationParams.greedy(9));
    byte[] plain = ForwardCodec.forward(r, "o", 1);
    assertArrayEquals(plain, ForwardCodec.forward(r, "o", 1, false, 99));
    assertEquals(ForwardCodec.VERSION, plain[1]);
    ForwardCodec.Forward f = (ForwardCodec.Forward) ForwardCodec.decode(plain);
    assertFalse(f.stream());
    InferenceRequest s = r.withScope(CacheScope.of("a", ""));
    assertEquals(ForwardCodec.SCOPED_FORWARD_VERSION, ForwardCodec.forward(s, "o", 1, false, 9)[1]);
    // a version-3 FORWARD must carry its tag
    byte[] streaming = ForwardCodec.forward(r, "o", 1, true, 99);
    assertEquals(Reason.TRUNCATED, reason(Arrays.copyOf(streaming, streaming.length - 1)));
  }
}
