package io.github.prefixrouter.server;

import io.github.prefixrouter.CacheEventStats;
import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.GossipStats;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PeerMessageStats;
import io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine;
import io.github.prefixrouter.engine.reference.ReferenceEngine;
import io.github.prefixrouter.engine.vllm.VllmKvEventReceiver;
import io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber;
import io.github.prefixrouter.internal.gossip.GossipEngine;
import io.github.prefixrouter.server.PrometheusText.Type;
import io.github.prefixrouter.transport.http.HttpTransport;

/**
 * Every counter and gauge a {@link NodeMain} process shows, each listed once with its key in
 * {@code GET /v1/stats} and its Prometheus family in {@code GET /metrics}; and the client
 * endpoint's latency histograms, in {@code GET /metrics} only.
 *
 * <p>Names follow Prometheus' conventions: one prefix ({@code prefix_router_}), counters end in
 * {@code _total}, units are in the name ({@code _tokens}, {@code _bytes}), and no label has the
 * same value on every series of a process: Prometheus adds {@code instance} and {@code job} to
 * every series it scrapes, so the node's id is a label of one info family
 * ({@code prefix_router_node_info{node="n1"} 1}) rather than of every sample.
 */
final class StatsTables {

  private StatsTables() {}

  private static final String P = "prefix_router_";

  /** The node's {@link NodeStats}: the top level of {@code /v1/stats}. */
  static final StatsTable<NodeStats> NODE = StatsTable.<NodeStats>builder()
      .labelled("node_id", P + "node_info", Type.GAUGE, "node",
          "This node's id, in the label node; always 1.", NodeStats::nodeId)
      .labelled("state", P + "node_state", Type.GAUGE, "state",
          "The node's lifecycle state: 1 for the state it is in, 0 for the others.",
          NodeStats::state)
      .counter("requests", P + "requests_total",
          "Requests submitted to this node and accepted.", NodeStats::requests)
      .counter("served_locally", P + "requests_served_locally_total",
          "Submitted requests answered by this node's engine.", NodeStats::servedLocally)
      .counter("forwarded", P + "requests_forwarded_total",
          "Submitted requests answered by a peer.", NodeStats::forwarded)
      .counter("failed", P + "requests_failed_total",
          "Submitted requests that failed everywhere, that a stop's grace period ended "
              + "before their answer, or that the client abandoned (a streaming client that "
              + "disconnects counts here, so an alert on this counter's rate also sees clients "
              + "that go away).",
          NodeStats::failed)
      .counter("cold_placements", P + "cold_placements_total",
          "Requests whose first routing decision was a cold-prefix placement.", NodeStats::coldPlacements)
      .counter("served_for_peers", P + "served_for_peers_total",
          "Requests forwarded here by peers that this node's engine answered, not counting"
              + " an answer too large to send back.",
          NodeStats::servedForPeers)
      .counter("refused_for_peers", P + "refused_for_peers_total",
          "Requests forwarded here that this node refused as busy (push-back given): its "
              + "engine queue at its high watermark, its engine at capacity, stalled or failing, "
              + "no heap to read its engine's answer, or the node not running.",
          NodeStats::refusedForPeers)
      .counter("pushed_back", P + "pushed_back_total",
          "Forwarding attempts that peers refused as busy (push-back received).",
          NodeStats::pushedBack)
      .labelled("fallbacks", P + "fallbacks_total", Type.COUNTER, "cause",
          "Forwarding attempts that fell back, by cause; under LOCAL_FAILED, local runs that "
              + "failed retryably and were tried on a peer.", NodeStats::fallbacks)
      .counter("estimated_cached_tokens", P + "estimated_cached_tokens_total",
          "Over forwarded requests answered with a cached-token count, the prefix tokens this "
              + "node estimated the target held.", NodeStats::estimatedCachedTokens)
      .counter("actual_cached_tokens", P + "actual_cached_tokens_total",
          "Over the same requests, the cached tokens the target's engine reported, each "
              + "request's at most its prompt's tokens (an engine that adds a special token to "
              + "the prompt may count it as cached).",
          NodeStats::actualCachedTokens)
      .counter("prompt_tokens", P + "prompt_tokens_total",
          "Prompt tokens of the answered submitted requests.", NodeStats::promptTokens)
      .counter("cached_prompt_tokens", P + "cached_prompt_tokens_total",
          "Of those, the tokens the serving engines reported as served from their prefix "
              + "cache, each request's at most its prompt's tokens.",
          NodeStats::cachedPromptTokens)
      .gauge("hit_rate", P + "cache_hit_ratio",
          "cached_prompt_tokens_total / prompt_tokens_total since start (0 before the first "
              + "answer); over a window, divide the two counters' rates.", NodeStats::hitRate)
      .counter("gossip_bytes_in", P + "gossip_received_bytes_total",
          "Gossip bytes received.", NodeStats::gossipBytesIn)
      .counter("gossip_bytes_out", P + "gossip_sent_bytes_total",
          "Gossip bytes this node's transport took to send; it may still drop some "
              + "(prefix_router_transport_messages_dropped_total counts those over HTTP).",
          NodeStats::gossipBytesOut)
      .gauge("local_cached_tokens", P + "local_cached_tokens",
          "Tokens held by the local prefix tree now.", NodeStats::localCachedTokens)
      .gauge(null, P + "local_blocks",
          "Distinct full blocks this node holds and advertises to its peers.",
          NodeStats::localBlocks)
      .gauge("replica_blocks", P + "replica_blocks",
          "Block hashes held in the replicas of peers' trees now.", NodeStats::replicaBlocks)
      .gauge("peers_live", P + "peers_live",
          "Peers currently considered alive, suspect ones included.", NodeStats::peersLive)
      .gauge("in_flight", P + "in_flight_requests",
          "Requests this node has taken on and not yet answered: submitted here or forwarded "
              + "here by peers.", NodeStats::inFlight)
      .build();

