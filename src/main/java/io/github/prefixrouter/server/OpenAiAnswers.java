package io.github.prefixrouter.server;

import com.sun.net.httpserver.Headers;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.internal.json.Json;
import java.io.ByteArrayOutputStream;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The answers of the client endpoint's OpenAI-compatible routes, in OpenAI's shapes: a whole
 * completion ({@code text_completion}) or chat completion ({@code chat.completion}), the chunks
 * of a streamed one ({@link ChunkFormat}), the model list and errors.
 *
 * <p>Output text is {@link PromptTokenizer#outputText} of the output tokens and the engine's
 * text (the engine's text when the node has no tokenizer). {@code finish_reason} is
 * {@code "length"} when the output has {@code max_tokens} tokens, else {@code "stop"}. The
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
   * @param maxTokens the request's {@code max_tokens}, for {@code finish_reason}
   * @param seed the request's seed
   * @param includeUsage whether a stream ends with a usage chunk
   * @param tokenizer gives the output's text; null: the engine's text
   */
  record Context(OpenAiRequest.Kind kind, String id, long created, String model, int maxTokens,
      long seed, boolean includeUsage, PromptTokenizer tokenizer) {

    boolean chat() {
      return kind == OpenAiRequest.Kind.CHAT;
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

  /** {@code "length"} when the output has {@code max_tokens} tokens, else {@code "stop"}. */
  static String finishReason(Context c, InferenceResponse r) {
    return r.result().outputTokens().length >= c.maxTokens() ? "length" : "stop";
  }

  /**
   * A whole (not streamed) answer.
   *
   * @throws IllegalArgumentException if the tokenizer cannot give the output's text
   */
  static Map<String, Object> answer(Context c, InferenceResponse r) {
    String text = c.text(r.result().outputTokens(), r.result().text());
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
    choice.put("finish_reason", finishReason(c, r));
    Map<String, Object> m = head(c, c.chat() ? "chat.completion" : "text_completion");
    m.put("choices", List.of(choice));
    m.put("usage", usage(r));
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
   */
  static Map<String, Object> usage(InferenceResponse r) {
    int prompt = r.result().promptTokens();
    int completion = r.result().outputTokens().length;
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("prompt_tokens", prompt);
    m.put("completion_tokens", completion);
    m.put("total_tokens", (long) prompt + completion);
    if (r.cachedPromptTokens() >= 0) {
      m.put("prompt_tokens_details", Map.of("cached_tokens", r.cachedPromptTokens()));
    }
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
    if (baseModel == null || baseModel.isEmpty()) {
      m.put("data", List.of());
    } else {
      Map<String, Object> model = new LinkedHashMap<>();
      model.put("id", baseModel);
      model.put("object", "model");
      model.put("created", created);
      model.put("owned_by", OWNER);
      m.put("data", List.of(model));
    }
    return m;
  }

  /**
   * The chunks of a streamed answer, as OpenAI streams them: one chunk per piece of output
   * ({@code choices[0].text}, or {@code choices[0].delta.content} with {@code "role":
   * "assistant"} in the first delta only; a piece whose text is empty is not sent), then a
   * chunk with the {@code finish_reason} (and any output no piece carried) and the
   * {@code prefix_router} object, then, with {@code include_usage}, a chunk with
   * {@code "choices": []} and the {@code usage} ({@code "usage": null} in the others), then
   * {@code [DONE]}. A failure after the first chunk is {@code data: {"error": {...}}}.
   */
  static final class ChunkFormat implements StreamedAnswer.Format {
    private final Context c;
    private boolean roleSent;

    ChunkFormat(Context c) {
      this.c = c;
    }

    @Override
    public byte[] piece(int[] tokens, String text) {
      String t = c.text(tokens, text);
      if (t.isEmpty()) {
        return new byte[0];
      }
      return StreamedAnswer.event(chunk(t, null));
    }

    @Override
    public byte[] end(InferenceResponse response, int[] tokens, String text) {
      String t = tokens.length == 0 && text.isEmpty() ? "" : c.text(tokens, text);
      Map<String, Object> last = chunk(t, finishReason(c, response));
      last.put("prefix_router", routing(c, response));
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      out.writeBytes(StreamedAnswer.event(last));
      if (c.includeUsage()) {
        Map<String, Object> usage = head(c, object());
        usage.put("choices", List.of());
        usage.put("usage", usage(response));
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
      if (c.includeUsage()) {
        m.put("usage", Json.NULL);
      }
      return m;
    }
  }
}
