package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.json.Json;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code GET /v1/stats} keeps its keys, their order and their values. */
class StatsJsonTest {

  @Test
  void theNodeStatsPartIsWrittenAsBefore() {
    // local_blocks (19171) is not among the keys: /v1/stats never showed it
    assertEquals("{\"node_id\":\"node-7\",\"state\":\"RUNNING\",\"requests\":3027,"
        + "\"served_locally\":4036,\"forwarded\":5045,\"failed\":6054,\"cold_placements\":7063,"
        + "\"served_for_peers\":8072,\"refused_for_peers\":9081,\"pushed_back\":10090,"
        + "\"fallbacks\":{\"TIMEOUT\":7000104,\"BUSY\":7000205,\"UNREACHABLE\":7000306,"
        + "\"PEER_FAILED\":7000407,\"PROTOCOL_ERROR\":7000508,\"TRANSPORT_CLOSED\":7000609,"
        + "\"LOCAL_FAILED\":7000710,\"TOO_LARGE\":7000811,\"IN_FLIGHT_LIMIT\":7000912},"
        + "\"estimated_cached_tokens\":12108,"
        + "\"actual_cached_tokens\":13117,\"prompt_tokens\":14126,\"cached_prompt_tokens\":15135,"
        + "\"hit_rate\":1.0714285714285714,\"gossip_bytes_in\":16144,\"gossip_bytes_out\":17153,"
        + "\"local_cached_tokens\":18162,\"replica_blocks\":20180,\"peers_live\":21189,"
        + "\"in_flight\":22198}",
        Json.write(ClientEndpoint.statsJson(StatsFixtures.nodeStats())));
  }

  @Test
  void theKvEventPartKeepsItsKeysInTheirOrder() {
    var kv = new StatsTables.KvEventStats(
        StatsFixtures.distinct(io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber.Stats.class, 0),
        StatsFixtures.distinct(io.github.prefixrouter.engine.vllm.VllmKvEventReceiver.Stats.class, 0));
    assertEquals(List.of("connects", "disconnects", "silence_reconnects", "connect_failures", "messages",
        "malformed_messages", "other_topic_messages", "replays_requested", "replayed_messages",
        "replay_failures", "replays_skipped",
        "batches_applied", "replayed_batches", "stored_events", "removed_events",
        "cleared_events", "malformed_batches", "block_size_mismatches", "token_count_mismatches",
        "unattributed_stores", "unmirrored_removals", "other_group_events",
        "tracking_overflows", "reannounced_blocks", "gaps", "restarts", "duplicates_ignored",
        "resets", "ignored_events", "empty_events", "listener_failures", "sink_failures"),
        List.copyOf(StatsTables.KV_EVENTS.json(kv).keySet()));
  }

