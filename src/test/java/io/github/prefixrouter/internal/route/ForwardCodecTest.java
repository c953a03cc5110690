package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.EngineResult;
import java.util.Arrays;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

class ForwardCodecTest {

  @Provide
  Arbitrary<InferenceRequest> requests() {
    Arbitrary<String> ids = Arbitraries.strings().ofMinLength(1).ofMaxLength(128);
    Arbitrary<int[]> tokens = Arbitraries.integers().between(0, InferenceRequest.MAX_TOKEN_ID - 1)
        .array(int[].class).ofMinSize(1).ofMaxSize(600);
    Arbitrary<GenerationParams> params = Combinators.combine(
        Arbitraries.integers().between(1, GenerationParams.MAX_TOKENS_LIMIT),
        Arbitraries.doubles().between(0, 100),
        Arbitraries.doubles().between(0.01, 1.0).ofScale(3),
        Arbitraries.longs()).as(GenerationParams::new);
    return Combinators.combine(ids, tokens, params).as(InferenceRequest::new);
  }

  @Property
  void forwardRoundTrips(@ForAll("requests") InferenceRequest r,
      @ForAll @IntRange(min = 0, max = 8) int hops) throws Exception {
    ForwardCodec.Forward f = (ForwardCodec.Forward) ForwardCodec.decode(
        ForwardCodec.forward(r, "origin-1", hops));
    assertEquals(r, f.request());
    assertEquals(r.id(), f.requestId());
    assertEquals("origin-1", f.origin());
    assertEquals(hops, f.hops());
  }

  @Property
  void resultRoundTrips(@ForAll @Size(max = 50) int[] out, @ForAll String text,
      @ForAll @IntRange(min = 0, max = 5000) int prompt,
      @ForAll @IntRange(min = -1, max = 5000) int cached) throws Exception {
    EngineResult er = new EngineResult(out, text, prompt, Math.min(cached, prompt), 123, -1);
    ForwardCodec.Result r = (ForwardCodec.Result) ForwardCodec.decode(
        ForwardCodec.result("id", "srv", 77, er));
    assertEquals(er, r.result());
    assertEquals("srv", r.servedBy());
    assertEquals(77, r.serverNanos());
  }

  @Test
  void smallMessagesRoundTrip() throws Exception {
    assertEquals(new ForwardCodec.Busy("x", 5), ForwardCodec.decode(ForwardCodec.busy("x", 5)));
    assertEquals(new ForwardCodec.Cancel("x", "o"),
        ForwardCodec.decode(ForwardCodec.cancel("x", "o")));
    assertEquals(new ForwardCodec.Failed("x", true, "boom"),
        ForwardCodec.decode(ForwardCodec.failed("x", true, "boom")));
    ForwardCodec.Failed longMsg = (ForwardCodec.Failed) ForwardCodec.decode(
        ForwardCodec.failed("x", false, "é".repeat(2000)));
    assertTrue(longMsg.message().length() <= ForwardCodec.MAX_ERROR_BYTES);
    assertTrue(longMsg.message().chars().allMatch(ch -> ch == 'é'), "cut mid-character");
    // 1,024 bytes of two-byte characters end on a character boundary: all 512 are kept
    assertEquals(ForwardCodec.MAX_ERROR_BYTES / 2, longMsg.message().length());
    // a three-byte character (€) that the limit cuts is left out whole: 341 fit in 1,023 bytes
    ForwardCodec.Failed euros = (ForwardCodec.Failed) ForwardCodec.decode(
        ForwardCodec.failed("x", false, "€".repeat(400)));
    assertEquals("€".repeat(341), euros.message());
    // one ASCII byte then euros: 1 + 3 * 341 = 1,024 bytes fit exactly
    ForwardCodec.Failed exact = (ForwardCodec.Failed) ForwardCodec.decode(
        ForwardCodec.failed("x", false, "a" + "€".repeat(400)));
    assertEquals("a" + "€".repeat(341), exact.message());
  }

  @Property
  void randomBytesOnlyRaiseTheTypedException(@ForAll @Size(max = 200) byte[] bytes) {
    try {
      ForwardCodec.decode(bytes);
    } catch (MalformedMessageException e) {
      // expected for nearly everything
    }
  }

