package io.github.prefixrouter.bench.stall;

import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.bench.SimFleet;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import io.github.prefixrouter.workload.Tokens;
import io.github.prefixrouter.workload.ZipfDraw;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;

/**
 * One engine of a four-node fleet hangs for a minute, in simulated time: its server keeps
 * taking requests and answers none (a wedged GPU, a deadlocked worker), then answers again. The
 * same requests, on the same seeds, run with the node's engine watch off
 * ({@code engineStallTimeout} 0, the library before the watch) and at one or more stall
 * timeouts, side by side in one process.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar io.github.prefixrouter.bench.stall.StallSimMain \
 *     [--seeds N] [--rate PER_SECOND] [--stall-timeouts 0,30,10] [--hang-seconds N]
 * java -cp benchmarks/target/benchmarks.jar io.github.prefixrouter.bench.stall.StallSimMain \
 *     --scenario fail [--seeds N] [--rate PER_SECOND] [--failure-limits 0,3] \
 *     [--fail-seconds N] [--fail-ms N]
 * </pre>
 *
 * <p>The hung engine shows its requests as an OpenAI-compatible server does through the
 * library's adapter with its default 256 slots: running, up to 256, so no queue builds for the
 * watermarks. Its requests are given up at the node's {@code engineTimeout}, set to 60 s as the
 * adapter's {@code requestTimeout}. Prints, per seed and stall timeout, over the requests
 * submitted while the engine hangs and over all of them: failed requests (504: given up on the
 * hung engine), the latency of every request (a failed one counts to its failure: 60 s) mean,
 * median and p99, and the requests the hung engine was given; then each timeout's ratios to
 * the watch off over the requests submitted during the hang. The watch off (stall timeout 0)
 * always runs, first, as that baseline, whether or not {@code --stall-timeouts} lists it. A
 * figure or ratio that does not exist (a latency over no request, as during a hang of 0 s, or
 * a ratio over 0) prints as {@code -}.
 *
 * <p>With {@code --scenario fail} the engine fails instead, for {@code --fail-seconds} (60)
 * from the same 30 s: it ends every request it is given with a retryable
 * {@code EngineException}, at once (a refused connection) or, with {@code --fail-ms N}, after N
 * ms (a proxy's 502 in front of a crashed server), then serves again. The same requests run with
 * {@code engineFailureLimit} 0 (the check off, the library before it) and at each limit of
 * {@code --failure-limits} (default 3), the stall watch at its default 30 s in every run.
 * Prints, per seed and limit, over all requests and over those submitted while the engine
 * fails: client-visible failures, mean, median and p99 latency; then the requests the failing
 * engine was given, the node's own requests it failed that were tried on a peer
 * ({@code LOCAL_FAILED}), the peers' forwards it answered FAILED ({@code PEER_FAILED} at the
 * peers; with slow failures, forwards the peer gave up on at its forwarding timeout are given to
 * the engine but counted by neither) and those it refused BUSY, the times it was found failing,
 * and how long after it recovered it first answered a request (ms). Then each limit's ratios
 * to the check off over the requests submitted while it fails.
 */
public final class StallSimMain {

  /** The slots the hung engine's adapter reports at most (the adapter's default). */
  static final int ADAPTER_SLOTS = 256;

  record Params(int nodes, int slots, int capacityTokens, int prompts, int systemTokens,
      int maxSuffix, int outputTokens, double zipf, double ratePerSecond, long arrivalNanos,
      long hangFromNanos, long hangNanos, long oneWayDelayNanos) {}

  record Outcome(long requests, long failed, double meanMs, double p99Ms, long hangRequests,
      long hangFailed, double hangMeanMs, double hangP50Ms, long givenToHungEngine,
      long stalls, long reroutes) {}

  /**
   * The figures of a run with a failing engine: all requests, then those submitted while it
   * fails; the requests it was given meanwhile, n0's requests that it failed and that were tried
   * on a peer ({@code LOCAL_FAILED}), peers' forwards it answered FAILED ({@code PEER_FAILED} at
   * the peers) and refused BUSY, the times it was found failing, and how long after it
   * recovered it first answered a request (ms).
   */
  record FailOutcome(long requests, long failed, double meanMs, double p50Ms, double p99Ms,
      long failRequests, long failFailed, double failMeanMs, double failP50Ms, double failP99Ms,
      long givenToFailing, long localFallbacks, long peerFailed, long refusedBusy,
      long failingSpells, double localAgainMs) {}