  @Test
  void aRunningNodeShowsTheseKeysInThisOrder() throws Exception {
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "solo", "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0"}, Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
    try (NodeMain.Running r = NodeMain.start(o)) {
      HttpClient c = HttpClient.newHttpClient();
      HttpResponse<String> resp = c.send(HttpRequest.newBuilder(
          URI.create("http://" + r.clientAddress + "/v1/stats")).build(),
          HttpResponse.BodyHandlers.ofString());
      assertEquals(200, resp.statusCode());
      assertEquals("application/json", resp.headers().firstValue("Content-Type").orElse(null));
      Map<?, ?> s = (Map<?, ?>) Json.parse(resp.body());
      assertEquals(List.of("node_id", "state", "requests", "served_locally", "forwarded", "failed",
          "cold_placements", "served_for_peers", "refused_for_peers", "pushed_back", "fallbacks",
          "estimated_cached_tokens", "actual_cached_tokens", "prompt_tokens",
          "cached_prompt_tokens", "hit_rate", "gossip_bytes_in", "gossip_bytes_out",
          "local_cached_tokens", "replica_blocks", "peers_live", "in_flight", "gossip",
          "peer_messages", "engine_watch", "local_tree", "transport", "engine", "client"),
          List.copyOf(s.keySet()));
      // the gossip layer of a node alone: its generation (the clock's at its start, in
      // microseconds), rounds run and nothing else
      Map<?, ?> gossip = (Map<?, ?>) s.get("gossip");
      assertEquals(List.of("generation", "node_id_in_use", "peers_suspect", "rounds",
          "malformed_dropped", "rejected", "internal_errors", "members_suspected",
          "members_dead", "members_refused", "generations_replaced", "generations_refuted",
          "snapshots_sent", "snapshots_installed", "snapshots_abandoned", "blocks_refused",
          "syns_refused"),
          List.copyOf(gossip.keySet()));
      assertTrue((Long) gossip.get("generation") > 1_600_000_000L * 1_000_000, gossip.toString());
      assertEquals(0L, gossip.get("node_id_in_use"));
      for (String zero : List.of("peers_suspect", "malformed_dropped", "rejected",
          "internal_errors", "members_suspected", "members_dead", "generations_refuted")) {
        assertEquals(0L, gossip.get(zero), zero);
      }
      assertEquals(Map.of("malformed", 0L, "stray_streams", 0L, "output_divergences", 0L,
          "cancelled_before_arrival", 0L, "other_model_refused", 0L),
          s.get("peer_messages"));
      assertEquals(Map.ofEntries(Map.entry("avoided", 0L), Map.entry("stalled", 0L),
          Map.entry("outstanding", 0L), Map.entry("silent_seconds", 0L), Map.entry("stalls", 0L),
          Map.entry("recoveries", 0L), Map.entry("reroutes", 0L),
          Map.entry("refused_for_peers", 0L), Map.entry("failing", 0L),
          Map.entry("failed_in_a_row", 0L), Map.entry("failing_spells", 0L),
          Map.entry("cache_losses", 0L), Map.entry("load_failures", 0L)),
          s.get("engine_watch"));
      // the reference engine publishes its cache events, so the tree mirrors them
      assertEquals(List.of("stored_events", "removed_events", "cleared_events",
          "unknown_parents", "unknown_blocks", "malformed_events", "duplicate_blocks",
          "aliased_blocks", "conflicting_events", "overflows", "overflow_blocks"),
          List.copyOf(((Map<?, ?>) s.get("local_tree")).keySet()));
      assertEquals(0L, ((Map<?, ?>) s.get("local_tree")).get("overflow_blocks"));
      assertEquals(List.of("requests_sent", "requests_failed", "requests_received",
          "messages_sent", "messages_dropped", "messages_failed", "messages_received",
          "outbound_busy", "inbound_busy", "auth_failures", "replays_rejected",
          "oversize_rejected", "malformed_rejected", "slow_connections_closed", "reads_refused",
          "bytes_in", "bytes_out", "pending_requests", "other_key_authentications",
          "key_updates", "sender_not_in_certificate", "body_budget_held_bytes",
          "body_budget_refused", "internal_errors", "cluster_keys"),
          List.copyOf(((Map<?, ?>) s.get("transport")).keySet()));
      // the id of the one key: the first 4 bytes of its SHA-256
      assertEquals(Map.of("4773d12e", 1L), ((Map<?, ?>) s.get("transport")).get("cluster_keys"));
      assertEquals(List.of("requests", "prompt_tokens", "cached_prompt_tokens",
          "evaluated_positions", "multiply_adds", "generated_tokens", "cached_tokens", "blocks_stored",
          "blocks_evicted"),
          List.copyOf(((Map<?, ?>) s.get("engine")).keySet()));
      assertEquals(List.of("in_flight", "rejected_busy", "rejected_invalid",
          "rejected_not_found", "slow_connections_closed", "reads_refused", "streams_open",
          "streams_cancelled", "tokenize_failures", "tokenize_refused",
          "refused_without_certificate", "body_budget_held_bytes", "body_budget_refused",
          "internal_errors"),
          List.copyOf(((Map<?, ?>) s.get("client")).keySet()));
      assertEquals("solo", s.get("node_id"));

      // a peer message that does not decode (a STREAM cut after its version byte), sent with
      // the cluster key, is counted as malformed and nothing else
      byte[] key = java.util.HexFormat.of().parseHex(NodeMainTest.KEY_HEX);
      try (io.github.prefixrouter.transport.http.HttpTransport peer =
          io.github.prefixrouter.transport.http.HttpTransport.builder().nodeId("peer")
              .listen("127.0.0.1", 0).clusterKey(key).build()) {
        peer.start((from, payload) -> new java.util.concurrent.CompletableFuture<>());
        peer.send(r.transport.localAddress(), new byte[] {0x26, 0x01});
        Map<?, ?> counted = Map.of();
        for (int i = 0; i < 200 && !Long.valueOf(1).equals(counted.get("malformed")); i++) {
          Thread.sleep(25);
          counted = (Map<?, ?>) ((Map<?, ?>) Json.parse(c.send(HttpRequest.newBuilder(
              URI.create("http://" + r.clientAddress + "/v1/stats")).build(),
              HttpResponse.BodyHandlers.ofString()).body())).get("peer_messages");
        }
        assertEquals(Map.of("malformed", 1L, "stray_streams", 0L, "output_divergences", 0L,
            "cancelled_before_arrival", 0L, "other_model_refused", 0L),
            counted);
      }
      assertEquals("RUNNING", s.get("state"));
      assertEquals(0.0, s.get("hit_rate"));
    }
  }
}