  private static final String G = P + "gossip_";

  /** The node's {@link GossipStats}: {@code gossip} in {@code /v1/stats}. */
  static final StatsTable<GossipStats> GOSSIP = StatsTable.<GossipStats>builder()
      .gauge("generation", G + "generation",
          "This node's gossip generation now: the one it started with, or one it drew above a "
              + "higher generation of itself that peers knew.", GossipStats::generation)
      .gauge("node_id_in_use", G + "node_id_in_use",
          "1 while this node takes its id to be in use by another process ("
              + GossipEngine.ID_IN_USE_REFUTATIONS + " higher generations of itself refuted "
              + "within " + GossipEngine.ID_IN_USE_WINDOW + " gossip rounds, the last less than "
              + GossipEngine.ID_IN_USE_WINDOW + " rounds ago); else 0.",
          s -> s.nodeIdInUse() ? 1 : 0)
      .gauge("peers_suspect", P + "peers_suspect",
          "Of the live peers, those suspect now: no heartbeat heard for --peer-suspect-ms; "
              + "still routed to.", GossipStats::peersSuspect)
      .counter("rounds", G + "rounds_total",
          "Gossip rounds this node ran (one per --gossip-interval-ms while it runs).",
          GossipStats::rounds)
      .counter("malformed_dropped", G + "malformed_messages_total",
          "Gossip messages dropped because they did not decode.", GossipStats::malformedDropped)
      .counter("rejected", G + "rejected_total",
          "Gossip entries, updates and snapshot chunks ignored as absurd or forged (claims too "
              + "far ahead, claims about this node it cannot follow, messages in its own name).",
          GossipStats::rejected)
      .counter("internal_errors", G + "internal_errors_total",
          "Unexpected errors while handling a gossip message or running a round (the message "
              + "dropped, the round cut short), and the scheduler refusing the timer of the next "
              + "round (the node then gossips no more, logged at ERROR); 0 in a healthy node.",
          GossipStats::internalErrors)
      .counter("members_suspected", G + "members_suspected_total",
          "Times a peer became suspect.", GossipStats::membersSuspected)
      .counter("members_dead", G + "members_dead_total",
          "Times a peer was declared dead and its replica dropped.", GossipStats::membersDead)
      .counter("members_refused", G + "members_refused_total",
          "Gossip entries and updates about a peer not tracked because this node already "
              + "tracks as many as it may (the configuration's maxPeers, 1,024 by default); each "
              + "message naming such a peer counts again.",
          GossipStats::membersRefused)
      .counter("generations_replaced", G + "generations_replaced_total",
          "Peers' replicas replaced because the peer restarted with a new generation.",
          GossipStats::generationsReplaced)
      .counter("generations_refuted", G + "generations_refuted_total",
          "Times peers knew this node by a generation above its own and it continued above it: "
              + "a restart with the clock behind the last run's, or another process with its id.",
          GossipStats::generationsRefuted)
      .counter("snapshots_sent", G + "snapshots_sent_total",
          "Full copies of a cache summary sent to peers that lagged beyond the delta logs.",
          GossipStats::snapshotsSent)
      .counter("snapshots_installed", G + "snapshots_installed_total",
          "Full copies received and installed into a replica.", GossipStats::snapshotsInstalled)
      .counter("snapshots_abandoned", G + "snapshots_abandoned_total",
          "Full copies begun and never installed, each counted once: no new chunk for 16 "
              + "rounds, the replica caught up otherwise, a newer copy replaced it, its origin "
              + "restarted or died, or it was refused once complete.",
          GossipStats::snapshotsAbandoned)
      .counter("blocks_refused", G + "blocks_refused_total",
          "Block hashes not replicated because a replica reached its cap: peers' caches then "
              + "underestimated.", GossipStats::blocksRefused)
      .counter("syns_refused", G + "syns_refused_total",
          "Gossip exchanges a peer began left unanswered because it had begun 8 within this "
              + "node's gossip interval already (an honest peer of the same interval begins one or "
              + "two).", GossipStats::synsRefused)
      .build();

  private static final String T = P + "transport_";

