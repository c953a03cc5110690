package io.github.prefixrouter.engine.openai;

import static io.github.prefixrouter.engine.openai.ScriptedOpenAiServer.reply;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.contract.ThrowingCacheEventListener;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.EngineTimeoutException;
import io.github.prefixrouter.spi.InvalidRequestException;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The adapter's streamed requests against a fake server sending server-sent events. */
class OpenAiCompatibleEngineStreamingTest {

  private ScriptedOpenAiServer server;

  @BeforeEach
  void startFakeServer() throws IOException {
    server = ScriptedOpenAiServer.start();
  }

  @AfterEach
  void stop() {
    server.close();
  }

  private OpenAiCompatibleEngine.Builder builder() {
    return OpenAiCompatibleEngine.builder()
        .baseUrl(server.base()).model("m")
        .requestTimeout(Duration.ofSeconds(10));
  }

  private static InferenceRequest request() {
    return new InferenceRequest("r1", new int[] {101, 7, 7, 9000}, new GenerationParams(3, 0.0, 0.9, 17L));
  }

  /** Starts an event stream: status 200, {@code text/event-stream}, chunked. */
  static OutputStream startStream(HttpExchange ex) throws IOException {
    ex.getResponseHeaders().add("Content-Type", "text/event-stream; charset=utf-8");
    ex.sendResponseHeaders(200, 0);
    OutputStream out = ex.getResponseBody();
    // the headers go out now, as a model server's do: the JDK server sends them with the
    // first flush of the body (JDK 17 flushed them in sendResponseHeaders, JDK 25 no longer)
    out.flush();
    return out;
  }

  static void send(OutputStream out, String raw) throws IOException {
    out.write(raw.getBytes(StandardCharsets.UTF_8));
    out.flush();
  }

  static String chunk(String text, String tokenIds, String finish) {
    return "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
        + "\"text\":" + Json.write(text) + (tokenIds == null ? "" : ",\"token_ids\":" + tokenIds)
        + ",\"finish_reason\":" + (finish == null ? "null" : "\"" + finish + "\"") + "}]}\n\n";
  }

