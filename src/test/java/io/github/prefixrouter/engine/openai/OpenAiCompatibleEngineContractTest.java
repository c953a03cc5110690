package io.github.prefixrouter.engine.openai;

import io.github.prefixrouter.internal.json.Json;
import com.sun.net.httpserver.HttpServer;
import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.contract.InferenceEngineContractTest;
import io.github.prefixrouter.engine.reference.ReferenceEngine;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/**
 * The OpenAI-compatible adapter against the InferenceEngine contract, talking to a fake
 * vLLM-like server on loopback that runs the reference engine behind {@code /v1/completions}.
 */
class OpenAiCompatibleEngineContractTest extends InferenceEngineContractTest {

  private HttpServer server;
  /** The engine behind the fake server's {@code /v1/completions}. */
  protected ReferenceEngine backend;
  private final AtomicBoolean failNext = new AtomicBoolean();

  @BeforeEach
  void startServer() throws IOException {
    backend = ReferenceEngine.builder().build();
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.setExecutor(Executors.newFixedThreadPool(4, r -> {
      Thread t = new Thread(r, "fake-vllm");
      t.setDaemon(true);
      return t;
    }));
    server.createContext("/v1/completions", ex -> {
      try (ex) {
        Map<?, ?> body = (Map<?, ?>) Json.parse(new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8));
        if (failNext.getAndSet(false)) {
          OpenAiCompatibleEngineTest.reply(ex, 503, "{\"error\":\"overloaded\"}");
          return;
        }
        int[] prompt = Json.asIntArray(body.get("prompt"), "prompt");
        int maxTokens = Json.asInt(body.get("max_tokens"), "max_tokens");
        // like vLLM: the model names an adapter (this fake serves every name as the base
        // weights), and the cache salt keys the prefix cache
        CacheScope scope = CacheScope.of(
            body.get("model") instanceof String m ? m : "",
            body.get("cache_salt") instanceof String s ? s : "");
        EngineResult r = backend.execute(new InferenceRequest("x", prompt,
            GenerationParams.greedy(maxTokens), scope)).join();
        Map<String, Object> choice = new LinkedHashMap<>();
        choice.put("index", 0);
        choice.put("text", "");
        choice.put("token_ids", r.outputTokens());
        Map<String, Object> usage = new LinkedHashMap<>();
        usage.put("prompt_tokens", r.promptTokens());
        usage.put("completion_tokens", r.outputTokens().length);
        usage.put("prompt_tokens_details", Map.of("cached_tokens", r.cachedPromptTokens()));
        Map<String, Object> answer = new LinkedHashMap<>();
        answer.put("choices", List.of(choice));
        answer.put("usage", usage);
        OpenAiCompatibleEngineTest.reply(ex, 200, Json.write(answer));
      }
    });
    server.start();
  }

  @AfterEach
  void stopServer() {
    server.stop(0);
    backend.close();
  }

  @Override
  protected InferenceEngine createEngine() {
    return engineBuilder().build();
  }

  /** A builder for an adapter talking to the fake server. */
  protected OpenAiCompatibleEngine.Builder engineBuilder() {
    return OpenAiCompatibleEngine.builder().baseUrl("http://127.0.0.1:" + server.getAddress().getPort());
  }

  @Override
  protected boolean failNextRequest(InferenceEngine engine) {
    failNext.set(true);
    return true;
  }
}
