package io.github.prefixrouter.bench.gossip;

import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.bench.ResultsJson;
import io.github.prefixrouter.internal.gossip.GossipConfig;
import io.github.prefixrouter.internal.gossip.GossipCounter;
import io.github.prefixrouter.internal.gossip.GossipEngine;
import io.github.prefixrouter.internal.gossip.PeerView;
import io.github.prefixrouter.internal.tree.BlockEventListener;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.workload.FreshQuestions;
import io.github.prefixrouter.workload.MmluPrompts;
import io.github.prefixrouter.workload.PromptSource;
import io.github.prefixrouter.workload.SyntheticMmluPrompts;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.function.Function;

/**
 * Gossip bandwidth and dissemination, in simulated time, driving the real library code.
 *
 * <ol>
 *   <li><b>Bandwidth.</b> N nodes, each with a self-managed prefix tree (LRU at its token
 *       capacity) executing MMLU 5-shot prompts (or the MMLU-shaped generator; or, for the
 *       {@code --fresh-capacity-tokens} cases, {@link FreshQuestions}: a new question on every
 *       request, so large caches churn) at a given rate. The tree's block events feed, side by
 *       side on the same caches, the delta protocol ({@link GossipEngine}), the same engine in
 *       full-snapshot mode ({@code GossipConfig.fullSnapshotsOnly}), and three
 *       own-snapshot-every-round baselines ({@link FullSnapshotGossip}: to {@code fanout} peers
 *       with 8-byte hashes or 4-byte fingerprints, to all peers with fingerprints). After a
 *       warm-up that fills the caches, gossip bytes per node per second and replica staleness
 *       are measured for each, and compared with the bytes a KV-cache transfer of the same newly
 *       cached prefixes would move.
 *   <li><b>Dissemination.</b> For each cluster size, a formed cluster gets single-block changes
 *       at random nodes; the time until 99% (and 100%) of the other nodes' replicas hold the
 *       block, in gossip rounds, against the target 2·log2(N)+3.
 *   <li><b>Message size.</b> For each of the {@code --message-size-nodes} clusters and each
 *       {@code --message-bytes} cap, engines configured as a node's ({@link #messageSize}):
 *       idle traffic, the time for a burst of {@value #BURST_BLOCKS} block changes at one node to
 *       reach every other, the time for a node joining to get that node's full replica (a
 *       snapshot), and the largest message sent, with each figure over the 64 KiB run's.
 * </ol>
 *
 * <p>Writes {@code benchmarks/target/results/gossip.json}. Flags: {@code --mmlu DIR},
 * {@code --nodes N}, {@code --rate R} (requests/s/node), {@code --capacity-tokens T},
 * {@code --warmup-s S}, {@code --measure-s S}, {@code --sizes 4,16,...}, {@code --fanout F},
 * {@code --seed S}, {@code --quick}, {@code --out FILE}, {@code --fresh-capacity-tokens T,...}
 * (empty: none), {@code --snapshot-mode-measure-s S} (0: skip the full-snapshot engine),
 * {@code --delay-ms D}, {@code --skip-dissemination}, {@code --message-bytes 1k,64k,1m} (the
 * gossip message cap, {@code messageByteCap}: every bandwidth case and cluster size is run once
 * per cap, side by side on the same seed; default 64k, the default cap),
 * {@code --message-size-nodes 16,256} (the message-size runs' clusters; empty: none; 2 to
 * {@link #MAX_MESSAGE_SIZE_NODES}). {@code --quick} changes the defaults of
 * {@code --sizes}, {@code --capacity-tokens}, {@code --fresh-capacity-tokens} and
 * {@code --measure-s}; a flag given wins over it wherever it stands. An unknown flag, one given
 * twice or without its value, a value that is not a number, a {@code --measure-s} or
 * {@code --warmup-s} below 1, a negative {@code --snapshot-mode-measure-s}, any of the three
 * above {@link #MAX_SECONDS} (86,400, a day), a {@code --nodes}
 * or {@code --sizes} below 2 or above {@link #MAX_NODES} (4,096, the peers a gossip engine
 * holds), a {@code --fanout} not 1 to 64, a negative {@code --rate} or
 * {@code --delay-ms}, a {@code --rate} above {@link #MAX_RATE} (10,000 requests/s per node) or a
 * {@code --delay-ms} above {@link #MAX_DELAY_MS} (60,000), a {@code --capacity-tokens} or
 * {@code --fresh-capacity-tokens} below one block (16 tokens), or a {@code --message-bytes} that
 * is not a list of sizes (bytes, or a number with {@code k} or {@code m}) from 1k to 16m, each
 * once, stops it with {@code error: ...} and exit code 2. A figure of gossip.json that has no value (a ratio over a zero:
 * no full snapshots, no blocks cached at {@code --rate 0}) is null, never NaN or Infinity.
 */
public final class GossipBenchmarkMain {

  /** KV bytes per token assumed for a 0.5B-class model (Qwen2.5-0.5B): 24 x 2 x 2 x 64 x 2. */
  static final long KV_BYTES_PER_TOKEN = 24L * 2 * 2 * 64 * 2;

  static final int BLOCK = 16;

  /** How long a dissemination run watches one change, in gossip rounds. */
  static final int DISSEMINATION_ROUNDS = 100;

  /**
   * The largest cluster ({@code --nodes}, {@code --sizes}): the peers a gossip engine of the
   * runs holds (its default {@code maxPeers}); a larger cluster would never form.
   */
  static final int MAX_NODES = GossipConfig.builder().build().maxPeers();

  /**
   * The highest {@code --rate}, requests per second per node: far above any sensible run, whose
   * simulated requests would otherwise run (practically) forever.
   */
  static final double MAX_RATE = 10_000;

  /** The longest {@code --delay-ms}: a minute, whose nanoseconds are far from overflowing. */
  static final double MAX_DELAY_MS = 60_000;

  /**
   * The most simulated seconds of {@code --measure-s}, {@code --warmup-s} and
   * {@code --snapshot-mode-measure-s}: a day.
   */
  static final int MAX_SECONDS = 86_400;

  /**
   * The largest cluster of the message-size runs ({@code --message-size-nodes}): the peers a
   * node tracks by default ({@code RouterConfig.maxPeers}), which those runs are configured as.
   */
  static final int MAX_MESSAGE_SIZE_NODES = 1_023;

  private GossipBenchmarkMain() {}

