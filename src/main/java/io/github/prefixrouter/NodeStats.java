package io.github.prefixrouter;

import java.util.EnumMap;
import java.util.Map;
import java.util.Objects;

/**
 * A snapshot of a node's counters (monotonic since start) and gauges (current values).
 * Immutable and thread-safe; {@code nodeId}, {@code state}, {@code fallbacks} and {@code gossip}
 * are never null.
 *
 * @param nodeId the node
 * @param state the node's lifecycle state
 * @param requests requests submitted to this node and accepted
 * @param servedLocally submitted requests answered by this node's engine
 * @param forwarded submitted requests answered by a peer
 * @param failed submitted requests that failed everywhere ({@link RequestFailedException}),
 *     whose answer did not answer them (it contradicted their streamed output, their listener
 *     threw on it, or their response could not be built), that a stop's grace period ended
 *     before their answer ({@link NodeNotRunningException}), or that the caller abandoned
 *     (cancelled their future, or a streaming client that went away)
 * @param coldPlacements requests this node routed whose first decision was a cold-prefix
 *     placement ({@link RouteDecision.Reason#COLD_PLACEMENT}), once each: not the later
 *     decisions of a fallback, nor {@link PrefixRouterNode#explain}
 * @param servedForPeers forwarded requests this node's engine answered for peers, once the
 *     answer was encoded in a RESULT for the peer: not an answer too large for one (the peer
 *     gets a failure and runs the request itself)
 * @param refusedForPeers forwarded requests this node refused because its engine queue was at
 *     its high watermark or above, its engine was busy, stalled or failing, it had no heap to read its
 *     engine's answer, or it was not running (push-back given), each counted once: a FORWARD of a request refused here delivered
 *     again (a duplicate, a replay, a duplicate that joined the refused run) is answered BUSY
 *     without being counted again while the refusal is the latest answer remembered under its
 *     key
 * @param pushedBack forwarding attempts that peers refused as busy (push-back received); not
 *     those this node's own transport refused to send ({@link FallbackCause#IN_FLIGHT_LIMIT})
 * @param fallbacks forwarding attempts that fell back, by cause (under {@code LOCAL_FAILED}:
 *     local runs that failed retryably and were tried on a peer)
 * @param estimatedCachedTokens sum, over forwarded requests answered with a cached-token count,
 *     of the prefix tokens this node estimated the target held
 * @param actualCachedTokens sum, over the same requests, of the cached tokens the target's engine
 *     reported, each request's at most its prompt's tokens (an engine that adds a special token
 *     to the prompt may count it as cached)
 * @param promptTokens prompt tokens of the answered submitted requests
 * @param cachedPromptTokens of those, tokens the serving engines reported as served from cache,
 *     each request's at most its prompt's tokens
 * @param gossipBytesIn gossip bytes received
 * @param gossipBytesOut gossip bytes this node's transport took to send (a one-way send is best
 *     effort: the transport may still drop a message it took, as {@code HttpTransport} does past
 *     its per-peer in-flight limit, counting it in its own {@code messagesDropped})
 * @param localCachedTokens tokens held by the local prefix tree now (prompts sharing a partial
 *     block share its tokens, so this may be less than {@code localBlocks × blockSize})
 * @param localBlocks distinct full blocks this node holds and advertises to its peers
 * @param replicaBlocks block hashes held in peer replicas now
 * @param peersLive peers currently considered alive, suspect ones included
 *     ({@link GossipStats#peersSuspect()})
 * @param inFlight requests this node has taken on and not yet answered: submitted here, or
 *     forwarded here by peers
 * @param gossip the health of the node's gossip layer: rounds, messages dropped and rejected,
 *     peers suspected and declared dead, snapshots, refuted generations, and whether another
 *     process uses this node's id
 */
