package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.server.PrometheusTextParser.Family;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;

/** {@code GET /metrics} of two in-process nodes, one forwarding to the other. */
class MetricsEndpointTest {

  private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

  private static NodeOptions options(String id, String... more) {
    String[] base = {"--id", id, "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0",
        "--policy", "longest-prefix", "--gossip-interval-ms", "50"};
    String[] args = java.util.Arrays.copyOf(base, base.length + more.length);
    System.arraycopy(more, 0, args, base.length, more.length);
    return NodeOptions.parse(args, Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
  }

  private HttpResponse<String> get(String method, String address, String path) throws Exception {
    return http.send(HttpRequest.newBuilder(URI.create("http://" + address + path))
        .method(method, HttpRequest.BodyPublishers.noBody()).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** The node's metrics, read strictly. */
  private Map<String, Family> metrics(NodeMain.Running r) throws Exception {
    HttpResponse<String> resp = get("GET", r.clientAddress, "/metrics");
    assertEquals(200, resp.statusCode(), resp.body());
    assertEquals("text/plain; version=0.0.4; charset=utf-8",
        resp.headers().firstValue("Content-Type").orElse(null));
    return PrometheusTextParser.parse(resp.body());
  }

  private Map<String, Family> awaitMetrics(NodeMain.Running r, Predicate<Map<String, Family>> p)
      throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    Map<String, Family> m = metrics(r);
    while (!p.test(m) && System.nanoTime() < deadline) {
      Thread.sleep(20);
      m = metrics(r);
    }
    assertTrue(p.test(m), "not reached in 30 s: " + m.keySet());
    return m;
  }

  private Map<?, ?> complete(NodeMain.Running r, String body) throws Exception {
    HttpResponse<String> resp = http.send(HttpRequest.newBuilder(
            URI.create("http://" + r.clientAddress + "/v1/route/completions"))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(200, resp.statusCode(), resp.body());
    return (Map<?, ?>) Json.parse(resp.body());
  }

  private static String prompt(int base, int n) {
    StringBuilder b = new StringBuilder("[");
    for (int i = 0; i < n; i++) {
      b.append(i == 0 ? "" : ",").append(base + i);
    }
    return b.append(']').toString();
  }

  /** Requests answered and timed so far whose answer was served as {@code served}. */
  private static double durationCount(Map<String, Family> m, String served) {
    Family f = m.get("prefix_router_client_request_duration_seconds");
    return f == null ? 0 : f.histogram("served", served).count();
  }

  private static double v(Map<String, Family> m, String family) {
    Family f = m.get(family);
    assertTrue(f != null, "no family " + family);
    return f.value();
  }

  @Test
  void countersAfterAForwardedAndALocalRequest() throws Exception {
    try (NodeMain.Running b = NodeMain.start(options("b"));
        NodeMain.Running a = NodeMain.start(options("a", "--seeds",
            "b@" + b.transport.localAddress().address()))) {
      Predicate<Map<String, Family>> peerLive = m -> v(m, "prefix_router_peers_live") == 1;
      awaitMetrics(a, peerLive);
      awaitMetrics(b, peerLive);
      // b caches a 64-token prompt (4 blocks); a learns of it by gossip, then forwards it to b
      String shared = prompt(100, 64);
      Map<?, ?> first = complete(b, "{\"id\":\"p1\",\"prompt\":" + shared + "}");
      assertEquals("b", first.get("served_by"));
      awaitMetrics(a, m -> v(m, "prefix_router_replica_blocks") >= 4);
      Map<?, ?> forwarded = complete(a, "{\"id\":\"p2\",\"prompt\":" + shared + ",\"max_tokens\":2}");
      assertEquals("b", forwarded.get("served_by"), String.valueOf(forwarded));
      assertEquals(Boolean.TRUE, forwarded.get("forwarded"));
      Map<?, ?> local = complete(a, "{\"id\":\"p3\",\"prompt\":" + prompt(9000, 20) + "}");
      assertEquals("a", local.get("served_by"));

      // a request leaves the in-flight gauges as its answer is handed to the writer, and its
      // time is recorded once the write ends, after the client may have read it: wait for both
      Map<String, Family> am = awaitMetrics(a,
          m -> v(m, "prefix_router_in_flight_requests") == 0
              && v(m, "prefix_router_client_in_flight_requests") == 0
              && durationCount(m, "local") == 1 && durationCount(m, "forwarded") == 1);
      assertEquals(1.0, am.get("prefix_router_node_info").value("node", "a"));
      assertEquals(1, am.get("prefix_router_node_info").samples.size());
      Family state = am.get("prefix_router_node_state");
      for (PrefixRouterNode.State s : PrefixRouterNode.State.values()) {
        assertEquals(s == PrefixRouterNode.State.RUNNING ? 1.0 : 0.0, state.value("state", s.name()));
      }
      assertEquals(2.0, v(am, "prefix_router_requests_total"));
      assertEquals(1.0, v(am, "prefix_router_requests_forwarded_total"));
      assertEquals(1.0, v(am, "prefix_router_requests_served_locally_total"));
      assertEquals(0.0, v(am, "prefix_router_requests_failed_total"));
      assertEquals(84.0, v(am, "prefix_router_prompt_tokens_total"));
      assertEquals(((Long) forwarded.get("cached_tokens")) + ((Long) local.get("cached_tokens")),
          v(am, "prefix_router_cached_prompt_tokens_total"));
      assertTrue((Long) forwarded.get("cached_tokens") >= 48, String.valueOf(forwarded));
      assertEquals((double) (Long) forwarded.get("cached_tokens"),
          v(am, "prefix_router_actual_cached_tokens_total"));
      for (FallbackCause c : FallbackCause.values()) {
        if (c != FallbackCause.NONE) {
          assertEquals(0.0, am.get("prefix_router_fallbacks_total").value("cause", c.name()), c.name());
        }
      }
      assertEquals(1.0, v(am, "prefix_router_transport_requests_sent_total"));
      assertEquals(0.0, v(am, "prefix_router_transport_requests_failed_total"));
      assertTrue(v(am, "prefix_router_gossip_sent_bytes_total") > 0);
      assertTrue(v(am, "prefix_router_gossip_received_bytes_total") > 0);
      assertTrue(v(am, "prefix_router_transport_sent_bytes_total") > 0);
      assertEquals(1.0, v(am, "prefix_router_engine_requests_total"), "a's engine ran p3 alone");
      assertEquals(0.0, v(am, "prefix_router_client_in_flight_requests"));
      assertEquals(0.0, v(am, "prefix_router_in_flight_requests"));
      assertEquals(0.0, v(am, "prefix_router_client_rejected_busy_total"));
      // the client's waits, by where each was served: one local, one forwarded, none failed;
      // neither was streamed, so no first output
      Family durations = am.get("prefix_router_client_request_duration_seconds");
      assertTrue(durations != null, "no request duration histogram: " + am.keySet());
      assertEquals("histogram", durations.type);
      assertEquals(1.0, durations.histogram("served", "local").count());
      assertEquals(1.0, durations.histogram("served", "forwarded").count());
      assertEquals(0.0, durations.histogram("served", "failed").count());
      assertTrue(durations.histogram("served", "forwarded").sum() > 0);
      Family firstOutputs = am.get("prefix_router_client_time_to_first_output_seconds");
      for (String served : new String[] {"local", "forwarded", "failed"}) {
        assertEquals(0.0, firstOutputs.histogram("served", served).count(), served);
      }

      Map<String, Family> bm = metrics(b);
      assertEquals(1.0, v(bm, "prefix_router_requests_total"));
      assertEquals(1.0, v(bm, "prefix_router_served_for_peers_total"));
      assertEquals(1.0, v(bm, "prefix_router_transport_requests_received_total"));
      assertEquals(2.0, v(bm, "prefix_router_engine_requests_total"));
      assertTrue(v(bm, "prefix_router_local_blocks") >= 4);
      assertTrue(v(bm, "prefix_router_local_cached_tokens") >= 64);

      // /v1/stats says the same (counters that gossip does not move)
      Map<?, ?> s = (Map<?, ?>) Json.parse(get("GET", a.clientAddress, "/v1/stats").body());
      assertEquals(2L, s.get("requests"));
      assertEquals(1L, s.get("forwarded"));
      assertEquals(((Long) s.get("cached_prompt_tokens")).doubleValue(),
          v(am, "prefix_router_cached_prompt_tokens_total"));
      assertEquals((Double) s.get("hit_rate"), v(am, "prefix_router_cache_hit_ratio"), 1e-15);
      assertEquals(1L, ((Map<?, ?>) s.get("transport")).get("requests_sent"));
      assertEquals(1L, ((Map<?, ?>) s.get("engine")).get("requests"));
    }
  }

  @Test
  void headAnswersTheHeadersAndOtherMethodsAre405() throws Exception {
    try (NodeMain.Running r = NodeMain.start(options("solo"))) {
      HttpResponse<String> head = get("HEAD", r.clientAddress, "/metrics");
      assertEquals(200, head.statusCode());
      assertEquals("", head.body());
      assertEquals(PrometheusText.CONTENT_TYPE, head.headers().firstValue("Content-Type").orElse(null));
      HttpResponse<String> post = get("POST", r.clientAddress, "/metrics");
      assertEquals(405, post.statusCode());
      assertEquals("GET, HEAD", post.headers().firstValue("Allow").orElse(""));
      assertEquals(404, get("GET", r.clientAddress, "/metrics/x").statusCode());
      assertTrue(get("GET", r.clientAddress, "/nope").body().contains("/metrics"));
      Map<String, Family> m = metrics(r);
      // the reference engine's families are there; the KV-event ones only with --kv-events
      assertTrue(m.containsKey("prefix_router_engine_requests_total"), m.keySet().toString());
      assertTrue(m.keySet().stream().noneMatch(k -> k.startsWith("prefix_router_kv_events_")));
      assertEquals(0.0, v(m, "prefix_router_peers_live"));
    }
  }
}