  /**
   * The settings of a run (see the class notes for the flags). {@code warmup} and
   * {@code snapshotModeMeasure} are -1 for automatic.
   */
  record Options(Path mmlu, int nodes, double rate, long[] capacities, long[] freshCapacities,
      int snapshotModeMeasure, int warmup, int measure, int fanout, long seed, double delayMs,
      int[] sizes, int[] messageBytes, int[] messageSizeNodes, Path out) {

    private static final Set<String> VALUE_FLAGS = Set.of("--mmlu", "--nodes", "--rate",
        "--capacity-tokens", "--fresh-capacity-tokens", "--snapshot-mode-measure-s",
        "--warmup-s", "--measure-s", "--fanout", "--seed", "--delay-ms", "--out", "--sizes",
        "--message-bytes", "--message-size-nodes");

    /**
     * Parses the command line: the defaults, then {@code --quick}'s, then the flags given, so
     * that a flag given wins over {@code --quick} wherever it stands.
     *
     * @throws IllegalArgumentException for an unknown flag, a flag without its value or given
     *     twice, a value that is not a number, a {@code --measure-s} or {@code --warmup-s} below 1,
     *     a negative {@code --snapshot-mode-measure-s}, a {@code --nodes}
     *     below 2 or above {@link #MAX_NODES}, a {@code --fanout} not 1 to 64, a negative {@code --rate} or
     *     {@code --delay-ms}, a capacity below one block, a cluster size below 2 or above {@link #MAX_NODES},
     *     {@code --sizes} with {@code --skip-dissemination}, a {@code --message-bytes} that is
     *     not a list of sizes from 1k to 16m, each once, or a {@code --message-size-nodes} below
     *     2 or above {@link #MAX_MESSAGE_SIZE_NODES}, or an {@code --out} that is a directory or
     *     lies under a file ({@link Flags#output})
     */
    static Options parse(String[] args) {
      Flags f = Flags.parse(args, Set.of("--quick", "--skip-dissemination"), VALUE_FLAGS);
      if (f.has("--sizes") && f.has("--skip-dissemination")) {
        throw new IllegalArgumentException("--sizes and --skip-dissemination contradict");
      }
      boolean quick = f.has("--quick");
      // -1 stands for the automatic values below: a value given that is no length was taken for
      // it (--warmup-s 0 warmed up for 120 s to an hour per case)
      if (f.has("--warmup-s") && f.whole("--warmup-s", 1) < 1) {
        throw new IllegalArgumentException("--warmup-s must be at least 1, not "
            + f.string("--warmup-s", null) + " (leave it out for the automatic warm-up)");
      }
      if (f.has("--snapshot-mode-measure-s") && f.whole("--snapshot-mode-measure-s", 0) < 0) {
        throw new IllegalArgumentException("--snapshot-mode-measure-s must be 0 (skip) or more, "
            + "not " + f.string("--snapshot-mode-measure-s", null));
      }
      if (f.has("--measure-s") && f.whole("--measure-s", 1) < 1) {
        throw new IllegalArgumentException("--measure-s must be at least 1, not "
            + f.string("--measure-s", null) + " (every rate is over the measured seconds)");
      }
      for (String flag : List.of("--warmup-s", "--snapshot-mode-measure-s", "--measure-s")) {
        if (f.has(flag) && f.whole(flag, 0) > MAX_SECONDS) {
          throw new IllegalArgumentException(flag + " must be at most " + MAX_SECONDS
              + " (a day of simulated time), not " + f.string(flag, null));
        }
      }
      // a cluster of one gossips with no one; GossipConfig takes a fanout of 1 to 64. Above
      // MAX_NODES, it ran out of memory building the nodes, or on a cluster that could never form
      int nodes = f.atLeast("--nodes", 16, 2, MAX_NODES);
      int fanout = f.atLeast("--fanout", 3, 1);
      if (fanout > 64) {
        throw new IllegalArgumentException("--fanout must be 1 to 64, not " + fanout);
      }
      double rate = f.number("--rate", 10);
      if (rate < 0 || rate > MAX_RATE) {
        throw new IllegalArgumentException("--rate must be 0 or more and at most "
            + (long) MAX_RATE + ", not " + f.string("--rate", null));
      }
      // one-way delay of the bandwidth runs (plus up to half as much jitter)
      double delayMs = f.number("--delay-ms", 2);
      if (delayMs < 0 || delayMs > MAX_DELAY_MS) {
        throw new IllegalArgumentException("--delay-ms must be 0 or more and at most "
            + (long) MAX_DELAY_MS + ", not " + f.string("--delay-ms", null));
      }
      return new Options(
          f.has("--mmlu") ? Path.of(f.string("--mmlu", null)) : null,
          nodes,
          rate,
          f.wholes("--capacity-tokens", quick ? "131072" : "131072,1048576", BLOCK,
              "one block", Long.MAX_VALUE),
          f.wholes("--fresh-capacity-tokens", quick ? "" : "1048576", BLOCK, "one block",
              Long.MAX_VALUE),
          // automatic: 30 s, 10 s above 262,144 tokens
          f.has("--snapshot-mode-measure-s")
              ? value(f, "--snapshot-mode-measure-s", null, Integer::parseInt) : -1,
          // automatic: long enough to fill the caches
          f.has("--warmup-s") ? value(f, "--warmup-s", null, Integer::parseInt) : -1,
          value(f, "--measure-s", quick ? "60" : "120", Integer::parseInt),
          fanout,
          value(f, "--seed", "1", Long::parseLong),
          delayMs,
          f.has("--skip-dissemination") ? new int[0]
              : java.util.Arrays.stream(f.wholes("--sizes",
                  quick ? "4,16,64,256" : "4,16,64,256,1024", 2, "a cluster of one gossips with"
                  + " no one", MAX_NODES)).mapToInt(Math::toIntExact).toArray(),
          f.sizes("--message-bytes", "64k", GossipConfig.MIN_MESSAGE_BYTE_CAP,
              GossipConfig.MAX_MESSAGE_BYTE_CAP),
          java.util.Arrays.stream(f.wholes("--message-size-nodes", "16,256", 2,
              "a cluster of one gossips with no one", MAX_MESSAGE_SIZE_NODES))
              .mapToInt(Math::toIntExact).toArray(),
          f.has("--out") ? Flags.output("--out", Path.of(f.string("--out", null)), false)
              : ResultsJson.resultsDir(GossipBenchmarkMain.class).resolve("gossip.json"));
    }

    private static <T> T value(Flags f, String flag, String dflt, Function<String, T> parse) {
      String v = f.string(flag, dflt);
      try {
        return parse.apply(v);
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(flag + ": not a number: '" + v + "'");
      }
    }
  }

  public static void main(String[] args) throws IOException {
    Options o = Flags.parseOrExit("usage: benchmarks/run gossip [flags]\n"
        + "  gossip bandwidth and dissemination", args, Options::parse);
    Path mmlu = o.mmlu();
    int nodes = o.nodes();
    double rate = o.rate();
    long[] capacities = o.capacities();
    long[] freshCapacities = o.freshCapacities();
    int snapshotModeMeasure = o.snapshotModeMeasure();
    int warmup = o.warmup();
    int measure = o.measure();
    int fanout = o.fanout();
    long seed = o.seed();
    double delayMs = o.delayMs();
    int[] sizes = o.sizes();
    int[] caps = o.messageBytes();
    Path out = o.out();
    PromptSource prompts;
    try {
      prompts = prompts(mmlu, seed);
    } catch (IllegalArgumentException | UncheckedIOException e) {
      System.err.println("error: --mmlu " + mmlu + ": " + e.getMessage());
      System.exit(2);
      return;
    }
    System.out.println("workload: " + prompts.description());
    StringBuilder json = new StringBuilder("{\n");
    json.append("  \"workload\": \"").append(esc(prompts.description())).append("\",\n");
    json.append("  \"kvBytesPerToken\": ").append(KV_BYTES_PER_TOKEN).append(",\n");
    json.append("  \"kvModel\": \"Qwen2.5-0.5B: 24 layers x 2 (K,V) x 2 KV heads x 64 dims x 2 B\",\n");
    json.append("  \"bandwidth\": [\n");
    List<Case> cases = new ArrayList<>();
    for (long c : capacities) {
      for (int cap : caps) {
        cases.add(new Case(c, false, cap));
      }
    }
    for (long c : freshCapacities) {
      for (int cap : caps) {
        cases.add(new Case(c, true, cap));
      }
    }
    for (int k = 0; k < cases.size(); k++) {
      Case c = cases.get(k);
      // about twice the time the cache needs to fill with ~75 new tokens per request
      int w = warmup > 0 ? warmup
          : (int) Math.max(120, Math.min(3_600, 2 * c.capacityTokens() / (rate * 75)));
      int sm = snapshotModeMeasure >= 0 ? Math.min(snapshotModeMeasure, measure)
          : Math.min(measure, c.capacityTokens() > 262_144 ? 10 : 30);
      bandwidth(json, prompts, c, nodes, rate, w, measure, sm, fanout, seed,
          (long) (delayMs * 1e6));
      json.append(k + 1 < cases.size() ? ",\n" : "\n");
    }
    json.append("  ],\n  \"dissemination\": [\n");
    for (int k = 0; k < sizes.length; k++) {
      for (int j = 0; j < caps.length; j++) {
        // the same seed for every cap of a size: the caps are compared on the same changes
        dissemination(json, sizes[k], fanout, seed + k, 0, caps[j]);
        json.append(k + 1 < sizes.length || j + 1 < caps.length ? ",\n" : "\n");
      }
    }
    json.append("  ],\n  \"messageSize\": [\n");
    int[] msNodes = o.messageSizeNodes();
    for (int k = 0; k < msNodes.length; k++) {
      messageSizes(json, msNodes[k], caps, seed + k, k + 1 < msNodes.length);
    }
    json.append("  ]\n}\n");
    Files.createDirectories(out.toAbsolutePath().getParent());
    Files.writeString(out, json);
    System.out.println("wrote " + out);
  }