  @Property
  void mutatedMessagesOnlyRaiseTheTypedException(@ForAll("requests") InferenceRequest r,
      @ForAll @IntRange(min = 0, max = 10_000) int position, @ForAll byte value,
      @ForAll @IntRange(min = 0, max = 3) int mode) {
    byte[] m = ForwardCodec.forward(r, "o", 1);
    int at = position % m.length;
    byte[] bad = switch (mode) {
      case 0 -> {
        byte[] c = m.clone();
        c[at] = value;
        yield c;
      }
      case 1 -> Arrays.copyOf(m, at);
      case 2 -> Arrays.copyOf(m, m.length + 1 + at % 7);
      default -> {
        byte[] c = m.clone();
        c[Math.min(c.length - 1, 2 + at % 4)] = (byte) 0xFF;
        yield c;
      }
    };
    try {
      ForwardCodec.decode(bad);
    } catch (MalformedMessageException e) {
      // expected
    }
  }

  @Test
  void lyingTokenCountIsRejectedBeforeAllocating() {
    byte[] m = ForwardCodec.forward(InferenceRequest.of("a", new int[] {1, 2, 3}), "o", 1);
    // the token count is the varint right before the 3 one-byte tokens
    byte[] lie = Arrays.copyOf(m, m.length);
    lie[m.length - 4] = 0x7F; // 127 tokens claimed, 3 bytes left
    MalformedMessageException e = assertThrows(MalformedMessageException.class,
        () -> ForwardCodec.decode(lie));
    assertEquals(MalformedMessageException.Reason.TRUNCATED, e.reason());
  }