  static final String USAGE = "data: {\"id\":\"cmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":4,"
      + "\"completion_tokens\":3,\"total_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":2}}}\n\n";

  /** Records the pieces and whether any came after the future completed. */
  static class Pieces implements OutputListener {
    final List<String> texts = Collections.synchronizedList(new ArrayList<>());
    final List<int[]> tokens = Collections.synchronizedList(new ArrayList<>());
    final CountDownLatch first = new CountDownLatch(1);
    volatile CompletableFuture<EngineResult> future;
    volatile boolean late;

    @Override
    public void onOutput(int[] t, String text) {
      if (future != null && future.isDone()) {
        late = true;
      }
      tokens.add(t);
      texts.add(text);
      first.countDown();
    }

    CompletableFuture<EngineResult> run(OpenAiCompatibleEngine e, InferenceRequest r) {
      future = e.execute(r, this);
      return future;
    }
  }

  private static EngineException failure(CompletableFuture<EngineResult> f) {
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(20, TimeUnit.SECONDS));
    assertInstanceOf(EngineException.class, e.getCause());
    return (EngineException) e.getCause();
  }

  @Test
  void givesEachChunkAsItArrivesAndBuildsTheResultFromThem() throws Exception {
    CountDownLatch firstSeen = new CountDownLatch(1);
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk(" B", "[426]", null));
      try {
        // the next chunks only once the client has handed on the first: it streams
        firstSeen.await(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        return;
      }
      send(out, chunk("\u00e9", "[13]", null) + chunk("!", "[198]", "length") + USAGE + "data: [DONE]\n\n");
    });
    Pieces pieces = new Pieces() {
      @Override
      public void onOutput(int[] t, String text) {
        super.onOutput(t, text);
        firstSeen.countDown();
      }
    };
    EngineResult r = pieces.run(builder().build(), request()).get(20, TimeUnit.SECONDS);
    assertEquals(List.of(" B", "\u00e9", "!"), pieces.texts);
    assertEquals(List.of(426, 13, 198), pieces.tokens.stream().map(t -> t[0]).toList());
    assertArrayEquals(new int[] {426, 13, 198}, r.outputTokens());
    assertEquals(" B\u00e9!", r.text());
    assertEquals(4, r.promptTokens());
    assertEquals(2, r.cachedPromptTokens());
    assertEquals(-1, r.prefillNanos(), "the server reports no timings; the node times the request");
    assertFalse(pieces.late);
    Map<?, ?> sent = server.lastBody.get();
    assertEquals(Boolean.TRUE, sent.get("stream"));
    assertEquals(Map.of("include_usage", Boolean.TRUE), sent.get("stream_options"));
    assertEquals(Boolean.TRUE, sent.get("return_token_ids"));
    assertEquals(List.of(101L, 7L, 7L, 9000L), sent.get("prompt"));
  }

  @Test
  void theSharedFakeServerStreamsWhatItWouldAnswer() throws Exception {
    try (FakeOpenAiServer fake = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(fake.baseUrl()).build();
      EngineResult plain = e.execute(request()).get(20, TimeUnit.SECONDS);
      Pieces pieces = new Pieces();
      EngineResult streamed = pieces.run(e, request()).get(20, TimeUnit.SECONDS);
      assertEquals(plain, streamed);
      assertEquals(3, pieces.tokens.size(), "a chunk per token");
      assertArrayEquals(new int[] {4, 4, 4}, streamed.outputTokens());
      fake.streams(false); // a server that answers a streamed request in one piece
      Pieces one = new Pieces();
      assertEquals(plain, one.run(e, request()).get(20, TimeUnit.SECONDS));
      assertEquals(1, one.tokens.size());
      fake.streams(true);
      fake.answer((p, max) -> "{\"choices\":[]}"); // no completion to stream: sent as it is
      EngineException bad = failure(new Pieces().run(e, request()));
      assertTrue(bad.retryable() && bad.getMessage().contains("choices is empty"), bad.getMessage());
    }
  }

  @Test
  void withoutAListenerTheRequestIsNotStreamed() throws Exception {
    server.behaviour.set((ex, body) -> reply(ex, 200,
        "{\"choices\":[{\"text\":\"ok\",\"token_ids\":[1]}]}"));
    OpenAiCompatibleEngine e = builder().build();
    assertEquals("ok", e.execute(request()).get(20, TimeUnit.SECONDS).text());
    assertEquals(Boolean.FALSE, server.lastBody.get().get("stream"));
    assertFalse(server.lastBody.get().containsKey("stream_options"));
    assertEquals("ok", e.execute(request(), OutputListener.IGNORE).get(20, TimeUnit.SECONDS).text());
    assertEquals(Boolean.FALSE, server.lastBody.get().get("stream"), "IGNORE streams nothing");
  }

  @Test
  void aServerThatIgnoresReturnTokenIdsStreamsTextOnly() throws Exception {
    // a server that ignores return_token_ids sends text only; without a usage chunk the
    // counts are unknown
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("Hel", null, null) + chunk("lo", null, "stop") + "data: [DONE]\n\n");
    });
    Pieces pieces = new Pieces();
    EngineResult r = pieces.run(builder().build(), request()).get(20, TimeUnit.SECONDS);
    assertEquals(List.of("Hel", "lo"), pieces.texts);
    assertTrue(pieces.tokens.stream().allMatch(t -> t.length == 0));
    assertEquals("Hello", r.text());
    assertEquals(0, r.outputTokens().length);
    assertEquals(4, r.promptTokens(), "the request's length");
    assertEquals(-1, r.cachedPromptTokens());
  }

  @Test
  void commentsMultiLineDataCrlfAndIgnoredFieldsAreParsed() throws Exception {
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, ": ping\r\n\r\nid: 1\r\nevent: message\r\ndata: {\"choices\":[{\"text\":\"a\",\r\n"
          + "data: \"token_ids\":[1]}]}\r\nretry: 10\r\n\r\n");
      send(out, "data:{\"choices\":[{\"text\":\"b\",\"token_ids\":[2],"
          + "\"finish_reason\":\"length\"}]}\r\r: bye\n");
      send(out, "data: [DONE]\n\n");
    });
    Pieces pieces = new Pieces();
    EngineResult r = pieces.run(builder().build(), request()).get(20, TimeUnit.SECONDS);
    assertEquals("ab", r.text());
    assertArrayEquals(new int[] {1, 2}, r.outputTokens());
    assertEquals(2, pieces.texts.size());
  }

  @Test
  void eventsWithEmptyDataAreNoChunksAndDoNotFailTheStream() throws Exception {
    // an event whose data is empty ("data:", "data: ", "data") is a legal event of the format
    // (an EventSource dispatches it with empty data), which proxies send as keep-alives: it
    // carries no chunk. Such an event failed the request as a malformed chunk
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, "data:\n\n" + chunk("a", "[1]", null) + "data: \n\n: ping\r\n\r\n"
          + "data\r\n\r\n" + "id: 3\nretry: 100\ndata:  \n\n"
          + chunk("b", "[2]", "length") + "data:\n\n" + USAGE + "data: [DONE]\n\n");
    });
    Pieces pieces = new Pieces();
    EngineResult r = pieces.run(builder().build(), request()).get(20, TimeUnit.SECONDS);
    assertEquals("ab", r.text());
    assertArrayEquals(new int[] {1, 2}, r.outputTokens());
    assertEquals(List.of("a", "b"), pieces.texts);
    assertEquals(2, r.cachedPromptTokens());
  }

  @Test
  void eventsOfAnotherTypeThanMessageOrErrorAreNotChunks() throws Exception {
    // as an EventSource dispatches them: a named event (a proxy's or server's keep-alive) is
    // not a completion chunk, whatever its data
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("a", "[1]", null) + "event: ping\ndata: keep-alive\n\n"
          + "event: progress\ndata: {\"choices\":[{\"text\":\"X\",\"token_ids\":[9]}]}\n\n"
          + "event: message\n" + chunk("b", "[2]", "length") + USAGE + "data: [DONE]\n\n");
    });
    Pieces pieces = new Pieces();
    EngineResult r = pieces.run(builder().build(), request()).get(20, TimeUnit.SECONDS);
    assertEquals("ab", r.text());
    assertArrayEquals(new int[] {1, 2}, r.outputTokens());
    assertEquals(List.of("a", "b"), pieces.texts);
  }

  @Test
  void errorEventsAndErrorChunksAreRetryableFailuresWithTheServersMessage() {
    String[] errors = {
        "event: error\ndata: {\"error\":{\"message\":\"engine dead\"}}\n\n",
        // vLLM: a failure once the stream has begun is a data chunk with an error member
        "data: {\"error\":{\"message\":\"engine dead\",\"type\":\"BadRequestError\",\"code\":400}}\n\n"
            + "data: [DONE]\n\n",
        "data: {\"object\":\"error\",\"message\":\"engine dead\",\"code\":500}\n\ndata: [DONE]\n\n",
        "event: error\ndata: engine dead\n\n",
    };
    for (String error : errors) {
      server.behaviour.set((ex, body) -> {
        OutputStream out = startStream(ex);
        send(out, chunk("a", "[1]", null) + error);
      });
      Pieces pieces = new Pieces();
      EngineException e = failure(pieces.run(builder().build(), request()));
      assertTrue(e.retryable(), error);
      assertFalse(e instanceof InvalidRequestException, error);
      assertTrue(e.getMessage().contains("engine dead"), e.getMessage());
      assertEquals(List.of("a"), pieces.texts, "the output before the error was streamed");
    }
  }

  @Test
  void anOverloadReportedInTheStreamBeforeAnyOutputIsPushBackAsTheSameStatusBeforeIt() {
    // a server (or a proxy) that sent its headers and then reports overload, code 429 or 503,
    // has run none of the request, as when it answers that status at once: push-back. It was a
    // plain retryable failure, so the node answered a peer FAILED instead of BUSY
    String[] overloads = {
        "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"ServiceUnavailableError\","
            + "\"code\":503}}\n\ndata: [DONE]\n\n",
        "data: {\"object\":\"error\",\"message\":\"overloaded\",\"code\":429}\n\ndata: [DONE]\n\n",
        "event: error\ndata: {\"error\":{\"message\":\"overloaded\",\"code\":\"429\"}}\n\n",
        // the code written as a JSON float, whole: it was not taken for an overload
        "data: {\"error\":{\"message\":\"overloaded\",\"code\":503.0}}\n\ndata: [DONE]\n\n",
        "data: {\"object\":\"error\",\"message\":\"overloaded\",\"code\":4.29e2}\n\n",
    };
    for (String overload : overloads) {
      for (boolean afterOutput : new boolean[] {false, true}) {
        server.behaviour.set((ex, body) -> {
          OutputStream out = startStream(ex);
          send(out, (afterOutput ? chunk("a", "[1]", null) : ": ping\n\n") + overload);
        });
        Pieces pieces = new Pieces();
        EngineException e = failure(pieces.run(builder().build(), request()));
        assertTrue(e.retryable(), overload);
        // once output was streamed, the request did run: a failure of it, not push-back
        assertEquals(!afterOutput, e instanceof EngineBusyException, afterOutput + " " + overload);
        assertTrue(e.getMessage().contains("overloaded"), e.getMessage());
      }
    }
    // another code is no overload, nor one near 429 or 503 that is not whole
    for (String code : new String[] {"500", "503.5", "429.000001", "\"503.0\""}) {
      server.behaviour.set((ex, body) -> send(startStream(ex),
          "data: {\"error\":{\"message\":\"boom\",\"code\":" + code + "}}\n\ndata: [DONE]\n\n"));
      EngineException e = failure(new Pieces().run(builder().build(), request()));
      assertTrue(e.retryable(), code);
      assertFalse(e instanceof EngineBusyException, code + ": " + e);
    }
  }

  @Test
  void aRequestRefusedInTheStreamBeforeAnyOutputIsInvalidAsTheSameStatusBeforeIt() {
    // SGLang's scheduler refuses a prompt longer than it allows once the stream has begun: an
    // error with the code 400 in the stream, where the same request not streamed is answered
    // HTTP 400. It was a retryable failure: tried on every peer, each refusing it alike, counted
    // as failures of the engine, and the client got a 502
    String[] refusals = {
        "data: {\"error\":{\"message\":\"Input length (9000 tokens) exceeds the maximum "
            + "allowed length (4095 tokens).\",\"type\":\"BadRequestError\",\"code\":400}}\n\n"
            + "data: [DONE]\n\n",
        "data: {\"object\":\"error\",\"message\":\"Token id 99999 is out of vocabulary\","
            + "\"type\":\"BadRequestError\",\"param\":null,\"code\":400}\n\ndata: [DONE]\n\n",
        "event: error\ndata: {\"error\":{\"message\":\"bad stop\",\"code\":\"422\"}}\n\n",
        "data: {\"error\":{\"message\":\"too large\",\"code\":413.0}}\n\ndata: [DONE]\n\n",
    };
    for (String refusal : refusals) {
      for (boolean afterOutput : new boolean[] {false, true}) {
        server.behaviour.set((ex, body) -> {
          OutputStream out = startStream(ex);
          send(out, (afterOutput ? chunk("a", "[1]", null) : ": ping\n\n") + refusal);
        });
        EngineException e = failure(new Pieces().run(builder().build(), request()));
        // once output was streamed, the server did run the request: a failure of it
        assertEquals(!afterOutput, e instanceof InvalidRequestException, afterOutput + " " + e);
        assertEquals(afterOutput, e.retryable(), afterOutput + " " + refusal);
        String said = refusal.replaceAll("(?s).*\"message\":\"([^\"]*)\".*", "$1").strip();
        assertTrue(e.getMessage().contains(said), said + " in " + e.getMessage());
      }
    }
    // the codes that are not the request's fault before the stream stay retryable in it
    for (String code : new String[] {"401", "403", "404", "405", "408", "500", "400.5"}) {
      server.behaviour.set((ex, body) -> send(startStream(ex),
          "data: {\"error\":{\"message\":\"no\",\"code\":" + code + "}}\n\ndata: [DONE]\n\n"));
      EngineException e = failure(new Pieces().run(builder().build(), request()));
      assertTrue(e.retryable(), code);
      assertFalse(e instanceof InvalidRequestException, code + ": " + e);
    }
  }

  @Test
  void textStreamedWithoutTokenIdsIsOutputBeforeAnErrorInTheStream() {
    // a server that ignores return_token_ids streams text only: once it streamed some, it ran
    // the request, and an error it then reports is a failure of it, retryable, neither
    // push-back nor the request's fault
    for (String code : new String[] {"400", "429", "503"}) {
      server.behaviour.set((ex, body) -> send(startStream(ex), chunk("a", null, null)
          + "data: {\"error\":{\"message\":\"no\",\"code\":" + code + "}}\n\ndata: [DONE]\n\n"));
      Pieces pieces = new Pieces();
      EngineException e = failure(pieces.run(builder().build(), request()));
      assertTrue(e.retryable(), code + ": " + e);
      assertFalse(e instanceof EngineBusyException, code + ": " + e);
      assertFalse(e instanceof InvalidRequestException, code + ": " + e);
      assertEquals(List.of("a"), pieces.texts);
    }
  }

  @Test
  void llamaCppsErrorLineFailsTheStreamWithTheServersMessage() {
    // llama.cpp's server (before it sent its errors as data chunks) reported a failure once its
    // stream had begun as an "error:" line, then "data: [DONE]". The line was ignored as an
    // unknown field: the output before it completed the request as if it were whole, and a
    // refusal before any output failed as a stream without choice 0, the server's words lost
    server.behaviour.set((ex, body) -> send(startStream(ex), chunk("a", "[1]", null)
        + "error: {\"code\":500,\"message\":\"Compute error.\",\"type\":\"server_error\"}\n\n"
        + "data: [DONE]\n\n"));
    Pieces pieces = new Pieces();
    EngineException e = failure(pieces.run(builder().build(), request()));
    assertTrue(e.retryable(), e.toString());
    assertTrue(e.getMessage().contains("Compute error."), e.getMessage());
    assertEquals(List.of("a"), pieces.texts, "the output before the error was streamed");
    server.behaviour.set((ex, body) -> send(startStream(ex), "error: {\"code\":400,\"message\":"
        + "\"the request exceeds the available context size, try increasing it\",\"type\":"
        + "\"exceed_context_size_error\",\"n_prompt_tokens\":9000,\"n_ctx\":4096}\n\n"
        + "data: [DONE]\n\n"));
    e = failure(new Pieces().run(builder().build(), request()));
    assertInstanceOf(InvalidRequestException.class, e, e.toString());
    assertTrue(e.getMessage().contains("exceeds the available context size"), e.getMessage());
  }

  @Test
  void whatAServerStreamsAfterTheFinishReasonIsNotTheOutput() throws Exception {
    // a piece sent after the chunk with the finish_reason was appended to the answer and
    // streamed: the output went past the end the server itself gave it
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("a", "[1]", null) + chunk("b", "[2]", "stop")
          + chunk("c", "[3]", null) + chunk("d", "[4]", "length") + chunk("e", "[5]", "abort")
          + USAGE + "data: [DONE]\n\n");
    });
    Pieces pieces = new Pieces();
    EngineResult r = pieces.run(builder().build(), request()).get(20, TimeUnit.SECONDS);
    assertEquals("ab", r.text());
    assertArrayEquals(new int[] {1, 2}, r.outputTokens());
    assertEquals(List.of("a", "b"), pieces.texts);
    assertEquals(4, r.promptTokens(), "the usage chunk after the finish is read all the same");
    assertEquals(2, r.cachedPromptTokens());
  }

  @Test
  void moreThanTheLimitAfterDoneInDonesOwnReadDoesNotFailTheCompleteRequest() throws Exception {
    // the request is complete at [DONE]: what follows closes the connection once past the
    // limit, but the answer stays the stream's, as when it comes in a later read (it failed
    // the request when it came in [DONE]'s own read)
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("a", "[1]", "length") + "data: [DONE]\n\n" + (": pad\n").repeat(400));
    });
    Pieces pieces = new Pieces();
    EngineResult r = pieces.run(builder().maxResponseBytes(1024).build(), request())
        .get(20, TimeUnit.SECONDS);
    assertEquals("a", r.text());
    assertArrayEquals(new int[] {1}, r.outputTokens());
    assertEquals(List.of("a"), pieces.texts);
  }

  @Test
  void aStreamPastMaxTokensOrWithANegativeTokenIdFailsAtOnceAndIsClosed() throws Exception {
    // such a stream used to be read on to [DONE], to the output limit or to requestTimeout, its
    // pieces streamed; the node refused the answer only then, the server generating on meanwhile
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("a", "[1]", null) + chunk("b", "[2]", null) + chunk("c", "[3]", null)
          + chunk("d", "[4]", "length") + USAGE + "data: [DONE]\n\n");
    });
    Pieces pieces = new Pieces();
    EngineException err = failure(pieces.run(builder().build(), request()));
    assertTrue(err.retryable() && err.getMessage().contains("max_tokens 3"), err::toString);
    assertEquals(List.of("a", "b", "c"), pieces.texts, "no piece past max_tokens is streamed");
    // a stream that does not end is closed at the first token past max_tokens
    CountDownLatch closed = new CountDownLatch(1);
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      try {
        for (int i = 0; i < 20_000; i++) {
          send(out, chunk("x", "[5]", null));
          Thread.sleep(1);
        }
      } catch (IOException gone) {
        closed.countDown();
      } catch (InterruptedException stop) {
        Thread.currentThread().interrupt();
      }
    });
    EngineException endless = failure(new Pieces().run(builder().build(), request()));
    assertTrue(endless.retryable() && endless.getMessage().contains("max_tokens 3"),
        endless::toString);
    assertTrue(closed.await(10, TimeUnit.SECONDS), "the connection was left open");
    // no vocabulary has a negative token id
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("a", "[1]", null) + chunk("b", "[-7]", "length") + USAGE
          + "data: [DONE]\n\n");
    });
    Pieces negative = new Pieces();
    EngineException bad = failure(negative.run(builder().build(), request()));
    assertTrue(bad.retryable() && bad.getMessage().contains("-7"), bad::toString);
    assertEquals(List.of("a"), negative.texts);
  }

  @Test
  void chunksOfAnotherChoiceThanIndexZeroAreNotTheOutput() throws Exception {
    // a server that generates more than one sequence (n > 1 by its own default) streams each
    // choice's chunks with its index: the request's output is choice 0's alone
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("a", "[1]", null) + chunk("X", "[9]", null).replace("\"index\":0", "\"index\":1")
          + "data: {\"choices\":[{\"index\":1,\"text\":\"Y\",\"token_ids\":[8],\"finish_reason\":\"length\"},"
          + "{\"index\":0,\"text\":\"b\",\"token_ids\":[2],\"finish_reason\":\"length\"}]}\n\n"
          + USAGE + "data: [DONE]\n\n");
    });
    Pieces pieces = new Pieces();
    EngineResult r = pieces.run(builder().build(), request()).get(20, TimeUnit.SECONDS);
    assertEquals("ab", r.text());
    assertArrayEquals(new int[] {1, 2}, r.outputTokens());
    assertEquals(List.of("a", "b"), pieces.texts);
    // and a whole answer's choices in another order than their indexes
    server.behaviour.set((ex, body) -> reply(ex, 200, "{\"choices\":[{\"index\":1,\"text\":\"XY\","
        + "\"token_ids\":[9,8]},{\"index\":0,\"text\":\"ab\",\"token_ids\":[1,2]}]}"));
    EngineResult whole = builder().build().execute(request()).get(20, TimeUnit.SECONDS);
    assertEquals("ab", whole.text());
    assertArrayEquals(new int[] {1, 2}, whole.outputTokens());
    server.behaviour.set((ex, body) -> reply(ex, 200, "{\"choices\":[{\"index\":1,\"text\":\"XY\"}]}"));
    EngineException err = failure(builder().build().execute(request()));
    assertTrue(err.retryable() && err.getMessage().contains("index 0"), err.getMessage());
  }

  @Test
  void aStreamThatNeverCarriesChoiceZeroFailsAsAPlainAnswerWithoutItDoes() throws Exception {
    // the plain answer without a choice of index 0 is misshapen: so is such a stream, which
    // used to complete at [DONE] with an empty output
    String[] streams = {
        chunk("X", "[9]", "length").replace("\"index\":0", "\"index\":1") + USAGE + "data: [DONE]\n\n",
        USAGE + "data: [DONE]\n\n",
        "data: {\"choices\":[]}\n\ndata: [DONE]\n\n",
        "data: [DONE]\n\n",
    };
    for (String s : streams) {
      server.behaviour.set((ex, body) -> send(startStream(ex), s));
      Pieces pieces = new Pieces();
      EngineException err = failure(pieces.run(builder().build(), request()));
      assertTrue(err.retryable() && err.getMessage().contains("unexpected answer shape")
          && err.getMessage().contains("index 0"), s + " -> " + err);
      assertEquals(List.of(), pieces.texts, s);
    }
    // a choice 0 that says only that the generation ended is an empty output, as in a plain answer
    server.behaviour.set((ex, body) -> send(startStream(ex), chunk("", null, "length") + USAGE
        + "data: [DONE]\n\n"));
    EngineResult empty = new Pieces().run(builder().build(), request()).get(20, TimeUnit.SECONDS);
    assertEquals("", empty.text());
    assertArrayEquals(new int[0], empty.outputTokens());
  }

  @Test
  void anAbortedGenerationIsARetryableFailure() {
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("a", "[1]", "abort") + "data: [DONE]\n\n");
    });
    EngineException e = failure(new Pieces().run(builder().build(), request()));
    assertTrue(e.retryable());
    assertTrue(e.getMessage().contains("abort"), e.getMessage());
  }

  @Test
  void httpErrorsOfAStreamedRequestMapAsForAPlainOne() {
    int[] statuses = {400, 404, 429, 503, 500};
    for (int s : statuses) {
      server.behaviour.set((ex, body) -> reply(ex, s,
          "{\"object\":\"error\",\"message\":\"boom " + s + "\"}"));
      Pieces pieces = new Pieces();
      EngineException e = failure(pieces.run(builder().build(), request()));
      // a 404 naming no model: no completions endpoint there, this server's fault
      // (OpenAiCompatibleEngineTest has the 404s and 405s of both kinds, streamed too)
      assertEquals(s == 400, e instanceof InvalidRequestException, s + ": " + e);
      assertEquals(s == 429 || s == 503, e instanceof EngineBusyException, s + ": " + e);
      assertTrue(e.getMessage().contains("boom " + s), e.getMessage());
      assertTrue(pieces.texts.isEmpty());
    }
  }

  @Test
  void aStreamCutBeforeDoneIsARetryableFailure() {
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("a", "[1]", null) + chunk("b", "[2]", null)
          + "data: {\"choices\":[{\"index\":1,\"text\":\"x\",\"finish_reason\":\"stop\"}]}\n\n"
          + "data: [DONE]");
      // and the server goes away: the handler returns, the exchange ends the chunked body (the
      // [DONE] line not ended, and another choice's finish_reason: choice 0 is not finished)
    });
    Pieces pieces = new Pieces();
    OpenAiCompatibleEngine e = builder().build();
    EngineException err = failure(pieces.run(e, request()));
    assertTrue(err.retryable(), err.toString());
    assertTrue(err.getMessage().contains("before [DONE]"), err.getMessage());
    assertEquals(List.of("a", "b"), pieces.texts);
    assertEquals(0, e.load().total());
  }

  @Test
  void aStreamThatReachesDoneWithoutAFinishReasonIsCutOutputAndFailsRetryably() {
    // vLLM, SGLang and llama.cpp give every choice they end a finish_reason in its last chunk,
    // before [DONE]: a [DONE] without it (a proxy that lost the last chunks and closed the
    // stream properly) ends an output that may be cut, which used to complete the request
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("a", "[1]", null));
      send(out, chunk("b", "[2]", null));
      send(out, USAGE);
      send(out, "data: [DONE]\n\n");
    });
    Pieces pieces = new Pieces();
    EngineException err = failure(pieces.run(builder().build(), request()));
    assertFalse(err instanceof EngineTimeoutException, err::toString);
    assertTrue(err.retryable(), err::toString);
    assertTrue(err.getMessage().contains("[DONE] without a finish_reason for choice 0"),
        err.getMessage());
    assertEquals(List.of("a", "b"), pieces.texts);
    assertFalse(pieces.late);
  }

  @Test
  void aStreamThatEndsAfterTheFinishReasonWithoutDoneCompletesWithItsOutput() throws Exception {
    // the server said the generation is over (a proxy dropped the [DONE], or the usage chunk
    // and [DONE]): the output is whole. It used to fail retryably, and a peer generated it again
    String[] ends = {"", USAGE, USAGE + ": bye\n\ndata: [DONE]"};
    for (String end : ends) {
      server.behaviour.set((ex, body) -> {
        OutputStream out = startStream(ex);
        send(out, chunk("a", "[1]", null) + chunk("b", "[2]", "stop") + end);
      });
      Pieces pieces = new Pieces();
      OpenAiCompatibleEngine e = builder().build();
      EngineResult r = pieces.run(e, request()).get(20, TimeUnit.SECONDS);
      assertEquals("ab", r.text(), end);
      assertArrayEquals(new int[] {1, 2}, r.outputTokens());
      assertEquals(List.of("a", "b"), pieces.texts);
      assertEquals(end.isEmpty() ? -1 : 2, r.cachedPromptTokens(), "the usage chunk, if it came");
      assertEquals(0, e.load().total());
    }
  }

  /**
   * What goes wrong in a stream after choice 0's finish_reason (an error the server reports, for
   * another choice say, or a chunk that cannot be read) leaves the output whole and streamed:
   * the request completes with it, as when the stream is cut or held open there. It used to
   * fail, retryable, so the node ran the whole generation again on a peer, whose output the
   * client (which had it all) could get different, a divergence; and whether it failed
   * depended on the error coming before the 1 s after which a held stream completes.
   */
  @Test
  void whatGoesWrongAfterTheFinishReasonCompletesTheRequestWithItsOutput() throws Exception {
    String[] afters = {
        "event: error\ndata: {\"error\":{\"message\":\"engine dead\"}}\n\n",
        "data: {\"error\":{\"message\":\"engine dead\",\"code\":500}}\n\ndata: [DONE]\n\n",
        "data: {\"object\":\"error\",\"message\":\"overloaded\",\"code\":503}\n\n"
            + "data: [DONE]\n\n",
        "data: {not json\n\ndata: [DONE]\n\n",
    };
    for (String after : afters) {
      for (String usage : new String[] {"", USAGE}) {
        server.behaviour.set((ex, body) -> send(startStream(ex),
            chunk("a", "[1]", null) + chunk("b", "[2]", "stop") + usage + after));
        Pieces pieces = new Pieces();
        OpenAiCompatibleEngine e = builder().build();
        EngineResult r;
        try {
          r = pieces.run(e, request()).get(20, TimeUnit.SECONDS);
        } catch (ExecutionException failed) {
          throw new AssertionError("failed by " + after.strip().replace('\n', ' ') + ": "
              + failed.getCause(), failed);
        }
        assertEquals("ab", r.text(), after);
        assertArrayEquals(new int[] {1, 2}, r.outputTokens());
        assertEquals(usage.isEmpty() ? -1 : 2, r.cachedPromptTokens(), "the usage chunk, if any");
        assertEquals(List.of("a", "b"), pieces.texts);
        assertEquals(0, e.load().total());
      }
    }
  }

  /**
   * A stream that, after choice 0's finish_reason (and the usage chunk), stays open with neither
   * {@code [DONE]} nor its end (a proxy that drops the one and holds the other) has its whole
   * output: the request completes with it 1 s after the finish_reason, or at requestTimeout
   * when that comes first, and the connection is closed. It used to fail at requestTimeout with
   * a non-retryable EngineTimeoutException, its output lost and its slot held until then.
   */
  @Test
  void aStreamHeldOpenAfterTheFinishReasonCompletesWithItsOutputSoon() throws Exception {
    for (long timeoutMillis : new long[] {10_000, 600}) {
      CountDownLatch closed = new CountDownLatch(1);
      server.behaviour.set((ex, body) -> {
        OutputStream out = startStream(ex);
        send(out, chunk("a", "[1]", null) + chunk("b", "[2]", "stop") + USAGE);
        try {
          while (!server.release.await(50, TimeUnit.MILLISECONDS)) {
            send(out, ": keep-alive\n\n");
          }
        } catch (IOException gone) {
          closed.countDown();
        } catch (InterruptedException stop) {
          Thread.currentThread().interrupt();
        }
      });
      Pieces pieces = new Pieces();
      OpenAiCompatibleEngine e = builder().requestTimeout(Duration.ofMillis(timeoutMillis)).build();
      long start = System.nanoTime();
      EngineResult r = pieces.run(e, request()).get(20, TimeUnit.SECONDS);
      long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertEquals("ab", r.text(), "requestTimeout " + timeoutMillis);
      assertArrayEquals(new int[] {1, 2}, r.outputTokens());
      assertEquals(2, r.cachedPromptTokens(), "the usage chunk came");
      assertTrue(tookMillis < 8_000, "completed after " + tookMillis + " ms");
      assertEquals(List.of("a", "b"), pieces.texts);
      assertFalse(pieces.late);
      assertEquals(0, e.load().total());
      assertTrue(closed.await(10, TimeUnit.SECONDS), "the connection was closed");
    }
  }

  @Test
  void aConnectionResetAfterTheFinishReasonCompletesWithTheOutput() throws Exception {
    try (java.net.ServerSocket raw = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl("http://127.0.0.1:" + raw.getLocalPort()).build();
      Pieces pieces = new Pieces();
      CompletableFuture<EngineResult> f = pieces.run(e, request());
      raw.setSoTimeout(10_000);
      try (java.net.Socket conn = raw.accept()) {
        OutputStream out = startRawStream(conn);
        String last = chunk("b", "[2]", "length");
        out.write((Integer.toHexString(last.length()) + "\r\n" + last + "\r\n")
            .getBytes(StandardCharsets.UTF_8));
        out.flush();
        for (int i = 0; i < 200 && pieces.texts.size() < 2; i++) {
          Thread.sleep(25);
        }
        assertEquals(List.of("a", "b"), pieces.texts);
        conn.setSoLinger(true, 0); // close with a reset, before the chunked body's end
      }
      EngineResult r = f.get(20, TimeUnit.SECONDS);
      assertEquals("ab", r.text());
      assertArrayEquals(new int[] {1, 2}, r.outputTokens());
      assertEquals(0, e.load().total());
    }
  }

  @Test
  void aConnectionResetMidStreamIsARetryableFailure() throws Exception {
    try (java.net.ServerSocket raw = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl("http://127.0.0.1:" + raw.getLocalPort()).build();
      Pieces pieces = new Pieces();
      CompletableFuture<EngineResult> f = pieces.run(e, request());
      raw.setSoTimeout(10_000);
      try (java.net.Socket conn = raw.accept()) {
        OutputStream out = startRawStream(conn);
        assertTrue(pieces.first.await(10, TimeUnit.SECONDS));
        conn.setSoLinger(true, 0); // close with a reset
      }
      EngineException err = failure(f);
      assertTrue(err.retryable(), err.toString());
      assertFalse(err instanceof EngineTimeoutException);
    }
  }

  @Test
  void oversizedEventsAreRefused() {
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("x".repeat(5000), "[1]", null) + "data: [DONE]\n\n");
    });
    OpenAiCompatibleEngine e = builder().maxResponseBytes(1024).build();
    EngineException err = failure(new Pieces().run(e, request()));
    assertTrue(err.retryable());
    assertTrue(err.getMessage().contains("longer than 1024 bytes"), err.getMessage());
    // many small events whose output together passes the limit (text only: their tokens
    // would pass max_tokens first)
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      for (int i = 0; i < 200; i++) {
        send(out, chunk("0123456789", null, null));
      }
      send(out, "data: [DONE]\n\n");
    });
    err = failure(new Pieces().run(e, request()));
    assertTrue(err.getMessage().contains("output larger than 1024"), err.getMessage());
    // and one endless line
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      for (int i = 0; i < 100; i++) {
        send(out, ": " + "z".repeat(100));
      }
    });
    err = failure(new Pieces().run(e, request()));
    assertTrue(err.getMessage().contains("longer than 1024 bytes"), err.getMessage());
  }

  /**
   * A chunk is parsed with the bound of a plain answer, 16 MiB plus 6 bytes a character: one of
   * tiny values ({@code {},{},...}, tens of bytes a character once parsed) is refused before
   * it is used, and gives no piece.
   */
  @Test
  void aChunkOfTinyValuesIsRefusedAsItIsParsed() {
    String tiny = "{\"choices\":[{\"index\":0,\"text\":\"a\",\"token_ids\":[5],\"extra\":["
        + "{},".repeat(400_000) + "{}]}]}";
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, "data: " + tiny + "\n\n" + chunk("b", "[6]", "stop") + "data: [DONE]\n\n");
    });
    Pieces pieces = new Pieces();
    OpenAiCompatibleEngine e = builder().build();
    EngineException err = failure(pieces.run(e, request()));
    assertTrue(err.retryable(), err.toString());
    assertTrue(err.getMessage().contains("more than " + ((16L << 20) + 6L * tiny.length())
        + " bytes of heap once parsed"), err.getMessage());
    assertEquals(List.of(), pieces.texts);
    assertEquals(0, e.load().total());
  }

  @Test
  void malformedChunksAreRetryableFailures() {
    String[] bad = {
        "data: {\"choices\":[{\"text\":5}]}\n\n",
        "data: {\"choices\":[{\"text\":\"a\",\"token_ids\":[\"x\"]}]}\n\n",
        "data: not json\n\n",
        "data: [1,2]\n\n",
        "data: {\"choices\":{}}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":9}}}\n\n",
    };
    for (String b : bad) {
      server.behaviour.set((ex, body) -> {
        OutputStream out = startStream(ex);
        send(out, b + "data: [DONE]\n\n");
      });
      EngineException err = failure(new Pieces().run(builder().build(), request()));
      assertTrue(err.retryable(), b);
    }
    // invalid UTF-8
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      out.write(new byte[] {'d', 'a', 't', 'a', ':', ' ', (byte) 0xC3, '\n', '\n'});
      out.flush();
    });
    EngineException err = failure(new Pieces().run(builder().build(), request()));
    assertTrue(err.getMessage().contains("UTF-8"), err.getMessage());
  }

  /**
   * The usage chunk of a server that reported {@code cached_tokens} before (in a stream or in a
   * plain answer) and leaves them out now is a miss, 0, as vLLM leaves them out for 0; a stream
   * without a usage chunk says nothing, -1.
   */
  @Test
  void aUsageChunkWithoutCachedTokensAfterAReportIsAMiss() throws Exception {
    String usageWithout = "data: {\"id\":\"cmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":4,"
        + "\"completion_tokens\":3,\"total_tokens\":7}}\n\n";
    String reportedAnswer = "{\"choices\":[{\"index\":0,\"text\":\"x\"}],"
        + "\"usage\":{\"prompt_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":2}}}";
    String output = chunk("a", "[1]", null) + chunk("b", "[2]", "length");
    // reported in a stream, then left out in a stream
    OpenAiCompatibleEngine e = builder().build();
    server.behaviour.set((ex, body) -> send(startStream(ex), output + USAGE + "data: [DONE]\n\n"));
    assertEquals(2, new Pieces().run(e, request()).get(20, TimeUnit.SECONDS).cachedPromptTokens());
    server.behaviour.set((ex, body) ->
        send(startStream(ex), output + usageWithout + "data: [DONE]\n\n"));
    assertEquals(0, new Pieces().run(e, request()).get(20, TimeUnit.SECONDS).cachedPromptTokens(),
        "the server reported cached_tokens before and leaves them out only for 0 (as vLLM "
            + "does): the miss was read as unknown");
    server.behaviour.set((ex, body) -> send(startStream(ex), output + "data: [DONE]\n\n"));
    assertEquals(-1, new Pieces().run(e, request()).get(20, TimeUnit.SECONDS).cachedPromptTokens(),
        "a stream without a usage chunk says nothing of the cache");
    // reported in a plain answer, then left out in a stream
    OpenAiCompatibleEngine plainFirst = builder().build();
    server.behaviour.set((ex, body) -> reply(ex, 200, reportedAnswer));
    assertEquals(2, plainFirst.execute(request()).get(20, TimeUnit.SECONDS).cachedPromptTokens());
    server.behaviour.set((ex, body) ->
        send(startStream(ex), output + usageWithout + "data: [DONE]\n\n"));
    assertEquals(0,
        new Pieces().run(plainFirst, request()).get(20, TimeUnit.SECONDS).cachedPromptTokens(),
        "reported in a plain answer, left out in a stream: the miss was read as unknown");
    // never reported: unknown, as before
    assertEquals(-1,
        new Pieces().run(builder().build(), request()).get(20, TimeUnit.SECONDS)
            .cachedPromptTokens(), "a server that never reported cached_tokens: unknown");
  }

  @Test
  void aPlainJsonAnswerToAStreamedRequestIsGivenAsOnePiece() throws Exception {
    server.behaviour.set((ex, body) -> reply(ex, 200,
        "{\"choices\":[{\"text\":\"all\",\"token_ids\":[1,2,3]}],\"usage\":{\"prompt_tokens\":4}}"));
    Pieces pieces = new Pieces();
    EngineResult r = pieces.run(builder().build(), request()).get(20, TimeUnit.SECONDS);
    assertEquals(List.of("all"), pieces.texts);
    assertArrayEquals(new int[] {1, 2, 3}, pieces.tokens.get(0));
    assertEquals("all", r.text());
    assertFalse(pieces.late);
  }

  @Test
  void aStalledStreamTimesOutNotRetryably() throws Exception {
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("a", "[1]", null));
      server.awaitRelease(); // and nothing more
    });
    OpenAiCompatibleEngine e = builder().requestTimeout(Duration.ofMillis(800)).build();
    Pieces pieces = new Pieces();
    EngineException err = failure(pieces.run(e, request()));
    assertInstanceOf(EngineTimeoutException.class, err, err::toString);
    assertFalse(err.retryable());
    assertTrue(err.getMessage().contains("within 800 ms"), err.getMessage());
    assertEquals(List.of("a"), pieces.texts);
    assertFalse(pieces.late);
    assertEquals(0, e.load().total());
  }

  @Test
  void aStreamThatGoesSilentFailsRetryablyAtItsIdleBoundLongBeforeRequestTimeout() throws Exception {
    // a server that opens the stream, sends a piece and then nothing (neither a chunk nor the
    // end of the body) does not hold the request, its slot and its client to requestTimeout
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("a", "[1]", null));
      server.awaitRelease(); // and nothing more
    });
    Pieces pieces = new Pieces();
    failsAtIdleBound(2_000, pieces);
    assertEquals(List.of("a"), pieces.texts);
    assertFalse(pieces.late);
  }

  /**
   * Runs a request with a {@code streamIdleTimeout} of {@code boundMillis} and a
   * {@code requestTimeout} far above it against the server's behaviour, and checks that it fails
   * at the bound: a retryable {@link EngineException} that is no timeout and names the bound,
   * with the engine's load back to 0.
   */
  private void failsAtIdleBound(long boundMillis, Pieces pieces) throws Exception {
    OpenAiCompatibleEngine e = builder().requestTimeout(Duration.ofSeconds(60))
        .streamIdleTimeout(Duration.ofMillis(boundMillis)).build();
    CompletableFuture<EngineResult> f = pieces.run(e, request());
    ExecutionException thrown =
        assertThrows(ExecutionException.class, () -> f.get(20, TimeUnit.SECONDS));
    EngineException err = assertInstanceOf(EngineException.class, thrown.getCause());
    assertFalse(err instanceof EngineTimeoutException, err::toString);
    assertTrue(err.retryable(), err::toString);
    assertTrue(err.getMessage().contains(
        "nothing for " + boundMillis + " ms (streamIdleTimeout)"), err.getMessage());
    assertEquals(0, e.load().total());
  }

  @Test
  void aStreamThatSendsNothingAfterItsHeadersFailsAtItsIdleBound() throws Exception {
    server.behaviour.set((ex, body) -> {
      startStream(ex);
      server.awaitRelease(); // no chunk, no end
    });
    Pieces pieces = new Pieces();
    failsAtIdleBound(300, pieces);
    assertTrue(pieces.texts.isEmpty());
  }

  @Test
  void aStreamWhosePiecesComeWithinItsIdleBoundRunsPastIt() throws Exception {
    // the bound is between pieces, not on the whole stream: pieces (and a keep-alive comment
    // between them) 500 ms apart, 3 s in all, outlast a bound of 2 s and complete
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      for (int i = 0; i < 3; i++) {
        send(out, chunk("x", "[" + i + "]", null));
        sleep(500);
        send(out, ": keep-alive\n\n");
        sleep(500);
      }
      send(out, chunk("", "[]", "length"));
      send(out, "data: [DONE]\n\n");
    });
    OpenAiCompatibleEngine e = builder().requestTimeout(Duration.ofSeconds(60))
        .streamIdleTimeout(Duration.ofSeconds(2)).build();
    EngineResult r = new Pieces().run(e, request()).get(20, TimeUnit.SECONDS);
    assertEquals("xxx", r.text());
    assertArrayEquals(new int[] {0, 1, 2}, r.outputTokens());
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException ie) {
      Thread.currentThread().interrupt();
    }
  }

  @Test
  void aServerThatSendsNoHeadersFailsAtItsIdleBound() throws Exception {
    // the bound runs from the request's sending: a server that takes the request and answers
    // nothing, not even its headers, fails it as one silent mid-stream does
    server.behaviour.set((ex, body) -> server.awaitRelease());
    Pieces pieces = new Pieces();
    failsAtIdleBound(300, pieces);
    assertTrue(pieces.texts.isEmpty());
  }

  @Test
  void theAnswersHeadersStartTheIdleBoundAgain() throws Exception {
    // headers 3 s after the request, the first chunk 3 s after them: each within the bound of
    // 5.2 s of what came before (2.2 s to spare on a loaded machine), though the first chunk
    // comes 6 s after the request
    server.behaviour.set((ex, body) -> {
      sleep(3_000);
      OutputStream out = startStream(ex);
      sleep(3_000);
      send(out, chunk("a", "[1]", "length"));
      send(out, "data: [DONE]\n\n");
    });
    OpenAiCompatibleEngine e = builder().requestTimeout(Duration.ofSeconds(60))
        .streamIdleTimeout(Duration.ofMillis(5_200)).build();
    EngineResult r = new Pieces().run(e, request()).get(20, TimeUnit.SECONDS);
    assertEquals("a", r.text());
  }

  /** A whole plain (non-streamed) answer of 70 bytes: "ab", tokens 1 and 2, cut at length. */
  private static final byte[] PLAIN_ANSWER =
      "{\"choices\":[{\"text\":\"ab\",\"token_ids\":[1,2],\"finish_reason\":\"length\"}]}"
          .getBytes(StandardCharsets.UTF_8);

  @Test
  void aPlainAnswerToAStreamedRequestThatGoesSilentFailsAtItsIdleBound() throws Exception {
    // a server that ignores "stream" and answers plain JSON, of which it sends a few bytes and
    // then nothing: the request fails at the idle bound as a silent stream does, not only at
    // requestTimeout
    byte[] answer = PLAIN_ANSWER;
    server.behaviour.set((ex, body) -> {
      ex.getResponseHeaders().add("Content-Type", "application/json");
      ex.sendResponseHeaders(200, answer.length);
      OutputStream out = ex.getResponseBody();
      out.write(answer, 0, 10);
      out.flush();
      server.awaitRelease(); // and nothing more
    });
    Pieces pieces = new Pieces();
    failsAtIdleBound(5_000, pieces);
    assertTrue(pieces.texts.isEmpty());
  }

  @Test
  void aPlainAnswerToAStreamedRequestWhosePartsComeWithinItsIdleBoundRunsPastIt() throws Exception {
    // the bound is between parts of the body, not on the whole body: parts 1 s apart, 3 s in
    // all, outlast a bound of 2 s and complete
    byte[] answer = PLAIN_ANSWER;
    server.behaviour.set((ex, body) -> {
      ex.getResponseHeaders().add("Content-Type", "application/json");
      ex.sendResponseHeaders(200, answer.length);
      OutputStream out = ex.getResponseBody();
      for (int i = 0; i < 3; i++) {
        out.write(answer, i * 10, 10);
        out.flush();
        sleep(1_000);
      }
      out.write(answer, 30, answer.length - 30);
      out.flush();
    });
    OpenAiCompatibleEngine e = builder().requestTimeout(Duration.ofSeconds(60))
        .streamIdleTimeout(Duration.ofSeconds(2)).build();
    EngineResult r = new Pieces().run(e, request()).get(20, TimeUnit.SECONDS);
    assertEquals("ab", r.text());
    assertArrayEquals(new int[] {1, 2}, r.outputTokens());
  }

  @Test
  void theIdleBoundMustBePositive() {
    for (Duration d : new Duration[] {null, Duration.ZERO, Duration.ofMillis(-1)}) {
      IllegalArgumentException ex = assertThrows(IllegalArgumentException.class,
          () -> builder().streamIdleTimeout(d).build());
      assertTrue(ex.getMessage().startsWith("streamIdleTimeout must be positive"), ex.getMessage());
    }
  }

  @Test
  void aStreamOfKeepAlivesAloneTimesOutAsAStalledOne() throws Exception {
    // keep-alives are no output: a server (or proxy) that sends only them, for a request still
    // queued or a server wedged, fails at requestTimeout like any stalled stream
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      try {
        while (!server.release.await(100, TimeUnit.MILLISECONDS)) {
          send(out, ": ping\n\nevent: ping\ndata: keep-alive\n\n");
        }
      } catch (InterruptedException stop) {
        Thread.currentThread().interrupt();
      }
    });
    OpenAiCompatibleEngine e = builder().requestTimeout(Duration.ofMillis(800)).build();
    Pieces pieces = new Pieces();
    EngineException err = failure(pieces.run(e, request()));
    assertInstanceOf(EngineTimeoutException.class, err, err::toString);
    assertFalse(err.retryable());
    assertTrue(pieces.texts.isEmpty());
    assertEquals(0, e.load().total());
  }

  /**
   * A request's pieces come one at a time and in order, each call seeing what the one before
   * it did (a plain field, no lock), also when the HTTP client reads the request's stream on
   * several threads of its executor and other requests stream at once.
   */
  @Test
  void eachRequestsPiecesComeOneAtATimeInOrderWhileOthersStreamAtOnce() throws Exception {
    int chunks = 40;
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      for (int i = 0; i < chunks; i++) {
        send(out, chunk("x", "[" + i + "]", i == chunks - 1 ? "length" : null));
        if (i % 4 == 0) {
          sleep(1); // reads of their own
        }
      }
      send(out, "data: [DONE]\n\n");
    });
    java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(4);
    try {
      OpenAiCompatibleEngine e = builder().executor(pool).build();
      class Ordered implements OutputListener {
        final java.util.concurrent.atomic.AtomicBoolean inside =
            new java.util.concurrent.atomic.AtomicBoolean();
        final List<String> breaches = Collections.synchronizedList(new ArrayList<>());
        int next; // plain: each call must see the previous call's write

        @Override
        public void onOutput(int[] t, String text) {
          if (!inside.compareAndSet(false, true)) {
            breaches.add("two calls at once");
          }
          for (int token : t) {
            if (token != next) {
              breaches.add("token " + token + " where " + next + " was due");
            }
            next = token + 1;
          }
          Thread.yield(); // linger, so that an overlapping call would be seen
          inside.set(false);
        }
      }
      List<Ordered> listeners = new ArrayList<>();
      List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
      for (int i = 0; i < 6; i++) {
        Ordered l = new Ordered();
        listeners.add(l);
        fs.add(e.execute(new InferenceRequest("r" + i, new int[] {1, 2, i},
            new GenerationParams(chunks, 0.0, 1.0, 1L)), l));
      }
      for (int i = 0; i < fs.size(); i++) {
        EngineResult r = fs.get(i).get(20, TimeUnit.SECONDS);
        assertEquals(chunks, r.outputTokens().length);
        assertEquals(List.of(), listeners.get(i).breaches, "request r" + i);
        assertEquals(chunks, listeners.get(i).next, "request r" + i);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aListenerThatThrowsIsNotCalledAgainAndTheRequestCompletes() throws Exception {
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("a", "[1]", null) + chunk("b", "[2]", "length") + USAGE + "data: [DONE]\n\n");
    });
    int[] calls = new int[1];
    EngineResult r = builder().build().execute(request(), (t, s) -> {
      calls[0]++;
      throw new IllegalStateException("gone");
    }).get(20, TimeUnit.SECONDS);
    assertEquals(1, calls[0]);
    assertEquals("ab", r.text());
  }

  @Test
  void aListenerThatThrowsAnErrorIsNotCalledAgainAndTheRequestCompletes() throws Exception {
    // an Error is a throw like any other: streamed, it failed the request; answered by a plain
    // JSON body, it left the request never completed (its deadline was already off)
    for (boolean eventStream : new boolean[] {true, false}) {
      server.behaviour.set((ex, body) -> {
        if (!eventStream) {
          reply(ex, 200, "{\"choices\":[{\"text\":\"ab\",\"token_ids\":[1,2]}]}");
          return;
        }
        OutputStream out = startStream(ex);
        send(out, chunk("a", "[1]", null) + chunk("b", "[2]", "length") + USAGE
            + "data: [DONE]\n\n");
      });
      AtomicInteger calls = new AtomicInteger();
      CompletableFuture<EngineResult> f = builder().requestTimeout(Duration.ofSeconds(2)).build()
          .execute(request(), (t, s) -> {
            calls.incrementAndGet();
            throw new AssertionError("the listener's own failure");
          });
      EngineResult r = f.get(20, TimeUnit.SECONDS);
      assertEquals("ab", r.text(), eventStream ? "streamed" : "a plain answer");
      assertArrayEquals(new int[] {1, 2}, r.outputTokens());
      assertEquals(1, calls.get());
    }
  }

  /**
   * A listener that throws a checked exception without declaring it (as code in a language
   * without checked exceptions can) is a throw like any other: it got past the adapter's catch,
   * so that a request answered by a plain JSON body never completed and a streamed one failed.
   */
  @Test
  void aListenerThatThrowsACheckedExceptionIsNotCalledAgainAndTheRequestCompletes()
      throws Exception {
    for (boolean eventStream : new boolean[] {true, false}) {
      server.behaviour.set((ex, body) -> {
        if (!eventStream) {
          reply(ex, 200, "{\"choices\":[{\"text\":\"ab\",\"token_ids\":[1,2]}]}");
          return;
        }
        OutputStream out = startStream(ex);
        send(out, chunk("a", "[1]", null) + chunk("b", "[2]", "length") + USAGE
            + "data: [DONE]\n\n");
      });
      String how = eventStream ? "streamed" : "a plain answer";
      AtomicInteger calls = new AtomicInteger();
      CompletableFuture<EngineResult> f = builder().requestTimeout(Duration.ofSeconds(2)).build()
          .execute(request(), (t, s) -> {
            calls.incrementAndGet();
            throw ThrowingCacheEventListener.<RuntimeException>undeclared(
                new IOException("the client went away"));
          });
      EngineResult r;
      try {
        r = f.get(8, TimeUnit.SECONDS);
      } catch (java.util.concurrent.TimeoutException | ExecutionException e) {
        throw new AssertionError(how + ": " + e, e);
      }
      assertEquals("ab", r.text(), how);
      assertArrayEquals(new int[] {1, 2}, r.outputTokens());
      assertEquals(1, calls.get(), how);
    }
  }

  /**
   * Reads the request on a raw connection, then answers it with the head of a chunked event
   * stream and its first chunk, a piece {@code "a"} of token 1.
   */
  private static OutputStream startRawStream(java.net.Socket conn) throws IOException {
    ScriptedOpenAiServer.readRequest(conn);
    OutputStream out = conn.getOutputStream();
    String piece = chunk("a", "[1]", null);
    out.write(("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        + "Transfer-Encoding: chunked\r\n\r\n" + Integer.toHexString(piece.length()) + "\r\n"
        + piece + "\r\n").getBytes(StandardCharsets.UTF_8));
    out.flush();
    return out;
  }

  @Test
  void cancelClosesTheUpstreamStreamAndStopsThePieces() throws Exception {
    // vLLM aborts a request whose client disconnects: cancelling a streamed request must close
    // the connection, not only stop reading it
    try (java.net.ServerSocket raw = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl("http://127.0.0.1:" + raw.getLocalPort()).requestTimeout(Duration.ofSeconds(60)).build();
      Pieces pieces = new Pieces();
      CompletableFuture<EngineResult> f = pieces.run(e, request());
      raw.setSoTimeout(10_000);
      try (java.net.Socket conn = raw.accept()) {
        OutputStream out = startRawStream(conn);
        assertTrue(pieces.first.await(10, TimeUnit.SECONDS), "the first piece never came");
        e.cancel("r1");
        assertFalse(failure(f).retryable());
        // the server goes on generating: nothing more reaches the listener
        String next = chunk("b", "[2]", null);
        try {
          out.write((Integer.toHexString(next.length()) + "\r\n" + next + "\r\n")
              .getBytes(StandardCharsets.UTF_8));
          out.flush();
        } catch (IOException closed) {
          // already closed by the client
        }
        int after;
        try {
          after = conn.getInputStream().read();
        } catch (java.net.SocketTimeoutException t) {
          throw new AssertionError("the connection stayed open 10 s after cancel", t);
        } catch (java.net.SocketException reset) {
          after = -1;
        }
        assertEquals(-1, after, "the client sent more instead of closing");
      }
      assertEquals(List.of("a"), pieces.texts);
      assertFalse(pieces.late);
      assertEquals(0, e.load().total());
    }
  }

  @Test
  void cancelWaitsForAPieceInProgressBeforeItCompletesTheFuture() throws Exception {
    // the node writes the rest of the answer when the future completes: a piece still being
    // written then would interleave with it. cancel must close the stream to the listener (wait
    // for a call in progress) before it completes the future, as a timeout does.
    server.behaviour.set((ex, body) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("a", "[1]", null));
      server.awaitRelease();
    });
    OpenAiCompatibleEngine e = builder().build();
    CountDownLatch inListener = new CountDownLatch(1);
    CountDownLatch letGo = new CountDownLatch(1);
    boolean[] doneWhenPieceEnded = new boolean[1];
    Pieces pieces = new Pieces() {
      @Override
      public void onOutput(int[] t, String text) {
        super.onOutput(t, text);
        inListener.countDown();
        try {
          letGo.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
        }
        doneWhenPieceEnded[0] = future.isDone();
      }
    };
    CompletableFuture<EngineResult> f = pieces.run(e, request());
    assertTrue(inListener.await(10, TimeUnit.SECONDS), "the first piece never came");
    Thread canceller = new Thread(() -> e.cancel("r1"), "canceller");
    canceller.start();
    // the canceller either completes the future at once, or waits for the listener's call
    for (int i = 0; i < 10_000 && !f.isDone() && canceller.getState() != Thread.State.BLOCKED
        && canceller.getState() != Thread.State.WAITING; i++) {
      Thread.sleep(1);
    }
    boolean doneWhileInListener = f.isDone();
    letGo.countDown();
    canceller.join(10_000);
    assertFalse(canceller.isAlive());
    assertFalse(doneWhileInListener, "the future completed while a piece was being given");
    assertFalse(doneWhenPieceEnded[0], "the future completed while a piece was being given");
    assertFalse(failure(f).retryable());
    assertEquals(List.of("a"), pieces.texts);
    assertEquals(0, e.load().total());
  }

  @Test
  void stopsGoToTheServerAndItsCutOutputIsTheResultWholeOrStreamed() throws Exception {
    InferenceRequest r = new InferenceRequest("r1", new int[] {101, 7},
        new GenerationParams(16, 0.0, 1.0, 17L, List.of("\nObservation:", "END"),
            List.of(128_009, 2)));
    // as vLLM answers a stop string: the text without it, the token ids through the token
    // that completed it
    server.behaviour.set((ex, body) -> reply(ex, 200, "{\"choices\":[{\"text\":\"Thought\","
        + "\"token_ids\":[11,12,13],\"finish_reason\":\"stop\",\"stop_reason\":"
        + "\"\\nObservation:\"}],\"usage\":{\"prompt_tokens\":2}}"));
    OpenAiCompatibleEngine e = builder().build();
    EngineResult whole = e.execute(r).get(20, TimeUnit.SECONDS);
    Map<?, ?> body = server.lastBody.get();
    assertEquals(List.of("\nObservation:", "END"), body.get("stop"));
    assertEquals(List.of(128_009L, 2L), body.get("stop_token_ids"));
    // the stop string the server names follows its text: the node sees a stop ended it
    assertEquals("Thought\nObservation:", whole.text());
    assertArrayEquals(new int[] {11, 12, 13}, whole.outputTokens());
    // SGLang names it matched_stop; a stop_reason that is no stop string of the request (a
    // token id, or the end of sequence) adds nothing
    server.behaviour.set((ex, b) -> reply(ex, 200, "{\"choices\":[{\"text\":\"Tho\","
        + "\"finish_reason\":\"stop\",\"matched_stop\":\"END\"}]}"));
    assertEquals("ThoEND", e.execute(r).get(20, TimeUnit.SECONDS).text());
    server.behaviour.set((ex, b) -> reply(ex, 200, "{\"choices\":[{\"text\":\"Tho\","
        + "\"finish_reason\":\"stop\",\"stop_reason\":2}]}"));
    assertEquals("Tho", e.execute(r).get(20, TimeUnit.SECONDS).text());
    // nor does a string that is not one of the request's stops (one of another request, or a
    // server's own end of sequence), whichever key names it
    for (String key : List.of("stop_reason", "matched_stop")) {
      server.behaviour.set((ex, b) -> reply(ex, 200, "{\"choices\":[{\"text\":\"Tho\","
          + "\"finish_reason\":\"stop\",\"" + key + "\":\"</s>\"}]}"));
      assertEquals("Tho", e.execute(r).get(20, TimeUnit.SECONDS).text(), key);
    }
    server.behaviour.set((ex, b) -> reply(ex, 200, "{\"choices\":[{\"text\":\"Tho\","
        + "\"finish_reason\":\"length\",\"stop_reason\":\"END\"}]}"));
    assertEquals("Tho", e.execute(r).get(20, TimeUnit.SECONDS).text());

    server.behaviour.set((ex, b) -> {
      OutputStream out = startStream(ex);
      send(out, chunk("Tho", "[11]", null) + chunk("ught", "[12,13]", "stop")
              .replace("\"finish_reason\"", "\"stop_reason\":\"END\",\"finish_reason\"") + USAGE
          + "data: [DONE]\n\n");
    });
    Pieces pieces = new Pieces();
    EngineResult streamed = pieces.run(e, r).get(20, TimeUnit.SECONDS);
    assertEquals(List.of("\nObservation:", "END"), server.lastBody.get().get("stop"));
    assertEquals(List.of(128_009L, 2L), server.lastBody.get().get("stop_token_ids"));
    assertEquals(Boolean.TRUE, server.lastBody.get().get("stream"));
    assertEquals("ThoughtEND", streamed.text());
    assertArrayEquals(new int[] {11, 12, 13}, streamed.outputTokens());
    assertEquals(List.of("Tho", "ughtEND"), pieces.texts);
  }

  @Test
  void aRequestWithoutStopsSendsNoStopKeys() throws Exception {
    server.behaviour.set((ex, body) -> reply(ex, 200,
        "{\"choices\":[{\"text\":\"x\",\"token_ids\":[1]}]}"));
    builder().build().execute(request()).get(20, TimeUnit.SECONDS);
    assertFalse(server.lastBody.get().containsKey("stop"));
    assertFalse(server.lastBody.get().containsKey("stop_token_ids"));
  }

  @Test
  void noPieceIsGivenOnceTheStreamIsClosedAlsoFromTheRestOfTheSameRead() {
    // the engine closes the stream before it completes the request (cancelled as a piece is
    // given, say): the chunks that follow, in the same read or later, give the listener nothing
    List<String> texts = new ArrayList<>();
    CompletionStream[] s = new CompletionStream[1];
    s[0] = new CompletionStream(request(), 1 << 20, null, (t, x) -> {
      texts.add(x);
      s[0].close();
    });
    s[0].feed(utf8(chunk("a", "[1]", null) + chunk("b", "[2]", null)));
    s[0].feed(utf8(chunk("c", "[3]", "length")));
    assertEquals(List.of("a"), texts);
    CompletionStream closed = new CompletionStream(request(), 1 << 20, null,
        (t, x) -> texts.add("after close: " + x));
    closed.close();
    closed.feed(utf8(chunk("d", "[4]", null)));
    assertEquals(List.of("a"), texts);
  }

  @Test
  void aDoneWithWhiteSpaceAroundItEndsTheStream() {
    for (String done : new String[] {"data:  [DONE]\n\n", "data: [DONE] \n\n",
        "data: [DONE]\t\n\n"}) {
      CompletionStream s = new CompletionStream(request(), 1 << 20, null, (t, x) -> { });
      s.feed(utf8(chunk("a", "[1]", "stop") + done));
      assertTrue(s.done(), done);
      assertEquals("a", s.result().text());
      assertArrayEquals(new int[] {1}, s.result().outputTokens());
    }
  }

  @Test
  void chunksAfterTheFinishReasonDoNotCopyTheOutputAgain() {
    // every chunk after choice 0's finish_reason built the whole result again, a copy of the
    // whole output: a server sending tiny chunks after it (empty choices, another choice's
    // pieces, choice 0's) made the client's thread work in proportion to the output per chunk
    // (20,000 of them after 16,384 tokens: 3.7 GiB allocated, 11.5 s of CPU)
    InferenceRequest r = new InferenceRequest("r1", new int[] {101, 7, 7, 9000},
        GenerationParams.greedy(4096));
    CompletionStream s = new CompletionStream(r, 8 << 20, null, (t, x) -> { });
    int[] ids = new int[4096];
    StringBuilder list = new StringBuilder("[");
    for (int i = 0; i < ids.length; i++) {
      ids[i] = 1000 + i;
      list.append(i == 0 ? "" : ",").append(ids[i]);
    }
    String text = "x".repeat(4 * ids.length);
    s.feed(utf8(chunk(text, list.append(']').toString(), "length")));
    int copies = s.outputCopies();
    String after = "data: {\"choices\":[]}\n\n"
        + "data: {\"choices\":[{\"index\":1,\"text\":\"o\",\"token_ids\":[9],"
        + "\"finish_reason\":null}]}\n\n"
        + chunk("late", "[1]", null) + ": ping\n\n";
    s.feed(utf8(after.repeat(500)));
    s.feed(utf8(USAGE));
    s.feed(utf8(after.repeat(500)));
    assertEquals(copies, s.outputCopies(), "chunks after the finish_reason copied the output");
    EngineResult whole = s.whole();
    assertEquals(text, whole.text());
    assertArrayEquals(ids, whole.outputTokens());
    assertEquals(4, whole.promptTokens(), "the usage chunk after the finish is read");
    assertEquals(2, whole.cachedPromptTokens());
    s.feed(utf8("data: [DONE]\n\n"));
    assertEquals(whole, s.result());
  }

  @Test
  void aStreamClosedAsAPieceIsGivenReadsNoneOfTheRestOfItsBuffers() {
    // the HTTP client hands the body its bytes in batches of buffers: a request cancelled (its
    // connection closed) as one buffer's piece was given went on parsing the batch's others
    OpenAiCompatibleEngine e = builder().build();
    CompletableFuture<EngineResult> result = new CompletableFuture<>();
    List<OpenAiCompatibleEngine.EventStreamBody> body = new ArrayList<>();
    CompletionStream stream = new CompletionStream(request(), 1 << 20, null,
        (t, x) -> body.get(0).cancel());
    body.add(e.new EventStreamBody(request(), stream, result));
    body.get(0).onSubscribe(new Flow.Subscription() {
      @Override
      public void request(long n) {
      }

      @Override
      public void cancel() {
      }
    });
    List<ByteBuffer> items = List.of(utf8(chunk("a", "[1]", null)),
        utf8(chunk("b", "[2]", null)), utf8(chunk("c", "[3]", "length") + "data: [DONE]\n\n"));
    int[] sizes = items.stream().mapToInt(ByteBuffer::remaining).toArray();
    body.get(0).onNext(items);
    assertEquals(0, items.get(0).remaining());
    assertEquals(sizes[1], items.get(1).remaining(), "a buffer after the close was read");
    assertEquals(sizes[2], items.get(2).remaining(), "a buffer after the close was read");
  }

  private static ByteBuffer utf8(String s) {
    return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
  }
}
