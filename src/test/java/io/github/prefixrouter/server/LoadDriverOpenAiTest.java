package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.engine.reference.ReferenceEngine;
import io.github.prefixrouter.internal.stop.StopMatcherProperties;
import io.github.prefixrouter.server.LoadDriver.Api;
import io.github.prefixrouter.server.LoadDriver.Message;
import io.github.prefixrouter.server.LoadDriver.Prompt;
import io.github.prefixrouter.transport.http.StallingHttpPeer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The load driver on the OpenAI routes: against in-process nodes running the reference engine
 * (whose answers' texts are checked against the engine's output for the chat template's
 * tokens), and against fake endpoints whose streams break the chunks' framing.
 */
class LoadDriverOpenAiTest {

  private static final int MAX_TOKENS = 5;

  private static NodeOptions options(String id) {
    return NodeOptions.parse(new String[] {"--id", id, "--listen", "127.0.0.1:0", "--client",
        "127.0.0.1:0", "--policy", "local-only"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
  }

  private static final ReferenceTokenizer CHARACTERS = new ReferenceTokenizer(
      NodeMain.REFERENCE_VOCABULARY, NodeMain.REFERENCE_MAX_OUTPUT_TOKENS);

  /** Conversations over three system prompts; request i has seed 100 + i. */
  private static List<Prompt> chats(int n) {
    List<Prompt> p = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      p.add(Prompt.ofChat(List.of(
          new Message("system", "You are assistant number " + (i % 3) + ". ".repeat(20)),
          new Message("user", "Question " + i + ": what is " + i + " squared?")))
          .withSeed(100 + i));
    }
    return p;
  }

  private static List<Map<String, Object>> asMaps(List<Message> messages) {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Message m : messages) {
      out.add(Map.of("role", m.role(), "content", m.content()));
    }
    return out;
  }

  /** What the reference engine answers the conversation at temperature 1 with the seed. */
  private static String referenceText(ReferenceEngine engine, List<Message> messages, long seed)
      throws Exception {
    int[] prompt = CHARACTERS.tokenizeChat("", asMaps(messages), Map.of()).join().tokens();
    int[] out = engine.execute(new InferenceRequest("check", prompt,
        new GenerationParams(MAX_TOKENS, 1.0, 1.0, seed))).get(30, TimeUnit.SECONDS).outputTokens();
    return CHARACTERS.outputText(out, "");
  }

  @Test
  void chatAnswersWholeAndStreamedAreTheReferenceEnginesTextAndFailOverLikeTheTokenRoute()
      throws Exception {
    try (NodeMain.Running a = NodeMain.start(options("a"));
        NodeMain.Running b = NodeMain.start(options("b"));
        ReferenceEngine reference = ReferenceEngine.builder().build()) {
      b.close(); // b's client endpoint is gone: its share fails over to a
      List<Prompt> prompts = chats(12);
      LoadDriver.Result whole = LoadDriver.builder().api(Api.CHAT)
          .endpoints(List.of(a.clientAddress, b.clientAddress)).concurrency(3)
          .maxTokens(MAX_TOKENS).build().runPrompts(prompts);
      LoadDriver.Result streamed = LoadDriver.builder().api(Api.CHAT)
          .endpoints(List.of(a.clientAddress, b.clientAddress)).concurrency(3)
          .maxTokens(MAX_TOKENS).stream(true).build().runPrompts(prompts);
      assertEquals(12, whole.answered().size(), whole.summary());
      assertEquals(12, streamed.answered().size(), streamed.summary());
      assertTrue(whole.clientRetries() >= 1 && streamed.clientRetries() >= 1,
          "the requests sent to b must have failed over");
      Set<String> ids = new HashSet<>();
      for (int i = 0; i < 12; i++) {
        LoadDriver.Sample w = whole.samples().get(i);
        LoadDriver.Sample s = streamed.samples().get(i);
        assertTrue(ids.add(w.id()));
        assertEquals(i, w.index());
        assertEquals("a", w.servedBy());
        assertEquals("a", s.servedBy());
        assertEquals(100L + i, w.seed());
        assertEquals(100L + i, s.seed());
        String want = referenceText(reference, prompts.get(i).messages(), 100 + i);
        assertEquals(MAX_TOKENS, want.codePointCount(0, want.length()));
        assertEquals(want, w.text(), "whole answer " + i);
        assertEquals(want, s.text(), "streamed answer " + i);
        int promptTokens = CHARACTERS.tokenizeChat("", asMaps(prompts.get(i).messages()), Map.of())
            .join().tokens().length;
        assertEquals(promptTokens, w.promptTokens());
        assertEquals(promptTokens, s.promptTokens());
        assertTrue(w.cachedTokens() >= 0 && w.cachedTokens() < promptTokens);
        assertNull(w.tokenIds(), "chat answers carry no token ids");
        assertEquals(-1, w.firstPieceNanos());
        assertTrue(s.firstPieceNanos() > 0 && s.firstPieceNanos() <= s.latencyNanos());
      }
      // the second run's prompts are all cached at a (the system prompts are shared, too)
      assertTrue(streamed.hitRate() > 0.5, "hit rate " + streamed.hitRate());
      assertTrue(streamed.summary().contains("ttft ms: p50="), streamed.summary());
    }
  }