  /** {@link HttpTransport#stats()}: {@code transport} in {@code /v1/stats}. */
  static final StatsTable<HttpTransport.Stats> TRANSPORT = StatsTable.<HttpTransport.Stats>builder()
      .counter("requests_sent", T + "requests_sent_total",
          "Requests to peers handed to the network.", HttpTransport.Stats::requestsSent)
      .counter("requests_failed", T + "requests_failed_total",
          "Requests to peers that failed, sent or refused before sending (too large, too many in "
              + "flight to the peer, which outbound_busy counts too, or not handed to the network); "
              + "not those the node cancelled, nor those asked of a closed transport or ended by "
              + "its close.", HttpTransport.Stats::requestsFailed)
      .counter("requests_received", T + "requests_received_total",
          "Requests from peers delivered to the node.", HttpTransport.Stats::requestsReceived)
      .counter("messages_sent", T + "messages_sent_total",
          "One-way messages (gossip, CANCELs, streamed output) handed to the network.",
          HttpTransport.Stats::messagesSent)
      .counter("messages_dropped", T + "messages_dropped_total",
          "One-way messages dropped before sending (closed, too large, peer busy).",
          HttpTransport.Stats::messagesDropped)
      .counter("messages_failed", T + "messages_failed_total",
          "One-way messages the peer did not accept (network error or not 204).",
          HttpTransport.Stats::messagesFailed)
      .counter("messages_received", T + "messages_received_total",
          "One-way messages from peers delivered to the node.",
          HttpTransport.Stats::messagesReceived)
      .counter("outbound_busy", T + "outbound_busy_total",
          "Requests and messages refused here: too many in flight to the peer.",
          HttpTransport.Stats::outboundBusy)
      .counter("inbound_busy", T + "inbound_busy_total",
          "Requests from peers answered 503 because too many were in progress (or their"
              + " connection closed, when their address's answers, or too many such 503s to all"
              + " addresses, were not being taken).",
          HttpTransport.Stats::inboundBusy)
      .counter("auth_failures", T + "auth_failures_total",
          "Messages and answers dropped for a bad MAC or recipient.",
          HttpTransport.Stats::authFailures)
      .counter("replays_rejected", T + "replays_rejected_total",
          "Messages dropped as stale or already seen.", HttpTransport.Stats::replaysRejected)
      .counter("oversize_rejected", T + "oversize_rejected_total",
          "Messages refused as larger than the transport's maxMessageBytes.",
          HttpTransport.Stats::oversizeRejected)
      .counter("malformed_rejected", T + "malformed_rejected_total",
          "Messages refused for a malformed envelope or an unreadable body.",
          HttpTransport.Stats::malformedRejected)
      .counter("slow_connections_closed", T + "slow_connections_closed_total",
          "Connections on the peer port closed for not delivering a request, or not taking its "
              + "answer, within the I/O timeout.", HttpTransport.Stats::slowConnectionsClosed)
      .counter("reads_refused", T + "reads_refused_total",
          "Connections on the peer port refused for lack of a reader thread (answered 503, or "
              + "closed at once when the 4 refuser threads are busy too), and requests answered "
              + "503 for too many unfinished bodies from their address (once none of them has "
              + "finished for 1 s).",
          HttpTransport.Stats::readsRefused)
      .counter("bytes_in", T + "received_bytes_total",
          "Payload bytes accepted from peers.", HttpTransport.Stats::bytesIn)
      .counter("bytes_out", T + "sent_bytes_total",
          "Payload bytes sent to peers.", HttpTransport.Stats::bytesOut)
      .gauge("pending_requests", T + "pending_requests",
          "Requests to peers waiting for an answer now.", HttpTransport.Stats::pendingRequests)
      .counter("other_key_authentications", T + "other_key_authentications_total",
          "Messages and answers from peers authenticated by an accepted cluster key other than "
              + "the one this node signs with: while it grows, a peer still signs with it.",
          HttpTransport.Stats::otherKeyAuthentications)
      .counter("key_updates", T + "cluster_key_updates_total",
          "Changes of the cluster keys while running (key rotation).",
          HttpTransport.Stats::keyUpdates)
      .counter("sender_not_in_certificate", T + "sender_not_in_certificate_total",
          "Messages, requests and answers refused because the TLS certificate they came with "
              + "does not name the node id they claim to come from (--tls-bind-node-ids).",
          HttpTransport.Stats::senderNotInCertificate)
      .gauge("body_budget_held_bytes", T + "body_budget_held_bytes",
          "Heap held by the bodies of messages and requests being read on the peer port, and of "
              + "the answers to this node's requests being read, not yet authenticated, in bytes, "
              + "taken from their body budgets (--peer-body-budget, one each).",
          HttpTransport.Stats::bodyBudgetHeldBytes)
      .counter("body_budget_refused", T + "body_budget_refused_total",
          "Messages and requests on the peer port answered 503, and this node's requests to "
              + "peers failed (run here instead), because their body budget (--peer-body-budget, "
              + "one for the bodies, one for the answers) could not give what their body or "
              + "answer needed while others held it.",
          HttpTransport.Stats::bodyBudgetRefused)
      .counter("internal_errors", T + "internal_errors_total",
          "Messages and requests from peers answered 500 for a failure of this node's own, not "
              + "its handler's: its HMAC (the host's JCA provider's) threw as it checked their "
              + "MAC or signed the answer, or something else threw as it read, checked or handed "
              + "them on; requests whose connection was closed unanswered because no server "
              + "thread could take their answer; and messages and requests whose answer threw "
              + "an Error as it was written, their connection closed (logged, at most 10 lines a "
              + "minute).",
          HttpTransport.Stats::internalErrors)
      .labelled("cluster_keys", T + "cluster_key_info", Type.GAUGE, "key",
          "The cluster keys in use, by id (the first 8 hex digits of the key's SHA-256): 1 for "
              + "the key this node signs with, 0 for the others it accepts; none without "
              + "authentication.", HttpTransport.Stats::clusterKeys)
      .build();

  /** {@link ClusterKeys}' watch of the key file: {@code cluster_key_file} in {@code /v1/stats}. */
  static final StatsTable<ClusterKeys.Stats> CLUSTER_KEY_FILE = StatsTable.<ClusterKeys.Stats>builder()
      .counter("reloads", P + "cluster_key_file_reloads_total",
          "Changed keys read from --cluster-key-file and put in use.", ClusterKeys.Stats::reloads)
      .counter("reload_failures", P + "cluster_key_file_reload_failures_total",
          "Checks of --cluster-key-file that left the keys unchanged because the file could not "
              + "be read or its keys were refused or could not be set up (logged once per "
              + "distinct problem).",
          ClusterKeys.Stats::reloadFailures)
      .build();