public record NodeStats(
    String nodeId,
    PrefixRouterNode.State state,
    long requests,
    long servedLocally,
    long forwarded,
    long failed,
    long coldPlacements,
    long servedForPeers,
    long refusedForPeers,
    long pushedBack,
    Map<FallbackCause, Long> fallbacks,
    long estimatedCachedTokens,
    long actualCachedTokens,
    long promptTokens,
    long cachedPromptTokens,
    long gossipBytesIn,
    long gossipBytesOut,
    long localCachedTokens,
    long localBlocks,
    long replicaBlocks,
    int peersLive,
    int inFlight,
    GossipStats gossip) {

  /**
   * Checks the components and copies {@code fallbacks}, with a zero for every missing cause.
   *
   * @param nodeId the node
   * @param state the node's lifecycle state
   * @param requests requests submitted to this node and accepted
   * @param servedLocally submitted requests answered by this node's engine
   * @param forwarded submitted requests answered by a peer
   * @param failed submitted requests that failed everywhere ({@link RequestFailedException}),
   *     that a stop's grace period ended before their answer, or that the caller abandoned
   * @param coldPlacements requests this node routed whose first decision was a cold-prefix
   *     placement
   * @param servedForPeers forwarded requests this node's engine answered for peers
   * @param refusedForPeers forwarded requests this node refused because its engine queue was at
   *     its high watermark or above, its engine was busy, stalled or failing, it had no heap to read its
   *     engine's answer, or it was not running (push-back given), each counted once: a FORWARD of a request refused here delivered
   *     again (a duplicate, a replay, a duplicate that joined the refused run) is answered BUSY
   *     without being counted again while the refusal is the latest answer remembered under its
   *     key
   * @param pushedBack forwarding attempts that peers refused as busy (push-back received); not
   *     those this node's own transport refused to send ({@link FallbackCause#IN_FLIGHT_LIMIT})
   * @param fallbacks forwarding attempts that fell back, by cause (under {@code LOCAL_FAILED}:
   *     local runs that failed retryably and were tried on a peer)
   * @param estimatedCachedTokens sum, over forwarded requests answered with a cached-token count,
   *     of the prefix tokens this node estimated the target held
   * @param actualCachedTokens sum, over the same requests, of the cached tokens the target's engine
   *     reported, each request's at most its prompt's tokens (an engine that adds a special
   *     token to the prompt may count it as cached)
   * @param promptTokens prompt tokens of the answered submitted requests
   * @param cachedPromptTokens of those, tokens the serving engines reported as served from cache,
   *     each request's at most its prompt's tokens
   * @param gossipBytesIn gossip bytes received
   * @param gossipBytesOut gossip bytes this node's transport took to send (a one-way send is
   *     best effort: the transport may still drop a message it took, as {@code HttpTransport}
   *     does past its per-peer in-flight limit, counting it in its own {@code messagesDropped})
   * @param localCachedTokens tokens held by the local prefix tree now (prompts sharing a partial
   *     block share its tokens, so this may be less than {@code localBlocks × blockSize})
   * @param localBlocks distinct full blocks this node holds and advertises to its peers
   * @param replicaBlocks block hashes held in peer replicas now
   * @param peersLive peers currently considered alive, suspect ones included
   * @param inFlight requests this node has taken on and not yet answered: submitted here, or
   *     forwarded here by peers
   * @param gossip the health of the node's gossip layer
   * @throws NullPointerException if {@code nodeId}, {@code state}, {@code fallbacks} or {@code
   *     gossip} is null, or {@code fallbacks} maps a cause to null (the message names which)
   */
  public NodeStats {
    Objects.requireNonNull(nodeId, "nodeId");
    Objects.requireNonNull(state, "state");
    Objects.requireNonNull(fallbacks, "fallbacks");
    Objects.requireNonNull(gossip, "gossip");
    EnumMap<FallbackCause, Long> copy = new EnumMap<>(FallbackCause.class);
    for (FallbackCause c : FallbackCause.values()) {
      if (c != FallbackCause.NONE) {
        copy.put(c, Objects.requireNonNull(fallbacks.getOrDefault(c, 0L), "fallbacks[" + c + "]"));
      }
    }
    fallbacks = java.util.Collections.unmodifiableMap(copy);
  }

  /**
   * Total forwarding attempts that fell back, all causes together (but
   * {@link FallbackCause#LOCAL_FAILED}, which counts local runs).
   *
   * @return the sum of {@code fallbacks} but {@code LOCAL_FAILED}
   */
  public long totalFallbacks() {
    long n = 0;
    for (Map.Entry<FallbackCause, Long> e : fallbacks.entrySet()) {
      if (e.getKey() != FallbackCause.LOCAL_FAILED) {
        n += e.getValue();
      }
    }
    return n;
  }

  /**
   * Cached prompt tokens / prompt tokens of answered requests.
   *
   * @return the hit rate in [0, 1], or 0 if no request was answered
   */
  public double hitRate() {
    return promptTokens == 0 ? 0.0 : (double) cachedPromptTokens / promptTokens;
  }
}
