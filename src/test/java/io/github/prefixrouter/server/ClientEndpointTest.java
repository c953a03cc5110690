package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.mockingDetails;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.AnswerBudgetException;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.Schedulers;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineTimeoutException;
import io.github.prefixrouter.spi.InvalidRequestException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.engine.openai.FakeOpenAiServer;
import io.github.prefixrouter.internal.json.Json;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Whatever a client sends, it gets exactly one answer, and a bad request is a 400. */
class ClientEndpointTest {

  private static HttpResponse<String> post(HttpClient c, String address, String body) throws Exception {
    return c.send(HttpRequest.newBuilder(URI.create("http://" + address + "/v1/route/completions"))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void everyMalformedBodyIsAnswered400WithTheProblem() throws Exception {
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "solo", "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0"}, Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
    try (NodeMain.Running r = NodeMain.start(o)) {
      HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
      List<String> bodies = List.of(
          "",                                      // not JSON at all
          "not json",
          "{\"prompt\":[1,2,",                    // truncated
          "{\"prompt\":\"1 2 3\"}",                // wrong shape
          "{\"prompt\":[1,2.5]}",                  // not an integer
          "{\"prompt\":[1],\"id\":7}",             // id not a string
          "{\"prompt\":[1],\"prompt\":[2]}",       // duplicate key
          "{\"prompt\":[1],\"max_tokens\":1e999}", // out of range
          "{\"prompt\":[[[[[[[[[[[[1]]]]]]]]]]]]}", // too deep
          "{\"prompt\":[1],\"model\":7}",          // model not a string
          "{\"prompt\":[1],\"cache_salt\":\"a\\nb\"}", // a control character
          "{\"prompt\":[1],\"model\":\"\\ud800\"}", // a lone surrogate
          "{\"prompt\":[1],\"cache_salt\":\"" + "s".repeat(257) + "\"}", // too long
          "[1,2,3]");                              // not an object
      for (String body : bodies) {
        HttpResponse<String> resp = post(c, r.clientAddress, body);
        assertEquals(400, resp.statusCode(), body + " -> " + resp.body());
        Map<?, ?> m = (Map<?, ?>) Json.parse(resp.body());
        assertTrue(m.get("error") instanceof String e && !e.isEmpty(), resp.body());
      }
      // out-of-range parameters are named by their keys in the API
      for (String[] bad : new String[][] {{"max_tokens", "0"}, {"top_p", "0"},
          {"temperature", "-1"}}) {
        HttpResponse<String> resp = post(c, r.clientAddress,
            "{\"prompt\":[1],\"" + bad[0] + "\":" + bad[1] + "}");
        assertEquals(400, resp.statusCode(), resp.body());
        assertTrue(resp.body().contains("\"error\":\"" + bad[0] + " must be"), resp.body());
      }
      // the endpoint still serves well-formed requests afterwards
      HttpResponse<String> ok = post(c, r.clientAddress, "{\"prompt\":[5,6,7],\"max_tokens\":1}");
      assertEquals(200, ok.statusCode(), ok.body());
    }
  }

  /**
   * On /v1/route/completions a JSON null stands for an absent key, as on the OpenAI routes
   * (whose clients send unset options as null): "id": null, "model": null, "seed": null and
   * "max_tokens": null were refused with 400 ("id must be a string", ...).
   */
  @Test
  void aNullValueIsTheDefaultAsOnTheOpenAiRoutes() throws Exception {
    StubNode stub = new StubNode();
    ClientEndpoint endpoint =
        new ClientEndpoint(stub.node, List::of, 64, Duration.ofSeconds(10), "base");
    try {
      String address = "127.0.0.1:" + endpoint.start("127.0.0.1", 0).getPort();
      HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
      CompletableFuture<HttpResponse<String>> answer = c.sendAsync(HttpRequest.newBuilder(
              URI.create("http://" + address + "/v1/route/completions"))
          .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":[1,2,3],\"id\":null,"
              + "\"model\":null,\"seed\":null,\"max_tokens\":null,\"temperature\":null,"
              + "\"top_p\":null,\"cache_salt\":null,\"stream\":null,"
              + "\"stop_token_ids\":null}")).build(),
          HttpResponse.BodyHandlers.ofString());
      io.github.prefixrouter.testing.Await.until(
          () -> answer.isDone() || !stub.requests.isEmpty(), "submitted or answered");
      assertEquals(1, stub.requests.size(), () -> "refused: " + answer.join().statusCode() + " "
          + answer.join().body());
      io.github.prefixrouter.InferenceRequest r = stub.requests.get(0);
      assertTrue(r.id().startsWith("solo-c"), r.id());
      assertEquals(new io.github.prefixrouter.GenerationParams(1, 0.0, 1.0, 0, List.of(),
          List.of()), r.params());
      assertEquals(io.github.prefixrouter.CacheScope.of("", ""), r.scope());
      assertEquals(null, stub.listeners.get(0), "not streamed");
      stub.futures.get(0).complete(ClientEndpointEdgeCaseTest.response(r.id()));
      HttpResponse<String> resp = answer.get(20, TimeUnit.SECONDS);
      assertEquals(200, resp.statusCode(), resp.body());
      // a null prompt is an absent one: still required
      HttpResponse<String> noPrompt = post(c, address, "{\"prompt\":null}");
      assertEquals(400, noPrompt.statusCode(), noPrompt.body());
      assertTrue(noPrompt.body().contains("prompt"), noPrompt.body());
    } finally {
      endpoint.stop();
    }
  }

  @Test
  void busyEverywhereIsA503WithRetryAfterNotA502() throws Exception {
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      // a server running one request at once, two outstanding at most, and holding them
      server.hold();
      NodeOptions o = NodeOptions.parse(new String[] {"--id", "solo", "--listen", "127.0.0.1:0",
          "--client", "127.0.0.1:0", "--engine", server.baseUrl(), "--engine-slots", "1",
          "--engine-max-in-flight", "2"}, Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
      try (NodeMain.Running r = NodeMain.start(o)) {
        HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        List<CompletableFuture<HttpResponse<String>>> held = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
          held.add(c.sendAsync(HttpRequest.newBuilder(
                  URI.create("http://" + r.clientAddress + "/v1/route/completions"))
              .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":[1,2," + i + "]}")).build(),
              HttpResponse.BodyHandlers.ofString()));
        }
        assertTrue(server.awaitArrived(2, Duration.ofSeconds(20)));

        HttpResponse<String> busy = post(c, r.clientAddress, "{\"prompt\":[1,2,3]}");

        assertEquals(503, busy.statusCode(), busy.body());
        assertEquals("1", busy.headers().firstValue("Retry-After").orElse(null));
        assertTrue(busy.body().contains("busy"), busy.body());
        assertEquals(2, server.arrived(), "the busy request reached the server");
        server.release();
        for (CompletableFuture<HttpResponse<String>> f : held) {
          HttpResponse<String> ok = f.get(20, TimeUnit.SECONDS);
          assertEquals(200, ok.statusCode(), ok.body());
        }
      }
    }
  }

  /**
   * An answer the node had no heap to read (its engine's answer budget held by other answers) is
   * this node's temporary shortage, as a body refused by the body budget is: with no peer to take
   * the request, the client is told to come back (503 with {@code Retry-After}, OpenAI's
   * {@code busy}), on every route and whether streamed or not, not that the upstream misbehaved
   * (502).
   */
  @Test
  void anAnswerTheNodeHadNoHeapToReadIsA503WithRetryAfterNotA502() throws Exception {
    String refusal = "the answer could not get its share of the heap this engine gives the "
        + "answers being read and parsed (answerBudget): other answers held it";
    InferenceEngine engine = request -> CompletableFuture.failedFuture(
        new AnswerBudgetException("request " + request.id() + ": " + refusal, null));
    try (Schedulers.ClosableScheduler scheduler = Schedulers.newSingleThread("budget-test")) {
      PrefixRouterNode node = PrefixRouterNode.builder().nodeId("solo")
          .config(RouterConfig.defaults())
          .transport(new InMemoryNetwork(Clock.system(), scheduler, new SplittableRandom(1))
              .transport("solo"))
          .engine(engine).clock(Clock.system()).scheduler(scheduler)
          .random(new SplittableRandom(1)).seeds(List.of()).build();
      node.start();
      ClientEndpoint endpoint = new ClientEndpoint(node, List::of, 16, Duration.ofSeconds(5));
      InetSocketAddress addr = endpoint.start("127.0.0.1", 0);
      try {
        HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        String a = "127.0.0.1:" + addr.getPort();
        for (String body : List.of("{\"prompt\":[1,2,3]}",
            "{\"prompt\":[1,2,3],\"stream\":true}")) {
          HttpResponse<String> resp = post(c, a, body);
          assertEquals(503, resp.statusCode(), "a request refused its share of the answer budget "
              + "(" + body + ") was answered " + resp.statusCode() + ": " + resp.body());
          assertEquals("1", resp.headers().firstValue("Retry-After").orElse(null),
              "no Retry-After on the answer to a request refused its share of the answer budget");
          assertTrue(resp.body().contains("answerBudget"), resp.body());
        }
        HttpResponse<String> openAi = c.send(HttpRequest.newBuilder(
                URI.create("http://" + a + ClientEndpoint.OPENAI_COMPLETIONS))
            .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":[1,2,3]}")).build(),
            HttpResponse.BodyHandlers.ofString());
        assertEquals(503, openAi.statusCode(), "the OpenAI route answered a request refused its "
            + "share of the answer budget " + openAi.statusCode() + ": " + openAi.body());
        assertEquals("1", openAi.headers().firstValue("Retry-After").orElse(null), openAi.body());
        Map<?, ?> error = (Map<?, ?>) ((Map<?, ?>) Json.parse(openAi.body())).get("error");
        assertEquals("busy", error.get("code"), openAi.body());
        assertEquals("overloaded_error", error.get("type"), openAi.body());
        // a stream that fails so after its first piece says so in its error event
        RequestFailedException late = new RequestFailedException("q", "the local engine failed",
            new AnswerBudgetException(refusal, null));
        assertEquals("busy", ClientEndpoint.failureType(late), "the error event's type");
      } finally {
        endpoint.stop();
        node.close();
      }
    }
  }

  @Test
  void anEngineThatRefusesTheRequestAsInvalidIsA400WithItsMessageNotA502() throws Exception {
    // vLLM's answer to a prompt longer than --max-model-len, from both nodes' servers
    String vllm = "{\"object\":\"error\",\"message\":\"This model's maximum context length is 50"
        + " tokens. However, you requested 101 tokens (100 in the messages, 1 in the completion)."
        + " Please reduce the length of the messages or completion.\",\"type\":\"BadRequestError\","
        + "\"param\":null,\"code\":400}";
    try (FakeOpenAiServer serverA = FakeOpenAiServer.start(FakeOpenAiServer.ECHO);
         FakeOpenAiServer serverB = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      serverA.fail(400, vllm);
      serverB.fail(400, vllm);
      Map<String, String> env = Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX);
      try (NodeMain.Running a = NodeMain.start(NodeOptions.parse(new String[] {"--id", "a",
              "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0", "--engine",
              serverA.baseUrl()}, env));
           NodeMain.Running b = NodeMain.start(NodeOptions.parse(new String[] {"--id", "b",
              "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0", "--engine",
              serverB.baseUrl(), "--seeds", "a@" + a.transport.localAddress().address()}, env))) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (a.node.stats().peersLive() < 1 && System.nanoTime() < deadline) {
          Thread.sleep(20);
        }
        assertEquals(1, a.node.stats().peersLive(), "b never joined");
        HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        StringBuilder prompt = new StringBuilder("[1");
        for (int i = 2; i <= 100; i++) {
          prompt.append(',').append(i);
        }

        HttpResponse<String> resp = post(c, a.clientAddress,
            "{\"id\":\"long\",\"prompt\":" + prompt + "]}");

        // a client error, which clients and proxies do not retry elsewhere, with vLLM's words
        assertEquals(400, resp.statusCode(), resp.body());
        Map<?, ?> m = (Map<?, ?>) Json.parse(resp.body());
        assertEquals("long", m.get("id"));
        assertTrue(String.valueOf(m.get("error")).contains("maximum context length is 50 tokens"),
            resp.body());
        // a's engine judged it once; b's at most once, if a sent it there first
        assertEquals(1, serverA.arrived(), "a's engine");
        assertTrue(serverB.arrived() <= 1, "b's engine saw it " + serverB.arrived() + " times");
      }
    }
  }

  @Test
  void eachKindOfFailureHasItsStatus() throws Exception {
    PrefixRouterNode node = mock(PrefixRouterNode.class);
    when(node.state()).thenReturn(PrefixRouterNode.State.RUNNING);
    when(node.nodeId()).thenReturn("solo");
    Map<Integer, EngineException> causes = new java.util.LinkedHashMap<>();
    causes.put(504, new EngineTimeoutException("no answer within 60000 ms (requestTimeout)", null));
    causes.put(400, new InvalidRequestException("server answered HTTP 400: too long"));
    causes.put(503, new EngineBusyException("engine busy"));
    causes.put(502, new EngineException("server answered HTTP 500", true));
    Map<Integer, RuntimeException> failures = new java.util.LinkedHashMap<>();
    causes.forEach((status, cause) -> failures.put(status, new RequestFailedException("q",
        "the local engine failed: " + cause.getMessage(), cause)));
    ClientEndpoint endpoint = new ClientEndpoint(node, List::of, 16, Duration.ofSeconds(5));
    InetSocketAddress addr = endpoint.start("127.0.0.1", 0);
    try {
      HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
      for (Map.Entry<Integer, RuntimeException> f : failures.entrySet()) {
        when(node.submit(any())).thenReturn(CompletableFuture.failedFuture(f.getValue()));
        HttpResponse<String> resp = post(c, "127.0.0.1:" + addr.getPort(), "{\"prompt\":[1]}");
        assertEquals(f.getKey(), resp.statusCode(), f.getValue().getCause() + " -> " + resp.body());
        assertTrue(resp.body().contains(f.getValue().getCause().getMessage()), resp.body());
      }
    } finally {
      endpoint.stop();
    }
  }

  @Test
  void theModelNamesAnAdapterUnlessItIsTheBaseModelAndTheSaltIsPassedOn() throws Exception {
    PrefixRouterNode node = mock(PrefixRouterNode.class);
    when(node.state()).thenReturn(PrefixRouterNode.State.RUNNING);
    when(node.nodeId()).thenReturn("solo");
    List<io.github.prefixrouter.InferenceRequest> submitted =
        java.util.Collections.synchronizedList(new ArrayList<>());
    when(node.submit(any())).thenAnswer(inv -> {
      submitted.add(inv.getArgument(0));
      return new CompletableFuture<InferenceResponse>(); // never answered: only parsing counts
    });
    ClientEndpoint endpoint =
        new ClientEndpoint(node, List::of, 16, Duration.ofSeconds(5), "base-7b");
    InetSocketAddress addr = endpoint.start("127.0.0.1", 0);
    try {
      HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
      String a = addr.getHostString() + ":" + addr.getPort();
      for (String body : List.of(
          "{\"prompt\":[1]}",
          "{\"prompt\":[1],\"model\":\"base-7b\"}",
          "{\"prompt\":[1],\"model\":\"\"}",
          "{\"prompt\":[1],\"model\":\"sql-lora\"}",
          "{\"prompt\":[1],\"model\":\"base-7b\",\"cache_salt\":\"tenant-1\"}",
          "{\"prompt\":[1],\"model\":\"sql-lora\",\"cache_salt\":\"t\u00e9\"}")) {
        c.sendAsync(HttpRequest.newBuilder(URI.create("http://" + a + "/v1/route/completions"))
            .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        int before = submitted.size();
        while (submitted.size() == before && System.nanoTime() < deadline) {
          Thread.sleep(5);
        }
      }
      assertEquals(List.of(io.github.prefixrouter.CacheScope.DEFAULT,
              io.github.prefixrouter.CacheScope.DEFAULT,
              io.github.prefixrouter.CacheScope.DEFAULT,
              io.github.prefixrouter.CacheScope.adapter("sql-lora"),
              io.github.prefixrouter.CacheScope.salt("tenant-1"),
              io.github.prefixrouter.CacheScope.of("sql-lora", "t\u00e9")),
          submitted.stream().map(io.github.prefixrouter.InferenceRequest::scope).toList());
    } finally {
      endpoint.stop();
    }
  }

  @Test
  void stalledClientsAreCutOffAndDoNotBlockTheThreadThatAnswers() throws Exception {
    PrefixRouterNode node = mock(PrefixRouterNode.class);
    when(node.state()).thenReturn(PrefixRouterNode.State.RUNNING);
    when(node.nodeId()).thenReturn("solo");
    CompletableFuture<InferenceResponse> held = new CompletableFuture<>();
    when(node.submit(any())).thenReturn(held);
    ClientEndpoint endpoint = new ClientEndpoint(node, List::of, 16, Duration.ofSeconds(1));
    InetSocketAddress addr = endpoint.start("127.0.0.1", 0);
    List<Socket> sockets = new ArrayList<>();
    try {
      // as many stalled connections as the endpoint has threads, stuck in headers and body
      sockets.add(stall(addr, "POST /v1/route/completions HTTP/1.1\r\nHost: x\r\n"));
      sockets.add(stall(addr, "POST /v1/route/completions HTTP/1.1\r\nHost: x\r\n"
          + "Content-Length: 100\r\n\r\n{\"prompt\""));
      Thread.sleep(200);
      // a client that sends its request and never reads the answer
      Socket reader = stall(addr, "POST /v1/route/completions HTTP/1.1\r\nHost: x\r\n"
          + "Content-Length: 14\r\n\r\n{\"prompt\":[1]}");
      sockets.add(reader);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (mockingDetails(node).getInvocations().stream()
          .noneMatch(i -> i.getMethod().getName().equals("submit")) && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      // its answer is large; completing the request must not wait for the client to read it
      CompletableFuture<Void> completing = CompletableFuture.runAsync(
          () -> held.completeExceptionally(new IllegalStateException("x".repeat(8 << 20))));
      completing.get(5, TimeUnit.SECONDS);
      // the stalled connections are closed; the one not reading its answer is cut and counted
      // (what the kernel buffered before the cut still trickles to it afterwards)
      for (Socket s : sockets.subList(0, 2)) {
        s.setSoTimeout(20_000);
        InputStream in = s.getInputStream();
        byte[] buf = new byte[8192];
        while (in.read(buf) >= 0) {
          // until the endpoint closes the connection
        }
      }
      deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (endpoint.slowConnectionsClosed() < 3 && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      assertEquals(3, endpoint.slowConnectionsClosed());
    } finally {
      for (Socket s : sockets) {
        s.close();
      }
      endpoint.stop();
    }
  }

  @Test
  void anAnswerJsonCannotCarryIsStillAnswered() throws Exception {
    PrefixRouterNode node = mock(PrefixRouterNode.class);
    when(node.state()).thenReturn(PrefixRouterNode.State.RUNNING);
    when(node.nodeId()).thenReturn("solo");
    // an engine's text with a lone surrogate: Json.write refuses it
    RouteDecision d = new RouteDecision(RoutingPolicy.COST_AWARE, 1, new String[] {"solo"},
        new int[1], new int[1], new int[1], new long[1], new long[1],
        new RouteDecision.SkipReason[] {RouteDecision.SkipReason.NONE}, 0,
        RouteDecision.Reason.LOCAL_ONLY_POLICY);
    InferenceResponse r = new InferenceResponse("q", new EngineResult(new int[] {1}, "a\uD800", 1,
        0, 1, 1), "solo", false, 1, FallbackCause.NONE, d);
    when(node.submit(any())).thenReturn(CompletableFuture.completedFuture(r));
    ClientEndpoint endpoint = new ClientEndpoint(node, List::of, 16, Duration.ofSeconds(5));
    InetSocketAddress addr = endpoint.start("127.0.0.1", 0);
    try {
      HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
      HttpResponse<String> resp = c.sendAsync(HttpRequest.newBuilder(
              URI.create("http://127.0.0.1:" + addr.getPort() + "/v1/route/completions"))
          .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":[1]}")).build(),
          HttpResponse.BodyHandlers.ofString()).get(20, TimeUnit.SECONDS);
      assertEquals(500, resp.statusCode(), resp.body());
      assertTrue(resp.body().contains("error"), resp.body());
    } finally {
      endpoint.stop();
    }
  }

  private static Socket stall(InetSocketAddress addr, String prefix) throws Exception {
    Socket s = new Socket(addr.getHostString(), addr.getPort());
    s.setReceiveBufferSize(4096);
    OutputStream out = s.getOutputStream();
    out.write(prefix.getBytes(StandardCharsets.US_ASCII));
    out.flush();
    return s;
  }
}