  /**
   * The highest {@code --rate}, requests per simulated second: its 150 s of arrivals are then
   * 750,000 requests, and a higher rate runs out of memory.
   */
  static final double MAX_RATE = 5_000;

  private StallSimMain() {}

  /**
   * The seeds to run (1..{@code seeds}), the scenario ({@code fail}: a failing engine, else a
   * hung one), the stall timeouts (seconds) of a hang or the failure limits of a failing engine,
   * a failure's delay (nanoseconds) and the workload; its {@code hangNanos} is how long the
   * engine hangs or fails.
   */
  record Options(int seeds, List<Long> timeouts, Params params, boolean fail,
      List<Long> limits, long failNanos) {}

  /** The flags of one scenario only, each with the scenario it belongs to. */
  private static final Map<String, String> SCENARIO_FLAGS = Map.of("--hang-seconds", "hang",
      "--stall-timeouts", "hang", "--fail-seconds", "fail", "--failure-limits", "fail",
      "--fail-ms", "fail");

  /**
   * Parses the command line.
   *
   * @throws IllegalArgumentException for an unknown flag, one given twice or without its value,
   *     a value that is not a number, fewer than 1 seed, a rate outside {@link Flags#MIN_RATE} to
   *     {@link #MAX_RATE}, a scenario other than {@code hang} or {@code fail} or a flag of the
   *     other scenario, a negative hang or failure, a failure's delay outside 0 to 60,000 ms,
   *     or a bad {@code --stall-timeouts} or {@code --failure-limits} (see
   *     {@link #stallTimeouts}, {@link #failureLimits})
   */
  static Options options(String[] args) {
    Flags f = Flags.parse(args, Set.of(), Set.of("--seeds", "--rate", "--scenario",
        "--hang-seconds", "--stall-timeouts", "--fail-seconds", "--failure-limits", "--fail-ms"));
    int seeds = f.atLeast("--seeds", 3, 1);
    double rate = f.between("--rate", 20, Flags.MIN_RATE, MAX_RATE);
    String scenario = f.string("--scenario", "hang");
    if (!scenario.equals("hang") && !scenario.equals("fail")) {
      throw new IllegalArgumentException(
          "--scenario must be hang or fail, not '" + scenario + "'");
    }
    for (Map.Entry<String, String> e : new TreeMap<>(SCENARIO_FLAGS).entrySet()) {
      if (f.has(e.getKey()) && !e.getValue().equals(scenario)) {
        throw new IllegalArgumentException(
            e.getKey() + " is for --scenario " + e.getValue() + " only");
      }
    }
    boolean fail = scenario.equals("fail");
    long hangSeconds = f.whole("--hang-seconds", 60);
    if (hangSeconds < 0 || hangSeconds > 1_000_000) {
      throw new IllegalArgumentException(
          "--hang-seconds must be 0 to 1000000, not " + hangSeconds);
    }
    long failSeconds = f.whole("--fail-seconds", 60);
    if (failSeconds < 0 || failSeconds > 1_000_000) {
      throw new IllegalArgumentException(
          "--fail-seconds must be 0 to 1000000, not " + failSeconds);
    }
    long failMs = f.whole("--fail-ms", 0);
    if (failMs < 0 || failMs > 60_000) {
      throw new IllegalArgumentException("--fail-ms must be 0 to 60000, not " + failMs);
    }
    List<Long> timeouts = stallTimeouts(f.string("--stall-timeouts", "0,30,10"));
    List<Long> limits = failureLimits(f.string("--failure-limits", "0,3"));
    long s = 1_000_000_000L;
    return new Options(seeds, timeouts, new Params(4, 8, 65_536, 64, 1024, 128, 16, 1.0, rate,
        150 * s, 30 * s, (fail ? failSeconds : hangSeconds) * s, 1_000_000), fail, limits,
        failMs * 1_000_000L);
  }