  /**
   * {@link TlsFiles} of the peer port: {@code tls} in {@code /v1/stats} (only with
   * {@code --tls-keystore}).
   */
  static final StatsTable<TlsFiles.Stats> PEER_TLS = tlsFiles(P + "tls_", "TLS files", "peer port",
      ", or its certificate does not name this node's id (--tls-bind-node-ids)");

  /**
   * {@link TlsFiles} of the client port: {@code client_tls} in {@code /v1/stats} (only with
   * {@code --client-tls-keystore}).
   */
  static final StatsTable<TlsFiles.Stats> CLIENT_TLS =
      tlsFiles(P + "client_tls_", "client TLS files", "client port", "");

  /**
   * The table of one port's {@link TlsFiles}, its families named {@code prefix...};
   * {@code refusedAlso}: the other reasons a re-read can be refused, as a clause after "a file
   * could not be read, loaded or set up", or empty.
   */
  private static StatsTable<TlsFiles.Stats> tlsFiles(String prefix, String files, String port,
      String refusedAlso) {
    return StatsTable.<TlsFiles.Stats>builder()
        .counter("reloads", prefix + "reloads_total",
            "Changed " + files + " read and put in use.", TlsFiles.Stats::reloads)
        .counter("reload_failures", prefix + "reload_failures_total",
            "Checks of the " + files + " that left them unchanged in use because a file could "
                + "not be read, loaded or set up" + refusedAlso + " (logged once per distinct "
                + "problem).",
            TlsFiles.Stats::reloadFailures)
        .gauge("certificate_not_after_seconds", prefix + "certificate_not_after_seconds",
            "When the certificate this node presents on its " + port + " expires, in seconds "
                + "since the epoch (the earliest, if its keystore holds several key entries).",
            TlsFiles.Stats::certificateNotAfterSeconds)
        .build();
  }

  private static final String E = P + "engine_";

  /** {@link ReferenceEngine#stats()}: {@code engine} in {@code /v1/stats}. */
  static final StatsTable<ReferenceEngine.Stats> REFERENCE_ENGINE =
      StatsTable.<ReferenceEngine.Stats>builder()
          .counter("requests", E + "requests_total",
              "Requests the reference engine completed.", ReferenceEngine.Stats::requests)
          .counter("prompt_tokens", E + "prompt_tokens_total",
              "Prompt tokens of those requests.", ReferenceEngine.Stats::promptTokens)
          .counter("cached_prompt_tokens", E + "cached_prompt_tokens_total",
              "Of those, tokens whose keys and values came from the prefix cache.",
              ReferenceEngine.Stats::cachedPromptTokens)
          .counter("evaluated_positions", E + "evaluated_positions_total",
              "Positions run through the model (prompt and decode).",
              ReferenceEngine.Stats::evaluatedPositions)
          .counter("multiply_adds", E + "multiply_adds_total",
              "Multiply-add operations of the forward passes.",
              ReferenceEngine.Stats::multiplyAdds)
          .counter("generated_tokens", E + "generated_tokens_total",
              "Tokens the reference engine generated.", ReferenceEngine.Stats::generatedTokens)
          .gauge("cached_tokens", E + "cached_tokens",
              "Tokens held in the reference engine's prefix cache now.",
              ReferenceEngine.Stats::cachedTokens)
          .counter("blocks_stored", E + "blocks_stored_total",
              "Blocks the reference engine's prefix cache stored.",
              ReferenceEngine.Stats::blocksStored)
          .counter("blocks_evicted", E + "blocks_evicted_total",
              "Blocks the reference engine's prefix cache evicted.",
              ReferenceEngine.Stats::blocksEvicted)
          .build();

  /**
   * {@link OpenAiCompatibleEngine#stats()}: {@code engine} in {@code /v1/stats} (only with an
   * OpenAI-compatible {@code --engine}; the reference engine has {@link #REFERENCE_ENGINE} there).
   */
  static final StatsTable<OpenAiCompatibleEngine.Stats> OPENAI_ENGINE =
      StatsTable.<OpenAiCompatibleEngine.Stats>builder()
          .gauge("in_flight", E + "in_flight_requests",
              "Requests outstanding at the model server now: sent, or being sent, and not ended.",
              OpenAiCompatibleEngine.Stats::inFlight)
          .gauge("max_in_flight", E + "max_in_flight_requests",
              "The most requests outstanding at the model server at once "
                  + "(--engine-max-in-flight).",
              OpenAiCompatibleEngine.Stats::maxInFlight)
          .counter("in_flight_refused", E + "in_flight_refused_total",
              "Requests refused at once, nothing sent, because --engine-max-in-flight requests "
                  + "were outstanding: tried on a peer, else answered 503 (a peer's forward: "
                  + "answered busy); not counted towards --engine-failures.",
              OpenAiCompatibleEngine.Stats::inFlightRefused)
          .gauge("answer_budget_bytes", E + "answer_budget_bytes",
              "The heap the model server's answers being read and parsed may hold at once, in "
                  + "bytes (--engine-answer-budget).",
              OpenAiCompatibleEngine.Stats::answerBudgetBytes)
          .gauge("answer_budget_held_bytes", E + "answer_budget_held_bytes",
              "Heap held by the model server's answers being read and parsed, in bytes: their "
                  + "bodies or event streams, texts, parsed JSON and streamed output, taken from "
                  + "the answer budget (--engine-answer-budget).",
              OpenAiCompatibleEngine.Stats::answerBudgetHeldBytes)
          .counter("answer_budget_refused", E + "answer_budget_refused_total",
              "Requests failed because the answer budget (--engine-answer-budget) could not give "
                  + "what their answer needed while other answers held it: tried on a peer, else "
                  + "answered 503 (a peer's forward: answered busy); not counted towards "
                  + "--engine-failures.",
              OpenAiCompatibleEngine.Stats::answerBudgetRefused)
          .counter("connection_retries", E + "connection_retries_total",
              "Requests and health probes sent a second time, at once, on a new connection, "
                  + "because their first try lost its connection before any answer came (the "
                  + "model server closed a pooled connection as idle as the request was written "
                  + "to it).",
              OpenAiCompatibleEngine.Stats::connectionRetries)
          .build();

