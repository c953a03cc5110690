package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.spi.EngineResult;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@code stop} and {@code stop_token_ids} on the client endpoint: passed to the node with the
 * request, and the answer cut at the first stop whether the engine stopped there or not (the
 * stub node answers what the test says: outputs that run past the stop, as an engine that
 * ignores stops gives, and outputs the engine already cut), whole and streamed, with
 * {@code finish_reason}, {@code stop_reason} and {@code usage}; a streamed answer never shows
 * text a later stop cuts, and its text is the whole answer's; the token route's
 * {@code stop_token_ids}; refusals.
 */
class ClientEndpointStopTest extends ClientEndpointFixture {

  private static final RouteDecision DECISION = StubNode.LOCAL_DECISION;

  private void start(boolean textPerToken) throws IOException {
    tokenizer.textPerToken = textPerToken;
    start(new ClientEndpoint(node, List::of, 64, Duration.ofSeconds(5), "base",
        ClientEndpoint.DEFAULT_READER_THREADS, ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS,
        tokenizer, () -> 1L, 7L));
  }

  private CompletableFuture<HttpResponse<String>> postAsync(String path, String body) {
    return client.sendAsync(HttpRequest.newBuilder(URI.create("http://" + address + path))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private CompletableFuture<HttpResponse<InputStream>> postStreaming(String path, String body) {
    return client.sendAsync(HttpRequest.newBuilder(URI.create("http://" + address + path))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofInputStream());
  }

  private static InferenceResponse response(String id, int[] tokens, String text) {
    return new InferenceResponse(id, new EngineResult(tokens, text, 30, 0, 1, 1), "peer-b",
        true, 2, FallbackCause.NONE, DECISION);
  }

  private static int[] chars(String s) {
    return s.chars().toArray();
  }

  private static Map<?, ?> map(Object o) {
    return (Map<?, ?>) o;
  }

  private static Map<?, ?> choice(Map<?, ?> answer) {
    return map(((List<?>) answer.get("choices")).get(0));
  }

  /** An answer to a request with the engine's output {@code tokens} and {@code text}. */
  private Map<?, ?> whole(String path, String body, int[] tokens, String text) throws Exception {
    int before = futures.size(); // read before sending: the node may be asked at once
    CompletableFuture<HttpResponse<String>> sent = postAsync(path, body);
    awaitSubmitted(before + 1);
    CompletableFuture<InferenceResponse> f = futures.get(futures.size() - 1);
    f.complete(response(requests.get(requests.size() - 1).id(), tokens, text));
    HttpResponse<String> resp = sent.get(20, TimeUnit.SECONDS);
    assertEquals(200, resp.statusCode(), resp.body());
    return map(Json.parse(resp.body()));
  }

  private static List<Map<?, ?>> events(HttpResponse<InputStream> resp) throws IOException {
    return Sse.chunks(new String(resp.body().readAllBytes(), StandardCharsets.UTF_8));
  }

  // ------------------------------------------------------------------------- whole answers

  @Test
  void theRequestCarriesItsStopsAndTheAnswerEndsBeforeTheFirstStopString() throws Exception {
    start(true);
    Map<?, ?> a = whole(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"hi\",\"max_tokens\":30,\"stop\":[\"\\nObs\",\"END\"],"
            + "\"stop_token_ids\":[1000]}", chars("Thought\nObservation: END"), "");
    InferenceRequest r = requests.get(0);
    assertEquals(List.of("\nObs", "END"), r.params().stop());
    assertEquals(List.of(1000), r.params().stopTokenIds());
    assertEquals("Thought", choice(a).get("text"));
    assertEquals("stop", choice(a).get("finish_reason"));
    assertEquals("\nObs", choice(a).get("stop_reason"));
    // the output tokens end at the token the stop string was completed in: "Thought\nObs"
    assertEquals(11L, map(a.get("usage")).get("completion_tokens"));
    assertEquals(41L, map(a.get("usage")).get("total_tokens"));
  }

  @Test
  void aStopStringAsOneStringAndTheStopThatEndsFirstWins() throws Exception {
    start(true);
    // "c" is complete before "abcd" would be: the generation stops there, as vLLM's does
    Map<?, ?> a = whole(ClientEndpoint.OPENAI_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":9,"
            + "\"stop\":[\"abcd\",\"c\"]}", chars("xxabcdyy"), "");
    assertEquals("xxab", map(choice(a).get("message")).get("content"));
    assertEquals("c", choice(a).get("stop_reason"));
    assertEquals(5L, map(a.get("usage")).get("completion_tokens"));
    Map<?, ?> b = whole(ClientEndpoint.OPENAI_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":9,"
            + "\"stop\":\"yy\"}", chars("xxabcdyy"), "");
    assertEquals("xxabcd", map(choice(b).get("message")).get("content"));
    assertEquals(List.of("yy"), requests.get(1).params().stop());
  }

  @Test
  void aStopAtExactlyMaxTokensIsAStopNotALength() throws Exception {
    start(true);
    // the stop token is the fourth and last token: the engine stopped there, it did not run out
    Map<?, ?> a = whole(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"hi\",\"max_tokens\":4,\"stop_token_ids\":[100]}",
        new int[] {'a', 'b', 'c', 100}, "");
    assertEquals("stop", choice(a).get("finish_reason"));
    assertEquals(100L, choice(a).get("stop_reason"));
    // the stop token stays in the output, its text is not shown (vLLM's)
    assertEquals("abc", choice(a).get("text"));
    assertEquals(4L, map(a.get("usage")).get("completion_tokens"));
    // a stop string completed by the fourth token, too
    Map<?, ?> b = whole(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"hi\",\"max_tokens\":4,\"stop\":\"cd\"}", chars("abcd"), "");
    assertEquals("stop", choice(b).get("finish_reason"));
    assertEquals("ab", choice(b).get("text"));
    // without the stop, the same output ran out of tokens
    Map<?, ?> c = whole(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"hi\",\"max_tokens\":4,\"stop_token_ids\":[101]}", chars("abcd"), "");
    assertEquals("length", choice(c).get("finish_reason"));
    assertEquals(Json.NULL, choice(c).get("stop_reason"));
  }

  @Test
  void aStopTokenIdEndsTheOutputTheEngineRanPast() throws Exception {
    start(true);
    Map<?, ?> a = whole(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"hi\",\"max_tokens\":10,\"stop_token_ids\":[33,120]}",
        chars("ab!cx!"), "");
    assertEquals("ab", choice(a).get("text"));
    assertEquals(33L, choice(a).get("stop_reason"));
    assertEquals(3L, map(a.get("usage")).get("completion_tokens"));
  }

  @Test
  void anEnginesOwnTextIsCutAtTheStopStringItsTokensAtStopTokenIdsOnly() throws Exception {
    start(false);
    // the engine honoured the stop: its text ends before it, fewer tokens than max_tokens
    Map<?, ?> a = whole(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"hi\",\"max_tokens\":10,\"stop\":\"\\n\"}", new int[] {5, 6, 7}, "Thought");
    assertEquals("Thought", choice(a).get("text"));
    assertEquals("stop", choice(a).get("finish_reason"));
    assertEquals(3L, map(a.get("usage")).get("completion_tokens"));
    // an engine that ignored it: the text is cut; which token a char came from is unknown,
    // so the tokens are the engine's
    Map<?, ?> b = whole(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"hi\",\"max_tokens\":4,\"stop\":\"\\n\"}", new int[] {5, 6, 7, 8},
        "Thought\nmore");
    assertEquals("Thought", choice(b).get("text"));
    assertEquals("stop", choice(b).get("finish_reason"));
    assertEquals("\n", choice(b).get("stop_reason"));
    assertEquals(4L, map(b.get("usage")).get("completion_tokens"));
    // the OpenAI-compatible engine gives the server's text with the stop string it names: a
    // stop at exactly max_tokens is a stop, and the stop string is not shown
    Map<?, ?> c = whole(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"hi\",\"max_tokens\":3,\"stop\":\"\\nObservation:\"}",
        new int[] {5, 6, 7}, "Thought\nObservation:");
    assertEquals("Thought", choice(c).get("text"));
    assertEquals("stop", choice(c).get("finish_reason"));
    assertEquals(3L, map(c.get("usage")).get("completion_tokens"));
  }

  // ------------------------------------------------------------------------------ streams

  @Test
  void aStreamNeverShowsTextALaterStopCutsAndIsTheWholeAnswersText() throws Exception {
    start(true);
    String body = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":40,"
        + "\"stop\":[\"END\",\"Ex\"],\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
    CompletableFuture<HttpResponse<InputStream>> sent = postStreaming(ClientEndpoint.OPENAI_CHAT,
        body);
    awaitSubmitted(1);
    OutputListener l = listeners.get(0);
    String output = "Hello EN Ex2 ENDED and more";
    // pieces split inside the stop strings: "E" and "EN" may begin one, so they wait
    for (String piece : List.of("Hel", "lo E", "N", " ", "E", "x2 END", "ED and more")) {
      l.onOutput(chars(piece), "");
    }
    futures.get(0).complete(response("solo-c1", chars(output), ""));
    List<Map<?, ?>> chunks = events(sent.get(20, TimeUnit.SECONDS));
    List<String> contents = new ArrayList<>();
    for (Map<?, ?> c : chunks.subList(0, chunks.size() - 2)) {
      contents.add((String) map(choice(c).get("delta")).get("content"));
    }
    // "lo E" shows "lo " (the "E" waits), "N" shows nothing ("EN" could begin "END"), " " shows
    // "EN " (it cannot), "E" waits, "x2 END" completes "Ex": the answer ends before it
    assertEquals(List.of("Hel", "lo ", "EN "), contents);
    Map<?, ?> last = chunks.get(chunks.size() - 2);
    assertEquals("stop", choice(last).get("finish_reason"));
    assertEquals("Ex", choice(last).get("stop_reason"));
    assertFalse(map(choice(last).get("delta")).containsKey("content"), last.toString());
    Map<?, ?> usage = map(chunks.get(chunks.size() - 1).get("usage"));
    assertEquals(11L, usage.get("completion_tokens"), "\"Hello EN Ex\": 11 tokens");
    // the same output answered whole has the same text
    Map<?, ?> a = whole(ClientEndpoint.OPENAI_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":40,"
            + "\"stop\":[\"END\",\"Ex\"]}", chars(output), "");
    assertEquals(String.join("", contents), map(choice(a).get("message")).get("content"));
    assertEquals(11L, map(a.get("usage")).get("completion_tokens"));
  }

  @Test
  void aHeldBackTailThatIsNoStopComesWithTheNextPieceOrAtTheEnd() throws Exception {
    start(true);
    String body = "{\"prompt\":\"p\",\"max_tokens\":6,\"stop\":\"END\",\"stream\":true}";
    CompletableFuture<HttpResponse<InputStream>> sent =
        postStreaming(ClientEndpoint.OPENAI_COMPLETIONS, body);
    awaitSubmitted(1);
    OutputListener l = listeners.get(0);
    l.onOutput(chars("aE"), "");
    l.onOutput(chars("Nb"), "");
    l.onOutput(chars("EN"), "");
    futures.get(0).complete(response("solo-c1", chars("aENbEN"), ""));
    List<Map<?, ?>> chunks = events(sent.get(20, TimeUnit.SECONDS));
    List<Object> texts = new ArrayList<>();
    for (Map<?, ?> c : chunks) {
      texts.add(choice(c).get("text"));
    }
    // the last "EN" is no stop once the output has ended: it comes with the finish
    assertEquals(List.of("a", "ENb", "EN"), texts);
    assertEquals("length", choice(chunks.get(2)).get("finish_reason"));
  }

  @Test
  void aStreamEndsItsTextAtAStopTokenIdTheEngineRanPast() throws Exception {
    start(true);
    String body = "{\"prompt\":\"p\",\"max_tokens\":9,\"stop_token_ids\":[33],"
        + "\"stop\":\"zz\",\"stream\":true}";
    CompletableFuture<HttpResponse<InputStream>> sent =
        postStreaming(ClientEndpoint.OPENAI_COMPLETIONS, body);
    awaitSubmitted(1);
    OutputListener l = listeners.get(0);
    l.onOutput(chars("abz"), "");
    l.onOutput(chars("!cd"), "");
    l.onOutput(chars("ef"), "");
    futures.get(0).complete(response("solo-c1", chars("abz!cdef"), ""));
    List<Map<?, ?>> chunks = events(sent.get(20, TimeUnit.SECONDS));
    StringBuilder text = new StringBuilder();
    for (Map<?, ?> c : chunks) {
      text.append(choice(c).get("text"));
    }
    // "z" waits (it may begin "zz"), then the stop token "!" ends the output: "z" is no stop,
    // and the stop token's text is not shown
    assertEquals("abz", text.toString());
    Map<?, ?> last = chunks.get(chunks.size() - 1);
    assertEquals("stop", choice(last).get("finish_reason"));
    assertEquals(33L, choice(last).get("stop_reason"));
  }

  // ------------------------------------------------------------------------- token route

  @Test
  void theTokenRouteTakesStopTokenIdsAndCutsItsTokenIdsWholeAndStreamed() throws Exception {
    start(true);
    CompletableFuture<HttpResponse<String>> sent = postAsync(ClientEndpoint.COMPLETIONS,
        "{\"id\":\"t1\",\"prompt\":[1,2],\"max_tokens\":8,\"stop_token_ids\":[7,3]}");
    awaitSubmitted(1);
    assertEquals(List.of(7, 3), requests.get(0).params().stopTokenIds());
    futures.get(0).complete(response("t1", new int[] {5, 7, 9}, ""));
    HttpResponse<String> resp = sent.get(20, TimeUnit.SECONDS);
    assertEquals(200, resp.statusCode(), resp.body());
    assertEquals(List.of(5L, 7L), map(Json.parse(resp.body())).get("token_ids"));

    CompletableFuture<HttpResponse<InputStream>> streamed = postStreaming(ClientEndpoint.COMPLETIONS,
        "{\"id\":\"t2\",\"prompt\":[1,2],\"max_tokens\":8,\"stop_token_ids\":[7],"
            + "\"stream\":true}");
    awaitSubmitted(2);
    OutputListener l = listeners.get(1);
    l.onOutput(new int[] {5}, "");
    l.onOutput(new int[] {6, 7, 9}, "");
    l.onOutput(new int[] {11}, "");
    futures.get(1).complete(response("t2", new int[] {5, 6, 7, 9, 11}, ""));
    List<Map<?, ?>> events = events(streamed.get(20, TimeUnit.SECONDS));
    List<Integer> all = new ArrayList<>();
    for (Map<?, ?> e : events) {
      for (int t : Sse.tokens(e)) {
        all.add(t);
      }
    }
    assertEquals(List.of(5, 6, 7), all);
  }

  @Test
  void badStopValuesAreRefusedNamingTheKey() throws Exception {
    start(true);
    String[][] cases = {
        {"{\"prompt\":[1],\"stop\":[\"x\"]}", "unknown key \"stop\""},
        // a long unknown key is echoed shortened
        {"{\"prompt\":[1],\"" + "k".repeat(1_000) + "\":1}",
            "unknown key \"" + "k".repeat(64) + "...\""},
        {"{\"prompt\":[1],\"stop_token_ids\":[-1]}", "stop_token_ids"},
        {"{\"prompt\":[1],\"stop_token_ids\":[1.5]}", "stop_token_ids"},
        {"{\"prompt\":[1],\"stop_token_ids\":\"7\"}", "stop_token_ids"},
        {"{\"prompt\":[1],\"stop_token_ids\":[" + "1,".repeat(256) + "1]}", "at most 256"},
    };
    for (String[] c : cases) {
      HttpResponse<String> resp = postAsync(ClientEndpoint.COMPLETIONS, c[0])
          .get(20, TimeUnit.SECONDS);
      assertEquals(400, resp.statusCode(), c[0]);
      String error = (String) map(Json.parse(resp.body())).get("error");
      assertTrue(error.contains(c[1]), c[0] + " -> " + error);
    }
    assertTrue(requests.isEmpty());
    // null and empty mean none
    CompletableFuture<HttpResponse<String>> sent = postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"a\",\"stop\":null,\"stop_token_ids\":[]}");
    awaitSubmitted(1);
    assertFalse(requests.get(0).params().hasStops());
    futures.get(0).complete(response(requests.get(0).id(), chars("ab"), ""));
    assertEquals(200, sent.get(20, TimeUnit.SECONDS).statusCode());
    CompletableFuture<HttpResponse<String>> empty = postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"a\",\"stop\":[]}");
    awaitSubmitted(2);
    assertFalse(requests.get(1).params().hasStops());
    futures.get(1).complete(response(requests.get(1).id(), chars("ab"), ""));
    assertEquals(200, empty.get(20, TimeUnit.SECONDS).statusCode());
  }
}
