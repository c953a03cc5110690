package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.internal.wire.ByteWriter;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.internal.wire.MalformedMessageException.Reason;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.Allocations;
import java.util.Arrays;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/**
 * Hostile input for the forwarding codec: random bytes, mutations of valid frames (flipped,
 * inserted and deleted bytes, truncation, trailing garbage, lying lengths and counts, unknown
 * versions and types) and size bombs. The only failure allowed is
 * {@link MalformedMessageException}, and a bomb must be rejected before its claimed size is
 * allocated.
 */
class ForwardCodecFuzzTest {

  // ---------------------------------------------------------------- round trips

  @Property
  void validFramesRoundTrip(@ForAll("requests") InferenceRequest r,
      @ForAll @IntRange(min = 1, max = 8) int hops, @ForAll("results") EngineResult res)
      throws MalformedMessageException {
    Object f = ForwardCodec.decode(ForwardCodec.forward(r, "origin-1", hops));
    ForwardCodec.Forward fw = assertInstanceOf(ForwardCodec.Forward.class, f);
    assertEquals(r, fw.request());
    assertEquals(hops, fw.hops());
    assertEquals("origin-1", fw.origin());

    Object g = ForwardCodec.decode(ForwardCodec.result(r.id(), "n-7", 1234, res));
    ForwardCodec.Result rr = assertInstanceOf(ForwardCodec.Result.class, g);
    assertEquals(res, rr.result());
    assertEquals("n-7", rr.servedBy());
    assertEquals(1234, rr.serverNanos());

    assertEquals(new ForwardCodec.Busy(r.id(), 17),
        ForwardCodec.decode(ForwardCodec.busy(r.id(), 17)));
    assertEquals(new ForwardCodec.Cancel(r.id(), "o"),
        ForwardCodec.decode(ForwardCodec.cancel(r.id(), "o")));
    ForwardCodec.Failed fl = assertInstanceOf(ForwardCodec.Failed.class,
        ForwardCodec.decode(ForwardCodec.failed(r.id(), true, "x".repeat(5000))));
    assertTrue(fl.message().length() <= ForwardCodec.MAX_ERROR_BYTES);
  }

  // ---------------------------------------------------------------- random and mutated bytes

  @Property
  void randomBytesOnlyEverThrowTheTypedException(@ForAll("randomFrames") byte[] bytes) {
    decodeOrTypedError(bytes);
  }

  @Property
  void mutatedFramesOnlyEverThrowTheTypedException(
      @ForAll("validFrames") byte[] valid,
      @ForAll @IntRange(min = 0, max = 1 << 20) int where,
      @ForAll @IntRange(min = 0, max = 8) int how,
      @ForAll byte b) {
    byte[] m = mutate(valid, where, how, b);
    decodeOrTypedError(m);
  }

  @Property
  void everyTruncationIsRejected(@ForAll("validFrames") byte[] valid,
      @ForAll @IntRange(min = 0, max = 1 << 20) int where) {
    int cut = where % valid.length;
    MalformedMessageException e = assertThrows(MalformedMessageException.class,
        () -> ForwardCodec.decode(Arrays.copyOf(valid, cut)));
    assertNotNull(e.reason());
  }

  @Property
  void trailingBytesAreRejected(@ForAll("validFrames") byte[] valid, @ForAll byte extra) {
    byte[] m = Arrays.copyOf(valid, valid.length + 1);
    m[valid.length] = extra;
    MalformedMessageException e = assertThrows(MalformedMessageException.class,
        () -> ForwardCodec.decode(m));
    assertEquals(Reason.TRAILING_BYTES, e.reason());
  }

  @Property
  void unknownVersionsAreRejectedByName(@ForAll("validFrames") byte[] valid,
      @ForAll @IntRange(min = 0, max = 255) int version) {
    if (version == ForwardCodec.VERSION || (valid[0] == ForwardCodec.FORWARD
        && (version == ForwardCodec.SCOPED_FORWARD_VERSION
            || version == ForwardCodec.STREAMING_FORWARD_VERSION
            || version == ForwardCodec.STOPS_FORWARD_VERSION
            || version == ForwardCodec.MODEL_FORWARD_VERSION))) {
      return; // FORWARD speaks all five (an unscoped body read as scoped is TRUNCATED, and a
              // scoped one read as unscoped has TRAILING_BYTES: see ScopedForwardCodecTest)
    }
    byte[] m = valid.clone();
    m[1] = (byte) version;
    MalformedMessageException e = assertThrows(MalformedMessageException.class,
        () -> ForwardCodec.decode(m));
    assertEquals(Reason.UNKNOWN_VERSION, e.reason());
  }