  @Test
  void unknownVersionAndTypeAreRejected() {
    byte[] m = ForwardCodec.busy("x", 1);
    m[1] = 9;
    assertEquals(MalformedMessageException.Reason.UNKNOWN_VERSION,
        assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(m)).reason());
    byte[] t = ForwardCodec.busy("x", 1);
    t[0] = 0x12;
    assertEquals(MalformedMessageException.Reason.UNKNOWN_TYPE,
        assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(t)).reason());
  }

  @Test
  void outOfRangeParamsAreRejected() {
    byte[] m = ForwardCodec.forward(InferenceRequest.of("a", new int[] {1}), "o", 1);
    // temperature is the fixed64 after id(2), origin(2), hops(1), maxTokens(1) + type/version(2)
    byte[] bad = m.clone();
    long nan = Double.doubleToLongBits(Double.NaN);
    for (int i = 0; i < 8; i++) {
      bad[8 + i] = (byte) (nan >>> (56 - 8 * i));
    }
    assertEquals(MalformedMessageException.Reason.OUT_OF_RANGE,
        assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(bad)).reason());
  }

  @Test
  void requestIdsThatAreNotUtf8AreRejected() {
    // a lone continuation byte, a truncated two-byte sequence, an overlong '/' and a surrogate
    byte[][] ids = {{(byte) 0x80}, {'a', (byte) 0xC3}, {(byte) 0xC0, (byte) 0xAF},
        {(byte) 0xED, (byte) 0xA0, (byte) 0x80}};
    for (byte[] id : ids) {
      io.github.prefixrouter.internal.wire.ByteWriter w =
          new io.github.prefixrouter.internal.wire.ByteWriter(16, 64);
      w.writeByte(ForwardCodec.BUSY).writeByte(ForwardCodec.VERSION).writeBytes(id).writeVarInt(1);
      MalformedMessageException e =
          assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(w.toByteArray()));
      assertEquals(MalformedMessageException.Reason.BAD_CHARACTER, e.reason());
      assertEquals("requestId", e.field());
    }
  }

  /** Where {@code needle} starts in {@code hay}: the test patches a field's bytes there. */
  private static int indexOf(byte[] hay, byte[] needle) {
    outer:
    for (int i = 0; i + needle.length <= hay.length; i++) {
      for (int j = 0; j < needle.length; j++) {
        if (hay[i + j] != needle[j]) {
          continue outer;
        }
      }
      return i;
    }
    throw new AssertionError("not found");
  }

  @Test
  void anAnswerToTheLongestPromptWithAddedSpecialTokensRoundTrips() throws Exception {
    // an engine may count a BOS or another special token it adds to a prompt of token ids: the
    // node takes such an answer (couldAnswer), so a RESULT must carry it for the longest prompt
    int[] prompt = new int[InferenceRequest.MAX_PROMPT_TOKENS];
    InferenceRequest r = InferenceRequest.of("long", prompt);
    EngineResult res = new EngineResult(new int[] {7}, "", r.length()
        + RouterNode.PROMPT_TOKENS_SLACK, r.length(), 1_000, 1_000);
    assertTrue(RouterNode.couldAnswer(res, r));
    ForwardCodec.Message m = ForwardCodec.decode(ForwardCodec.result("long", "n1", 5, res));
    assertEquals(new ForwardCodec.Result("long", "n1", 5, res), m);
  }

  @Test
  void aResultPastTheMessageCapIsRefusedAsAnIllegalArgumentLikeALongText() {
    // every field within its own limit: the most output tokens, each of 4 varint bytes, and the
    // longest text; together past the message's cap. The node answers such a result FAILED
    // (ANSWER_TOO_LARGE) on an IllegalArgumentException, as for a text past its limit.
    int[] out = new int[GenerationParams.MAX_TOKENS_LIMIT];
    Arrays.fill(out, 1 << 22);
    EngineResult res = new EngineResult(out, "x".repeat(ForwardCodec.MAX_TEXT_BYTES), 3, 0,
        -1, -1);
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> ForwardCodec.result("id", "srv", 77, res));
    assertTrue(e.getMessage().contains(ForwardCodec.MAX_MESSAGE_BYTES + "-byte"), e.getMessage());
    // without the text it fits
    EngineResult tokensOnly = new EngineResult(out, "", 3, 0, -1, -1);
    assertEquals(GenerationParams.MAX_TOKENS_LIMIT, decodedResult(
        ForwardCodec.result("id", "srv", 77, tokensOnly)).result().outputTokens().length);
  }

  private static ForwardCodec.Result decodedResult(byte[] msg) {
    try {
      return (ForwardCodec.Result) ForwardCodec.decode(msg);
    } catch (MalformedMessageException e) {
      throw new AssertionError(e);
    }
  }

  @Test
  void aResultWhoseTextIsNotUtf8IsRejectedAsAStreamedTextIs() {
    byte[] msg = ForwardCodec.result("id", "srv", 77,
        new EngineResult(new int[] {5, 6}, "QZ", 3, 0, -1, -1));
    int at = indexOf(msg, new byte[] {'Q', 'Z'});
    msg[at] = (byte) 0xC3; // a two-byte sequence cut short by the 'Z'
    MalformedMessageException e =
        assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(msg));
    assertEquals(MalformedMessageException.Reason.BAD_CHARACTER, e.reason());
    assertEquals("text", e.field());
  }

  @Test
  void aFailureMessageThatIsNotUtf8IsRejected() {
    byte[] msg = ForwardCodec.failed("x", true, "boom");
    msg[indexOf(msg, "boom".getBytes(java.nio.charset.StandardCharsets.UTF_8))] = (byte) 0xFF;
    MalformedMessageException e =
        assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(msg));
    assertEquals(MalformedMessageException.Reason.BAD_CHARACTER, e.reason());
    assertEquals("message", e.field());
  }

  @Test
  void aFailureMessageArrivesAsOneLineWithoutControlCharacters() throws Exception {
    ForwardCodec.Failed f = (ForwardCodec.Failed) ForwardCodec.decode(
        ForwardCodec.failed("x", false, "line one\nline two\r\n\u001b[31mred\u0000é"));
    assertEquals("line one line two   [31mred é", f.message());
    assertEquals("plain message", ((ForwardCodec.Failed) ForwardCodec.decode(
        ForwardCodec.failed("x", false, "plain message"))).message());
    // DEL and the C1 controls too (U+009B is a terminal's one-byte escape)
    assertEquals("a b c d", ((ForwardCodec.Failed) ForwardCodec.decode(
        ForwardCodec.failed("x", false, "a\u007fb\u009bc\u0085d"))).message());
  }

  @Test
  void requestIdsLongerThanTheirLimitInCharactersAreRejected() throws Exception {
    // 129 characters in fewer bytes than the id's byte limit: the character count decides
    String longest = "\u00e9".repeat(InferenceRequest.MAX_ID_LENGTH);
    assertEquals(longest, ((ForwardCodec.Busy) ForwardCodec.decode(
        ForwardCodec.busy(longest, 1))).requestId());
    io.github.prefixrouter.internal.wire.ByteWriter w =
        new io.github.prefixrouter.internal.wire.ByteWriter(16, 1024);
    w.writeByte(ForwardCodec.BUSY).writeByte(ForwardCodec.VERSION)
        .writeBytes((longest + "x").getBytes(java.nio.charset.StandardCharsets.UTF_8))
        .writeVarInt(1);
    MalformedMessageException e =
        assertThrows(MalformedMessageException.class, () -> ForwardCodec.decode(w.toByteArray()));
    assertEquals(MalformedMessageException.Reason.OUT_OF_RANGE, e.reason());
    assertEquals("requestId", e.field());
  }
}