  public static void main(String[] args) {
    Options opts = Flags.parseOrExit("usage: benchmarks/run stall [flags]\n"
        + "  one engine hangs (--scenario hang) or fails every request (--scenario fail):\n"
        + "  engine watch off vs on", args, StallSimMain::options);
    if (opts.fail()) {
      mainFailing(opts);
      return;
    }
    int seeds = opts.seeds();
    List<Long> timeouts = opts.timeouts();
    long s = 1_000_000_000L;
    Params p = opts.params();
    System.out.printf(Locale.ROOT, "%d nodes x %d slots, %d-token KV cache each; %d system "
            + "prompts of %d tokens (Zipf %.2f) + 16..%d-token questions, %d output tokens; "
            + "%s requests/s (Poisson) for %d s, each to a random node; n0's engine hangs "
            + "from %d s for %d s; engineTimeout 60 s; 1 ms one-way delay%n",
        p.nodes(), p.slots(), p.capacityTokens(), p.prompts(), p.systemTokens(), p.zipf(),
        p.maxSuffix() + 15, p.outputTokens(), SimFleet.setting(p.ratePerSecond()),
        p.arrivalNanos() / s, p.hangFromNanos() / s, p.hangNanos() / s);
    System.out.println("seed  stall-timeout  requests  failed  mean-ms  p99-ms  | during the "
        + "hang: requests  failed  mean-ms  p50-ms  given-to-hung  | stalls  reroutes");
    List<Outcome[]> all = new ArrayList<>();
    for (int seed = 1; seed <= seeds; seed++) {
      Outcome[] o = new Outcome[timeouts.size()];
      for (int m = 0; m < timeouts.size(); m++) {
        o[m] = run(p, seed, Duration.ofSeconds(timeouts.get(m)));
        print(seed, timeouts.get(m), o[m]);
      }
      all.add(o);
    }
    for (int m = 1; m < timeouts.size(); m++) {
      System.out.printf(Locale.ROOT, "stall timeout %d s / watch off, during the hang: failed, "
          + "mean latency, requests given to the hung engine%n", timeouts.get(m));
      for (int i = 0; i < all.size(); i++) {
        Outcome a = all.get(i)[m];
        Outcome b = all.get(i)[0];
        System.out.printf(Locale.ROOT, "seed %d  %s  %s  %s%n", i + 1,
            SimFleet.figure(ratio(a.hangFailed(), b.hangFailed()), "%.3fx"),
            SimFleet.figure(a.hangMeanMs() / b.hangMeanMs(), "%.3fx"),
            SimFleet.figure(ratio(a.givenToHungEngine(), b.givenToHungEngine()), "%.3fx"));
      }
    }
  }

