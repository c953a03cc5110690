package io.github.prefixrouter.internal.route;

import com.google.common.primitives.Ints;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouteDecision.Reason;
import io.github.prefixrouter.RouteDecision.SkipReason;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineLoad;
import java.util.Arrays;
import java.util.Objects;
import java.util.function.LongFunction;
import java.util.function.Supplier;

/**
 * The routing decision.
 *
 * <p>Design notes:
 * <ul>
 *   <li>Hot path, called once per request attempt: match the local tree, ask the replicas for
 *       every peer's leading-block count in one pass over the chain (a bitmap of the peers
 *       still matching, intersected with each block's holders), the chain being hashed lazily
 *       by a per-thread {@link PromptChain} in chunks pulled by the query only while some peer
 *       still holds every block so far (the hash chain is serial, about 1 ns per token, so
 *       this is the only way to save hashing); the blocks a recently seen prompt shares with
 *       this one are not hashed at all but copied from the {@link PrefixHashCache} after
 *       comparing their tokens. Then one loop over the peers computes each candidate's cost
 *       straight into the arrays the {@link RouteDecision} keeps (no copy, no per-candidate
 *       object) and picks the cheapest and the longest eligible peer on the way. The chain and
 *       the per-peer counts live in thread-local scratch. A decision allocates its match, load
 *       and cost columns; the columns that usually do not vary between decisions over one peer
 *       snapshot (every candidate eligible, every round trip measured by gossip, effective
 *       match equal to the raw match) are shared with the {@link PeerSet} until a candidate
 *       differs. A peer with no match skips the staleness discount (its effective match is 0
 *       whatever the trust).
 *   <li>The chain comes from {@link BlockChain}: the tree's {@link
 *       io.github.prefixrouter.internal.tree.BlockHasher}, software-pipelined.
 *   <li>Cost (nanoseconds) of running a prompt of {@code n} tokens on candidate {@code c}:
 *       {@code rtt(c) + overhead(c) + queueDepth(c) × service / max(1, min(inFlight(c), 4096))
 *       + prefill × (n − effMatch(c))}
 *       where rtt and overhead are 0 for the local node, {@code effMatch} is the estimated
 *       match discounted by the peer's accuracy (its shortfall from 1 fading with the time since
 *       it was measured: {@link PeerHealth.PeerState#trust}) and by
 *       {@code 0.5^(summaryAge / halfLife)}, and
 *       the queue depth of a peer includes the requests this node has outstanding there (its
 *       advertised load lags by a gossip round). The queue drains through every running slot
 *       ({@link CostModel#drainingSlots}: an engine reports a queue only when its slots are all
 *       busy), so a queue of 10 on an engine running 256 at once costs 10/256 of a service
 *       time; a running count counts for at most {@link CostModel#MAX_SLOTS} slots. {@code overhead(c)} is what a forward to that peer costs beyond gossip's round
 *       trip, learned from answered forwards ({@link PeerHealth.PeerState#overheadNanos}; never
 *       below the configured {@code forwardOverhead}). Decode is the same everywhere and left
 *       out.
 *   <li>Cost-aware: forward to the cheapest eligible peer only if it beats local by more than
 *       {@code max(ratio × local, min)}; so when the round trip exceeds the prefill it saves,
 *       the request stays local by itself.
 *   <li>Longest-prefix (the source design): the eligible peer with the longest raw estimated
 *       match wins if strictly longer than the local match (ties: lower load, then lower
 *       index); otherwise local.
 *   <li>Local caching (cost-aware, {@link RouterConfig#localCaching()}): when the cheapest peer
 *       wins only because it holds more of the prompt, forwarding "rents" its cache: each such
 *       request pays the round trip and the forwarding overhead, while running here "buys" the
 *       prefix once, for {@code cost(local) − cost(peer)} now. With {@code E} the later requests
 *       for this prefix the node expects before its cache would evict it ({@link LocalDemand}),
 *       it runs here when {@code (rtt(peer) + overhead) × E > cost(local) − cost(peer) + H + S},
 *       where {@code H} is what the miss costs the requests entering while it runs (each waits
 *       for the rest of it or pays the premium elsewhere, whichever is less), plus {@code S},
 *       the cache space the copy takes: {@code prefill × r × copied tokens × residencies held}
 *       with {@code r} the reuses per residency of what the local cache evicts, measured on the
 *       local tree's block events ({@link CacheSpace}; 0 until the cache evicts). Only
 *       the link counts as the lasting premium: queue differences come and go. Demand is counted
 *       per prompt head (its first {@link #HEAD_BLOCKS} blocks), so this applies only when the
 *       local node lacks part of that head: a peer's longer match deeper in the prompt (a
 *       repeated question after a shared prefix) says nothing about later reuse.
 *       On a fast link the premium is small and the cluster's caches partition the prefixes; on
 *       a slow link every node keeps the prefixes it keeps being asked for. A buy is a long
 *       prefill (seconds for a long prefix on a slow link), so it is timed and accounted for:
 *       the node buys only when its engine has no request waiting and no bought miss running
 *       (else it rents this time and buys on a later request for the head, so the miss holds up
 *       nobody already queued and one bought miss never queues behind another), and
 *       until the bought miss is expected to finish, the rest of it, over the running slots
 *       as the queue is, is added to the local cost (the queue depth prices each waiting
 *       request at the mean service time and does not know that one of them is a long
 *       prefill), so requests arriving meanwhile go to a peer when that is cheaper than
 *       waiting; a run that ends sooner (answered, failed, cancelled or given up) ends the
 *       reservation with it. Demand and reservations are recorded only by real routing
 *       attempts, cache insertions by every run the local engine takes (with or without a
 *       decision to run it here), never by {@code explain}.
 *   <li>Cold prefixes (cost-aware only, when no eligible candidate holds any block): bounded-load
 *       rendezvous hashing of the first block hash over the local node and eligible peers, kept
 *       only if not slower than local by more than the configured slack; otherwise the cost
 *       decides as for any prompt (the cheapest peer if it beats local by the margin).
 *   <li>Eligibility (push-back): peers already tried for this request, advertising overload, or
 *       in a busy / failure cool-down are skipped; so are, for a request of a cache scope other
 *       than the default, peers known not to speak scoped FORWARDs.
 *   <li>A stalled local engine ({@link EngineWatch}): when a peer is eligible, the request goes
 *       to the one the policy ranks first among peers (the cheapest; for longest-prefix, the
 *       longest match), whatever local execution would cost; when none is, it runs here.
 * </ul>
 */
