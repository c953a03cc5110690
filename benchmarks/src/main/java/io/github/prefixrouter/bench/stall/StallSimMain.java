package io.github.prefixrouter.bench.stall;

import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.bench.ForwardingEngine;
import io.github.prefixrouter.bench.SimFleet;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
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
   * The highest {@code --rate}, requests per simulated second: its 150 s of arrivals are then
   * 750,000 requests, and a higher rate runs out of memory.
   */
  static final double MAX_RATE = 5_000;

  private StallSimMain() {}

  /** The seeds to run (1..{@code seeds}), the stall timeouts (seconds) and the workload. */
  record Options(int seeds, List<Long> timeouts, Params params) {}

  /**
   * Parses the command line.
   *
   * @throws IllegalArgumentException for an unknown flag, one given twice or without its value,
   *     a value that is not a number, fewer than 1 seed, a rate outside {@link Flags#MIN_RATE} to
   *     {@link #MAX_RATE}, a negative hang, or a bad {@code --stall-timeouts} (see
   *     {@link #stallTimeouts})
   */
  static Options options(String[] args) {
    Flags f = Flags.parse(args, Set.of(),
        Set.of("--seeds", "--rate", "--hang-seconds", "--stall-timeouts"));
    int seeds = f.atLeast("--seeds", 3, 1);
    double rate = f.between("--rate", 20, Flags.MIN_RATE, MAX_RATE);
    long hangSeconds = f.whole("--hang-seconds", 60);
    if (hangSeconds < 0 || hangSeconds > 1_000_000) {
      throw new IllegalArgumentException(
          "--hang-seconds must be 0 to 1000000, not " + hangSeconds);
    }
    List<Long> timeouts = f.has("--stall-timeouts")
        ? stallTimeouts(f.string("--stall-timeouts", "")) : List.of(0L, 30L, 10L);
    long s = 1_000_000_000L;
    return new Options(seeds, timeouts, new Params(4, 8, 65_536, 64, 1024, 128, 16, 1.0, rate,
        150 * s, 30 * s, hangSeconds * s, 1_000_000));
  }

  public static void main(String[] args) {
    Options opts = Flags.parseOrExit("usage: benchmarks/run stall [flags]\n"
        + "  one engine hangs: engine watch off vs on", args, StallSimMain::options);
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

  /**
   * The stall timeouts of {@code --stall-timeouts} (seconds, comma-separated), watch off (0)
   * first: it is the baseline every other timeout's ratios are printed against, so it runs even
   * when the list leaves it out.
   *
   * @throws IllegalArgumentException for a value that is not a whole number of seconds, a
   *     negative one, or one given twice
   */
  static List<Long> stallTimeouts(String csv) {
    List<Long> t = new ArrayList<>(List.of(0L));
    boolean zeroSeen = false;
    for (String v : csv.split(",")) {
      long x;
      try {
        x = Long.parseLong(v.trim());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(
            "--stall-timeouts: '" + v + "' is not a whole number of seconds");
      }
      if (x < 0) {
        throw new IllegalArgumentException("--stall-timeouts: " + x + " is negative");
      }
      if (x == 0 ? zeroSeen : t.contains(x)) {
        throw new IllegalArgumentException("--stall-timeouts: " + x + " is given twice");
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
    InMemoryNetwork net = SimFleet.network(sim, seed, p.oneWayDelayNanos());
    List<PeerAddress> all = SimFleet.addresses(p.nodes());
    RouterConfig cfg = RouterConfig.builder().blockSize(16)
        .treeCapacityTokens(p.capacityTokens()).engineTimeout(Duration.ofSeconds(60))
        .engineStallTimeout(stallTimeout).build();
    List<PrefixRouterNode> nodes = new ArrayList<>();
    long start = Duration.ofSeconds(3).toNanos(); // membership converges first
    Hanging hung = null;
    for (int i = 0; i < p.nodes(); i++) {
      InferenceEngine e = SimFleet.engine(sim, p.slots(), p.capacityTokens()).build();
      if (i == 0) {
        hung = new Hanging(e, sim, start + p.hangFromNanos(), p.hangNanos());
        e = hung;
      }
      PrefixRouterNode n = SimFleet.node(i, all, cfg, net.transport("n" + i), e, sim, seed);
      nodes.add(n);
      n.start();
    }
    sim.advanceTo(start);

    // the workload: the same whatever the stall timeout
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
    long hangFrom = start + p.hangFromNanos();
    long hangUntil = hangFrom + p.hangNanos();
    List<Double> latencies = new ArrayList<>();
    List<Double> hangLatencies = new ArrayList<>();
    long failed = 0;
    long hangFailed = 0;
    for (int q = 0; q < futures.size(); q++) {
      CompletableFuture<InferenceResponse> f = futures.get(q);
      boolean ok = f.isDone() && !f.isCompletedExceptionally();
      long finished = f.isDone() ? done.get(q)[0] : sim.nanoTime();
      double ms = (finished - submitted.get(q)) / 1e6;
      latencies.add(ms);
      failed += ok ? 0 : 1;
      if (submitted.get(q) >= hangFrom && submitted.get(q) < hangUntil) {
        hangLatencies.add(ms);
        hangFailed += ok ? 0 : 1;
      }
    }
    EngineStallStats watch = nodes.get(0).engineStallStats().orElseThrow();
    long stalls = watch.stalls();
    long reroutes = watch.reroutes();
    SimFleet.stopAll(sim, nodes);
    SimFleet.Latencies l = SimFleet.Latencies.of(toArray(latencies));
    SimFleet.Latencies h = SimFleet.Latencies.of(toArray(hangLatencies));
    return new Outcome(latencies.size(), failed, l.mean(), l.p99(), hangLatencies.size(),
        hangFailed, h.mean(), h.p50(), hung.given, stalls, reroutes);
  }

  private static double[] toArray(List<Double> values) {
    double[] a = new double[values.size()];
    for (int i = 0; i < a.length; i++) {
      a[i] = values.get(i);
    }
    return a;
  }
}