  /** Prints the failing-engine scenario's table and ratios. */
  private static void mainFailing(Options opts) {
    List<Long> limits = opts.limits();
    long s = 1_000_000_000L;
    Params p = opts.params();
    System.out.printf(Locale.ROOT, "%d nodes x %d slots, %d-token KV cache each; %d system "
            + "prompts of %d tokens (Zipf %.2f) + 16..%d-token questions, %d output tokens; "
            + "%s requests/s (Poisson) for %d s, each to a random node; n0's engine fails "
            + "every request %s from %d s for %d s (retryable); engineStallTimeout %s s, "
            + "failureCooldown %s s; 1 ms one-way delay%n",
        p.nodes(), p.slots(), p.capacityTokens(), p.prompts(), p.systemTokens(), p.zipf(),
        p.maxSuffix() + 15, p.outputTokens(), SimFleet.setting(p.ratePerSecond()),
        p.arrivalNanos() / s, opts.failNanos() == 0 ? "at once"
            : "after " + opts.failNanos() / 1_000_000 + " ms",
        p.hangFromNanos() / s, p.hangNanos() / s,
        seconds(config(p).build().engineStallTimeout()),
        seconds(config(p).build().failureCooldown()));
    System.out.println("seed  limit  requests  failed  mean-ms  p50-ms  p99-ms  | while "
        + "failing: requests  failed  mean-ms  p50-ms  p99-ms  given-to-failing  "
        + "local-fallbacks  peers-failed  peers-busy  | spells  local-again-ms");
    List<FailOutcome[]> all = new ArrayList<>();
    for (int seed = 1; seed <= opts.seeds(); seed++) {
      FailOutcome[] o = new FailOutcome[limits.size()];
      for (int m = 0; m < limits.size(); m++) {
        o[m] = runFailing(p, seed, limits.get(m).intValue(), opts.failNanos());
        FailOutcome x = o[m];
        System.out.printf(Locale.ROOT, "%4d  %5s  %8d  %6d  %7s  %6s  %6s  | %23d  %6d  %7s  "
                + "%6s  %6s  %16d  %15d  %12d  %10d  | %6d  %14s%n",
            seed, limits.get(m) == 0 ? "off" : limits.get(m).toString(), x.requests(),
            x.failed(), SimFleet.figure(x.meanMs(), "%.1f"), SimFleet.figure(x.p50Ms(), "%.1f"),
            SimFleet.figure(x.p99Ms(), "%.1f"), x.failRequests(), x.failFailed(),
            SimFleet.figure(x.failMeanMs(), "%.1f"), SimFleet.figure(x.failP50Ms(), "%.1f"),
            SimFleet.figure(x.failP99Ms(), "%.1f"), x.givenToFailing(), x.localFallbacks(),
            x.peerFailed(), x.refusedBusy(), x.failingSpells(),
            SimFleet.figure(x.localAgainMs(), "%.1f"));
      }
      all.add(o);
    }
    for (int m = 1; m < limits.size(); m++) {
      System.out.printf(Locale.ROOT, "limit %d / limit off, while failing: requests given to "
          + "the failing engine, local fallbacks, peers' forwards failed, mean, p50, p99 "
          + "latency%n", limits.get(m));
      for (int i = 0; i < all.size(); i++) {
        FailOutcome a = all.get(i)[m];
        FailOutcome b = all.get(i)[0];
        System.out.printf(Locale.ROOT, "seed %d  %s  %s  %s  %s  %s  %s%n", i + 1,
            SimFleet.figure(ratio(a.givenToFailing(), b.givenToFailing()), "%.3fx"),
            SimFleet.figure(ratio(a.localFallbacks(), b.localFallbacks()), "%.3fx"),
            SimFleet.figure(ratio(a.peerFailed(), b.peerFailed()), "%.3fx"),
            SimFleet.figure(a.failMeanMs() / b.failMeanMs(), "%.3fx"),
            SimFleet.figure(a.failP50Ms() / b.failP50Ms(), "%.3fx"),
            SimFleet.figure(a.failP99Ms() / b.failP99Ms(), "%.3fx"));
      }
    }
  }

  /**
   * The failure limits of {@code --failure-limits} ({@code engineFailureLimit}s,
   * comma-separated), the check off (0) first: the baseline of every other limit's ratios, run
   * even when the list leaves it out.
   *
   * @throws IllegalArgumentException for a value that is not a whole number, one outside 0 to
   *     {@link RouterConfig#MAX_ENGINE_FAILURE_LIMIT}, or one given twice
   */
  static List<Long> failureLimits(String csv) {
    List<Long> limits = baselineFirst("--failure-limits", csv, "");
    for (long x : limits) {
      if (x > RouterConfig.MAX_ENGINE_FAILURE_LIMIT) {
        throw new IllegalArgumentException("--failure-limits: " + x + " is more than "
            + RouterConfig.MAX_ENGINE_FAILURE_LIMIT);
      }
    }
    return limits;
  }

  /**
   * The stall timeouts of {@code --stall-timeouts} (seconds, comma-separated), watch off (0)
   * first: it is the baseline every other timeout's ratios are printed against, so it runs even
   * when the list leaves it out.
   *
   * @throws IllegalArgumentException for a value that is not a whole number of seconds, a
   *     negative one, or one given twice
   */
  static List<Long> stallTimeouts(String csv) {
    return baselineFirst("--stall-timeouts", csv, " of seconds");
  }

  /** The values of {@code flag}'s list: 0 first, then the others in order, each once. */
  private static List<Long> baselineFirst(String flag, String csv, String unit) {
    List<Long> t = new ArrayList<>(List.of(0L));
    boolean zeroSeen = false;
    for (String v : csv.split(",")) {
      long x;
      try {
        x = Long.parseLong(v.trim());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(
            flag + ": '" + v + "' is not a whole number" + unit);
      }
      if (x < 0) {
        throw new IllegalArgumentException(flag + ": " + x + " is negative");
      }
      if (x == 0 ? zeroSeen : t.contains(x)) {
        throw new IllegalArgumentException(flag + ": " + x + " is given twice");
      }
      if (x == 0) {
        zeroSeen = true;
      } else {
        t.add(x);
      }
    }
    return t;
  }

  private static double ratio(long a, long b) {
    return b == 0 ? Double.NaN : (double) a / b;
  }