final class RoutePlanner {

  private final RouterConfig config;
  private final String localId;
  private final long localIdHash;
  private final LocalPrefixIndex local;
  private final ChainHasher hasher;
  private final PeerView peers;
  private final CostModel cost;
  private final PeerHealth health;
  private final Clock clock;
  private final Supplier<EngineLoad> localLoad;
  private final int blockSize;
  private final double halfLifeNanos;
  private final double distrustHalfLifeNanos;
  private final long overheadNanos;
  private final long marginMinNanos;
  private final LocalDemand demand;
  /**
   * What the local cache's space is worth, fed the local tree's block events; null where the
   * local-caching rule does not run or the local index is no tree (space is then free).
   */
  private final CacheSpace space;
  /** Chain hashes of recently seen prompt prefixes, or null when disabled. */
  private final PrefixHashCache prefixHashes;
  /**
   * Why the local engine is to be avoided at a time, or null when it is not ({@link
   * EngineWatch#avoidance}).
   */
  private volatile LongFunction<Reason> localAvoided = now -> null;

  /** Blocks of the prompt head that local-caching demand is counted by (128 tokens of 16). */
  static final int HEAD_BLOCKS = 8;

  private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

  /** Per-thread working arrays, grown on demand and reused. */
  static final class Scratch {
    final PromptChain chain = new PromptChain();
    int[] lead = new int[64];

    void ensure(int peers) {
      if (lead.length < peers) {
        lead = new int[Math.max(peers, lead.length * 2)];
      }
    }
  }

  RoutePlanner(
      RouterConfig config,
      String localId,
      LocalPrefixIndex local,
      ChainHasher hasher,
      PeerView peers,
      CostModel cost,
      PeerHealth health,
      Clock clock,
      Supplier<EngineLoad> localLoad) {
    this(config, localId, local, hasher, peers, cost, health, clock, localLoad, true);
  }

