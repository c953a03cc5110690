package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.internal.wire.ByteWriter;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.internal.wire.MalformedMessageException.Reason;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * FORWARD of scoped requests: version 1 unchanged for the default scope (old nodes decode it),
 * version 2 with the scope appended, decoded strictly.
 */
class ScopedForwardCodecTest {

  private static final InferenceRequest PLAIN = new InferenceRequest("q-1", new int[] {1, 300, 70000},
      new GenerationParams(16, 0.5, 0.9, 42));

  /**
   * The version-1 body of request {@code q-1} (16 tokens at most, temperature 0.5, top-p 0.9,
   * seed 42, tokens 1, 300, 70000) from {@code origin} at hop 2, written field by field as
   * docs/routing.md lays it out, with {@code version} in its version byte.
   */
  static ByteWriter v1(int version) {
    ByteWriter w = new ByteWriter(64, 1 << 16);
    w.writeByte(0x21).writeByte(version);
    w.writeBytes("q-1".getBytes(StandardCharsets.UTF_8));
    w.writeAscii("origin", 64);
    w.writeVarInt(2);
    w.writeVarInt(16);
    w.writeFixedLong(Double.doubleToLongBits(0.5));
    w.writeFixedLong(Double.doubleToLongBits(0.9));
    w.writeFixedLong(42);
    w.writeVarInt(3).writeVarInt(1).writeVarInt(300).writeVarInt(70000);
    return w;
  }

  private static Reason reasonOf(byte[] frame) {
    return assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(frame))
        .reason();
  }

  @Test
  void anUnscopedRequestIsEncodedExactlyAsVersionOne() throws Exception {
    byte[] frame = ForwardCodec.forward(PLAIN, "origin", 2);
    assertArrayEquals(v1(1).toByteArray(), frame);
    // what a node before scopes did with it: the version byte is the one it speaks
    assertEquals(1, frame[1]);
    assertEquals(PLAIN, ((ForwardCodec.Forward) ForwardCodec.decode(frame)).request());
  }

  @Test
  void aScopedRequestIsVersionTwoWithTheScopeAppended() throws Exception {
    CacheScope scope = CacheScope.of("sql-lora", "t\u00e9nant");
    InferenceRequest r = PLAIN.withScope(scope);
    byte[] frame = ForwardCodec.forward(r, "origin", 2);
    ByteWriter w = v1(2);
    w.writeBytes("sql-lora".getBytes(StandardCharsets.UTF_8));
    w.writeBytes("t\u00e9nant".getBytes(StandardCharsets.UTF_8));
    assertArrayEquals(w.toByteArray(), frame);
    ForwardCodec.Forward f = (ForwardCodec.Forward) ForwardCodec.decode(frame);
    assertEquals(r, f.request());
    assertEquals(scope, f.request().scope());
    // only one of the two
    for (CacheScope s : new CacheScope[] {CacheScope.adapter("a"), CacheScope.salt("s"),
        CacheScope.of("\uD83D\uDE00".repeat(64), "x".repeat(CacheScope.MAX_SALT_BYTES))}) {
      assertEquals(s, ((ForwardCodec.Forward) ForwardCodec.decode(
          ForwardCodec.forward(PLAIN.withScope(s), "o", 0))).request().scope());
    }
  }

  @Test
  void otherMessagesStayAtVersionOne() {
    byte[] busy = ForwardCodec.busy("q", 1);
    busy[1] = 2;
    assertEquals(Reason.UNKNOWN_VERSION, reasonOf(busy));
    byte[] frame = ForwardCodec.forward(PLAIN.withScope(CacheScope.adapter("a")), "o", 0);
    frame[1] = 6; // 3 is the streaming FORWARD, 4 the one with stops, 5 the one with a model id
    assertEquals(Reason.UNKNOWN_VERSION, reasonOf(frame));
  }

  @Test
  void theScopeFieldsAreDecodedStrictly() {
    // version 2 naming the default scope: one encoding per request
    assertEquals(Reason.OUT_OF_RANGE, reasonOf(v1(2).writeBytes(new byte[0])
        .writeBytes(new byte[0]).toByteArray()));
    // an unscoped body marked version 2: the scope is missing
    assertEquals(Reason.TRUNCATED, reasonOf(v1(2).toByteArray()));
    assertEquals(Reason.TRUNCATED, reasonOf(v1(2).writeBytes("a".getBytes()).toByteArray()));
    // a scoped body marked version 1: its scope is trailing bytes
    assertEquals(Reason.TRAILING_BYTES, reasonOf(v1(1).writeBytes("a".getBytes())
        .writeBytes(new byte[0]).toByteArray()));
    // not UTF-8 (a lone continuation byte, an encoded surrogate)
    assertEquals(Reason.BAD_CHARACTER, reasonOf(v1(2).writeBytes(new byte[] {'a', (byte) 0x80})
        .writeBytes(new byte[0]).toByteArray()));
    assertEquals(Reason.BAD_CHARACTER, reasonOf(v1(2).writeBytes(new byte[0])
        .writeBytes(new byte[] {(byte) 0xED, (byte) 0xA0, (byte) 0x80}).toByteArray()));
    // a control character
    assertEquals(Reason.BAD_CHARACTER, reasonOf(v1(2).writeBytes("a\nb".getBytes())
        .writeBytes(new byte[0]).toByteArray()));
    // too long: 257 bytes of adapter, of salt
    byte[] long257 = new byte[CacheScope.MAX_ADAPTER_BYTES + 1];
    Arrays.fill(long257, (byte) 'a');
    assertEquals(Reason.TOO_LARGE, reasonOf(v1(2).writeBytes(long257)
        .writeBytes(new byte[0]).toByteArray()));
    assertEquals(Reason.TOO_LARGE, reasonOf(v1(2).writeBytes(new byte[0])
        .writeBytes(long257).toByteArray()));
    // a lying length
    assertEquals(Reason.TOO_LARGE, reasonOf(v1(2).writeVarInt(Integer.MAX_VALUE)
        .writeByte('a').toByteArray()));
    // trailing bytes after the scope
    assertEquals(Reason.TRAILING_BYTES, reasonOf(v1(2).writeBytes("a".getBytes())
        .writeBytes(new byte[0]).writeByte(0).toByteArray()));
  }

  @Test
  void everyTruncationOfAScopedFrameIsRejected() {
    byte[] frame = ForwardCodec.forward(PLAIN.withScope(CacheScope.of("lora", "salt")), "o", 1);
    for (int cut = 0; cut < frame.length; cut++) {
      byte[] t = Arrays.copyOf(frame, cut);
      assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(t), "cut " + cut);
    }
  }
}
