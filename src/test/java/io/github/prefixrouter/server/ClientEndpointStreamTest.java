package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeNotRunningException;
import io.github.prefixrouter.OutputDivergedException;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.EngineTimeoutException;
import io.github.prefixrouter.spi.InvalidRequestException;
import io.github.prefixrouter.testing.Await;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@code "stream": true}: the node's pieces as server-sent events, errors before and after the
 * first byte, clients that stop reading or go away, and the endpoint's stop with streams open.
 * The node is a stub that gives pieces when the test says.
 */
class ClientEndpointStreamTest extends ClientEndpointFixture {

  private static final RouteDecision DECISION = StubNode.LOCAL_DECISION;

  private void start(Duration ioTimeout) throws IOException {
    start(new ClientEndpoint(node, List::of, 64, ioTimeout));
  }

  private static InferenceResponse response(String id, int[] tokens, String text) {
    return new InferenceResponse(id, new EngineResult(tokens, text, 30, 16, 1, 1), "peer-b", true,
        2, FallbackCause.NONE, DECISION);
  }

  private CompletableFuture<HttpResponse<InputStream>> postStreaming(String body) {
    return client.sendAsync(HttpRequest.newBuilder(
            URI.create("http://" + address + "/v1/route/completions"))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofInputStream());
  }

  private HttpResponse<String> post(String body) throws Exception {
    return client.sendAsync(HttpRequest.newBuilder(
            URI.create("http://" + address + "/v1/route/completions"))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString()).get(20, TimeUnit.SECONDS);
  }

  private static String stream(String prompt) {
    return "{\"id\":\"q1\",\"prompt\":" + prompt + ",\"max_tokens\":8,\"stream\":true}";
  }

  @Test
  void eachPieceIsAnEventAsItComesThenTheAnswerThenDone() throws Exception {
    start(Duration.ofSeconds(5));
    CompletableFuture<HttpResponse<InputStream>> sent = postStreaming(stream("[1,2,3]"));
    awaitSubmitted(1);
    OutputListener l = listeners.get(0);

    l.onOutput(new int[] {10, 11}, "ab");
    // the first piece arrives before the request completes: headers and one event
    HttpResponse<InputStream> resp = sent.get(20, TimeUnit.SECONDS);
    assertEquals(200, resp.statusCode());
    assertEquals("text/event-stream; charset=utf-8",
        resp.headers().firstValue("Content-Type").orElse(null));
    assertEquals("no-cache", resp.headers().firstValue("Cache-Control").orElse(null));
    assertEquals("no", resp.headers().firstValue("X-Accel-Buffering").orElse(null));
    BufferedReader in = new BufferedReader(new InputStreamReader(resp.body(), StandardCharsets.UTF_8));
    Object first = Sse.next(in);
    assertEquals(Map.of("id", "q1", "token_ids", List.of(10L, 11L), "text", "ab"), first);
    assertFalse(futures.get(0).isDone());

    l.onOutput(new int[0], "");                // nothing: no event
    l.onOutput(new int[] {12}, "c\uD83D");     // ends in half an emoji: kept for the next
    l.onOutput(new int[] {13}, "\uDE00d");
    l.onOutput(new int[0], "e");               // text alone
    futures.get(0).complete(response("q1", new int[] {10, 11, 12, 13}, "abc\uD83D\uDE00de"));

    List<Object> rest = new ArrayList<>();
    for (Object e = Sse.next(in); e != null; e = Sse.next(in)) {
      rest.add(e);
    }
    assertEquals(Sse.DONE, rest.get(rest.size() - 1), "[DONE] last");
    List<Object> events = new ArrayList<>(List.of(first));
    events.addAll(rest.subList(0, rest.size() - 1));
    assertEquals(5, events.size(), events.toString()); // four pieces (one empty), the answer
    StringBuilder text = new StringBuilder();
    List<Integer> tokens = new ArrayList<>();
    for (Object e : events) {
      text.append(Sse.text(e));
      for (int t : Sse.tokens(e)) {
        tokens.add(t);
      }
    }
    assertEquals("abc\uD83D\uDE00de", text.toString());
    assertEquals(List.of(10, 11, 12, 13), tokens);
    assertEquals("c", Sse.text(events.get(1)));
    assertEquals("\uD83D\uDE00d", Sse.text(events.get(2)));
    // the end carries what an answer that is not streamed carries, its output already sent
    Map<String, Object> expected = new LinkedHashMap<>();
    expected.put("id", "q1");
    expected.put("served_by", "peer-b");
    expected.put("forwarded", true);
    expected.put("attempts", 2L);
    expected.put("fallback", Json.NULL);
    expected.put("token_ids", List.of());
    expected.put("text", "");
    expected.put("prompt_tokens", 30L);
    expected.put("cached_tokens", 16L);
    expected.put("reason", "LOCAL_ONLY_POLICY");
    assertEquals(expected, events.get(4));
    Await.until(() -> endpoint.openStreams() == 0, "the stream is closed");
  }