  /**
   * @param prefixHashCache whether decisions reuse the chain hashes of recently seen prompt
   *     prefixes ({@link PrefixHashCache}); only a benchmark comparing the two turns it off
   */
  RoutePlanner(
      RouterConfig config,
      String localId,
      LocalPrefixIndex local,
      ChainHasher hasher,
      PeerView peers,
      CostModel cost,
      PeerHealth health,
      Clock clock,
      Supplier<EngineLoad> localLoad,
      boolean prefixHashCache) {
    this.config = config;
    this.localId = localId;
    this.localIdHash = Rendezvous.nodeHash(localId);
    this.local = local;
    this.hasher = hasher;
    this.peers = peers;
    this.cost = cost;
    this.health = health;
    this.clock = clock;
    this.localLoad = localLoad;
    this.blockSize = config.blockSize();
    this.halfLifeNanos = config.stalenessHalfLife().toNanos();
    this.distrustHalfLifeNanos = config.distrustHalfLife().toNanos();
    this.overheadNanos = config.forwardOverhead().toNanos();
    this.marginMinNanos = config.forwardMarginMin().toNanos();
    this.demand = new LocalDemand(config.treeCapacityTokens());
    // the local-caching rule prices cache space by how often what the local tree evicts comes
    // back: the tree's block events feed it (a record of up to 1 MiB, made only where it is fed)
    if (config.policy() == RoutingPolicy.COST_AWARE && config.localCaching()
        && local instanceof TreeIndex t) {
      this.space = new CacheSpace(config.treeCapacityTokens(), blockSize);
      t.tree().addListener(space);
    } else {
      this.space = null;
    }
    this.prefixHashes = prefixHashCache ? new PrefixHashCache(blockSize) : null;
  }

  /**
   * Sets the test of whether the local engine is to be avoided at a time, and why: it returns
   * the decision's reason ({@link Reason#LOCAL_ENGINE_STALLED} or {@link
   * Reason#LOCAL_ENGINE_FAILING}), or null when the engine is not avoided. An avoided engine is
   * avoided whenever a peer is eligible. None by default.
   */
  void avoidLocalWhen(LongFunction<Reason> avoided) {
    this.localAvoided = Objects.requireNonNull(avoided, "avoided");
  }

  /** The decision for a request with no hop and no peer tried yet. */
  RouteDecision decide(int[] tokens) {
    return decide(tokens, 0, null, 0, null);
  }

  /**
   * Decides where a request runs.
   *
   * @param tokens the prompt
   * @param hops how many times the request was forwarded already
   * @param tried node ids excluded (already tried, or the sender); may be null
   * @param triedCount how many entries of {@code tried} are used
   * @param peerSetOut if not null, receives the peer snapshot used (index i+1 of the decision's
   *     candidates is peer i of it)
   */
  RouteDecision decide(
      int[] tokens, int hops, String[] tried, int triedCount, PeerSet[] peerSetOut) {
    return decide(BlockHasher.ROOT_PARENT, tokens, hops, tried, triedCount, peerSetOut);
  }

  /** The decision for a request of a cache scope with no hop and no peer tried yet. */
  RouteDecision decide(long scopeRoot, int[] tokens) {
    return decide(scopeRoot, tokens, 0, null, 0, null);
  }

  /**
   * Decides where a request of the cache scope whose chains start from {@code scopeRoot}
   * ({@link BlockHasher#scopeRoot}) runs: the local match is the scope's, and the chain peers
   * are asked about starts from the scope's root, so only prefixes of that scope count.
   * The other parameters are those of {@link #decide(int[], int, String[], int, PeerSet[])}.
   */
  RouteDecision decide(long scopeRoot,
      int[] tokens, int hops, String[] tried, int triedCount, PeerSet[] peerSetOut) {
    return decide(scopeRoot, false, tokens, hops, tried, triedCount, peerSetOut);
  }

  /**
   * As {@link #decide(long, int[], int, String[], int, PeerSet[])}; {@code stops} says whether
   * the request has stop strings or stop token ids, so that peers known not to speak the FORWARD
   * that carries them are skipped ({@link SkipReason#NO_STOPS}). A routing attempt's decision to
   * run here ({@code peerSetOut} not null) records the run at once ({@link #runsHere}); nothing
   * tells the planner when that run ends, so a bought miss's reservation lasts until the miss is
   * expected to end.
   */
  RouteDecision decide(long scopeRoot, boolean stops,
      int[] tokens, int hops, String[] tried, int triedCount, PeerSet[] peerSetOut) {
    RouteDecision d = decide(scopeRoot, stops, tokens, hops, tried, triedCount, peerSetOut, true);
    if (peerSetOut != null && d.isLocal()) {
      runsHere(d);
    }
    return d;
  }

