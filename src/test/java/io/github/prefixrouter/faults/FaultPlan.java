package io.github.prefixrouter.faults;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.testing.InMemoryNetwork.Link;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Everything a simulated run does, drawn from one seed: cluster size, configuration, engines,
 * the network's background faults, a timeline of fault events, and the workload. The same seed
 * always gives the same plan, so a failing run replays exactly.
 */
final class FaultPlan {

  static final long MS = 1_000_000L;
  static final long S = 1_000 * MS;
  static final int VOCABULARY = 1000;
  static final int BLOCK = 16;

  enum Kind { PARTITION, ONE_WAY_CUT, DELAY_SPIKE, LOSS_BURST, CRASH, PAUSE, REPLAY }

  /** A fault that starts at {@code atNanos} and heals {@code forNanos} later. */
  record Fault(Kind kind, long atNanos, long forNanos, List<Integer> sideA, List<Integer> sideB,
      long spikeDelayNanos, double lossBurst) {}

  /**
   * One client request: submitted at {@code atNanos} to a random live node, in the cache scope
   * {@code scopes[scope]} (0: the default scope).
   */
  record Submission(long atNanos, int topic, int suffixLength, long suffixSeed, int maxTokens,
      double temperature, long sampleSeed, int nodePick, int scope, Stops stops) {}

  /**
   * The stops of a submission: {@code tokenAt}, if not -1, makes the token its output has at that
   * index (without stops) a stop token id, so the output ends at its first occurrence; a stop
   * string the simulated engine has no text for, so it changes nothing but the FORWARD's
   * version (4).
   */
  record Stops(int tokenAt, boolean string) {
    static final Stops NONE = new Stops(-1, false);

    boolean any() {
      return tokenAt >= 0 || string;
    }
  }

  /** The stop string of submissions with one. */
  static final String STOP_STRING = "\n\n";

  /**
   * The scopes requests may carry: the default first, then LoRA adapters, cache salts and
   * both. Prompts do not depend on the scope, so requests of different scopes share their
   * topics' prefixes, and a prefix credited to the wrong scope shows.
   */
  static final CacheScope[] SCOPES = {
      CacheScope.DEFAULT,
      CacheScope.adapter("lora-a"),
      CacheScope.adapter("lora-b"),
      CacheScope.salt("tenant-1"),
      CacheScope.of("lora-a", "tenant-2"),
      CacheScope.salt("tenant-3"),
  };

  final long seed;
  final int nodes;
  final RouterConfig config;
  final Link baseLink;
  final long faultPhaseNanos;
  final int topics;
  final int[] topicLength;
  final long topicSeedBase;
  final long[] engineCapacityTokens;
  final int[] engineSlots;
  final int[] slowFactor;
  final double[] failureProbability;
  final double[] stallProbability;
  final long maxStallNanos;
  final List<Fault> faults = new ArrayList<>();
  final List<Submission> submissions = new ArrayList<>();
  /** Share of requests drawn with a scope other than the default. */
  final double scopedShare;
  /** Share of requests with stops (a stop token id from their output, a stop string, both). */
  final double stopShare;
  /** How many of {@link #SCOPES} after the default this run's scoped requests use. */
  final int scopesUsed;
  /**
   * A node whose first incarnation runs a version from before scopes (it rejects scoped
   * FORWARDs as an unknown version; a restart upgrades it), or -1: a rolling upgrade.
   */
  final int beforeScopes;
  /**
   * Nodes whose engine publishes no cache events, so that their local tree is self-managed
   * (it records the prompts the node executed and applies LRU at its capacity): none, some or
   * all nodes of a run.
   */
  final boolean[] selfManaged;
  /** A self-managed node's tree capacity in tokens (a share of its engine's); else 0. */
  final long[] treeCapacityTokens;
  /**
   * Model ids: {@link #NO_MODEL_IDS} (every node's is empty, as before model ids), {@link
   * #ONE_MODEL_ID} (every node has the same), or the index of the node that serves another
   * model: its model id differs, and its engine answers every prompt differently (another
   * vocabulary), so an answer it gave a request of another node, or another node gave one of
   * its requests, shows as a wrong answer.
   */
  final int otherModel;
  /** Whether the engine stall timeout is short (well under the runs' engine stalls). */
  final boolean shortStallTimeout;
  /**
   * Engine outages: when node {@code i}'s engine starts failing every request it is given (a
   * retryable failure: its server down), or -1 for none; it answers again from {@link
   * #outageUntil}, within the fault phase.
   */
  final long[] outageFrom;
  final long[] outageUntil;
  /**
   * How long each failure of node {@code i}'s outage takes: -1 none (the failed future is
   * returned at once, as a client whose connection is refused may), 1 ms, or 20-1,000 ms (a
   * proxy's slow 502, a connect timeout).
   */
  final long[] outageFailNanos;
  /** Whether any engine of the run has an outage. */
  final boolean outage;
  /**
   * Whether each restart of a node starts a gossip generation {@link #stepBackMicros} below the
   * last one configured for it (its clock stepped back between the two starts), which its peers
   * still know; else the generations are the nodes' clocks at build, which grow.
   */
  final boolean steppedBack;
  /** How far below the last one each restart's generation is, in microseconds; 0 if none. */
  final long stepBackMicros;
  /**
   * The share of restarts that bring a node back at a new address (a rescheduled pod with a new
   * IP address): 0, 1/2 or every restart; the others bring it back at the address it had.
   */
  final double newAddressShare;
  /** The seed of the draws {@link #restartsAtNewAddress} makes. */
  private final long newAddressSeed;
  static final int NO_MODEL_IDS = -1;
  static final int ONE_MODEL_ID = -2;