  /** {@link PeerMessageStats}: {@code peer_messages} in {@code /v1/stats}. */
  static final StatsTable<PeerMessageStats> PEER_MESSAGES =
      StatsTable.<PeerMessageStats>builder()
          .counter("malformed", P + "peer_messages_malformed_total",
              "Messages from peers (forwarding, streamed output, an unknown type) that did not "
                  + "decode; dropped. Gossip that did not decode is counted in "
                  + "prefix_router_gossip_malformed_messages_total.", PeerMessageStats::malformed)
          .counter("stray_streams", P + "peer_messages_stray_streams_total",
              "Streamed output from peers that belongs to no current forward (late, from "
                  + "another peer, another tag or request); dropped.",
              PeerMessageStats::strayStreams)
          .counter("output_divergences", P + "output_divergences_total",
              "Streamed requests failed because a run's output disagreed with what had "
                  + "already been streamed: an engine that does not decode deterministically.",
              PeerMessageStats::outputDivergences)
          .counter("cancelled_before_arrival", P + "forwards_cancelled_before_arrival_total",
              "Requests forwarded by peers and not run because the peer's CANCEL of them had "
                  + "arrived first (the network reordered them); answered as cancelled.",
              PeerMessageStats::cancelledBeforeArrival)
          .counter("other_model_refused", P + "forwards_other_model_refused_total",
              "Requests forwarded by peers and refused because the peer's model id is not this "
                  + "node's (--model-id); the peer then skips this node.",
              PeerMessageStats::otherModelRefused)
          .build();

  private static final String W = P + "engine_watch_";

  /** {@link EngineStallStats}: {@code engine_watch} in {@code /v1/stats}. */
  static final StatsTable<EngineStallStats> ENGINE_WATCH =
      StatsTable.<EngineStallStats>builder()
          .gauge("avoided", W + "avoided",
              "1 while the node routes around its engine: stalled (no output, no answer and no "
                  + "block stored for "
                  + "--engine-stall-ms) with requests outstanding, or failing with no probe due; "
                  + "else 0.",
              EngineStallStats::avoided)
          .gauge("stalled", W + "stalled",
              "1 from a stall's detection to the engine's next output, answer or block stored; "
                  + "else 0.",
              EngineStallStats::stalled)
          .gauge("outstanding", W + "outstanding_runs",
              "Requests handed to the engine and not ended.", EngineStallStats::outstanding)
          .gauge("silent_seconds", W + "silent_seconds",
              "With requests outstanding, how long since the engine last gave output or an "
                  + "answer or stored a block, in whole seconds; 0 without.", EngineStallStats::silentSeconds)
          .counter("stalls", W + "stalls_total",
              "Stalls of the engine detected.", EngineStallStats::stalls)
          .counter("recoveries", W + "recoveries_total",
              "Stalls ended by the engine's output, answer or block stored.", EngineStallStats::recoveries)
          .counter("reroutes", W + "reroutes_total",
              "Routing decisions that sent a request to a peer because the engine was stalled "
                  + "or failing.",
              EngineStallStats::reroutes)
          .counter("refused_for_peers", W + "refused_for_peers_total",
              "Requests forwarded by peers and refused as busy because the engine was stalled "
                  + "or failing.",
              EngineStallStats::refusedForPeers)
          .gauge("failing", W + "failing",
              "1 from the engine's --engine-failures-th retryable failure in a row (refused "
                  + "connection, error status, at capacity) to its next success; else 0.",
              EngineStallStats::failing)
          .gauge("failed_in_a_row", W + "failed_in_a_row",
              "Retryable failures of the engine since its last success (counted with "
                  + "--engine-failures 0 too).",
              EngineStallStats::failedInARow)
          .counter("failing_spells", W + "failing_spells_total",
              "Times the engine was found failing.", EngineStallStats::failingSpells)
          .counter("cache_losses", W + "cache_losses_total",
              "Times the engine's server went away (its connection refused after it had "
                  + "answered), its cache with it, and the node cleared its self-managed tree "
                  + "and told its peers.",
              EngineStallStats::cacheLosses)
          .counter("load_failures", W + "load_failures_total",
              "Readings of the engine's load that threw or returned nothing; each was read as "
                  + "the last good reading followed by the node's own runs on the engine since.",
              EngineStallStats::loadFailures)
          .build();

