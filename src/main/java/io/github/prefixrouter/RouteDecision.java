package io.github.prefixrouter;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;

/**
 * Why a request went where it went: every candidate considered (the local node first, then the
 * live peers) with its estimated prefix match, load, round trip and estimated cost, the chosen
 * target and the reason.
 *
 * <p>Decisions are built on the routing hot path from flat arrays, one per column rather than one
 * object per candidate; {@link #candidates()}, {@link #target()} and {@link #toString()} create
 * the per-candidate view when asked, so every decision can be inspected or logged with each
 * candidate's estimated match, load, round trip and cost, and costs nothing until it is.
 *
 * <p>Immutable and thread-safe once built (the arrays it keeps are never modified); no accessor
 * returns null. Hosts read decisions; the library builds them.
 */
public final class RouteDecision {

  /** Why the target was chosen. */
  public enum Reason {
    /** The policy is {@link RoutingPolicy#LOCAL_ONLY}. */
    LOCAL_ONLY_POLICY,
    /**
     * The request has been forwarded as often as the hop limit allows (always, with a hop limit
     * of 0): it must run here.
     */
    HOP_LIMIT,
    /** No live peer is known. */
    NO_PEERS,
    /**
     * Every peer was skipped ({@link SkipReason}: suspected, overloaded, cooling down, already
     * tried, of another model id, or, for a scoped request or one with stops, from before cache
     * scopes or stops).
     */
    ALL_PEERS_SKIPPED,
    /** Local execution has the lowest estimated cost (cost-aware). */
    LOCAL_CHEAPEST,
    /** A peer is cheaper, but not by the forwarding margin (cost-aware). */
    MARGIN_NOT_MET,
    /** A peer beats local execution by more than the margin (cost-aware). */
    PEER_CHEAPER,
    /** No peer holds a longer prefix than the local tree (longest-prefix policy). */
    LOCAL_LONGEST_OR_TIE,
    /** A peer holds the longest estimated prefix (longest-prefix policy). */
    PEER_LONGEST,
    /** Nobody holds any block: placed by bounded-load rendezvous hashing of the first block. */
    COLD_PLACEMENT,
    /**
     * A peer holding the prefix is cheaper for this request, but running it here caches the
     * prefix locally, and the requests this node expects for it before eviction, each spared the
     * forwarding premium, make up for the miss (cost-aware, {@link
     * RouterConfig#localCaching()}).
     */
    LOCAL_CACHING,
    /**
     * The local engine is stalled: it has requests outstanding and has shown no progress for
     * {@link RouterConfig#engineStallTimeout()}. The request goes to the eligible peer the
     * policy ranks first (the cheapest; for longest-prefix, the longest match), whatever local
     * execution would cost.
     */
    LOCAL_ENGINE_STALLED,
    /**
     * The local engine is failing: it failed {@link RouterConfig#engineFailureLimit()} requests
     * in a row retryably with no success between them, and no probe of it is due. The request
     * goes to the eligible peer the policy ranks first, as for {@link #LOCAL_ENGINE_STALLED}.
     * An engine both failing and stalled gives this reason.
     */
    LOCAL_ENGINE_FAILING,
    /**
     * Routing itself failed (the local index, the peer view or the engine's load threw): the
     * request runs here rather than going unanswered. The node logs the failure.
     */
    ROUTING_FAILED
  }

  /** Why a peer was not eligible. */
  public enum SkipReason {
    /** Eligible. */
    NONE,
    /** The peer's heartbeat stopped advancing: it may be down. */
    SUSPECT,
    /** The peer advertises overload (push-back). */
    OVERLOADED,
    /** The peer answered "busy" recently and is cooling down. */
    BUSY_COOLDOWN,
    /**
     * Forwarding to the peer failed recently (timeout, unreachable, a retryable failure of its
     * engine, a malformed answer) and it is cooling down.
     */
    FAILED_COOLDOWN,
    /** The peer was already tried for this request, or sent it here. */
    ALREADY_TRIED,
    /**
     * The request has a cache scope (LoRA adapter or cache salt) and the peer rejected a scoped
     * forward as a message version it does not know: it runs a version from before cache
     * scopes. It still gets requests of the default scope. Remembered until the peer restarts
     * (its gossip generation changes), it leaves the live peers, or five minutes pass.
     */
    NO_SCOPES,
    /**
     * The request has stop strings or stop token ids and the peer rejected a forward that
     * carries them as a message version it does not know: it runs a version from before stops,
     * and would run the request without them. It still gets requests without stops.
     * Remembered as {@link #NO_SCOPES} is.
     */
    NO_STOPS,
    /**
     * The peer refused a forward because its model id ({@code RouterConfig.modelId()}) differs
     * from this node's, or, this node having a model id, rejected a forward that carries it as a
     * message version it does not know (it runs a version from before model ids and might serve
     * another model). It gets no request. Remembered as {@link #NO_SCOPES} is.
     */
    OTHER_MODEL
  }

