package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.internal.ModelIds;
import io.github.prefixrouter.internal.PromptArrays;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.internal.wire.ByteReader;
import io.github.prefixrouter.internal.wire.ByteWriter;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.internal.wire.MalformedMessageException.Reason;
import io.github.prefixrouter.internal.wire.MessageTooLargeException;
import io.github.prefixrouter.internal.wire.WireTypes;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * Binary codec of the forwarding protocol (type codes {@code 0x21..0x26} of the forwarding
 * range; layout in {@code docs/routing.md} and {@code docs/wire-format.md}). Every message is {@code type, version, body}.
 * Request ids must be well-formed UTF-8 (BAD_CHARACTER otherwise).
 *
 * <pre>
 * FORWARD (request)  id bytes(512, UTF-8, 1..128 chars), origin ascii(64), hops varint(0..64),
 *                    maxTokens varint, temperature fixed64, topP fixed64, seed fixed64,
 *                    tokens count(2^20, 1) × varint(0..2^24-1)
 *                    version 2 only (a request of a cache scope other than the default):
 *                    adapter bytes(256, UTF-8), salt bytes(256, UTF-8), not both empty
 *                    version 3 only (streaming asked for): adapter bytes(256, UTF-8),
 *                    salt bytes(256, UTF-8) (both may be empty), streamTag fixed64
 *                    version 4 only (the request has stops): adapter bytes(256, UTF-8),
 *                    salt bytes(256, UTF-8) (both may be empty), stream bool,
 *                    streamTag fixed64 (0 without stream), stop count(16) × bytes(1024,
 *                    UTF-8, 1..256 chars), stopTokenIds count(256) × varint(0..2^24-1),
 *                    at least one stop string or stop token id
 *                    version 5 only (the sender has a model id): the fields of version 4,
 *                    where the stops may be none, then modelId bytes(256, UTF-8, 1..256
 *                    bytes, no control characters)
 * RESULT  (answer)   id, servedBy ascii(64), serverNanos varint, output count × varint,
 *                    text bytes(1 MiB, UTF-8), promptTokens varint(0..2^20+4),
 *                    cached zigzag, prefillNanos zigzag, decodeNanos zigzag; at most
 *                    MAX_MESSAGE_BYTES (5 MiB) in all
 * BUSY    (answer)   id, queueDepth varint
 * FAILED  (answer)   id, retryable bool, message bytes(1 KiB, UTF-8)
 * CANCEL  (one-way)  id, origin ascii(64) (the request's origin, as its FORWARD names it)
 * STREAM  (one-way)  id, streamTag fixed64, tokenOffset varint(0..2^20),
 *                    tokens count(2^16, 1) × varint(0..2^32-1), charOffset varint(0..2^20),
 *                    text bytes(256 KiB, UTF-8); tokenOffset + tokens and charOffset + chars
 *                    at most 2^20
 * </pre>
 *
 * Decoding is strict: every length and range is checked before allocating, trailing bytes are
 * rejected, and any problem is a {@link MalformedMessageException}.
 *
 * <p>A request of the default cache scope is encoded as version 1, byte for byte as before
 * scopes existed, so nodes that predate them decode it. A scoped request is version 2 (the same
 * body plus the scope): such nodes reject it as {@code UNKNOWN_VERSION}, a protocol failure
 * to the sender, which then falls back as for any failed forward (next candidate or local).
 * A FORWARD whose sender asks for the output to be streamed back (STREAM messages tagged with
 * the attempt's {@code streamTag}) is version 3, whatever its scope: a node that predates
 * streaming rejects it as {@code UNKNOWN_VERSION}, and the sender sends it again as version 1
 * or 2, without streaming. A request with stop strings or stop token ids is version 4, whatever
 * its scope and whether it is streamed (the version carries both): a node that predates stops
 * rejects it as {@code UNKNOWN_VERSION}, and the sender never sends it again in an older
 * version (that node would run it without its stops and answer text beyond them): the request
 * goes to another candidate or runs locally, and requests with stops skip that node until it
 * restarts. A node with a model id ({@code RouterConfig.modelId()}) sends every FORWARD as
 * version 5, which carries all the above and the model id, and never in an older version (a node
 * that cannot read the model id might serve another model): a node that predates model ids
 * rejects it as {@code UNKNOWN_VERSION}, and the sender skips it until it restarts, as it skips a
 * node whose model id differs. Every other message type stays at version 1.
 */
final class ForwardCodec {

  static final int FORWARD = 0x21;
  static final int RESULT = 0x22;
  static final int BUSY = 0x23;
  static final int FAILED = 0x24;
  static final int CANCEL = 0x25;
  static final int STREAM = 0x26;

  static final int VERSION = 1;
  /** FORWARD of a request with a cache scope other than the default. */
  static final int SCOPED_FORWARD_VERSION = 2;
  /** FORWARD of a request whose output the sender asks to be streamed back. */
  static final int STREAMING_FORWARD_VERSION = 3;
  /** FORWARD of a request with stop strings or stop token ids, streamed or not. */
  static final int STOPS_FORWARD_VERSION = 4;
  /** FORWARD of a sender with a model id, whatever the request. */
  static final int MODEL_FORWARD_VERSION = 5;
  /** Most UTF-8 bytes of one stop string (256 chars of at most 3 bytes, or pairs of 4). */
  static final int MAX_STOP_BYTES = GenerationParams.MAX_STOP_LENGTH * 4;
  /** Most tokens one STREAM message carries. */
  static final int MAX_STREAM_TOKENS = 1 << 16;
  /** Most UTF-8 bytes of text one STREAM message carries. */
  static final int MAX_STREAM_TEXT_BYTES = 1 << 18;
  /** Largest offset (in tokens or in UTF-16 chars) a piece may end at. */
  static final int MAX_STREAM_OFFSET = 1 << 20;
  static final int MAX_TEXT_BYTES = 1 << 20;
  static final int MAX_ERROR_BYTES = 1024;
  static final int MAX_OUTPUT_TOKENS = GenerationParams.MAX_TOKENS_LIMIT;
  /** Cap of one encoded message: a maximal prompt of 4-byte varints plus headers. */
  static final int MAX_MESSAGE_BYTES = InferenceRequest.MAX_PROMPT_TOKENS * 4 + MAX_TEXT_BYTES;

  private ForwardCodec() {}

  /** A decoded forwarding message. */
  sealed interface Message permits Forward, Result, Busy, Failed, Cancel, Stream {
    String requestId();
  }

  /**
   * A FORWARD; {@code stream} says whether the sender asks for STREAM messages tagged with
   * {@code streamTag} (0 when not).
   */
  record Forward(String requestId, String origin, int hops, InferenceRequest request,
      boolean stream, long streamTag, String modelId) implements Message {
    Forward(String requestId, String origin, int hops, InferenceRequest request) {
      this(requestId, origin, hops, request, false, 0L, "");
    }
  }

  /**
   * A piece of a forwarded request's output: {@code tokens} start at {@code tokenOffset} of the
   * output, {@code text} at {@code charOffset} (UTF-16 chars) of its text.
   */
  record Stream(String requestId, long streamTag, int tokenOffset, int[] tokens, int charOffset,
      String text) implements Message {
    @Override
    public boolean equals(Object o) {
      return o instanceof Stream s && s.requestId.equals(requestId) && s.streamTag == streamTag
          && s.tokenOffset == tokenOffset && java.util.Arrays.equals(s.tokens, tokens)
          && s.charOffset == charOffset && s.text.equals(text);
    }

    @Override
    public int hashCode() {
      return java.util.Objects.hash(requestId, streamTag, tokenOffset,
          java.util.Arrays.hashCode(tokens), charOffset, text);
    }

    @Override
    public String toString() {
      return "Stream[" + requestId + ", tag " + streamTag + ", tokens " + tokenOffset + "+"
          + tokens.length + ", chars " + charOffset + "+" + text.length() + "]";
    }
  }

  record Result(String requestId, String servedBy, long serverNanos, EngineResult result)
      implements Message {}

  record Busy(String requestId, int queueDepth) implements Message {}

  record Failed(String requestId, boolean retryable, String message) implements Message {}

  record Cancel(String requestId, String origin) implements Message {}

  static boolean isForwarding(byte[] payload) {
    return payload.length > 0 && WireTypes.isForwarding(payload[0] & 0xFF);
  }

  static byte[] forward(InferenceRequest r, String origin, int hops) {
    return forward(r, origin, hops, false, 0L);
  }

  /** The version of the FORWARD of {@code r}: the oldest that carries all it needs. */
  static int forwardVersion(InferenceRequest r, boolean stream, String modelId) {
    if (!modelId.isEmpty()) {
      return MODEL_FORWARD_VERSION;
    }
    if (r.params().hasStops()) {
      return STOPS_FORWARD_VERSION;
    }
    return stream ? STREAMING_FORWARD_VERSION
        : r.scope().isDefault() ? VERSION : SCOPED_FORWARD_VERSION;
  }

  /**
   * A FORWARD; a request with stops is version 4 (streamed or not); otherwise with
   * {@code stream}, version 3, asking for STREAM messages tagged {@code streamTag}; without,
   * version 1 or 2 as before streaming existed.
   */
  static byte[] forward(InferenceRequest r, String origin, int hops, boolean stream,
      long streamTag) {
    return forward(r, origin, hops, stream, streamTag, "");
  }

  /**
   * A FORWARD from a node with model id {@code modelId}: version 5 if it is not empty (whatever
   * the request), else as {@link #forward(InferenceRequest, String, int, boolean, long)}.
   */
  static byte[] forward(InferenceRequest r, String origin, int hops, boolean stream,
      long streamTag, String modelId) {
    int[] t = PromptArrays.shared(r);
    CacheScope scope = r.scope();
    int version = forwardVersion(r, stream, modelId);
    ByteWriter w = new ByteWriter(64 + t.length * 3, MAX_MESSAGE_BYTES);
    w.writeByte(FORWARD).writeByte(version);
    writeId(w, r.id());
    w.writeAscii(origin, PeerAddress.MAX_NODE_ID_LENGTH);
    w.writeVarInt(hops);
    GenerationParams p = r.params();
    w.writeVarInt(p.maxTokens());
    w.writeFixedLong(Double.doubleToLongBits(p.temperature()));
    w.writeFixedLong(Double.doubleToLongBits(p.topP()));
    w.writeFixedLong(p.seed());
    w.writeVarInt(t.length);
    for (int x : t) {
      w.writeVarInt(x);
    }
    if (version != VERSION) {
      w.writeBytes(scope.adapter().getBytes(StandardCharsets.UTF_8));
      w.writeBytes(scope.salt().getBytes(StandardCharsets.UTF_8));
    }
    if (version >= STOPS_FORWARD_VERSION) {
      w.writeBoolean(stream);
      w.writeFixedLong(stream ? streamTag : 0L);
      w.writeVarInt(p.stop().size());
      for (String s : p.stop()) {
        w.writeBytes(s.getBytes(StandardCharsets.UTF_8));
      }
      w.writeVarInt(p.stopTokenIds().size());
      for (int id : p.stopTokenIds()) {
        w.writeVarInt(id);
      }
      if (version == MODEL_FORWARD_VERSION) {
        w.writeBytes(modelId.getBytes(StandardCharsets.UTF_8));
      }
    } else if (stream) {
      w.writeFixedLong(streamTag);
    }
    return w.toByteArray();
  }

  /**
   * A STREAM message: {@code tokens} at {@code tokenOffset} of the output, {@code text} at
   * {@code charOffset} of its text.
   *
   * @throws IllegalArgumentException if the piece exceeds a STREAM message's limits
   */
  static byte[] stream(String requestId, long streamTag, int tokenOffset, int[] tokens,
      int charOffset, String text) {
    byte[] tb = text.getBytes(StandardCharsets.UTF_8);
    if (tokens.length > MAX_STREAM_TOKENS || tb.length > MAX_STREAM_TEXT_BYTES
        || tokenOffset < 0 || (long) tokenOffset + tokens.length > MAX_STREAM_OFFSET
        || charOffset < 0 || (long) charOffset + text.length() > MAX_STREAM_OFFSET) {
      throw new IllegalArgumentException("a STREAM piece exceeds the limits: " + tokens.length
          + " tokens at " + tokenOffset + ", " + tb.length + " text bytes at " + charOffset);
    }
    ByteWriter w = new ByteWriter(48 + tokens.length * 3 + tb.length, MAX_MESSAGE_BYTES);
    w.writeByte(STREAM).writeByte(VERSION);
    writeId(w, requestId);
    w.writeFixedLong(streamTag);
    w.writeVarInt(tokenOffset);
    w.writeVarInt(tokens.length);
    for (int x : tokens) {
      w.writeVarLong(x & 0xFFFFFFFFL);
    }
    w.writeVarInt(charOffset);
    w.writeBytes(tb);
    return w.toByteArray();
  }

  /**
   * A RESULT.
   *
   * @throws IllegalArgumentException if the answer does not fit a RESULT: its text is above
   *     {@link #MAX_TEXT_BYTES} of UTF-8, or the whole message is above
   *     {@link #MAX_MESSAGE_BYTES} (many output tokens of large ids, up to 5 bytes each, with a
   *     long text)
   */
  static byte[] result(String requestId, String servedBy, long serverNanos, EngineResult r) {
    int[] out = r.outputTokens();
    byte[] text = r.text().getBytes(StandardCharsets.UTF_8);
    if (text.length > MAX_TEXT_BYTES) {
      throw new IllegalArgumentException(
          "result text of " + text.length + " bytes exceeds the " + MAX_TEXT_BYTES + " limit");
    }
    ByteWriter w = new ByteWriter(64 + out.length * 3 + text.length, MAX_MESSAGE_BYTES);
    try {
      w.writeByte(RESULT).writeByte(VERSION);
      writeId(w, requestId);
      w.writeAscii(servedBy, PeerAddress.MAX_NODE_ID_LENGTH);
      w.writeVarLong(Math.max(0, serverNanos));
      w.writeVarInt(out.length);
      for (int x : out) {
        w.writeVarLong(x & 0xFFFFFFFFL);
      }
      w.writeBytes(text);
      w.writeVarInt(r.promptTokens());
      w.writeZigZagLong(r.cachedPromptTokens());
      w.writeZigZagLong(r.prefillNanos());
      w.writeZigZagLong(r.decodeNanos());
    } catch (MessageTooLargeException e) {
      throw new IllegalArgumentException("result of " + out.length + " output tokens and "
          + text.length + " text bytes exceeds the " + MAX_MESSAGE_BYTES + "-byte message limit",
          e);
    }
    return w.toByteArray();
  }

  static byte[] busy(String requestId, int queueDepth) {
    // id up to 512 UTF-8 bytes + its length + type, version and a varint
    ByteWriter w = new ByteWriter(32, 1024);
    w.writeByte(BUSY).writeByte(VERSION);
    writeId(w, requestId);
    w.writeVarInt(Math.max(0, queueDepth));
    return w.toByteArray();
  }

  static byte[] failed(String requestId, boolean retryable, String message) {
    byte[] m = String.valueOf(message).getBytes(StandardCharsets.UTF_8);
    if (m.length > MAX_ERROR_BYTES) {
      m = java.util.Arrays.copyOf(m, MAX_ERROR_BYTES);
      // cut back to a character boundary so the text stays valid UTF-8: the last character's
      // lead byte says how long it is; left out only when the limit falls inside it
      int lead = MAX_ERROR_BYTES - 1;
      while (lead > 0 && (m[lead] & 0xC0) == 0x80) {
        lead--;
      }
      int b = m[lead] & 0xFF;
      int length = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
      int end = lead + length <= MAX_ERROR_BYTES ? MAX_ERROR_BYTES : lead;
      m = java.util.Arrays.copyOf(m, end);
    }
    ByteWriter w = new ByteWriter(32 + m.length, 2048);
    w.writeByte(FAILED).writeByte(VERSION);
    writeId(w, requestId);
    w.writeBoolean(retryable);
    w.writeBytes(m);
    return w.toByteArray();
  }

  static byte[] cancel(String requestId, String origin) {
    // id up to 512 UTF-8 bytes + origin up to 64 ASCII + lengths, type and version
    ByteWriter w = new ByteWriter(64, 1152);
    w.writeByte(CANCEL).writeByte(VERSION);
    writeId(w, requestId);
    w.writeAscii(origin, PeerAddress.MAX_NODE_ID_LENGTH);
    return w.toByteArray();
  }

  /** Decodes any forwarding message. */
  static Message decode(byte[] payload) throws MalformedMessageException {
    ByteReader r = new ByteReader(payload);
    int type = r.readUnsignedByte("type");
    if (!WireTypes.isForwarding(type) || type < FORWARD || type > STREAM) {
      throw MalformedMessageException.of(Reason.UNKNOWN_TYPE, "type", type, 0,
          "not a forwarding message type");
    }
    int version = r.readUnsignedByte("version");
    if (version != VERSION && !(type == FORWARD && version >= SCOPED_FORWARD_VERSION
        && version <= MODEL_FORWARD_VERSION)) {
      throw MalformedMessageException.of(Reason.UNKNOWN_VERSION, "version", version, 1,
          type == FORWARD ? "FORWARD speaks versions " + VERSION + " to "
              + MODEL_FORWARD_VERSION : "forwarding messages speak version " + VERSION);
    }
    String id = readId(r);
    Message m;
    switch (type) {
      case FORWARD -> m = decodeForward(r, id, version);
      case STREAM -> m = decodeStream(r, id);
      case RESULT -> m = decodeResult(r, id);
      case BUSY -> m = new Busy(id, r.readVarInt("queueDepth", 0, Integer.MAX_VALUE));
      case FAILED -> {
        boolean retryable = r.readBoolean("retryable");
        m = new Failed(id, retryable, withoutControls(readUtf8(r, "message", MAX_ERROR_BYTES)));
      }
      default -> m = new Cancel(id, r.readAscii("origin", PeerAddress.MAX_NODE_ID_LENGTH));
    }
    r.expectEnd(typeName(type));
    return m;
  }

  private static Stream decodeStream(ByteReader r, String id) throws MalformedMessageException {
    long tag = r.readFixedLong("streamTag");
    int tokenOffset = r.readVarInt("tokenOffset", 0, MAX_STREAM_OFFSET);
    int at = r.position();
    int n = r.readCount("tokens", MAX_STREAM_TOKENS, 1);
    if ((long) tokenOffset + n > MAX_STREAM_OFFSET) {
      throw MalformedMessageException.outOfRange("tokenOffset + tokens", (long) tokenOffset + n,
          0, MAX_STREAM_OFFSET, at);
    }
    int[] tokens = new int[n];
    for (int i = 0; i < n; i++) {
      tokens[i] = (int) r.readVarLong("token", 0, 0xFFFFFFFFL);
    }
    int charOffset = r.readVarInt("charOffset", 0, MAX_STREAM_OFFSET);
    at = r.position();
    String text = readUtf8(r, "text", MAX_STREAM_TEXT_BYTES);
    if ((long) charOffset + text.length() > MAX_STREAM_OFFSET) {
      throw MalformedMessageException.outOfRange("charOffset + chars",
          (long) charOffset + text.length(), 0, MAX_STREAM_OFFSET, at);
    }
    return new Stream(id, tag, tokenOffset, tokens, charOffset, text);
  }

  private static Forward decodeForward(ByteReader r, String id, int version)
      throws MalformedMessageException {
    boolean stops = version >= STOPS_FORWARD_VERSION;
    boolean stream = version == STREAMING_FORWARD_VERSION;
    boolean scoped = version != VERSION;
    String origin = r.readAscii("origin", PeerAddress.MAX_NODE_ID_LENGTH);
    int hops = r.readVarInt("hops", 0, 64);
    int maxTokens = r.readVarInt("maxTokens", 1, GenerationParams.MAX_TOKENS_LIMIT);
    int at = r.position();
    double temperature = Double.longBitsToDouble(r.readFixedLong("temperature"));
    double topP = Double.longBitsToDouble(r.readFixedLong("topP"));
    long seed = r.readFixedLong("seed");
    GenerationParams params;
    try {
      params = new GenerationParams(maxTokens, temperature, topP, seed);
    } catch (IllegalArgumentException e) {
      throw MalformedMessageException.of(Reason.OUT_OF_RANGE, "params", 0, at, e.getMessage());
    }
    int n = r.readCount("tokens", InferenceRequest.MAX_PROMPT_TOKENS, 1);
    if (n == 0) {
      throw MalformedMessageException.outOfRange("tokens", 0, 1, InferenceRequest.MAX_PROMPT_TOKENS,
          r.position());
    }
    int[] tokens = new int[n];
    for (int i = 0; i < n; i++) {
      tokens[i] = r.readVarInt("token", 0, InferenceRequest.MAX_TOKEN_ID - 1);
    }
    CacheScope scope = CacheScope.DEFAULT;
    if (scoped) {
      int scopeAt = r.position();
      String adapter = readUtf8(r, "adapter", CacheScope.MAX_ADAPTER_BYTES);
      String salt = readUtf8(r, "salt", CacheScope.MAX_SALT_BYTES);
      try {
        scope = CacheScope.of(adapter, salt);
      } catch (IllegalArgumentException e) { // a control character or a lone surrogate
        throw MalformedMessageException.of(Reason.BAD_CHARACTER, "scope", 0, scopeAt,
            e.getMessage());
      }
      if (scope.isDefault() && version == SCOPED_FORWARD_VERSION) {
        // one encoding per request: the default is version 1
        throw MalformedMessageException.of(Reason.OUT_OF_RANGE, "scope", 0, scopeAt,
            "a version-2 FORWARD names an adapter or a salt");
      }
    }
    long tag = stream ? r.readFixedLong("streamTag") : 0L;
    if (stops) {
      int streamAt = r.position();
      stream = r.readBoolean("stream");
      tag = r.readFixedLong("streamTag");
      if (!stream && tag != 0L) { // one encoding per request
        throw MalformedMessageException.of(Reason.OUT_OF_RANGE, "streamTag", tag, streamAt,
            "a FORWARD that asks for no streaming names a stream tag");
      }
      params = readStops(r, params, version == STOPS_FORWARD_VERSION);
    }
    String modelId = "";
    if (version == MODEL_FORWARD_VERSION) {
      int modelAt = r.position();
      modelId = readUtf8(r, "modelId", ModelIds.MAX_BYTES);
      if (modelId.isEmpty()) { // one encoding per request: without a model id it is 1 to 4
        throw MalformedMessageException.of(Reason.OUT_OF_RANGE, "modelId", 0, modelAt,
            "a version-5 FORWARD names a model id");
      }
      String problem = ModelIds.problem(modelId);
      if (problem != null) {
        throw MalformedMessageException.of(Reason.BAD_CHARACTER, "modelId", 0, modelAt, problem);
      }
    }
    return new Forward(id, origin, hops, new InferenceRequest(id, tokens, params, scope), stream,
        tag, modelId);
  }

  /**
   * The stops of a version-4 or -5 FORWARD, added to {@code params}: at least one if
   * {@code required} (version 4).
   */
  private static GenerationParams readStops(ByteReader r, GenerationParams params,
      boolean required) throws MalformedMessageException {
    int n = r.readCount("stop", GenerationParams.MAX_STOP_STRINGS, 1);
    java.util.List<String> stop = new java.util.ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      int at = r.position();
      String s = readUtf8(r, "stop", MAX_STOP_BYTES);
      if (s.isEmpty() || s.length() > GenerationParams.MAX_STOP_LENGTH) {
        throw MalformedMessageException.outOfRange("stop", s.length(), 1,
            GenerationParams.MAX_STOP_LENGTH, at);
      }
      stop.add(s);
    }
    int m = r.readCount("stopTokenIds", GenerationParams.MAX_STOP_TOKEN_IDS, 1);
    java.util.List<Integer> ids = new java.util.ArrayList<>(m);
    for (int i = 0; i < m; i++) {
      ids.add(r.readVarInt("stopTokenId", 0, InferenceRequest.MAX_TOKEN_ID - 1));
    }
    if (required && n == 0 && m == 0) { // one encoding per request: without stops it is 1, 2 or 3
      throw MalformedMessageException.of(Reason.OUT_OF_RANGE, "stop", 0, r.position(),
          "a version-4 FORWARD names no stop");
    }
    try {
      return params.withStops(stop, ids);
    } catch (IllegalArgumentException e) { // checked above; kept typed should the rules grow
      throw MalformedMessageException.of(Reason.OUT_OF_RANGE, "stop", 0, r.position(),
          e.getMessage());
    }
  }

  /**
   * A peer's failure message with its control characters (line breaks, escapes) made spaces: it
   * goes into the request's failure, the logs and the client's error answer as one line.
   */
  static String withoutControls(String message) {
    for (int i = 0; i < message.length(); i++) {
      if (Character.isISOControl(message.charAt(i))) {
        char[] c = message.toCharArray();
        for (int j = i; j < c.length; j++) {
          if (Character.isISOControl(c[j])) {
            c[j] = ' ';
          }
        }
        return new String(c);
      }
    }
    return message;
  }

  /** A string of at most {@code maxBytes} bytes of well-formed UTF-8. */
  private static String readUtf8(ByteReader r, String field, int maxBytes)
      throws MalformedMessageException {
    int at = r.position();
    byte[] b = r.readBytes(field, maxBytes);
    try {
      return StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(b)).toString();
    } catch (CharacterCodingException e) {
      throw MalformedMessageException.of(Reason.BAD_CHARACTER, field, b.length, at, "not UTF-8");
    }
  }

  private static Result decodeResult(ByteReader r, String id) throws MalformedMessageException {
    String servedBy = r.readAscii("servedBy", PeerAddress.MAX_NODE_ID_LENGTH);
    long serverNanos = r.readVarLong("serverNanos", 0, Long.MAX_VALUE);
    int n = r.readCount("output", MAX_OUTPUT_TOKENS, 1);
    int[] out = new int[n];
    for (int i = 0; i < n; i++) {
      out[i] = (int) r.readVarLong("outputToken", 0, 0xFFFFFFFFL);
    }
    String text = readUtf8(r, "text", MAX_TEXT_BYTES);
    int at = r.position();
    // an engine may count special tokens it adds to the prompt, as the node allows
    int prompt = r.readVarInt("promptTokens", 0,
        InferenceRequest.MAX_PROMPT_TOKENS + RouterNode.PROMPT_TOKENS_SLACK);
    long cached = r.readZigZagLong("cachedPromptTokens");
    long prefill = r.readZigZagLong("prefillNanos");
    long decode = r.readZigZagLong("decodeNanos");
    if (cached < -1 || cached > prompt) {
      throw MalformedMessageException.outOfRange("cachedPromptTokens", cached, -1, prompt, at);
    }
    if (prefill < -1 || decode < -1) {
      throw MalformedMessageException.of(Reason.OUT_OF_RANGE, "timings", Math.min(prefill, decode),
          at, "timings must be >= -1");
    }
    EngineResult result = new EngineResult(out, text, prompt,
        (int) cached, prefill, decode);
    return new Result(id, servedBy, serverNanos, result);
  }

  /** Request ids are any 1..128 characters, written as UTF-8 (at most 512 bytes). */
  private static void writeId(ByteWriter w, String id) {
    w.writeBytes(id.getBytes(StandardCharsets.UTF_8));
  }

  private static String readId(ByteReader r) throws MalformedMessageException {
    int at = r.position();
    byte[] b = r.readBytes("requestId", InferenceRequest.MAX_ID_LENGTH * 4);
    String id;
    try {
      // strict: replacing bad bytes would run (and answer) the request under another id
      id = StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(b)).toString();
    } catch (CharacterCodingException e) {
      throw MalformedMessageException.of(Reason.BAD_CHARACTER, "requestId", b.length, at,
          "not UTF-8");
    }
    if (id.isEmpty() || id.length() > InferenceRequest.MAX_ID_LENGTH) {
      throw MalformedMessageException.outOfRange("requestId", id.length(), 1,
          InferenceRequest.MAX_ID_LENGTH, at);
    }
    return id;
  }

  private static String typeName(int type) {
    return switch (type) {
      case FORWARD -> "FORWARD";
      case RESULT -> "RESULT";
      case BUSY -> "BUSY";
      case FAILED -> "FAILED";
      case CANCEL -> "CANCEL";
      default -> "STREAM";
    };
  }
}
