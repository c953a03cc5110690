package io.github.prefixrouter.engine.openai;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.IntStream;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * A known output, written as a completion stream the way servers may write it (one chunk per
 * piece, token ids or text only, LF, CRLF or CR line ends, comments, a JSON chunk split over
 * several {@code data} lines, ignored fields, a byte order mark, a usage chunk or none) and cut
 * into random chunks (through CRLF pairs and multi-byte characters), parses back to exactly that
 * output, its pieces in order; cut anywhere before the chunk with the {@code finish_reason}, it
 * is a retryable failure whose pieces so far are a prefix of the output; cut after it and before
 * {@code [DONE]}, it gives the whole output.
 */
class CompletionStreamProperties {

  /** One piece of the output: tokens and text (either may be empty). */
  record Piece(List<Integer> tokens, String text) {
    int[] tokenArray() {
      return tokens.stream().mapToInt(Integer::intValue).toArray();
    }
  }

  /** How a stream is written. */
  record Style(boolean tokenIds, boolean usage, int cached, boolean bom, long seed) {}

  private static final InferenceRequest REQUEST =
      new InferenceRequest("r", new int[] {5, 6, 7, 8, 9, 10}, GenerationParams.greedy(64));

  @Provide
  Arbitrary<List<Piece>> outputs() {
    Arbitrary<String> text = Arbitraries.strings()
        .withChars("ab \"\\/\n\t\u00e9\u4e2d{}:")
        .withChars("\uD83D\uDE00") // a surrogate pair: 4 bytes in UTF-8 (kept whole below)
        .ofMaxLength(6)
        .map(CompletionStreamProperties::wholeSurrogates);
    Arbitrary<List<Integer>> tokens = Arbitraries.integers().between(0, 200_000).list().ofMaxSize(3);
    return Combinators.combine(tokens, text).as(Piece::new).list().ofMaxSize(12);
  }

  @Provide
  Arbitrary<Style> styles() {
    return Combinators.combine(Arbitraries.of(true, false), Arbitraries.of(true, false),
        Arbitraries.integers().between(-1, 6), Arbitraries.of(true, false),
        Arbitraries.longs()).as(Style::new);
  }

