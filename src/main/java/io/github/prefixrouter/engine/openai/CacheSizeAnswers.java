package io.github.prefixrouter.engine.openai;

import io.github.prefixrouter.internal.ShortText;
import io.github.prefixrouter.internal.json.AnswerHeap;
import io.github.prefixrouter.internal.json.Json;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Flow;

/**
 * Reads a model server's KV-cache size in tokens from what it publishes ({@link
 * OpenAiCompatibleEngine#cacheSize}): vLLM's Prometheus gauge {@code vllm:cache_config_info},
 * whose labels {@code block_size} and {@code num_gpu_blocks} multiply to it (one sample per
 * engine of the server, summed), and SGLang's {@code max_total_num_tokens} at the top of its
 * {@code /get_server_info}. Each reader gives a size of at least 1 and at most
 * {@link OpenAiCompatibleEngine#MAX_CACHE_SIZE_TOKENS}, or throws a {@link Refused} saying what
 * it found instead.
 */
final class CacheSizeAnswers {

  /** The metric name of vLLM's cache configuration. */
  static final String VLLM_METRIC = "vllm:cache_config_info";

  private CacheSizeAnswers() {}

  /** Why an answer gives no size; its message says what was found. */
  static final class Refused extends Exception {
    private static final long serialVersionUID = 1L;

    Refused(String message) {
      super(message, null, false, false);
    }
  }

  /**
   * The cache size in vLLM's Prometheus text: the sum, over the samples of
   * {@code vllm:cache_config_info} (one per engine), of {@code block_size} times
   * {@code num_gpu_blocks}.
   *
   * @param text the text; with {@code cut}, what follows its last line break is ignored (a line
   *     possibly cut short)
   * @param cut whether the text is only the first part of the answer
   * @return the size, and how it was read (the labels, or the samples summed)
   * @throws Refused if there is no sample, or one whose labels are malformed, missing or not a
   *     whole number from 1 up, or the size is above the bound
   */
  static OpenAiCompatibleEngine.CacheSize fromPrometheus(String text, boolean cut)
      throws Refused {
    String whole = cut ? text.substring(0, text.lastIndexOf('\n') + 1) : text;
    long sum = 0;
    int samples = 0;
    String how = "";
    for (String line : (Iterable<String>) whole.lines()::iterator) {
      String l = line.strip();
      if (!l.startsWith(VLLM_METRIC)) {
        continue;
      }
      int i = VLLM_METRIC.length();
      if (i < l.length() && l.charAt(i) != '{' && l.charAt(i) != ' ' && l.charAt(i) != '\t') {
        continue; // another metric whose name begins so
      }
      Map<String, String> labels = labels(l, i);
      long blockSize = wholeNumber(labels, "block_size");
      long blocks = wholeNumber(labels, "num_gpu_blocks");
      if (blockSize > OpenAiCompatibleEngine.MAX_CACHE_SIZE_TOKENS / blocks) {
        throw tooLarge(VLLM_METRIC + " block_size " + blockSize + " x num_gpu_blocks " + blocks);
      }
      sum += blockSize * blocks; // both at most the bound: no overflow
      samples++;
      how = "block_size " + blockSize + " x num_gpu_blocks " + blocks;
      if (sum > OpenAiCompatibleEngine.MAX_CACHE_SIZE_TOKENS) {
        throw tooLarge("the sum over " + samples + " samples of " + VLLM_METRIC);
      }
    }
    if (samples == 0) {
      throw new Refused("no " + VLLM_METRIC + (cut ? " in its first "
          + OpenAiCompatibleEngine.MAX_CACHE_SIZE_ANSWER_BYTES + " bytes" : ""));
    }
    return new OpenAiCompatibleEngine.CacheSize(sum, samples == 1 ? how
        : "the sum of block_size x num_gpu_blocks over " + samples + " samples, one per engine");
  }

  private static Refused tooLarge(String what) {
    return new Refused(what + " is above " + OpenAiCompatibleEngine.MAX_CACHE_SIZE_TOKENS
        + " tokens");
  }

  /** A label's value that is a whole number from 1 up, in ASCII digits. */
  private static long wholeNumber(Map<String, String> labels, String name) throws Refused {
    String v = labels.get(name);
    if (v == null) {
      throw new Refused(VLLM_METRIC + " has no label " + name);
    }
    long n = -1;
    if (!v.isEmpty() && v.length() <= 19 && v.chars().allMatch(c -> c >= '0' && c <= '9')) {
      n = Long.parseLong(v); // 19 digits fit in a long
    }
    if (n < 1) {
      throw new Refused(VLLM_METRIC + " label " + name + " is not a whole number from 1 up: \""
          + shown(v) + "\"");
    }
    return n;
  }

