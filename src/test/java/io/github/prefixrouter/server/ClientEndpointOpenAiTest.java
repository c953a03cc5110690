package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.doThrow;
import static org.mockito.Mockito.spy;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.EngineTimeoutException;
import io.github.prefixrouter.testing.Await;
import io.github.prefixrouter.testing.HoldingAnswerServer;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The OpenAI-compatible routes: {@code /v1/completions} and {@code /v1/chat/completions} with
 * text tokenized by a fake tokenizer, answered (whole or streamed) in OpenAI's shapes, every
 * refusal naming its key, tokenizer failures, bounded tokenizations and the in-flight slot, the
 * seeds drawn, and {@code /v1/models}. The node is a stub that records the requests submitted
 * and answers when the test says.
 */
class ClientEndpointOpenAiTest extends ClientEndpointFixture {

  private static final long NOW = 1_767_225_600L;
  private static final long SEED_OF_SEEDS = 7L;
  private static final RouteDecision DECISION = StubNode.LOCAL_DECISION;

  private void start(Duration ioTimeout, int maxInFlight, String baseModel,
      PromptTokenizer tok) throws IOException {
    when(node.stats()).thenReturn(StatsFixtures.nodeStats());
    start(new ClientEndpoint(node, List::of, maxInFlight, ioTimeout, baseModel,
        ClientEndpoint.DEFAULT_READER_THREADS, ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS,
        tok, () -> NOW, SEED_OF_SEEDS));
  }

  private void start() throws IOException {
    start(Duration.ofSeconds(5), 64, "base", tokenizer);
  }

