package io.github.prefixrouter.server;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.internal.json.Json;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Predicate;

/**
 * A request of the client endpoint's OpenAI-compatible routes ({@code POST /v1/completions},
 * {@code POST /v1/chat/completions}), parsed and checked before anything is tokenized or
 * submitted.
 *
 * <p>The keys a request may have are documented constants: the ones this node honours
 * ({@link #COMPLETION_KEYS}, {@link #CHAT_KEYS}), and OpenAI options it cannot honour but
 * accepts with their default, no-op value ({@link #COMPLETION_NO_OPS}, {@link #CHAT_NO_OPS}:
 * {@code "presence_penalty": 0}, {@code "include_stop_str_in_output": false}, ...), since
 * clients and libraries send
 * those. Any other value of such an option is refused with a 400 naming the key and saying it
 * is not supported; a key in neither set is refused with a 400 naming it. A JSON {@code null}
 * stands for an absent key.
 *
 * <p>Defaults are OpenAI's and vLLM's: {@code max_tokens} 16 for completions; for chat the room
 * left in the model's context ({@code maxModelLen} minus the prompt's length, when the
 * tokenizer reports the context), else {@link #DEFAULT_CHAT_MAX_TOKENS}, at most
 * {@link GenerationParams#MAX_TOKENS_LIMIT}; {@code temperature} 1, {@code top_p} 1. A default
 * is never more than the room left; a prompt that leaves no room is refused.
 *
 * <p>Immutable once parsed.
 */
final class OpenAiRequest {

  /** Output tokens of a chat request without {@code max_tokens} whose context is unknown. */
  static final int DEFAULT_CHAT_MAX_TOKENS = 1024;

  /** Output tokens of a completions request without {@code max_tokens}, as OpenAI's. */
  static final int DEFAULT_COMPLETION_MAX_TOKENS = 16;

  /** The keys of {@code /v1/completions} this node honours. */
  static final Set<String> COMPLETION_KEYS = Set.of("model", "prompt", "max_tokens",
      "temperature", "top_p", "seed", "stream", "stream_options", "user", "n", "cache_salt",
      "stop", "stop_token_ids");

  /** The keys of {@code /v1/chat/completions} this node honours. */
  static final Set<String> CHAT_KEYS = Set.of("model", "messages", "max_tokens",
      "max_completion_tokens", "temperature", "top_p", "seed", "stream", "stream_options",
      "user", "n", "cache_salt", "chat_template_kwargs", "stop", "stop_token_ids",
      "safety_identifier", "prompt_cache_key");

  /**
   * An OpenAI option this node cannot honour: accepted only with a value that asks for nothing
   * (its default, or an empty one).
   *
   * @param accepted the accepted values, for the refusal's message
   * @param noOp true for an accepted value
   */
  record NoOp(String accepted, Predicate<Object> noOp) {}

  private static final NoOp ZERO = new NoOp("null or 0", v -> isNull(v) || isZero(v));
  private static final NoOp EMPTY_LIST = new NoOp("null or []",
      v -> isNull(v) || (v instanceof List<?> l && l.isEmpty()));
  private static final NoOp EMPTY_OBJECT = new NoOp("null or {}",
      v -> isNull(v) || (v instanceof Map<?, ?> m && m.isEmpty()));
  private static final NoOp FALSE = new NoOp("null or false",
      v -> isNull(v) || Boolean.FALSE.equals(v));
  private static final NoOp NULL_ONLY = new NoOp("null", OpenAiRequest::isNull);
  /** vLLM's {@code repetition_penalty}: 1 is none. */
  private static final NoOp ONE = new NoOp("null or 1", v -> isNull(v) || isUnit(v));
  /** vLLM's {@code top_k}: -1 and 0 both mean every token. */
  private static final NoOp NO_TOP_K = new NoOp("null, -1 or 0", v -> isNull(v) || isZero(v)
      || (v instanceof Number n && n.doubleValue() == -1.0));

