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
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * FORWARD of requests with stops: version 4, the scope, the stream request and the stops
 * appended to the version-1 body, decoded strictly with a typed error for every malformed,
 * oversized or truncated stop field; requests without stops keep their versions 1 to 3.
 */
class StopsForwardCodecTest {

  private static final GenerationParams PARAMS = new GenerationParams(16, 0.5, 0.9, 42);
  private static final InferenceRequest PLAIN =
      new InferenceRequest("q-1", new int[] {1, 300, 70000}, PARAMS);
  private static final List<String> STOPS = List.of("\n", "Observation:", "\u00e9\uD83D\uDE00");
  private static final List<Integer> IDS = List.of(2, 128_001, InferenceRequest.MAX_TOKEN_ID - 1);

  /**
   * A version-4 frame of {@link #PLAIN}, written field by field: the default scope, no stream,
   * then what {@code stops} writes.
   */
  private static byte[] v4(Consumer<ByteWriter> stops) {
    ByteWriter w = ScopedForwardCodecTest.v1(4);
    w.writeBytes(new byte[0]).writeBytes(new byte[0]);
    w.writeBoolean(false).writeFixedLong(0);
    stops.accept(w);
    return w.toByteArray();
  }

  private static InferenceRequest plain(GenerationParams p) {
    return new InferenceRequest(PLAIN.id(), PLAIN.tokens(), p);
  }