  @Test
  void outputThePiecesDidNotCarryComesWithTheEnd() throws Exception {
    start(Duration.ofSeconds(5));
    CompletableFuture<HttpResponse<InputStream>> sent = postStreaming(stream("[1]"));
    awaitSubmitted(1);
    listeners.get(0).onOutput(new int[] {1}, "x");
    // a node that gives only part of the output to the listener: the end has the rest
    futures.get(0).complete(response("q1", new int[] {1, 2, 3}, "xyz"));
    HttpResponse<InputStream> resp = sent.get(20, TimeUnit.SECONDS);
    List<Object> events = Sse.parse(new String(resp.body().readAllBytes(), StandardCharsets.UTF_8));
    assertEquals(3, events.size(), events.toString());
    assertArrayEquals(new int[] {2, 3}, Sse.tokens(events.get(1)));
    assertEquals("yz", Sse.text(events.get(1)));
    assertEquals("peer-b", ((Map<?, ?>) events.get(1)).get("served_by"));
    assertEquals(Sse.DONE, events.get(2));

    // the interim node, which gives the whole output in one piece at completion, and an empty one
    CompletableFuture<HttpResponse<InputStream>> empty = postStreaming(stream("[2]"));
    awaitSubmitted(2);
    futures.get(1).complete(response("q1", new int[0], ""));
    events = Sse.parse(new String(empty.get(20, TimeUnit.SECONDS).body().readAllBytes(),
        StandardCharsets.UTF_8));
    assertEquals(2, events.size(), events.toString());
    assertEquals("peer-b", ((Map<?, ?>) events.get(0)).get("served_by"));
    assertEquals(Sse.DONE, events.get(1));
  }

  @Test
  void aFailureBeforeTheFirstPieceHasTheStatusOfAnAnswerNotStreamed() throws Exception {
    start(Duration.ofSeconds(5));
    Map<Integer, RuntimeException> failures = new LinkedHashMap<>();
    failures.put(504, new RequestFailedException("q1", "the local engine failed: late",
        new EngineTimeoutException("no answer within 60000 ms (requestTimeout)", null)));
    failures.put(400, new RequestFailedException("q1", "the local engine failed: too long",
        new InvalidRequestException("server answered HTTP 400: too long")));
    failures.put(503, new RequestFailedException("q1", "busy everywhere",
        new EngineBusyException("engine busy")));
    failures.put(502, new RequestFailedException("q1", "the local engine failed: 500",
        new EngineException("server answered HTTP 500", true)));
    int n = 0;
    for (Map.Entry<Integer, RuntimeException> f : failures.entrySet()) {
      CompletableFuture<HttpResponse<InputStream>> sent = postStreaming(stream("[1]"));
      awaitSubmitted(++n);
      futures.get(n - 1).completeExceptionally(f.getValue());
      HttpResponse<InputStream> resp = sent.get(20, TimeUnit.SECONDS);
      String body = new String(resp.body().readAllBytes(), StandardCharsets.UTF_8);
      assertEquals(f.getKey(), resp.statusCode(), body);
      assertEquals("application/json", resp.headers().firstValue("Content-Type").orElse(null));
      assertEquals(Map.of("id", "q1", "error", f.getValue().getMessage()), Json.parse(body));
      assertEquals(f.getKey() == 503 ? "1" : null,
          resp.headers().firstValue("Retry-After").orElse(null));
    }
    // not running, and a node that throws instead of failing its future
    CompletableFuture<HttpResponse<InputStream>> sent = postStreaming(stream("[1]"));
    awaitSubmitted(++n);
    futures.get(n - 1).completeExceptionally(
        new NodeNotRunningException("solo", PrefixRouterNode.State.STOPPING));
    HttpResponse<InputStream> resp = sent.get(20, TimeUnit.SECONDS);
    assertEquals(503, resp.statusCode());
    assertTrue(new String(resp.body().readAllBytes(), StandardCharsets.UTF_8).contains("STOPPING"));
    when(node.submit(any(), any())).thenThrow(new IllegalStateException("broken node"));
    HttpResponse<String> thrown = post(stream("[1]"));
    assertEquals(502, thrown.statusCode(), thrown.body());
    assertTrue(thrown.body().contains("broken node"), thrown.body());
  }