  private static void print(int seed, long timeout, Outcome o) {
    System.out.printf(Locale.ROOT, "%4d  %10s  %8d  %6d  %7s  %7s  | %14d  %6d  %7s  "
            + "%7s  %13d  | %6d  %8d%n",
        seed, timeout == 0 ? "off" : timeout + " s", o.requests(), o.failed(),
        SimFleet.figure(o.meanMs(), "%.1f"), SimFleet.figure(o.p99Ms(), "%.1f"),
        o.hangRequests(), o.hangFailed(), SimFleet.figure(o.hangMeanMs(), "%.1f"),
        SimFleet.figure(o.hangP50Ms(), "%.1f"), o.givenToHungEngine(), o.stalls(),
        o.reroutes());
  }

  /**
   * An engine that hangs from {@code from} for {@code length} nanoseconds of simulated time:
   * the requests it is given meanwhile are held (shown as the adapter shows running requests)
   * and never answered; a cancel fails them. Before and after, it passes requests on.
   */
  static final class Hanging extends ForwardingEngine {
    private final SimulatedScheduler sim;
    private final long from;
    private final long until;
    private final Map<String, CompletableFuture<EngineResult>> held = new HashMap<>();
    long given;

    Hanging(InferenceEngine delegate, SimulatedScheduler sim, long from, long length) {
      super(delegate);
      this.sim = sim;
      this.from = from;
      this.until = from + length;
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest request) {
      long now = sim.nanoTime();
      if (now < from || now >= until) {
        return delegate.execute(request);
      }
      given++;
      CompletableFuture<EngineResult> f = new CompletableFuture<>();
      held.put(request.id(), f);
      return f;
    }

    @Override
    public EngineLoad load() {
      EngineLoad l = delegate.load();
      int n = held.size();
      return new EngineLoad(l.queueDepth() + Math.max(0, n - ADAPTER_SLOTS),
          l.inFlight() + Math.min(n, ADAPTER_SLOTS));
    }

    @Override
    public void cancel(String requestId) {
      CompletableFuture<EngineResult> f = held.remove(requestId);
      if (f != null) {
        f.completeExceptionally(new EngineException("connection closed", true));
      } else {
        delegate.cancel(requestId);
      }
    }
  }

  /** Runs the workload of {@code seed} with the given stall timeout (zero: the watch off). */
  static Outcome run(Params p, long seed, Duration stallTimeout) {
    SimulatedScheduler sim = new SimulatedScheduler();
    RouterConfig cfg = config(p).engineStallTimeout(stallTimeout).build();
    long[] hangFrom = new long[1];
    Hanging[] hung = new Hanging[1];
    Trace t = simulate(p, seed, sim, cfg, (e, from) -> {
      hangFrom[0] = from;
      hung[0] = new Hanging(e, sim, from, p.hangNanos());
      return hung[0];
    });
    Window w = Window.of(t, hangFrom[0], hangFrom[0] + p.hangNanos());
    EngineStallStats watch = t.nodes().get(0).engineStallStats().orElseThrow();
    long stalls = watch.stalls();
    long reroutes = watch.reroutes();
    SimFleet.stopAll(sim, t.nodes());
    return new Outcome(w.all().length, w.failed(), w.overall().mean(), w.overall().p99(),
        w.during().length, w.failedDuring(), w.inside().mean(), w.inside().p50(), hung[0].given,
        stalls, reroutes);
  }

  /** The configuration both scenarios share: the workload's block size, cache and timeout. */
  /** A setting in seconds, as the header prints it: {@code 30}, {@code 2.5}. */
  private static String seconds(java.time.Duration d) {
    return java.math.BigDecimal.valueOf(d.toMillis(), 3).stripTrailingZeros().toPlainString();
  }

  private static RouterConfig.Builder config(Params p) {
    return RouterConfig.builder().blockSize(16).treeCapacityTokens(p.capacityTokens())
        .engineTimeout(Duration.ofSeconds(60));
  }

  /** Wraps n0's engine in the fault that starts at {@code from} (simulated nanoseconds). */
  interface Fault {
    InferenceEngine wrap(InferenceEngine engine, long from);
  }

  /**
   * A finished run: per request, when it was submitted and when it ended (simulated
   * nanoseconds), and whether it was answered; and the nodes, not yet stopped.
   */
  record Trace(long[] submitted, long[] finished, boolean[] ok, List<PrefixRouterNode> nodes) {}