  /**
   * The prompts of the bandwidth runs: the MMLU data set in {@code mmlu}, or the MMLU-shaped
   * generator when no directory is given.
   *
   * @throws IllegalArgumentException if {@code mmlu} is given but cannot be loaded (missing, not
   *     an MMLU directory, or a bad file, named in the message): a given directory is used or
   *     is an error, never replaced by the generator
   * @throws UncheckedIOException if it cannot be read
   */
  static PromptSource prompts(Path mmlu, long seed) {
    return mmlu == null ? SyntheticMmluPrompts.create(seed) : MmluPrompts.load(mmlu);
  }

  // ------------------------------------------------------------------ bandwidth

  /** Counts blocks newly cached, to price a KV-cache transfer of the same prefixes. */
  static final class StoredCounter implements BlockEventListener {
    long stored;
    long evicted;

    @Override
    public synchronized void onStored(long[] blockHashes) {
      stored += blockHashes.length;
    }

    @Override
    public synchronized void onEvicted(long[] blockHashes) {
      evicted += blockHashes.length;
    }
  }

  /**
   * When each version of a node's block set came to be: registered on the tree after the
   * node's summary, it reads the summary's version after every block event.
   */
  static final class VersionHistory implements BlockEventListener {
    private final GossipEngine engine;
    private final SimNet net;
    private long[] times = new long[1_024];
    private long[] versions = new long[1_024];
    private int n;

    VersionHistory(GossipEngine engine, SimNet net) {
      this.engine = engine;
      this.net = net;
    }

    private void record() {
      long v = engine.localSummary().version();
      if (n > 0 && versions[n - 1] == v) {
        return;
      }
      if (n == times.length) {
        times = java.util.Arrays.copyOf(times, 2 * n);
        versions = java.util.Arrays.copyOf(versions, 2 * n);
      }
      times[n] = net.time.nanoTime();
      versions[n++] = v;
    }

    @Override
    public void onStored(long[] blockHashes) {
      record();
    }

    @Override
    public void onEvicted(long[] blockHashes) {
      record();
    }

    @Override
    public void onCleared() {
      record();
    }

    /** When the first version after {@code v} appeared, or -1 if none yet. */
    long firstAfterVersion(long v) {
      int i = firstAbove(versions, v);
      return i < n ? times[i] : -1;
    }

    /** When the first change after time {@code t} happened, or -1 if none yet. */
    long firstChangeAfter(long t) {
      int i = firstAbove(times, t);
      return i < n ? times[i] : -1;
    }

    /** Index of the first of the {@code n} recorded (ascending) values above {@code x}. */
    private int firstAbove(long[] ascending, long x) {
      int lo = 0;
      int hi = n;
      while (lo < hi) {
        int mid = (lo + hi) >>> 1;
        if (ascending[mid] > x) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      return lo;
    }
  }

  /**
   * Staleness of the replicas a variant keeps, sampled: for every (node, origin) pair, how long
   * ago the oldest change the node's replica lacks happened at the origin (0 when current).
   */
  static final class Staleness {
    final List<Double> samples = new ArrayList<>();

    void add(long nanos) {
      samples.add(nanos / 1e9);
    }

    double mean() {
      return samples.stream().mapToDouble(Double::doubleValue).average().orElse(0);
    }

    double quantile(double q) {
      if (samples.isEmpty()) {
        return 0;
      }
      double[] s = samples.stream().mapToDouble(Double::doubleValue).sorted().toArray();
      return s[Math.min(s.length - 1, (int) Math.floor(q * s.length))];
    }

    double current() {
      return samples.stream().filter(x -> x == 0).count() / (double) Math.max(1, samples.size());
    }

    String json() {
      return ResultsJson.format(
          "{\"meanSeconds\": %.3f, \"p50Seconds\": %.3f, \"p99Seconds\": %.3f,"
              + " \"fractionCurrent\": %.4f, \"samples\": %d}",
          mean(), quantile(0.5), quantile(0.99), current(), samples.size());
    }

    String text() {
      return String.format(Locale.ROOT, "mean %.2f s, p50 %.2f s, p99 %.2f s, %.1f%% current",
          mean(), quantile(0.5), quantile(0.99), 100 * current());
    }
  }

  /** Where the delta protocol's bytes go, per node per second over the measurement window. */
  static final GossipCounter[] BREAKDOWN = {
      GossipCounter.DIGEST_BYTES_SENT, GossipCounter.UPDATE_HEADER_BYTES_SENT,
      GossipCounter.OWN_DELTA_BYTES_SENT, GossipCounter.RELAYED_DELTA_BYTES_SENT,
      GossipCounter.SNAPSHOT_BYTES_SENT, GossipCounter.REDUNDANT_DELTA_BYTES_RECEIVED,
      GossipCounter.SNAPSHOT_STORE_NUMBER_BYTES_SENT};

  /**
   * A bandwidth case: cache capacity, whether every request asks a fresh question, and the
   * gossip message cap ({@code messageByteCap}) of every engine of the run.
   */
  record Case(long capacityTokens, boolean fresh, int messageBytes) {

    /** A case at the default cap, 64 KiB. */
    Case(long capacityTokens, boolean fresh) {
      this(capacityTokens, fresh, DEFAULT_MESSAGE_BYTES);
    }
  }

  /** The gossip message cap of a run without {@code --message-bytes}: the default, 64 KiB. */
  static final int DEFAULT_MESSAGE_BYTES = GossipConfig.builder().build().messageByteCap();

  /**
   * A gossip configuration of 1 s rounds and {@code fanout} with messages of up to
   * {@code messageBytes}, sending per exchange at most 1 MiB of snapshot chunks or one chunk
   * when the cap is larger, and at most 48 chunks (the default), as a node does with
   * {@code RouterConfig.gossipMessageBytes}.
   */
  static GossipConfig.Builder config(int fanout, int messageBytes) {
    return GossipConfig.builder().interval(Duration.ofSeconds(1)).fanout(fanout)
        .messageByteCap(messageBytes).snapshotBytesPerExchange(Math.max(1 << 20, messageBytes));
  }

