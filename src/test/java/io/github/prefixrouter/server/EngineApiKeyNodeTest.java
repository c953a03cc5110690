package io.github.prefixrouter.server;

import static io.github.prefixrouter.testing.LoggedLines.logged;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.engine.openai.FakeOpenAiServer;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A node in front of a model server started with an API key (vLLM's and SGLang's
 * {@code --api-key}), which answers 401 to every request without it: the key, given with
 * {@code --engine-api-key-file} or env {@code PREFIX_ROUTER_ENGINE_API_KEY}, goes with each of
 * the node's calls to that server (the start's {@code GET /v1/models}, {@code POST /tokenize},
 * the completions), to no other host, and into no message.
 */
class EngineApiKeyNodeTest {

  private static final String KEY = "sk-7f3a9c-right";
  private static final String WRONG = "sk-b41d2e-wrong";

  @TempDir Path dir;

  private final ByteArrayOutputStream out = new ByteArrayOutputStream();
  private final ByteArrayOutputStream err = new ByteArrayOutputStream();

  /** A node launched as {@code NodeMain} launches it, with {@code env} besides the cluster key. */
  private NodeMain.Running launch(Map<String, String> env, String... args) {
    Map<String, String> all = new java.util.HashMap<>(env);
    all.put("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX);
    List<String> a = new ArrayList<>(List.of("--id", "k", "--listen", "127.0.0.1:0"));
    a.addAll(List.of(args));
    NodeMain.Launch l = NodeMain.launch(a.toArray(new String[0]), all,
        new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
    assertNotNull(l.running(), "status " + l.status() + ": " + printed());
    return l.running();
  }

  private String printed() {
    return out.toString(StandardCharsets.UTF_8) + err.toString(StandardCharsets.UTF_8);
  }

  private static HttpResponse<String> post(NodeMain.Running r, String path, String body)
      throws Exception {
    return HttpClient.newHttpClient().send(HttpRequest.newBuilder(
            URI.create("http://" + r.clientAddress + path))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** The body of the node's {@code GET path}, which must answer 200. */
  private static String get(NodeMain.Running r, String path) throws Exception {
    HttpResponse<String> h = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
            URI.create("http://" + r.clientAddress + path)).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(200, h.statusCode(), h.body());
    return h.body();
  }

  /** The body of the node's {@code GET /health}, which must answer 200. */
  private static String health(NodeMain.Running r) throws Exception {
    HttpResponse<String> h = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
            URI.create("http://" + r.clientAddress + "/health")).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(200, h.statusCode(), h.body());
    return h.body();
  }

  /**
   * The node's {@code /health} body once it contains {@code part}: the watch of the key sees
   * the completion's end on the thread that completes it, alongside the client's answer.
   */
  private static String healthSaying(NodeMain.Running r, String part) throws Exception {
    long deadline = System.nanoTime() + 10_000_000_000L;
    String body = health(r);
    while (!body.contains(part) && System.nanoTime() < deadline) {
      Thread.sleep(10);
      body = health(r);
    }
    assertTrue(body.contains(part), body);
    return body;
  }

  private static FakeOpenAiServer serverWithKey() {
    FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO);
    server.tokenizes(true);
    server.requireApiKey(KEY);
    return server;
  }

  /** The key from the environment, and from a file: every call to the server carries it. */
  @Test
  void everyCallToTheServerCarriesTheKey() throws Exception {
    Path keyFile = Files.writeString(dir.resolve("engine.key"), KEY + "\n");
    List<Map.Entry<Map<String, String>, List<String>>> ways = List.of(
        Map.entry(Map.of("PREFIX_ROUTER_ENGINE_API_KEY", KEY), List.of()),
        Map.entry(Map.of(), List.of("--engine-api-key-file", keyFile.toString())));
    for (var way : ways) {
      try (FakeOpenAiServer server = serverWithKey()) {
        List<String> args = new ArrayList<>(List.of("--engine", server.baseUrl()));
        args.addAll(way.getValue());
        try (NodeMain.Running r = launch(way.getKey(), args.toArray(new String[0]))) {
          // the base model came from GET /v1/models, which answers only with the key
          assertEquals("fake-base", r.endpoint.baseModel(), server.requests().toString());
          HttpResponse<String> text = post(r, "/v1/completions",
              "{\"model\":\"fake-base\",\"prompt\":\"hello\",\"max_tokens\":2}");
          assertEquals(200, text.statusCode(), text.body());
          HttpResponse<String> chat = post(r, "/v1/chat/completions", "{\"model\":\"fake-base\","
              + "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2}");
          assertEquals(200, chat.statusCode(), chat.body());
          HttpResponse<String> ids = post(r, "/v1/completions",
              "{\"model\":\"fake-base\",\"prompt\":[1,2,3],\"max_tokens\":2}");
          assertEquals(200, ids.statusCode(), ids.body());
        }
        List<String> seen = server.requests();
        assertTrue(seen.contains("/v1/models ok"), seen.toString());
        assertTrue(seen.contains("/tokenize ok"), seen.toString());
        assertTrue(seen.contains("/v1/completions ok"), seen.toString());
        assertFalse(seen.stream().anyMatch(s -> s.endsWith(" 401")), seen.toString());
      }
    }
    assertFalse(printed().contains(KEY), printed());
  }

  /**
   * A key the server refuses fails each call with a message naming the status, the 401, and
   * never the key: not in the answers to clients, the banner or the stats line.
   */
  @Test
  void aRefusedKeyIsNamedByItsStatusAndNeverShown() throws Exception {
    Path keyFile = Files.writeString(dir.resolve("wrong.key"), WRONG + "\n");
    try (FakeOpenAiServer server = serverWithKey()) {
      NodeMain.Running r = launch(Map.of(), "--engine", server.baseUrl(),
          "--engine-api-key-file", keyFile.toString());
      try {
        assertNull(r.endpoint.baseModel(), "GET /v1/models was refused");
        HttpResponse<String> text = post(r, "/v1/completions",
            "{\"prompt\":\"hello\",\"max_tokens\":2}");
        assertEquals(502, text.statusCode(), text.body());
        assertTrue(text.body().contains("answered 401"), text.body());
        assertFalse(text.body().contains(WRONG), text.body());
        assertTrue(text.body().contains("\"the tokenizer failed: http://"), "said once: " + text.body());
        // the status documented for a tokenizer failure, saying what to give
        assertTrue(text.body().contains("\"code\":\"tokenizer_failed\"")
            && text.body().contains("refuses the API key given")
            && text.body().contains("--engine-api-key-file")
            && text.body().contains("PREFIX_ROUTER_ENGINE_API_KEY"), text.body());
        HttpResponse<String> ids = post(r, "/v1/completions",
            "{\"prompt\":[1,2,3],\"max_tokens\":2}");
        assertEquals(502, ids.statusCode(), ids.body());
        assertTrue(ids.body().contains("HTTP 401"), ids.body());
        // the client did nothing wrong (502, not 4xx), and is told what is: the node's key
        assertTrue(ids.body().contains("the model server refuses the API key the node sends"),
            ids.body());
        assertFalse(ids.body().contains(WRONG), ids.body());
        assertFalse(String.valueOf(r.engine).contains(WRONG), String.valueOf(r.engine));
      } finally {
        r.close();
      }
      List<String> seen = server.requests();
      assertTrue(seen.contains("/v1/models 401"), seen.toString());
      assertTrue(seen.contains("/tokenize 401"), seen.toString());
      assertTrue(seen.contains("/v1/completions 401"), seen.toString());
    }
    assertFalse(printed().contains(WRONG), printed());
  }

  /**
   * A server that guards its health check and refuses the node's key (a wrong one, or none) is
   * logged at the start as refusing this node's credentials, by its status, pointing at
   * {@code --engine-api-key-file} and {@code PREFIX_ROUTER_ENGINE_API_KEY}, never showing the
   * key. It used to be logged as a server that does not answer its health check at all. So is
   * vLLM's, whose {@code /health} answers without the key: the check asks {@code /v1/models}
   * too, which the key guards (with {@code --model}, the start asks nothing else; the refusal
   * used to pass unnoticed there).
   */
  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void aRefusedKeyIsLoggedAsSuchAtTheStartsHealthCheck(boolean healthOpen) throws Exception {
    Path keyFile = Files.writeString(dir.resolve("wrong.key"), WRONG + "\n");
    try (FakeOpenAiServer server = serverWithKey()) {
      server.healthOpen(healthOpen);
      for (List<String> key : List.of(List.of("--engine-api-key-file", keyFile.toString()),
          List.<String>of())) {
        List<String> args = new ArrayList<>(List.of("--engine", server.baseUrl(), "--model",
            "fake-base"));
        args.addAll(key);
        List<String> lines = logged("health check", () -> launch(Map.of(),
            args.toArray(new String[0])).close());
        assertEquals(1, lines.size(), lines.toString());
        String line = lines.get(0);
        assertTrue(line.contains("refuses this node's credentials (HTTP 401)")
            && line.contains("--engine-api-key-file")
            && line.contains("PREFIX_ROUTER_ENGINE_API_KEY")
            && line.contains(key.isEmpty() ? "without an API key" : "the API key given"), line);
        assertFalse(line.contains("does not answer"), line);
        assertFalse(line.contains(WRONG), line);
      }
    }
  }

  /**
   * A node started with a key the server refuses at its health check says so in its own
   * {@code /health} at once, before any client request (it used to say
   * {@code "engine_key_refused":false} until a completion was refused), and no more once the
   * server answers a completion.
   */
  @Test
  void aKeyRefusedAtTheStartIsInTheNodesHealthAtOnce() throws Exception {
    Path keyFile = Files.writeString(dir.resolve("wrong.key"), WRONG + "\n");
    try (FakeOpenAiServer server = serverWithKey();
        NodeMain.Running r = launch(Map.of(), "--engine", server.baseUrl(), "--model",
            "fake-base", "--engine-api-key-file", keyFile.toString())) {
      String body = health(r);
      assertTrue(body.contains("\"engine_key_refused\":true,\"engine_key_refused_status\":401,\"node_id_in_use\":false}"),
          body);
      // and where operators alert: /metrics and /v1/stats
      String metrics = get(r, "/metrics");
      assertTrue(metrics.contains("\nprefix_router_engine_key_refused_status 401\n"), metrics);
      String stats = get(r, "/v1/stats");
      assertTrue(stats.contains("\"engine_key\":{\"refused_status\":401}"), stats);
      server.requireApiKey(WRONG); // the server now has the node's key
      assertEquals(200, post(r, "/v1/completions", "{\"prompt\":[1,2,3],\"max_tokens\":2}")
          .statusCode());
      healthSaying(r, "\"engine_key_refused\":false,\"node_id_in_use\":false}");
      metrics = get(r, "/metrics");
      assertTrue(metrics.contains("\nprefix_router_engine_key_refused_status 0\n"), metrics);
    }
  }

  /**
   * A server whose key changes after the node started (rotated, the server restarted with
   * another) refuses every completion 401: the clients' 502s do not reach the operator, so the
   * node logs it, once, at WARN, pointing at {@code --engine-api-key-file} and
   * {@code PREFIX_ROUTER_ENGINE_API_KEY}, never showing the key; once the server accepts the key
   * again, it says so once, and a later refusal is logged again. It used to log nothing.
   */
  @Test
  void aKeyRefusedAfterTheStartIsLoggedOncePerChange() throws Exception {
    try (FakeOpenAiServer server = serverWithKey()) {
      List<String> lines = logged("credentials", () -> {
        try (NodeMain.Running r = launch(Map.of("PREFIX_ROUTER_ENGINE_API_KEY", KEY),
            "--engine", server.baseUrl())) {
          assertEquals(200, post(r, "/v1/completions", "{\"prompt\":[1,2,3],\"max_tokens\":2}")
              .statusCode());
          assertTrue(health(r).contains("\"engine_failing\":false,\"engine_key_refused\":false,\"node_id_in_use\":false}"),
              health(r));
          server.requireApiKey(WRONG); // the server's key changed: the node's is now refused
          for (int i = 0; i < 3; i++) {
            HttpResponse<String> ids = post(r, "/v1/completions",
                "{\"prompt\":[1,2,3],\"max_tokens\":2}");
            assertEquals(502, ids.statusCode(), ids.body());
          }
          // still 200 (the node is up; with peers it would answer through them), and says why
          // its requests fail: three refusals in a row, a failing engine
          String refused = healthSaying(r,
              "\"engine_key_refused\":true,\"engine_key_refused_status\":401,\"node_id_in_use\":false}");
          assertTrue(refused.contains("\"engine_failing\":true"), refused);
          assertFalse(refused.contains(WRONG) || refused.contains(KEY), refused);
          server.requireApiKey(KEY);
          assertEquals(200, post(r, "/v1/completions", "{\"prompt\":[1,2,3],\"max_tokens\":2}")
              .statusCode());
          String accepted = healthSaying(r, "\"engine_key_refused\":false,\"node_id_in_use\":false}");
          assertTrue(accepted.contains("\"engine_failing\":false"), accepted);
          assertEquals(200, post(r, "/v1/completions", "{\"prompt\":[1,2,3],\"max_tokens\":2}")
              .statusCode());
          server.requireApiKey(WRONG);
          assertEquals(502, post(r, "/v1/completions", "{\"prompt\":[1,2,3],\"max_tokens\":2}")
              .statusCode());
        } catch (Exception e) {
          throw new AssertionError(e);
        }
      });
      assertEquals(3, lines.size(), lines.toString());
      for (int i : new int[] {0, 2}) {
        String line = lines.get(i);
        assertTrue(line.contains("WARN") && line.contains("refuses this node's credentials (HTTP 401)")
            && line.contains("the API key given")
            && line.contains("--engine-api-key-file")
            && line.contains("PREFIX_ROUTER_ENGINE_API_KEY"), line);
      }
      assertTrue(lines.get(1).contains("INFO") && lines.get(1).contains("accepts this node's credentials again"),
          lines.get(1));
      assertFalse(lines.toString().contains(KEY) || lines.toString().contains(WRONG), lines.toString());
    }
  }

  /**
   * A {@code --tokenizer} URL on the engine's server (same scheme, host and port) gets the key;
   * one on another server does not: the key is the engine server's, not to be handed to
   * whatever host the tokenizer names.
   */
  @Test
  void theKeyGoesToATokenizerUrlOnTheEnginesServerOnly() throws Exception {
    try (FakeOpenAiServer server = serverWithKey(); FakeOpenAiServer other = serverWithKey()) {
      try (NodeMain.Running r = launch(Map.of("PREFIX_ROUTER_ENGINE_API_KEY", KEY),
          "--engine", server.baseUrl() + "/v1", "--tokenizer", server.baseUrl() + "/tokenize")) {
        HttpResponse<String> text = post(r, "/v1/completions",
            "{\"prompt\":\"hello\",\"max_tokens\":2}");
        assertEquals(200, text.statusCode(), text.body());
      }
      assertTrue(server.requests().contains("/tokenize ok"), server.requests().toString());
      try (NodeMain.Running r = launch(Map.of("PREFIX_ROUTER_ENGINE_API_KEY", KEY),
          "--engine", server.baseUrl(), "--tokenizer", other.baseUrl() + "/tokenize")) {
        HttpResponse<String> text = post(r, "/v1/completions",
            "{\"prompt\":\"hello\",\"max_tokens\":2}");
        assertEquals(502, text.statusCode(), text.body());
      }
      assertEquals(List.of("/tokenize 401"), other.requests(), "sent without the key");
    }
  }

  @Test
  void sameOriginIsSchemeHostAndPort() {
    String[][] same = {
        {"http://127.0.0.1:8000", "http://127.0.0.1:8000/tokenize"},
        {"http://H.example:80/v1", "http://h.example/tokenize"},
        {"https://h", "https://h:443/tokenize"},
        {"http://[::1]:8000", "http://[::1]:8000/tokenize"}};
    for (String[] s : same) {
      assertTrue(NodeMain.sameOrigin(URI.create(s[1]), URI.create(s[0])), String.join(" ", s));
    }
    String[][] other = {
        {"http://h:8000", "http://h:8001/tokenize"},
        {"http://h:8000", "https://h:8000/tokenize"},
        {"http://127.0.0.1:8000", "http://localhost:8000/tokenize"},
        {"http://h", "http://h:443/tokenize"}};
    for (String[] s : other) {
      assertFalse(NodeMain.sameOrigin(URI.create(s[1]), URI.create(s[0])), String.join(" ", s));
    }
  }
}