  /**
   * vLLM's sampling options, on both routes: its own serving benchmark sends them with these
   * values.
   */
  private static final Map<String, NoOp> VLLM_SAMPLING_NO_OPS = Map.of(
      "repetition_penalty", ONE,
      "ignore_eos", FALSE,
      "top_k", NO_TOP_K,
      "min_p", ZERO,
      "min_tokens", ZERO);

  /** Options of {@code /v1/completions} accepted with a no-op value only. */
  static final Map<String, NoOp> COMPLETION_NO_OPS = withVllmSampling(
      Map.entry("presence_penalty", ZERO),
      Map.entry("frequency_penalty", ZERO),
      Map.entry("include_stop_str_in_output", FALSE),
      Map.entry("logit_bias", EMPTY_OBJECT),
      Map.entry("logprobs", NULL_ONLY),
      Map.entry("echo", FALSE),
      Map.entry("best_of", new NoOp("null or 1", v -> isNull(v) || isOne(v))),
      Map.entry("suffix", new NoOp("null or \"\"", v -> isNull(v) || "".equals(v))));

  /** Options of {@code /v1/chat/completions} accepted with a no-op value only. */
  static final Map<String, NoOp> CHAT_NO_OPS = withVllmSampling(
      Map.entry("presence_penalty", ZERO),
      Map.entry("frequency_penalty", ZERO),
      Map.entry("include_stop_str_in_output", FALSE),
      Map.entry("logit_bias", EMPTY_OBJECT),
      Map.entry("logprobs", FALSE),
      Map.entry("top_logprobs", ZERO),
      Map.entry("tools", EMPTY_LIST),
      Map.entry("functions", EMPTY_LIST),
      Map.entry("tool_choice", new NoOp("null or \"none\"", v -> isNull(v) || "none".equals(v))),
      Map.entry("function_call",
          new NoOp("null or \"none\"", v -> isNull(v) || "none".equals(v))),
      // without tools, whether they may be called in parallel asks for nothing
      Map.entry("parallel_tool_calls", new NoOp("null, true or false",
          v -> isNull(v) || v instanceof Boolean)),
      Map.entry("response_format", new NoOp("null or {\"type\": \"text\"}",
          v -> isNull(v) || Map.of("type", "text").equals(v))),
      Map.entry("store", FALSE),
      Map.entry("metadata", EMPTY_OBJECT),
      Map.entry("service_tier", new NoOp("null, \"auto\" or \"default\"",
          v -> isNull(v) || "auto".equals(v) || "default".equals(v))),
      Map.entry("modalities", new NoOp("null or [\"text\"]",
          v -> isNull(v) || List.of("text").equals(v))),
      // OpenAI's newer options: a client that passes on an unset one sends it as null
      Map.entry("reasoning_effort", NULL_ONLY),
      Map.entry("verbosity", NULL_ONLY),
      Map.entry("prediction", NULL_ONLY),
      Map.entry("audio", NULL_ONLY),
      Map.entry("web_search_options", NULL_ONLY));

  /** The keys a chat message may have. */
  static final Set<String> MESSAGE_KEYS = Set.of("role", "content", "name");

  /**
   * Keys of an answer's message as the openai clients give it back, accepted only as
   * {@code null} (absent): the Python client's {@code model_dump()} of a message has OpenAI's
   * {@code tool_calls}, {@code function_call}, {@code refusal}, {@code audio} and
   * {@code annotations}, all {@code null}, and the clients' parsing and streaming helpers add
   * {@code parsed} (the Node client's {@code chat.completions.stream(...).finalMessage()} has
   * {@code "refusal": null, "parsed": null}), so a conversation that sends answers back that way
   * carries them.
   */
  static final Set<String> MESSAGE_NULL_KEYS = Set.of("tool_calls", "function_call", "refusal",
      "audio", "annotations", "parsed");