  static void bandwidth(StringBuilder json, PromptSource prompts, Case c, int n, double rate,
      int warmupS, int measureS, int snapshotModeMeasureS, int fanout, long seed,
      long delayNanos) {
    long capacity = c.capacityTokens();
    FreshQuestions fresh = c.fresh() ? new FreshQuestions(prompts) : null;
    int cap = c.messageBytes();
    GossipConfig config = config(fanout, cap).build();
    // the same protocol answering every lagging peer with full snapshots instead of deltas; no
    // per-exchange snapshot cap, so that it keeps the delta protocol's freshness
    GossipConfig snapshotConfig = config(fanout, cap).fullSnapshotsOnly(true)
        .snapshotBytesPerExchange(1 << 30).snapshotChunksPerExchange(Integer.MAX_VALUE)
        .maxBlocksTotal(GossipConfig.MAX_BLOCKS_TOTAL).build();
    SimNet net = new SimNet(seed, delayNanos, delayNanos / 2, 0);
    List<PeerAddress> addrs = new ArrayList<>();
    List<PeerAddress> snapAddrs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      addrs.add(new PeerAddress("node-" + i, "sim:" + i));
      snapAddrs.add(new PeerAddress("node-" + i, "snap:" + i));
    }
    List<GossipEngine> engines = new ArrayList<>();
    List<GossipEngine> snaps = new ArrayList<>();
    List<VersionHistory> histories = new ArrayList<>();
    List<FullSnapshotGossip> fulls = new ArrayList<>();
    List<FullSnapshotGossip> fulls4 = new ArrayList<>();
    List<FullSnapshotGossip> fullsAll = new ArrayList<>();
    List<ConcurrentPrefixTree> trees = new ArrayList<>();
    List<StoredCounter> stored = new ArrayList<>();
    long s = 1_000_000_000L;
    int snapshotLeadS = Math.min(20, warmupS / 2);
    boolean snapshotMode = snapshotModeMeasureS > 0;
    for (int i = 0; i < n; i++) {
      PeerAddress a = addrs.get(i);
      PeerAddress sa = snapAddrs.get(i);
      GossipEngine e = new GossipEngine(a, 1, config, List.of(addrs.get(0)), net.time, net.time,
          new SplittableRandom(seed * 1_000 + i), () -> EngineLoad.IDLE,
          (to, p) -> net.send(a, to, p));
      GossipEngine se = new GossipEngine(sa, 1, snapshotConfig, List.of(snapAddrs.get(0)),
          net.time, net.time, new SplittableRandom(seed * 1_000 + i), () -> EngineLoad.IDLE,
          (to, p) -> net.send(sa, to, p));
      FullSnapshotGossip f = new FullSnapshotGossip(a, config.messageByteCap(), 8);
      FullSnapshotGossip f4 = new FullSnapshotGossip(a, config.messageByteCap(), 4);
      FullSnapshotGossip fa = new FullSnapshotGossip(a, config.messageByteCap(), 4,
          FullSnapshotGossip.TYPE_ALL_PEERS);
      f.clock(net.time::nanoTime);
      fa.clock(net.time::nanoTime);
      ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().blockSize(BLOCK)
          .capacityTokens(capacity).build();
      StoredCounter sc = new StoredCounter();
      VersionHistory vh = new VersionHistory(e, net);
      t.addListener(e.localSummary());
      t.addListener(vh);
      if (snapshotMode) {
        t.addListener(se.localSummary());
      }
      t.addListener(f);
      t.addListener(f4);
      t.addListener(fa);
      t.addListener(sc);
      net.register(a, (from, p) -> {
        if (p.length > 0 && (p[0] & 0xFF) == FullSnapshotGossip.typeFor(8)) {
          f.onMessage(from, p);
        } else if (p.length > 0 && (p[0] & 0xFF) == FullSnapshotGossip.typeFor(4)) {
          f4.onMessage(from, p);
        } else if (p.length > 0 && (p[0] & 0xFF) == FullSnapshotGossip.TYPE_ALL_PEERS) {
          fa.onMessage(from, p);
        } else {
          e.onMessage(from, p);
        }
      });
      net.register(sa, se::onMessage);
      engines.add(e);
      snaps.add(se);
      histories.add(vh);
      fulls.add(f);
      fulls4.add(f4);
      fullsAll.add(fa);
      trees.add(t);
      stored.add(sc);
      e.start();
      if (snapshotMode) {
        // started shortly before the window (it fills every replica within a few rounds) and
        // stopped after its own, possibly shorter, window: it is costly to simulate
        net.time.schedule((warmupS - snapshotLeadS) * s, se::start);
        net.time.schedule((warmupS + snapshotModeMeasureS) * s, se::stop);
      }
      List<PeerAddress> others = new ArrayList<>(addrs);
      others.remove(a);
      SplittableRandom fr = new SplittableRandom(seed * 7 + i);
      // the own-snapshot baselines' traffic depends only on the current set size, so they
      // start shortly before the measurement window, on the same caches
      net.time.schedule((warmupS - snapshotLeadS) * s,
          () -> scheduleFull(net, f, others, fanout, fr, config.interval().toNanos()));
      SplittableRandom fr4 = new SplittableRandom(seed * 7 + i);
      net.time.schedule((warmupS - snapshotLeadS) * s,
          () -> scheduleFull(net, f4, others, fanout, fr4, config.interval().toNanos()));
      SplittableRandom fra = new SplittableRandom(seed * 7 + i);
      net.time.schedule((warmupS - snapshotLeadS) * s,
          () -> scheduleFull(net, fa, others, n - 1, fra, config.interval().toNanos()));
      scheduleRequests(net, t, prompts, fresh, rate, new SplittableRandom(seed * 13 + i));
    }
    net.time.advanceBy(warmupS * s);
    long deltaBefore = sum(engines, GossipCounter.BYTES_SENT);
    long fullBefore = fulls.stream().mapToLong(f -> f.bytesSent).sum();
    long full4Before = fulls4.stream().mapToLong(f -> f.bytesSent).sum();
    long fullAllBefore = fullsAll.stream().mapToLong(f -> f.bytesSent).sum();
    long storedBefore = stored.stream().mapToLong(x -> x.stored).sum();
    long snapBefore = sum(engines, GossipCounter.SNAPSHOT_CHUNKS_SENT);
    long evictedBefore = stored.stream().mapToLong(x -> x.evicted).sum();
    long versionsBefore = engines.stream().mapToLong(e -> e.localSummary().version()).sum();
    long[] partsBefore = new long[BREAKDOWN.length];
    long[] snapPartsBefore = new long[BREAKDOWN.length];
    for (int k = 0; k < BREAKDOWN.length; k++) {
      partsBefore[k] = sum(engines, BREAKDOWN[k]);
      snapPartsBefore[k] = sum(snaps, BREAKDOWN[k]);
    }
    long snapBytesBefore = sum(snaps, GossipCounter.BYTES_SENT);
    Staleness deltaStale = new Staleness();
    Staleness snapStale = new Staleness();
    Staleness ownStale = new Staleness();
    Staleness allStale = new Staleness();
    double[] snapParts = new double[BREAKDOWN.length];
    double snapRate = 0;
    for (int sec = 0; sec < measureS; sec++) {
      net.time.advanceBy(s / 2);
      // sample once a second, half-way through, while the variants run side by side
      sampleStaleness(engines, histories, deltaStale);
      if (snapshotMode && sec < snapshotModeMeasureS) {
        sampleStaleness(snaps, histories, snapStale);
      }
      sampleOwnSnapshotStaleness(fulls, addrs, histories, net.time.nanoTime(), ownStale);
      sampleOwnSnapshotStaleness(fullsAll, addrs, histories, net.time.nanoTime(), allStale);
      net.time.advanceBy(s - s / 2);
      if (snapshotMode && sec + 1 == snapshotModeMeasureS) {
        for (int k = 0; k < BREAKDOWN.length; k++) {
          snapParts[k] = (sum(snaps, BREAKDOWN[k]) - snapPartsBefore[k]) / (double) n
              / snapshotModeMeasureS;
        }
        snapRate = (sum(snaps, GossipCounter.BYTES_SENT) - snapBytesBefore) / (double) n
            / snapshotModeMeasureS;
      }
    }
    double[] parts = new double[BREAKDOWN.length];
    for (int k = 0; k < BREAKDOWN.length; k++) {
      parts[k] = (sum(engines, BREAKDOWN[k]) - partsBefore[k]) / (double) n / measureS;
    }
    double deltaRate = (sum(engines, GossipCounter.BYTES_SENT) - deltaBefore) / (double) n / measureS;
    double fullRate = (fulls.stream().mapToLong(f -> f.bytesSent).sum() - fullBefore)
        / (double) n / measureS;
    double full4Rate = (fulls4.stream().mapToLong(f -> f.bytesSent).sum() - full4Before)
        / (double) n / measureS;
    double fullAllRate = (fullsAll.stream().mapToLong(f -> f.bytesSent).sum() - fullAllBefore)
        / (double) n / measureS;
    long storedBlocks = stored.stream().mapToLong(x -> x.stored).sum() - storedBefore;
    long evictedBlocks = stored.stream().mapToLong(x -> x.evicted).sum() - evictedBefore;
    double changesPerNode = (storedBlocks + evictedBlocks) / (double) n / measureS;
    double storesPerNode = storedBlocks / (double) n / measureS;
    double evictionsPerNode = evictedBlocks / (double) n / measureS;
    double versionsPerNode = (engines.stream().mapToLong(e -> e.localSummary().version()).sum()
        - versionsBefore) / (double) n / measureS;
    // every change delivered exactly once to each of the n - 1 other nodes, block bytes only:
    // at 4 bytes per change (version 2), and at 4 per store and 1 per eviction (version 3)
    double floor4 = (n - 1) * changesPerNode * GossipEngine.WIRE_BYTES_PER_BLOCK;
    double other = deltaRate - parts[0] - parts[1] - parts[2] - parts[3] - parts[4];
    double kvRate = storedBlocks * (double) BLOCK * KV_BYTES_PER_TOKEN / n / measureS;
    long snapshotsInWindow = sum(engines, GossipCounter.SNAPSHOT_CHUNKS_SENT) - snapBefore;
    double blocksPerNode = trees.stream().mapToLong(t -> t.sizeTokens()).average().orElse(0)
        / BLOCK;
    long pairs = engines.stream().mapToLong(GossipEngine::replicatedPairs).sum();
    long indexBytes = engines.stream().mapToLong(GossipEngine::indexBytes).sum();
    long orderBytes = engines.stream().mapToLong(GossipEngine::storeOrderBytes).sum();
    long unresolved = sum(engines, GossipCounter.UNRESOLVED_EVICTIONS)
        + sum(snaps, GossipCounter.UNRESOLVED_EVICTIONS);
    // replica accuracy at the end: replicated blocks vs the owner's exact count
    double err = 0;
    int samples = 0;
    for (GossipEngine e : engines) {
      for (var p : e.view().peers()) {
        int owner = Integer.parseInt(p.address().nodeId().substring(5));
        long truth = engines.get(owner).localSummary().fingerprintCount();
        err += Math.abs(p.replicaBlocks() - truth) / (double) Math.max(1, truth);
        samples++;
      }
    }
    double ratio = deltaRate / fullRate;
    String workload = c.fresh() ? "fresh questions" : "MMLU questions";
    String line = String.format(Locale.ROOT,
        "bandwidth: %d nodes, %.1f req/s/node, %s, one-way delay %.0f ms, messages of up to %s, "
            + "capacity %d tokens "
            + "(%.0f blocks cached/node): delta gossip %.0f B/node/s; own snapshot to %d peers "
            + "per round, 8-byte hashes %.0f B/node/s (delta/full = %s), 4-byte fingerprints "
            + "%.0f B/node/s (delta/full4 = %s); own snapshot to all %d peers per round, "
            + "4-byte fingerprints %.0f B/node/s (delta/that = %s); "
            + "same protocol sending full snapshots %s; "
            + "KV transfer of the same new prefixes %.0f B/node/s (gossip = %s of it), "
            + "replica index %.1f B/block (of which store numbers %.1f), mean replica error "
            + "%.4f%%, snapshot chunks in window %d, unresolved evictions %d",
        n, rate, workload, delayNanos / 1e6, size(cap), capacity, blocksPerNode, deltaRate,
        fanout,
        fullRate, percent(ratio, 2), full4Rate, percent(deltaRate / full4Rate, 2), n - 1,
        fullAllRate, percent(deltaRate / fullAllRate, 2),
        snapshotMode ? String.format(Locale.ROOT, "%.0f B/node/s (delta/that = %s, over %d s)",
            snapRate, percent(deltaRate / snapRate, 3), snapshotModeMeasureS) : "not run",
        kvRate, percent(deltaRate / kvRate, 5), indexBytes / (double) Math.max(1, pairs),
        orderBytes / (double) Math.max(1, pairs), 100 * err / Math.max(1, samples),
        snapshotsInWindow, unresolved);
    System.out.println(line);
    String breakdown = String.format(Locale.ROOT,
        "  breakdown (B/node/s): digests (SYN) %.0f, update headers %.0f, own deltas %.0f, "
            + "relayed deltas %.0f, snapshots %.0f, other (ACK/ACK2 framing, requests) %.0f; "
            + "redundant delta bytes received %.0f; block changes %.1f/node/s (stored %.1f, "
            + "evicted %.1f) in %.1f versions/node/s; floor at 4 B per change (each change once "
            + "to each of %d peers) %.0f B/node/s = %.2f%% of full; floor of stores at 4 B "
            + "and evictions at 1 B %.0f B/node/s = %.2f%% of full",
        parts[0], parts[1], parts[2], parts[3], parts[4], other, parts[5], changesPerNode,
        storesPerNode, evictionsPerNode, versionsPerNode, n - 1, floor4, 100 * floor4 / fullRate,
        (n - 1) * (storesPerNode * 4 + evictionsPerNode), 100 * (n - 1)
            * (storesPerNode * 4 + evictionsPerNode) / fullRate);
    System.out.println(breakdown);
    System.out.println("  staleness (age of the oldest change a replica lacks, sampled every "
        + "second): delta protocol " + deltaStale.text() + "; own snapshot to " + fanout
        + " peers per round " + ownStale.text() + "; own snapshot to all " + (n - 1)
        + " peers per round " + allStale.text()
        + (snapshotMode ? "; same protocol with full snapshots " + snapStale.text() : ""));
    if (snapshotMode) {
      System.out.println(String.format(Locale.ROOT,
          "  same protocol with full snapshots (B/node/s): digests %.0f, snapshot chunks %.0f "
              + "(of which store numbers %.0f), update headers %.0f",
          snapParts[0], snapParts[4], snapParts[6], snapParts[1]));
    }
    json.append(ResultsJson.format("  {\n    \"nodes\": %d, \"requestsPerSecondPerNode\": %.2f,"
            + " \"workload\": \"%s\", \"capacityTokens\": %d, \"warmupSeconds\": %d,"
            + " \"measureSeconds\": %d,"
            + " \"intervalMs\": 1000, \"oneWayDelayMs\": %.1f, \"fanout\": %d,"
            + " \"messageByteCap\": %d,\n"
            + "    \"blocksCachedPerNode\": %.1f,\n"
            + "    \"deltaGossipBytesPerNodePerSecond\": %.1f,\n"
            + "    \"fullSnapshotBytesPerNodePerSecond\": %.1f,\n"
            + "    \"deltaOverFull\": %.6f, \"targetDeltaOverFull\": 0.02,\n"
            + "    \"fullSnapshot4ByteFingerprintsBytesPerNodePerSecond\": %.1f,"
            + " \"deltaOverFull4\": %.6f,\n"
            + "    \"fullSnapshotToAllPeers4ByteFingerprintsBytesPerNodePerSecond\": %.1f,"
            + " \"deltaOverFullToAllPeers\": %.6f,\n"
            + "    \"sameProtocolFullSnapshots\": %s,\n"
            + "    \"staleness\": {\"delta\": %s, \"ownSnapshotToFanout\": %s,"
            + " \"ownSnapshotToAllPeers\": %s, \"sameProtocolFullSnapshots\": %s},\n"
            + "    \"kvTransferBytesPerNodePerSecond\": %.1f,\n"
            + "    \"deltaOverKvTransfer\": %.8f,\n"
            + "    \"replicaIndexBytesPerBlock\": %.2f, \"storeNumberBytesPerBlock\": %.2f,"
            + " \"targetReplicaIndexBytesPerBlock\": 32,\n"
            + "    \"meanReplicaSizeError\": %.6f, \"unresolvedEvictions\": %d,\n"
            + "    \"snapshotChunksInWindow\": %d,\n"
            + "    \"breakdownBytesPerNodePerSecond\": {\"digests\": %.1f, \"updateHeaders\": %.1f,"
            + " \"ownDeltas\": %.1f, \"relayedDeltas\": %.1f, \"snapshots\": %.1f, \"other\": %.1f,"
            + " \"redundantDeltasReceived\": %.1f},\n"
            + "    \"blockChangesPerNodePerSecond\": %.2f, \"blocksStoredPerNodePerSecond\": %.2f,"
            + " \"blocksEvictedPerNodePerSecond\": %.2f, \"versionsPerNodePerSecond\": %.2f,\n"
            + "    \"floor4BytesPerNodePerSecond\": %.1f, \"floor4OverFull\": %.6f,"
            + " \"floor4OverFull4\": %.6f,\n"
            + "    \"floorStores4Evictions1BytesPerNodePerSecond\": %.1f%s\n  }",
        n, rate, workload, capacity, warmupS, measureS, delayNanos / 1e6, fanout, cap,
        blocksPerNode,
        deltaRate, fullRate, ratio, full4Rate, deltaRate / full4Rate, fullAllRate,
        deltaRate / fullAllRate,
        snapshotMode ? ResultsJson.format("{\"bytesPerNodePerSecond\": %.1f,"
                + " \"deltaOverIt\": %.6f, \"measureSeconds\": %d, \"digests\": %.1f,"
                + " \"snapshotChunks\": %.1f, \"storeNumbersInChunks\": %.1f,"
                + " \"updateHeaders\": %.1f}", snapRate, deltaRate / snapRate,
            snapshotModeMeasureS, snapParts[0], snapParts[4], snapParts[6], snapParts[1])
            : "null",
        deltaStale.json(), ownStale.json(), allStale.json(), snapshotMode ? snapStale.json() : "null",
        kvRate, deltaRate / kvRate, indexBytes / (double) Math.max(1, pairs),
        orderBytes / (double) Math.max(1, pairs), err / Math.max(1, samples), unresolved,
        snapshotsInWindow, parts[0], parts[1], parts[2], parts[3], parts[4], other, parts[5],
        changesPerNode, storesPerNode, evictionsPerNode, versionsPerNode, floor4,
        floor4 / fullRate, floor4 / full4Rate, (n - 1) * (storesPerNode * 4 + evictionsPerNode),
        recordedBefore(c, n, rate, fanout, seed, delayNanos)));
  }