  /**
   * A node that gives no future (null, against {@code submit}'s contract) is answered as one
   * that throws, a 502, on every route, whole and streamed, and gives back the request's
   * in-flight slot and stream: it used to be a 500 with the slot held for ever (after
   * {@code maxInFlight} such requests every client was answered 503) and the stream left open.
   */
  @Test
  void aNodeThatGivesNoFutureIsA502AndGivesItsSlotBack() throws Exception {
    start(Duration.ofSeconds(5));
    when(node.submit(any())).thenReturn(null);
    when(node.submit(any(), any())).thenReturn(null);
    List<String[]> sends = List.of(
        new String[] {"/v1/route/completions", "{\"id\":\"q1\",\"prompt\":[1]}"},
        new String[] {"/v1/route/completions", stream("[1]")},
        new String[] {"/v1/completions", "{\"prompt\":[1]}"},
        new String[] {"/v1/completions", "{\"prompt\":[1],\"stream\":true}"});
    for (String[] s : sends) {
      HttpResponse<String> resp = client.sendAsync(HttpRequest.newBuilder(
              URI.create("http://" + address + s[0]))
          .POST(HttpRequest.BodyPublishers.ofString(s[1])).build(),
          HttpResponse.BodyHandlers.ofString()).get(20, TimeUnit.SECONDS);
      String what = s[0] + " " + s[1];
      assertEquals(502, resp.statusCode(), what + ": " + resp.body());
      assertTrue(resp.body().contains("the node gave no future"), what + ": " + resp.body());
      Await.until(() -> endpoint.inFlight() == 0, what + ": its in-flight slot given back");
      Await.until(() -> endpoint.openStreams() == 0, what + ": its stream forgotten");
    }
  }

  /**
   * {@code /v1/route/completions} runs {@code maxInFlight} requests at once, no fewer, and
   * answers each one beyond them 503 with {@code Retry-After}, giving back the slot it took to
   * find that out: refusals do not shrink the cap for the requests after them.
   */
  @Test
  void theRouteRunsMaxInFlightAtOnceAndARefusalKeepsNoSlot() throws Exception {
    start(new ClientEndpoint(node, List::of, 2, Duration.ofSeconds(5)));
    List<CompletableFuture<HttpResponse<InputStream>>> running = new ArrayList<>();
    for (String id : List.of("qa", "qb")) {
      running.add(postStreaming("{\"id\":\"" + id + "\",\"prompt\":[1],\"stream\":true}"));
    }
    awaitSubmitted(2);
    for (int i = 0; i < 3; i++) {
      HttpResponse<String> busy = post("{\"id\":\"qc" + i + "\",\"prompt\":[1]}");
      assertEquals(503, busy.statusCode(), busy.body());
      assertEquals("1", busy.headers().firstValue("Retry-After").orElse(null));
    }
    assertEquals(2, endpoint.inFlight(), "the refusals gave their slots back");
    futures.get(0).complete(response("qa", new int[] {5}, "x"));
    futures.get(1).complete(response("qb", new int[] {5}, "x"));
    for (CompletableFuture<HttpResponse<InputStream>> r : running) {
      assertEquals(200, r.get(20, TimeUnit.SECONDS).statusCode());
      r.get().body().readAllBytes();
    }
    Await.until(() -> endpoint.inFlight() == 0, "every slot given back");
  }