  /**
   * As {@link #decide(long, boolean, int[], int, String[], int, PeerSet[])}, but a decision to
   * run the request here records nothing of the run: the caller does ({@link #runsHere}) once
   * the request is to run here. {@code entered} says whether this is the request's first
   * decision at this node, the only one that counts it in local-caching demand: a request
   * decided again (its local run failed retryably, or the stalled or failing engine's probe it
   * was to run as was taken) entered once.
   */
  RouteDecision decide(long scopeRoot, boolean stops, int[] tokens, int hops, String[] tried,
      int triedCount, PeerSet[] peerSetOut, boolean entered) {
    RoutingPolicy policy = config.policy();
    PeerSet ps = peers.livePeers();
    if (peerSetOut != null) {
      peerSetOut[0] = ps;
    }
    int n = tokens.length;
    int p = ps.size;
    int c = p + 1;
    int maxBlocks = n / blockSize;
    Scratch s = SCRATCH.get();
    s.ensure(p);
    // The decision's columns, handed to the RouteDecision as they are. Those that are usually
    // the same for every decision over this peer snapshot are shared with the snapshot until
    // a candidate differs: all eligible, every round trip measured by gossip, effective match
    // equal to the raw match (no staleness or accuracy discount).
    int[] matchedCol = new int[c];
    int[] effCol = matchedCol;
    int[] loadCol = new int[c];
    long[] costCol = new long[c];
    long[] rttCol = ps.rttWithLocal;
    boolean ownRtt = rttCol == null;
    if (ownRtt) {
      rttCol = new long[c];
    }
    SkipReason[] skipCol = ps.noneSkipped;
    double prefill = cost.prefillNanosPerToken();
    double service = cost.serviceNanos();

    // Local candidate (index 0): exact match from the tree, fresh load from the engine.
    int localMatch = Math.min(local.match(scopeRoot, tokens), n);
    EngineLoad ll = localLoad.get();
    matchedCol[0] = localMatch;
    loadCol[0] = ll.total();
    long now = clock.nanoTime();
    boolean localCaching = policy == RoutingPolicy.COST_AWARE && config.localCaching();
    // the queue drains through every slot the engine runs (continuous batching): see CostModel
    int localSlots = cost.drainingSlots(ll.inFlight());
    long localCost =
        (long) (ll.queueDepth() * service / localSlots + prefill * (n - localMatch));
    // a miss bought for local caching still occupies a slot (see LocalDemand); like the queue,
    // what is left of it holds up a new request for that time over the running slots
    long reserved = localCaching ? demand.reservedNanos(now) : 0;
    localCost = addCapped(localCost, reserved / localSlots);
    costCol[0] = localCost;

    boolean routing = policy != RoutingPolicy.LOCAL_ONLY && hops < config.hopLimit() && p > 0;
    // demand is recorded, and misses bought, by routing attempts only, not explain (insertions
    // and reservations by the run here: runsHere)
    boolean caching = localCaching && peerSetOut != null;
    int blocks = 0;
    PromptChain chain = s.chain;
    if (routing && maxBlocks > 0) {
      // Hash lazily: a block only matters if some peer holds every block before it, so the
      // replica query pulls the chain in chunks and stops at the first block nobody still
      // matching holds: the prompt is hashed about as far as the longest peer match.
      chain.reset(scopeRoot, tokens, hasher, blockSize, prefixHashes);
      peers.leadingBlocks(ps, chain, maxBlocks, s.lead);
      if (caching) {
        chain.ensure(HEAD_BLOCKS); // the demand key needs the same head whatever peers hold
      }
      blocks = chain.hashed();
      int longest = 0;
      for (int i = 0; i < p; i++) {
        longest = Math.max(longest, s.lead[i]);
      }
      // offers the prompt to the prefix hash cache; the blocks past the longest peer match
      // (plus the one where it ended) were hashed only to find that nobody holds them
      chain.finish(Math.max(longest + 1, caching ? HEAD_BLOCKS : 0));
    } else {
      Arrays.fill(s.lead, 0, p, 0);
    }

    // demand is counted per prompt head (the first HEAD_BLOCKS blocks): it predicts reuse of
    // what is bought only when the local node lacks part of that head
    int demandBlocks = Math.min(blocks, HEAD_BLOCKS);
    long demandKey = blocks > 0 ? chain.hashes()[demandBlocks - 1] : 0;
    if (caching && blocks > 0 && hops == 0 && triedCount == 0 && entered) {
      demand.requested(demandKey, now);
    }
    int eligible = 0;
    int anyMatch = localMatch > 0 ? 1 : 0;
    int[] lead = s.lead;
    double prefillAll = prefill * n; // a peer with no effective match (the usual case)
    int cheapest = -1; // the first eligible peer of least cost (cost-aware)
    long cheapestCost = Long.MAX_VALUE;
    int longestPeer = -1; // the first eligible peer of longest match, then least load
    int longestMatch = -1;
    int longestLoad = Integer.MAX_VALUE;
    for (int i = 0; i < p; i++) {
      int k = i + 1;
      PeerHealth.PeerState st = health.get(ps, i);
      int outstanding = st.outstanding;
      int matched = Math.min(lead[i] * blockSize, n);
      long rtt = ps.rttNanos[i];
      if (ownRtt) {
        if (rtt < 0) {
          rtt = Math.max(st.forwardRttNanos, 0);
        }
        rttCol[k] = rtt;
      }
      int eff = 0;
      if (matched > 0) { // no match: 0 whatever the trust, so skip the pow
        double trust = st.trust(now, distrustHalfLifeNanos); // 1 without a pow if never short
        long age = now - ps.lastSyncNanos[i];
        if (age > 0) {
          trust *= Math.pow(0.5, age / halfLifeNanos);
        }
        eff = (int) (matched * trust);
      }
      matchedCol[k] = matched;
      if (effCol == matchedCol && eff != matched) {
        effCol = Arrays.copyOf(matchedCol, c); // the earlier candidates had eff == matched
      }
      if (effCol != matchedCol) {
        effCol[k] = eff;
      }
      // each figure may be up to 2^31 - 1 on the wire: saturate rather than wrap to a negative
      // load that would make the busiest peer the least loaded
      int queue = Ints.saturatedCast((long) ps.queueDepth[i] + outstanding);
      loadCol[k] = Ints.saturatedCast((long) queue + ps.inFlight[i]);
      SkipReason skip;
      if (triedCount > 0 && contains(tried, triedCount, ps.ids[i])) {
        skip = SkipReason.ALREADY_TRIED;
      } else if (ps.suspect[i]) {
        skip = SkipReason.SUSPECT;
      } else if (ps.overloaded[i]) {
        skip = SkipReason.OVERLOADED;
      } else if (st.otherModel.remembered(ps.generation[i], now)) {
        skip = SkipReason.OTHER_MODEL;
      } else if (st.busy(now)) {
        skip = SkipReason.BUSY_COOLDOWN;
      } else if (st.failed(now)) {
        skip = SkipReason.FAILED_COOLDOWN;
      } else if (scopeRoot != BlockHasher.ROOT_PARENT
          && st.noScopes.remembered(ps.generation[i], now)) {
        skip = SkipReason.NO_SCOPES;
      } else if (stops && st.noStops.remembered(ps.generation[i], now)) {
        skip = SkipReason.NO_STOPS;
      } else {
        skip = SkipReason.NONE;
      }
      if (skip == SkipReason.NONE) {
        eligible++;
        if (matched > 0) {
          anyMatch = 1;
        }
        // saturate: the cast caps a huge estimate at Long.MAX_VALUE (an absurd timing an
        // engine reported can make the learned service time enormous), and adding the round
        // trip to that must not wrap to a negative cost that makes the busiest peer cheapest
        long ck = addCapped(rtt + st.overheadNanos(overheadNanos),
            (long) (queue * service / cost.drainingSlots(ps.inFlight[i])
                + (eff == 0 ? prefillAll : prefill * (n - eff))));
        costCol[k] = ck;
        if (cheapest < 0 || ck < cheapestCost) {
          cheapest = k;
          cheapestCost = ck;
        }
        int load = loadCol[k];
        if (longestPeer < 0 || matched > longestMatch
            || (matched == longestMatch && load < longestLoad)) {
          longestPeer = k;
          longestMatch = matched;
          longestLoad = load;
        }
      } else {
        if (skipCol == ps.noneSkipped) {
          skipCol = ps.noneSkipped.clone(); // the earlier candidates were all eligible
        }
        skipCol[k] = skip;
        costCol[k] = Long.MAX_VALUE;
      }
    }

    // cold placement (cost-aware, nobody eligible holds a block): the rendezvous target, or -1
    // when it does not apply or is slower than local by more than the slack; then the cost
    // decides as for any prompt, so a far rendezvous winner does not keep the request here
    // while another peer is cheaper
    int cold = -1;
    if (policy == RoutingPolicy.COST_AWARE && routing && eligible > 0 && anyMatch == 0
        && config.coldPlacement() && blocks > 0) {
      int target = coldTarget(skipCol, loadCol, ps, c, chain.hashes()[0]);
      if (target == 0 || costCol[target] <= localCost * (1.0 + config.coldPlacementSlack())) {
        cold = target;
      }
    }

    int chosen = 0;
    Reason reason;
    Reason avoided;
    if (policy == RoutingPolicy.LOCAL_ONLY) {
      reason = Reason.LOCAL_ONLY_POLICY;
    } else if (hops >= config.hopLimit()) {
      reason = Reason.HOP_LIMIT;
    } else if (p == 0) {
      reason = Reason.NO_PEERS;
    } else if (eligible == 0) {
      reason = Reason.ALL_PEERS_SKIPPED;
    } else if ((avoided = localAvoided.apply(now)) != null) {
      chosen = policy == RoutingPolicy.LONGEST_PREFIX ? longestPeer : cheapest;
      reason = avoided;
    } else if (policy == RoutingPolicy.LONGEST_PREFIX) {
      int best = longestPeer;
      if (matchedCol[best] > localMatch) {
        chosen = best;
        reason = Reason.PEER_LONGEST;
      } else {
        reason = Reason.LOCAL_LONGEST_OR_TIE;
      }
    } else if (cold >= 0) {
      chosen = cold;
      reason = Reason.COLD_PLACEMENT;
    } else {
      int best = cheapest;
      long margin = Math.max((long) (config.forwardMarginRatio() * localCost), marginMinNanos);
      if (costCol[best] < localCost - margin) {
        chosen = best;
        reason = Reason.PEER_CHEAPER;
        // buy only when nobody waits for the local engine and no bought miss occupies it,
        // so the miss holds up no request already queued and waits for no other; otherwise
        // rent this time and buy on a later request for the head
        if (caching && blocks > 0 && localMatch < demandBlocks * blockSize
            && effCol[best] > localMatch && ll.queueDepth() == 0 && reserved == 0) {
          // buying costs this request localCost - cost(best); each later request for the
          // prefix is then spared the round trip and overhead (queues come and go, so only
          // the link counts as the lasting premium)
          long premium = rttCol[best] + health.get(ps, best - 1).overheadNanos(overheadNanos);
          double miss = prefill * (n - localMatch);
          // a request entering during the miss waits for the rest of it over the running slots
          double buy = localCost - costCol[best]
              + localSlots * heldUp(miss / localSlots, premium, demand.arrivalsPerSecond(now));
          // the copy of what the peer holds takes cache space while it stays, displacing
          // content that would have been reused as often as what this cache evicts is
          // (CacheSpace): a prefill per reuse, for each residency the copy is expected to stay
          // for the E / x residencies the E requests expected keep it (LocalDemand)
          double expected = demand.expectedRequests(demandKey, now);
          double rent = space == null ? 0 : space.reusesPerResidency();
          double held = rent > 0 && expected > 0
              ? prefill * rent * (effCol[best] - localMatch)
                  * (expected / demand.requestsPerResidency(demandKey, now))
              : 0;
          if (premium * expected > buy + held) {
            chosen = 0;
            reason = Reason.LOCAL_CACHING;
          }
        }
      } else if (costCol[best] < localCost) {
        reason = Reason.MARGIN_NOT_MET;
      } else {
        reason = Reason.LOCAL_CHEAPEST;
      }
    }

    return new RouteDecision(
        policy, n, ps.idsWithLocal(localId),
        matchedCol, effCol, loadCol, rttCol, costCol, skipCol,
        chosen, reason);
  }