  /** Drops lone surrogates, which no server sends (and JSON cannot carry as text). */
  static String wholeSurrogates(String s) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
        sb.append(c).append(s.charAt(++i));
      } else if (!Character.isSurrogate(c)) {
        sb.append(c);
      }
    }
    return sb.toString();
  }

  /**
   * The stream's bytes, and where the dispatching line ends begin of the chunk with the
   * finish_reason, of the usage chunk (-1 without one) and of the [DONE] event.
   */
  record Written(byte[] bytes, int finishEnd, int usageEnd, int doneEnd) {}

  static Written write(List<Piece> output, Style style) {
    Random r = new Random(style.seed());
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    String[] ends = {"\n", "\r\n", "\r"};
    boolean[] afterCr = {false};
    java.util.function.Consumer<String> line = s -> {
      out.writeBytes(s.getBytes(StandardCharsets.UTF_8));
      // an empty line after a CR must not end with LF: CR LF is one line end
      String end = s.isEmpty() && afterCr[0] ? ends[1 + r.nextInt(2)] : ends[r.nextInt(3)];
      out.writeBytes(end.getBytes(StandardCharsets.UTF_8));
      afterCr[0] = end.equals("\r");
    };
    if (style.bom()) {
      out.writeBytes(new byte[] {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF});
    }
    // a server always sends choice 0, for an empty output too (one chunk with its finish_reason)
    int chunks = Math.max(1, output.size());
    int finishEnd = -1;
    for (int i = 0; i < chunks; i++) {
      Piece p = output.isEmpty() ? new Piece(List.of(), "") : output.get(i);
      if (r.nextInt(4) == 0) {
        line.accept(": keep-alive " + i);
      }
      Map<String, Object> choice = new LinkedHashMap<>();
      choice.put("index", 0);
      choice.put("text", p.text());
      if (style.tokenIds()) {
        choice.put("token_ids", p.tokens());
      }
      choice.put("finish_reason", i == chunks - 1 ? "length" : Json.NULL);
      Map<String, Object> chunk = new LinkedHashMap<>();
      chunk.put("id", "cmpl-1");
      chunk.put("object", "text_completion");
      chunk.put("choices", List.of(choice));
      dataLines(Json.write(chunk), r, line);
      if (r.nextInt(5) == 0) {
        line.accept("id: " + i);
      }
      if (r.nextInt(8) == 0) {
        line.accept("retry: 1000");
      }
      finishEnd = out.size();
      line.accept("");
    }
    int usageEnd = -1;
    if (style.usage()) {
      Map<String, Object> usage = new LinkedHashMap<>();
      usage.put("prompt_tokens", REQUEST.length());
      usage.put("completion_tokens", 3);
      if (style.cached() >= 0) {
        usage.put("prompt_tokens_details", Map.of("cached_tokens", style.cached()));
      }
      dataLines(Json.write(Map.of("id", "cmpl-1", "choices", List.of(), "usage", usage)), r, line);
      usageEnd = out.size();
      line.accept("");
    }
    line.accept(r.nextBoolean() ? "data: [DONE]" : "data:[DONE]");
    int doneEnd = out.size();
    line.accept("");
    return new Written(out.toByteArray(), finishEnd, usageEnd, doneEnd);
  }

  /** The JSON as one {@code data} line, or split after its first character over two. */
  private static void dataLines(String json, Random r, java.util.function.Consumer<String> line) {
    String field = r.nextBoolean() ? "data: " : "data:";
    if (r.nextBoolean()) {
      line.accept(field + json);
    } else {
      line.accept(field + json.charAt(0)); // "{", then the rest: joined by LF, still JSON
      line.accept("data: " + json.substring(1));
    }
  }

  /** Feeds {@code bytes} in random chunks. */
  static void feedInChunks(CompletionStream s, byte[] bytes, int upTo, Random r) {
    int at = 0;
    while (at < upTo) {
      int n = Math.min(upTo - at, 1 + r.nextInt(r.nextBoolean() ? 4 : 64));
      s.feed(ByteBuffer.wrap(bytes, at, n).slice());
      at += n;
    }
  }

  @Property(tries = 400)
  void randomChunkingsOfAStreamParseBackToItsOutput(@ForAll("outputs") List<Piece> output,
      @ForAll("styles") Style style) {
    Written w = write(output, style);
    List<Piece> got = new ArrayList<>();
    CompletionStream s = new CompletionStream(REQUEST, 1 << 20, null,
        (tokens, text) -> got.add(new Piece(IntStream.of(tokens).boxed().toList(), text)));
    feedInChunks(s, w.bytes(), w.bytes().length, new Random(style.seed() ^ 0x5DEECE66DL));
    assertTrue(s.done());
    EngineResult r = s.result();
    List<Piece> expected = output.stream()
        .map(p -> new Piece(style.tokenIds() ? p.tokens() : List.of(), p.text()))
        .filter(p -> !p.tokens().isEmpty() || !p.text().isEmpty())
        .toList();
    assertEquals(expected, got, "the pieces, in order");
    assertArrayEquals(expected.stream().flatMapToInt(p -> IntStream.of(p.tokenArray())).toArray(),
        r.outputTokens());
    assertEquals(String.join("", expected.stream().map(Piece::text).toList()), r.text());
    assertEquals(REQUEST.length(), r.promptTokens());
    assertEquals(style.usage() ? style.cached() : -1, r.cachedPromptTokens());
    assertEquals(-1, r.prefillNanos());
    assertEquals(-1, r.decodeNanos());
  }

  /**
   * A stream's cached-token count by what its server reported before: a usage chunk's count as
   * given; one the usage chunk leaves out (vLLM's way of saying 0) is 0 once the server has
   * reported a count, else -1, unknown; no usage chunk, -1. A usage chunk with a count marks the
   * server as reporting them.
   */
  @Property(tries = 200)
  void aCountLeftOutIsAMissOnlyOnceTheServerHasReportedOne(
      @ForAll("outputs") List<Piece> output, @ForAll("styles") Style style,
      @ForAll boolean reportedBefore) {
    Written w = write(output, style);
    AtomicBoolean reported = new AtomicBoolean(reportedBefore);
    CompletionStream s = new CompletionStream(REQUEST, 1 << 20, null, (tokens, text) -> { },
        null, reported);
    feedInChunks(s, w.bytes(), w.bytes().length, new Random(style.seed()));
    int expected;
    if (!style.usage()) {
      expected = -1;
    } else if (style.cached() >= 0) {
      expected = style.cached();
    } else {
      expected = reportedBefore ? 0 : -1;
    }
    assertEquals(expected, s.result().cachedPromptTokens(), () -> "usage " + style.usage()
        + ", cached " + style.cached() + ", reported before " + reportedBefore);
    assertEquals(reportedBefore || style.usage() && style.cached() >= 0, reported.get(),
        "whether the server is taken to report its cached tokens");
  }

  /**
   * What a server may send after {@code [DONE]}: more events, an error event, a malformed chunk,
   * bytes that are not UTF-8, a line never ended, random bytes.
   */
  @Provide
  Arbitrary<byte[]> afterDone() {
    Arbitrary<byte[]> fragment = Arbitraries.oneOf(
        Arbitraries.of("data: {\"choices\":[{\"text\":\"late\",\"token_ids\":[1]}]}\n\n",
                "event: error\ndata: {\"error\":{\"message\":\"late\"}}\n\n", "data: {not json\n\n",
                "data: [DONE]\n\n", ": ping\r\n", "\r", "\n", "data: no line end")
            .map(t -> t.getBytes(StandardCharsets.UTF_8)),
        Arbitraries.of(new byte[] {'d', 'a', 't', 'a', ':', (byte) 0xC3, '\n', '\n'},
            new byte[] {(byte) 0xFF, '\r', '\n'}),
        Arbitraries.bytes().array(byte[].class).ofMaxSize(16));
    return fragment.list().ofMaxSize(4).map(list -> {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      list.forEach(out::writeBytes);
      return out.toByteArray();
    });
  }

  @Property(tries = 300)
  void whatFollowsDoneChangesNothingWhereverTheStreamIsCut(@ForAll("outputs") List<Piece> output,
      @ForAll("styles") Style style, @ForAll("afterDone") byte[] after) {
    // the request is complete at [DONE]: whether what follows arrives in the same read or in
    // later ones, it is ignored (up to the byte limit), and the result is the stream's
    Written w = write(output, style);
    byte[] bytes = java.util.Arrays.copyOf(w.bytes(), w.bytes().length + after.length);
    System.arraycopy(after, 0, bytes, w.bytes().length, after.length);
    List<Piece> got = new ArrayList<>();
    CompletionStream s = new CompletionStream(REQUEST, 1 << 20, null,
        (tokens, text) -> got.add(new Piece(IntStream.of(tokens).boxed().toList(), text)));
    Random r = new Random(style.seed() ^ 0x5DEECE66DL);
    if (r.nextBoolean()) {
      s.feed(ByteBuffer.wrap(bytes)); // one read
    } else {
      feedInChunks(s, bytes, bytes.length, r);
    }
    assertTrue(s.done());
    List<Piece> expected = output.stream()
        .map(p -> new Piece(style.tokenIds() ? p.tokens() : List.of(), p.text()))
        .filter(p -> !p.tokens().isEmpty() || !p.text().isEmpty())
        .toList();
    assertEquals(expected, got, "the pieces, in order");
    assertEquals(String.join("", expected.stream().map(Piece::text).toList()), s.result().text());
  }

  @Property(tries = 200)
  void aStreamCutBeforeItsEndIsARetryableFailureAfterAPrefixOfItsPieces(
      @ForAll("outputs") List<Piece> output, @ForAll("styles") Style style) {
    Written w = write(output, style);
    Random r = new Random(style.seed());
    int cut = r.nextInt(w.finishEnd() + 1); // the finish chunk not ended: not dispatched
    StringBuilder text = new StringBuilder();
    CompletionStream s =
        new CompletionStream(REQUEST, 1 << 20, null, (tokens, t) -> text.append(t));
    feedInChunks(s, w.bytes(), cut, r);
    assertFalse(s.done());
    EngineException e = assertThrows(EngineException.class, s::result);
    assertTrue(e.retryable());
    assertTrue(e.getMessage().contains("before [DONE]"), e.getMessage());
    String all = String.join("", output.stream().map(Piece::text).toList());
    assertTrue(all.startsWith(text.toString()), text + " / " + all);
  }

  @Property(tries = 200)
  void aStreamCutAfterItsFinishReasonGivesItsWholeOutput(
      @ForAll("outputs") List<Piece> output, @ForAll("styles") Style style) {
    // the server said the generation is over: a stream that then ends without [DONE] (a proxy
    // that drops it) is whole; only a usage chunk not come is missing
    Written w = write(output, style);
    Random r = new Random(style.seed());
    int cut = w.finishEnd() + 1 + r.nextInt(w.doneEnd() - w.finishEnd());
    List<Piece> got = new ArrayList<>();
    CompletionStream s = new CompletionStream(REQUEST, 1 << 20, null,
        (tokens, text) -> got.add(new Piece(IntStream.of(tokens).boxed().toList(), text)));
    feedInChunks(s, w.bytes(), cut, r);
    assertFalse(s.done());
    EngineResult result = s.result();
    List<Piece> expected = output.stream()
        .map(p -> new Piece(style.tokenIds() ? p.tokens() : List.of(), p.text()))
        .filter(p -> !p.tokens().isEmpty() || !p.text().isEmpty())
        .toList();
    assertEquals(expected, got, "the pieces, in order");
    assertArrayEquals(expected.stream().flatMapToInt(p -> IntStream.of(p.tokenArray())).toArray(),
        result.outputTokens());
    assertEquals(String.join("", expected.stream().map(Piece::text).toList()), result.text());
    boolean usage = style.usage() && cut > w.usageEnd();
    assertEquals(usage ? style.cached() : -1, result.cachedPromptTokens());
  }
}