  @Test
  void aFailureAfterTheFirstPieceIsAnErrorEventAndTheEndWithoutDone() throws Exception {
    start(Duration.ofSeconds(5));
    Map<String, RuntimeException> failures = new LinkedHashMap<>();
    failures.put("timeout 504", new RequestFailedException("q1", "the local engine failed: late",
        new EngineTimeoutException("no answer within 60000 ms (requestTimeout)", null)));
    failures.put("failed 502", new RequestFailedException("q1", "the local engine failed: 500",
        new EngineException("server answered HTTP 500", true)));
    failures.put("busy 503", new RequestFailedException("q1", "busy everywhere",
        new EngineBusyException("engine busy")));
    failures.put("invalid_request 400", new RequestFailedException("q1", "refused",
        new InvalidRequestException("server answered HTTP 400: too long")));
    failures.put("not_running 503",
        new NodeNotRunningException("solo", PrefixRouterNode.State.STOPPING));
    failures.put("output_diverged 502", new OutputDivergedException("q1",
        "the fallback's output differs from the streamed output at token 1"));
    int n = 0;
    for (Map.Entry<String, RuntimeException> f : failures.entrySet()) {
      CompletableFuture<HttpResponse<InputStream>> sent = postStreaming(stream("[1]"));
      awaitSubmitted(++n);
      listeners.get(n - 1).onOutput(new int[] {5}, "five");
      HttpResponse<InputStream> resp = sent.get(20, TimeUnit.SECONDS);
      BufferedReader in = new BufferedReader(new InputStreamReader(resp.body(), StandardCharsets.UTF_8));
      assertEquals("five", Sse.text(Sse.next(in)));
      futures.get(n - 1).completeExceptionally(f.getValue());
      Object error = Sse.next(in);
      assertNull(Sse.next(in), "the stream ends after the error, without [DONE]");
      String[] typeStatus = f.getKey().split(" ");
      Map<String, Object> expected = new LinkedHashMap<>();
      expected.put("message", f.getValue().getMessage());
      expected.put("type", typeStatus[0]);
      expected.put("status", Long.parseLong(typeStatus[1]));
      assertEquals(Map.of("id", "q1", "error", expected), error, f.getKey());
      assertEquals(200, resp.statusCode());
    }
  }

  @Test
  void outputJsonCannotCarryIsA500BeforeTheFirstPieceAndAnErrorEventAfterIt() throws Exception {
    start(Duration.ofSeconds(5));
    CompletableFuture<HttpResponse<InputStream>> first = postStreaming(stream("[1]"));
    awaitSubmitted(1);
    listeners.get(0).onOutput(new int[] {1}, "a\uD800b"); // a lone surrogate
    HttpResponse<InputStream> resp = first.get(20, TimeUnit.SECONDS);
    assertEquals(500, resp.statusCode());
    assertEquals(Map.of("id", "q1", "error", "the answer cannot be written as JSON"),
        Json.parse(new String(resp.body().readAllBytes(), StandardCharsets.UTF_8)));
    Await.until(() -> futures.get(0).isCancelled(), "the request was not cancelled");

    CompletableFuture<HttpResponse<InputStream>> second = postStreaming(stream("[2]"));
    awaitSubmitted(2);
    listeners.get(1).onOutput(new int[] {1}, "fine");
    resp = second.get(20, TimeUnit.SECONDS);
    BufferedReader in = new BufferedReader(new InputStreamReader(resp.body(), StandardCharsets.UTF_8));
    assertEquals("fine", Sse.text(Sse.next(in)));
    listeners.get(1).onOutput(new int[] {2}, "\uDC00"); // a lone second half
    Map<?, ?> error = (Map<?, ?>) ((Map<?, ?>) Sse.next(in)).get("error");
    assertEquals(Map.of("message", "the answer cannot be written as JSON", "type", "internal",
        "status", 500L), error);
    assertNull(Sse.next(in));
    Await.until(() -> futures.get(1).isCancelled(), "the request was not cancelled");
    // and a failure's message that JSON cannot carry as it is
    CompletableFuture<HttpResponse<InputStream>> third = postStreaming(stream("[3]"));
    awaitSubmitted(3);
    listeners.get(2).onOutput(new int[] {1}, "x");
    in = new BufferedReader(new InputStreamReader(third.get(20, TimeUnit.SECONDS).body(),
        StandardCharsets.UTF_8));
    assertEquals("x", Sse.text(Sse.next(in)));
    futures.get(2).completeExceptionally(new RequestFailedException("q1", "bad \uD800 text",
        new EngineException("server answered HTTP 500", true)));
    error = (Map<?, ?>) ((Map<?, ?>) Sse.next(in)).get("error");
    assertEquals("request q1: bad \uFFFD text", error.get("message"));
    assertNull(Sse.next(in));
  }