  /**
   * For the default 131k-token MMLU case only: the figures wire version 2 (evictions named by
   * fingerprint) measured with the same command and seed, recorded (not measured in this run),
   * so that the results file shows before and after side by side.
   */
  private static String recordedBefore(Case c, int n, double rate, int fanout, long seed,
      long delayNanos) {
    if (c.fresh() || c.capacityTokens() != 131_072 || c.messageBytes() != DEFAULT_MESSAGE_BYTES
        || n != 16 || rate != 10 || fanout != 3
        || seed != 1 || delayNanos != 2_000_000) {
      return "";
    }
    return ",\n    \"recordedBeforeWireVersion3\": {\"note\": \"wire version 2 (evictions by"
        + " fingerprint), same command and seed, 29 Nov 2026; recorded, not measured in this run\","
        + " \"deltaGossipBytesPerNodePerSecond\": 7016.5, \"deltaOverFull\": 0.035612,"
        + " \"deltaOverFull4\": 0.071224, \"replicaIndexBytesPerBlock\": 11.16,"
        + " \"breakdownBytesPerNodePerSecond\": {\"digests\": 475.2, \"updateHeaders\": 446.4,"
        + " \"ownDeltas\": 1397.1, \"relayedDeltas\": 4575.4, \"other\": 122.5,"
        + " \"redundantDeltasReceived\": 54.3}}";
  }