  /** Which route. */
  enum Kind {
    /** {@code /v1/completions}. */
    COMPLETION,
    /** {@code /v1/chat/completions}. */
    CHAT
  }

  final Kind kind;
  /**
   * The model the tokenizer is asked for, and the answer's {@code model}: the client's, else
   * the base model's, else "".
   */
  final String model;
  /** The cache scope: the adapter {@code model} names (none for the base model), the salt. */
  final CacheScope scope;
  /** A completion prompt's text, or null. */
  final String promptText;
  /** A completion prompt of token ids, or null. */
  final int[] promptIds;
  /** A chat conversation, or null. */
  final List<Map<String, Object>> messages;
  /** The chat template's extra arguments (empty for none). */
  final Map<String, Object> chatTemplateKwargs;
  /** The client's {@code max_tokens} (or {@code max_completion_tokens}), or null. */
  final Integer maxTokens;
  /** The key {@link #maxTokens} came in. */
  final String maxTokensKey;
  final double temperature;
  final double topP;
  /** The client's seed, or null. */
  final Long seed;
  final boolean stream;
  final boolean includeUsage;
  /**
   * vLLM's {@code stream_options.continuous_usage_stats}: with {@link #includeUsage}, every
   * chunk carries the usage so far.
   */
  final boolean continuousUsage;
  /** The stop strings ({@code "stop"}: a string or an array of them), empty for none. */
  final List<String> stop;
  /** The stop token ids ({@code "stop_token_ids"}), empty for none. */
  final List<Integer> stopTokenIds;

  private OpenAiRequest(Kind kind, String model, CacheScope scope, String promptText,
      int[] promptIds, List<Map<String, Object>> messages, Map<String, Object> chatTemplateKwargs,
      Integer maxTokens, String maxTokensKey, double temperature, double topP, Long seed,
      boolean stream, boolean includeUsage, boolean continuousUsage, List<String> stop,
      List<Integer> stopTokenIds) {
    this.continuousUsage = continuousUsage;
    this.stop = stop;
    this.stopTokenIds = stopTokenIds;
    this.kind = kind;
    this.model = model;
    this.scope = scope;
    this.promptText = promptText;
    this.promptIds = promptIds;
    this.messages = messages;
    this.chatTemplateKwargs = chatTemplateKwargs;
    this.maxTokens = maxTokens;
    this.maxTokensKey = maxTokensKey;
    this.temperature = temperature;
    this.topP = topP;
    this.seed = seed;
    this.stream = stream;
    this.includeUsage = includeUsage;
  }

  /** True unless the prompt is token ids, which need no tokenizer. */
  boolean needsTokenizer() {
    return promptIds == null;
  }

  /** The parameter the prompt is in: {@code prompt} or {@code messages}. */
  String promptParam() {
    return kind == Kind.CHAT ? "messages" : "prompt";
  }

  /**
   * A request refused as invalid (400): the message says what, {@code param} names the key.
   */
  static final class Invalid extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;
    private final String param;
    private final String code;

    Invalid(String param, String code, String message) {
      super(message);
      this.param = param;
      this.code = code;
    }

    Invalid(String param, String message) {
      this(param, "invalid_value", message);
    }

    /** The key at fault, or null. */
    String param() {
      return param;
    }