  @Property
  void unknownTypesAreRejectedByName(@ForAll("validFrames") byte[] valid,
      @ForAll @IntRange(min = 0, max = 255) int type) {
    if (type >= ForwardCodec.FORWARD && type <= ForwardCodec.STREAM) {
      return;
    }
    byte[] m = valid.clone();
    m[0] = (byte) type;
    MalformedMessageException e = assertThrows(MalformedMessageException.class,
        () -> ForwardCodec.decode(m));
    assertEquals(Reason.UNKNOWN_TYPE, e.reason());
  }

  // ---------------------------------------------------------------- lying lengths, size bombs

  @Property
  void lyingTokenCountsAreRejectedBeforeAllocating(
      @ForAll @IntRange(min = 2, max = Integer.MAX_VALUE) int claimed) {
    byte[] bomb = forwardHeader().writeVarInt(claimed).writeVarInt(5).toByteArray();
    MalformedMessageException e = assertThrows(MalformedMessageException.class,
        () -> ForwardCodec.decode(bomb));
    assertTrue(e.reason() == Reason.TOO_LARGE || e.reason() == Reason.TRUNCATED, e::getMessage);
  }

  @Property
  void lyingTextLengthsAreRejected(@ForAll @IntRange(min = 1, max = Integer.MAX_VALUE) int len) {
    ByteWriter w = resultHeader();
    w.writeVarInt(len);
    w.writeByte('x');
    MalformedMessageException e = assertThrows(MalformedMessageException.class,
        () -> ForwardCodec.decode(w.toByteArray()));
    assertTrue(e.reason() == Reason.TOO_LARGE || e.reason() == Reason.TRUNCATED, e::getMessage);
  }