  @Test
  void withoutSeedsTheNodeDrawsOneAndReportsIt() throws Exception {
    try (NodeMain.Running a = NodeMain.start(options("a"));
        ReferenceEngine reference = ReferenceEngine.builder().build()) {
      Prompt p = chats(1).get(0);
      Prompt unseeded = Prompt.ofChat(p.messages());
      LoadDriver.Result r = LoadDriver.builder().api(Api.CHAT).endpoints(List.of(a.clientAddress))
          .maxTokens(MAX_TOKENS).build().runPrompts(List.of(unseeded, unseeded));
      assertEquals(2, r.answered().size(), r.summary());
      long s0 = r.samples().get(0).seed();
      long s1 = r.samples().get(1).seed();
      assertNotEquals(s0, s1);
      assertEquals(referenceText(reference, p.messages(), s0), r.samples().get(0).text());
      assertEquals(referenceText(reference, p.messages(), s1), r.samples().get(1).text());
    }
  }

  @Test
  void textCompletionsAndTheirTokenIdsGiveTheTokenRoutesAnswers() throws Exception {
    try (NodeMain.Running a = NodeMain.start(options("a"))) {
      String text = "The following are multiple choice questions about algebra.\nAnswer:";
      int[] ids = CHARACTERS.tokenize("", text).join().tokens();
      List<Prompt> prompts = List.of(Prompt.ofText(text).withSeed(7), Prompt.ofTokens(ids).withSeed(7));
      LoadDriver.Result completions = LoadDriver.builder().api(Api.COMPLETIONS)
          .endpoints(List.of(a.clientAddress)).maxTokens(MAX_TOKENS).stream(true).build()
          .runPrompts(prompts);
      LoadDriver.Result route = LoadDriver.builder().endpoints(List.of(a.clientAddress))
          .maxTokens(MAX_TOKENS).temperature(1.0).build()
          .runPrompts(List.of(Prompt.ofTokens(ids).withSeed(7)));
      assertEquals(2, completions.answered().size(), completions.summary());
      String want = CHARACTERS.outputText(route.samples().get(0).tokenIds(), "");
      assertEquals(MAX_TOKENS, route.samples().get(0).tokenIds().length);
      assertEquals(want, completions.samples().get(0).text());
      assertEquals(want, completions.samples().get(1).text());
      assertEquals(ids.length, completions.samples().get(0).promptTokens());
      assertNull(route.samples().get(0).seed(), "the token route reports no seed");
    }
  }

  @Test
  void promptsThatDoNotSuitTheRouteAreRefused() {
    LoadDriver route = LoadDriver.builder().endpoints(List.of("127.0.0.1:1")).build();
    LoadDriver chat = LoadDriver.builder().api(Api.CHAT).endpoints(List.of("127.0.0.1:1")).build();
    LoadDriver completions = LoadDriver.builder().api(Api.COMPLETIONS)
        .endpoints(List.of("127.0.0.1:1")).build();
    assertThrows(IllegalArgumentException.class, () -> route.runPrompts(chats(1)));
    assertThrows(IllegalArgumentException.class, () -> route.runPrompts(List.of(Prompt.ofText("x"))));
    assertThrows(IllegalArgumentException.class, () -> chat.run(List.of(new int[] {1})));
    assertThrows(IllegalArgumentException.class, () -> completions.runPrompts(chats(1)));
    assertThrows(IllegalArgumentException.class, () -> new Prompt(new int[] {1}, "x", null, null));
    assertThrows(IllegalArgumentException.class, () -> Prompt.ofChat(List.of()));
    assertThrows(IllegalArgumentException.class, () -> LoadDriver.builder().temperature(-1.0));
  }

  // --- framing, against fake endpoints ---