  /**
   * Records that the request of local decision {@code d} runs here: under local caching, its
   * uncached tokens are inserted into the local cache (the turnover the residency is estimated
   * from) and, if it was bought ({@link Reason#LOCAL_CACHING}), its miss occupies the engine
   * until it is expected to finish or its run ends ({@link #runEnded}), whichever is first.
   * Recorded for a run, not for a decision: a request decided again (the probe of a stalled or
   * failing engine it was to run as was taken, or its local run failed retryably) recorded a run
   * here its first decision chose, though it ran elsewhere or had run here already. The node
   * records it once its engine has taken the run: a request abandoned before its run, or a run
   * the engine refused at once, inserted nothing and occupies nothing.
   *
   * @return the bought miss's reservation, for {@link #runEnded}; null if nothing was reserved
   */
  LocalDemand.Reservation runsHere(RouteDecision d) {
    if (config.policy() != RoutingPolicy.COST_AWARE || !config.localCaching()) {
      return null;
    }
    long now = clock.nanoTime();
    int uncached = d.promptTokens() - d.target().matchedTokens();
    demand.inserted(uncached, now);
    if (d.reason() == Reason.LOCAL_CACHING) {
      return demand.reserve(now, now + (long) (cost.prefillNanosPerToken() * uncached));
    }
    return null;
  }