  /**
   * One candidate.
   *
   * @param nodeId the candidate's node id
   * @param local true for this node
   * @param matchedTokens estimated prefix tokens cached there (exact for the local node)
   * @param effectiveMatchedTokens {@code matchedTokens} discounted by staleness and accuracy
   * @param load advertised queue depth plus in flight (plus work this node sent it since)
   * @param rttNanos smoothed round trip (0 for the local node)
   * @param costNanos estimated latency ({@code Long.MAX_VALUE} when skipped)
   * @param skipped why the candidate was not eligible, or {@link SkipReason#NONE}
   */
  public record Candidate(
      String nodeId,
      boolean local,
      int matchedTokens,
      int effectiveMatchedTokens,
      int load,
      long rttNanos,
      long costNanos,
      SkipReason skipped) {

    /**
     * Checks the components.
     *
     * @param nodeId the candidate's node id
     * @param local true for this node
     * @param matchedTokens estimated prefix tokens cached there (exact for the local node)
     * @param effectiveMatchedTokens {@code matchedTokens} discounted by staleness and accuracy
     * @param load advertised queue depth plus in flight (plus work this node sent it since)
     * @param rttNanos smoothed round trip (0 for the local node)
     * @param costNanos estimated latency ({@code Long.MAX_VALUE} when skipped)
     * @param skipped why the candidate was not eligible, or {@link SkipReason#NONE}
     * @throws NullPointerException if {@code nodeId} or {@code skipped} is null
     */
    public Candidate {
      Objects.requireNonNull(nodeId, "nodeId");
      Objects.requireNonNull(skipped, "skipped");
    }

    @Override
    public String toString() {
      StringBuilder sb = new StringBuilder();
      sb.append(nodeId).append(local ? "(local)" : "").append(" match=").append(matchedTokens);
      if (effectiveMatchedTokens != matchedTokens) {
        sb.append("~").append(effectiveMatchedTokens);
      }
      sb.append(" load=").append(load);
      if (!local) {
        sb.append(" rtt=").append(fmtNanos(rttNanos));
      }
      if (skipped != SkipReason.NONE) {
        sb.append(" skipped=").append(skipped);
      } else {
        // an eligible candidate's cost is always shown, "inf" when it saturated
        sb.append(" cost=").append(fmtNanos(costNanos));
      }
      return sb.toString();
    }
  }

  private final RoutingPolicy policy;
  private final int promptTokens;
  private final String[] ids;
  private final int[] matched;
  private final int[] effective;
  private final int[] load;
  private final long[] rtt;
  private final long[] cost;
  private final SkipReason[] skipped;
  private final int chosen;
  private final Reason reason;
  private volatile List<Candidate> view;

