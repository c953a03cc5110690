package io.github.prefixrouter.engine.openai;

import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.contract.InferenceEngineContractTest;
import io.github.prefixrouter.engine.reference.ReferenceEngine;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/**
 * The OpenAI-compatible adapter against the InferenceEngine contract, talking to a fake
 * vLLM-like server on loopback that runs the reference engine behind {@code /v1/completions}.
 */
class OpenAiCompatibleEngineContractTest extends InferenceEngineContractTest {

  private ScriptedOpenAiServer server;
  /**
   * The cache capacity of the engine behind the fake server: small, so that the kit's eviction
   * checks fill it with a few dozen prompts.
   */
  static final int BACKEND_CACHE_TOKENS = 2048;

  /** The engine behind the fake server's {@code /v1/completions}. */
  protected ReferenceEngine backend;
  private final AtomicBoolean failNext = new AtomicBoolean();

  @BeforeEach
  void startServer() throws IOException {
    backend = ReferenceEngine.builder().cacheCapacityTokens(BACKEND_CACHE_TOKENS).build();
    server = ScriptedOpenAiServer.start(4);
    server.behaviour.set((ex, body) -> {
      if (failNext.getAndSet(false)) {
        ScriptedOpenAiServer.reply(ex, 503, "{\"error\":\"overloaded\"}");
        return;
      }
      int[] prompt = Json.asIntArray(body.get("prompt"), "prompt");
      int maxTokens = Json.asInt(body.get("max_tokens"), "max_tokens");
      // like vLLM: the model names an adapter (this fake serves every name as the base
      // weights), and the cache salt keys the prefix cache
      CacheScope scope = CacheScope.of(
          body.get("model") instanceof String m ? m : "",
          body.get("cache_salt") instanceof String s ? s : "");
      // like vLLM, the fake stops at the stop token ids it is sent
      java.util.List<Integer> stops = new java.util.ArrayList<>();
      if (body.get("stop_token_ids") instanceof List<?> ids) {
        for (Object id : ids) {
          stops.add(((Long) id).intValue());
        }
      }
      InferenceRequest run = new InferenceRequest("x", prompt,
          GenerationParams.greedy(maxTokens).withStops(List.of(), stops), scope);
      // and at the stop strings, in the text of the output
      List<String> stopStrings = new java.util.ArrayList<>();
      if (body.get("stop") instanceof List<?> strings) {
        for (Object string : strings) {
          stopStrings.add((String) string);
        }
      }
      if (Boolean.TRUE.equals(body.get("stream"))) {
        boolean usage = Boolean.TRUE.equals(Json.path(body, "stream_options", "include_usage"));
        if (stopStrings.isEmpty()) {
          stream(ex, run, stops, usage);
        } else {
          streamCut(ex, cut(backend.execute(run).join(), stopStrings), maxTokens, usage);
        }
        return;
      }
      Cut cut = cut(backend.execute(run).join(), stopStrings);
      EngineResult r = cut.result();
      Map<String, Object> choice = new LinkedHashMap<>();
      choice.put("index", 0);
      choice.put("text", cut.text());
      choice.put("token_ids", r.outputTokens());
      if (cut.stop() != null) {
        choice.put("finish_reason", "stop");
        choice.put("stop_reason", cut.stop());
      }
      Map<String, Object> answer = new LinkedHashMap<>();
      answer.put("choices", List.of(choice));
      answer.put("usage", usage(r));
      ScriptedOpenAiServer.reply(ex, 200, Json.write(answer));
    });
  }

  /** The text of a token: the fake's detokenizer (with a two-byte character now and then). */
  static String text(int token) {
    return " " + token + (token % 7 == 0 ? "\u00e9" : "");
  }

  static String text(int[] tokens) {
    StringBuilder sb = new StringBuilder();
    for (int t : tokens) {
      sb.append(text(t));
    }
    return sb.toString();
  }

  /**
   * An output cut as vLLM cuts it at stop strings: its tokens end at the first token after
   * which the text contains one of them (the first listed, when several), and its text ends
   * just before it; {@code stop} is that stop string, or null when none ended the output.
   */
  record Cut(EngineResult result, String text, String stop) {}