  /** Node {@code node}'s model id. */
  String modelIdOf(int node) {
    return otherModel == NO_MODEL_IDS ? "" : node == otherModel ? "model-b" : "model-a";
  }

  /** The vocabulary of node {@code node}'s engine: another for the node of another model. */
  int vocabularyOf(int node) {
    return node == otherModel ? VOCABULARY + 7 : VOCABULARY;
  }

  FaultPlan(long seed) {
    this(seed, true);
  }

  /**
   * The plan of {@code seed}; without {@code newAddresses}, every restart brings its node back
   * at the address it had, as in the plans drawn before restarts at new addresses: the run the
   * seed gave then.
   */
  FaultPlan(long seed, boolean newAddresses) {
    this.seed = seed;
    SplittableRandom r = new SplittableRandom(seed ^ 0x6A09E667F3BCC908L);
    nodes = r.nextInt(8) == 0 ? 8 + r.nextInt(9) : 3 + r.nextInt(5);
    int low = 1 + r.nextInt(3);
    int high = low + 1 + r.nextInt(5);
    long gossipMs = 100 + r.nextInt(200);
    long suspectMs = gossipMs * (4 + r.nextInt(6));
    RouterConfig drawn = RouterConfig.builder()
        .blockSize(BLOCK)
        .treeCapacityTokens(1 << 14)
        .policy(r.nextInt(5) < 3 ? RoutingPolicy.COST_AWARE : RoutingPolicy.LONGEST_PREFIX)
        .hopLimit(r.nextInt(5) == 0 ? 2 : 1)
        .engineTimeout(Duration.ofSeconds(r.nextInt(3) == 0 ? 3 + r.nextInt(10) : 600))
        .watermarks(low, high)
        .forwardTimeout(Duration.ofMillis(20 + r.nextInt(80)), Duration.ofMillis(1500 + r.nextInt(6000)))
        .busyCooldown(Duration.ofMillis(100 + r.nextInt(900)))
        .failureCooldown(Duration.ofMillis(300 + r.nextInt(2000)))
        .initialPrefillNanosPerToken(100_000 + r.nextInt(200_000))
        .forwardMargin(0.05 * r.nextInt(3), Duration.ofNanos(r.nextInt(500_000)))
        .coldPlacement(r.nextBoolean())
        .gossip(Duration.ofMillis(gossipMs), 1 + r.nextInt(3))
        .peerTimeouts(Duration.ofMillis(suspectMs), Duration.ofMillis(suspectMs * (2 + r.nextInt(3))))
        .build();
    double[] losses = {0, 0, 0.01, 0.05, 0.2, 0.5};
    double[] dups = {0, 0, 0.05, 0.3};
    double[] reorders = {0, 0.1, 0.5};
    baseLink = new Link(Duration.ofNanos(1000L * (100 + r.nextInt(5000))), Duration.ofNanos(1000L * r.nextInt(3000)),
        losses[r.nextInt(losses.length)], dups[r.nextInt(dups.length)],
        reorders[r.nextInt(reorders.length)]);
    faultPhaseNanos = (6 + r.nextInt(9)) * S;
    topics = 2 + r.nextInt(8);
    topicLength = new int[topics];
    for (int i = 0; i < topics; i++) {
      topicLength[i] = BLOCK * (2 + r.nextInt(14));
    }
    topicSeedBase = r.nextLong();
    engineCapacityTokens = new long[nodes];
    engineSlots = new int[nodes];
    slowFactor = new int[nodes];
    failureProbability = new double[nodes];
    stallProbability = new double[nodes];
    double[] fails = {0, 0, 0, 0.02, 0.1};
    double[] stalls = {0, 0, 0.05, 0.3};
    for (int i = 0; i < nodes; i++) {
      engineCapacityTokens[i] = BLOCK * (64L + r.nextInt(512));
      engineSlots[i] = 1 + r.nextInt(3);
      slowFactor[i] = r.nextInt(6) == 0 ? 2 + r.nextInt(7) : 1;
      failureProbability[i] = fails[r.nextInt(fails.length)];
      stallProbability[i] = stalls[r.nextInt(stalls.length)];
    }
    maxStallNanos = (1 + r.nextInt(10)) * S;
    int faultCount = r.nextInt(16);
    for (int f = 0; f < faultCount; f++) {
      Kind kind = Kind.values()[r.nextInt(Kind.values().length)];
      long at = r.nextLong(faultPhaseNanos - S);
      long len = 200 * MS + r.nextLong(6 * S);
      List<Integer> a = new ArrayList<>();
      List<Integer> b = new ArrayList<>();
      for (int i = 0; i < nodes; i++) {
        (r.nextBoolean() ? a : b).add(i);
      }
      if (a.isEmpty() || b.isEmpty()) {
        a.clear();
        b.clear();
        int x = r.nextInt(nodes);
        a.add(x);
        for (int i = 0; i < nodes; i++) {
          if (i != x) {
            b.add(i);
          }
        }
      }
      faults.add(new Fault(kind, at, len, a, b, (50 + r.nextInt(2000)) * MS,
          0.5 + r.nextDouble() * 0.5));
    }
    // scopes come from a stream of their own, so every other draw of a seed is what it was
    // before requests had scopes
    SplittableRandom sr = new SplittableRandom(seed ^ 0x3C6EF372FE94F82BL);
    double[] shares = {0, 0.25, 0.5, 0.75};
    scopedShare = shares[sr.nextInt(shares.length)];
    scopesUsed = 1 + sr.nextInt(SCOPES.length - 1);
    beforeScopes = scopedShare > 0 && sr.nextInt(4) == 0 ? sr.nextInt(nodes) : -1;
    // and stops from a third, for the same reason
    SplittableRandom stopRandom = new SplittableRandom(seed ^ 0x1B873593CC9E2D51L);
    double[] stopShares = {0.1, 0.3, 0.5};
    stopShare = stopShares[stopRandom.nextInt(stopShares.length)];
    // and which nodes run self-managed trees from a fourth: a run without any is the run the
    // seed gave before self-managed nodes were drawn
    SplittableRandom managed = new SplittableRandom(seed ^ 0x510E527FADE682D1L);
    selfManaged = new boolean[nodes];
    treeCapacityTokens = new long[nodes];
    int which = managed.nextInt(3); // none, some, all
    // in quarters of the engine's capacity: below it (the tree forgets what the engine still
    // holds), at it (as a deployment sets it), above it (the tree credits what the engine lost);
    // or 1-4 blocks, less than most prompts (the least the configuration accepts is one block)
    long[] quarters = {1, 2, 4, 8, 0};
    for (int i = 0; i < nodes; i++) {
      selfManaged[i] = which == 2 || (which == 1 && managed.nextBoolean());
      long q = quarters[managed.nextInt(quarters.length)];
      long blocks = 1 + managed.nextInt(4);
      if (selfManaged[i]) {
        treeCapacityTokens[i] = q > 0 ? engineCapacityTokens[i] * q / 4 : blocks * BLOCK;
      }
    }
    // and model ids from a fifth: a run without any is the run the seed gave before model ids
    SplittableRandom models = new SplittableRandom(seed ^ 0x9B05688C2B3E6C1FL);
    int m = models.nextInt(4);
    otherModel = m < 2 ? NO_MODEL_IDS : m == 2 ? ONE_MODEL_ID : models.nextInt(nodes);
    // and the engine stall timeout from a sixth: the default one (30 s, longer than any run's
    // silence here) gives the run the seed gave before engines were watched; a short one makes
    // engine pauses, stalled executions, slow nodes and long queues look stalled
    SplittableRandom watch = new SplittableRandom(seed ^ 0xBB67AE8584CAA73BL);
    int k = watch.nextInt(3);
    shortStallTimeout = k > 0;
    long stallMillis = k == 0 ? 0
        : k == 1 ? 100 + watch.nextInt(400) : 500 + watch.nextInt(2500);
    // and engine outages and the failure limit from a seventh: a seed that draws no outage and
    // the default limit (3) is the run it was before outages were drawn
    SplittableRandom down = new SplittableRandom(seed ^ 0xA54FF53A5F1D36F1L);
    int[] limits = {3, 3, 1, 0};
    int limit = limits[down.nextInt(limits.length)];
    outageFrom = new long[nodes];
    outageUntil = new long[nodes];
    outageFailNanos = new long[nodes];
    java.util.Arrays.fill(outageFrom, -1);
    outage = down.nextBoolean();
    if (outage) {
      int spread = down.nextInt(3); // one engine, each with probability 1/2, every engine
      int one = down.nextInt(nodes);
      for (int i = 0; i < nodes; i++) {
        boolean out = spread == 2 || (spread == 1 ? down.nextBoolean() : i == one);
        long from = down.nextLong(faultPhaseNanos - S);
        long len = 500 * MS + down.nextLong(6 * S);
        int how = down.nextInt(3);
        long failNanos = how == 0 ? -1 : how == 1 ? MS : (20 + down.nextInt(981)) * MS;
        if (out) {
          outageFrom[i] = from;
          outageUntil[i] = Math.min(faultPhaseNanos, from + len);
          outageFailNanos[i] = failNanos;
        }
      }
    }
    // and stepped-back generations from an eighth: a seed that draws none is the run it was
    SplittableRandom clocks = new SplittableRandom(seed ^ 0x510E527FADE682D1L);
    steppedBack = clocks.nextInt(4) == 0;
    stepBackMicros = steppedBack ? 1 + clocks.nextLong(1_000_000_000L) : 0;
    // and restarts at a new address from a ninth: a seed that draws none is the run it was
    SplittableRandom moves = new SplittableRandom(seed ^ 0x1F83D9ABFB41BD6BL);
    double[] moveShares = {0, 0.5, 1};
    double moveShare = moveShares[moves.nextInt(moveShares.length)];
    newAddressShare = newAddresses ? moveShare : 0;
    newAddressSeed = moves.nextLong();
    if (limit != drawn.engineFailureLimit()) {
      drawn = drawn.toBuilder().engineFailureLimit(limit).build();
    }
    config = k == 0 ? drawn : drawn.toBuilder().engineStallTimeout(Duration.ofMillis(
        stallMillis)).build();
    int requests = 20 + r.nextInt(120);
    for (int q = 0; q < requests; q++) {
      int scope = sr.nextDouble() < scopedShare ? 1 + sr.nextInt(scopesUsed) : 0;
      // drawn in the order they were drawn as constructor arguments
      long at = r.nextLong(faultPhaseNanos);
      int topic = zipf(r, topics);
      int suffixLength = r.nextInt(48);
      long suffixSeed = r.nextLong();
      int maxTokens = 1 + r.nextInt(4);
      double temperature = r.nextInt(3) == 0 ? 0.7 : 0.0;
      long sampleSeed = r.nextLong();
      int nodePick = r.nextInt(1 << 20);
      Stops stops = Stops.NONE;
      if (stopRandom.nextDouble() < stopShare) {
        int kind = stopRandom.nextInt(3); // a stop token id, a stop string, or both
        stops = new Stops(kind == 1 ? -1 : stopRandom.nextInt(maxTokens), kind >= 1);
      }
      submissions.add(new Submission(at, topic, suffixLength, suffixSeed, maxTokens, temperature,
          sampleSeed, nodePick, scope, stops));
    }
    submissions.sort((x, y) -> Long.compare(x.atNanos(), y.atNanos()));
  }