  /**
   * The labels of a Prometheus sample line from {@code i}, after its name: {@code {name="value",
   * ...}} (values with {@code \\}, {@code \"} and {@code \n} escapes), then the value.
   */
  private static Map<String, String> labels(String l, int i) throws Refused {
    Map<String, String> labels = new HashMap<>();
    i = blanks(l, i);
    if (i < l.length() && l.charAt(i) == '{') {
      i = blanks(l, i + 1);
      while (i < l.length() && l.charAt(i) != '}') {
        int nameStart = i;
        while (i < l.length() && (Character.isLetterOrDigit(l.charAt(i)) || l.charAt(i) == '_')
            && l.charAt(i) < 0x80) {
          i++;
        }
        String name = l.substring(nameStart, i);
        i = blanks(l, i);
        if (name.isEmpty() || i >= l.length() || l.charAt(i) != '=') {
          throw malformed();
        }
        i = blanks(l, i + 1);
        if (i >= l.length() || l.charAt(i) != '"') {
          throw malformed();
        }
        StringBuilder value = new StringBuilder();
        i++;
        while (i < l.length() && l.charAt(i) != '"') {
          char c = l.charAt(i++);
          if (c == '\\') {
            if (i >= l.length()) {
              throw malformed();
            }
            char e = l.charAt(i++);
            value.append(e == 'n' ? '\n' : e);
          } else {
            value.append(c);
          }
        }
        if (i >= l.length()) {
          throw malformed();
        }
        i = blanks(l, i + 1);
        if (labels.put(name, value.toString()) != null) {
          throw new Refused(VLLM_METRIC + " has the label " + shown(name) + " twice");
        }
        if (i < l.length() && l.charAt(i) == ',') {
          i = blanks(l, i + 1);
        } else if (i >= l.length() || l.charAt(i) != '}') {
          throw malformed();
        }
      }
      if (i >= l.length()) {
        throw malformed();
      }
      i++;
    }
    if (l.substring(i).isBlank()) {
      throw malformed(); // no value
    }
    return labels;
  }

  private static Refused malformed() {
    return new Refused("a malformed " + VLLM_METRIC + " line");
  }

  private static int blanks(String l, int i) {
    while (i < l.length() && (l.charAt(i) == ' ' || l.charAt(i) == '\t')) {
      i++;
    }
    return i;
  }

  /**
   * At most 40 characters of {@code s}, cut as {@link ShortText#prefix} cuts (never inside a
   * surrogate pair), control characters escaped.
   */
  private static String shown(String s) {
    String cut = ShortText.prefix(s, 40);
    StringBuilder b = new StringBuilder();
    for (int k = 0; k < cut.length(); k++) {
      char c = cut.charAt(k);
      b.append(c < 0x20 || c == 0x7f ? String.format("\\u%04x", (int) c) : String.valueOf(c));
    }
    return cut.length() < s.length() ? b + "..." : b.toString();
  }

  /**
   * The cache size in SGLang's {@code /get_server_info} answer: its top-level
   * {@code max_total_num_tokens}.
   *
   * @throws Refused if the answer is not a JSON object (an error page), has no such member, or
   *     one that is not a whole number from 1 up to the bound
   */
  static long fromServerInfo(String text) throws Refused {
    Object root;
    try {
      root = Json.parse(text, OpenAiCompatibleEngine.MAX_CACHE_SIZE_ANSWER_BYTES, 32,
          AnswerHeap.maxParsedBytes(text.length()));
    } catch (Json.JsonException e) {
      throw new Refused("the answer is not JSON (" + shown(String.valueOf(e.getMessage())) + ")");
    }
    if (!(root instanceof Map<?, ?> m)) {
      throw new Refused("the answer is not a JSON object");
    }
    Object v = m.get("max_total_num_tokens");
    if (v == null || v == Json.NULL) {
      throw new Refused("no max_total_num_tokens in the answer");
    }
    if (!(v instanceof Long n) || n < 1) {
      throw new Refused("max_total_num_tokens is not a whole number from 1 up: "
          + (v instanceof Number ? shown(v.toString()) : v instanceof String ? "a string"
              : v instanceof List<?> ? "an array" : v instanceof Map<?, ?> ? "an object"
              : String.valueOf(v)));
    }
    if (n > OpenAiCompatibleEngine.MAX_CACHE_SIZE_TOKENS) {
      throw tooLarge("max_total_num_tokens " + n);
    }
    return n;
  }

  /** The first bytes of a body, and whether there were more. */
  record Prefix(byte[] bytes, boolean cut) {}

  /**
   * The first {@code cap} bytes of a body: once they have come, the subscription is cancelled
   * (the connection closed) and the body completes with them, {@code cut} true.
   */
  static HttpResponse.BodySubscriber<Prefix> prefix(int cap) {
    return new HttpResponse.BodySubscriber<>() {
      private final CompletableFuture<Prefix> body = new CompletableFuture<>();
      private final java.io.ByteArrayOutputStream buf = new java.io.ByteArrayOutputStream();
      private Flow.Subscription subscription;

      @Override
      public CompletionStage<Prefix> getBody() {
        return body;
      }

      @Override
      public void onSubscribe(Flow.Subscription s) {
        subscription = s;
        s.request(Long.MAX_VALUE);
      }

      @Override
      public void onNext(List<ByteBuffer> items) {
        if (body.isDone()) {
          return;
        }
        for (ByteBuffer b : items) {
          int room = cap - buf.size();
          if (b.remaining() > room) {
            buf.write(copy(b, room), 0, room);
            subscription.cancel();
            body.complete(new Prefix(buf.toByteArray(), true));
            return;
          }
          byte[] chunk = copy(b, b.remaining());
          buf.write(chunk, 0, chunk.length);
        }
      }

      @Override
      public void onError(Throwable t) {
        body.completeExceptionally(t);
      }

      @Override
      public void onComplete() {
        body.complete(new Prefix(buf.toByteArray(), false));
      }
    };
  }

  /** The next {@code n} bytes of {@code b}. */
  private static byte[] copy(ByteBuffer b, int n) {
    byte[] chunk = new byte[n];
    b.get(chunk);
    return chunk;
  }
}