  /**
   * {@link EngineKeyWatch.Stats}: {@code engine_key} in {@code /v1/stats} (only with an
   * OpenAI-compatible {@code --engine}).
   */
  static final StatsTable<EngineKeyWatch.Stats> ENGINE_KEY =
      StatsTable.<EngineKeyWatch.Stats>builder()
          .gauge("refused_status", P + "engine_key_refused_status",
              "The status (401 or 403) with which the model server refuses the node's API key, "
                  + "from such a refusal of the start's health check or of a completion to the "
                  + "next answered completion; else 0.",
              EngineKeyWatch.Stats::refusedStatus)
          .build();

  private static final String TK = P + "tokenizer_";

  /**
   * {@link EngineTokenizer.Stats}: {@code tokenizer} in {@code /v1/stats} (only with a tokenizer
   * that asks a {@code POST /tokenize}: {@code --tokenizer auto} next to a model server, or
   * {@code --tokenizer URL}).
   */
  static final StatsTable<EngineTokenizer.Stats> TOKENIZER =
      StatsTable.<EngineTokenizer.Stats>builder()
          .gauge("answer_budget_bytes", TK + "answer_budget_bytes",
              "The heap the tokenizer's answers (POST /tokenize) being read and parsed may hold "
                  + "at once, in bytes (--tokenizer-answer-budget).",
              EngineTokenizer.Stats::answerBudgetBytes)
          .gauge("answer_budget_held_bytes", TK + "answer_budget_held_bytes",
              "Heap held by the tokenizer's answers being read and parsed, in bytes: their "
                  + "bodies, texts and parsed JSON, taken from the answer budget "
                  + "(--tokenizer-answer-budget); the requests refused their share are counted "
                  + "in prefix_router_client_rejected_busy_total.",
              EngineTokenizer.Stats::answerBudgetHeldBytes)
          .counter("connection_retries", TK + "connection_retries_total",
              "Tokenizations (POST /tokenize) sent a second time, at once, on a new connection, "
                  + "because their first try lost its connection before any answer came (the "
                  + "server closed a pooled connection as idle as the request was written to "
                  + "it).",
              EngineTokenizer.Stats::connectionRetries)
          .build();

  private static final String L = P + "tree_";

  /** An engine-driven local tree's {@link CacheEventStats}: {@code local_tree} in /v1/stats. */
  static final StatsTable<CacheEventStats> LOCAL_TREE = StatsTable.<CacheEventStats>builder()
      .counter("stored_events", L + "stored_events_total",
          "Well-formed engine store events the local tree received.", CacheEventStats::storedEvents)
      .counter("removed_events", L + "removed_events_total",
          "Engine removal events the local tree received.", CacheEventStats::removedEvents)
      .counter("cleared_events", L + "cleared_events_total",
          "Engine clear events the local tree received.", CacheEventStats::clearedEvents)
      .counter("unknown_parents", L + "unknown_parents_total",
          "Store events dropped because the block they continue is not in the tree.",
          CacheEventStats::unknownParents)
      .counter("unknown_blocks", L + "unknown_blocks_total",
          "Removed block hashes the tree does not hold (already gone, or never seen).",
          CacheEventStats::unknownBlocks)
      .counter("malformed_events", L + "malformed_events_total",
          "Engine events dropped for their shape (null arrays or scope, a reserved hash, a "
              + "token count other than blocks times the block size).",
          CacheEventStats::malformedEvents)
      .counter("duplicate_blocks", L + "duplicate_blocks_total",
          "Stored blocks the tree already held under the same hash: another copy.",
          CacheEventStats::duplicateBlocks)
      .counter("aliased_blocks", L + "aliased_blocks_total",
          "Stored blocks the tree already held under another hash: an alias.",
          CacheEventStats::aliasedBlocks)
      .counter("conflicting_events", L + "conflicting_events_total",
          "Store events dropped because a hash in them names another block.",
          CacheEventStats::conflictingEvents)
      .counter("overflows", L + "mirror_overflows_total",
          "Stores after which the tree exceeded its mirror limit and dropped blocks: the "
              + "engine's removals are not all arriving.", CacheEventStats::overflows)
      .counter("overflow_blocks", L + "mirror_overflow_blocks_total",
          "Blocks dropped over the mirror limit, least recently stored first, and reported "
              + "evicted to peers.", CacheEventStats::overflowBlocks)
      .build();

  /** The counters of a subscription to vLLM's KV events, subscriber and receiver together. */
  record KvEventStats(VllmKvEventSubscriber.Stats subscriber, VllmKvEventReceiver.Stats receiver) {}

  private static final String K = P + "kv_events_";