  private static int zipf(SplittableRandom r, int n) {
    // P(k) roughly 1/(k+1): pick uniformly below a uniformly chosen bound
    return r.nextInt(r.nextInt(n) + 1);
  }

  /** The prompt tokens of a submission: its topic's shared prefix, then a private suffix. */
  int[] prompt(Submission s) {
    int plen = topicLength[s.topic()];
    int[] t = new int[plen + s.suffixLength() + 1];
    SplittableRandom tr = new SplittableRandom(topicSeedBase + s.topic());
    for (int i = 0; i < plen; i++) {
      t[i] = tr.nextInt(VOCABULARY);
    }
    SplittableRandom sr = new SplittableRandom(s.suffixSeed());
    for (int i = plen; i < t.length; i++) {
      t[i] = sr.nextInt(VOCABULARY);
    }
    return t;
  }

  /**
   * Whether the {@code restart}-th restart of node {@code node} (1 for its first) brings it back
   * at a new address: drawn for the node and the restart alone, so the answer does not depend
   * on the order the run meets restarts in.
   */
  boolean restartsAtNewAddress(int node, int restart) {
    if (newAddressShare == 0) {
      return false;
    }
    SplittableRandom r = new SplittableRandom(newAddressSeed + node * 1_000_003L + restart);
    return r.nextDouble() < newAddressShare;
  }