  /**
   * The fleet of {@code p} on {@code sim}, n0's engine wrapped in {@code fault}, given the
   * workload of {@code seed} (the same whatever the configuration) until every request has
   * ended. The nodes are left running for their statistics.
   */
  private static Trace simulate(Params p, long seed, SimulatedScheduler sim, RouterConfig cfg,
      Fault fault) {
    InMemoryNetwork net = SimFleet.network(sim, seed, p.oneWayDelayNanos());
    List<PeerAddress> all = SimFleet.addresses(p.nodes());
    List<PrefixRouterNode> nodes = new ArrayList<>();
    long start = Duration.ofSeconds(3).toNanos(); // membership converges first
    for (int i = 0; i < p.nodes(); i++) {
      InferenceEngine e = SimFleet.engine(sim, p.slots(), p.capacityTokens()).build();
      if (i == 0) {
        e = fault.wrap(e, start + p.hangFromNanos());
      }
      PrefixRouterNode n = SimFleet.node(i, all, cfg, net.transport("n" + i), e, sim, seed);
      nodes.add(n);
      n.start();
    }
    sim.advanceTo(start);

    // the workload: the same whatever the configuration
    SplittableRandom r = new SplittableRandom(seed);
    int[][] system = SimFleet.systemPrompts(r, p.prompts(), p.systemTokens());
    ZipfDraw popularity = ZipfDraw.of(p.prompts(), p.zipf());
    List<Long> submitted = new ArrayList<>();
    List<long[]> done = new ArrayList<>();
    List<CompletableFuture<InferenceResponse>> futures = new ArrayList<>();
    long t = sim.nanoTime();
    long end = start + p.arrivalNanos();
    for (int q = 0; ; q++) {
      t += SimFleet.poissonGap(r, p.ratePerSecond());
      if (t >= end) {
        break;
      }
      int k = popularity.rank(r.nextDouble());
      int[] prompt = Tokens.concat(system[k], SimFleet.tokens(r, 16 + r.nextInt(p.maxSuffix())));
      int entry = r.nextInt(p.nodes());
      sim.advanceTo(t);
      submitted.add(sim.nanoTime());
      long[] at = new long[1];
      done.add(at);
      CompletableFuture<InferenceResponse> f = nodes.get(entry).submit(
          new InferenceRequest("q" + q, prompt, GenerationParams.greedy(p.outputTokens())));
      f.whenComplete((v, err) -> at[0] = sim.nanoTime());
      futures.add(f);
    }
    SimFleet.awaitAll(sim, futures);
    int n = futures.size();
    long[] sub = new long[n];
    long[] fin = new long[n];
    boolean[] ok = new boolean[n];
    for (int q = 0; q < n; q++) {
      CompletableFuture<InferenceResponse> f = futures.get(q);
      sub[q] = submitted.get(q);
      ok[q] = f.isDone() && !f.isCompletedExceptionally();
      fin[q] = f.isDone() ? done.get(q)[0] : sim.nanoTime();
    }
    return new Trace(sub, fin, ok, nodes);
  }

  /**
   * The latencies (ms) of a run's requests, all of them and those submitted in
   * {@code [from, until)}, and the failed ones of each; a failed request counts to its failure.
   */
  record Window(double[] all, double[] during, long failed, long failedDuring,
      SimFleet.Latencies overall, SimFleet.Latencies inside) {

    static Window of(Trace t, long from, long until) {
      List<Double> latencies = new ArrayList<>();
      List<Double> inside = new ArrayList<>();
      long failed = 0;
      long failedInside = 0;
      for (int q = 0; q < t.submitted().length; q++) {
        double ms = (t.finished()[q] - t.submitted()[q]) / 1e6;
        latencies.add(ms);
        failed += t.ok()[q] ? 0 : 1;
        if (t.submitted()[q] >= from && t.submitted()[q] < until) {
          inside.add(ms);
          failedInside += t.ok()[q] ? 0 : 1;
        }
      }
      double[] a = toArray(latencies);
      double[] d = toArray(inside);
      return new Window(a, d, failed, failedInside, SimFleet.Latencies.of(a.clone()),
          SimFleet.Latencies.of(d.clone()));
    }
  }