  /** Staleness of every engine's replica of every other node, now. */
  private static void sampleStaleness(List<GossipEngine> engines, List<VersionHistory> histories,
      Staleness out) {
    for (GossipEngine e : engines) {
      for (var p : e.view().peers()) {
        VersionHistory h = histories.get(Integer.parseInt(p.address().nodeId().substring(5)));
        long missingSince = h.firstAfterVersion(p.replicaVersion());
        out.add(missingSince < 0 ? 0 : h.net.time.nanoTime() - missingSince);
      }
    }
  }

  /** Staleness of the own-snapshot baseline's replicas (a node that never got one: skipped). */
  private static void sampleOwnSnapshotStaleness(List<FullSnapshotGossip> fulls,
      List<PeerAddress> addrs, List<VersionHistory> histories, long now, Staleness out) {
    for (int i = 0; i < fulls.size(); i++) {
      for (int o = 0; o < addrs.size(); o++) {
        if (o == i) {
          continue;
        }
        long at = fulls.get(i).snapshotTakenAt(addrs.get(o).nodeId(), fulls.get(o));
        if (at < 0) {
          continue;
        }
        long missingSince = histories.get(o).firstChangeAfter(at);
        out.add(missingSince < 0 ? 0 : now - missingSince);
      }
    }
  }

  private static void scheduleFull(SimNet net, FullSnapshotGossip f, List<PeerAddress> peers,
      int fanout, SplittableRandom rnd, long interval) {
    long delay = (long) (interval * (0.9 + 0.2 * rnd.nextDouble()));
    net.time.schedule(delay, () -> {
      f.runRound(peers, fanout, rnd, net);
      scheduleFull(net, f, peers, fanout, rnd, interval);
    });
  }

  private static void scheduleRequests(SimNet net, ConcurrentPrefixTree tree,
      PromptSource prompts, FreshQuestions fresh, double rate, SplittableRandom rnd) {
    long gap = (long) (-Math.log(1 - rnd.nextDouble()) / rate * 1e9);
    net.time.schedule(gap, () -> {
      int subject = rnd.nextInt(prompts.subjectCount());
      int question = rnd.nextInt(prompts.promptCount(subject));
      tree.insert(fresh == null ? prompts.prompt(subject, question)
          : fresh.next(subject, question, rnd));
      scheduleRequests(net, tree, prompts, fresh, rate, rnd);
    });
  }

  private static long sum(List<GossipEngine> engines, GossipCounter c) {
    return engines.stream().mapToLong(e -> e.counter(c)).sum();
  }

  // ------------------------------------------------------------------ dissemination

  static void dissemination(StringBuilder json, int n, int fanout, long seed) {
    dissemination(json, n, fanout, seed, 0);
  }

  static void dissemination(StringBuilder json, int n, int fanout, long seed, double loss) {
    dissemination(json, n, fanout, seed, loss, DEFAULT_MESSAGE_BYTES);
  }