  @Test
  void streamMustBeABooleanAndFalseAnswersAsBefore() throws Exception {
    start(Duration.ofSeconds(5));
    // (null is an absent stream, false: ClientEndpointTest#aNullValueIsTheDefaultAsOnTheOpenAiRoutes)
    for (String bad : List.of("\"yes\"", "1", "[true]")) {
      HttpResponse<String> resp = post("{\"prompt\":[1],\"stream\":" + bad + "}");
      assertEquals(400, resp.statusCode(), resp.body());
      assertEquals(Map.of("error", "stream must be true or false"), Json.parse(resp.body()));
    }
    HttpResponse<String> options = post(
        "{\"prompt\":[1],\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    assertEquals(400, options.statusCode(), options.body());
    assertTrue(options.body().contains("unknown key \\\"stream_options\\\""), options.body());
    assertTrue(futures.isEmpty(), "nothing submitted");

    CompletableFuture<HttpResponse<String>> plain = client.sendAsync(HttpRequest.newBuilder(
            URI.create("http://" + address + "/v1/route/completions"))
        .POST(HttpRequest.BodyPublishers.ofString("{\"id\":\"q1\",\"prompt\":[1],\"stream\":false}"))
        .build(), HttpResponse.BodyHandlers.ofString());
    awaitSubmitted(1);
    assertNull(listeners.get(0), "submitted without a listener");
    futures.get(0).complete(response("q1", new int[] {4, 5}, "de"));
    HttpResponse<String> resp = plain.get(20, TimeUnit.SECONDS);
    assertEquals(200, resp.statusCode());
    assertEquals("application/json", resp.headers().firstValue("Content-Type").orElse(null));
    Map<?, ?> m = (Map<?, ?>) Json.parse(resp.body());
    assertEquals(List.of(4L, 5L), m.get("token_ids"));
    assertEquals("de", m.get("text"));
  }

  @Test
  void aClientThatGoesAwayCancelsItsRequest() throws Exception {
    start(Duration.ofSeconds(5));
    Socket s = request(stream("[1,2]"));
    awaitSubmitted(1);
    OutputListener l = listeners.get(0);
    l.onOutput(new int[] {1}, "a");
    BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(),
        StandardCharsets.UTF_8));
    assertEquals("HTTP/1.1 200 OK", in.readLine());
    while (!in.readLine().isEmpty()) {
      // headers
    }
    in.readLine(); // the chunk's size
    assertEquals("data: {\"id\":\"q1\",\"token_ids\":[1],\"text\":\"a\"}", in.readLine());
    s.close();
    // the next pieces find the connection gone: the node's future is cancelled
    CompletableFuture<InferenceResponse> f = futures.get(0);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!f.isDone() && System.nanoTime() < deadline) {
      l.onOutput(new int[] {2}, "b");
      Thread.sleep(20);
    }
    assertTrue(f.isCancelled(), "the request was not cancelled");
    Await.until(() -> endpoint.openStreams() == 0, "the stream is forgotten");
    assertEquals(0L, endpoint.slowConnectionsClosed(), "a disconnect is not a slow client");
    assertEquals(1L, endpoint.streamsCancelled());
    Await.until(() -> endpoint.inFlight() == 0, "no request in flight");
  }

  @Test
  void aClientThatStopsReadingIsCutOffAtTheDeadlineWithoutBlockingTheNode() throws Exception {
    start(Duration.ofSeconds(3));
    Socket s = request(stream("[1,2]"));
    awaitSubmitted(1);
    OutputListener l = listeners.get(0);
    String mib = "x".repeat(1 << 20);
    // 32 MiB of output to a client that reads none of it: far beyond the sockets' buffers
    for (int i = 0; i < 32; i++) {
      l.onOutput(new int[] {i}, mib);
    }
    // had a piece waited for the client, the deadline would have cut it off by now
    assertEquals(0L, endpoint.slowConnectionsClosed(), "the listener waited for the client");
    Await.until(() -> endpoint.slowConnectionsClosed() == 1, "the client was not cut off");
    Await.until(() -> futures.get(0).isCancelled(), "the request was not cancelled");
    Await.until(() -> endpoint.openStreams() == 0, "the stream is forgotten");
    assertEquals(1L, endpoint.streamsCancelled());
    s.close();
    // the endpoint still streams to others
    CompletableFuture<HttpResponse<InputStream>> sent = postStreaming(stream("[3]"));
    awaitSubmitted(2);
    futures.get(1).complete(response("q1", new int[] {9}, "z"));
    List<Object> events = Sse.parse(new String(sent.get(20, TimeUnit.SECONDS).body()
        .readAllBytes(), StandardCharsets.UTF_8));
    assertEquals(Sse.DONE, events.get(events.size() - 1));
  }

  /**
   * Each batch of a stream is written under a deadline of its own: a stream that lasts longer
   * than the I/O deadline (6 s against 5 s) is not cut off while its client reads. Under one
   * deadline for the whole answer it was, at 5 s. The deadline is long enough that a stall of
   * the machine holding the reading client for a few seconds does not pass it either (at 1 s,
   * one could: the client stopped reading, a batch's write blocked and was cut).
   */
  @Test
  void aStreamLongerThanTheDeadlineIsNotCutOffWhileItsClientReads() throws Exception {
    Duration deadline = Duration.ofSeconds(5);
    start(deadline);
    CompletableFuture<HttpResponse<InputStream>> sent = postStreaming(stream("[1]"));
    awaitSubmitted(1);
    OutputListener l = listeners.get(0);
    CompletableFuture<String> body = CompletableFuture.supplyAsync(() -> {
      try {
        return new String(sent.get(20, TimeUnit.SECONDS).body().readAllBytes(),
            StandardCharsets.UTF_8);
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    });
    long end = System.nanoTime() + deadline.toNanos() + TimeUnit.SECONDS.toNanos(1);
    int n = 0;
    StringBuilder all = new StringBuilder();
    while (System.nanoTime() < end) { // 6 s of pieces, each a 4 KiB text
      String t = Integer.toString(n).repeat(4096 / Integer.toString(n).length());
      l.onOutput(new int[] {n++}, t);
      all.append(t);
      Thread.sleep(5);
    }
    futures.get(0).complete(response("q1", new int[0], all.toString()));
    List<Object> events = Sse.parse(body.get(20, TimeUnit.SECONDS));
    assertEquals(Sse.DONE, events.get(events.size() - 1));
    assertEquals(n + 2, events.size());
    assertEquals(0L, endpoint.slowConnectionsClosed());
  }

  @Test
  void stoppingEndsEveryOpenStream() throws Exception {
    start(Duration.ofSeconds(5));
    int n = 5;
    List<CompletableFuture<HttpResponse<InputStream>>> sent = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      sent.add(postStreaming(stream("[1," + i + "]")));
      awaitSubmitted(i + 1);
    }
    // every stream but the last has started
    List<BufferedReader> readers = new ArrayList<>();
    for (int i = 0; i < n - 1; i++) {
      listeners.get(i).onOutput(new int[] {i}, "p" + i);
      BufferedReader in = new BufferedReader(new InputStreamReader(
          sent.get(i).get(20, TimeUnit.SECONDS).body(), StandardCharsets.UTF_8));
      assertEquals("p" + i, Sse.text(Sse.next(in)));
      readers.add(in);
    }
    // the node's stop(grace): 0 is answered, 1 and 4 abandoned (NodeNotRunningException);
    // 2 and 3 the node never completes (an endpoint stopped on its own)
    futures.get(0).complete(response("q1", new int[] {0}, "p0"));
    NodeNotRunningException abandoned =
        new NodeNotRunningException("solo", PrefixRouterNode.State.STOPPING);
    futures.get(1).completeExceptionally(abandoned);
    futures.get(4).completeExceptionally(abandoned);
    long t0 = System.nanoTime();
    endpoint.stop();
    assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(6 + 5),
        "stop waits at most the I/O deadline and a second");

    List<Object> rest0 = drain(readers.get(0));
    assertEquals(Sse.DONE, rest0.get(rest0.size() - 1));
    List<Object> rest1 = drain(readers.get(1));
    assertEquals(1, rest1.size(), rest1.toString());
    assertEquals("not_running", ((Map<?, ?>) ((Map<?, ?>) rest1.get(0)).get("error")).get("type"));
    for (int i = 2; i < 4; i++) {
      BufferedReader in = readers.get(i);
      // closed: an end of stream or a reset, never a hang
      CompletableFuture<Void> closed = CompletableFuture.runAsync(() -> {
        try {
          while (in.read() >= 0) {
            // until the connection closes
          }
        } catch (IOException reset) {
          // closed too
        }
      });
      closed.get(20, TimeUnit.SECONDS);
      assertTrue(futures.get(i).isCancelled(), "request " + i + " cancelled");
    }
    HttpResponse<InputStream> notStarted = sent.get(4).get(20, TimeUnit.SECONDS);
    assertEquals(503, notStarted.statusCode());
    assertEquals(0, endpoint.openStreams());
    endpoint = null;
  }

  private static List<Object> drain(BufferedReader in) throws Exception {
    return CompletableFuture.supplyAsync(() -> {
      List<Object> out = new ArrayList<>();
      try {
        for (Object e = Sse.next(in); e != null; e = Sse.next(in)) {
          out.add(e);
        }
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
      return out;
    }).get(20, TimeUnit.SECONDS);
  }

  /** A raw connection that has sent one request; its receive buffer small. */
  private Socket request(String body) throws IOException {
    Socket s = new Socket();
    s.setReceiveBufferSize(4096);
    String[] hp = address.split(":");
    s.connect(new InetSocketAddress(hp[0], Integer.parseInt(hp[1])));
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    ByteArrayOutputStream req = new ByteArrayOutputStream();
    req.writeBytes(("POST /v1/route/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + b.length
        + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
    req.writeBytes(b);
    OutputStream out = s.getOutputStream();
    out.write(req.toByteArray());
    out.flush();
    return s;
  }

  @Test
  void aNodeProcessStreamsWhatItWouldAnswer() throws Exception {
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "solo", "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0", "--engine", "reference"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
    try (NodeMain.Running r = NodeMain.start(o)) {
      address = r.clientAddress;
      String request = "{\"id\":\"r\",\"prompt\":[5,6,7,8],\"max_tokens\":6";
      Map<?, ?> plain = (Map<?, ?>) Json.parse(post(request + "}").body());
      HttpResponse<String> streamed = post(request + ",\"stream\":true}");
      assertEquals(200, streamed.statusCode(), streamed.body());
      List<Object> events = Sse.parse(streamed.body());
      assertEquals(Sse.DONE, events.get(events.size() - 1));
      StringBuilder text = new StringBuilder();
      List<Long> tokens = new ArrayList<>();
      for (Object e : events.subList(0, events.size() - 1)) {
        text.append(Sse.text(e));
        for (int t : Sse.tokens(e)) {
          tokens.add((long) t);
        }
      }
      assertEquals(plain.get("token_ids"), tokens);
      assertEquals(6, tokens.size());
      assertEquals(plain.get("text"), text.toString());
      Map<?, ?> end = (Map<?, ?>) events.get(events.size() - 2);
      for (String k : List.of("id", "served_by", "forwarded", "attempts", "fallback",
          "prompt_tokens", "reason")) {
        assertEquals(plain.get(k), end.get(k), k);
      }
      assertTrue(end.get("cached_tokens") instanceof Long, end.toString());
    }
  }
}
