package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.engine.openai.FakeOpenAiServer;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.server.PrometheusTextParser.Family;
import io.github.prefixrouter.testing.HoldingAnswerServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A node in front of an OpenAI-compatible server ({@code --engine URL}) shows its engine
 * adapter's own limits where operators look, {@code engine} in {@code /v1/stats} and
 * {@code prefix_router_engine_*} in {@code /metrics}: the requests outstanding at the server
 * against {@code --engine-max-in-flight} and those refused at it, and the heap its answers hold
 * against {@code --engine-answer-budget} and the requests refused their share of it. Only the
 * reference engine had an {@code engine} section: with a model server, nothing showed them.
 */
class EngineAdapterStatsNodeTest {

  private final HttpClient http =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

  private static NodeMain.Running start(String... more) throws Exception {
    List<String> args = new java.util.ArrayList<>(List.of("--id", "e", "--listen",
        "127.0.0.1:0", "--client", "127.0.0.1:0"));
    args.addAll(List.of(more));
    return NodeMain.start(NodeOptions.parse(args.toArray(new String[0]),
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX)));
  }

  private HttpRequest completion(NodeMain.Running r, String prompt) {
    return HttpRequest.newBuilder(URI.create("http://" + r.clientAddress + "/v1/completions"))
        .POST(HttpRequest.BodyPublishers.ofString(
            "{\"prompt\":" + prompt + ",\"max_tokens\":2}")).build();
  }

  private String get(NodeMain.Running r, String path) throws Exception {
    HttpResponse<String> resp = http.send(HttpRequest.newBuilder(
        URI.create("http://" + r.clientAddress + path)).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(200, resp.statusCode(), resp.body());
    return resp.body();
  }

  /** {@code /v1/stats}' {@code section}, or null without one. */
  private Map<?, ?> section(NodeMain.Running r, String section) throws Exception {
    return (Map<?, ?>) ((Map<?, ?>) Json.parse(get(r, "/v1/stats"))).get(section);
  }

  /** The unlabelled values of the {@code /metrics} families named {@code prefix...}. */
  private Map<String, Double> metrics(NodeMain.Running r, String prefix) throws Exception {
    Map<String, Double> values = new LinkedHashMap<>();
    for (Family f : PrometheusTextParser.parse(get(r, "/metrics")).values()) {
      if (f.name.startsWith(prefix)) {
        values.put(f.name, f.value());
      }
    }
    return values;
  }

  private static final String E = "prefix_router_engine_";

  /**
   * {@code --engine-max-in-flight 1}: one request held at the server, a second refused at the
   * limit (503, no peer to try it on), both shown in {@code engine} and in {@code /metrics}, with
   * the answer budget {@code --engine-answer-budget} gave and nothing held of it (the held
   * request's answer has not come); once the held request is answered, nothing is outstanding
   * and the refusal stays counted.
   */
  @Test
  void theEngineSectionShowsTheAdaptersLimitsAndWhatTheyRefused() throws Exception {
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO);
        NodeMain.Running r = start("--engine", server.baseUrl(), "--model", "fake-base",
            "--engine-max-in-flight", "1", "--engine-answer-budget", "200m")) {
      long budget = 200L << 20;
      Map<?, ?> idle = section(r, "engine");
      assertNotNull(idle, "/v1/stats has no engine section with --engine URL: "
          + get(r, "/v1/stats"));
      assertEquals(Map.of("in_flight", 0L, "max_in_flight", 1L, "in_flight_refused", 0L,
          "answer_budget_bytes", budget, "answer_budget_held_bytes", 0L,
          "answer_budget_refused", 0L, "connection_retries", 0L), idle, "the engine section of an idle node");

      server.hold();
      CompletableFuture<HttpResponse<String>> held =
          http.sendAsync(completion(r, "[1,2,3]"), HttpResponse.BodyHandlers.ofString());
      assertTrue(server.awaitArrived(1, Duration.ofSeconds(20)), "the held request");
      HttpResponse<String> refused =
          http.send(completion(r, "[4,5,6]"), HttpResponse.BodyHandlers.ofString());
      assertEquals(503, refused.statusCode(), refused.body());
      assertTrue(refused.body().contains("already in flight"), refused.body());

      Map<String, Object> atTheLimit = new LinkedHashMap<>();
      atTheLimit.put("in_flight", 1L);
      atTheLimit.put("max_in_flight", 1L);
      atTheLimit.put("in_flight_refused", 1L);
      atTheLimit.put("answer_budget_bytes", budget);
      atTheLimit.put("answer_budget_held_bytes", 0L);
      atTheLimit.put("answer_budget_refused", 0L);
      atTheLimit.put("connection_retries", 0L);
      assertEquals(atTheLimit, section(r, "engine"),
          "one request outstanding at a limit of 1, one refused at it");
      Map<String, Double> m = metrics(r, E);
      Map<String, Double> expected = new LinkedHashMap<>();
      expected.put(E + "in_flight_requests", 1.0);
      expected.put(E + "max_in_flight_requests", 1.0);
      expected.put(E + "in_flight_refused_total", 1.0);
      expected.put(E + "answer_budget_bytes", (double) budget);
      expected.put(E + "answer_budget_held_bytes", 0.0);
      expected.put(E + "answer_budget_refused_total", 0.0);
      expected.put(E + "connection_retries_total", 0.0);
      for (Map.Entry<String, Double> e : expected.entrySet()) {
        assertEquals(e.getValue(), m.get(e.getKey()),
            "/metrics' " + e.getKey() + " among " + m);
      }

      server.release();
      assertEquals(200, held.get(20, TimeUnit.SECONDS).statusCode());
      atTheLimit.put("in_flight", 0L);
      assertEquals(atTheLimit, section(r, "engine"),
          "the held request answered: none outstanding, the refusal still counted");
    }
  }

  /**
   * The tokenizer of the OpenAI routes ({@code --tokenizer URL}, which reads the answers of a
   * {@code POST /tokenize}) has an answer budget of its own, {@code --tokenizer-answer-budget}:
   * the {@code tokenizer} section shows it and what the answers being read hold of it now, here
   * the answer of nearly 1 MiB to a text prompt, which its server holds open (the answer's
   * Content-Length, 1 MiB, taken as its bytes arrived). Nothing showed it; its refusals were
   * counted, in the client section's {@code rejected_busy}, but not what it held.
   */
  @Test
  void theTokenizerSectionShowsItsAnswerBudgetAndWhatIsHeldOfIt() throws Exception {
    int answer = 1 << 20;
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO);
        HoldingAnswerServer tokenizer = new HoldingAnswerServer(answer, false);
        NodeMain.Running r = start("--engine", server.baseUrl(), "--model", "fake-base",
            "--tokenizer", tokenizer.uri("/tokenize").toString(),
            "--tokenizer-answer-budget", "25m")) {
      long budget = 25L << 20;
      assertEquals(Map.of("answer_budget_bytes", budget, "answer_budget_held_bytes", 0L,
              "connection_retries", 0L),
          section(r, "tokenizer"), "/v1/stats' tokenizer section with --tokenizer URL: "
              + get(r, "/v1/stats"));
      http.sendAsync(HttpRequest.newBuilder(
              URI.create("http://" + r.clientAddress + "/v1/completions"))
          .POST(HttpRequest.BodyPublishers.ofString(
              "{\"model\":\"fake-base\",\"prompt\":\"hello\",\"max_tokens\":2}")).build(),
          HttpResponse.BodyHandlers.ofString());
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      Map<?, ?> held = section(r, "tokenizer");
      while (!Long.valueOf(answer).equals(held.get("answer_budget_held_bytes"))) {
        assertTrue(System.nanoTime() < until, "the tokenize answer held open, 20 s on: " + held
            + "; " + tokenizer.written() + " answers written");
        Thread.sleep(20);
        held = section(r, "tokenizer");
      }
      Map<String, Double> m = metrics(r, "prefix_router_tokenizer_");
      assertEquals(Map.of("prefix_router_tokenizer_answer_budget_bytes", (double) budget,
          "prefix_router_tokenizer_answer_budget_held_bytes", (double) answer,
          "prefix_router_tokenizer_connection_retries_total", 0.0), m,
          "/metrics' tokenizer families while its answer is held");
    }
  }
}
