package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.spi.EngineResult;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * Stops on the OpenAI routes with the demo tokenizer (one char per token), against a simple
 * model of vLLM's rule: the output is read token by token; a stop token id ends it (kept in the
 * tokens, its text not shown); else its char is added, and the first stop string (in the
 * client's order) the text then ends with ends it, cut just before that string. The whole
 * answer ({@link OpenAiAnswers#output}) and the chunks of the same output streamed in any
 * pieces ({@link OpenAiAnswers.ChunkFormat}) both give the model's text, tokens and reasons.
 */
class OpenAiStopsProperties {

  private static final ReferenceTokenizer TOKENIZER = new ReferenceTokenizer(1024, 64);

  /** Tokens 0 to 3: four chars, so that stop strings of them occur often. */
  private static String text(int token) {
    return TOKENIZER.outputText(new int[] {token}, "");
  }

  @Provide
  Arbitrary<List<String>> stops() {
    return Arbitraries.integers().between(0, 3).list().ofMinSize(1).ofMaxSize(3)
        .map(l -> {
          StringBuilder b = new StringBuilder();
          l.forEach(t -> b.append(text(t)));
          return b.toString();
        }).list().ofMaxSize(3).uniqueElements();
  }

  @Property(tries = 500)
  void streamedAndWholeAnswersCutWhereTheModelCuts(
      @ForAll @Size(max = 12) List<@IntRange(min = 0, max = 3) Integer> output,
      @ForAll("stops") List<String> stops,
      @ForAll @Size(max = 2) List<@IntRange(min = 0, max = 3) Integer> stopIds,
      @ForAll @Size(max = 6) List<@IntRange(min = 0, max = 12) Integer> cuts,
      @ForAll @IntRange(min = 1, max = 12) int maxTokens,
      @ForAll boolean chat) {
    int[] tokens = output.stream().mapToInt(Integer::intValue).limit(maxTokens).toArray();
    List<Integer> ids = new ArrayList<>(new TreeSet<>(stopIds));
    GenerationParams params = new GenerationParams(maxTokens, 1.0, 1.0, 1L)
        .withStops(stops, ids);
    OpenAiAnswers.Context ctx = new OpenAiAnswers.Context(
        chat ? OpenAiRequest.Kind.CHAT : OpenAiRequest.Kind.COMPLETION, "id", 1L, "m", params,
        1L, false, TOKENIZER, false, 0);

    // the model
    StringBuilder text = new StringBuilder();
    int kept = tokens.length;
    Object reason = null;
    model:
    for (int i = 0; i < tokens.length; i++) {
      if (ids.contains(tokens[i])) {
        kept = i + 1;
        reason = tokens[i];
        break;
      }
      text.append(text(tokens[i]));
      for (String s : stops) {
        if (text.toString().endsWith(s)) {
          text.setLength(text.length() - s.length());
          kept = i + 1;
          reason = s;
          break model;
        }
      }
    }
    String finish = reason == null && kept >= maxTokens ? "length" : "stop";

    // the whole answer
    OpenAiAnswers.Output whole = OpenAiAnswers.output(ctx, tokens, "");
    String where = Arrays.toString(tokens) + " stops " + stops + " ids " + ids;
    assertEquals(text.toString(), whole.text(), where);
    assertArrayEquals(Arrays.copyOf(tokens, kept), whole.tokens(), where);
    assertEquals(reason, whole.stopReason(), where);
    assertEquals(finish, whole.finishReason(ctx), where);

    // the same output streamed in pieces cut at the given points
    TreeSet<Integer> at = new TreeSet<>(cuts);
    at.add(tokens.length);
    OpenAiAnswers.ChunkFormat format = new OpenAiAnswers.ChunkFormat(ctx);
    StringBuilder events = new StringBuilder();
    int from = 0;
    for (int to : at) {
      if (to > from && to <= tokens.length) {
        events.append(new String(format.piece(Arrays.copyOfRange(tokens, from, to), ""),
            StandardCharsets.UTF_8));
        from = to;
      }
    }
    InferenceResponse response = new InferenceResponse("id",
        new EngineResult(tokens, "", 4, 0, 1, 1), "solo", false, 1, FallbackCause.NONE,
        StubNode.LOCAL_DECISION);
    events.append(new String(format.end(response, new int[0], ""), StandardCharsets.UTF_8));
    List<Object> parsed = Sse.parse(events.toString());
    assertEquals(Sse.DONE, parsed.get(parsed.size() - 1), where);
    StringBuilder streamed = new StringBuilder();
    Map<?, ?> last = null;
    for (Object e : parsed.subList(0, parsed.size() - 1)) {
      last = (Map<?, ?>) ((List<?>) ((Map<?, ?>) e).get("choices")).get(0);
      Object t = chat ? ((Map<?, ?>) last.get("delta")).get("content") : last.get("text");
      streamed.append(t == null ? "" : t);
    }
    assertEquals(text.toString(), streamed.toString(), where + " cut at " + at);
    assertEquals(finish, last.get("finish_reason"), where);
    Object streamedReason = last.get("stop_reason");
    assertEquals(reason == null ? Json.NULL : reason instanceof Integer i ? (Object) (long) i
        : reason, streamedReason, where);
  }

  /**
   * With vLLM's {@code continuous_usage_stats}, each chunk of a piece carries the usage so far:
   * its {@code completion_tokens} are the output tokens through that piece, counted as the
   * whole answer counts them (through the token that ended the output at a stop, none after),
   * and the finishing chunk's and the usage chunk's are the whole answer's.
   */
  @Property(tries = 500)
  void continuousUsageCountsTheTokensThroughEachChunksPiece(
      @ForAll @Size(max = 12) List<@IntRange(min = 0, max = 3) Integer> output,
      @ForAll("stops") List<String> stops,
      @ForAll @Size(max = 2) List<@IntRange(min = 0, max = 3) Integer> stopIds,
      @ForAll @Size(max = 6) List<@IntRange(min = 0, max = 12) Integer> cuts,
      @ForAll boolean chat) {
    int[] tokens = output.stream().mapToInt(Integer::intValue).toArray();
    List<Integer> ids = new ArrayList<>(new TreeSet<>(stopIds));
    GenerationParams params = new GenerationParams(12, 1.0, 1.0, 1L).withStops(stops, ids);
    OpenAiAnswers.Context ctx = new OpenAiAnswers.Context(
        chat ? OpenAiRequest.Kind.CHAT : OpenAiRequest.Kind.COMPLETION, "id", 1L, "m", params,
        1L, true, TOKENIZER, true, 4);
    int kept = OpenAiAnswers.output(ctx, tokens, "").tokens().length;
    String where = Arrays.toString(tokens) + " stops " + stops + " ids " + ids;

    TreeSet<Integer> at = new TreeSet<>(cuts);
    at.add(tokens.length);
    OpenAiAnswers.ChunkFormat format = new OpenAiAnswers.ChunkFormat(ctx);
    int from = 0;
    for (int to : at) {
      if (to > from && to <= tokens.length) {
        String events = new String(format.piece(Arrays.copyOfRange(tokens, from, to), ""),
            StandardCharsets.UTF_8);
        for (Object e : Sse.parse(events)) {
          Map<?, ?> usage = (Map<?, ?>) ((Map<?, ?>) e).get("usage");
          long through = Math.min(to, kept);
          assertEquals(Map.of("prompt_tokens", 4L, "completion_tokens", through,
              "total_tokens", 4L + through), usage, where + " piece to " + to);
        }
        from = to;
      }
    }
    InferenceResponse response = new InferenceResponse("id",
        new EngineResult(tokens, "", 4, 0, 1, 1), "solo", false, 1, FallbackCause.NONE,
        StubNode.LOCAL_DECISION);
    List<Object> end = Sse.parse(new String(format.end(response, new int[0], ""),
        StandardCharsets.UTF_8));
    assertEquals(3, end.size(), where); // the finish, the usage, [DONE]
    Map<String, Object> whole = new java.util.LinkedHashMap<>();
    whole.put("prompt_tokens", 4L);
    whole.put("completion_tokens", (long) kept);
    whole.put("total_tokens", 4L + kept);
    whole.put("prompt_tokens_details", Map.of("cached_tokens", 0L));
    assertEquals(whole, ((Map<?, ?>) end.get(0)).get("usage"), where);
    assertEquals(List.of(), ((Map<?, ?>) end.get(1)).get("choices"), where);
    assertEquals(whole, ((Map<?, ?>) end.get(1)).get("usage"), where);
  }
}