  /**
   * An engine that fails every request it is given from {@code from} for {@code length}
   * nanoseconds of simulated time with a retryable {@link EngineException}: at once (a refused
   * connection) when {@code failNanos} is 0, else after {@code failNanos} (a proxy's 502 in
   * front of a crashed server), meanwhile shown as running as the adapter shows its requests.
   * Before and after, it passes requests on; it records when it first answers a request it was
   * given after the failures.
   */
  static final class Failing extends ForwardingEngine {
    private final SimulatedScheduler sim;
    private final long from;
    private final long until;
    private final long failNanos;
    private final Map<String, CompletableFuture<EngineResult>> failing = new HashMap<>();
    long given;
    long firstAnswerAfter = -1;

    Failing(InferenceEngine delegate, SimulatedScheduler sim, long from, long length,
        long failNanos) {
      super(delegate);
      this.sim = sim;
      this.from = from;
      this.until = from + length;
      this.failNanos = failNanos;
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest request) {
      long now = sim.nanoTime();
      if (now < from || now >= until) {
        CompletableFuture<EngineResult> f = delegate.execute(request);
        if (now >= until) {
          f.whenComplete((v, err) -> {
            if (err == null && firstAnswerAfter < 0) {
              firstAnswerAfter = sim.nanoTime();
            }
          });
        }
        return f;
      }
      given++;
      if (failNanos == 0) {
        return CompletableFuture.failedFuture(new EngineException("connection refused", true));
      }
      CompletableFuture<EngineResult> f = new CompletableFuture<>();
      failing.put(request.id(), f);
      sim.schedule(failNanos, () -> {
        if (failing.remove(request.id(), f)) {
          f.completeExceptionally(new EngineException("502 Bad Gateway", true, 502, null));
        }
      });
      return f;
    }

    @Override
    public EngineLoad load() {
      EngineLoad l = delegate.load();
      int n = failing.size();
      return new EngineLoad(l.queueDepth() + Math.max(0, n - ADAPTER_SLOTS),
          l.inFlight() + Math.min(n, ADAPTER_SLOTS));
    }

    @Override
    public void cancel(String requestId) {
      CompletableFuture<EngineResult> f = failing.remove(requestId);
      if (f != null) {
        f.completeExceptionally(new EngineException("connection closed", true));
      } else {
        delegate.cancel(requestId);
      }
    }
  }

  /**
   * Runs the workload of {@code seed} with n0's engine failing every request (each after
   * {@code failNanos}) and the given {@code engineFailureLimit} (zero: the check off).
   */
  static FailOutcome runFailing(Params p, long seed, int failureLimit, long failNanos) {
    SimulatedScheduler sim = new SimulatedScheduler();
    RouterConfig cfg = config(p).engineFailureLimit(failureLimit).build();
    long[] failFrom = new long[1];
    Failing[] engine = new Failing[1];
    Trace t = simulate(p, seed, sim, cfg, (e, from) -> {
      failFrom[0] = from;
      engine[0] = new Failing(e, sim, from, p.hangNanos(), failNanos);
      return engine[0];
    });
    long until = failFrom[0] + p.hangNanos();
    Window w = Window.of(t, failFrom[0], until);
    long localFallbacks = t.nodes().get(0).stats().fallbacks().get(FallbackCause.LOCAL_FAILED);
    long peerFailed = 0;
    for (int i = 1; i < t.nodes().size(); i++) {
      peerFailed += t.nodes().get(i).stats().fallbacks().get(FallbackCause.PEER_FAILED);
    }
    long busy = t.nodes().get(0).stats().refusedForPeers();
    long spells = t.nodes().get(0).engineStallStats().orElseThrow().failingSpells();
    SimFleet.stopAll(sim, t.nodes());
    long back = engine[0].firstAnswerAfter;
    return new FailOutcome(w.all().length, w.failed(), w.overall().mean(), w.overall().p50(),
        w.overall().p99(), w.during().length, w.failedDuring(), w.inside().mean(),
        w.inside().p50(), w.inside().p99(), engine[0].given, localFallbacks, peerFailed, busy,
        spells, back < 0 ? Double.NaN : (back - until) / 1e6);
  }

  private static double[] toArray(List<Double> values) {
    double[] a = new double[values.size()];
    for (int i = 0; i < a.length; i++) {
      a[i] = values.get(i);
    }
    return a;
  }
}
