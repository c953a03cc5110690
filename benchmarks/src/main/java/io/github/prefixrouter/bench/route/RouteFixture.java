package io.github.prefixrouter.bench.route;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.internal.gossip.GossipConfig;
import io.github.prefixrouter.internal.gossip.GossipEngine;
import io.github.prefixrouter.internal.route.RoutingDecisions;
import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import io.github.prefixrouter.workload.ZipfDraw;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.function.Function;

/**
 * A node's routing state with {@code peers} peers, built through the real gossip protocol: every
 * peer runs a {@link GossipEngine} whose summary holds a random-length prefix of one base prompt,
 * and exchanges anti-entropy rounds with the observing node (messages delivered in-process,
 * synchronously) until the observer's replicas hold every peer. The observer's local tree holds
 * a few prompts of its own. The same block sets also feed the naive baseline: one
 * {@code HashSet<Long>} per peer, scanned peer by peer.
 *
 * <p>Two workloads ({@link Workload}): {@code FIXED}, 16 random base prompts and 8 queries (4 of
 * the bases with a fresh 64-token tail each), cycled; and {@code SHARED}, traffic that repeats
 * prefixes the way served traffic does: 32 families, each a shared preamble (a system prompt or
 * few-shot examples) of a quarter to seven eighths of the prompt, picked with Zipf popularity
 * (exponent 1); every query is its family's preamble followed by its own random tail, and the
 * 1,024 queries are distinct. Peers hold a random-length prefix of their family's preamble
 * followed by a tail of their own.
 */
final class RouteFixture {

  /** What the queries and the peers' caches look like. */
  enum Workload { FIXED, SHARED }

  static final int BASES = 16;
  static final int FAMILIES = 32;
  static final int SHARED_QUERIES = 1024;

  final int peers;
  final int promptTokens;
  final Workload workload;
  final Function<int[], RouteDecision> decide;
  /** The library's decision without the prefix hash cache (every prompt hashed from block 0). */
  final Function<int[], RouteDecision> decideWithoutCache;
  final PreviousPlanner previous;
  final int[][] queries;
  /**
   * The order in which the benchmarks take the queries: {@code order[j] = j mod queries}, of
   * prime length {@value #ORDER_LENGTH}. JMH's sample mode times one call in {@code 2^k}
   * (the low bits of a linear congruential generator, so exactly periodic); a benchmark cycling
   * through a power-of-two number of queries would always time the same query (FIXED: 1 of 8).
   * Over a prime period every query is timed equally often.
   */
  final int[] order;

  static final int ORDER_LENGTH = 8191;
  final BlockHasher hasher = new BlockHasher(16, 0);
  final List<Set<Long>> naiveReplicas = new ArrayList<>();
  final long[] naiveChain;
  final int[] naiveOut;
  /** The observer's local tree and gossip engine (for the per-stage benchmark). */
  final ConcurrentPrefixTree localTree;
  final GossipEngine observer;

  RouteFixture(int peers, int promptTokens, long seed) {
    this(peers, promptTokens, seed, Workload.FIXED);
  }

  /**
   * The fixture the command-line tools take as {@code [peers] [promptTokens] [FIXED|SHARED]}
   * (defaults 64, 4096, FIXED), built with the benchmark's seed by {@link #fixture}.
   *
   * @param peers 1 to 32,768 (the router keeps twice as many peers at most, 65,536)
   * @param promptTokens 64 (the FIXED queries' own tails) to
   *     {@link InferenceRequest#MAX_PROMPT_TOKENS}
   * @param workload the workload
   */
  record Args(int peers, int promptTokens, Workload workload) {

    static final String USAGE = "[peers] [promptTokens] [FIXED|SHARED]";

    /**
     * The first three arguments of {@code args} (those after them are the caller's).
     *
     * @throws IllegalArgumentException naming the argument that is not a whole number, is out
     *     of range, or is not a workload
     */
    static Args parse(String[] args) {
      Flags.helpIfAsked(args);
      int peers = (int) positional(args, 0, "peers", 64, 1, 32_768);
      int tokens = (int) positional(args, 1, "promptTokens", 4096, 64,
          InferenceRequest.MAX_PROMPT_TOKENS);
      Workload w = Workload.FIXED;
      if (args.length > 2) {
        try {
          w = Workload.valueOf(args[2]);
        } catch (IllegalArgumentException e) {
          throw new IllegalArgumentException("workload must be FIXED or SHARED, not '" + args[2]
              + "'");
        }
      }
      return new Args(peers, tokens, w);
    }

    /**
     * All of {@code args}, at most three: as {@link #parse}, and more arguments are refused.
     *
     * @throws IllegalArgumentException as {@link #parse}, or for a fourth argument
     */
    static Args parseAll(String[] args) {
      if (args.length > 3) {
        throw new IllegalArgumentException("at most 3 arguments (" + USAGE + "), not "
            + args.length);
      }
      return parse(args);
    }

