package io.github.prefixrouter.server;

import com.sun.net.httpserver.Headers;
import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.workload.ChatWorkload;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The client endpoint's own CPU per request (no network, no routing, no engine), on the OpenAI
 * chat route against the token route, for the same conversation: {@code route} reads a
 * {@code /v1/route/completions} body of the conversation's token ids (as the endpoint's request
 * parsing does: the JSON, the keys, the ids, the parameters, the request) and writes its answer
 * JSON; {@code chat} reads the {@code /v1/chat/completions} body of the conversation
 * ({@code OpenAiRequest.parse}), tokenizes it with the reference engine's tokenizer (its chat
 * template, one id per character), builds the request, and writes OpenAI's answer
 * ({@code OpenAiAnswers.answer}, the text of the output ids) and its routing headers. Both
 * answers are of {@code outputTokens} tokens. In this package because those classes are the
 * endpoint's own, not public API.
 *
 * <pre>
 *   taskset -c 1 java -jar benchmarks/target/benchmarks.jar OpenAiRouteBenchmark
 * </pre>
 */
@State(Scope.Thread)
@Fork(value = 2, jvmArgsAppend = {"-Xms1g", "-Xmx1g"})
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class OpenAiRouteBenchmark {

  /** Characters of the system prompt (the user message has a tenth of them). */
  @Param({"1600"})
  public int systemChars;

  @Param({"16"})
  public int outputTokens;

  private static final RouteDecision DECISION = new RouteDecision(RoutingPolicy.COST_AWARE, 3,
      new String[] {"n0"}, new int[1], new int[1], new int[1], new long[1], new long[1],
      new RouteDecision.SkipReason[] {RouteDecision.SkipReason.NONE}, 0,
      RouteDecision.Reason.LOCAL_ONLY_POLICY);

  private final ReferenceTokenizer tokenizer = new ReferenceTokenizer(
      NodeMain.REFERENCE_VOCABULARY, NodeMain.REFERENCE_MAX_OUTPUT_TOKENS);
  private byte[] chatBody;
  private byte[] routeBody;
  private InferenceResponse response;

  @Setup(Level.Trial)
  public void prepare() {
    SplittableRandom rnd = new SplittableRandom(1);
    String system = ChatWorkload.words(rnd, systemChars);
    String user = ChatWorkload.words(rnd, Math.max(1, systemChars / 10));
    List<LoadDriver.Message> messages = List.of(new LoadDriver.Message("system", system),
        new LoadDriver.Message("user", user));
    Map<String, Object> chat = new LinkedHashMap<>();
    chat.put("model", "base");
    chat.put("messages", List.of(Map.of("role", "system", "content", system),
        Map.of("role", "user", "content", user)));
    chat.put("max_tokens", outputTokens);
    chat.put("temperature", 1.0);
    chat.put("seed", 5L);
    chatBody = Json.write(chat).getBytes(StandardCharsets.UTF_8);
    int[] ids = ReferenceChatTokens.tokens(messages);
    Map<String, Object> route = new LinkedHashMap<>();
    route.put("id", "q1");
    route.put("prompt", ids);
    route.put("max_tokens", outputTokens);
    route.put("temperature", 1.0);
    route.put("seed", 5L);
    routeBody = Json.write(route).getBytes(StandardCharsets.UTF_8);
    int[] out = new int[outputTokens];
    for (int i = 0; i < out.length; i++) {
      out[i] = rnd.nextInt(NodeMain.REFERENCE_VOCABULARY);
    }
    response = new InferenceResponse("n0-c1", new EngineResult(out, "", ids.length,
        ids.length - 40, 1, 1), "n1", true, 1, FallbackCause.NONE, DECISION);
    // both sides must build the same request (the chat's ids are the route's prompt)
    if (route() <= 0 || chat() <= 0 || !Arrays.equals(lastRoute.tokens(), lastChat.tokens())
        || !lastRoute.params().equals(lastChat.params())) {
      throw new IllegalStateException("the chat and the route build different requests: "
          + lastRoute + " and " + lastChat);
    }
  }

  /** The requests the last calls built, for {@link #prepare}'s check. */
  InferenceRequest lastRoute;
  InferenceRequest lastChat;

  /** The token route: its request parsing (as {@code ClientEndpoint.parseRequest}) and answer. */
  @Benchmark
  public int route() {
    Map<?, ?> m = (Map<?, ?>) Json.parse(new String(routeBody, StandardCharsets.UTF_8));
    for (Object key : m.keySet()) {
      if (!ClientEndpoint.REQUEST_KEYS.contains(key)) {
        throw new IllegalArgumentException("unknown key " + key);
      }
    }
    String id = Json.asString(m.get("id"), "id");
    int[] prompt = Json.asIntArray(m.get("prompt"), "prompt");
    int maxTokens = Json.asInt(m.get("max_tokens"), "max_tokens");
    double temperature = Json.asDouble(m.get("temperature"), "temperature");
    double topP = m.containsKey("top_p") ? Json.asDouble(m.get("top_p"), "top_p") : 1.0;
    long seed = (Long) m.get("seed");
    String model = m.containsKey("model") ? Json.asString(m.get("model"), "model") : "";
    CacheScope scope = CacheScope.of(model.equals("base") ? "" : model, "");
    InferenceRequest request = new InferenceRequest(id, prompt,
        new GenerationParams(maxTokens, temperature, topP, seed), scope);
    byte[] answer = Json.write(ClientEndpoint.toJson(response)).getBytes(StandardCharsets.UTF_8);
    lastRoute = request;
    return answer.length + request.tokens().length;
  }

  /** The chat route: its request parsing, the reference tokenizer, the answer and its headers. */
  @Benchmark
  public int chat() {
    Map<?, ?> m = (Map<?, ?>) Json.parse(new String(chatBody, StandardCharsets.UTF_8));
    OpenAiRequest req = OpenAiRequest.parse(m, OpenAiRequest.Kind.CHAT, "base");
    PromptTokenizer.Tokenized t =
        tokenizer.tokenizeChat(req.model, req.messages, req.chatTemplateKwargs).join();
    long seed = req.seed;
    InferenceRequest request = req.toInferenceRequest("n0-c1", t.tokens(), t.maxModelLen(), seed);
    OpenAiAnswers.Context ctx = new OpenAiAnswers.Context(req.kind,
        OpenAiAnswers.answerId(req.kind, "n0-c1"), 1_767_225_600L, req.model,
        request.params(), seed, req.includeUsage, tokenizer, req.continuousUsage,
        request.tokens().length);
    byte[] answer = Json.write(OpenAiAnswers.answer(ctx, response))
        .getBytes(StandardCharsets.UTF_8);
    Headers h = new Headers();
    OpenAiAnswers.headers(h, ctx, response);
    lastChat = request;
    return answer.length + request.tokens().length + h.size();
  }
}
