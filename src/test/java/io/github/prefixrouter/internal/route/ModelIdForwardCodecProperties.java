package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.internal.ModelIds;
import io.github.prefixrouter.internal.wire.ByteWriter;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.internal.wire.MalformedMessageException.Reason;
import java.nio.charset.StandardCharsets;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * FORWARD of a node with a model id: version 5, every field of version 4 (the stops may be
 * none) and the model id last, whatever the request; a node without one sends what it sent
 * before, byte for byte. Decoding is strict on the model id.
 */
class ModelIdForwardCodecProperties {

  private final ForwardCodecFuzzTest requests = new ForwardCodecFuzzTest();

  @Provide
  Arbitrary<InferenceRequest> requests() {
    return requests.requests();
  }

  @Provide
  Arbitrary<String> modelIds() {
    return Arbitraries.of("llama", "-", "@", "3", "\u00e9", "\u20ac", "\uD83D\uDE00", " ", "/")
        .list().ofMinSize(1).ofMaxSize(40).map(l -> String.join("", l))
        .filter(s -> ModelIds.problem(s) == null);
  }

  @Property
  void everyRequestOfANodeWithAModelIdIsVersionFiveAndRoundTrips(
      @ForAll("requests") InferenceRequest r, @ForAll("modelIds") String model,
      @ForAll boolean stream, @ForAll long tag) throws MalformedMessageException {
    byte[] frame = ForwardCodec.forward(r, "n0", 1, stream, stream ? tag : 0L, model);
    assertEquals(ForwardCodec.MODEL_FORWARD_VERSION, frame[1]);
    ForwardCodec.Forward fw = (ForwardCodec.Forward) ForwardCodec.decode(frame);
    assertEquals(r, fw.request());
    assertEquals(model, fw.modelId());
    assertEquals(stream, fw.stream());
    assertEquals(stream ? tag : 0L, fw.streamTag());
  }

  @Property
  void withoutAModelIdTheFrameIsTheOneSentBefore(@ForAll("requests") InferenceRequest r,
      @ForAll boolean stream, @ForAll long tag) throws MalformedMessageException {
    byte[] before = ForwardCodec.forward(r, "n0", 1, stream, stream ? tag : 0L);
    assertArrayEquals(before, ForwardCodec.forward(r, "n0", 1, stream, stream ? tag : 0L, ""));
    assertEquals(ForwardCodec.forwardVersion(r, stream, ""), before[1]);
    assertEquals("", ((ForwardCodec.Forward) ForwardCodec.decode(before)).modelId());
  }

  /** A version-5 frame of ScopedForwardCodecTest's request, default scope, no stream or stops. */
  private static byte[] v5(byte[] modelId) {
    ByteWriter w = ScopedForwardCodecTest.v1(5);
    w.writeBytes(new byte[0]).writeBytes(new byte[0]);
    w.writeBoolean(false).writeFixedLong(0);
    w.writeVarInt(0).writeVarInt(0); // no stops
    w.writeBytes(modelId);
    return w.toByteArray();
  }

  private static Reason reasonOf(byte[] frame) {
    return assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(frame))
        .reason();
  }

  @Example
  void theExampleOfTheWireFormatDocument() {
    // docs/wire-format.md, "FORWARD, version 5", byte for byte
    InferenceRequest r = new InferenceRequest("q-1", new int[] {1, 300, 70000},
        new io.github.prefixrouter.GenerationParams(16, 0.5, 0.9, 42));
    String want = "21 05 03 71 2d 31 06 6f 72 69 67 69 6e 02 10 3f e0 00 00 00 00 00 00"
        + " 3f ec cc cc cc cc cc cd 00 00 00 00 00 00 00 2a 03 01 ac 02 f0 a2 04 00 00"
        + " 00 00 00 00 00 00 00 00 00 00 00 03 6d 2d 31";
    StringBuilder got = new StringBuilder();
    for (byte b : ForwardCodec.forward(r, "origin", 2, false, 0L, "m-1")) {
      got.append(got.length() == 0 ? "" : " ").append(String.format("%02x", b & 0xFF));
    }
    assertEquals(want, got.toString());
    assertEquals(want, io.github.prefixrouter.internal.wire.WireFormatPage.example("21 05"));
  }

  @Example
  void theModelIdIsCheckedLikeEveryOtherField() throws MalformedMessageException {
    byte[] ok = v5("llama-3".getBytes(StandardCharsets.UTF_8));
    ForwardCodec.Forward fw = (ForwardCodec.Forward) ForwardCodec.decode(ok);
    assertEquals("llama-3", fw.modelId());
    assertEquals(false, fw.request().params().hasStops());
    // the encoder writes exactly this frame
    assertArrayEquals(ok, ForwardCodec.forward(fw.request(), "origin", 2, false, 0L, "llama-3"));
    assertEquals(Reason.OUT_OF_RANGE, reasonOf(v5(new byte[0])), "one encoding: empty is 1 to 4");
    assertEquals(Reason.BAD_CHARACTER, reasonOf(v5("a\nb".getBytes(StandardCharsets.UTF_8))));
    assertEquals(Reason.BAD_CHARACTER, reasonOf(v5(new byte[] {(byte) 0xC3})), "not UTF-8");
    assertEquals(Reason.TOO_LARGE, reasonOf(v5("m".repeat(257).getBytes(StandardCharsets.UTF_8))));
    byte[] cut = v5("llama".getBytes(StandardCharsets.UTF_8));
    assertEquals(Reason.TRUNCATED, reasonOf(java.util.Arrays.copyOf(cut, cut.length - 1)));
  }
}