    /** The fixture, with the benchmark's seed. */
    RouteFixture fixture() {
      return new RouteFixture(peers, promptTokens, 42, workload);
    }
  }

  /**
   * The whole number {@code args[i]}, {@code min} to {@code max}, or {@code dflt} when there are
   * not that many arguments.
   *
   * @throws IllegalArgumentException naming the argument {@code name} if it is not a whole
   *     number or is out of range
   */
  static long positional(String[] args, int i, String name, long dflt, long min, long max) {
    if (args.length <= i) {
      return dflt;
    }
    long v;
    try {
      v = Long.parseLong(args[i].trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(name + ": not a whole number: '" + args[i] + "'");
    }
    if (v < min || v > max) {
      throw new IllegalArgumentException(name + " must be " + min
          + (max == Long.MAX_VALUE ? " or more" : " to " + max) + ", not " + v);
    }
    return v;
  }

  RouteFixture(int peers, int promptTokens, long seed, Workload workload) {
    this.peers = peers;
    this.order = new int[ORDER_LENGTH];
    this.promptTokens = promptTokens;
    this.workload = workload;
    SplittableRandom r = new SplittableRandom(seed);
    int[][] bases;
    int[][] preambles = null;
    if (workload == Workload.FIXED) {
      bases = new int[BASES][];
      for (int b = 0; b < BASES; b++) {
        bases[b] = randomTokens(r, promptTokens);
      }
    } else {
      preambles = new int[FAMILIES][];
      for (int f = 0; f < FAMILIES; f++) {
        preambles[f] = randomTokens(r, promptTokens / 4 + r.nextInt(promptTokens * 5 / 8 + 1));
      }
      bases = new int[Math.max(2, peers)][];
      for (int p = 0; p < bases.length; p++) {
        bases[p] = withTail(r, preambles[p % FAMILIES], promptTokens);
      }
    }
    int blocks = promptTokens / 16;
    SimulatedScheduler sim = new SimulatedScheduler();
    RouterConfig config = RouterConfig.builder().maxPeers(Math.max(16, 2 * peers)).build();
    // one exchange moves at most one message worth of updates, so the peers (which learn each
    // other through the observer) stay cheap to set up: O(peers) bytes per exchange
    GossipConfig observerCfg = GossipConfig.builder().maxPeers(config.maxPeers())
        .snapshotBytesPerExchange(65_536).build();
    GossipConfig peerCfg = GossipConfig.builder().maxPeers(config.maxPeers())
        .snapshotBytesPerExchange(65_536).maxBlocksTotal(65_536).build();
    Map<String, GossipEngine> engines = new HashMap<>();
    PeerAddress self = new PeerAddress("me", "bench:me");
    GossipEngine observer = new GossipEngine(self, 1, observerCfg, List.of(), sim, sim,
        new SplittableRandom(seed), () -> EngineLoad.IDLE,
        (to, payload) -> deliver(engines, self, to, payload));
    engines.put("me", observer);
    List<GossipEngine> peerEngines = new ArrayList<>();
    for (int p = 0; p < peers; p++) {
      PeerAddress a = new PeerAddress("p" + p, "bench:p" + p);
      GossipEngine e = new GossipEngine(a, 1, peerCfg, List.of(self), sim, sim,
          new SplittableRandom(seed + p + 1), () -> new EngineLoad(0, 1),
          (to, payload) -> deliver(engines, a, to, payload));
      engines.put(a.nodeId(), e);
      int[] base = bases[p % bases.length];
      long[] chain = new long[blocks];
      hasher.chain(base, base.length, chain);
      int held = r.nextInt(blocks + 1);
      long[] mine = Arrays.copyOf(chain, held);
      if (held > 0) {
        e.localSummary().onStored(mine);
      }
      Set<Long> naive = new HashSet<>();
      for (long h : mine) {
        naive.add(h);
      }
      naiveReplicas.add(naive);
      peerEngines.add(e);
    }
    long expected = naiveReplicas.stream().mapToLong(Set::size).sum();
    long replicated = 0;
    for (int round = 0; round < 40; round++) {
      // each peer starts one exchange (the first goes to its seed, the observer), and the
      // observer pulls from a few peers of its own
      for (GossipEngine e : peerEngines) {
        e.runRound();
      }
      observer.runRound();
      replicated = observer.view().peers().stream().mapToLong(v -> v.replicaBlocks()).sum();
      if (observer.view().peers().size() == peers && replicated == expected) {
        break;
      }
    }
    if (observer.view().peers().size() != peers || replicated != expected) {
      throw new IllegalStateException("fixture did not converge: " + observer.view().peers().size()
          + " peers, " + replicated + " of " + expected + " blocks replicated");
    }
    ConcurrentPrefixTree local = ConcurrentPrefixTree.selfManaged(1 << 20);
    local.insert(Arrays.copyOf(bases[0], promptTokens / 4));
    local.insert(bases[1]);
    this.decide = RoutingDecisions.planner(config, "me", local, observer, sim,
        () -> new EngineLoad(1, 2));
    this.decideWithoutCache = RoutingDecisions.planner(config, "me", local, observer, sim,
        () -> new EngineLoad(1, 2), false);
    List<long[]> bySlot = new ArrayList<>();
    for (int i = 0; i < config.maxPeers(); i++) {
      bySlot.add(null);
    }
    for (var v : observer.view().peers()) {
      int p = Integer.parseInt(v.address().nodeId().substring(1));
      bySlot.set(v.slot(), naiveReplicas.get(p).stream().mapToLong(Long::longValue).toArray());
    }
    this.previous = new PreviousPlanner(config, "me", local, observer.view(), bySlot,
        config.maxPeers(), sim, () -> new EngineLoad(1, 2));
    if (workload == Workload.FIXED) {
      this.queries = new int[8][];
      for (int q = 0; q < queries.length; q++) {
        int[] t = bases[q % 4].clone();
        for (int i = promptTokens - 64; i < promptTokens; i++) {
          t[i] = r.nextInt(100_000);
        }
        queries[q] = t;
      }
    } else {
      ZipfDraw families = ZipfDraw.of(FAMILIES, 1.0);
      this.queries = new int[SHARED_QUERIES][];
      for (int q = 0; q < queries.length; q++) {
        queries[q] = withTail(r, preambles[families.rank(r.nextDouble())], promptTokens);
      }
    }
    for (int j = 0; j < ORDER_LENGTH; j++) {
      order[j] = j % queries.length;
    }
    this.naiveChain = new long[blocks];
    this.naiveOut = new int[peers];
    this.localTree = local;
    this.observer = observer;
  }

  /**
   * Checks that the library and the previous planner take the same decision (same target,
   * reason and per-candidate columns) for the queries and {@code truncations} random
   * truncations of each; throws naming the first prompt that differs.
   *
   * @return the number of prompts compared
   */
  int checkSameDecisions(int truncations, long seed) {
    SplittableRandom r = new SplittableRandom(seed);
    int compared = 0;
    int step = Math.max(1, queries.length / 8);
    for (int pass = 0; pass < 2; pass++) { // the second pass meets a warm prefix hash cache
      for (int k = 0; k < queries.length; k += step) {
        int[] q = queries[k];
        for (int t = 0; t <= truncations; t++) {
          int[] prompt = t == 0 ? q : Arrays.copyOf(q, r.nextInt(q.length + 1));
          String now = decide.apply(prompt).toString();
          String uncached = decideWithoutCache.apply(prompt).toString();
          String before = previous.decide(prompt).toString();
          if (!now.equals(before) || !uncached.equals(before)) {
            throw new IllegalStateException("decisions differ for a prompt of " + prompt.length
                + " tokens:\n  library:  " + now + "\n  uncached: " + uncached
                + "\n  previous: " + before);
          }
          compared++;
        }
      }
    }
    return compared;
  }

  private static int[] randomTokens(SplittableRandom r, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = r.nextInt(100_000);
    }
    return t;
  }

  /** {@code prefix} followed by random tokens up to {@code length}. */
  private static int[] withTail(SplittableRandom r, int[] prefix, int length) {
    int[] t = Arrays.copyOf(prefix, length);
    for (int i = prefix.length; i < length; i++) {
      t[i] = r.nextInt(100_000);
    }
    return t;
  }

  private static void deliver(Map<String, GossipEngine> engines, PeerAddress from, PeerAddress to,
      byte[] payload) {
    GossipEngine target = engines.get(to.nodeId());
    if (target != null) {
      target.onMessage(from, payload);
    }
  }

  /**
   * The baseline: hash the prompt, then for each peer walk the chain in its own hash set until
   * the first miss, and pick the longest. What a router without a shared block index does.
   */
  int naiveBest(int[] tokens) {
    int n = hasher.chain(tokens, tokens.length, naiveChain);
    int best = -1;
    int bestLen = -1;
    for (int p = 0; p < naiveReplicas.size(); p++) {
      Set<Long> s = naiveReplicas.get(p);
      int k = 0;
      while (k < n && s.contains(naiveChain[k])) {
        k++;
      }
      naiveOut[p] = k;
      if (k > bestLen) {
        bestLen = k;
        best = p;
      }
    }
    return best;
  }
}
