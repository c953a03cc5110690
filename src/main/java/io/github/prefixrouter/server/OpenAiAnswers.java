package io.github.prefixrouter.server;

import com.sun.net.httpserver.Headers;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.internal.stop.StopMatcher;
import java.io.ByteArrayOutputStream;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The answers of the client endpoint's OpenAI-compatible routes, in OpenAI's shapes: a whole
 * completion ({@code text_completion}) or chat completion ({@code chat.completion}), the chunks
 * of a streamed one ({@link ChunkFormat}), the model list and errors.
 *
 * <p>Output text is {@link PromptTokenizer#outputText} of the output tokens and the engine's
 * text (the engine's text when the node has no tokenizer), cut at the request's first stop
 * ({@link #output}); a stream holds back a tail that could begin a stop string
 * ({@link StopMatcher}). {@code finish_reason} is {@code "stop"} when a stop ended the output
 * (its {@code stop_reason} the stop string or token id), else {@code "length"} when the output
 * has {@code max_tokens} tokens, else {@code "stop"}. The
 * routing facts ride along without disturbing OpenAI parsers, which ignore keys they do not
 * know: a top-level {@code "prefix_router"} object ({@link #routing}) in a whole answer and in
 * a stream's finishing chunk, and, on a whole answer, the response headers {@link #SERVED_BY},
 * {@link #FORWARDED}, {@link #ATTEMPTS}, {@link #CACHED_TOKENS} and {@link #SEED}.
 */
final class OpenAiAnswers {

  /** Header: the id of the node whose engine served the request. */
  static final String SERVED_BY = "X-Prefix-Router-Served-By";
  /** Header: {@code true} if a peer served it. */
  static final String FORWARDED = "X-Prefix-Router-Forwarded";
  /** Header: how many executions were tried. */
  static final String ATTEMPTS = "X-Prefix-Router-Attempts";
  /** Header: prompt tokens the serving engine had cached (absent when it does not report it). */
  static final String CACHED_TOKENS = "X-Prefix-Router-Cached-Tokens";
  /** Header: the sampling seed the request ran with (the client's, or the one drawn for it). */
  static final String SEED = "X-Prefix-Router-Seed";
  /** The {@code owned_by} of the listed model. */
  static final String OWNER = "prefix-router";

  private OpenAiAnswers() {}

  /**
   * What every answer of one request shares.
   *
   * @param kind completions or chat
   * @param id the answer's {@code id}: {@code cmpl-} or {@code chatcmpl-} and the request's id
   * @param created the answer's {@code created}, epoch seconds, read once per request
   * @param model the answer's {@code model}
   * @param params the request's parameters: {@code max_tokens} for {@code finish_reason}, the
   *     stops the output is cut at
   * @param seed the request's seed
   * @param includeUsage whether a stream ends with a usage chunk
   * @param tokenizer gives the output's text; null: the engine's text
   * @param continuousUsage whether every chunk of a stream carries the usage so far (vLLM's
   *     {@code continuous_usage_stats}; only with {@code includeUsage})
   * @param promptTokens the prompt's tokens, for the usage so far
   */
  record Context(OpenAiRequest.Kind kind, String id, long created, String model,
      GenerationParams params, long seed, boolean includeUsage, PromptTokenizer tokenizer,
      boolean continuousUsage, int promptTokens) {

    boolean chat() {
      return kind == OpenAiRequest.Kind.CHAT;
    }

    int maxTokens() {
      return params.maxTokens();
    }

    /**
     * Whether the output's text is the tokenizer's, token by token ({@link
     * PromptTokenizer#textPerToken}): then the node knows which token a stop string ended in.
     */
    boolean textPerToken() {
      return tokenizer != null && tokenizer.textPerToken();
    }

    /** The text of one output token, for a tokenizer that gives text token by token. */
    String tokenText(int token) {
      return text(new int[] {token}, "");
    }

    /** The text of output tokens, as the tokenizer gives it. */
    String text(int[] tokens, String engineText) {
      if (tokenizer == null) {
        return engineText;
      }
      try {
        String t = tokenizer.outputText(tokens, engineText);
        return t == null ? "" : t;
      } catch (RuntimeException e) { // answered as an output JSON cannot carry (500)
        throw new IllegalArgumentException("the tokenizer gave no text for the output: " + e, e);
      }
    }
  }

  /** The answer's {@code id}: {@code cmpl-} or {@code chatcmpl-} and the request's id. */
  static String answerId(OpenAiRequest.Kind kind, String requestId) {
    return (kind == OpenAiRequest.Kind.CHAT ? "chatcmpl-" : "cmpl-") + requestId;
  }

  /**
   * What the client gets of an output: its tokens and text up to the first stop.
   *
   * @param tokens the output token ids, through the token that ended it at a stop
   * @param text the output's text, before the first stop string
   * @param stopReason the stop string or stop token id (an {@code Integer}) that ended the
   *     output, or null when none did
   */
  record Output(int[] tokens, String text, Object stopReason) {

    /**
     * {@code "stop"} when a stop ended the output, {@code "length"} when it has
     * {@code max_tokens} tokens, else {@code "stop"} (the engine ended it).
     */
    String finishReason(Context c) {
      return stopReason == null && tokens.length >= c.maxTokens() ? "length" : "stop";
    }
  }

  /**
   * The output the client gets of a whole result, cut at its first stop (vLLM's meaning, see
   * {@link GenerationParams}), whether the engine stopped there or not: the tokens end at the
   * first stop token id, whose text is not shown (vLLM keeps the token, not its text); the text
   * ends before the first stop string to be complete, and the tokens then end at the token it
   * was completed in. A text that is not the tokenizer's token by token (an engine's own text)
   * is cut at stop strings only, and its tokens only at stop token ids (which token a char came
   * from is not known); an engine that gives text honours both itself (see
   * {@code docs/engines.md}).
   */
  static Output output(Context c, int[] tokens, String engineText) {
    GenerationParams p = c.params();
    if (!p.hasStops()) {
      return new Output(tokens, c.text(tokens, engineText), null);
    }
    int[] kept = StopMatcher.throughFirstStopToken(tokens, p);
    // only the first stop token can be the last token kept
    Object reason = kept.length > 0 && p.isStopToken(kept[kept.length - 1])
        ? kept[kept.length - 1] : null;
    StopMatcher m = new StopMatcher(p.stop());
    if (!c.textPerToken()) {
      String text = c.text(kept, engineText);
      String cut = m.push(text);
      return m.stopped() ? new Output(kept, cut, m.matched())
          : new Output(kept, text, reason);
    }
    // a stop token's text is not shown, nor looked at for stop strings
    int shown = reason != null ? kept.length - 1 : kept.length;
    StringBuilder text = new StringBuilder();
    for (int i = 0; i < shown; i++) {
      text.append(m.push(c.tokenText(kept[i])));
      if (m.stopped()) {
        return new Output(Arrays.copyOf(kept, i + 1), text.toString(), m.matched());
      }
    }
    return new Output(kept, text.append(m.finish()).toString(), reason);
  }

  /** The output the client gets of a response ({@link #output(Context, int[], String)}). */
  static Output output(Context c, InferenceResponse r) {
    return output(c, r.result().outputTokens(), r.result().text());
  }

  /**
   * A whole (not streamed) answer.
   *
   * @throws IllegalArgumentException if the tokenizer cannot give the output's text
   */
  static Map<String, Object> answer(Context c, InferenceResponse r) {
    Output out = output(c, r);
    String text = out.text();
    Map<String, Object> choice = new LinkedHashMap<>();
    choice.put("index", 0);
    if (c.chat()) {
      Map<String, Object> message = new LinkedHashMap<>();
      message.put("role", "assistant");
      message.put("content", text);
      choice.put("message", message);
    } else {
      choice.put("text", text);
    }
    choice.put("logprobs", Json.NULL);
    choice.put("finish_reason", out.finishReason(c));
    choice.put("stop_reason", out.stopReason() == null ? Json.NULL : out.stopReason());
    Map<String, Object> m = head(c, c.chat() ? "chat.completion" : "text_completion");
    m.put("choices", List.of(choice));
    m.put("usage", usage(r, out.tokens().length));
    m.put("prefix_router", routing(c, r));
    return m;
  }

  private static Map<String, Object> head(Context c, String object) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("id", c.id());
    m.put("object", object);
    m.put("created", c.created());
    m.put("model", c.model());
    return m;
  }

  /**
   * {@code {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
   * {"cached_tokens"}}}, the details only when the engine reports its cached tokens.
   *
   * @param completion the output tokens the client gets ({@link Output#tokens})
   */
  static Map<String, Object> usage(InferenceResponse r, int completion) {
    Map<String, Object> m = usage(r.result().promptTokens(), completion);
    if (r.cachedPromptTokens() >= 0) {
      m.put("prompt_tokens_details", Map.of("cached_tokens", r.cachedPromptTokens()));
    }
    return m;
  }

  /** {@code {"prompt_tokens", "completion_tokens", "total_tokens"}}. */
  private static Map<String, Object> usage(int prompt, int completion) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("prompt_tokens", prompt);
    m.put("completion_tokens", completion);
    m.put("total_tokens", (long) prompt + completion);
    return m;
  }

  /**
   * The routing facts: {@code {"request_id", "served_by", "forwarded", "attempts", "fallback",
   * "reason", "seed"}} (as in {@code /v1/route/completions}' answer, and the seed the request
   * ran with).
   */
  static Map<String, Object> routing(Context c, InferenceResponse r) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("request_id", r.requestId());
    m.put("served_by", r.servedBy());
    m.put("forwarded", r.forwarded());
    m.put("attempts", r.attempts());
    m.put("fallback", r.fallbackCause() == FallbackCause.NONE ? Json.NULL
        : r.fallbackCause().name());
    m.put("reason", r.decision().reason().name());
    m.put("seed", c.seed());
    return m;
  }

  /** Adds the routing headers of a whole answer (a value a header cannot carry is left out). */
  static void headers(Headers h, Context c, InferenceResponse r) {
    if (headerSafe(r.servedBy())) {
      h.add(SERVED_BY, r.servedBy());
    }
    h.add(FORWARDED, String.valueOf(r.forwarded()));
    h.add(ATTEMPTS, String.valueOf(r.attempts()));
    if (r.cachedPromptTokens() >= 0) {
      h.add(CACHED_TOKENS, String.valueOf(r.cachedPromptTokens()));
    }
    h.add(SEED, String.valueOf(c.seed()));
  }

  private static boolean headerSafe(String v) {
    for (int i = 0; i < v.length(); i++) {
      char ch = v.charAt(i);
      if (ch < 0x20 || ch > 0x7e) {
        return false;
      }
    }
    return !v.isEmpty();
  }

  /**
   * An error in OpenAI's shape: {@code {"error": {"message", "type", "param", "code"}}}.
   *
   * @param param the key at fault, or null
   * @param code the kind of failure, or null
   */
  static Map<String, Object> error(int status, String message, String param, String code) {
    Map<String, Object> e = new LinkedHashMap<>();
    e.put("message", ClientEndpoint.safeText(String.valueOf(message)));
    e.put("type", errorType(status));
    e.put("param", param == null ? Json.NULL : param);
    e.put("code", code == null ? Json.NULL : code);
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("error", e);
    return m;
  }

  /**
   * OpenAI's {@code type} of an error of this status: {@code invalid_request_error} for a 4xx,
   * {@code overloaded_error} for a 503, {@code server_error} for another 5xx.
   */
  static String errorType(int status) {
    if (status < 500) {
      return "invalid_request_error";
    }
    return status == 503 ? "overloaded_error" : "server_error";
  }

  /** The error body of a failed request; its {@code code} is the endpoint's failure type. */
  static Map<String, Object> failure(Throwable failure) {
    return error(ClientEndpoint.failureStatus(failure), failure.getMessage(), null,
        ClientEndpoint.failureType(failure));
  }

  /**
   * {@code GET /v1/models}: the base model, or an empty list when the node has none.
   *
   * @param created the model's {@code created}: when the endpoint started
   */
  static Map<String, Object> models(String baseModel, long created) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("object", "list");
    m.put("data", baseModel == null || baseModel.isEmpty() ? List.of()
        : List.of(model(baseModel, created)));
    return m;
  }

  /**
   * One model of {@code GET /v1/models}, as {@code GET /v1/models/{id}} answers it.
   *
   * @param id the model's id
   * @param created the model's {@code created}: when the endpoint started
   */
  static Map<String, Object> model(String id, long created) {
    Map<String, Object> model = new LinkedHashMap<>();
    model.put("id", id);
    model.put("object", "model");
    model.put("created", created);
    model.put("owned_by", OWNER);
    return model;
  }

  /**
   * The chunks of a streamed answer, as OpenAI streams them: one chunk per piece of output
   * ({@code choices[0].text}, or {@code choices[0].delta.content} with {@code "role":
   * "assistant"} in the first delta only; a piece whose text is empty is not sent), then a
   * chunk with the {@code finish_reason} (and any output no piece carried) and the
   * {@code prefix_router} object, then, with {@code include_usage}, a chunk with
   * {@code "choices": []} and the {@code usage} ({@code "usage": null} in the others; with
   * vLLM's {@code continuous_usage_stats}, the usage so far: the prompt's tokens and the output
   * tokens the chunks so far stand for, counted as {@link #output} counts them, and in the
   * finishing chunk the whole output's), then {@code [DONE]}. A failure after the first chunk is
   * {@code data: {"error": {...}}}.
   */
  static final class ChunkFormat implements StreamedAnswer.Format {
    private final Context c;
    private final StopMatcher stops;
    private boolean roleSent;
    /** A stop ended the output the client sees: later pieces show nothing. */
    private boolean ended;
    /** Output tokens the pieces so far stand for, as {@link #output} counts them. */
    private int tokensSeen;
    /** A stop token id ended the output's tokens: later pieces add none. */
    private boolean tokensEnded;

    ChunkFormat(Context c) {
      this.c = c;
      this.stops = new StopMatcher(c.params().stop());
    }

    @Override
    public byte[] piece(int[] tokens, String text) {
      String t = visible(tokens, text);
      if (t.isEmpty()) {
        return new byte[0];
      }
      return StreamedAnswer.event(chunk(t, null));
    }

    /**
     * The text of a piece the client may see now, as {@link #output} cuts the whole output: up
     * to the first stop, less a tail that could be the start of a stop string (held back until
     * the next pieces show whether it is one).
     */
    private String visible(int[] tokens, String text) {
      if (ended) {
        return "";
      }
      GenerationParams p = c.params();
      if (!c.textPerToken() || !p.hasStops()) {
        if (!tokensEnded) { // the tokens end at the first stop token id only
          int[] kept = StopMatcher.throughFirstStopToken(tokens, p);
          tokensSeen += kept.length;
          tokensEnded = kept.length > 0 && p.isStopToken(kept[kept.length - 1]);
        }
        String t = c.text(tokens, text);
        String out = stops.push(t);
        ended = stops.stopped();
        return out;
      }
      StringBuilder out = new StringBuilder();
      for (int token : tokens) {
        tokensSeen++;
        if (p.isStopToken(token)) { // the output ends with it; its text is not shown
          ended = true;
          return out.append(stops.finish()).toString();
        }
        out.append(stops.push(c.tokenText(token)));
        if (stops.stopped()) {
          ended = true;
          return out.toString();
        }
      }
      return out.toString();
    }

    @Override
    public byte[] end(InferenceResponse response, int[] tokens, String text) {
      String t = tokens.length == 0 && text.isEmpty() ? "" : visible(tokens, text);
      if (!ended) {
        t += stops.finish();
      }
      Output whole = output(c, response);
      Map<String, Object> last = chunk(t, whole.finishReason(c));
      if (c.continuousUsage()) {
        last.put("usage", usage(response, whole.tokens().length));
      }
      Map<String, Object> choice = choice(last);
      choice.put("stop_reason", whole.stopReason() == null ? Json.NULL : whole.stopReason());
      last.put("prefix_router", routing(c, response));
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      out.writeBytes(StreamedAnswer.event(last));
      if (c.includeUsage()) {
        Map<String, Object> usage = head(c, object());
        usage.put("choices", List.of());
        usage.put("usage", usage(response, whole.tokens().length));
        out.writeBytes(StreamedAnswer.event(usage));
      }
      out.writeBytes(StreamedAnswer.DONE);
      return out.toByteArray();
    }

    @Override
    public byte[] error(Throwable failure) {
      return StreamedAnswer.event(failure(failure));
    }

    private String object() {
      return c.chat() ? "chat.completion.chunk" : "text_completion";
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> choice(Map<String, Object> chunk) {
      return (Map<String, Object>) ((List<?>) chunk.get("choices")).get(0);
    }

    private Map<String, Object> chunk(String text, String finishReason) {
      Map<String, Object> choice = new LinkedHashMap<>();
      choice.put("index", 0);
      if (c.chat()) {
        Map<String, Object> delta = new LinkedHashMap<>();
        if (!roleSent) {
          delta.put("role", "assistant");
          roleSent = true;
        }
        if (!text.isEmpty()) {
          delta.put("content", text);
        }
        choice.put("delta", delta);
      } else {
        choice.put("text", text);
      }
      choice.put("logprobs", Json.NULL);
      choice.put("finish_reason", finishReason == null ? Json.NULL : finishReason);
      Map<String, Object> m = head(c, object());
      m.put("choices", List.of(choice));
      if (c.continuousUsage()) {
        m.put("usage", usage(c.promptTokens(), tokensSeen));
      } else if (c.includeUsage()) {
        m.put("usage", Json.NULL);
      }
      return m;
    }
  }
}