  /**
   * Creates a decision from parallel arrays, index 0 being the local node. The decision keeps the
   * arrays as they are and never modifies them (so several decisions may share an array whose
   * contents are the same for all of them); callers must not modify them afterwards.
   *
   * @param policy the policy that took the decision
   * @param promptTokens the prompt length in tokens
   * @param ids the candidates' node ids
   * @param matched each candidate's estimated cached prefix, in tokens
   * @param effective {@code matched} discounted by staleness and accuracy
   * @param load each candidate's load
   * @param rtt each candidate's smoothed round trip, in nanoseconds (0 for the local node)
   * @param cost each candidate's estimated latency, in nanoseconds ({@code Long.MAX_VALUE} when
   *     skipped)
   * @param skipped why each candidate was not eligible, or {@link SkipReason#NONE}
   * @param chosen the index of the chosen candidate
   * @param reason why it was chosen
   * @throws NullPointerException if an argument, an id or a skip reason is null (the message
   *     names which)
   * @throws IllegalArgumentException if the arrays are empty or of different lengths, or
   *     {@code chosen} is not an index of them
   */
  public RouteDecision(
      RoutingPolicy policy,
      int promptTokens,
      String[] ids,
      int[] matched,
      int[] effective,
      int[] load,
      long[] rtt,
      long[] cost,
      SkipReason[] skipped,
      int chosen,
      Reason reason) {
    this.policy = Objects.requireNonNull(policy, "policy");
    this.reason = Objects.requireNonNull(reason, "reason");
    Objects.requireNonNull(ids, "ids");
    Objects.requireNonNull(matched, "matched");
    Objects.requireNonNull(effective, "effective");
    Objects.requireNonNull(load, "load");
    Objects.requireNonNull(rtt, "rtt");
    Objects.requireNonNull(cost, "cost");
    Objects.requireNonNull(skipped, "skipped");
    int n = ids.length;
    if (n < 1 || matched.length != n || effective.length != n || load.length != n
        || rtt.length != n || cost.length != n || skipped.length != n) {
      throw new IllegalArgumentException("candidate arrays must be non-empty and of equal length");
    }
    if (chosen < 0 || chosen >= n) {
      throw new IllegalArgumentException("chosen index " + chosen + " outside [0, " + n + ")");
    }
    for (int i = 0; i < n; i++) {
      if (ids[i] == null) {
        throw new NullPointerException("ids[" + i + "]");
      }
      if (skipped[i] == null) {
        throw new NullPointerException("skipped[" + i + "]");
      }
    }
    this.promptTokens = promptTokens;
    this.ids = ids;
    this.matched = matched;
    this.effective = effective;
    this.load = load;
    this.rtt = rtt;
    this.cost = cost;
    this.skipped = skipped;
    this.chosen = chosen;
  }

  /**
   * The policy that took the decision.
   *
   * @return the policy
   */
  public RoutingPolicy policy() {
    return policy;
  }

  /**
   * The prompt length in tokens.
   *
   * @return the number of prompt tokens
   */
  public int promptTokens() {
    return promptTokens;
  }

  /**
   * Every candidate, the local node first.
   *
   * @return an unmodifiable list of the candidates, built on the first call
   */
  public List<Candidate> candidates() {
    List<Candidate> v = view;
    if (v == null) {
      List<Candidate> list = new ArrayList<>(ids.length);
      for (int i = 0; i < ids.length; i++) {
        list.add(candidate(i));
      }
      v = Collections.unmodifiableList(list);
      view = v;
    }
    return v;
  }

  /**
   * Number of candidates, including the local node.
   *
   * @return the number of candidates, at least 1
   */
  public int candidateCount() {
    return ids.length;
  }

  /**
   * The chosen candidate.
   *
   * @return the chosen candidate
   */
  public Candidate target() {
    return candidate(chosen);
  }

  /**
   * The chosen node's id.
   *
   * @return the chosen node's id
   */
  public String targetNodeId() {
    return ids[chosen];
  }

  /**
   * Whether the request runs on this node.
   *
   * @return true if the chosen candidate is the local node
   */
  public boolean isLocal() {
    return chosen == 0;
  }

  /**
   * Why the target was chosen.
   *
   * @return the reason
   */
  public Reason reason() {
    return reason;
  }

  private Candidate candidate(int i) {
    return new Candidate(ids[i], i == 0, matched[i], effective[i], load[i], rtt[i], cost[i],
        skipped[i]);
  }

  @Override
  public String toString() {
    StringBuilder sb = new StringBuilder(64 + 48 * ids.length);
    sb.append("RouteDecision{").append(policy).append(", prompt=").append(promptTokens)
        .append(" tokens -> ").append(ids[chosen]).append(" (").append(reason).append("); ");
    for (int i = 0; i < ids.length; i++) {
      if (i > 0) {
        sb.append(" | ");
      }
      sb.append(candidate(i));
    }
    return sb.append('}').toString();
  }

  static String fmtNanos(long nanos) {
    if (nanos == Long.MAX_VALUE) {
      return "inf";
    }
    if (nanos < 10_000L) {
      return nanos + "ns";
    }
    if (nanos < 10_000_000L) {
      return (nanos / 1_000L) + "us";
    }
    return (nanos / 1_000_000L) + "ms";
  }
}