    /** OpenAI's {@code code} of the error. */
    String code() {
      return code;
    }
  }

  /**
   * Parses and checks a request body.
   *
   * @param body the body, a parsed JSON object
   * @param kind which route
   * @param baseModel the node's base model, or null
   * @throws Invalid if the request is malformed, has an unknown key, or asks for what this
   *     node does not support
   */
  static OpenAiRequest parse(Map<?, ?> body, Kind kind, String baseModel) {
    Set<String> keys = kind == Kind.CHAT ? CHAT_KEYS : COMPLETION_KEYS;
    Map<String, NoOp> noOps = kind == Kind.CHAT ? CHAT_NO_OPS : COMPLETION_NO_OPS;
    Map<String, Object> m = new LinkedHashMap<>();
    for (Map.Entry<?, ?> e : body.entrySet()) {
      String key = (String) e.getKey();
      Object v = e.getValue();
      NoOp noOp = noOps.get(key);
      if (noOp != null) {
        if (!noOp.noOp().test(v)) {
          throw new Invalid(key, "unsupported_parameter", "\"" + key + "\" is not supported by "
              + "this node: it cannot honour it; only " + noOp.accepted() + " (no effect) is "
              + "accepted, was " + shown(v));
        }
      } else if (!keys.contains(key)) {
        TreeSet<String> all = new TreeSet<>(keys);
        all.addAll(noOps.keySet());
        String shownKey = shortened(key);
        throw new Invalid(shownKey, "unknown_parameter", "unknown key \"" + shownKey
            + "\"; the keys are " + all);
      } else if (!isNull(v)) {
        m.put(key, v);
      }
    }
    if (m.containsKey("n") && !isOne(m.get("n"))) {
      throw new Invalid("n", "unsupported_parameter",
          "\"n\" other than 1 is not supported by this node: it gives one choice per request, was "
              + shown(m.get("n")));
    }
    String clientModel = m.containsKey("model") ? string(m, "model") : "";
    String model = !clientModel.isEmpty() ? clientModel : baseModel != null ? baseModel : "";
    String salt = m.containsKey("cache_salt") ? string(m, "cache_salt") : "";
    CacheScope scope;
    try {
      scope = CacheScope.of(model.equals(baseModel) ? "" : model, salt);
    } catch (IllegalArgumentException e) {
      String param = String.valueOf(e.getMessage()).startsWith("cache salt") ? "cache_salt"
          : "model";
      throw new Invalid(param, "invalid " + param + ": " + e.getMessage());
    }
    String promptText = null;
    int[] promptIds = null;
    List<Map<String, Object>> messages = null;
    Map<String, Object> kwargs = Map.of();
    Integer maxTokens = null;
    String maxKey = "max_tokens";
    if (kind == Kind.CHAT) {
      if (!m.containsKey("messages")) {
        throw new Invalid("messages", "\"messages\" is required");
      }
      messages = messages(m.get("messages"));
      if (m.containsKey("chat_template_kwargs")) {
        if (!(m.get("chat_template_kwargs") instanceof Map<?, ?> k)) {
          throw new Invalid("chat_template_kwargs", "chat_template_kwargs must be an object");
        }
        kwargs = stringKeyed(k);
      }
      if (m.containsKey("max_completion_tokens")) {
        maxTokens = integer(m, "max_completion_tokens");
        maxKey = "max_completion_tokens";
      } else if (m.containsKey("max_tokens")) {
        maxTokens = integer(m, "max_tokens");
      }
    } else {
      if (!m.containsKey("prompt")) {
        throw new Invalid("prompt", "\"prompt\" is required");
      }
      Object p = m.get("prompt");
      if (p instanceof List<?> l && !l.isEmpty()
          && (l.get(0) instanceof String || l.get(0) instanceof List<?>)) {
        if (l.size() != 1) {
          throw new Invalid("prompt", "unsupported_parameter", "a batch of " + l.size()
              + " prompts is not supported by this node: send one prompt per request");
        }
        p = l.get(0);
      }
      if (p instanceof String s) {
        promptText = s;
      } else if (p instanceof List<?> l) {
        promptIds = tokenIds(l);
      } else {
        throw new Invalid("prompt", "prompt must be a string or an array of token ids");
      }
      if (m.containsKey("max_tokens")) {
        maxTokens = integer(m, "max_tokens");
      }
    }
    double temperature = m.containsKey("temperature") ? number(m, "temperature") : 1.0;
    double topP = m.containsKey("top_p") ? number(m, "top_p") : 1.0;
    Long seed = null;
    if (m.containsKey("seed")) {
      seed = exactInteger(m.get("seed"));
      if (seed == null) {
        throw new Invalid("seed", "seed must be an integer, was " + shown(m.get("seed")));
      }
    }
    try {
      params(maxTokens == null ? 1 : maxTokens, temperature, topP, 0L); // checks the ranges
    } catch (Invalid e) {
      if (!"max_tokens".equals(e.param()) || "max_tokens".equals(maxKey)) {
        throw e;
      }
      throw new Invalid(maxKey, e.getMessage().replace("max_tokens", maxKey));
    }
    boolean stream = false;
    if (m.containsKey("stream")) {
      if (!(m.get("stream") instanceof Boolean b)) {
        throw new Invalid("stream", "stream must be true or false");
      }
      stream = b;
    }
    boolean includeUsage = false;
    boolean continuousUsage = false;
    if (!stream && m.get("stream_options") instanceof Map<?, ?> none && none.isEmpty()) {
      // asks for nothing: vLLM accepts it without a stream too (it refuses only a non-empty one)
      m.remove("stream_options");
    }
    if (m.containsKey("stream_options")) {
      if (!stream) {
        throw new Invalid("stream_options", "stream_options is only allowed with \"stream\": true");
      }
      if (!(m.get("stream_options") instanceof Map<?, ?> o)) {
        throw new Invalid("stream_options", "stream_options must be an object");
      }
      for (Map.Entry<?, ?> e : o.entrySet()) {
        if ("include_obfuscation".equals(e.getKey())) {
          // OpenAI's padding of stream chunks against length side channels: none is added here,
          // so false (or null) asks for nothing
          if (!FALSE.noOp().test(e.getValue())) {
            throw new Invalid("stream_options", "unsupported_parameter",
                "stream_options.include_obfuscation is not supported by this node: it adds no "
                    + "obfuscation to chunks; only " + FALSE.accepted() + " (no effect) is "
                    + "accepted, was " + shown(e.getValue()));
          }
          continue;
        }
        boolean include = "include_usage".equals(e.getKey());
        if (!include && !"continuous_usage_stats".equals(e.getKey())) {
          throw new Invalid("stream_options", "unsupported_parameter", "stream_options."
              + shortened(String.valueOf(e.getKey()))
              + " is not supported by this node; only include_usage, continuous_usage_stats and "
              + "include_obfuscation (false) are");
        }
        if (e.getValue() instanceof Boolean b) {
          if (include) {
            includeUsage = b;
          } else {
            continuousUsage = b;
          }
        } else if (!isNull(e.getValue())) {
          throw new Invalid("stream_options", "stream_options." + e.getKey()
              + " must be true or false");
        }
      }
      continuousUsage &= includeUsage; // vLLM's: without include_usage, no usage at all
    }
    // who the end user is, and OpenAI's hint for grouping requests in its cache: neither changes
    // the answer; the routing finds shared prefixes by their tokens
    for (String ignored : List.of("user", "safety_identifier", "prompt_cache_key")) {
      if (m.containsKey(ignored)) {
        string(m, ignored); // accepted and ignored
      }
    }
    List<String> stop = stop(m.get("stop"));
    List<Integer> stopTokenIds;
    try {
      stopTokenIds = ClientEndpoint.stopTokenIds(m.get("stop_token_ids"));
    } catch (IllegalArgumentException e) {
      throw new Invalid("stop_token_ids", ClientEndpoint.apiKeyNames(e.getMessage()));
    }
    return new OpenAiRequest(kind, model, scope, promptText, promptIds, messages, kwargs,
        maxTokens, maxKey, temperature, topP, seed, stream, includeUsage, continuousUsage, stop,
        stopTokenIds);
  }

  /**
   * The stop strings of {@code "stop"}: absent, null or {@code []} for none, a string, or an
   * array of strings; {@link GenerationParams} bounds their count and lengths.
   */
  private static List<String> stop(Object v) {
    List<String> stop;
    if (isNull(v)) {
      return List.of();
    } else if (v instanceof String s) {
      stop = List.of(s);
    } else if (v instanceof List<?> l) {
      stop = new ArrayList<>(l.size());
      for (Object o : l) {
        if (!(o instanceof String s)) {
          throw new Invalid("stop", "stop must be a string or an array of strings, had "
              + shown(o));
        }
        stop.add(s);
      }
    } else {
      throw new Invalid("stop", "stop must be a string or an array of strings, was " + shown(v));
    }
    try {
      return new GenerationParams(1, 1.0, 1.0, 0L, stop, List.of()).stop();
    } catch (IllegalArgumentException e) {
      throw new Invalid("stop", String.valueOf(e.getMessage()));
    }
  }

  /**
   * The request to submit, once the prompt is tokenized.
   *
   * @param id the request's id
   * @param tokens the prompt's token ids
   * @param maxModelLen the model's context length, or -1 when unknown
   * @param seed the seed: the client's, else one drawn for this request
   * @throws Invalid if the prompt leaves no room in the context, or {@code max_tokens} asks for
   *     more than the room left
   * @throws IllegalArgumentException if the tokens are not valid token ids (the tokenizer's
   *     fault, for a text prompt)
   */
  InferenceRequest toInferenceRequest(String id, int[] tokens, int maxModelLen, long seed) {
    String param = promptParam();
    if (tokens.length == 0) {
      throw new Invalid(param, "the prompt (" + param + ") has no tokens");
    }
    if (tokens.length > InferenceRequest.MAX_PROMPT_TOKENS) {
      throw new Invalid(param, "the prompt (" + param + ") has " + tokens.length
          + " tokens, more than the " + InferenceRequest.MAX_PROMPT_TOKENS + " this node accepts");
    }
    int room = GenerationParams.MAX_TOKENS_LIMIT;
    if (maxModelLen > 0) {
      if (tokens.length >= maxModelLen) {
        throw new Invalid(param, "the prompt (" + param + ") has " + tokens.length
            + " tokens and the model's context is " + maxModelLen
            + ": no room is left to generate");
      }
      room = Math.min(room, maxModelLen - tokens.length);
    }
    int n;
    if (maxTokens != null) {
      if (maxModelLen > 0 && maxTokens > room) {
        String key = maxTokensKey;
        throw new Invalid(key, key + " is "
            + maxTokens + " but the prompt has " + tokens.length + " tokens and the model's "
            + "context is " + maxModelLen + ": at most " + room + " tokens can be generated");
      }
      n = maxTokens;
    } else if (kind == Kind.CHAT) {
      n = maxModelLen > 0 ? room : Math.min(room, DEFAULT_CHAT_MAX_TOKENS);
    } else {
      n = Math.min(room, DEFAULT_COMPLETION_MAX_TOKENS);
    }
    return new InferenceRequest(id, tokens,
        params(n, temperature, topP, seed).withStops(stop, stopTokenIds), scope);
  }

  private static GenerationParams params(int maxTokens, double temperature, double topP,
      long seed) {
    try {
      return new GenerationParams(maxTokens, temperature, topP, seed);
    } catch (IllegalArgumentException e) {
      String msg = String.valueOf(e.getMessage());
      String param = msg.startsWith("maxTokens") ? "max_tokens" : msg.startsWith("topP") ? "top_p"
          : "temperature";
      throw new Invalid(param, ClientEndpoint.apiKeyNames(msg));
    }
  }

  /** Checks a conversation: objects with a role and text content. */
  private static List<Map<String, Object>> messages(Object v) {
    if (!(v instanceof List<?> l)) {
      throw new Invalid("messages", "messages must be an array of objects");
    }
    if (l.isEmpty()) {
      throw new Invalid("messages", "messages must have at least one message");
    }
    List<Map<String, Object>> out = new ArrayList<>(l.size());
    for (int i = 0; i < l.size(); i++) {
      String at = "messages[" + i + "]";
      if (!(l.get(i) instanceof Map<?, ?> msg)) {
        throw new Invalid("messages", at + " must be an object");
      }
      boolean dropNulls = false;
      for (Map.Entry<?, ?> e : msg.entrySet()) {
        Object key = e.getKey();
        boolean isNull = isNull(e.getValue());
        if (MESSAGE_NULL_KEYS.contains(key) && isNull) {
          dropNulls = true;
        } else if (!MESSAGE_KEYS.contains(key)) {
          throw new Invalid("messages", "unsupported_parameter", at + "."
              + shortened(String.valueOf(key)) + " is not supported by this node (a message has "
              + new TreeSet<>(MESSAGE_KEYS) + (MESSAGE_NULL_KEYS.contains(key)
                  ? "; " + key + " only as null" : "") + ")");
        } else if ("name".equals(key) && isNull) {
          dropNulls = true;
        }
      }
      if (dropNulls) { // a null stands for an absent key: the tokenizer never sees it
        Map<Object, Object> kept = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : msg.entrySet()) {
          if (!isNull(e.getValue()) || "content".equals(e.getKey())) {
            kept.put(e.getKey(), e.getValue());
          }
        }
        msg = kept;
      }
      if (!(msg.get("role") instanceof String role) || role.isEmpty()) {
        throw new Invalid("messages", at + ".role must be a non-empty string");
      }
      if (msg.containsKey("name") && !(msg.get("name") instanceof String)) {
        throw new Invalid("messages", at + ".name must be a string");
      }
      Object content = msg.get("content");
      if (content == null || content == Json.NULL) {
        if (!"assistant".equals(role)) {
          throw new Invalid("messages", at + ".content is missing; only an assistant message "
              + "may have no content");
        }
      } else if (content instanceof List<?> parts) {
        for (int j = 0; j < parts.size(); j++) {
          String pat = at + ".content[" + j + "]";
          if (!(parts.get(j) instanceof Map<?, ?> part)) {
            throw new Invalid("messages", pat + " must be an object");
          }
          Object type = part.get("type");
          if (!"text".equals(type)) {
            throw new Invalid("messages", "unsupported_parameter", pat + " has type "
                + (type instanceof String ? "\"" + type + "\"" : shown(type == null
                    ? Json.NULL : type))
                + ", which is not supported by this node: it takes text parts only "
                + "({\"type\": \"text\", \"text\": ...})");
          }
          for (Object key : part.keySet()) {
            if (!"type".equals(key) && !"text".equals(key)) {
              throw new Invalid("messages", "unsupported_parameter",
                  pat + "." + shortened(String.valueOf(key)) + " is not supported by this node");
            }
          }
          if (!(part.get("text") instanceof String)) {
            throw new Invalid("messages", pat + ".text must be a string");
          }
        }
      } else if (!(content instanceof String)) {
        throw new Invalid("messages", at + ".content must be a string, an array of text parts "
            + "or null");
      }
      out.add(stringKeyed(msg));
    }
    return Collections.unmodifiableList(out);
  }

  private static int[] tokenIds(List<?> l) {
    if (l.isEmpty()) {
      throw new Invalid("prompt", "the prompt has no tokens");
    }
    int[] ids = new int[l.size()];
    for (int i = 0; i < ids.length; i++) {
      if (!(l.get(i) instanceof Long t) || t < 0 || t >= InferenceRequest.MAX_TOKEN_ID) {
        throw new Invalid("prompt", "prompt[" + i + "] must be a token id in [0, "
            + InferenceRequest.MAX_TOKEN_ID + "), was " + shown(l.get(i)));
      }
      ids[i] = (int) (long) t;
    }
    return ids;
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> stringKeyed(Map<?, ?> m) {
    return (Map<String, Object>) m; // parsed JSON objects have string keys
  }

  private static String string(Map<String, Object> m, String key) {
    if (m.get(key) instanceof String s) {
      return s;
    }
    throw new Invalid(key, key + " must be a string, was " + shown(m.get(key)));
  }

  /**
   * A count of tokens: an integer, or a number with a fraction of zero ({@link #exactInteger});
   * one beyond int range is refused with the range of {@code max_tokens}.
   */
  private static int integer(Map<String, Object> m, String key) {
    Object v = m.get(key);
    Long l = exactInteger(v);
    if (l != null && l >= Integer.MIN_VALUE && l <= Integer.MAX_VALUE) {
      return (int) (long) l;
    }
    if (l != null || (v instanceof Double d && Double.isFinite(d) && d == Math.rint(d))) {
      throw new Invalid(key, key + " must be between 1 and " + GenerationParams.MAX_TOKENS_LIMIT
          + ", was " + shown(v));
    }
    throw new Invalid(key, key + " must be an integer, was " + shown(v));
  }

  /**
   * 2^53: a double holds every integer below it exactly, and no integer literal of more
   * magnitude is known to be the one the client wrote (2^53 + 1 reads as 2^53).
   */
  private static final double EXACT_DOUBLE_INTEGERS = 0x1p53;

  /**
   * {@code v} as an integer: a JSON integer, or a number with a fraction of zero ({@code 16.0},
   * {@code 1e1}), as clients that compute in floating point send them and vLLM's parser takes
   * them, when it is below 2^53 in magnitude (so that no digit the client wrote was lost in
   * reading it as a double); null for anything else.
   */
  static Long exactInteger(Object v) {
    if (v instanceof Long l) {
      return l;
    }
    if (v instanceof Double d && d == Math.rint(d) && Math.abs(d) < EXACT_DOUBLE_INTEGERS) {
      return (long) (double) d;
    }
    return null;
  }

  /** True for the integer 1 (written {@code 1}, {@code 1.0} or so). */
  private static boolean isOne(Object v) {
    Long l = exactInteger(v);
    return l != null && l == 1;
  }

  private static double number(Map<String, Object> m, String key) {
    if (m.get(key) instanceof Number n) {
      return n.doubleValue();
    }
    throw new Invalid(key, key + " must be a number, was " + shown(m.get(key)));
  }

  /** A route's no-op options and vLLM's sampling options, in one immutable map. */
  @SafeVarargs
  private static Map<String, NoOp> withVllmSampling(Map.Entry<String, NoOp>... own) {
    Map<String, NoOp> all = new java.util.HashMap<>(VLLM_SAMPLING_NO_OPS);
    for (Map.Entry<String, NoOp> e : own) {
      if (all.put(e.getKey(), e.getValue()) != null) {
        throw new IllegalStateException("no-op option " + e.getKey() + " given twice");
      }
    }
    return Map.copyOf(all);
  }

  /** Longest unknown key echoed in an error, in code points. */
  static final int MAX_KEY_SHOWN = 64;

  /**
   * A client's key as an error echoes it (its message and {@code param}): whole up to
   * {@link #MAX_KEY_SHOWN} code points, else their first ones and "...", so that an answer to a
   * body of long unknown keys is not as large as the body.
   */
  static String shortened(String key) {
    if (key.codePointCount(0, key.length()) <= MAX_KEY_SHOWN) {
      return key;
    }
    return key.substring(0, key.offsetByCodePoints(0, MAX_KEY_SHOWN)) + "...";
  }

  /** A value as JSON, for a message: cut after 200 characters. */
  private static String shown(Object v) {
    String s = Json.write(v);
    return s.length() <= 200 ? s : s.substring(0, 200) + "...";
  }

  private static boolean isNull(Object v) {
    return v == null || v == Json.NULL;
  }

  private static boolean isUnit(Object v) {
    return v instanceof Number n && n.doubleValue() == 1.0;
  }

  private static boolean isZero(Object v) {
    return v instanceof Number n && n.doubleValue() == 0.0;
  }
}