  private static Reason reasonOf(byte[] frame) {
    return assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(frame))
        .reason();
  }

  private static ForwardCodec.Forward decode(byte[] frame) throws MalformedMessageException {
    return (ForwardCodec.Forward) ForwardCodec.decode(frame);
  }

  @Test
  void aRequestWithStopsIsVersionFourWithTheStopsAppended() throws Exception {
    InferenceRequest r = new InferenceRequest("q-1", new int[] {1, 300, 70000},
        PARAMS.withStops(STOPS, IDS));
    byte[] frame = ForwardCodec.forward(r, "origin", 2);
    byte[] want = v4(w -> {
      w.writeVarInt(3);
      for (String s : STOPS) {
        w.writeBytes(s.getBytes(StandardCharsets.UTF_8));
      }
      w.writeVarInt(3);
      for (int id : IDS) {
        w.writeVarInt(id);
      }
    });
    assertArrayEquals(want, frame);
    ForwardCodec.Forward f = decode(frame);
    assertEquals(r, f.request());
    assertEquals(STOPS, f.request().params().stop());
    assertEquals(IDS, f.request().params().stopTokenIds());
    assertFalse(f.stream());
  }

  @Test
  void theVersionCarriesScopeAndStreamingAlike() throws Exception {
    CacheScope scope = CacheScope.of("sql-lora", "tenant");
    for (GenerationParams p : List.of(PARAMS.withStops(STOPS, List.of()),
        PARAMS.withStops(List.of(), IDS))) {
      InferenceRequest r = new InferenceRequest("q-9", new int[] {5, 6}, p, scope);
      for (boolean stream : new boolean[] {false, true}) {
        byte[] frame = ForwardCodec.forward(r, "o", 1, stream, stream ? -77L : 0L);
        assertEquals(ForwardCodec.STOPS_FORWARD_VERSION, frame[1]);
        ForwardCodec.Forward f = decode(frame);
        assertEquals(r, f.request());
        assertEquals(scope, f.request().scope());
        assertEquals(p, f.request().params());
        assertEquals(stream, f.stream());
        assertEquals(stream ? -77L : 0L, f.streamTag());
      }
    }
    // a stream tag is not written when no stream is asked for
    InferenceRequest r = plain(PARAMS.withStops(STOPS, IDS));
    assertArrayEquals(ForwardCodec.forward(r, "o", 1, false, 0L),
        ForwardCodec.forward(r, "o", 1, false, 123L));
  }

  @Test
  void requestsWithoutStopsKeepTheirVersions() {
    assertEquals(1, ForwardCodec.forward(PLAIN, "o", 1)[1]);
    assertEquals(2, ForwardCodec.forward(PLAIN.withScope(CacheScope.salt("s")), "o", 1)[1]);
    assertEquals(3, ForwardCodec.forward(PLAIN, "o", 1, true, 5L)[1]);
    // empty stops are none: the same bytes as without
    InferenceRequest empty = plain(PARAMS.withStops(List.of(), List.of()));
    assertArrayEquals(ForwardCodec.forward(PLAIN, "o", 1), ForwardCodec.forward(empty, "o", 1));
    assertArrayEquals(ScopedForwardCodecTest.v1(1).toByteArray(),
        ForwardCodec.forward(empty, "origin", 2));
  }

  @Test
  void theLimitsAreTheParametersOwn() throws Exception {
    List<String> most = new java.util.ArrayList<>();
    for (int i = 0; i < GenerationParams.MAX_STOP_STRINGS; i++) {
      // 128 pairs of 4 UTF-8 bytes each: the most bytes a stop string has
      most.add(("\uD83D\uDE00").repeat(GenerationParams.MAX_STOP_LENGTH / 2 - 1) + i % 10 + "x");
    }
    List<Integer> ids = new java.util.ArrayList<>();
    for (int i = 0; i < GenerationParams.MAX_STOP_TOKEN_IDS; i++) {
      ids.add(InferenceRequest.MAX_TOKEN_ID - 1 - i);
    }
    InferenceRequest r = plain(PARAMS.withStops(most, ids));
    assertEquals(r.params(), decode(ForwardCodec.forward(r, "o", 1)).request().params());
  }

  @Test
  void everyMalformedStopFieldIsATypedError() {
    byte[] ok = "x".getBytes(StandardCharsets.UTF_8);
    // no stop at all: version 4 is for requests with stops (one encoding per request)
    assertEquals(Reason.OUT_OF_RANGE, reasonOf(v4(w -> w.writeVarInt(0).writeVarInt(0))));
    // more stop strings than the limit
    assertEquals(Reason.TOO_LARGE, reasonOf(v4(w -> {
      w.writeVarInt(GenerationParams.MAX_STOP_STRINGS + 1);
      for (int i = 0; i <= GenerationParams.MAX_STOP_STRINGS; i++) {
        w.writeBytes(ok);
      }
      w.writeVarInt(0);
    })));
    // an empty stop string, one of more chars than the limit, one of more bytes than the limit
    assertEquals(Reason.OUT_OF_RANGE,
        reasonOf(v4(w -> w.writeVarInt(1).writeBytes(new byte[0]).writeVarInt(0))));
    assertEquals(Reason.OUT_OF_RANGE, reasonOf(v4(w -> w.writeVarInt(1)
        .writeBytes("y".repeat(GenerationParams.MAX_STOP_LENGTH + 1)
            .getBytes(StandardCharsets.UTF_8)).writeVarInt(0))));
    assertEquals(Reason.TOO_LARGE, reasonOf(v4(w -> w.writeVarInt(1)
        .writeBytes(new byte[ForwardCodec.MAX_STOP_BYTES + 1]).writeVarInt(0))));
    // not UTF-8: a lone continuation byte, and an encoded surrogate
    assertEquals(Reason.BAD_CHARACTER, reasonOf(v4(w -> w.writeVarInt(1)
        .writeBytes(new byte[] {'a', (byte) 0x80}).writeVarInt(0))));
    assertEquals(Reason.BAD_CHARACTER, reasonOf(v4(w -> w.writeVarInt(1)
        .writeBytes(new byte[] {(byte) 0xED, (byte) 0xA0, (byte) 0x80}).writeVarInt(0))));
    // more stop token ids than the limit, and one out of the token range
    assertEquals(Reason.TOO_LARGE, reasonOf(v4(w -> {
      w.writeVarInt(0).writeVarInt(GenerationParams.MAX_STOP_TOKEN_IDS + 1);
      for (int i = 0; i <= GenerationParams.MAX_STOP_TOKEN_IDS; i++) {
        w.writeVarInt(i);
      }
    })));
    assertEquals(Reason.OUT_OF_RANGE, reasonOf(v4(w -> w.writeVarInt(0).writeVarInt(1)
        .writeVarInt(InferenceRequest.MAX_TOKEN_ID))));
    // a stream tag without a stream (two encodings of one request), and a bad boolean
    ByteWriter tagged = ScopedForwardCodecTest.v1(4);
    tagged.writeBytes(new byte[0]).writeBytes(new byte[0]).writeBoolean(false).writeFixedLong(9);
    tagged.writeVarInt(1).writeBytes(ok).writeVarInt(0);
    assertEquals(Reason.OUT_OF_RANGE, reasonOf(tagged.toByteArray()));
    ByteWriter bool = ScopedForwardCodecTest.v1(4);
    bool.writeBytes(new byte[0]).writeBytes(new byte[0]).writeByte(2).writeFixedLong(0);
    bool.writeVarInt(1).writeBytes(ok).writeVarInt(0);
    assertTrue(Arrays.asList(Reason.OUT_OF_RANGE, Reason.BAD_CHARACTER)
        .contains(reasonOf(bool.toByteArray())));
  }

  @Test
  void everyTruncationAndTrailingByteIsATypedError() throws Exception {
    byte[] frame = ForwardCodec.forward(plain(PARAMS.withStops(STOPS, IDS)), "o", 1,
        true, 11L);
    decode(frame);
    for (int cut = 0; cut < frame.length; cut++) {
      byte[] part = Arrays.copyOf(frame, cut);
      assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(part),
          "cut at " + cut);
    }
    byte[] longer = Arrays.copyOf(frame, frame.length + 1);
    assertEquals(Reason.TRAILING_BYTES, reasonOf(longer));
  }

  @Test
  void theExampleOfTheWireFormatDocument() {
    // docs/wire-format.md, "FORWARD, version 4", byte for byte
    InferenceRequest r = plain(PARAMS.withStops(List.of("\n"), List.of(2)));
    String want = "21 04 03 71 2d 31 06 6f 72 69 67 69 6e 02 10 3f e0 00 00 00 00 00 00"
        + " 3f ec cc cc cc cc cc cd 00 00 00 00 00 00 00 2a 03 01 ac 02 f0 a2 04 00 00"
        + " 00 00 00 00 00 00 00 00 00 01 01 0a 01 02";
    StringBuilder got = new StringBuilder();
    for (byte b : ForwardCodec.forward(r, "origin", 2)) {
      got.append(got.length() == 0 ? "" : " ").append(String.format("%02x", b & 0xFF));
    }
    assertEquals(want, got.toString());
    assertEquals(want, io.github.prefixrouter.internal.wire.WireFormatPage.example("21 04"));
  }
}