  @Example
  void sizeBombsAllocateAlmostNothing() {
    List<byte[]> bombs = List.of(
        forwardHeader().writeVarInt(InferenceRequest.MAX_PROMPT_TOKENS).toByteArray(),
        resultHeader().writeVarInt(ForwardCodec.MAX_TEXT_BYTES).toByteArray(),
        resultWithOutputCount(ForwardCodec.MAX_OUTPUT_TOKENS),
        new ByteWriter(16, 64).writeByte(ForwardCodec.FAILED).writeByte(1)
            .writeVarLong(Long.MAX_VALUE).toByteArray());
    for (byte[] bomb : bombs) {
      // warm up so class loading is not counted
      assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(bomb));
      long before = Allocations.ofThisThread();
      for (int i = 0; i < 100; i++) {
        try {
          ForwardCodec.decode(bomb);
        } catch (MalformedMessageException expected) {
          // the only outcome allowed
        }
      }
      long perDecode = (Allocations.ofThisThread() - before) / 100;
      assertTrue(perDecode < 16 * 1024, "decoding a " + bomb.length + "-byte bomb allocated "
          + perDecode + " bytes");
    }
  }

  @Example
  void absurdFieldsAreRejected() {
    InferenceRequest r = InferenceRequest.of("q", new int[] {1, 2, 3});
    byte[] ok = ForwardCodec.forward(r, "o", 1);
    // hops far beyond any hop limit
    byte[] hops = ForwardCodec.forward(r, "o", 65);
    assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(hops));
    // token id out of range
    byte[] tok = forwardHeader().writeVarInt(1).writeVarInt(InferenceRequest.MAX_TOKEN_ID)
        .toByteArray();
    assertEquals(Reason.OUT_OF_RANGE,
        assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(tok)).reason());
    // zero tokens
    byte[] none = forwardHeader().writeVarInt(0).toByteArray();
    assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(none));
    // NaN temperature
    ByteWriter w = new ByteWriter(64, 1024).writeByte(ForwardCodec.FORWARD).writeByte(1);
    w.writeBytes("q".getBytes()).writeAscii("o", 64).writeVarInt(1).writeVarInt(1)
        .writeFixedLong(Double.doubleToLongBits(Double.NaN))
        .writeFixedLong(Double.doubleToLongBits(1.0)).writeFixedLong(0).writeVarInt(1)
        .writeVarInt(1);
    assertEquals(Reason.OUT_OF_RANGE, assertThrows(MalformedMessageException.class,
        () -> ForwardCodec.decode(w.toByteArray())).reason());
    // cached tokens above the prompt
    byte[] res = ForwardCodec.result("q", "n", 0, new EngineResult(new int[] {1}, "", 3, 3, 1, 1));
    byte[] lie = res.clone();
    // the last four fields are promptTokens=3, cached=zigzag(3)=6, prefill=2, decode=2
    lie[lie.length - 3] = 8; // cached = 4 > prompt
    assertEquals(Reason.OUT_OF_RANGE,
        assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(lie)).reason());
    assertInstanceOf(ForwardCodec.Forward.class, decodeUnchecked(ok));
  }

  @Example
  void longNonAsciiIdsFitEveryFrame() throws MalformedMessageException {
    String id = "\u20AC".repeat(InferenceRequest.MAX_ID_LENGTH); // 128 chars, 384 UTF-8 bytes
    String id4 = "\uD83D\uDE00".repeat(InferenceRequest.MAX_ID_LENGTH / 2); // 512 UTF-8 bytes
    for (String x : List.of(id, id4)) {
      assertEquals(new ForwardCodec.Busy(x, 3), ForwardCodec.decode(ForwardCodec.busy(x, 3)));
      assertEquals(new ForwardCodec.Cancel(x, "o".repeat(64)),
          ForwardCodec.decode(ForwardCodec.cancel(x, "o".repeat(64))));
      assertInstanceOf(ForwardCodec.Failed.class,
          ForwardCodec.decode(ForwardCodec.failed(x, false, "e".repeat(2000))));
    }
  }

  // ---------------------------------------------------------------- allocation, decoding, frames


  private static Object decodeUnchecked(byte[] b) {
    try {
      return ForwardCodec.decode(b);
    } catch (MalformedMessageException e) {
      throw new AssertionError(e);
    }
  }

  private static ByteWriter forwardHeader() {
    ByteWriter w = new ByteWriter(64, 1 << 16);
    w.writeByte(ForwardCodec.FORWARD).writeByte(ForwardCodec.VERSION);
    w.writeBytes("req".getBytes());
    w.writeAscii("origin", 64);
    w.writeVarInt(1);
    w.writeVarInt(1);
    w.writeFixedLong(Double.doubleToLongBits(0.0));
    w.writeFixedLong(Double.doubleToLongBits(1.0));
    w.writeFixedLong(0);
    return w;
  }

  private static ByteWriter resultHeader() {
    ByteWriter w = new ByteWriter(64, 1 << 16);
    w.writeByte(ForwardCodec.RESULT).writeByte(ForwardCodec.VERSION);
    w.writeBytes("req".getBytes());
    w.writeAscii("n1", 64);
    w.writeVarLong(10);
    w.writeVarInt(0);
    return w;
  }

  private static byte[] resultWithOutputCount(int count) {
    ByteWriter w = new ByteWriter(64, 1 << 16);
    w.writeByte(ForwardCodec.RESULT).writeByte(ForwardCodec.VERSION);
    w.writeBytes("req".getBytes());
    w.writeAscii("n1", 64);
    w.writeVarLong(10);
    w.writeVarInt(count);
    w.writeVarInt(1);
    return w.toByteArray();
  }

  private static void decodeOrTypedError(byte[] bytes) {
    try {
      Object m = ForwardCodec.decode(bytes);
      assertNotNull(m);
    } catch (MalformedMessageException e) {
      assertNotNull(e.reason());
      assertNotNull(e.getMessage());
    }
  }

  static byte[] mutate(byte[] valid, int where, int how, byte b) {
    int i = where % valid.length;
    byte[] m;
    switch (how) {
      case 0 -> { // flip a byte
        m = valid.clone();
        m[i] = b;
      }
      case 1 -> { // insert a byte
        m = new byte[valid.length + 1];
        System.arraycopy(valid, 0, m, 0, i);
        m[i] = b;
        System.arraycopy(valid, i, m, i + 1, valid.length - i);
      }
      case 2 -> { // delete a byte
        m = new byte[valid.length - 1];
        System.arraycopy(valid, 0, m, 0, i);
        System.arraycopy(valid, i + 1, m, i, valid.length - i - 1);
      }
      case 3 -> m = Arrays.copyOf(valid, i); // truncate
      case 4 -> { // a lying varint: set the continuation bits of a run of bytes
        m = valid.clone();
        for (int k = i; k < Math.min(m.length, i + 5); k++) {
          m[k] |= (byte) 0x80;
        }
      }
      case 5 -> { // a huge length or count: 0xFF.. 0x07 (2^31-1) spliced in
        byte[] big = {(byte) 0xFF, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF, 0x07};
        m = new byte[valid.length + big.length];
        System.arraycopy(valid, 0, m, 0, i);
        System.arraycopy(big, 0, m, i, big.length);
        System.arraycopy(valid, i, m, i + big.length, valid.length - i);
      }
      case 6 -> { // overlong varint (11 bytes)
        m = new byte[valid.length + 11];
        System.arraycopy(valid, 0, m, 0, i);
        Arrays.fill(m, i, i + 10, (byte) 0x80);
        m[i + 10] = 1;
        System.arraycopy(valid, i, m, i + 11, valid.length - i);
      }
      case 7 -> { // zero a byte (empty lengths)
        m = valid.clone();
        m[i] = 0;
      }
      default -> { // duplicate the frame (a second message glued on)
        m = new byte[valid.length * 2];
        System.arraycopy(valid, 0, m, 0, valid.length);
        System.arraycopy(valid, 0, m, valid.length, valid.length);
      }
    }
    return m;
  }

  @Provide
  Arbitrary<byte[]> randomFrames() {
    Arbitrary<byte[]> raw = Arbitraries.bytes().array(byte[].class).ofMaxSize(64);
    Arbitrary<byte[]> prefixed = Combinators.combine(
        Arbitraries.integers().between(ForwardCodec.FORWARD, ForwardCodec.CANCEL),
        Arbitraries.bytes().array(byte[].class).ofMaxSize(96)).as((t, rest) -> {
          byte[] m = new byte[rest.length + 2];
          m[0] = (byte) (int) t;
          m[1] = (byte) ForwardCodec.VERSION;
          System.arraycopy(rest, 0, m, 2, rest.length);
          return m;
        });
    return Arbitraries.oneOf(raw, prefixed);
  }

  @Provide
  Arbitrary<byte[]> validFrames() {
    Arbitrary<byte[]> fw = Combinators.combine(requests(),
        Arbitraries.integers().between(0, 8)).as((r, h) -> ForwardCodec.forward(r, "n0", h));
    Arbitrary<byte[]> res = Combinators.combine(ids(), results())
        .as((id, r) -> ForwardCodec.result(id, "n1", 99, r));
    Arbitrary<byte[]> busy = Combinators.combine(ids(), Arbitraries.integers().between(0, 1000))
        .as(ForwardCodec::busy);
    Arbitrary<byte[]> failed = Combinators.combine(ids(), Arbitraries.strings().ofMaxLength(50))
        .as((id, m) -> ForwardCodec.failed(id, true, m));
    Arbitrary<byte[]> cancel = ids().map(id -> ForwardCodec.cancel(id, "n2"));
    Arbitrary<byte[]> streaming = Combinators.combine(requests(), Arbitraries.longs())
        .as((r, tag) -> ForwardCodec.forward(r, "n0", 1, true, tag));
    Arbitrary<byte[]> stream = Combinators.combine(ids(), Arbitraries.longs(),
        Arbitraries.integers().between(0, 1000).array(int[].class).ofMaxSize(40),
        Arbitraries.strings().ofMaxLength(40))
        .as((id, tag, t, text) -> ForwardCodec.stream(id, tag, 3, t, 2,
            new String(text.getBytes(java.nio.charset.StandardCharsets.UTF_8),
                java.nio.charset.StandardCharsets.UTF_8)));
    Arbitrary<byte[]> withModel = Combinators.combine(requests(), Arbitraries.longs(),
        Arbitraries.of("llama-3-8b", "m", "qwen2.5-72b@awq \u00e9\uD83D\uDE00"))
        .as((r, tag, model) -> ForwardCodec.forward(r, "n0", 1, tag % 2 == 0, tag % 2 == 0 ? tag : 0,
            model));
    return Arbitraries.oneOf(fw, res, busy, failed, cancel, streaming, stream, withModel);
  }

  @Provide
  Arbitrary<InferenceRequest> requests() {
    Arbitrary<int[]> tokens = Arbitraries.integers().between(0, InferenceRequest.MAX_TOKEN_ID - 1)
        .array(int[].class).ofMinSize(1).ofMaxSize(200);
    Arbitrary<GenerationParams> params = Combinators.combine(
        Arbitraries.integers().between(1, GenerationParams.MAX_TOKENS_LIMIT),
        Arbitraries.doubles().between(0, 100), Arbitraries.doubles().between(0.01, 1),
        Arbitraries.longs()).as(GenerationParams::new);
    return Combinators.combine(ids(), tokens, params, scopes(), stops())
        .as((id, t, p, scope, stops) -> new InferenceRequest(id, t, stops.apply(p), scope));
  }

  /** No stops half the time (versions 1 to 3), else stop strings and ids (version 4). */
  @Provide
  Arbitrary<java.util.function.UnaryOperator<GenerationParams>> stops() {
    Arbitrary<String> stop = Arbitraries.of("a", "\n", "\u00e9", "\u20ac", "\uD83D\uDE00",
        "Observation:").list().ofMinSize(1).ofMaxSize(5).map(l -> String.join("", l));
    Arbitrary<java.util.List<String>> strings = stop.list().ofMaxSize(4);
    Arbitrary<java.util.List<Integer>> ids = Arbitraries.integers()
        .between(0, InferenceRequest.MAX_TOKEN_ID - 1).list().ofMaxSize(5);
    return Arbitraries.oneOf(
        Arbitraries.just(java.util.function.UnaryOperator.identity()),
        Combinators.combine(strings, ids).as((st, id) -> p -> p.withStops(st, id)));
  }

  /** The default scope half the time, else adapters and salts of ASCII and other characters. */
  @Provide
  Arbitrary<io.github.prefixrouter.CacheScope> scopes() {
    Arbitrary<String> name = Arbitraries.of("a", "lora-", "7", "\u00e9", "\u20ac", "\uD83D\uDE00", " ")
        .list().ofMaxSize(12).map(l -> String.join("", l));
    return Arbitraries.oneOf(Arbitraries.just(io.github.prefixrouter.CacheScope.DEFAULT),
        Combinators.combine(name, name).as(io.github.prefixrouter.CacheScope::of));
  }

  @Provide
  Arbitrary<EngineResult> results() {
    return Combinators.combine(
        Arbitraries.integers().between(0, Integer.MAX_VALUE).array(int[].class).ofMaxSize(50),
        Arbitraries.strings().ofMaxLength(40), Arbitraries.integers().between(0, 5000),
        Arbitraries.longs().between(-1, Long.MAX_VALUE / 2),
        Arbitraries.longs().between(-1, Long.MAX_VALUE / 2)).as((out, text, prompt, pre, dec) ->
            new EngineResult(out, text, prompt, prompt / 2, pre, dec));
  }

  /**
   * Request ids of up to 128 characters whose UTF-8 form fits every frame (see
   * {@link #longNonAsciiIdsFitEveryFrame} for the ids that do not).
   */
  Arbitrary<String> ids() {
    return Arbitraries.oneOf(
        Arbitraries.strings().ascii().ofMinLength(1).ofMaxLength(64),
        Arbitraries.strings().ofMinLength(1).ofMaxLength(20));
  }
}