  private CompletableFuture<HttpResponse<String>> postAsync(String path, String body) {
    return client.sendAsync(HttpRequest.newBuilder(URI.create("http://" + address + path))
        .header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private HttpResponse<String> post(String path, String body) throws Exception {
    return postAsync(path, body).get(20, TimeUnit.SECONDS);
  }

  private CompletableFuture<HttpResponse<InputStream>> postStreaming(String path, String body) {
    return client.sendAsync(HttpRequest.newBuilder(URI.create("http://" + address + path))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofInputStream());
  }

  private HttpResponse<String> get(String path) throws Exception {
    return client.send(HttpRequest.newBuilder(URI.create("http://" + address + path)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static InferenceResponse response(String id, int[] tokens, String text, int cached) {
    return new InferenceResponse(id, new EngineResult(tokens, text, 30, cached, 1, 1), "peer-b",
        true, 2, FallbackCause.NONE, DECISION);
  }

  private static Map<?, ?> json(String body) {
    return (Map<?, ?>) Json.parse(body);
  }

  private static Map<?, ?> map(Object o) {
    return (Map<?, ?>) o;
  }

  private static Map<String, Object> ordered(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  private static Map<String, Object> routing(String requestId, long seed) {
    return ordered("request_id", requestId, "served_by", "peer-b", "forwarded", true,
        "attempts", 2L, "fallback", Json.NULL, "reason", "LOCAL_ONLY_POLICY", "seed", seed);
  }

  /** The seeds the endpoint draws, in order. */
  private static long[] drawnSeeds(int n) {
    RequestSeeds s = new RequestSeeds(SEED_OF_SEEDS);
    long[] out = new long[n];
    for (int i = 0; i < n; i++) {
      out[i] = s.next();
    }
    return out;
  }

  // ------------------------------------------------------------------------- whole answers

  @Test
  void aTextCompletionIsTokenizedRoutedAndAnsweredInOpenAisShape() throws Exception {
    start();
    CompletableFuture<HttpResponse<String>> sent = postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"model\":\"base\",\"prompt\":\"hello\",\"max_tokens\":3,\"temperature\":0.5,"
            + "\"top_p\":0.9,\"seed\":42,\"user\":\"u1\",\"n\":1}");
    awaitSubmitted(1);
    assertEquals(1, tokenizer.calls.size());
    assertEquals("base", tokenizer.calls.get(0).model());
    assertEquals("hello", tokenizer.calls.get(0).prompt());
    InferenceRequest r = requests.get(0);
    assertEquals("solo-c1", r.id());
    assertArrayEquals(FakeTokenizer.tokens("hello"), r.tokens());
    assertEquals(new GenerationParams(3, 0.5, 0.9, 42), r.params());
    assertEquals(CacheScope.DEFAULT, r.scope());
    futures.get(0).complete(response("solo-c1", new int[] {'a', 'b', 'c'}, "", 16));

    HttpResponse<String> resp = sent.get(20, TimeUnit.SECONDS);
    assertEquals(200, resp.statusCode(), resp.body());
    assertEquals("application/json", resp.headers().firstValue("Content-Type").orElse(null));
    Map<String, Object> expected = ordered(
        "id", "cmpl-solo-c1",
        "object", "text_completion",
        "created", NOW,
        "model", "base",
        "choices", List.of(ordered("index", 0L, "text", "abc", "logprobs", Json.NULL,
            "finish_reason", "length", "stop_reason", Json.NULL)),
        "usage", ordered("prompt_tokens", 30L, "completion_tokens", 3L, "total_tokens", 33L,
            "prompt_tokens_details", Map.of("cached_tokens", 16L)),
        "prefix_router", routing("solo-c1", 42));
    Map<?, ?> got = json(resp.body());
    assertEquals(expected, got);
    assertEquals(List.copyOf(expected.keySet()), List.copyOf(got.keySet()), "key order");
    assertEquals("peer-b", resp.headers().firstValue(OpenAiAnswers.SERVED_BY).orElse(null));
    assertEquals("true", resp.headers().firstValue(OpenAiAnswers.FORWARDED).orElse(null));
    assertEquals("2", resp.headers().firstValue(OpenAiAnswers.ATTEMPTS).orElse(null));
    assertEquals("16", resp.headers().firstValue(OpenAiAnswers.CACHED_TOKENS).orElse(null));
    assertEquals("42", resp.headers().firstValue(OpenAiAnswers.SEED).orElse(null));
    assertEquals(0, endpoint.inFlight());
  }

  @Test
  void completionsDefaultsTokenIdPromptsAndOneStringArraysAndStopWhenShorter() throws Exception {
    start();
    // defaults: 16 tokens, temperature 1, top_p 1, a drawn seed; the engine's text as it is
    CompletableFuture<HttpResponse<String>> sent = postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":[5,6,7]}");
    awaitSubmitted(1);
    assertTrue(tokenizer.calls.isEmpty(), "token ids are used as they are");
    assertArrayEquals(new int[] {5, 6, 7}, requests.get(0).tokens());
    long seed = drawnSeeds(1)[0];
    assertEquals(new GenerationParams(16, 1.0, 1.0, seed), requests.get(0).params());
    futures.get(0).complete(response("solo-c1", new int[] {1, 2}, "two tokens", -1));
    HttpResponse<String> resp = sent.get(20, TimeUnit.SECONDS);
    Map<?, ?> m = json(resp.body());
    assertEquals("base", m.get("model"), "the base model's name when the client names none");
    Map<?, ?> choice = map(((List<?>) m.get("choices")).get(0));
    assertEquals("two tokens", choice.get("text"));
    assertEquals("stop", choice.get("finish_reason"));
    assertEquals(ordered("prompt_tokens", 30L, "completion_tokens", 2L, "total_tokens", 32L),
        m.get("usage"), "no prompt_tokens_details when the engine does not report them");
    assertTrue(resp.headers().firstValue(OpenAiAnswers.CACHED_TOKENS).isEmpty());
    assertEquals(String.valueOf(seed), resp.headers().firstValue(OpenAiAnswers.SEED).get());

    // one prompt in an array: a string, or token ids
    postAsync(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":[\"hi\"],\"max_tokens\":1}");
    awaitSubmitted(2);
    assertArrayEquals(FakeTokenizer.tokens("hi"), requests.get(1).tokens());
    postAsync(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":[[9,8]],\"max_tokens\":1}");
    awaitSubmitted(3);
    assertArrayEquals(new int[] {9, 8}, requests.get(2).tokens());
    // a default never exceeds the room left in the context
    tokenizer.maxModelLen = 10;
    postAsync(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"abcdef\"}");
    awaitSubmitted(4);
    assertEquals(4, requests.get(3).params().maxTokens());
  }

  @Test
  void aChatIsTokenizedWithItsMessagesAndTemplateArgumentsAndAnsweredAsAChatCompletion()
      throws Exception {
    start();
    tokenizer.maxModelLen = 200;
    String messages = "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
        + "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi \"},"
        + "{\"type\":\"text\",\"text\":\"there\"}]},"
        + "{\"role\":\"assistant\",\"content\":null},"
        + "{\"role\":\"user\",\"content\":\"Go on\",\"name\":\"ann\"}]";
    CompletableFuture<HttpResponse<String>> sent = postAsync(ClientEndpoint.OPENAI_CHAT,
        "{\"model\":\"sql-lora\",\"messages\":" + messages + ",\"cache_salt\":\"tenant-1\","
            + "\"chat_template_kwargs\":{\"enable_thinking\":false},\"seed\":-3}");
    awaitSubmitted(1);
    FakeTokenizer.Call call = tokenizer.calls.get(0);
    assertEquals("sql-lora", call.model());
    assertEquals(Json.parse(messages), call.messages());
    assertEquals(Map.of("enable_thinking", false), call.kwargs());
    InferenceRequest r = requests.get(0);
    String rendered = FakeTokenizer.render(call.messages());
    assertArrayEquals(FakeTokenizer.tokens(rendered), r.tokens());
    // no max_tokens: the room left in the context
    assertEquals(new GenerationParams(200 - rendered.length(), 1.0, 1.0, -3), r.params());
    assertEquals(CacheScope.of("sql-lora", "tenant-1"), r.scope());
    futures.get(0).complete(response(r.id(), new int[] {'o', 'k'}, "", 0));

    HttpResponse<String> resp = sent.get(20, TimeUnit.SECONDS);
    assertEquals(200, resp.statusCode(), resp.body());
    Map<String, Object> expected = ordered(
        "id", "chatcmpl-solo-c1",
        "object", "chat.completion",
        "created", NOW,
        "model", "sql-lora",
        "choices", List.of(ordered("index", 0L,
            "message", ordered("role", "assistant", "content", "ok"),
            "logprobs", Json.NULL, "finish_reason", "stop", "stop_reason", Json.NULL)),
        "usage", ordered("prompt_tokens", 30L, "completion_tokens", 2L, "total_tokens", 32L,
            "prompt_tokens_details", Map.of("cached_tokens", 0L)),
        "prefix_router", routing("solo-c1", -3));
    assertEquals(expected, json(resp.body()));

    // the context unknown: the documented default; max_completion_tokens before max_tokens
    tokenizer.maxModelLen = -1;
    postAsync(ClientEndpoint.OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    awaitSubmitted(2);
    assertEquals(OpenAiRequest.DEFAULT_CHAT_MAX_TOKENS, requests.get(1).params().maxTokens());
    assertEquals("base", tokenizer.calls.get(1).model());
    assertEquals(Map.of(), tokenizer.calls.get(1).kwargs());
    postAsync(ClientEndpoint.OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
        + "\"max_tokens\":9,\"max_completion_tokens\":5}");
    awaitSubmitted(3);
    assertEquals(5, requests.get(2).params().maxTokens());
    // the base model named: no adapter
    postAsync(ClientEndpoint.OPENAI_CHAT,
        "{\"model\":\"base\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    awaitSubmitted(4);
    assertEquals(CacheScope.DEFAULT, requests.get(3).scope());
  }

  /**
   * Integer parameters written as numbers with a fraction of zero ({@code 16.0}, {@code 1e1}),
   * as clients that compute them in floating point send and vLLM's parser accepts, are those
   * integers; a fraction, or a number a double cannot hold exactly, is refused naming the key,
   * and an integer out of range is refused with the range.
   */
  @Test
  void integerParametersWrittenWithAZeroFractionAreThoseIntegers() throws Exception {
    start();
    postAsync(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"a\",\"max_tokens\":16.0,"
        + "\"n\":1.0,\"best_of\":1.0,\"seed\":-5.0}");
    awaitSubmitted(1);
    assertEquals(16, requests.get(0).params().maxTokens());
    assertEquals(-5L, requests.get(0).params().seed());
    postAsync(ClientEndpoint.OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
        + "\"max_completion_tokens\":1e1,\"n\":1.0,\"top_logprobs\":0.0,\"seed\":4096.0}");
    awaitSubmitted(2);
    assertEquals(10, requests.get(1).params().maxTokens());
    assertEquals(4096L, requests.get(1).params().seed());

    String cmpl = ClientEndpoint.OPENAI_COMPLETIONS;
    // {body, param, words the message must have}
    String[][] refused = {
        {"{\"prompt\":\"a\",\"max_tokens\":16.5}", "max_tokens", "must be an integer"},
        {"{\"prompt\":\"a\",\"max_tokens\":9999999999}", "max_tokens", "between 1 and 1048576"},
        {"{\"prompt\":\"a\",\"max_tokens\":1e300}", "max_tokens", "between 1 and 1048576"},
        {"{\"prompt\":\"a\",\"n\":2.0}", "n", "other than 1"},
        {"{\"prompt\":\"a\",\"n\":1.5}", "n", "other than 1"},
        {"{\"prompt\":\"a\",\"best_of\":2.0}", "best_of", "not supported"},
        {"{\"prompt\":\"a\",\"seed\":0.5}", "seed", "must be an integer"},
        {"{\"prompt\":\"a\",\"seed\":9007199254740993.0}", "seed", "must be an integer"},
    };
    for (String[] c : refused) {
      HttpResponse<String> resp = post(cmpl, c[0]);
      assertEquals(400, resp.statusCode(), c[0] + " -> " + resp.body());
      Map<?, ?> error = map(json(resp.body()).get("error"));
      assertEquals(c[1], error.get("param"), c[0] + " -> " + resp.body());
      assertTrue(((String) error.get("message")).contains(c[2]), c[0] + " -> " + resp.body());
    }
    assertEquals(2, requests.size(), "nothing refused was submitted");
  }

  /**
   * The bodies vLLM's serving benchmark sends ({@code vllm bench serve}, backends
   * {@code openai} and {@code openai-chat}; older versions add {@code best_of} and
   * {@code ignore_eos}) are accepted: their vLLM sampling options ask for nothing. The same
   * options asking for something are refused naming them.
   */
  @Test
  void vllmsBenchmarkRequestsAreAcceptedAndTheirOptionsRefusedWhenTheyAskForSomething()
      throws Exception {
    start();
    CompletableFuture<HttpResponse<InputStream>> text = postStreaming(
        ClientEndpoint.OPENAI_COMPLETIONS, "{\"model\":\"base\",\"prompt\":\"a b c\","
            + "\"temperature\":0.0,\"repetition_penalty\":1.0,\"max_tokens\":4,\"logprobs\":null,"
            + "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"best_of\":1,"
            + "\"ignore_eos\":false}");
    awaitSubmitted(1);
    assertEquals(4, requests.get(0).params().maxTokens());
    futures.get(0).complete(response("solo-c1", new int[] {'x'}, "", 0));
    assertEquals(200, text.get(20, TimeUnit.SECONDS).statusCode());
    CompletableFuture<HttpResponse<InputStream>> chat = postStreaming(ClientEndpoint.OPENAI_CHAT,
        "{\"model\":\"base\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
            + "\"text\":\"a b c\"}]}],\"temperature\":0.0,\"max_completion_tokens\":4,"
            + "\"stream\":true,\"stream_options\":{\"include_usage\":true},"
            + "\"repetition_penalty\":1,\"ignore_eos\":false,\"top_k\":-1,\"min_p\":0,"
            + "\"min_tokens\":0}");
    awaitSubmitted(2);
    futures.get(1).complete(response("solo-c2", new int[] {'y'}, "", 0));
    assertEquals(200, chat.get(20, TimeUnit.SECONDS).statusCode());

    String[][] refused = {
        {"repetition_penalty", "1.2"}, {"ignore_eos", "true"}, {"top_k", "50"},
        {"min_p", "0.1"}, {"min_tokens", "3"}};
    for (String[] c : refused) {
      for (String path : new String[] {ClientEndpoint.OPENAI_COMPLETIONS,
          ClientEndpoint.OPENAI_CHAT}) {
        String body = path.equals(ClientEndpoint.OPENAI_CHAT)
            ? "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"" + c[0] + "\":" + c[1] + "}"
            : "{\"prompt\":\"a\",\"" + c[0] + "\":" + c[1] + "}";
        HttpResponse<String> resp = post(path, body);
        assertEquals(400, resp.statusCode(), body + " -> " + resp.body());
        Map<?, ?> error = map(json(resp.body()).get("error"));
        assertEquals(c[0], error.get("param"), resp.body());
        assertEquals("unsupported_parameter", error.get("code"), resp.body());
      }
    }
    assertEquals(2, requests.size(), "nothing refused was submitted");
  }

  @Test
  void noOpValuesOfOptionsThatCannotBeHonouredAreAccepted() throws Exception {
    start();
    postAsync(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"a\",\"presence_penalty\":0,"
        + "\"frequency_penalty\":0.0,\"logprobs\":null,\"echo\":false,\"best_of\":1,\"stop\":[],"
        + "\"logit_bias\":{},\"suffix\":null,\"max_tokens\":null,\"seed\":null,\"stream\":false,"
        + "\"user\":null,\"n\":null}");
    awaitSubmitted(1);
    postAsync(ClientEndpoint.OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
        + "\"presence_penalty\":0,\"frequency_penalty\":0,\"logprobs\":false,"
        + "\"top_logprobs\":null,\"stop\":null,\"logit_bias\":null,\"tools\":[],"
        + "\"tool_choice\":\"none\",\"parallel_tool_calls\":true,\"functions\":null,"
        + "\"function_call\":null,\"response_format\":{\"type\":\"text\"},\"store\":false,"
        + "\"metadata\":{},\"service_tier\":\"auto\",\"modalities\":[\"text\"],\"n\":1}");
    awaitSubmitted(2);
    assertEquals(2, requests.size());
  }

  /**
   * {@code "stream_options": {}} asks for nothing, so without a stream it is accepted, as vLLM
   * does; a non-empty one without a stream is still refused (in the table of 400s).
   */
  @Test
  void emptyStreamOptionsWithoutAStreamAreAccepted() throws Exception {
    start();
    CompletableFuture<HttpResponse<String>> whole = postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"a\",\"max_tokens\":1,\"stream_options\":{}}");
    awaitSubmitted(1);
    CompletableFuture<HttpResponse<String>> notStreamed = postAsync(ClientEndpoint.OPENAI_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":1,"
            + "\"stream\":false,\"stream_options\":{}}");
    awaitSubmitted(2);
    futures.get(0).complete(response(requests.get(0).id(), new int[] {'o'}, "", 0));
    futures.get(1).complete(response(requests.get(1).id(), new int[] {'o'}, "", 0));
    for (HttpResponse<String> r : List.of(whole.get(20, TimeUnit.SECONDS),
        notStreamed.get(20, TimeUnit.SECONDS))) {
      assertEquals(200, r.statusCode(), r.body());
      assertTrue(r.headers().firstValue("Content-Type").orElse("").startsWith("application/json"),
          "answered whole: " + r.headers());
      assertNotNull(json(r.body()).get("usage"), r.body());
    }
  }

  /**
   * {@code stream_options.include_obfuscation: false} (OpenAI's, to save the padding's bytes)
   * asks for nothing: the stream is as without it; {@code true} is refused (in the table of 400s).
   */
  @Test
  void obfuscationTurnedOffIsAccepted() throws Exception {
    start();
    CompletableFuture<HttpResponse<String>> sent = postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"a\",\"max_tokens\":1,\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":true,\"include_obfuscation\":false}}");
    awaitSubmitted(1);
    futures.get(0).complete(response(requests.get(0).id(), new int[] {'o'}, "", 0));
    HttpResponse<String> r = sent.get(20, TimeUnit.SECONDS);
    assertEquals(200, r.statusCode(), r.body());
    assertTrue(r.body().contains("\"usage\""), "the usage chunk: " + r.body());
    assertFalse(r.body().contains("obfuscation"), r.body());
    assertTrue(r.body().trim().endsWith("data: [DONE]"), r.body());
  }

  /**
   * {@code safety_identifier} and {@code prompt_cache_key} (chat) are strings that change nothing
   * in the answer, as {@code user}: accepted and ignored, null as absent; another type is
   * refused naming the key; on completions, where OpenAI has neither, they are unknown.
   */
  @Test
  void identifiersAndCacheKeysAreAcceptedAndIgnored() throws Exception {
    start();
    String body = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":1,"
        + "\"safety_identifier\":\"hash-of-user-1\",\"prompt_cache_key\":\"tenant-7\",\"user\":\"u\"}";
    CompletableFuture<HttpResponse<String>> sent = postAsync(ClientEndpoint.OPENAI_CHAT, body);
    awaitSubmitted(1);
    CompletableFuture<HttpResponse<String>> nulls = postAsync(ClientEndpoint.OPENAI_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":1,"
            + "\"safety_identifier\":null,\"prompt_cache_key\":null}");
    awaitSubmitted(2);
    futures.get(0).complete(response(requests.get(0).id(), new int[] {'o'}, "", 0));
    futures.get(1).complete(response(requests.get(1).id(), new int[] {'o'}, "", 0));
    assertEquals(200, sent.get(20, TimeUnit.SECONDS).statusCode());
    assertEquals(200, nulls.get(20, TimeUnit.SECONDS).statusCode());
    // the same prompt with and without them: the same tokens, the same cache scope
    assertEquals(Arrays.toString(requests.get(0).tokens()), Arrays.toString(requests.get(1).tokens()));
    assertEquals(requests.get(0).scope(), requests.get(1).scope());
    for (String key : List.of("safety_identifier", "prompt_cache_key")) {
      HttpResponse<String> r = post(ClientEndpoint.OPENAI_CHAT,
          "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"" + key + "\":7}");
      assertEquals(400, r.statusCode(), key);
      Map<?, ?> error = map(json(r.body()).get("error"));
      assertEquals(key, error.get("param"), r.body());
      HttpResponse<String> c = post(ClientEndpoint.OPENAI_COMPLETIONS,
          "{\"prompt\":\"a\",\"" + key + "\":\"x\"}");
      assertEquals(400, c.statusCode(), key);
      assertEquals("unknown_parameter", map(json(c.body()).get("error")).get("code"), c.body());
    }
    assertEquals(2, requests.size());
  }

  /**
   * OpenAI's newer chat options, as a client that passes on unset ones sends them (the openai
   * Python client sends a {@code None} it is given as {@code null}), are absent; with a value
   * they ask for what the node cannot do, and are refused naming the key.
   */
  @Test
  void newerChatOptionsAreAbsentWhenNullAndRefusedWithAValue() throws Exception {
    start();
    String[][] options = {{"reasoning_effort", "\"low\""}, {"verbosity", "\"low\""},
        {"prediction", "{\"type\":\"content\",\"content\":\"x\"}"},
        {"audio", "{\"voice\":\"alloy\",\"format\":\"wav\"}"}, {"web_search_options", "{}"}};
    StringBuilder nulls = new StringBuilder();
    for (String[] o : options) {
      nulls.append(",\"").append(o[0]).append("\":null");
    }
    CompletableFuture<HttpResponse<String>> sent = postAsync(ClientEndpoint.OPENAI_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":1" + nulls + "}");
    awaitSubmitted(1);
    futures.get(0).complete(response(requests.get(0).id(), new int[] {'o'}, "", 0));
    assertEquals(200, sent.get(20, TimeUnit.SECONDS).statusCode());
    for (String[] o : options) {
      HttpResponse<String> r = post(ClientEndpoint.OPENAI_CHAT,
          "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"" + o[0] + "\":" + o[1] + "}");
      assertEquals(400, r.statusCode(), o[0]);
      Map<?, ?> error = map(json(r.body()).get("error"));
      assertEquals(o[0], error.get("param"), r.body());
      assertEquals("unsupported_parameter", error.get("code"), r.body());
    }
    assertEquals(1, requests.size());
  }

  /**
   * A conversation that sends an answer back as the openai Python client's {@code model_dump()}
   * of its message gives ({@code "refusal": null, "annotations": null, "audio": null,
   * "function_call": null, "tool_calls": null}), or as the Node client's streaming helper gives
   * it ({@code "refusal": null, "parsed": null}), and a message with {@code "name": null}, is
   * taken as if those keys were absent: the tokenizer gets the messages without them. The same
   * keys with a value are refused, naming them.
   */
  @Test
  void nullKeysOfAMessageAreAbsent() throws Exception {
    start();
    CompletableFuture<HttpResponse<String>> sent = postAsync(ClientEndpoint.OPENAI_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"name\":null},"
            + "{\"content\":\"ok\",\"refusal\":null,\"role\":\"assistant\",\"annotations\":null,"
            + "\"audio\":null,\"function_call\":null,\"tool_calls\":null,\"parsed\":null},"
            + "{\"role\":\"user\",\"content\":\"more\"}],\"max_tokens\":2}");
    awaitSubmitted(1);
    assertEquals(List.of(Map.of("role", "user", "content", "hi"),
        Map.of("role", "assistant", "content", "ok"),
        Map.of("role", "user", "content", "more")), tokenizer.calls.get(0).messages());
    futures.get(0).complete(response(requests.get(0).id(), new int[] {'o'}, "", 0));
    assertEquals(200, sent.get(20, TimeUnit.SECONDS).statusCode());

    for (String kv : new String[] {"\"tool_calls\":[]", "\"refusal\":\"no\"",
        "\"function_call\":{\"name\":\"f\",\"arguments\":\"{}\"}"}) {
      HttpResponse<String> r = post(ClientEndpoint.OPENAI_CHAT, "{\"messages\":[{\"role\":"
          + "\"assistant\",\"content\":\"ok\"," + kv + "}]}");
      assertEquals(400, r.statusCode(), kv);
      Map<?, ?> error = map(json(r.body()).get("error"));
      assertEquals("unsupported_parameter", error.get("code"), kv);
      String key = kv.substring(1, kv.indexOf('"', 1));
      assertTrue(((String) error.get("message")).contains("messages[0]." + key), r.body());
    }
    assertEquals(1, requests.size());
  }

  // ------------------------------------------------------------------------------ refusals

  @Test
  void everyRefusalIsA400InOpenAisShapeNamingTheKey() throws Exception {
    start();
    tokenizer.maxModelLen = 20;
    String chat = ClientEndpoint.OPENAI_CHAT;
    String cmpl = ClientEndpoint.OPENAI_COMPLETIONS;
    String msgs = "\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]";
    // {path, body, param, a word the message must have}
    String[][] cases = {
        {cmpl, "{\"prompt\":\"a\",\"stop\":[\"\\n\",7]}", "stop", "array of strings"},
        {cmpl, "{\"prompt\":\"a\",\"stop\":7}", "stop", "array of strings"},
        {cmpl, "{\"prompt\":\"a\",\"stop\":\"\"}", "stop", "1 to 256 chars"},
        {cmpl, "{\"prompt\":\"a\",\"stop\":[\"" + "x".repeat(257) + "\"]}", "stop",
            "1 to 256 chars"},
        {cmpl, "{\"prompt\":\"a\",\"stop\":[" + "\"x\",".repeat(16) + "\"y\"]}", "stop",
            "at most 16"},
        {cmpl, "{\"prompt\":\"a\",\"stop_token_ids\":[-1]}", "stop_token_ids", "token ids"},
        {cmpl, "{\"prompt\":\"a\",\"stop_token_ids\":[16777216]}", "stop_token_ids",
            "token ids"},
        {cmpl, "{\"prompt\":\"a\",\"stop_token_ids\":7}", "stop_token_ids", "array"},
        {cmpl, "{\"prompt\":\"a\",\"stop_token_ids\":[" + "1,".repeat(256) + "2]}",
            "stop_token_ids", "at most 256 ids, had 257"},
        {cmpl, "{\"prompt\":\"a\",\"stop_token_ids\":[1.5]}", "stop_token_ids", "token ids"},
        {cmpl, "{\"prompt\":\"a\",\"include_stop_str_in_output\":true}",
            "include_stop_str_in_output", "not supported"},
        {cmpl, "{\"prompt\":\"a\",\"presence_penalty\":0.5}", "presence_penalty", "not supported"},
        {cmpl, "{\"prompt\":\"a\",\"frequency_penalty\":1}", "frequency_penalty", "not supported"},
        {cmpl, "{\"prompt\":\"a\",\"logprobs\":2}", "logprobs", "not supported"},
        {cmpl, "{\"prompt\":\"a\",\"echo\":true}", "echo", "not supported"},
        {cmpl, "{\"prompt\":\"a\",\"best_of\":3}", "best_of", "not supported"},
        {cmpl, "{\"prompt\":\"a\",\"logit_bias\":{\"5\":100}}", "logit_bias", "not supported"},
        {cmpl, "{\"prompt\":\"a\",\"suffix\":\"end\"}", "suffix", "not supported"},
        {cmpl, "{\"prompt\":\"a\",\"n\":2}", "n", "not supported"},
        {cmpl, "{\"prompt\":\"a\",\"max_token\":2}", "max_token", "unknown key"},
        {cmpl, "{\"prompt\":\"a\",\"messages\":[]}", "messages", "unknown key"},
        {cmpl, "{\"prompt\":[\"a\",\"b\"]}", "prompt", "batch"},
        {cmpl, "{\"prompt\":[[1],[2]]}", "prompt", "batch"},
        {cmpl, "{\"prompt\":[1,-1]}", "prompt", "token id"},
        {cmpl, "{\"prompt\":[]}", "prompt", "no tokens"},
        {cmpl, "{\"prompt\":7}", "prompt", "string"},
        {cmpl, "{}", "prompt", "required"},
        {cmpl, "{\"prompt\":\"" + "a".repeat(20) + "\"}", "prompt", "no room"},
        {cmpl, "{\"prompt\":\"abc\",\"max_tokens\":18}", "max_tokens", "at most 17"},
        {cmpl, "{\"prompt\":\"a\",\"max_tokens\":0}", "max_tokens", "max_tokens must be"},
        {cmpl, "{\"prompt\":\"a\",\"temperature\":-1}", "temperature", "temperature must be"},
        {cmpl, "{\"prompt\":\"a\",\"top_p\":0}", "top_p", "top_p must be"},
        {cmpl, "{\"prompt\":\"a\",\"seed\":1.5}", "seed", "integer"},
        {cmpl, "{\"prompt\":\"a\",\"stream\":\"yes\"}", "stream", "true or false"},
        {cmpl, "{\"prompt\":\"a\",\"stream_options\":{\"include_usage\":true}}",
            "stream_options", "stream"},
        {cmpl, "{\"prompt\":\"a\",\"stream\":true,\"stream_options\":{\"continuous_usage_stats\":"
            + "1}}", "stream_options", "continuous_usage_stats must be true or false"},
        {cmpl, "{\"prompt\":\"a\",\"stream\":true,\"stream_options\":{\"include_obfuscation\":"
            + "true}}", "stream_options", "stream_options.include_obfuscation is not supported"},
        {cmpl, "{\"prompt\":\"a\",\"model\":7}", "model", "string"},
        {cmpl, "{\"prompt\":\"a\",\"cache_salt\":\"a\\nb\"}", "cache_salt", "control"},
        {chat, "{" + msgs + ",\"tools\":[{\"type\":\"function\"}]}", "tools", "not supported"},
        {chat, "{" + msgs + ",\"tool_choice\":\"required\"}", "tool_choice", "not supported"},
        {chat, "{" + msgs + ",\"response_format\":{\"type\":\"json_object\"}}",
            "response_format", "not supported"},
        {chat, "{" + msgs + ",\"logprobs\":true}", "logprobs", "not supported"},
        {chat, "{" + msgs + ",\"top_logprobs\":3}", "top_logprobs", "not supported"},
        {chat, "{" + msgs + ",\"stop\":[\"END\",null]}", "stop", "array of strings"},
        {chat, "{" + msgs + ",\"stop_token_ids\":[\"2\"]}", "stop_token_ids", "token ids"},
        {chat, "{" + msgs + ",\"include_stop_str_in_output\":true}",
            "include_stop_str_in_output", "not supported"},
        {chat, "{" + msgs + ",\"n\":3}", "n", "not supported"},
        {chat, "{" + msgs + ",\"echo\":false}", "echo", "unknown key"},
        {chat, "{" + msgs + ",\"prompt\":\"a\"}", "prompt", "unknown key"},
        // a long unknown key is echoed shortened, whole code points (here 😀, two chars each)
        {cmpl, "{\"prompt\":\"a\",\"" + "\ud83d\ude00".repeat(5_000) + "\":1}",
            "\ud83d\ude00".repeat(64) + "...", "unknown key"},
        // and so are those of nested objects
        {chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"" + "k".repeat(5_000)
            + "\":1}]}", "messages", "messages[0]." + "k".repeat(64) + "... is not"},
        {chat, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\","
            + "\"" + "k".repeat(5_000) + "\":1}]}]}", "messages",
            "messages[0].content[0]." + "k".repeat(64) + "... is not"},
        {chat, "{" + msgs + ",\"stream\":true,\"stream_options\":{\"" + "k".repeat(5_000)
            + "\":true}}", "stream_options", "stream_options." + "k".repeat(64) + "... is not"},
        {chat, "{" + msgs + ",\"chat_template_kwargs\":[1]}", "chat_template_kwargs", "object"},
        {chat, "{" + msgs + ",\"max_completion_tokens\":-1}", "max_completion_tokens",
            "max_completion_tokens must be"},
        {chat, "{" + msgs + ",\"max_tokens\":7}", "max_tokens", "at most 3"},
        {chat, "{" + msgs + ",\"max_completion_tokens\":4}", "max_completion_tokens", "at most 3"},
        {chat, "{}", "messages", "required"},
        {chat, "{\"messages\":[]}", "messages", "at least one"},
        {chat, "{\"messages\":{\"role\":\"user\"}}", "messages", "array"},
        {chat, "{\"messages\":[\"hi\"]}", "messages", "messages[0] must be an object"},
        {chat, "{\"messages\":[{\"content\":\"a\"}]}", "messages", "messages[0].role"},
        {chat, "{\"messages\":[{\"role\":\"user\"}]}", "messages", "messages[0].content"},
        {chat, "{\"messages\":[{\"role\":\"user\",\"content\":null}]}", "messages",
            "only an assistant"},
        {chat, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages",
            "messages[0].content must be"},
        {chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"tool_calls\":[]}]}",
            "messages", "messages[0].tool_calls"},
        {chat, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
            + "\"image_url\":{\"url\":\"http://x/y.png\"}}]}]}", "messages", "\"image_url\""},
        {chat, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
            "messages", "messages[0].content[0].text"},
        {chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"abcdefgh\"}]}", "messages",
            "no room"},
    };
    for (String[] c : cases) {
      HttpResponse<String> resp = post(c[0], c[1]);
      assertEquals(400, resp.statusCode(), c[1] + " -> " + resp.body());
      Map<?, ?> error = map(json(resp.body()).get("error"));
      assertEquals(List.of("message", "type", "param", "code"), List.copyOf(error.keySet()),
          resp.body());
      assertEquals("invalid_request_error", error.get("type"), resp.body());
      assertEquals(c[2], error.get("param"), c[1] + " -> " + resp.body());
      String message = (String) error.get("message");
      assertTrue(message.contains(c[2]), c[1] + " -> the message names the key: " + message);
      assertTrue(message.contains(c[3]), c[1] + " -> " + message);
    }
    assertTrue(requests.isEmpty(), "nothing refused was submitted");
    assertEquals(0, endpoint.inFlight());
    // bodies that are not JSON objects, and methods
    for (String body : new String[] {"", "not json", "[1]", "{\"prompt\":"}) {
      HttpResponse<String> resp = post(cmpl, body);
      assertEquals(400, resp.statusCode(), body);
      assertEquals("invalid_request_error", map(json(resp.body()).get("error")).get("type"));
    }
    HttpResponse<String> getChat = get(chat);
    assertEquals(405, getChat.statusCode());
    assertEquals("POST", getChat.headers().firstValue("Allow").orElse(null));
  }

  // ----------------------------------------------------------------------------- streaming

  /** The events of a whole stream; the last must be [DONE]. */
  private static List<Map<?, ?>> chunks(HttpResponse<InputStream> resp) throws IOException {
    return Sse.chunks(new String(resp.body().readAllBytes(), StandardCharsets.UTF_8));
  }

  @Test
  void aStreamedChatIsChunksWithTheRoleFirstThenTheFinishThenUsageThenDone() throws Exception {
    start();
    String body = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":5,"
        + "\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
    CompletableFuture<HttpResponse<InputStream>> sent = postStreaming(ClientEndpoint.OPENAI_CHAT,
        body);
    awaitSubmitted(1);
    OutputListener l = listeners.get(0);
    l.onOutput(new int[] {'H', 'e'}, "");
    l.onOutput(new int[0], "");
    l.onOutput(new int[] {'l'}, "");
    l.onOutput(new int[] {'l', 'o'}, "");
    InferenceResponse done = response("solo-c1", new int[] {'H', 'e', 'l', 'l', 'o'}, "", 12);
    futures.get(0).complete(done);
    HttpResponse<InputStream> resp = sent.get(20, TimeUnit.SECONDS);
    assertEquals(200, resp.statusCode());
    assertEquals("text/event-stream; charset=utf-8",
        resp.headers().firstValue("Content-Type").orElse(null));
    List<Map<?, ?>> chunks = chunks(resp);
    assertEquals(5, chunks.size(), chunks.toString()); // three pieces, the finish, the usage
    long seed = drawnSeeds(1)[0];
    for (int i = 0; i < 3; i++) {
      Map<String, Object> delta = i == 0 ? ordered("role", "assistant", "content", "He")
          : ordered("content", i == 1 ? "l" : "lo");
      assertEquals(ordered("id", "chatcmpl-solo-c1", "object", "chat.completion.chunk",
          "created", NOW, "model", "base",
          "choices", List.of(ordered("index", 0L, "delta", delta, "logprobs", Json.NULL,
              "finish_reason", Json.NULL)),
          "usage", Json.NULL), chunks.get(i), "chunk " + i);
    }
    assertEquals(ordered("id", "chatcmpl-solo-c1", "object", "chat.completion.chunk",
        "created", NOW, "model", "base",
        "choices", List.of(ordered("index", 0L, "delta", Map.of(), "logprobs", Json.NULL,
            "finish_reason", "length", "stop_reason", Json.NULL)),
        "usage", Json.NULL,
        "prefix_router", routing("solo-c1", seed)), chunks.get(3));
    assertEquals(ordered("id", "chatcmpl-solo-c1", "object", "chat.completion.chunk",
        "created", NOW, "model", "base", "choices", List.of(),
        "usage", ordered("prompt_tokens", 30L, "completion_tokens", 5L, "total_tokens", 35L,
            "prompt_tokens_details", Map.of("cached_tokens", 12L))), chunks.get(4));
    Await.until(() -> endpoint.openStreams() == 0 && endpoint.inFlight() == 0, "the stream is closed");

    // the same output not streamed: the chunks joined are its text, the usage its count
    CompletableFuture<HttpResponse<String>> whole = postAsync(ClientEndpoint.OPENAI_CHAT,
        body.replace(",\"stream\":true,\"stream_options\":{\"include_usage\":true}", ""));
    awaitSubmitted(2);
    futures.get(1).complete(done);
    Map<?, ?> answer = json(whole.get(20, TimeUnit.SECONDS).body());
    StringBuilder joined = new StringBuilder();
    for (Map<?, ?> c : chunks) {
      for (Object choice : (List<?>) c.get("choices")) {
        Object content = map(map(choice).get("delta")).get("content");
        joined.append(content == null ? "" : content);
      }
    }
    Map<?, ?> message = map(map(((List<?>) answer.get("choices")).get(0)).get("message"));
    assertEquals(message.get("content"), joined.toString());
    assertEquals(answer.get("usage"), chunks.get(4).get("usage"));
  }

  /**
   * vLLM's {@code "stream_options": {"include_usage": true, "continuous_usage_stats": true}},
   * as scripts written for vLLM send it: every chunk carries the usage so far (the prompt's
   * tokens, the output tokens through its piece), the finishing chunk the whole usage, then the
   * usage chunk. {@code continuous_usage_stats} without {@code include_usage}, or {@code false},
   * gives what a stream without it gives, as vLLM's does.
   */
  @Test
  void continuousUsageStatsPutTheUsageSoFarInEveryChunk() throws Exception {
    start();
    String body = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":5,"
        + "\"stream\":true,\"stream_options\":{\"include_usage\":true,"
        + "\"continuous_usage_stats\":true}}";
    CompletableFuture<HttpResponse<InputStream>> sent = postStreaming(ClientEndpoint.OPENAI_CHAT,
        body);
    awaitSubmitted(1);
    long prompt = requests.get(0).tokens().length;
    OutputListener l = listeners.get(0);
    l.onOutput(new int[] {'H', 'e'}, "");
    l.onOutput(new int[] {'l'}, "");
    futures.get(0).complete(response("solo-c1", new int[] {'H', 'e', 'l'}, "", 12));
    HttpResponse<InputStream> resp = sent.get(20, TimeUnit.SECONDS);
    assertEquals(200, resp.statusCode());
    List<Map<?, ?>> chunks = chunks(resp);
    assertEquals(4, chunks.size(), chunks.toString()); // two pieces, the finish, the usage
    assertEquals(ordered("prompt_tokens", prompt, "completion_tokens", 2L,
        "total_tokens", prompt + 2), chunks.get(0).get("usage"));
    assertEquals(ordered("prompt_tokens", prompt, "completion_tokens", 3L,
        "total_tokens", prompt + 3), chunks.get(1).get("usage"));
    Map<String, Object> whole = ordered("prompt_tokens", 30L, "completion_tokens", 3L,
        "total_tokens", 33L, "prompt_tokens_details", Map.of("cached_tokens", 12L));
    assertEquals("stop", map(((List<?>) chunks.get(2).get("choices")).get(0))
        .get("finish_reason"), "max_tokens 5, 3 tokens: the engine ended it");
    assertEquals(whole, chunks.get(2).get("usage"));
    assertEquals(List.of(), chunks.get(3).get("choices"));
    assertEquals(whole, chunks.get(3).get("usage"));

    // without include_usage, or false: no usage in the chunks, as without it
    String[] options = {"{\"continuous_usage_stats\":true}",
        "{\"include_usage\":true,\"continuous_usage_stats\":false}",
        "{\"include_usage\":false,\"continuous_usage_stats\":null}"};
    for (int i = 0; i < options.length; i++) {
      CompletableFuture<HttpResponse<InputStream>> s = postStreaming(ClientEndpoint.OPENAI_CHAT,
          body.replaceFirst("\"stream_options\":\\{.*\\}\\}$",
              "\"stream_options\":" + options[i] + "}"));
      awaitSubmitted(2 + i);
      listeners.get(1 + i).onOutput(new int[] {'H'}, "");
      futures.get(1 + i).complete(response(requests.get(1 + i).id(), new int[] {'H'}, "", 0));
      HttpResponse<InputStream> r = s.get(20, TimeUnit.SECONDS);
      assertEquals(200, r.statusCode(), options[i]);
      List<Map<?, ?>> c = chunks(r);
      boolean include = i == 1;
      assertEquals(include ? 3 : 2, c.size(), options[i] + ": " + c);
      for (Map<?, ?> chunk : c.subList(0, 2)) {
        assertEquals(include, chunk.containsKey("usage"), options[i]);
        assertTrue(!include || chunk.get("usage") == Json.NULL, options[i]);
      }
    }
  }

  @Test
  void aStreamedCompletionWithoutUsageHasNoUsageKeyAndCarriesTheRestAtTheFinish()
      throws Exception {
    start();
    CompletableFuture<HttpResponse<InputStream>> sent = postStreaming(
        ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"hey\",\"max_tokens\":8,\"stream\":true,\"stream_options\":"
            + "{\"include_usage\":false}}");
    awaitSubmitted(1);
    listeners.get(0).onOutput(new int[] {1}, "ab");
    // the node gave only part of the output as pieces: the finish chunk carries the rest
    InferenceResponse done = response("solo-c1", new int[] {1, 2, 3}, "abcd", 5);
    futures.get(0).complete(done);
    List<Map<?, ?>> chunks = chunks(sent.get(20, TimeUnit.SECONDS));
    assertEquals(2, chunks.size(), chunks.toString());
    assertEquals(ordered("id", "cmpl-solo-c1", "object", "text_completion", "created", NOW,
        "model", "base", "choices", List.of(ordered("index", 0L, "text", "ab",
            "logprobs", Json.NULL, "finish_reason", Json.NULL))), chunks.get(0));
    Map<?, ?> last = chunks.get(1);
    assertFalse(last.containsKey("usage"));
    assertEquals(List.of(ordered("index", 0L, "text", "cd", "logprobs", Json.NULL,
        "finish_reason", "stop", "stop_reason", Json.NULL)), last.get("choices"));
    assertEquals("peer-b", map(last.get("prefix_router")).get("served_by"));

    // round trip: joined texts equal the whole answer's
    CompletableFuture<HttpResponse<String>> whole = postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"hey\",\"max_tokens\":8}");
    awaitSubmitted(2);
    futures.get(1).complete(done);
    Map<?, ?> answer = json(whole.get(20, TimeUnit.SECONDS).body());
    String joined = "";
    for (Map<?, ?> c : chunks) {
      joined += map(((List<?>) c.get("choices")).get(0)).get("text");
    }
    assertEquals(map(((List<?>) answer.get("choices")).get(0)).get("text"), joined);

    // a request that ends without any piece: the finish chunk carries the role and the text
    CompletableFuture<HttpResponse<InputStream>> chat = postStreaming(ClientEndpoint.OPENAI_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}");
    awaitSubmitted(3);
    futures.get(2).complete(response("solo-c3", new int[] {'o', 'k'}, "", 1));
    chunks = chunks(chat.get(20, TimeUnit.SECONDS));
    assertEquals(1, chunks.size(), chunks.toString());
    assertEquals(ordered("role", "assistant", "content", "ok"),
        map(((List<?>) chunks.get(0).get("choices")).get(0)).get("delta"));
  }

  @Test
  void aStreamedFailureBeforeTheFirstPieceIsTheStatusAnswerAndAfterItAnErrorEvent()
      throws Exception {
    start();
    String body = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}";
    CompletableFuture<HttpResponse<InputStream>> before = postStreaming(ClientEndpoint.OPENAI_CHAT,
        body);
    awaitSubmitted(1);
    futures.get(0).completeExceptionally(new RequestFailedException("solo-c1", "busy everywhere",
        new EngineBusyException("engine busy")));
    HttpResponse<InputStream> resp = before.get(20, TimeUnit.SECONDS);
    assertEquals(503, resp.statusCode());
    assertEquals("1", resp.headers().firstValue("Retry-After").orElse(null));
    assertEquals(Map.of("error", ordered("message", "request solo-c1: busy everywhere",
        "type", "overloaded_error", "param", Json.NULL, "code", "busy")),
        Json.parse(new String(resp.body().readAllBytes(), StandardCharsets.UTF_8)));

    CompletableFuture<HttpResponse<InputStream>> after = postStreaming(ClientEndpoint.OPENAI_CHAT,
        body);
    awaitSubmitted(2);
    listeners.get(1).onOutput(new int[] {'a'}, "");
    resp = after.get(20, TimeUnit.SECONDS);
    assertEquals(200, resp.statusCode());
    BufferedReader in = new BufferedReader(new InputStreamReader(resp.body(),
        StandardCharsets.UTF_8));
    Map<?, ?> first = map(Sse.next(in));
    assertEquals("a", map(map(((List<?>) first.get("choices")).get(0)).get("delta"))
        .get("content"));
    futures.get(1).completeExceptionally(new RequestFailedException("solo-c2", "late",
        new EngineTimeoutException("no answer within 60000 ms", null)));
    assertEquals(Map.of("error", ordered("message", "request solo-c2: late", "type", "server_error",
        "param", Json.NULL, "code", "timeout")), Sse.next(in));
    assertNull(Sse.next(in), "the stream ends after the error, without [DONE]");
    Await.until(() -> endpoint.inFlight() == 0 && endpoint.openStreams() == 0, "all released");
  }

  @Test
  void nodeFailuresOfWholeAnswersAreOpenAiErrorsWithTheRouteStatuses() throws Exception {
    start();
    Map<Integer, RuntimeException> failures = new LinkedHashMap<>();
    failures.put(504, new RequestFailedException("q", "late",
        new EngineTimeoutException("no answer", null)));
    failures.put(502, new RequestFailedException("q", "failed everywhere",
        new EngineException("HTTP 500", true)));
    failures.put(503, new RequestFailedException("q", "busy everywhere",
        new EngineBusyException("busy")));
    String[] types = {"server_error", "server_error", "overloaded_error"};
    String[] codes = {"timeout", "failed", "busy"};
    int n = 0;
    for (Map.Entry<Integer, RuntimeException> f : failures.entrySet()) {
      CompletableFuture<HttpResponse<String>> sent = postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
          "{\"prompt\":\"x\"}");
      awaitSubmitted(++n);
      futures.get(n - 1).completeExceptionally(f.getValue());
      HttpResponse<String> resp = sent.get(20, TimeUnit.SECONDS);
      assertEquals(f.getKey(), resp.statusCode(), resp.body());
      assertEquals(Map.of("error", ordered("message", f.getValue().getMessage(),
          "type", types[n - 1], "param", Json.NULL, "code", codes[n - 1])), json(resp.body()));
      assertEquals(f.getKey() == 503 ? "1" : null,
          resp.headers().firstValue("Retry-After").orElse(null));
    }
  }

  /** A response whose routing decision cannot be read: a bug while its answer is written. */
  private static InferenceResponse breaking(InferenceResponse r) {
    InferenceResponse bad = spy(r);
    doThrow(new IllegalStateException("a response that breaks")).when(bad).decision();
    return bad;
  }

  /** A failure whose cause cannot be read: a bug while its status answer is written. */
  private static RuntimeException unreadableFailure() {
    return new RuntimeException("failed") {
      private static final long serialVersionUID = 1L;

      @Override
      public synchronized Throwable getCause() {
        throw new IllegalStateException("a failure that breaks");
      }
    };
  }

  private static final Map<String, Object> INTERNAL = Map.of("error", ordered("message",
      ClientEndpoint.INTERNAL_ERROR_MESSAGE, "type", "server_error", "param", Json.NULL,
      "code", "internal"));

  @Test
  void anAnswerWhoseWriteThrowsIsAnInternal500NotAnExchangeLeftOpen() throws Exception {
    start();
    CompletableFuture<HttpResponse<String>> sent = postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"x\"}");
    awaitSubmitted(1);
    futures.get(0).complete(breaking(response(requests.get(0).id(), new int[] {'o'}, "o", 0)));
    HttpResponse<String> resp = sent.get(10, TimeUnit.SECONDS);
    assertEquals(500, resp.statusCode(), resp.body());
    assertEquals(INTERNAL, json(resp.body()));

    // a status answer whose write throws, on the OpenAI route and on the route's own
    sent = postAsync(ClientEndpoint.OPENAI_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    awaitSubmitted(2);
    futures.get(1).completeExceptionally(unreadableFailure());
    resp = sent.get(10, TimeUnit.SECONDS);
    assertEquals(500, resp.statusCode(), resp.body());
    assertEquals(INTERNAL, json(resp.body()));
    sent = postAsync(ClientEndpoint.COMPLETIONS, "{\"id\":\"r1\",\"prompt\":[1,2,3]}");
    awaitSubmitted(3);
    futures.get(2).completeExceptionally(unreadableFailure());
    resp = sent.get(10, TimeUnit.SECONDS);
    assertEquals(500, resp.statusCode(), resp.body());
    assertEquals(Map.of("error", ClientEndpoint.INTERNAL_ERROR_MESSAGE), json(resp.body()));

    // the writers still answer
    sent = postAsync(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}");
    awaitSubmitted(4);
    futures.get(3).complete(response(requests.get(3).id(), new int[] {'o'}, "o", 0));
    assertEquals(200, sent.get(10, TimeUnit.SECONDS).statusCode());
    assertEquals(0, endpoint.inFlight());
  }

  @Test
  void aStreamWhoseWriteThrowsEndsWithAnInternalErrorNotAStreamLeftOpen() throws Exception {
    start();
    String body = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}";
    // before the first piece: the status answer of a failure whose message cannot be read
    CompletableFuture<HttpResponse<InputStream>> before = postStreaming(ClientEndpoint.OPENAI_CHAT,
        body);
    awaitSubmitted(1);
    futures.get(0).completeExceptionally(unreadableFailure());
    HttpResponse<InputStream> resp = before.get(10, TimeUnit.SECONDS);
    assertEquals(500, resp.statusCode());
    assertEquals(INTERNAL, Json.parse(new String(resp.body().readAllBytes(),
        StandardCharsets.UTF_8)));

    // after it: an error event, and the stream ends without [DONE]
    CompletableFuture<HttpResponse<InputStream>> after = postStreaming(ClientEndpoint.OPENAI_CHAT,
        body);
    awaitSubmitted(2);
    listeners.get(1).onOutput(new int[] {'a'}, "");
    resp = after.get(10, TimeUnit.SECONDS);
    assertEquals(200, resp.statusCode());
    BufferedReader in = new BufferedReader(new InputStreamReader(resp.body(),
        StandardCharsets.UTF_8));
    Sse.next(in);
    futures.get(1).complete(breaking(response(requests.get(1).id(), new int[] {'a'}, "", 0)));
    CompletableFuture<Object> event = CompletableFuture.supplyAsync(() -> {
      try {
        return Sse.next(in);
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    });
    assertEquals("internal", map(map(event.get(10, TimeUnit.SECONDS)).get("error")).get("code"));
    assertNull(Sse.next(in), "the stream ends after the error, without [DONE]");
    Await.until(() -> endpoint.inFlight() == 0 && endpoint.openStreams() == 0, "all released");
  }

  // -------------------------------------------------------------------- tokenizer failures

  private Map<?, ?> clientStats() throws Exception {
    return map(json(get(ClientEndpoint.STATS).body()).get("client"));
  }

  @Test
  void aPromptTheTokenizerRefusesIsA400WithItsMessageAndAFaultA502() throws Exception {
    start();
    tokenizer.mode = FakeTokenizer.Mode.INVALID;
    HttpResponse<String> invalid = post(ClientEndpoint.OPENAI_CHAT,
        "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}");
    assertEquals(400, invalid.statusCode(), invalid.body());
    assertEquals(Map.of("error", ordered(
        "message", "the model server refused it: unknown role \"robot\"",
        "type", "invalid_request_error", "param", "messages", "code", "invalid_prompt")),
        json(invalid.body()));

    tokenizer.mode = FakeTokenizer.Mode.FAULT;
    HttpResponse<String> fault = post(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}");
    assertEquals(502, fault.statusCode(), fault.body());
    Map<?, ?> error = map(json(fault.body()).get("error"));
    assertEquals("server_error", error.get("type"));
    assertEquals("tokenizer_failed", error.get("code"));
    assertTrue(((String) error.get("message")).contains("HTTP 500"), fault.body());

    tokenizer.mode = FakeTokenizer.Mode.THROW;
    HttpResponse<String> thrown = post(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}");
    assertEquals(502, thrown.statusCode(), thrown.body());
    assertTrue(thrown.body().contains("a tokenizer that throws"), thrown.body());

    tokenizer.mode = FakeTokenizer.Mode.BAD_IDS;
    HttpResponse<String> badIds = post(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}");
    assertEquals(502, badIds.statusCode(), badIds.body());
    assertEquals("tokenizer_failed", map(json(badIds.body()).get("error")).get("code"));
    assertTrue(badIds.body().contains("-5"), badIds.body());

    assertTrue(requests.isEmpty());
    assertEquals(0, endpoint.inFlight());
    Map<?, ?> stats = clientStats();
    assertEquals(3L, stats.get("tokenize_failures"));
    assertEquals(1L, stats.get("tokenize_refused"));
  }

  /**
   * A tokenization whose answer could not get its share of the tokenizer's answer budget is this
   * node's shortage of heap, not a tokenizer failure: 503 with {@code Retry-After}, OpenAI's
   * {@code busy}, counted in {@code rejected_busy} and not in {@code tokenize_failures}, whole or
   * streamed, text or chat; nothing is submitted and every slot is given back.
   */
  @Test
  void aTokenizationRefusedItsShareOfTheAnswerBudgetIsA503BusyNotATokenizerFailure()
      throws Exception {
    start();
    tokenizer.mode = FakeTokenizer.Mode.BUDGET_REFUSED;
    List<String[]> sent = List.of(
        new String[] {ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}"},
        new String[] {ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\",\"stream\":true}"},
        new String[] {ClientEndpoint.OPENAI_CHAT,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}"},
        new String[] {ClientEndpoint.OPENAI_CHAT,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}"});
    for (String[] r : sent) {
      HttpResponse<String> resp = post(r[0], r[1]);
      assertEquals(503, resp.statusCode(), "a tokenization refused its share of the tokenizer's "
          + "answer budget (" + r[0] + " " + r[1] + ") was answered " + resp.statusCode() + ": "
          + resp.body());
      assertEquals("1", resp.headers().firstValue("Retry-After").orElse(null),
          "no Retry-After: " + resp.body());
      Map<?, ?> error = map(json(resp.body()).get("error"));
      assertEquals("busy", error.get("code"), resp.body());
      assertEquals("overloaded_error", error.get("type"), resp.body());
      assertTrue(String.valueOf(error.get("message")).contains("could not get its share"),
          resp.body());
    }
    assertTrue(requests.isEmpty());
    assertEquals(0, endpoint.inFlight());
    Map<?, ?> stats = clientStats();
    assertEquals(0L, stats.get("tokenize_failures"),
        "refusals of the tokenizer's answer budget counted as tokenizer failures: " + stats);
    assertEquals((long) sent.size(), stats.get("rejected_busy"), stats.toString());
  }

  @Test
  void aTokenizationThatNeverCompletesIsBoundedAndReleasesItsSlot() throws Exception {
    start(Duration.ofMillis(300), 1, "base", tokenizer);
    tokenizer.mode = FakeTokenizer.Mode.NEVER;
    CompletableFuture<HttpResponse<String>> first = postAsync(ClientEndpoint.OPENAI_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    Await.until(() -> tokenizer.calls.size() == 1, "tokenizing");
    // the tokenization holds the only in-flight slot, as a request would
    assertEquals(1, endpoint.inFlight());
    HttpResponse<String> busy = post(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":[1]}");
    assertEquals(503, busy.statusCode(), busy.body());
    assertEquals("busy", map(json(busy.body()).get("error")).get("code"));

    HttpResponse<String> resp = first.get(20, TimeUnit.SECONDS);
    assertEquals(504, resp.statusCode(), resp.body());
    Map<?, ?> error = map(json(resp.body()).get("error"));
    assertEquals("tokenizer_timeout", error.get("code"));
    assertEquals("server_error", error.get("type"));
    assertTrue(tokenizer.calls.get(0).future().isCancelled(), "the tokenizer's call is cancelled");
    Await.until(() -> endpoint.inFlight() == 0, "the slot is released");
    assertEquals(0, endpoint.tokenizationsUnderWay());
    assertEquals(1L, clientStats().get("tokenize_failures"));
    assertTrue(requests.isEmpty());

    // the slot is free again
    tokenizer.mode = FakeTokenizer.Mode.TOKENS;
    postAsync(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"ok\"}");
    awaitSubmitted(1);
  }

  /**
   * A model server whose {@code /tokenize} never answers, behind the engine's tokenizer with the
   * timeout {@code NodeMain} gives it, the endpoint's I/O timeout: whichever of the two gives up
   * first, the client gets the documented 504 {@code tokenizer_timeout}. The tokenizer's own
   * timer starts first (it is set as the call is made, the endpoint's just after), so it used to
   * win the race and the client got a 502 {@code tokenizer_failed}.
   */
  @Test
  void aModelServerThatNeverAnswersTheTokenizeCallIsATimeout() throws Exception {
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    com.sun.net.httpserver.HttpServer server = io.github.prefixrouter.internal.wire.JdkHttpServers
        .create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.setExecutor(java.util.concurrent.Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, "silent-tokenize-server");
      t.setDaemon(true);
      return t;
    }));
    server.createContext("/tokenize", ex -> {
      try (ex) {
        ex.getRequestBody().readAllBytes();
        release.await(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    server.start();
    Duration timeout = Duration.ofMillis(400);
    EngineTokenizer silent = new EngineTokenizer(EngineTokenizer.tokenizeUri(
        "http://127.0.0.1:" + server.getAddress().getPort()), null, Duration.ofSeconds(2),
        timeout, EngineTokenizer.DEFAULT_MAX_ANSWER_BYTES);
    try {
      start(timeout, 64, "base", silent);
      List<CompletableFuture<HttpResponse<String>>> sent = new java.util.ArrayList<>();
      for (int i = 0; i < 4; i++) {
        sent.add(postAsync(ClientEndpoint.OPENAI_CHAT,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"q" + i + "\"}]}"));
      }
      for (CompletableFuture<HttpResponse<String>> f : sent) {
        HttpResponse<String> resp = f.get(20, TimeUnit.SECONDS);
        assertEquals(504, resp.statusCode(), resp.body());
        assertEquals("tokenizer_timeout", map(json(resp.body()).get("error")).get("code"),
            resp.body());
      }
      Await.until(() -> endpoint.inFlight() == 0, "the slots are released");
      assertEquals(4L, clientStats().get("tokenize_failures"));
      assertTrue(requests.isEmpty());
    } finally {
      release.countDown();
      endpoint.stop();
      endpoint = null;
      silent.close();
      server.stop(0);
    }
  }

  /**
   * A model server whose {@code /tokenize} answers every call with nearly 4 MiB and holds it open,
   * behind the engine's tokenizer with a cap of 4 MiB: the calls beyond the tokenizer's answer
   * budget (52 MiB for that cap: about twelve such answers) cannot get their share, and their
   * clients get 503 with {@code Retry-After} (OpenAI's {@code busy}), counted in
   * {@code rejected_busy}, one a second or so after the last share was given: the node is short of
   * heap for a while, as when its body budget refuses a request, and the tokenizer did nothing
   * wrong. (They used to get 502 {@code tokenizer_failed}, counted in {@code tokenize_failures}.)
   * The calls held open end as the tokenizer's fault when their server goes (502), every slot is
   * released and the budget is whole again. All the calls used to be read into the heap at once,
   * each holding its 4 MiB until the server went.
   */
  @Test
  void aTokenizeAnswerThatCannotGetItsShareOfTheBudgetIsA503Busy() throws Exception {
    int n = 16;
    HoldingAnswerServer server = new HoldingAnswerServer(4 << 20, false);
    try {
      EngineTokenizer held = new EngineTokenizer(server.uri("/tokenize"), null,
          Duration.ofSeconds(2), Duration.ofSeconds(60), 4 << 20);
      try {
        start(Duration.ofSeconds(60), 64, "base", held);
        List<CompletableFuture<HttpResponse<String>>> sent = new java.util.ArrayList<>();
        for (int i = 0; i < n; i++) {
          sent.add(postAsync(ClientEndpoint.OPENAI_CHAT,
              "{\"messages\":[{\"role\":\"user\",\"content\":\"q" + i + "\"}]}"));
        }
        // the calls beyond the budget are refused a second or so apart, each refusal giving the
        // others room, until those left fit: settled once each call left holds its whole answer
        server.awaitSettled(sent, () -> held.stats().answerBudgetHeldBytes(),
            Duration.ofSeconds(60));
        assertTrue(sent.stream().anyMatch(CompletableFuture::isDone),
            "no call was refused its share, " + server.held() + " answers held open");
        List<CompletableFuture<HttpResponse<String>>> refused = new java.util.ArrayList<>();
        for (CompletableFuture<HttpResponse<String>> f : sent) {
          if (f.isDone()) {
            refused.add(f);
            HttpResponse<String> resp = f.get();
            assertEquals(503, resp.statusCode(), "a tokenization refused its share of the "
                + "tokenizer's answer budget was answered " + resp.statusCode() + ", not 503: "
                + resp.body());
            assertEquals("1", resp.headers().firstValue("Retry-After").orElse(null),
                "no Retry-After on the answer to a tokenization refused its share of the "
                    + "tokenizer's answer budget: " + resp.body());
            Map<?, ?> error = map(json(resp.body()).get("error"));
            assertEquals("busy", error.get("code"), resp.body());
            assertEquals("overloaded_error", error.get("type"), resp.body());
            assertTrue(String.valueOf(error.get("message")).contains("could not get its share"),
                resp.body());
          }
        }
        assertTrue(refused.size() < n, "no call got its share");
        server.close(); // the answers held open end, cut off
        for (CompletableFuture<HttpResponse<String>> f : sent) {
          HttpResponse<String> resp = f.get(20, TimeUnit.SECONDS);
          if (!refused.contains(f)) {
            assertEquals(502, resp.statusCode(), resp.body());
            assertEquals("tokenizer_failed", map(json(resp.body()).get("error")).get("code"),
                resp.body());
          }
        }
        Await.until(() -> endpoint.inFlight() == 0, "the slots are released");
        Map<?, ?> stats = clientStats();
        assertEquals((long) (n - refused.size()), stats.get("tokenize_failures"),
            refused.size() + " refused their share of the tokenizer's answer budget and "
                + (n - refused.size()) + " cut off, counted as tokenizer failures: " + stats);
        assertEquals((long) refused.size(), stats.get("rejected_busy"), stats.toString());
        assertTrue(requests.isEmpty());
        assertEquals((16L << 20) + 9L * (4 << 20), held.answerBudgetAvailable(),
            "the tokenizer's answer budget is whole once all ended");
      } finally {
        if (endpoint != null) {
          endpoint.stop();
          endpoint = null;
        }
        held.close();
      }
    } finally {
      server.close();
    }
  }

  @Test
  void stoppingTheEndpointEndsTokenizationsUnderWayAndReleasesTheirSlots() throws Exception {
    start(Duration.ofSeconds(30), 64, "base", tokenizer);
    tokenizer.mode = FakeTokenizer.Mode.NEVER;
    CompletableFuture<HttpResponse<String>> sent = postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"x\"}");
    Await.until(() -> endpoint.tokenizationsUnderWay() == 1, "tokenizing");
    assertEquals(1, endpoint.inFlight());
    endpoint.stop();
    assertEquals(0, endpoint.tokenizationsUnderWay());
    assertEquals(0, endpoint.inFlight());
    HttpResponse<String> resp = sent.get(20, TimeUnit.SECONDS);
    assertEquals(503, resp.statusCode(), resp.body());
    assertEquals("not_running", map(json(resp.body()).get("error")).get("code"));
    assertTrue(requests.isEmpty());
    endpoint = null;
  }

  // ------------------------------------------------------------------- the route unchanged

  @Test
  void theRoutesOwnStreamIsWrittenByteForByteAsBefore() throws Exception {
    start();
    CompletableFuture<HttpResponse<InputStream>> sent = postStreaming(ClientEndpoint.COMPLETIONS,
        "{\"id\":\"q1\",\"prompt\":[1,2],\"max_tokens\":3,\"stream\":true}");
    awaitSubmitted(1);
    listeners.get(0).onOutput(new int[] {10, 11}, "ab");
    listeners.get(0).onOutput(new int[] {12}, "c");
    futures.get(0).complete(response("q1", new int[] {10, 11, 12, 13}, "abcd", 16));
    String body = new String(sent.get(20, TimeUnit.SECONDS).body().readAllBytes(),
        StandardCharsets.UTF_8);
    assertEquals("data: {\"id\":\"q1\",\"token_ids\":[10,11],\"text\":\"ab\"}\n\n"
        + "data: {\"id\":\"q1\",\"token_ids\":[12],\"text\":\"c\"}\n\n"
        + "data: {\"id\":\"q1\",\"served_by\":\"peer-b\",\"forwarded\":true,\"attempts\":2,"
        + "\"fallback\":null,\"token_ids\":[13],\"text\":\"d\",\"prompt_tokens\":30,"
        + "\"cached_tokens\":16,\"reason\":\"LOCAL_ONLY_POLICY\"}\n\n"
        + "data: [DONE]\n\n", body);
    assertEquals(GenerationParams.greedy(3), requests.get(0).params(),
        "the route's own defaults: greedy, seed 0");

    CompletableFuture<HttpResponse<InputStream>> failing = postStreaming(
        ClientEndpoint.COMPLETIONS, "{\"id\":\"q2\",\"prompt\":[1],\"stream\":true}");
    awaitSubmitted(2);
    listeners.get(1).onOutput(new int[] {7}, "x");
    futures.get(1).completeExceptionally(new RequestFailedException("q2", "late",
        new EngineTimeoutException("no answer", null)));
    body = new String(failing.get(20, TimeUnit.SECONDS).body().readAllBytes(),
        StandardCharsets.UTF_8);
    assertEquals("data: {\"id\":\"q2\",\"token_ids\":[7],\"text\":\"x\"}\n\n"
        + "data: {\"id\":\"q2\",\"error\":{\"message\":\"request q2: late\","
        + "\"type\":\"timeout\",\"status\":504}}\n\n", body);
  }

  // ---------------------------------------------------------------------------------- seeds

  @Test
  void eachRequestWithoutASeedGetsOneDrawnAndOneWithASeedKeepsIt() throws Exception {
    start();
    String body = "{\"messages\":[{\"role\":\"user\",\"content\":\"same\"}],\"temperature\":1";
    postAsync(ClientEndpoint.OPENAI_CHAT, body + "}");
    awaitSubmitted(1);
    postAsync(ClientEndpoint.OPENAI_CHAT, body + "}");
    awaitSubmitted(2);
    postAsync(ClientEndpoint.OPENAI_CHAT, body + ",\"seed\":1234}");
    awaitSubmitted(3);
    postAsync(ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"same\"}");
    awaitSubmitted(4);
    long[] drawn = drawnSeeds(3);
    assertEquals(drawn[0], requests.get(0).params().seed());
    assertEquals(drawn[1], requests.get(1).params().seed());
    assertNotEquals(requests.get(0).params().seed(), requests.get(1).params().seed());
    assertEquals(1234L, requests.get(2).params().seed());
    assertEquals(drawn[2], requests.get(3).params().seed(), "a given seed draws none");
    for (long s : drawn) {
      assertTrue(s >= 0 && s < (1L << 31), "a seed every engine takes: " + s);
    }
    assertArrayEquals(requests.get(0).tokens(), requests.get(1).tokens());
  }

  @Test
  void drawnSeedsAreDistinctAndDependOnTheSeedOfSeeds() {
    RequestSeeds a = new RequestSeeds(1);
    RequestSeeds b = new RequestSeeds(2);
    java.util.Set<Long> seen = new java.util.HashSet<>();
    int same = 0;
    for (int i = 0; i < 10_000; i++) {
      long x = a.next();
      assertTrue(x >= 0 && x < (1L << 31));
      seen.add(x);
      if (x == b.next()) {
        same++;
      }
    }
    assertTrue(seen.size() > 9_950, "distinct: " + seen.size());
    assertTrue(same < 5, "two generators agree at " + same + " draws");
    assertEquals(new RequestSeeds(1).next(), new RequestSeeds(1).next());
  }

  // --------------------------------------------------------------- no tokenizer, /v1/models

  @Test
  void withoutATokenizerTextAndChatAre501AndTokenIdPromptsStillServed() throws Exception {
    start(Duration.ofSeconds(5), 64, "base", null);
    for (String[] c : new String[][] {{ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\":\"x\"}"},
        {ClientEndpoint.OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}"}}) {
      HttpResponse<String> resp = post(c[0], c[1]);
      assertEquals(ClientEndpoint.NO_TOKENIZER_STATUS, resp.statusCode(), resp.body());
      Map<?, ?> error = map(json(resp.body()).get("error"));
      assertEquals("no_tokenizer", error.get("code"));
      assertTrue(((String) error.get("message")).contains("--tokenizer"), resp.body());
    }
    assertEquals(0, endpoint.inFlight());
    CompletableFuture<HttpResponse<String>> ids = postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":[1,2],\"max_tokens\":2}");
    awaitSubmitted(1);
    futures.get(0).complete(response("solo-c1", new int[] {3, 4}, " engine text", 1));
    HttpResponse<String> resp = ids.get(20, TimeUnit.SECONDS);
    assertEquals(200, resp.statusCode(), resp.body());
    assertEquals(" engine text",
        map(((List<?>) json(resp.body()).get("choices")).get(0)).get("text"));
  }

  /**
   * A method an OpenAI route does not take, and a path of OpenAI's API the node does not serve
   * (embeddings, the responses API, a model without its name), are errors in OpenAI's shape, which OpenAI
   * clients read for the message and code; the node's own paths keep their own shape.
   */
  @Test
  void wrongMethodsAndPathsOfTheOpenAiApiAreErrorsInOpenAisShape() throws Exception {
    start();
    String[][] cases = {
        {"GET", ClientEndpoint.OPENAI_CHAT, "405", "method_not_allowed", "POST"},
        {"OPTIONS", ClientEndpoint.OPENAI_COMPLETIONS, "405", "method_not_allowed", "POST"},
        {"POST", ClientEndpoint.MODELS, "405", "method_not_allowed", "GET"},
        {"POST", "/v1/embeddings", "404", "unknown_url", null},
        {"POST", "/v1/responses", "404", "unknown_url", null},
        {"POST", ClientEndpoint.MODELS + "/base", "405", "method_not_allowed", "GET"},
        {"GET", ClientEndpoint.MODELS + "/", "404", "unknown_url", null},
        {"POST", "/v1/chat/completions/", "404", "unknown_url", null},
    };
    for (String[] c : cases) {
      HttpResponse<String> resp = client.send(HttpRequest.newBuilder(
              URI.create("http://" + address + c[1]))
          .method(c[0], c[0].equals("POST") ? HttpRequest.BodyPublishers.ofString("{}")
              : HttpRequest.BodyPublishers.noBody()).build(),
          HttpResponse.BodyHandlers.ofString());
      assertEquals(Integer.parseInt(c[2]), resp.statusCode(), c[0] + " " + c[1]);
      Map<?, ?> error = map(json(resp.body()).get("error"));
      assertEquals(ordered("message", error.get("message"), "type", "invalid_request_error",
          "param", Json.NULL, "code", c[3]), error, c[0] + " " + c[1] + " -> " + resp.body());
      assertTrue(((String) error.get("message")).contains(c[1]), resp.body());
      assertEquals(c[4], resp.headers().firstValue("Allow").orElse(null), c[1]);
    }
    // the node's own paths answer as before
    HttpResponse<String> route = get(ClientEndpoint.COMPLETIONS);
    assertEquals(405, route.statusCode());
    assertTrue(json(route.body()).get("error") instanceof String, route.body());
    HttpResponse<String> other = get("/v1/route/x");
    assertEquals(404, other.statusCode());
    assertTrue(json(other.body()).get("error") instanceof String, other.body());
    assertTrue(requests.isEmpty());
  }

  /**
   * A failure of the endpoint itself (a bug; here the node's id cannot be read) is a 500 in
   * OpenAI's error shape on the OpenAI routes ({@code server_error}, code {@code internal}), as
   * OpenAI clients read errors, and the exception's text is logged, not sent to the client; the
   * node's own route keeps its own shape, without the text either. Nothing is submitted and no
   * in-flight slot is kept.
   */
  @Test
  void aFailureOfTheEndpointIsA500InTheRoutesShapeWithoutTheExceptionsText() throws Exception {
    start();
    when(node.nodeId()).thenThrow(new IllegalStateException("secret-detail-of-the-bug"));
    Map<String, String> bodies = Map.of(
        ClientEndpoint.OPENAI_COMPLETIONS, "{\"prompt\": [1, 2]}",
        ClientEndpoint.OPENAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}");
    for (Map.Entry<String, String> e : bodies.entrySet()) {
      HttpResponse<String> resp = post(e.getKey(), e.getValue());
      assertEquals(500, resp.statusCode(), e.getKey() + " -> " + resp.body());
      assertEquals(Map.of("error", ordered("message", "internal error: the node failed to "
          + "handle the request (see its log)", "type", "server_error", "param", Json.NULL,
          "code", "internal")), json(resp.body()), e.getKey());
      assertFalse(resp.body().contains("secret"), resp.body());
    }
    HttpResponse<String> route = post(ClientEndpoint.COMPLETIONS, "{\"prompt\": [1, 2]}");
    assertEquals(500, route.statusCode(), route.body());
    assertEquals(Map.of("error", "internal error: the node failed to handle the request (see "
        + "its log)"), json(route.body()));
    assertTrue(requests.isEmpty());
    assertEquals(0, endpoint.inFlight());
  }

  @Test
  void theModelListHasTheBaseModelOrNothing() throws Exception {
    start();
    HttpResponse<String> resp = get(ClientEndpoint.MODELS);
    assertEquals(200, resp.statusCode());
    assertEquals(ordered("object", "list", "data", List.of(ordered("id", "base",
        "object", "model", "created", NOW, "owned_by", "prefix-router"))), json(resp.body()));
    assertEquals(405, post(ClientEndpoint.MODELS, "{}").statusCode());
    endpoint.stop();

    start(Duration.ofSeconds(5), 64, null, tokenizer);
    assertEquals(ordered("object", "list", "data", List.of()),
        json(get(ClientEndpoint.MODELS).body()));
    assertModelNotFound(get(ClientEndpoint.MODELS + "/base"), "base");
    // with no base model, the answer's model is the client's, and absent: ""
    CompletableFuture<HttpResponse<String>> sent = postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"x\",\"max_tokens\":1}");
    awaitSubmitted(1);
    assertEquals("", tokenizer.calls.get(0).model());
    futures.get(0).complete(response("solo-c1", new int[] {'y'}, "", 0));
    assertEquals("", json(sent.get(20, TimeUnit.SECONDS).body()).get("model"));
  }

  /**
   * {@code GET /v1/models/{model}} (OpenAI's retrieve): the base model as the list has it, its
   * name percent-decoded and free to hold a slash; any other name, and any name at a node
   * without a base model, is 404 {@code model_not_found} in OpenAI's error shape.
   */
  @Test
  void oneModelIsTheBaseModelByNameOr404() throws Exception {
    start(Duration.ofSeconds(5), 64, "org/base-1.5", tokenizer);
    Object listed = ((List<?>) json(get(ClientEndpoint.MODELS).body()).get("data")).get(0);
    for (String path : List.of("/org/base-1.5", "/org%2Fbase-1.5", "/org%2fbase%2D1.5")) {
      HttpResponse<String> resp = get(ClientEndpoint.MODELS + path);
      assertEquals(200, resp.statusCode(), path + " -> " + resp.body());
      assertEquals(listed, json(resp.body()), path);
      assertEquals(ordered("id", "org/base-1.5", "object", "model", "created", NOW,
          "owned_by", "prefix-router"), json(resp.body()));
    }
    for (String name :
        List.of("org", "base-1.5", "org/base-1.5/x", "org/base-1.", "ORG/base-1.5")) {
      assertModelNotFound(get(ClientEndpoint.MODELS + "/" + name), name);
    }
    assertModelNotFound(get(ClientEndpoint.MODELS + "/a%20b"), "a b");
    assertTrue(requests.isEmpty());
  }

  private static void assertModelNotFound(HttpResponse<String> resp, String name) {
    assertEquals(404, resp.statusCode(), name + " -> " + resp.body());
    Map<?, ?> error = map(json(resp.body()).get("error"));
    assertEquals(ordered("message", error.get("message"), "type", "invalid_request_error",
        "param", "model", "code", "model_not_found"), error, resp.body());
    assertTrue(((String) error.get("message")).contains("'" + name + "'"), resp.body());
  }
}