  /**
   * Records that a request runs here with no routing decision to run it here (a forward that
   * fell back to the local engine, a peer's final failure judged here, a request whose routing
   * threw): under local caching, the {@code promptTokens − cachedTokens} it inserts into the
   * local cache count in the turnover as those of a decided run do ({@link
   * #runsHere(RouteDecision)}); nothing is reserved, as only a bought miss reserves the engine.
   * {@code cachedTokens}: the local index's match of the prompt, or negative if unknown (the
   * whole prompt counts). The node records it once its engine has taken the run.
   */
  void runsHere(int promptTokens, int cachedTokens) {
    if (config.policy() != RoutingPolicy.COST_AWARE || !config.localCaching()) {
      return;
    }
    demand.inserted(promptTokens - Math.max(0, cachedTokens), clock.nanoTime());
  }

  /**
   * The run recorded by {@link #runsHere(RouteDecision)} with {@code reservation} ended,
   * however it ended (answered, failed, cancelled or given up): a bought miss no longer occupies
   * the engine, even if it was expected to for longer. Nothing for a null reservation.
   */
  void runEnded(LocalDemand.Reservation reservation) {
    if (reservation != null) {
      demand.release(reservation);
    }
  }

  /**
   * What a bought miss of {@code missNanos} costs the requests that enter while it occupies the
   * engine (at {@code perSecond}): one entering {@code t} into the miss waits for the rest of
   * it or pays the premium to run elsewhere, whichever is less, so the expected total is
   * {@code perSecond × ∫₀^miss min(miss − t, premium) dt}.
   */
  static double heldUp(double missNanos, double premiumNanos, double perSecond) {
    if (!(missNanos > 0) || !(perSecond > 0)) {
      return 0;
    }
    double r = Math.min(missNanos, premiumNanos);
    return perSecond / 1e9 * (r * missNanos - r * r / 2);
  }