  /** {@code kv_events} in {@code /v1/stats}. */
  static final StatsTable<KvEventStats> KV_EVENTS = StatsTable.<KvEventStats>builder()
      .counter("connects", K + "connects_total",
          "Connections to vLLM's KV-event publisher whose handshake completed.",
          s -> s.subscriber().connects())
      .counter("disconnects", K + "disconnects_total",
          "Established connections to the publisher that broke.",
          s -> s.subscriber().disconnects())
      .counter("silence_reconnects", K + "silence_reconnects_total",
          "Connections dropped and made again because no message arrived while the engine "
              + "completed requests that store blocks (also counted in disconnects).",
          s -> s.subscriber().silenceReconnects())
      .counter("connect_failures", K + "connect_failures_total",
          "Connection attempts that failed before the handshake completed.",
          s -> s.subscriber().connectFailures())
      .counter("messages", K + "messages_total",
          "Well-formed messages of the topic received live.", s -> s.subscriber().messages())
      .counter("malformed_messages", K + "malformed_messages_total",
          "Live messages dropped for their shape.", s -> s.subscriber().malformedMessages())
      .counter("other_topic_messages", K + "other_topic_messages_total",
          "Live messages of another topic than the node's, dropped.",
          s -> s.subscriber().otherTopicMessages())
      .counter("replays_requested", K + "replays_requested_total",
          "Replays asked for after a gap in the sequence numbers.",
          s -> s.subscriber().replaysRequested())
      .counter("replayed_messages", K + "replayed_messages_total",
          "Messages received by replay.", s -> s.subscriber().replayedMessages())
      .counter("replay_failures", K + "replay_failures_total",
          "Replays that failed (no connection, timeout, malformed answer).",
          s -> s.subscriber().replayFailures())
      .counter("replays_skipped", K + "replays_skipped_total",
          "Gaps that got no replay because a replay had failed within the replay backoff.",
          s -> s.subscriber().replaysSkipped())
      .counter("batches_applied", K + "batches_applied_total",
          "Event batches decoded and applied, live or replayed.",
          s -> s.receiver().batchesApplied())
      .counter("replayed_batches", K + "replayed_batches_total",
          "Of the batches applied, those received by replay.",
          s -> s.receiver().replayedBatches())
      .counter("stored_events", K + "stored_events_total",
          "BlockStored events applied to the tree.", s -> s.receiver().storedEvents())
      .counter("removed_events", K + "removed_events_total",
          "BlockRemoved events applied to the tree.", s -> s.receiver().removedEvents())
      .counter("cleared_events", K + "cleared_events_total",
          "AllBlocksCleared (and TierBlocksCleared) events applied to the tree.",
          s -> s.receiver().clearedEvents())
      .counter("malformed_batches", K + "malformed_batches_total",
          "Payloads that did not decode; none of their events were applied.",
          s -> s.receiver().malformedBatches())
      .counter("block_size_mismatches", K + "block_size_mismatches_total",
          "BlockStored events of another block size than the node's, skipped.",
          s -> s.receiver().blockSizeMismatches())
      .counter("token_count_mismatches", K + "token_count_mismatches_total",
          "BlockStored events whose token count is not their blocks times the block size, "
              + "skipped.", s -> s.receiver().tokenCountMismatches())
      .counter("unattributed_stores", K + "unattributed_stores_total",
          "BlockStored events starting a chain of a LoRA adapter that cannot be named, skipped.",
          s -> s.receiver().unattributedStores())
      .counter("unmirrored_removals", K + "unmirrored_removals_total",
          "BlockRemoved (and TierBlocksCleared) events of a storage tier the tree does not mirror "
              + "(vLLM's CPU offload), or of a KV-cache group naming no block that group stored, "
              + "not applied.", s -> s.receiver().unmirroredRemovals())
      .counter("other_group_events", K + "other_group_events_total",
          "Events of a KV-cache group whose blocks do not hold the whole prefix (sliding "
              + "window, chunked local attention, Mamba), skipped.",
          s -> s.receiver().otherGroupEvents())
      .counter("tracking_overflows", K + "tracking_overflows_total",
          "Times the block copies counted for KV-cache groups exceeded their bound and the "
              + "mirror was cleared.", s -> s.receiver().trackingOverflows())
      .counter("reannounced_blocks", K + "reannounced_blocks_total",
          "Blocks a KV-cache group announced again from a prompt's first block on (vLLM's full "
              + "report mode), held already: not taken as more copies.",
          s -> s.receiver().reannouncedBlocks())
      .counter("gaps", K + "gaps_total",
          "Messages whose sequence number was above the one expected (messages lost).",
          s -> s.receiver().gaps())
      .counter("restarts", K + "restarts_total",
          "Live messages whose sequence number was below the one expected (the publisher "
              + "restarted).", s -> s.receiver().restarts())
      .counter("duplicates_ignored", K + "duplicates_ignored_total",
          "Replayed messages already applied, ignored.",
          s -> s.receiver().duplicatesIgnored())
      .counter("resets", K + "resets_total",
          "Resets of the receiver.", s -> s.receiver().resets())
      .counter("ignored_events", K + "ignored_events_total",
          "Events with a tag this version does not know (a newer vLLM's), skipped.",
          s -> s.receiver().ignoredEvents())
      .counter("empty_events", K + "empty_events_total",
          "BlockStored and BlockRemoved events naming no block, skipped (those of a skipped "
              + "KV-cache group count in other_group_events).",
          s -> s.receiver().emptyEvents())
      .counter("listener_failures", K + "listener_failures_total",
          "Calls of the tree's cache event listener that threw, logged and passed over.",
          s -> s.receiver().listenerFailures())
      .counter("sink_failures", K + "sink_failures_total",
          "Calls into the receiver that threw (an exception or an Error, such as running out "
              + "of heap on a large batch), logged and passed over; a message lost that way "
              + "shows as a gap, which clears the tree.",
          s -> s.subscriber().sinkFailures())
      .build();

  /** The client endpoint's own counters. */
  record ClientStats(int inFlight, long rejectedBusy, long rejectedInvalid,
      long rejectedNotFound, long slowConnectionsClosed,
      long readsRefused, int streamsOpen, long streamsCancelled, long tokenizeFailures,
      long tokenizeRefused, long refusedWithoutCertificate, long bodyBudgetHeldBytes,
      long bodyBudgetRefused, long internalErrors) {}