  /** The one sample of a run of one chat request against a fake endpoint that sends {@code answer}. */
  private static LoadDriver.Sample fakeAnswer(boolean stream, String headers, String body)
      throws Exception {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    try (StallingHttpPeer fake = new StallingHttpPeer("HTTP/1.1 200 OK\r\nContent-Type: "
        + (stream ? "text/event-stream" : "application/json") + "\r\n" + headers
        + "Connection: close\r\nContent-Length: " + b.length + "\r\n\r\n" + body)) {
      LoadDriver d = LoadDriver.builder().api(Api.CHAT).endpoints(List.of("127.0.0.1:" + fake.port()))
          .concurrency(1).stream(stream).requestTimeout(Duration.ofSeconds(5)).build();
      LoadDriver.Result r = CompletableFuture.supplyAsync(() -> d.runPrompts(chats(1)))
          .get(30, TimeUnit.SECONDS);
      assertEquals(1, r.samples().size());
      return r.samples().get(0);
    }
  }

  private static String chunk(String id, String delta, String finish) {
    return "data: {\"id\":\"" + id + "\",\"object\":\"chat.completion.chunk\",\"created\":1,"
        + "\"model\":\"\",\"choices\":[{\"index\":0,\"delta\":{" + delta + "},\"logprobs\":null,"
        + "\"finish_reason\":" + (finish == null ? "null" : "\"" + finish + "\"") + "}]"
        + (finish == null ? "" : ",\"prefix_router\":" + ROUTING) + ",\"usage\":null}\n\n";
  }

  private static final String ROUTING = "{\"request_id\":\"n9-c1\",\"served_by\":\"n9\","
      + "\"forwarded\":true,\"attempts\":2,\"fallback\":\"UNREACHABLE\",\"reason\":\"PEER_CHEAPER\","
      + "\"seed\":100}";

  private static String usageChunk(String id) {
    return "data: {\"id\":\"" + id + "\",\"object\":\"chat.completion.chunk\",\"created\":1,"
        + "\"model\":\"\",\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":3,"
        + "\"total_tokens\":43,\"prompt_tokens_details\":{\"cached_tokens\":32}}}\n\n";
  }

  private static final String ROLE = "\"role\":\"assistant\",";
  private static final String DONE = "data: [DONE]\n\n";

  @Test
  void aStreamedChatIsItsDeltasJoinedWithTheFinishChunksRoutingAndTheUsage() throws Exception {
    LoadDriver.Sample s = fakeAnswer(true, "", chunk("c", ROLE + "\"content\":\"ab\"", null)
        + chunk("c", "\"content\":\"c\"", null) + chunk("c", "\"content\":\"d\"", "length")
        + usageChunk("c") + DONE);
    assertNull(s.error());
    assertEquals("abcd", s.text());
    assertEquals("n9", s.servedBy());
    assertTrue(s.forwarded());
    assertEquals("UNREACHABLE", s.fallback());
    assertEquals(40, s.promptTokens());
    assertEquals(32, s.cachedTokens());
    assertEquals(100L, s.seed());
    assertTrue(s.firstPieceNanos() > 0);
    // the finish chunk alone (an output no piece carried), the role in it
    s = fakeAnswer(true, "", chunk("c", ROLE + "\"content\":\"xy\"", "stop") + usageChunk("c") + DONE);
    assertEquals("xy", s.text(), s.error());
  }

  @Test
  void aStreamedChatThatBreaksTheFramingIsAnError() throws Exception {
    String first = chunk("c", ROLE + "\"content\":\"a\"", null);
    String finish = chunk("c", "", "length");
    Map<String, String> broken = new LinkedHashMap<>();
    broken.put("a chunk of another answer", first + chunk("d", "\"content\":\"b\"", null)
        + finish + usageChunk("c") + DONE);
    broken.put("the role twice", first + chunk("c", ROLE + "\"content\":\"b\"", null) + finish
        + usageChunk("c") + DONE);
    broken.put("no role", chunk("c", "\"content\":\"a\"", null) + finish + usageChunk("c") + DONE);
    broken.put("no finish chunk", first + usageChunk("c") + DONE);
    broken.put("a piece after the finish chunk", first + finish
        + chunk("c", "\"content\":\"b\"", null) + usageChunk("c") + DONE);
    broken.put("two finish chunks", first + finish + finish + usageChunk("c") + DONE);
    broken.put("no usage chunk", first + finish + DONE);
    broken.put("a chunk after the usage", first + finish + usageChunk("c") + usageChunk("c") + DONE);
    broken.put("no [DONE]", first + finish + usageChunk("c"));
    broken.put("data after [DONE]", first + finish + usageChunk("c") + DONE + first);
    broken.put("a completion's chunk", first.replace("chat.completion.chunk", "text_completion")
        + finish + usageChunk("c") + DONE);
    for (Map.Entry<String, String> e : broken.entrySet()) {
      LoadDriver.Sample s = fakeAnswer(true, "", e.getValue());
      assertTrue(s.error() != null && s.error().startsWith("unusable stream"),
          e.getKey() + ": " + s.error());
      assertNull(s.text(), e.getKey());
    }
    // an error event after the first chunk: the stream failed
    LoadDriver.Sample s = fakeAnswer(true, "", first + "data: {\"error\":{\"message\":\"m\","
        + "\"type\":\"server_error\",\"param\":null,\"code\":\"timeout\"}}\n\n");
    assertTrue(s.error() != null && s.error().startsWith("stream failed") && s.error().contains("timeout"),
        s.error());
  }