  /** Bounded-load rendezvous over the local node and eligible peers. */
  private int coldTarget(SkipReason[] skipCol, int[] loadCol, PeerSet ps, int c, long key) {
    long total = 0;
    int count = 0;
    for (int k = 0; k < c; k++) {
      if (skipCol[k] == SkipReason.NONE) {
        total += loadCol[k];
        count++;
      }
    }
    long cap = Rendezvous.capacity(config.coldPlacementLoadBound(), total, count);
    int best = -1;
    long bestScore = 0;
    int fallback = 0;
    long fallbackScore = 0;
    for (int k = 0; k < c; k++) {
      if (skipCol[k] != SkipReason.NONE) {
        continue;
      }
      long score = Rendezvous.score(key, k == 0 ? localIdHash : ps.idHashes[k - 1]);
      if (k == 0 || Long.compareUnsigned(score, fallbackScore) > 0) {
        fallback = k;
        fallbackScore = score;
      }
      if (loadCol[k] + 1L <= cap && (best < 0 || Long.compareUnsigned(score, bestScore) > 0)) {
        best = k;
        bestScore = score;
      }
    }
    return best >= 0 ? best : fallback;
  }

  /** {@code a + b} for non-negative operands, {@link Long#MAX_VALUE} instead of overflowing. */
  static long addCapped(long a, long b) {
    long r = a + b;
    return r < 0 ? Long.MAX_VALUE : r;
  }

  private static boolean contains(String[] tried, int count, String id) {
    for (int i = 0; i < count; i++) {
      if (tried[i].equals(id)) {
        return true;
      }
    }
    return false;
  }
}