  private static final String C = P + "client_";

  /** {@code client} in {@code /v1/stats}. */
  static final StatsTable<ClientStats> CLIENT = StatsTable.<ClientStats>builder()
      .gauge("in_flight", C + "in_flight_requests",
          "Client requests accepted by the endpoint and not yet answered.",
          ClientStats::inFlight)
      .counter("rejected_busy", C + "rejected_busy_total",
          "Client requests answered 503 because too many were in flight at the endpoint, or "
              + "because the tokenizer's answer could not get its share of the heap the "
              + "tokenizer gives its answers (--tokenizer-answer-budget) while other answers "
              + "held it.",
          ClientStats::rejectedBusy)
      .counter("rejected_invalid", C + "rejected_invalid_total",
          "Client requests the endpoint refused itself as invalid: answered 400 (a body that is "
              + "not JSON or not UTF-8, cannot be read, or has invalid fields; a prompt with no "
              + "tokens, or too many for the node or the model's context) or 413 (a body above "
              + "8 MiB).",
          ClientStats::rejectedInvalid)
      .counter("rejected_not_found", C + "rejected_not_found_total",
          "Client requests answered 404 for a path the endpoint does not serve, or 405 for a "
              + "method their path does not take.", ClientStats::rejectedNotFound)
      .counter("slow_connections_closed", C + "slow_connections_closed_total",
          "Client connections closed for not delivering a request, or not taking its answer, "
              + "within the I/O timeout.", ClientStats::slowConnectionsClosed)
      .counter("reads_refused", C + "reads_refused_total",
          "Client connections refused at once for lack of a reader thread, and requests "
              + "answered 503 for too many unfinished bodies from their address (once none of "
              + "them has finished for 1 s).",
          ClientStats::readsRefused)
      .gauge("streams_open", C + "streams_open",
          "Streamed answers not yet ended: their request running, or their events not yet all "
              + "written.", ClientStats::streamsOpen)
      .counter("streams_cancelled", C + "streams_cancelled_total",
          "Streamed requests cancelled because a write to their client failed: the client went "
              + "away, or was cut off for not reading within the I/O timeout.",
          ClientStats::streamsCancelled)
      .counter("tokenize_failures", C + "tokenize_failures_total",
          "Text prompts and chats of the OpenAI-compatible routes the tokenizer failed to "
              + "tokenize (unreachable, failing, a malformed answer) or did not answer in time; "
              + "answered 502 or 504. Not those whose answer could not get its share of the "
              + "tokenizer's heap (rejected_busy).", ClientStats::tokenizeFailures)
      .counter("tokenize_refused", C + "tokenize_refused_total",
          "Text prompts and chats the tokenizer refused as invalid (a malformed conversation, "
              + "an unknown model); answered 400.", ClientStats::tokenizeRefused)
      .counter("refused_without_certificate", C + "refused_without_certificate_total",
          "Requests answered 401 because their client presented no TLS certificate while the "
              + "client port requires one (--client-tls-truststore; /health excepted).",
          ClientStats::refusedWithoutCertificate)
      .gauge("body_budget_held_bytes", C + "body_budget_held_bytes",
          "Heap held by the client requests, in bytes, taken from the body budget "
              + "(--client-body-budget): the bodies being read, their texts and parsed JSON; "
              + "then each accepted request's prompt (its text and the tokenizer's copies while "
              + "it is tokenized, its token ids while it runs) until it ends.",
          ClientStats::bodyBudgetHeldBytes)
      .counter("body_budget_refused", C + "body_budget_refused_total",
          "Requests answered 503 because the body budget (--client-body-budget) could not give "
              + "what their body or prompt needed while other requests held it.",
          ClientStats::bodyBudgetRefused)
      .counter("internal_errors", C + "internal_errors_total",
          "Client requests answered 500 (or, once their stream had begun, its internal error "
              + "event), or whose connection was closed, for a failure of the endpoint's own: "
              + "something thrown as it handled a request, set its tokenization's timeout, or "
              + "wrote an answer or a stream, or an answer no writer thread could take; and "
              + "streams whose writer could not hand their rest to another writer thread, and "
              + "wrote it on itself, and tokenizations that could not be tracked once their "
              + "tokens had come, their requests answered as those made them (logged, at most "
              + "10 lines a minute).",
          ClientStats::internalErrors)
      .build();

  /**
   * The client endpoint's latency histograms ({@link ClientLatency}): in {@code /metrics} only,
   * each with a series per {@code served} ({@link ClientLatency#SERVED}) and the buckets of
   * {@link LatencyHistogram#BOUNDS_SECONDS}.
   */
  static final StatsTable<ClientLatency.Snapshot> CLIENT_LATENCY =
      StatsTable.<ClientLatency.Snapshot>builder()
      .histogram(C + "request_duration_seconds", "served",
          "Client requests the endpoint accepted (chat, completions, token route; streamed or "
              + "not), from their arrival (headers read) to the end of writing their answer "
              + "(its last byte written, or the write given up), by where they were served: "
              + "local (this node's engine), forwarded (a peer), failed (answered with an "
              + "error, or the stream cut short).", ClientLatency.Snapshot::durations)
      .histogram(C + "time_to_first_output_seconds", "served",
          "Streamed client requests, from their arrival to their first event of output "
              + "written, by where they were served (as for "
              + "prefix_router_client_request_duration_seconds); none for a stream that ended "
              + "before its first event.", ClientLatency.Snapshot::firstOutputs)
      .build();
}