  private static final String WHOLE = "{\"id\":\"chatcmpl-n9-c1\",\"object\":\"chat.completion\","
      + "\"created\":1,\"model\":\"\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
      + "\"content\":\"abc\"},\"logprobs\":null,\"finish_reason\":\"length\"}],\"usage\":"
      + "{\"prompt_tokens\":40,\"completion_tokens\":3,\"total_tokens\":43},\"prefix_router\":"
      + ROUTING + "}";

  @Test
  void aWholeChatAnswerIsReadFromItsBodyAndItsHeadersMustAgree() throws Exception {
    String headers = "X-Prefix-Router-Served-By: n9\r\nX-Prefix-Router-Forwarded: true\r\n"
        + "X-Prefix-Router-Attempts: 2\r\nX-Prefix-Router-Seed: 100\r\n";
    LoadDriver.Sample s = fakeAnswer(false, headers, WHOLE);
    assertNull(s.error());
    assertEquals("abc", s.text());
    assertEquals("n9", s.servedBy());
    assertEquals(40, s.promptTokens());
    assertEquals(-1, s.cachedTokens(), "no prompt_tokens_details: unreported");
    assertEquals(100L, s.seed());
    for (String wrong : List.of(headers.replace("n9", "n8"), headers.replace("Seed: 100", "Seed: 101"),
        headers.replace("Attempts: 2", "Attempts: 1"), headers + "X-Prefix-Router-Cached-Tokens: 3\r\n")) {
      s = fakeAnswer(false, wrong, WHOLE);
      assertTrue(s.error() != null && s.error().contains("header"), wrong + ": " + s.error());
    }
    s = fakeAnswer(false, "", WHOLE.replace(",\"prefix_router\":" + ROUTING, ""));
    assertTrue(s.error() != null && s.error().contains("prefix_router"), s.error());
  }

  @Test
  void stopStringsGoWithEveryChatAndEachAnswerEndsAtTheFirst() throws Exception {
    try (NodeMain.Running a = NodeMain.start(options("a"));
        ReferenceEngine reference = ReferenceEngine.builder().build()) {
      List<Prompt> prompts = chats(8);
      // a stop string from each answer without stops: its 3rd character
      List<String> stops = new ArrayList<>();
      List<String> plain = new ArrayList<>();
      for (int i = 0; i < prompts.size(); i++) {
        String want = referenceText(reference, prompts.get(i).messages(), 100 + i);
        plain.add(want);
        int at = want.offsetByCodePoints(0, 2);
        stops.add(want.substring(at, want.offsetByCodePoints(at, 1)));
      }
      for (boolean stream : new boolean[] {false, true}) {
        LoadDriver.Result r = LoadDriver.builder().api(Api.CHAT)
            .endpoints(List.of(a.clientAddress)).concurrency(2).maxTokens(MAX_TOKENS)
            .stop(stops).stream(stream).build().runPrompts(prompts);
        assertEquals(prompts.size(), r.answered().size(), r.summary());
        for (int i = 0; i < prompts.size(); i++) {
          String want = StopMatcherProperties.naive(plain.get(i), stops);
          assertTrue(want.codePointCount(0, want.length()) <= 2, want);
          assertEquals(want, r.samples().get(i).text(), (stream ? "streamed" : "whole")
              + " answer " + i);
        }
      }
    }
    assertThrows(IllegalArgumentException.class,
        () -> LoadDriver.builder().endpoints(List.of("h:1")).stop(List.of("x")).build());
  }
}