  /**
   * The dissemination run of {@code n} nodes of gossip messages of up to {@code messageBytes},
   * with each message lost with probability {@code loss}. A change that does not reach 99% (or 100%) of the other nodes within
   * {@value #DISSEMINATION_ROUNDS} rounds has no time to that share: it is counted as not
   * reached, the worst time is then unknown ({@code null} in the JSON) and the target missed.
   */
  static void dissemination(StringBuilder json, int n, int fanout, long seed, double loss,
      int messageBytes) {
    GossipConfig config = config(fanout, messageBytes).suspectAfter(Duration.ofSeconds(20)).deadAfter(Duration.ofSeconds(60))
        .forgetAfter(Duration.ofSeconds(120)).build();
    SimNet net = new SimNet(seed, 2_000_000, 1_000_000, loss);
    List<PeerAddress> addrs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      addrs.add(new PeerAddress("node-" + i, "sim:" + i));
    }
    List<PeerAddress> seeds = addrs.subList(0, Math.min(3, n));
    List<GossipEngine> engines = engines(net, addrs, seeds, config, seed);
    engines.forEach(GossipEngine::start);
    long interval = config.interval().toNanos();
    int formRounds = form(net, engines, n, interval, 200);
    net.time.advanceBy(3 * interval);
    long before = sum(engines, GossipCounter.BYTES_SENT);
    net.time.advanceBy(5 * interval);
    double idleBytes = (sum(engines, GossipCounter.BYTES_SENT) - before) / (double) n / 5;
    SplittableRandom rnd = new SplittableRandom(seed);
    int changes = n >= 1_024 ? 3 : 5;
    double worst99 = 0;
    double worstAll = 0;
    double sum99 = 0;
    int reached99 = 0;
    int reachedAll = 0;
    int[] out = new int[engines.get(0).slotCapacity()];
    int need99 = (int) Math.ceil(0.99 * (n - 1));
    for (int k = 0; k < changes; k++) {
      int origin = rnd.nextInt(n);
      long block = rnd.nextLong() | 1;
      long start = net.time.nanoTime();
      engines.get(origin).localSummary().onStored(new long[] {block});
      boolean[] seen = new boolean[n];
      seen[origin] = true;
      int count = 0;
      double t99 = count >= need99 ? 0 : -1;
      long step = interval / 10;
      while (count < n - 1 && net.time.nanoTime() - start < DISSEMINATION_ROUNDS * interval) {
        net.time.advanceBy(step);
        for (int i = 0; i < n; i++) {
          if (!seen[i] && engines.get(i).leadingBlocks(new long[] {block}, 1, out) > 0) {
            seen[i] = true;
            count++;
          }
        }
        if (t99 < 0 && count >= need99) {
          t99 = (net.time.nanoTime() - start) / (double) interval;
        }
      }
      if (t99 >= 0) {
        reached99++;
        worst99 = Math.max(worst99, t99);
        sum99 += t99;
      }
      if (count == n - 1) {
        reachedAll++;
        worstAll = Math.max(worstAll, (net.time.nanoTime() - start) / (double) interval);
      }
    }
    double target = 2 * (Math.log(n) / Math.log(2)) + 3;
    double mean99 = reached99 > 0 ? sum99 / reached99 : Double.NaN;
    if (reached99 < changes) {
      worst99 = Double.NaN;
    }
    if (reachedAll < changes) {
      worstAll = Double.NaN;
    }
    boolean met = reached99 == changes && worst99 <= target;
    String line = String.format(Locale.ROOT,
        "dissemination: N=%d fanout %d, messages of up to %s: cluster formed in %d rounds; "
            + "rounds to 99%% of nodes: "
            + "mean %s, worst %s; to 100%%: worst %s; target 2*log2(N)+3 = %.1f (%s); "
            + "idle gossip %.0f B/node/s",
        n, fanout, size(messageBytes), formRounds,
        reached99 > 0 ? String.format(Locale.ROOT, "%.1f", mean99) : "-",
        worst(worst99, reached99, changes), worst(worstAll, reachedAll, changes), target,
        met ? "met" : "MISSED", idleBytes);
    System.out.println(line);
    json.append(ResultsJson.format(
        "    {\"nodes\": %d, \"fanout\": %d, \"messageByteCap\": %d, \"changes\": %d,"
            + " \"formRounds\": %d,"
            + " \"meanRoundsTo99\": %s, \"worstRoundsTo99\": %s, \"worstRoundsTo100\": %s,"
            + " \"changesNotAt99\": %d, \"changesNotAt100\": %d,"
            + " \"targetRounds\": %.2f, \"met\": %b, \"idleGossipBytesPerNodePerSecond\": %.1f}",
        n, fanout, messageBytes, changes, formRounds, jsonRounds(mean99), jsonRounds(worst99),
        jsonRounds(worstAll), changes - reached99, changes - reachedAll, target, met,
        idleBytes));
  }

  // ------------------------------------------------------------------ message size

  /**
   * The blocks a message-size run's burst stores at once at one node, which a node joining
   * afterwards then needs as a snapshot: 65,536, a 1M-token cache of 16-token blocks.
   */
  static final int BURST_BLOCKS = 65_536;

  /** How long a message-size run watches the burst or the joining node, in gossip rounds. */
  static final int MESSAGE_SIZE_ROUNDS = 1_500;

  /** The outstanding messages to one peer of the message-size runs: HttpTransport's default. */
  static final int MAX_IN_FLIGHT_PER_PEER = 64;

  /**
   * What a message-size run measured. Times are -1 when not reached within
   * {@value #MESSAGE_SIZE_ROUNDS} rounds.
   */
  record MessageSizeResult(int nodes, int cap, long intervalNanos, int formRounds,
      double idleBytes, int largestIdle, long suspectedPairs, long missingPairs, long burstNanos,
      long burstBytes, long joinNanos, long joinBytes, int largest, long droppedInFlight) {}

  /**
   * The message-size run of {@code n} nodes configured as a node is by default (200 ms rounds,
   * fanout 3, suspect / dead / forget after 2 / 10 / 40 s, 1,024 peers) with gossip messages of
   * up to {@code cap} bytes, over a network of 2 ± 1 ms one-way delay that, like the HTTP
   * transport, drops a message while {@value #MAX_IN_FLIGHT_PER_PEER} are outstanding to its
   * peer. Once the cluster has formed: its idle traffic over 10 s (digests, heartbeats) and the
   * largest message of it; then one node stores {@value #BURST_BLOCKS} blocks at once, and the
   * time until every other node's replica of it holds them all; then a new node joins, and the
   * time until its replica of that node is complete (a snapshot). Every run of a size has the
   * same seed.
   */
  static MessageSizeResult messageSize(int n, int cap, long seed) {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(200)).fanout(3)
        .suspectAfter(Duration.ofSeconds(2)).deadAfter(Duration.ofSeconds(10))
        .forgetAfter(Duration.ofSeconds(40)).maxPeers(1_024).messageByteCap(cap)
        .snapshotBytesPerExchange(Math.max(1 << 20, cap)).build();
    SimNet net = new SimNet(seed, 2_000_000, 1_000_000, 0, MAX_IN_FLIGHT_PER_PEER);
    List<PeerAddress> addrs = new ArrayList<>();
    for (int i = 0; i <= n; i++) {
      addrs.add(new PeerAddress("node-" + i, "sim:" + i));
    }
    List<PeerAddress> seeds = addrs.subList(0, Math.min(3, n));
    List<GossipEngine> engines = engines(net, addrs, seeds, config, seed);
    // node n joins later
    List<GossipEngine> cluster = engines.subList(0, n);
    cluster.forEach(GossipEngine::start);
    long interval = config.interval().toNanos();
    int formRounds = form(net, cluster, n, interval, 1_000);
    net.time.advanceBy(10 * interval);
    net.resetLargest();
    long before = sum(cluster, GossipCounter.BYTES_SENT);
    long idleNanos = 10_000_000_000L;
    net.time.advanceBy(idleNanos);
    double idleBytes = (sum(cluster, GossipCounter.BYTES_SENT) - before) / (double) n
        / (idleNanos / 1e9);
    int largestIdle = net.largest;
    long suspected = 0;
    long missing = (long) n * (n - 1);
    for (GossipEngine e : cluster) {
      for (PeerView p : e.view().peers()) {
        missing--;
        suspected += p.suspect() ? 1 : 0;
      }
    }
    // the burst: node 0 stores BURST_BLOCKS blocks at once
    GossipEngine origin = engines.get(0);
    SplittableRandom rnd = new SplittableRandom(seed);
    long[] blocks = new long[BURST_BLOCKS];
    for (int i = 0; i < blocks.length; i++) {
      blocks[i] = rnd.nextLong() | 1;
    }
    long[] first = {blocks[0]};
    long[] last = {blocks[blocks.length - 1]};
    int[] out = new int[origin.slotCapacity()];
    long start = net.time.nanoTime();
    before = sum(engines, GossipCounter.BYTES_SENT);
    origin.localSummary().onStored(blocks);
    long version = origin.localSummary().version();
    boolean[] done = new boolean[n];
    done[0] = true;
    int count = 1;
    long step = interval / 10;
    while (count < n && net.time.nanoTime() - start < MESSAGE_SIZE_ROUNDS * interval) {
      net.time.advanceBy(step);
      for (int i = 1; i < n; i++) {
        if (!done[i] && engines.get(i).leadingBlocks(last, 1, out) > 0
            && engines.get(i).leadingBlocks(first, 1, out) > 0
            && replicaOf(engines.get(i), origin, version)) {
          done[i] = true;
          count++;
        }
      }
    }
    long burstNanos = count == n ? net.time.nanoTime() - start : -1;
    long burstBytes = sum(engines, GossipCounter.BYTES_SENT) - before;
    // a node joins and needs node 0's set
    GossipEngine joiner = engines.get(n);
    start = net.time.nanoTime();
    before = sum(engines, GossipCounter.BYTES_SENT);
    joiner.start();
    long joinNanos = -1;
    while (net.time.nanoTime() - start < MESSAGE_SIZE_ROUNDS * interval) {
      net.time.advanceBy(step);
      if (replicaOf(joiner, origin, version)) {
        joinNanos = net.time.nanoTime() - start;
        break;
      }
    }
    long joinBytes = sum(engines, GossipCounter.BYTES_SENT) - before;
    engines.forEach(GossipEngine::stop);
    return new MessageSizeResult(n, cap, interval, formRounds, idleBytes, largestIdle,
        suspected, missing, burstNanos, burstBytes, joinNanos, joinBytes, net.largest,
        net.droppedInFlight);
  }

  /** Whether {@code at}'s replica of {@code origin} is complete at {@code version}. */
  private static boolean replicaOf(GossipEngine at, GossipEngine origin, long version) {
    for (PeerView p : at.view().peers()) {
      if (p.address().equals(origin.self())) {
        return p.replicaVersion() >= version && !p.replicaTruncated()
            && p.replicaBlocks() == origin.localSummary().fingerprintCount();
      }
    }
    return false;
  }

  /**
   * Runs {@link #messageSize} for each cap of {@code caps} and prints and appends the results,
   * each with its ratios to the default cap's when that is among them ({@code more}: rows
   * follow), and returns them.
   */
  static List<MessageSizeResult> messageSizes(StringBuilder json, int n, int[] caps, long seed,
      boolean more) {
    List<MessageSizeResult> rs = new ArrayList<>();
    MessageSizeResult base = null;
    for (int cap : caps) {
      MessageSizeResult r = messageSize(n, cap, seed);
      rs.add(r);
      if (cap == DEFAULT_MESSAGE_BYTES) {
        base = r;
      }
    }
    for (int k = 0; k < rs.size(); k++) {
      MessageSizeResult r = rs.get(k);
      double rounds = r.intervalNanos();
      System.out.println(String.format(Locale.ROOT,
          "message size: N=%d, messages of up to %s: formed in %d rounds; idle %.0f B/node/s "
              + "(%s), largest message %d B, %d of %d peer views suspected, %d missing; "
              + "%d blocks stored at once at one node reach all others in %s (%s); "
              + "a node joining gets its full replica in %s (%s); largest message %d B, "
              + "%d dropped at %d in flight to a peer",
          r.nodes(), size(r.cap()), r.formRounds(), r.idleBytes(),
          base == null ? "-" : ratio(r.idleBytes(), base.idleBytes()), r.largestIdle(),
          r.suspectedPairs(), (long) r.nodes() * (r.nodes() - 1), r.missingPairs(),
          BURST_BLOCKS, time(r.burstNanos(), rounds),
          base == null ? "-" : ratio(r.burstNanos(), base.burstNanos()),
          time(r.joinNanos(), rounds),
          base == null ? "-" : ratio(r.joinNanos(), base.joinNanos()), r.largest(),
          r.droppedInFlight(), MAX_IN_FLIGHT_PER_PEER));
      json.append(ResultsJson.format("    {\"nodes\": %d, \"messageByteCap\": %d,"
              + " \"intervalMs\": %d, \"maxInFlightPerPeer\": %d, \"formRounds\": %d,\n"
              + "     \"idleBytesPerNodePerSecond\": %.1f, \"largestIdleMessageBytes\": %d,"
              + " \"suspectedPeerViews\": %d, \"missingPeerViews\": %d,\n"
              + "     \"burstBlocks\": %d, \"burstRoundsToAll\": %s, \"burstSecondsToAll\": %s,"
              + " \"burstBytes\": %d,\n"
              + "     \"joinRoundsToFullReplica\": %s, \"joinSecondsToFullReplica\": %s,"
              + " \"joinBytes\": %d,\n"
              + "     \"largestMessageBytes\": %d, \"droppedAtInFlightLimit\": %d,\n"
              + "     \"over64KiB\": %s}",
          r.nodes(), r.cap(), r.intervalNanos() / 1_000_000, MAX_IN_FLIGHT_PER_PEER,
          r.formRounds(), r.idleBytes(), r.largestIdle(), r.suspectedPairs(), r.missingPairs(),
          BURST_BLOCKS, jsonTime(r.burstNanos(), rounds), jsonTime(r.burstNanos(), 1e9),
          r.burstBytes(), jsonTime(r.joinNanos(), rounds), jsonTime(r.joinNanos(), 1e9),
          r.joinBytes(), r.largest(), r.droppedInFlight(),
          base == null ? "null" : ResultsJson.format("{\"idleBytes\": %s, \"burstTime\": %s,"
                  + " \"burstBytes\": %s, \"joinTime\": %s, \"joinBytes\": %s,"
                  + " \"largestMessage\": %s}",
              jsonRatio(r.idleBytes(), base.idleBytes()),
              jsonRatio(r.burstNanos(), base.burstNanos()),
              jsonRatio(r.burstBytes(), base.burstBytes()),
              jsonRatio(r.joinNanos(), base.joinNanos()),
              jsonRatio(r.joinBytes(), base.joinBytes()),
              jsonRatio(r.largest(), base.largest()))));
      json.append(more || k + 1 < rs.size() ? ",\n" : "\n");
    }
    return rs;
  }

  /** A time as rounds and seconds for the text line, or "not within" the window. */
  private static String time(long nanos, double roundNanos) {
    return nanos < 0 ? "not within " + MESSAGE_SIZE_ROUNDS + " rounds"
        : String.format(Locale.ROOT, "%.1f rounds = %.2f s", nanos / roundNanos, nanos / 1e9);
  }

  /** A time in units of {@code unitNanos} as a JSON number, or null when not reached. */
  private static String jsonTime(long nanos, double unitNanos) {
    return nanos < 0 ? "null" : String.format(Locale.ROOT, "%.2f", nanos / unitNanos);
  }

  /** {@code x / base} for the text line ("1.00x of 64k"), or "-" when either is unknown. */
  private static String ratio(double x, double base) {
    return x < 0 || !(base > 0) ? "-" : String.format(Locale.ROOT, "%.2fx of 64k", x / base);
  }

  /** {@code x / base} as a JSON number, or null when either is unknown. */
  private static String jsonRatio(double x, double base) {
    return x < 0 || !(base > 0) ? "null" : String.format(Locale.ROOT, "%.3f", x / base);
  }

  /** A worst time for the text line, or how many changes did not get there in the window. */
  private static String worst(double r, int reached, int changes) {
    return reached == changes ? String.format(Locale.ROOT, "%.1f", r)
        : String.format(Locale.ROOT, "over %d (%d of %d changes)", DISSEMINATION_ROUNDS,
            changes - reached, changes);
  }

  /**
   * A ratio as a percentage with {@code digits} decimals, or "-" for one over a zero (JSON has
   * null there).
   */
  static String percent(double ratio, int digits) {
    return Double.isFinite(ratio) ? String.format(Locale.ROOT, "%." + digits + "f%%", 100 * ratio)
        : "-";
  }

  /** A message size as given to {@code --message-bytes}: {@code 64k}, {@code 1m}, 1000. */
  static String size(int bytes) {
    return bytes % (1 << 20) == 0 ? (bytes >> 20) + "m"
        : bytes % 1_024 == 0 ? (bytes >> 10) + "k" : String.valueOf(bytes);
  }

  /** Rounds as a JSON number, or null when unknown. */
  private static String jsonRounds(double r) {
    return Double.isNaN(r) ? "null" : String.format(Locale.ROOT, "%.2f", r);
  }

  /**
   * An engine at each of {@code addrs} on {@code net}, the i-th of random seed
   * {@code seed * 1_000 + i}, each registered to receive its messages; none started.
   */
  private static List<GossipEngine> engines(SimNet net, List<PeerAddress> addrs,
      List<PeerAddress> seeds, GossipConfig config, long seed) {
    List<GossipEngine> engines = new ArrayList<>();
    for (int i = 0; i < addrs.size(); i++) {
      PeerAddress a = addrs.get(i);
      GossipEngine e = new GossipEngine(a, 1, config, seeds, net.time, net.time,
          new SplittableRandom(seed * 1_000 + i), () -> EngineLoad.IDLE,
          (to, p) -> net.send(a, to, p));
      net.register(a, e::onMessage);
      engines.add(e);
    }
    return engines;
  }

  /**
   * Advances {@code net} a round at a time until each of {@code engines} sees the other
   * {@code n - 1}, or for {@code maxRounds} rounds; returns the rounds taken.
   */
  private static int form(SimNet net, List<GossipEngine> engines, int n, long interval,
      int maxRounds) {
    int rounds = 0;
    while (!formed(engines, n) && rounds < maxRounds) {
      net.time.advanceBy(interval);
      rounds++;
    }
    return rounds;
  }

  private static boolean formed(List<GossipEngine> engines, int n) {
    for (GossipEngine e : engines) {
      if (e.view().peers().size() != n - 1) {
        return false;
      }
    }
    return true;
  }

  private static String esc(String s) {
    return s.replace("\\", "\\\\").replace("\"", "\\\"");
  }
}