  /** How many nodes run self-managed trees. */
  int selfManagedCount() {
    int c = 0;
    for (boolean b : selfManaged) {
      c += b ? 1 : 0;
    }
    return c;
  }

  private String selfManagedToString() {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < nodes; i++) {
      if (selfManaged[i]) {
        sb.append(sb.length() == 0 ? " selfManaged=" : ",").append('n').append(i).append(':')
            .append(treeCapacityTokens[i]);
      }
    }
    return sb.toString();
  }

  private String outagesToString() {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < nodes; i++) {
      if (outageFrom[i] >= 0) {
        sb.append(sb.length() == 0 ? " outages=" : ",").append('n').append(i).append(':')
            .append(outageFrom[i] / MS).append('-').append(outageUntil[i] / MS).append("ms/")
            .append(outageFailNanos[i] < 0 ? "at-once" : outageFailNanos[i] / MS + "ms");
      }
    }
    return sb.toString();
  }

  @Override
  public String toString() {
    return "seed=" + seed + " nodes=" + nodes + " requests=" + submissions.size() + " faults="
        + faults.size() + " scoped=" + scopedShare + "x" + scopesUsed + " stops=" + stopShare
        + (beforeScopes >= 0 ? " beforeScopes=n" + beforeScopes : "") + selfManagedToString()
        + (otherModel == ONE_MODEL_ID ? " modelIds=one" : otherModel >= 0
            ? " modelIds=n" + otherModel + "-other" : "")
        + (shortStallTimeout ? " engineStallTimeout=" + config.engineStallTimeout() : "")
        + (config.engineFailureLimit() != 3 ? " engineFailureLimit="
            + config.engineFailureLimit() : "")
        + outagesToString()
        + (steppedBack ? " generationsSteppedBack=" + stepBackMicros + "us" : "")
        + (newAddressShare > 0 ? " restartsAtNewAddress=" + newAddressShare : "")
        + " link=" + baseLink
        + " config=" + config;
  }
}