  static Cut cut(EngineResult r, List<String> stopStrings) {
    int[] tokens = r.outputTokens();
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < tokens.length; i++) {
      sb.append(text(tokens[i]));
      for (String stop : stopStrings) {
        int at = sb.indexOf(stop);
        if (at >= 0) {
          return new Cut(new EngineResult(java.util.Arrays.copyOf(tokens, i + 1), r.text(),
              r.promptTokens(), r.cachedPromptTokens(), r.prefillNanos(), r.decodeNanos()),
              sb.substring(0, at), stop);
        }
      }
    }
    return new Cut(r, sb.toString(), null);
  }

  /**
   * Streams an output cut at a stop string as vLLM does: a chunk per token, the text of the
   * tokens before the last as it is and the last chunk's text up to the stop string, the last
   * chunk with its finish reason (and the stop string as {@code stop_reason}).
   */
  private static void streamCut(com.sun.net.httpserver.HttpExchange ex, Cut cut, int max,
      boolean usage) throws IOException {
    ex.getResponseHeaders().add("Content-Type", "text/event-stream");
    ex.sendResponseHeaders(200, 0);
    java.io.OutputStream out = ex.getResponseBody();
    int[] tokens = cut.result().outputTokens();
    String text = cut.text();
    int chars = 0;
    for (int i = 0; i < tokens.length; i++) {
      boolean last = i == tokens.length - 1;
      // a token's text, as far as the cut text goes (a stop string may start in an earlier one)
      int from = Math.min(chars, text.length());
      chars += text(tokens[i]).length();
      String piece = last ? text.substring(from)
          : text.substring(from, Math.min(chars, text.length()));
      Map<String, Object> choice = new LinkedHashMap<>();
      choice.put("index", 0);
      choice.put("text", piece);
      choice.put("token_ids", new int[] {tokens[i]});
      // like vLLM, the last chunk gives the finish reason: a stop token id ends it as "stop"
      choice.put("finish_reason", !last ? Json.NULL : cut.stop() != null ? "stop"
          : tokens.length == max ? "length" : "stop");
      if (last && cut.stop() != null) {
        choice.put("stop_reason", cut.stop());
      }
      Map<String, Object> chunk = new LinkedHashMap<>();
      chunk.put("id", "cmpl-x");
      chunk.put("object", "text_completion");
      chunk.put("choices", List.of(choice));
      out.write(("data: " + Json.write(chunk) + "\n\n").getBytes(StandardCharsets.UTF_8));
    }
    if (usage) {
      out.write(("data: " + Json.write(Map.of("choices", List.of(), "usage",
          usage(cut.result()))) + "\n\n").getBytes(StandardCharsets.UTF_8));
    }
    out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
  }

  private static Map<String, Object> usage(EngineResult r) {
    Map<String, Object> usage = new LinkedHashMap<>();
    usage.put("prompt_tokens", r.promptTokens());
    usage.put("completion_tokens", r.outputTokens().length);
    usage.put("prompt_tokens_details", Map.of("cached_tokens", r.cachedPromptTokens()));
    return usage;
  }

  /**
   * Answers as vLLM streams: a chunk per decoded token (its text and, as asked with
   * {@code return_token_ids}, its id), the last with its finish reason ({@code length} at
   * {@code max_tokens}, {@code stop} at a stop token id), then the usage if asked, then
   * {@code [DONE]}. The backend's listener hands the tokens to this handler's thread, which
   * writes them as they come.
   */
  private void stream(com.sun.net.httpserver.HttpExchange ex, InferenceRequest run,
      List<Integer> stops, boolean usage) throws IOException {
    java.util.concurrent.BlockingQueue<Object> q = new java.util.concurrent.LinkedBlockingQueue<>();
    backend.execute(run, (tokens, text) -> q.add(tokens))
        .whenComplete((r, err) -> q.add(r != null ? r : err));
    ex.getResponseHeaders().add("Content-Type", "text/event-stream");
    ex.sendResponseHeaders(200, 0);
    java.io.OutputStream out = ex.getResponseBody();
    int sent = 0;
    int max = run.params().maxTokens();
    while (true) {
      Object next;
      try {
        next = q.take();
      } catch (InterruptedException e) {
        return;
      }
      if (next instanceof int[] tokens) {
        sent += tokens.length;
        Map<String, Object> choice = new LinkedHashMap<>();
        choice.put("index", 0);
        choice.put("text", text(tokens));
        choice.put("token_ids", tokens);
        boolean stopped = tokens.length > 0 && stops.contains(tokens[tokens.length - 1]);
        choice.put("finish_reason", sent == max ? "length" : stopped ? "stop" : Json.NULL);
        Map<String, Object> chunk = new LinkedHashMap<>();
        chunk.put("id", "cmpl-x");
        chunk.put("object", "text_completion");
        chunk.put("choices", List.of(choice));
        out.write(("data: " + Json.write(chunk) + "\n\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
      } else if (next instanceof EngineResult r) {
        if (usage) {
          out.write(("data: " + Json.write(Map.of("choices", List.of(), "usage", usage(r)))
              + "\n\n").getBytes(StandardCharsets.UTF_8));
        }
        out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
        return;
      } else {
        out.write(("data: {\"error\":{\"message\":\"" + next + "\"}}\n\ndata: [DONE]\n\n")
            .getBytes(StandardCharsets.UTF_8));
        return;
      }
    }
  }

  /** The fake server streams every token, with its id and text. */
  @Override
  protected boolean streamsWholeOutput() {
    return true;
  }

  @AfterEach
  void stopServer() {
    server.close();
    backend.close();
  }

  @Override
  protected InferenceEngine createEngine() {
    return engineBuilder().build();
  }

  /**
   * A builder for an adapter talking to the fake server, whose 4 threads run 4 requests at once:
   * its {@code slots}, so that the adapter reports the requests beyond them as queued, as it does
   * beyond a real server's slots (at the default 256 slots, the kit's 48 requests would all be
   * reported running). Its limit of requests in flight stays the default's 512.
   */
  protected OpenAiCompatibleEngine.Builder engineBuilder() {
    return OpenAiCompatibleEngine.builder().baseUrl(server.base()).slots(4).maxInFlight(512);
  }

  @Override
  protected boolean failNextRequest(InferenceEngine engine) {
    failNext.set(true);
    return true;
  }
}
