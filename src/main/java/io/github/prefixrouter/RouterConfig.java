package io.github.prefixrouter;

import io.github.prefixrouter.internal.ModelIds;
import io.github.prefixrouter.internal.gossip.GossipConfig;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Immutable configuration of a {@link PrefixRouterNode}. Build with {@link #builder()}; every
 * setting has a default suited to a small GPU fleet, documented on its builder method.
 *
 * <p>{@link Builder#build()} calls {@link #validate()}, which rejects an inconsistent
 * configuration with an {@link IllegalArgumentException} listing every problem and how to fix it.
 * Every duration setting is at most 365 days.
 */
public final class RouterConfig {

  /** How the local prefix tree learns what the engine holds. */
  public enum TreeMode {
    /** Engine-driven when the engine publishes cache events, else self-managed. The default. */
    AUTO,
    /** Mirror the engine's cache events exactly (the engine must publish them). */
    ENGINE_DRIVEN,
    /** Record every executed prompt and apply LRU at the configured capacity. */
    SELF_MANAGED
  }

  /** Largest block size accepted, in tokens. */
  public static final int MAX_BLOCK_SIZE = 1024;

  /** Largest hop limit accepted. */
  public static final int MAX_HOP_LIMIT = 8;

  /** Largest {@link #engineFailureLimit()} accepted. */
  public static final int MAX_ENGINE_FAILURE_LIMIT = 1000;

  /**
   * The least mirror limit chosen automatically ({@link #mirrorLimitTokens()}): 2^24 tokens, so
   * that a node next to a large engine cache keeps working with the default
   * {@link #treeCapacityTokens()}.
   */
  public static final long MIN_AUTOMATIC_MIRROR_LIMIT_TOKENS = 1L << 24;

  /** Smallest {@link #gossipMessageBytes()} accepted: 1,024 bytes. */
  public static final int MIN_GOSSIP_MESSAGE_BYTES = GossipConfig.MIN_MESSAGE_BYTE_CAP;

  /** Largest {@link #gossipMessageBytes()} accepted: 16 MiB. */
  public static final int MAX_GOSSIP_MESSAGE_BYTES = GossipConfig.MAX_MESSAGE_BYTE_CAP;

  /** Longest {@link #streamInterval()} accepted. */
  private static final Duration MAX_STREAM_INTERVAL = Duration.ofSeconds(10);

  /** Longest duration any setting accepts (they are used in nanoseconds). */
  private static final Duration MAX_DURATION = Duration.ofDays(365);

  private final int blockSize;
  private final long treeCapacityTokens;
  private final long mirrorLimitTokens;
  private final TreeMode treeMode;
  private final long hashSalt;
  private final RoutingPolicy policy;
  private final double forwardMarginRatio;
  private final Duration forwardMarginMin;
  private final long initialPrefillNanosPerToken;
  private final Duration forwardOverhead;
  private final Duration forwardTimeoutMin;
  private final Duration forwardTimeoutMax;
  private final Duration engineTimeout;
  private final Duration engineStallTimeout;
  private final int engineFailureLimit;
  private final int hopLimit;
  private final int highWatermark;
  private final int lowWatermark;
  private final Duration busyCooldown;
  private final Duration streamInterval;
  private final Duration failureCooldown;
  private final boolean coldPlacement;
  private final double coldPlacementLoadBound;
  private final double coldPlacementSlack;
  private final boolean localCaching;
  private final Duration stalenessHalfLife;
  private final Duration distrustHalfLife;
  private final Duration gossipInterval;
  private final int gossipFanout;
  private final Duration peerSuspectAfter;
  private final Duration peerDeadAfter;
  private final int maxPeers;
  private final int gossipMessageBytes;
  private final long gossipGeneration;
  private final String modelId;

  private RouterConfig(Builder b) {
    blockSize = b.blockSize;
    treeCapacityTokens = b.treeCapacityTokens;
    mirrorLimitTokens = b.mirrorLimitTokens;
    treeMode = b.treeMode;
    hashSalt = b.hashSalt;
    policy = b.policy;
    forwardMarginRatio = b.forwardMarginRatio;
    forwardMarginMin = b.forwardMarginMin;
    initialPrefillNanosPerToken = b.initialPrefillNanosPerToken;
    forwardOverhead = b.forwardOverhead;
    forwardTimeoutMin = b.forwardTimeoutMin;
    forwardTimeoutMax = b.forwardTimeoutMax;
    engineTimeout = b.engineTimeout;
    engineStallTimeout = b.engineStallTimeout;
    engineFailureLimit = b.engineFailureLimit;
    hopLimit = b.hopLimit;
    highWatermark = b.highWatermark;
    lowWatermark = b.lowWatermark;
    busyCooldown = b.busyCooldown;
    streamInterval = b.streamInterval;
    failureCooldown = b.failureCooldown;
    coldPlacement = b.coldPlacement;
    coldPlacementLoadBound = b.coldPlacementLoadBound;
    coldPlacementSlack = b.coldPlacementSlack;
    localCaching = b.localCaching;
    stalenessHalfLife = b.stalenessHalfLife;
    distrustHalfLife = b.distrustHalfLife;
    gossipInterval = b.gossipInterval;
    gossipFanout = b.gossipFanout;
    peerSuspectAfter = b.peerSuspectAfter;
    peerDeadAfter = b.peerDeadAfter;
    maxPeers = b.maxPeers;
    gossipMessageBytes = b.gossipMessageBytes;
    gossipGeneration = b.gossipGeneration;
    modelId = b.modelId;
  }

  /**
   * A builder with every default.
   *
   * @return a new builder with the defaults
   */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * The default configuration.
   *
   * @return the default configuration
   */
  public static RouterConfig defaults() {
    return builder().build();
  }

  /**
   * A builder initialised with this configuration's values.
   *
   * @return a new builder holding this configuration's values
   */
  public Builder toBuilder() {
    return new Builder(this);
  }

  /**
   * Checks the configuration as a whole.
   *
   * @return this
   * @throws IllegalArgumentException listing every problem found, each with how to fix it
   */
  public RouterConfig validate() {
    List<String> p = new ArrayList<>();
    if (blockSize < 1 || blockSize > MAX_BLOCK_SIZE) {
      p.add("blockSize must be between 1 and " + MAX_BLOCK_SIZE + " tokens (engines use 16 or 32)"
          + ", was " + blockSize);
    }
    if (treeCapacityTokens < blockSize) {
      p.add("treeCapacityTokens must be at least blockSize (" + blockSize + "); set it to the "
          + "engine's KV-cache size in tokens, was " + treeCapacityTokens);
    }
    if (mirrorLimitTokens < 0
        || (mirrorLimitTokens > 0 && mirrorLimitTokens < treeCapacityTokens)) {
      p.add("mirrorLimitTokens must be 0 (automatic: 4 x treeCapacityTokens, at least "
          + MIN_AUTOMATIC_MIRROR_LIMIT_TOKENS + ") or at least treeCapacityTokens ("
          + treeCapacityTokens + "): a mirror limit below the engine's cache would drop blocks "
          + "the engine holds, was " + mirrorLimitTokens);
    }
    if (!(forwardMarginRatio >= 0.0 && forwardMarginRatio < 1.0)) {
      p.add("forwardMarginRatio must be in [0, 1) (0.05 = forward when 5% faster), was "
          + forwardMarginRatio);
    }
    nonNegative(p, "forwardMarginMin", forwardMarginMin);
    if (initialPrefillNanosPerToken < 1 || initialPrefillNanosPerToken > 1_000_000_000L) {
      p.add("initialPrefillNanosPerToken must be between 1 ns and 1 s, was "
          + initialPrefillNanosPerToken);
    }
    nonNegative(p, "forwardOverhead", forwardOverhead);
    positive(p, "forwardTimeoutMin", forwardTimeoutMin);
    positive(p, "forwardTimeoutMax", forwardTimeoutMax);
    if (forwardTimeoutMin.compareTo(forwardTimeoutMax) > 0) {
      p.add("forwardTimeoutMin (" + forwardTimeoutMin + ") must not exceed forwardTimeoutMax ("
          + forwardTimeoutMax + "): raise the maximum or lower the minimum");
    }
    positive(p, "engineTimeout", engineTimeout);
    nonNegative(p, "engineStallTimeout", engineStallTimeout);
    if (engineFailureLimit < 0 || engineFailureLimit > MAX_ENGINE_FAILURE_LIMIT) {
      p.add("engineFailureLimit must be between 0 (never avoid a failing engine) and "
          + MAX_ENGINE_FAILURE_LIMIT + ", was " + engineFailureLimit);
    }
    if (hopLimit < 0 || hopLimit > MAX_HOP_LIMIT) {
      p.add("hopLimit must be between 0 (never forward) and " + MAX_HOP_LIMIT + ", was "
          + hopLimit);
    }
    if (lowWatermark < 0) {
      p.add("lowWatermark must be >= 0, was " + lowWatermark);
    }
    if (highWatermark < 1) {
      p.add("highWatermark must be >= 1 (engine queue depth at which forwarded work is refused)"
          + ", was " + highWatermark);
    }
    if (lowWatermark >= highWatermark) {
      p.add("lowWatermark (" + lowWatermark + ") must be below highWatermark (" + highWatermark
          + ") so the overload flag has hysteresis");
    }
    positive(p, "busyCooldown", busyCooldown);
    nonNegative(p, "streamInterval", streamInterval);
    if (streamInterval.compareTo(MAX_STREAM_INTERVAL) > 0) {
      p.add("streamInterval must be at most " + MAX_STREAM_INTERVAL + " (0 sends every piece at"
          + " once; a longer interval would hold streamed output back), was " + streamInterval);
    }
    positive(p, "failureCooldown", failureCooldown);
    if (!(coldPlacementLoadBound >= 1.0 && coldPlacementLoadBound <= 100.0)) {
      p.add("coldPlacementLoadBound must be in [1, 100] (1.25 = at most 25% above the mean "
          + "load), was " + coldPlacementLoadBound);
    }
    if (!(coldPlacementSlack >= 0.0 && coldPlacementSlack <= 10.0)) {
      p.add("coldPlacementSlack must be in [0, 10], was " + coldPlacementSlack);
    }
    positive(p, "stalenessHalfLife", stalenessHalfLife);
    positive(p, "distrustHalfLife", distrustHalfLife);
    positive(p, "gossipInterval", gossipInterval);
    // rounds follow one another at the interval whatever they cost: rounds of a nanosecond
    // kept the node's scheduler busy with nothing but rounds
    if (gossipInterval.compareTo(Duration.ZERO) > 0
        && gossipInterval.compareTo(GossipConfig.MIN_INTERVAL) < 0) {
      p.add("gossipInterval must be at least 1 ms, was " + gossipInterval);
    }
    if (gossipFanout < 1 || gossipFanout > 64) {
      p.add("gossipFanout must be between 1 and 64, was " + gossipFanout);
    }
    positive(p, "peerSuspectAfter", peerSuspectAfter);
    positive(p, "peerDeadAfter", peerDeadAfter);
    // a healthy peer's rounds, each sending its heartbeat, come up to 1.1 intervals apart
    // (jittered by 10%; 1.5 at the most jitter gossip takes): a suspicion time a late round
    // can pass suspects healthy peers at random. Twice the interval is never passed by jitter
    // alone and leaves 0.9 of an interval for the one-way delay to vary (halved: no overflow)
    if (peerSuspectAfter.dividedBy(2).compareTo(gossipInterval) < 0) {
      p.add("peerSuspectAfter (" + peerSuspectAfter + ") must be at least twice gossipInterval ("
          + gossipInterval + "), or healthy peers are suspected whenever a jittered round "
          + "comes late");
    }
    if (peerDeadAfter.compareTo(peerSuspectAfter) <= 0) {
      p.add("peerDeadAfter (" + peerDeadAfter + ") must exceed peerSuspectAfter ("
          + peerSuspectAfter + ")");
    }
    if (maxPeers < 1 || maxPeers > 65_536) {
      p.add("maxPeers must be between 1 and 65536 (peers beyond it are not tracked), was "
          + maxPeers);
    }
    if (gossipMessageBytes < MIN_GOSSIP_MESSAGE_BYTES
        || gossipMessageBytes > MAX_GOSSIP_MESSAGE_BYTES) {
      p.add("gossipMessageBytes must be between " + MIN_GOSSIP_MESSAGE_BYTES + " and "
          + MAX_GOSSIP_MESSAGE_BYTES + " bytes (the largest gossip message this node sends), was "
          + gossipMessageBytes);
    }
    String modelIdProblem = ModelIds.problem(modelId);
    if (modelIdProblem != null) {
      p.add(modelIdProblem);
    }
    if (gossipGeneration < 0 || gossipGeneration > (1L << 62)) {
      p.add("gossipGeneration must be in 1..2^62, or 0 to take it from the node's clock, was "
          + gossipGeneration);
    }
    // every duration is used in nanoseconds and added to clock readings: keep it far from
    // the 292-year overflow of Duration.toNanos()
    atMostMax(p, "forwardMarginMin", forwardMarginMin);
    atMostMax(p, "forwardOverhead", forwardOverhead);
    atMostMax(p, "forwardTimeoutMin", forwardTimeoutMin);
    atMostMax(p, "forwardTimeoutMax", forwardTimeoutMax);
    atMostMax(p, "engineTimeout", engineTimeout);
    atMostMax(p, "engineStallTimeout", engineStallTimeout);
    atMostMax(p, "busyCooldown", busyCooldown);
    atMostMax(p, "failureCooldown", failureCooldown);
    atMostMax(p, "stalenessHalfLife", stalenessHalfLife);
    atMostMax(p, "distrustHalfLife", distrustHalfLife);
    atMostMax(p, "gossipInterval", gossipInterval);
    atMostMax(p, "peerSuspectAfter", peerSuspectAfter);
    atMostMax(p, "peerDeadAfter", peerDeadAfter);
    if (!p.isEmpty()) {
      throw new IllegalArgumentException("invalid RouterConfig: " + String.join("; ", p));
    }
    return this;
  }

  private static void positive(List<String> p, String name, Duration d) {
    if (d.isNegative() || d.isZero()) {
      p.add(name + " must be positive, was " + d);
    }
  }

  private static void atMostMax(List<String> p, String name, Duration d) {
    if (d.compareTo(MAX_DURATION) > 0) {
      p.add(name + " must be at most " + MAX_DURATION.toDays() + " days, was " + d);
    }
  }

  private static void nonNegative(List<String> p, String name, Duration d) {
    if (d.isNegative()) {
      p.add(name + " must be >= 0, was " + d);
    }
  }

  /**
   * Tokens per block; peers only ever see chained hashes of full blocks. Default 16.
   *
   * @return tokens per block
   */
  public int blockSize() {
    return blockSize;
  }

  /**
   * The engine's prefix-cache capacity in tokens. Default 1,048,576. A self-managed tree evicts
   * LRU at it; in every tree mode, engine-driven included, it is also the basis of the estimate
   * of how long a new prefix stays cached (this capacity over the rate at which the node inserts
   * new tokens), which local caching uses. Set it to the engine's KV capacity in tokens.
   *
   * @return capacity of the local tree in tokens
   */
  public long treeCapacityTokens() {
    return treeCapacityTokens;
  }

  /**
   * The most tokens an engine-driven local tree holds. The engine's cache cannot outgrow its KV
   * capacity, so a mirror above this limit has missed removals (an engine integration that
   * loses or never sends them); it then drops its least recently stored blocks down to the
   * limit, reports them evicted to its peers and counts them. Unless set, 4 ×
   * {@link #treeCapacityTokens()} and at least {@link #MIN_AUTOMATIC_MIRROR_LIMIT_TOKENS}
   * (16,777,216 with the defaults), far above any cache a correctly configured engine reports.
   * Self-managed trees ignore it (they evict at the capacity).
   *
   * @return the mirror limit in effect, in tokens
   */
  public long mirrorLimitTokens() {
    if (mirrorLimitTokens > 0) {
      return mirrorLimitTokens;
    }
    long four = treeCapacityTokens > Long.MAX_VALUE / 4 ? Long.MAX_VALUE : 4 * treeCapacityTokens;
    return Math.max(four, MIN_AUTOMATIC_MIRROR_LIMIT_TOKENS);
  }

  /**
   * How the local tree is fed. Default {@link TreeMode#AUTO}.
   *
   * @return how the local tree is fed
   */
  public TreeMode treeMode() {
    return treeMode;
  }

  /**
   * Per-cluster salt mixed into block hashes; all nodes of a cluster must agree. Default 0.
   *
   * @return per-cluster salt mixed into block hashes
   */
  public long hashSalt() {
    return hashSalt;
  }

  /**
   * The routing policy. Default {@link RoutingPolicy#COST_AWARE}.
   *
   * @return the routing policy
   */
  public RoutingPolicy policy() {
    return policy;
  }

  /**
   * Relative margin a peer must beat local execution by. Default 0.05.
   *
   * @return relative margin a peer must beat local execution by
   */
  public double forwardMarginRatio() {
    return forwardMarginRatio;
  }

  /**
   * Absolute margin a peer must beat local execution by. Default 500 µs.
   *
   * @return absolute margin a peer must beat local execution by
   */
  public Duration forwardMarginMin() {
    return forwardMarginMin;
  }

  /**
   * Prefill cost per uncached token until the engine's timings refine it. Default 100 µs.
   *
   * @return prefill cost per uncached token until the engine's timings refine it
   */
  public long initialPrefillNanosPerToken() {
    return initialPrefillNanosPerToken;
  }

  /**
   * What a forward costs at least beyond gossip's smoothed round trip to the peer (a FORWARD and
   * its answer carry bodies and go through more of the transport than gossip's exchanges). It
   * is the prior of the per-peer overhead each node learns from its answered forwards, and the
   * floor of it: learning only raises a peer's overhead above this, up to 50 ms (or this, if
   * larger). Default 200 µs. See docs/routing.md, "The decision".
   *
   * @return the least overhead a forward is priced with, beyond the round trip
   */
  public Duration forwardOverhead() {
    return forwardOverhead;
  }

  /**
   * How often at most a node that serves a forwarded request streams its output back to the
   * sender: the first piece goes at once, later ones are gathered into at most one STREAM
   * message per interval, so an engine that streams token by token does not cost a network
   * message per token. Zero sends every piece at once. Default 20 ms; at most 10 s. It delays
   * the pieces after the first by up to this much; it never delays the final answer.
   *
   * @return the streaming interval of forwarded requests
   */
  public Duration streamInterval() {
    return streamInterval;
  }

  /**
   * Lower bound of the adaptive forwarding timeout. Default 1 s.
   *
   * @return lower bound of the adaptive forwarding timeout
   */
  public Duration forwardTimeoutMin() {
    return forwardTimeoutMin;
  }

  /**
   * Upper bound of the adaptive forwarding timeout. Default 60 s. A forward the client listens
   * to (streamed) is timed out only when no piece of its output has come for that timeout, or
   * when its answer has not come within {@link #engineTimeout()} plus twice the round trip:
   * a peer still generating is not given up on mid-stream.
   *
   * @return upper bound of the adaptive forwarding timeout
   */
  public Duration forwardTimeoutMax() {
    return forwardTimeoutMax;
  }

  /**
   * Longest a request may run on the local engine; then the node cancels it there and fails it
   * with {@link RequestFailedException} (its cause an
   * {@link io.github.prefixrouter.spi.EngineTimeoutException}, not tried on a peer), so a
   * stalled engine cannot hold a request forever. Default 10 minutes. Plus twice the round
   * trip, it also bounds how long a streamed forward whose peer keeps sending output is waited
   * for (a peer fails the request itself by then).
   *
   * @return longest a request may run on the local engine
   */
  public Duration engineTimeout() {
    return engineTimeout;
  }

  /**
   * How long the local engine may show no progress while it has requests to run before the
   * node treats it as stalled. Progress is a piece of streamed output or a successful answer of
   * any request, or, for an engine that publishes cache events, a store of new blocks; a
   * failure is none. A stalled engine with requests outstanding is avoided: the node's own
   * requests go to the eligible peer the policy ranks first
   * ({@link RouteDecision.Reason#LOCAL_ENGINE_STALLED}), peers' forwards are refused as busy, and
   * the node advertises overload in its gossip. When every outstanding request has ended, the
   * next one that would run here anyway is tried on the engine; its progress, or any other,
   * ends the stall. While the check is on, every run is given to the engine with an output
   * listener ({@code InferenceEngine.execute(request, listener)}), also one its client did not
   * ask to stream, so that its output shows progress. Default 30 s; zero turns the check off.
   * It must exceed the longest a single request can run without streamed output when nothing
   * else runs (a long prompt, or any answer of an engine that streams nothing): such a request
   * otherwise looks stalled until it answers. See docs/routing.md, "A stalled engine".
   *
   * @return the stall timeout of the local engine, or zero if the check is off
   */
  public Duration engineStallTimeout() {
    return engineStallTimeout;
  }

  /**
   * How many retryable failures of the local engine in a row (unreachable, an error status, at
   * capacity, an answer that cannot be the request's, a failure that is not an
   * {@code EngineException}), with no success between them, make the
   * node avoid it as failing: a stalled engine's treatment ({@link #engineStallTimeout()}), as
   * a server that is down, misconfigured or out of capacity ends every run at once and is never
   * stalled. Its own requests go to the eligible peer the policy ranks first
   * ({@link RouteDecision.Reason#LOCAL_ENGINE_FAILING}), peers' forwards are refused as busy and
   * the node advertises overload in its gossip. With no run outstanding and
   * {@link #failureCooldown()} passed since its last failure, the next request that would run
   * here anyway is tried on the engine (the probe); the first success ends it. A failure that
   * is not retryable (an invalid request, a timeout) does not count. With no eligible peer the
   * requests still run here. Default 3; zero turns the check off. See docs/routing.md, "A
   * failing engine".
   *
   * @return the retryable failures in a row after which the engine is avoided, or zero if the
   *     check is off
   */
  public int engineFailureLimit() {
    return engineFailureLimit;
  }

  /**
   * How many times a request may be forwarded. Default 1: a forwarded request runs there.
   *
   * @return how many times a request may be forwarded
   */
  public int hopLimit() {
    return hopLimit;
  }

  /**
   * Engine queue depth at which (and above which) forwarded work is refused and overload
   * advertised. Default 32.
   *
   * @return engine queue depth from which forwarded work is refused and overload advertised
   */
  public int highWatermark() {
    return highWatermark;
  }

  /**
   * Engine queue depth at which (and below which) the overload flag clears. Default 16.
   *
   * @return engine queue depth at or below which the overload flag clears
   */
  public int lowWatermark() {
    return lowWatermark;
  }

  /**
   * How long a peer that answered "busy" (push-back) is skipped; also how long one is that
   * answered a forward with a malformed, mismatched or unexpected frame, or whose forward the
   * transport failed with a protocol error. Default 1 s.
   *
   * @return how long such a peer is skipped
   */
  public Duration busyCooldown() {
    return busyCooldown;
  }

  /**
   * How long a peer whose forward timed out, was unreachable or failed in its engine (a
   * retryable failure) is skipped; also how long after its last failure a failing local engine
   * is tried again ({@link #engineFailureLimit()}). Default 2 s.
   *
   * @return how long such a peer is skipped
   */
  public Duration failureCooldown() {
    return failureCooldown;
  }

  /**
   * Whether cold prefixes are placed by bounded-load rendezvous hashing. Default true.
   *
   * @return whether cold prefixes are placed by bounded-load rendezvous hashing
   */
  public boolean coldPlacement() {
    return coldPlacement;
  }

  /**
   * Load bound of cold placement, as a multiple of the mean load. Default 1.25.
   *
   * @return load bound of cold placement, as a multiple of the mean load
   */
  public double coldPlacementLoadBound() {
    return coldPlacementLoadBound;
  }

  /**
   * How much slower than local (as a fraction of the local estimate) a cold placement may be
   * under the cost-aware policy; beyond that the request goes where the costs send it (the
   * cheapest peer if it beats local by the forwarding margin, else local). Default 0.25.
   *
   * @return how much slower than local a cold placement may be, as a fraction
   */
  public double coldPlacementSlack() {
    return coldPlacementSlack;
  }

  /**
   * Whether the cost-aware policy counts what caching a prefix locally is worth: a request whose
   * prefix only a peer holds runs here anyway (a miss now) when the requests for that prefix this
   * node expects before its cache would evict it, each saved the forwarding premium, make up for
   * the miss. Off: every request goes where it is cheapest for itself. Default true.
   *
   * @return whether the cost-aware policy counts what caching a prefix locally is worth
   */
  public boolean localCaching() {
    return localCaching;
  }

  /**
   * Age of a peer's summary at which its estimates count half. Default 30 s.
   *
   * @return age of a peer's summary at which its estimates count half
   */
  public Duration stalenessHalfLife() {
    return stalenessHalfLife;
  }

  /**
   * Time since a peer's accuracy was last measured at which the distrust it earned counts half.
   * A peer's estimates are discounted by its accuracy, measured only by the forwards it answers;
   * a peer trusted too little to be forwarded to is not measured again, so its distrust fades
   * instead: its shortfall from full trust halves every half-life, until a forward there
   * measures it again. Default 60 s.
   *
   * @return time since a peer's accuracy was measured at which its distrust counts half
   */
  public Duration distrustHalfLife() {
    return distrustHalfLife;
  }

  /**
   * Anti-entropy round interval (jittered). Default 200 ms; at least 1 ms.
   *
   * @return anti-entropy round interval
   */
  public Duration gossipInterval() {
    return gossipInterval;
  }

  /**
   * Peers contacted per anti-entropy round. Default 3.
   *
   * @return peers contacted per anti-entropy round
   */
  public int gossipFanout() {
    return gossipFanout;
  }

  /**
   * Silence after which a peer is suspected and no longer routed to. Default 2 s.
   *
   * @return silence after which a peer is suspected and no longer routed to
   */
  public Duration peerSuspectAfter() {
    return peerSuspectAfter;
  }

  /**
   * Silence after which a peer is declared dead and its replica dropped. Default 10 s.
   *
   * @return silence after which a peer is declared dead and its replica dropped
   */
  public Duration peerDeadAfter() {
    return peerDeadAfter;
  }

  /**
   * Most peers tracked (replica slots). Default 1,024.
   *
   * @return most peers tracked
   */
  public int maxPeers() {
    return maxPeers;
  }

  /**
   * The largest gossip message this node sends, in bytes. Default 65,536 (64 KiB). See
   * {@link Builder#gossipMessageBytes(int)}.
   *
   * @return the largest gossip message this node sends, in bytes
   */
  public int gossipMessageBytes() {
    return gossipMessageBytes;
  }

  /**
   * This node's gossip generation as supplied by the host, or 0 (the default) to take it from
   * the node's clock at build time. See {@link Builder#gossipGeneration(long)}.
   *
   * @return this node's gossip generation as supplied by the host, or 0
   */
  public long gossipGeneration() {
    return gossipGeneration;
  }

  /** Longest {@link #modelId()}, in UTF-8 bytes. */
  public static final int MAX_MODEL_ID_BYTES = ModelIds.MAX_BYTES;

  /**
   * What this node's engine serves, as far as its answers go: the model, and whatever else makes
   * two engines answer one prompt differently (revision, quantization, tokenizer). A node serves
   * a peer's request only if the peer has the same model id, and a peer refusing a request for
   * that reason is not sent another until it restarts (or 5 minutes pass): nodes of different
   * models that find each other (a cluster key shared between pools, crossed seed lists, a
   * rolling upgrade to a new model) never answer each other's requests. Empty by default, which
   * is a model id like any other: nodes that all leave it empty behave, and speak to each other,
   * exactly as before it existed. See {@link Builder#modelId(String)}.
   *
   * @return this node's model id; empty if none was given
   */
  public String modelId() {
    return modelId;
  }

  @Override
  public String toString() {
    return "RouterConfig{policy=" + policy + ", blockSize=" + blockSize + ", treeCapacityTokens="
        + treeCapacityTokens + ", mirrorLimitTokens=" + mirrorLimitTokens() + ", treeMode="
        + treeMode + ", forwardMargin=" + forwardMarginRatio
        + "/" + forwardMarginMin + ", hopLimit=" + hopLimit + ", watermarks=" + lowWatermark + "/"
        + highWatermark + ", coldPlacement=" + coldPlacement + "(" + coldPlacementLoadBound
        + "), localCaching=" + localCaching + ", gossip=" + gossipInterval + "x" + gossipFanout
        + (modelId.isEmpty() ? "" : ", modelId=" + modelId) + "}";
  }

  /** Builder of {@link RouterConfig}. Setters check nulls; {@link #build()} checks the rest. */
  public static final class Builder {
    private int blockSize = 16;
    private long treeCapacityTokens = 1L << 20;
    private long mirrorLimitTokens;
    private TreeMode treeMode = TreeMode.AUTO;
    private long hashSalt;
    private RoutingPolicy policy = RoutingPolicy.COST_AWARE;
    private double forwardMarginRatio = 0.05;
    private Duration forwardMarginMin = Duration.ofNanos(500_000);
    private long initialPrefillNanosPerToken = 100_000;
    private Duration forwardOverhead = Duration.ofNanos(200_000);
    private Duration forwardTimeoutMin = Duration.ofSeconds(1);
    private Duration forwardTimeoutMax = Duration.ofSeconds(60);
    private Duration engineTimeout = Duration.ofMinutes(10);
    private Duration engineStallTimeout = Duration.ofSeconds(30);
    private int engineFailureLimit = 3;
    private int hopLimit = 1;
    private int highWatermark = 32;
    private int lowWatermark = 16;
    private Duration busyCooldown = Duration.ofSeconds(1);
    private Duration streamInterval = Duration.ofMillis(20);
    private Duration failureCooldown = Duration.ofSeconds(2);
    private boolean coldPlacement = true;
    private double coldPlacementLoadBound = 1.25;
    private double coldPlacementSlack = 0.25;
    private boolean localCaching = true;
    private Duration stalenessHalfLife = Duration.ofSeconds(30);
    private Duration distrustHalfLife = Duration.ofSeconds(60);
    private Duration gossipInterval = Duration.ofMillis(200);
    private int gossipFanout = 3;
    private Duration peerSuspectAfter = Duration.ofSeconds(2);
    private Duration peerDeadAfter = Duration.ofSeconds(10);
    private int maxPeers = 1024;
    private int gossipMessageBytes = 65_536;
    private long gossipGeneration;
    private String modelId = "";

    private Builder() {}

    private Builder(RouterConfig c) {
      blockSize = c.blockSize;
      treeCapacityTokens = c.treeCapacityTokens;
      mirrorLimitTokens = c.mirrorLimitTokens;
      treeMode = c.treeMode;
      hashSalt = c.hashSalt;
      policy = c.policy;
      forwardMarginRatio = c.forwardMarginRatio;
      forwardMarginMin = c.forwardMarginMin;
      initialPrefillNanosPerToken = c.initialPrefillNanosPerToken;
      forwardOverhead = c.forwardOverhead;
      forwardTimeoutMin = c.forwardTimeoutMin;
      forwardTimeoutMax = c.forwardTimeoutMax;
      engineTimeout = c.engineTimeout;
      engineStallTimeout = c.engineStallTimeout;
      engineFailureLimit = c.engineFailureLimit;
      hopLimit = c.hopLimit;
      highWatermark = c.highWatermark;
      lowWatermark = c.lowWatermark;
      busyCooldown = c.busyCooldown;
      streamInterval = c.streamInterval;
      failureCooldown = c.failureCooldown;
      coldPlacement = c.coldPlacement;
      coldPlacementLoadBound = c.coldPlacementLoadBound;
      coldPlacementSlack = c.coldPlacementSlack;
      localCaching = c.localCaching;
      stalenessHalfLife = c.stalenessHalfLife;
      distrustHalfLife = c.distrustHalfLife;
      gossipInterval = c.gossipInterval;
      gossipFanout = c.gossipFanout;
      peerSuspectAfter = c.peerSuspectAfter;
      peerDeadAfter = c.peerDeadAfter;
      maxPeers = c.maxPeers;
      gossipMessageBytes = c.gossipMessageBytes;
      gossipGeneration = c.gossipGeneration;
      modelId = c.modelId;
    }

    /**
     * Tokens per block (default 16); must equal the engine's KV block size in engine-driven
     * mode. A mismatch leaves the local tree empty, each store of the engine dropped and counted
     * in {@link CacheEventStats#malformedEvents()}, and is logged at ERROR, naming both sizes
     * (the 1st, 2nd, 4th, 8th... such store).
     *
     * @param tokens tokens per block, 1 to {@link #MAX_BLOCK_SIZE}
     * @return this builder
     */
    public Builder blockSize(int tokens) {
      this.blockSize = tokens;
      return this;
    }

    /**
     * The engine's prefix-cache capacity in tokens (default 2^20): a self-managed tree's LRU
     * capacity, and in every tree mode the basis of the estimate of how long a new prefix stays
     * cached, which local caching uses ({@link RouterConfig#treeCapacityTokens()}). Set it to
     * the engine's KV capacity in tokens (vLLM logs it at start as
     * {@code GPU KV cache size: N tokens}).
     *
     * @param tokens the capacity, at least the block size
     * @return this builder
     */
    public Builder treeCapacityTokens(long tokens) {
      this.treeCapacityTokens = tokens;
      return this;
    }

    /**
     * The most tokens an engine-driven local tree holds before it drops its least recently
     * stored blocks (default 0: automatic, 4 × the tree capacity and at least
     * {@link RouterConfig#MIN_AUTOMATIC_MIRROR_LIMIT_TOKENS}); see
     * {@link RouterConfig#mirrorLimitTokens()}.
     *
     * @param tokens the limit, 0 (automatic) or at least the tree capacity
     * @return this builder
     */
    public Builder mirrorLimitTokens(long tokens) {
      this.mirrorLimitTokens = tokens;
      return this;
    }

    /**
     * How the local tree is fed (default {@link TreeMode#AUTO}).
     *
     * @param mode the mode
     * @return this builder
     */
    public Builder treeMode(TreeMode mode) {
      this.treeMode = Objects.requireNonNull(mode, "treeMode");
      return this;
    }

    /**
     * Per-cluster hash salt (default 0).
     *
     * @param salt the salt, the same on every node of the cluster
     * @return this builder
     */
    public Builder hashSalt(long salt) {
      this.hashSalt = salt;
      return this;
    }

    /**
     * Routing policy (default {@link RoutingPolicy#COST_AWARE}).
     *
     * @param policy the policy
     * @return this builder
     */
    public Builder policy(RoutingPolicy policy) {
      this.policy = Objects.requireNonNull(policy, "policy");
      return this;
    }

    /**
     * Forward only when the best peer's estimate is below local's by both {@code ratio} of the
     * local estimate and {@code min} (defaults 0.05 and 500 µs).
     *
     * @param ratio the relative margin, in [0, 1)
     * @param min the absolute margin, {@code >= 0}
     * @return this builder
     */
    public Builder forwardMargin(double ratio, Duration min) {
      this.forwardMarginRatio = ratio;
      this.forwardMarginMin = Objects.requireNonNull(min, "min");
      return this;
    }

    /**
     * Initial prefill cost per uncached token, before the engine's timings (or, for an engine
     * that reports none, the node's timing of its runs) refine it. The
     * forwarding timeout does not rely on it for a prompt longer than any the node has seen
     * run: that forward waits at least {@code forwardTimeoutMax} (docs/routing.md, "Forwarding
     * timeout").
     *
     * @param nanos nanoseconds per token, 1 to 10^9
     * @return this builder
     */
    public Builder initialPrefillNanosPerToken(long nanos) {
      this.initialPrefillNanosPerToken = nanos;
      return this;
    }

    /**
     * The least a forward is priced with beyond gossip's round trip (default 200 µs): the prior
     * and floor of the per-peer overhead learned from answered forwards; see
     * {@link RouterConfig#forwardOverhead()}.
     *
     * @param overhead the overhead, {@code >= 0}
     * @return this builder
     */
    public Builder forwardOverhead(Duration overhead) {
      this.forwardOverhead = Objects.requireNonNull(overhead, "forwardOverhead");
      return this;
    }

    /**
     * How often at most a forwarded request's output is streamed back to its sender (default
     * 20 ms; 0 sends every piece at once); see {@link RouterConfig#streamInterval()}.
     *
     * @param interval the interval, in [0, 10 s]
     * @return this builder
     */
    public Builder streamInterval(Duration interval) {
      this.streamInterval = Objects.requireNonNull(interval, "streamInterval");
      return this;
    }

    /**
     * Bounds of the adaptive forwarding timeout (defaults 1 s and 60 s).
     *
     * @param min the lower bound, positive
     * @param max the upper bound, at least {@code min}
     * @return this builder
     */
    public Builder forwardTimeout(Duration min, Duration max) {
      this.forwardTimeoutMin = Objects.requireNonNull(min, "min");
      this.forwardTimeoutMax = Objects.requireNonNull(max, "max");
      return this;
    }

    /**
     * Longest a request may run on the local engine before it fails (default 10 min).
     *
     * @param timeout the timeout, positive
     * @return this builder
     */
    public Builder engineTimeout(Duration timeout) {
      this.engineTimeout = Objects.requireNonNull(timeout, "engineTimeout");
      return this;
    }

    /**
     * How long the local engine may show no progress while it has requests to run before the
     * node avoids it (default 30 s); see {@link RouterConfig#engineStallTimeout()}.
     *
     * @param timeout the stall timeout, zero to turn the check off
     * @return this builder
     */
    public Builder engineStallTimeout(Duration timeout) {
      this.engineStallTimeout = Objects.requireNonNull(timeout, "engineStallTimeout");
      return this;
    }

    /**
     * How many retryable failures of the local engine in a row make the node avoid it as
     * failing (default 3); see {@link RouterConfig#engineFailureLimit()}.
     *
     * @param failures 0 (never) to {@link #MAX_ENGINE_FAILURE_LIMIT}
     * @return this builder
     */
    public Builder engineFailureLimit(int failures) {
      this.engineFailureLimit = failures;
      return this;
    }

    /**
     * Hop limit (default 1; 0 disables forwarding).
     *
     * @param hops 0 to {@link #MAX_HOP_LIMIT}
     * @return this builder
     */
    public Builder hopLimit(int hops) {
      this.hopLimit = hops;
      return this;
    }

    /**
     * Push-back watermarks on the engine's queue depth (defaults 16 and 32): at {@code high} or
     * above, the node refuses forwarded work and advertises overload; the flag clears at
     * {@code low} or below.
     *
     * @param low the low watermark, {@code >= 0}
     * @param high the high watermark, above {@code low}
     * @return this builder
     */
    public Builder watermarks(int low, int high) {
      this.lowWatermark = low;
      this.highWatermark = high;
      return this;
    }

    /**
     * How long a peer that answered "busy" (push-back) is skipped; also how long one is that
     * answered a forward with a malformed, mismatched or unexpected frame, or whose forward the
     * transport failed with a protocol error (default 1 s).
     *
     * @param d the cool-down, positive
     * @return this builder
     */
    public Builder busyCooldown(Duration d) {
      this.busyCooldown = Objects.requireNonNull(d, "busyCooldown");
      return this;
    }

    /**
     * How long a peer that timed out, was unreachable or failed in its engine (a retryable
     * failure) is skipped (default 2 s).
     *
     * @param d the cool-down, positive
     * @return this builder
     */
    public Builder failureCooldown(Duration d) {
      this.failureCooldown = Objects.requireNonNull(d, "failureCooldown");
      return this;
    }

    /**
     * Enables or disables cold-prefix placement (default on).
     *
     * @param enabled false to place cold prefixes by cost alone
     * @return this builder
     */
    public Builder coldPlacement(boolean enabled) {
      this.coldPlacement = enabled;
      return this;
    }

    /**
     * Load bound of cold placement as a multiple of the mean load (default 1.25).
     *
     * @param bound the bound, in [1, 100]
     * @return this builder
     */
    public Builder coldPlacementLoadBound(double bound) {
      this.coldPlacementLoadBound = bound;
      return this;
    }

    /**
     * Fraction by which a cold placement may exceed the local estimate (default 0.25).
     *
     * @param slack the slack, in [0, 10]
     * @return this builder
     */
    public Builder coldPlacementSlack(double slack) {
      this.coldPlacementSlack = slack;
      return this;
    }

    /**
     * Enables or disables the value of local caching in cost-aware decisions (default on).
     *
     * @param enabled false to send every request where it is cheapest for itself
     * @return this builder
     */
    public Builder localCaching(boolean enabled) {
      this.localCaching = enabled;
      return this;
    }

    /**
     * Summary age at which a peer's estimates count half (default 30 s).
     *
     * @param d the half-life, positive
     * @return this builder
     */
    public Builder stalenessHalfLife(Duration d) {
      this.stalenessHalfLife = Objects.requireNonNull(d, "stalenessHalfLife");
      return this;
    }

    /**
     * Time since a peer's accuracy was last measured at which the distrust it earned counts
     * half (default 60 s): see {@link RouterConfig#distrustHalfLife()}.
     *
     * @param d the half-life, positive
     * @return this builder
     */
    public Builder distrustHalfLife(Duration d) {
      this.distrustHalfLife = Objects.requireNonNull(d, "distrustHalfLife");
      return this;
    }

    /**
     * Anti-entropy interval and fanout (defaults 200 ms and 3).
     *
     * @param interval the round interval, at least 1 ms
     * @param fanout peers per round, 1 to 64
     * @return this builder
     */
    public Builder gossip(Duration interval, int fanout) {
      this.gossipInterval = Objects.requireNonNull(interval, "interval");
      this.gossipFanout = fanout;
      return this;
    }

    /**
     * Failure detection: suspect after, dead after (defaults 2 s and 10 s).
     *
     * @param suspectAfter silence before suspicion, at least twice the gossip interval
     * @param deadAfter silence before death, above {@code suspectAfter}
     * @return this builder
     */
    public Builder peerTimeouts(Duration suspectAfter, Duration deadAfter) {
      this.peerSuspectAfter = Objects.requireNonNull(suspectAfter, "suspectAfter");
      this.peerDeadAfter = Objects.requireNonNull(deadAfter, "deadAfter");
      return this;
    }

    /**
     * Most peers tracked, each with a replica (default 1,024).
     *
     * @param peers 1 to 65,536
     * @return this builder
     */
    public Builder maxPeers(int peers) {
      this.maxPeers = peers;
      return this;
    }

    /**
     * The largest gossip message this node sends, in bytes (default 65,536, 64 KiB; range 1,024
     * to 16 MiB, {@link RouterConfig#MIN_GOSSIP_MESSAGE_BYTES} to
     * {@link RouterConfig#MAX_GOSSIP_MESSAGE_BYTES}). It bounds every gossip message the node
     * encodes: a digest lists a rotating subset of the origins once they do not fit, updates
     * take deltas while they fit, a batch of block changes is split into deltas of at most
     * (this − 1 KiB) / 16 blocks, a snapshot is sent in chunks of at most this size, and an
     * exchange sends at most 1 MiB of chunks (or one chunk, if this is larger) and at most 48
     * chunks (the second bound is the one that binds below about 21 KiB). A smaller value
     * suits a transport or proxy with a small body limit, at the cost of more messages and
     * more rounds to deliver a snapshot or a large batch (below 16 KiB a busy cluster may not
     * keep up at all: at 1 KiB, 16 nodes each storing about 93 blocks a second fell minutes
     * behind, measured in docs/gossip.md); a larger one suits big caches or many
     * peers (fewer chunks, whole digests), at the cost of larger messages to encode, decode,
     * and lose whole. It must not exceed what the node's transport carries
     * ({@link io.github.prefixrouter.spi.Transport#maxMessageBytes()}, 4 MiB for the HTTP
     * transport by default): {@link io.github.prefixrouter.PrefixRouterNode.Builder#build()}
     * refuses a larger one. Nodes of one cluster may differ in it, as during a rolling change:
     * each reads its peers' gossip messages of up to 16 MiB whatever its own setting
     * (docs/gossip.md, "Message size").
     *
     * @param bytes the largest gossip message, 1,024 to 16 MiB
     * @return this builder
     */
    public Builder gossipMessageBytes(int bytes) {
      this.gossipMessageBytes = bytes;
      return this;
    }

    /**
     * This node's gossip generation, which should be larger than that of any earlier run of the
     * same node id. A smaller one is mended when it is at most 2^40 below the larger one (the
     * gossip layer's largest generation jump; about 12.7 days in microseconds): peers that know
     * the larger one tell the node, which continues above it, and each of them then gets the
     * node's whole set again (a snapshot). Further below, the node refuses to follow (as it
     * refuses a forged claim), and peers take it only once they have declared the larger one
     * dead and forgotten it ({@code peerDeadAfter} and 4 times that after its last heartbeat).
     * By default (0) it is the node's monotonic clock in microseconds at build time, which grows
     * across restarts of a process but may go backwards after a machine reboot (further than
     * 2^40 after an uptime of more than 12.7 days); hosts that can, should supply a value that
     * survives reboots, for example microseconds since the epoch at start, or a counter kept on
     * disk. Range 1..2^62, or 0 for the default. (A node reads its
     * clock first as it is built, and a clock that throws then fails the build; should the
     * reading for the generation throw, the generation comes from that first reading.)
     *
     * @param generation 1 to 2^62, or 0 for the clock's value
     * @return this builder
     */
    public Builder gossipGeneration(long generation) {
      this.gossipGeneration = generation;
      return this;
    }

    /**
     * What this node's engine serves, as far as its answers go (default empty): set it on every
     * node to the model's name, with its revision or quantization where nodes may differ in
     * them, so that a node never serves a peer's request with another model; see
     * {@link RouterConfig#modelId()}. Text of at most {@link RouterConfig#MAX_MODEL_ID_BYTES}
     * UTF-8 bytes without control characters. Nodes with a model id speak a FORWARD that nodes
     * from before model ids do not read, and never send them anything else: set it once every
     * node of the cluster runs a release that has it.
     *
     * @param id the model id; empty for none
     * @return this builder
     */
    public Builder modelId(String id) {
      this.modelId = Objects.requireNonNull(id, "modelId");
      return this;
    }

    /**
     * Builds and validates the configuration.
     *
     * @return the validated configuration
     * @throws IllegalArgumentException listing every problem (see {@link RouterConfig#validate()})
     */
    public RouterConfig build() {
      return new RouterConfig(this).validate();
    }
  }
}
