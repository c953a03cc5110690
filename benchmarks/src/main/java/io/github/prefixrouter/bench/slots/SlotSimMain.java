package io.github.prefixrouter.bench.slots;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.bench.SimFleet;
import io.github.prefixrouter.internal.route.PricingAccess;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import io.github.prefixrouter.workload.Tokens;
import io.github.prefixrouter.workload.ZipfDraw;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;

/**
 * A fleet of engines that run many requests at once (continuous batching, as vLLM's
 * {@code --max-num-seqs}) near saturation, in simulated time. The same requests, on the same
 * seeds, run through the library in up to three pricings side by side in one process:
 *
 * <ul>
 *   <li><b>previous</b>: the routing cost before slots were counted (a full service time per
 *       waiting request, whatever the engine runs at once) and with the configured
 *       {@code forwardOverhead} for every forward;
 *   <li><b>slots</b>: the queue drains through the running slots ({@code queue × service /
 *       max(1, inFlight)}), the overhead still the configured one;
 *   <li><b>current</b>: the library as it is (slots, and each peer's forward overhead learned
 *       from answered forwards).
 * </ul>
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar io.github.prefixrouter.bench.slots.SlotSimMain \
 *     [--seeds N] [--slots N] [--rate PER_SECOND] [--requests N] [--prompts N] [--zipf S]
 *     [--capacity TOKENS] [--modes slots,current]
 * </pre>
 *
 * <p>Prints, per seed and mode, over the requests after the first 20% (warm-up): the
 * prompt-token hit rate (from the engines' own results), the latency (submission to answer)
 * mean, median and p99, the fraction answered by a peer, the spread of the requests served
 * per node (most loaded node over the mean), and the engines' busy slot time over the slot
 * time of the arrival period (warm-up included); then each mode's ratios to {@code previous}.
 * A figure or ratio that does not exist (a ratio over 0, the busy share of a single arrival's
 * empty period) prints as {@code -}.
 * The previous pricing always runs, first, as that baseline, whether or not {@code --modes}
 * lists it; a mode listed twice or unknown is refused.
 */
public final class SlotSimMain {

  record Params(int nodes, int slots, int requests, int prompts, int systemTokens,
      int maxSuffix, int outputTokens, double zipf, double ratePerSecond, long oneWayDelayNanos,
      int capacityTokens) {}

  record Outcome(double hitRate, double meanMs, double p50Ms, double p99Ms, double forwarded,
      double spread, double utilization, long failed) {}

  private SlotSimMain() {}

  /** The seeds to run (1..{@code seeds}), the pricings to run and the workload. */
  record Options(int seeds, List<String> modes, Params params) {}

  /**
   * Parses the command line.
   *
   * @throws IllegalArgumentException for an unknown flag, one given twice or without its value,
   *     a value that is not a number, a count below 1, a rate outside {@link Flags#MIN_RATE} to
   *     {@link Flags#MAX_RATE}, a negative Zipf exponent, a capacity below one 16-token block,
   *     or a bad {@code --modes} (see {@link #modes})
   */
  static Options options(String[] args) {
    Flags f = Flags.parse(args, Set.of(), Set.of("--seeds", "--slots", "--requests",
        "--prompts", "--zipf", "--rate", "--capacity", "--modes"));
    List<String> modes = f.has("--modes") ? modes(f.string("--modes", ""))
        : List.of("previous", "slots", "current");
    double zipf = f.number("--zipf", 1.0);
    if (zipf < 0) {
      throw new IllegalArgumentException("--zipf must be 0 or more, not " + zipf);
    }
    int seeds = f.atLeast("--seeds", 3, 1);
    // more than the simulated engine runs at once failed as the first engine was built
    int slots = f.atLeast("--slots", 64, 1, SimulatedEngine.MAX_SLOTS);
    return new Options(seeds, modes, new Params(4, slots,
        f.atLeast("--requests", 12_000, 1, Flags.MAX_REQUESTS), f.atLeast("--prompts", 256, 1),
        1024, 128, 8, zipf, f.between("--rate", 4_250, Flags.MIN_RATE, Flags.MAX_RATE),
        1_000_000, f.atLeast("--capacity", 131_072, 16)));
  }

  /**
   * The pricings of {@code --modes} (comma-separated), {@code previous} first: it is the
   * baseline every other mode's ratios are printed against, so it runs even when the list
   * leaves it out.
   *
   * @throws IllegalArgumentException for a mode other than previous, slots and current, or one
   *     given twice
   */
  static List<String> modes(String csv) {
    List<String> modes = new ArrayList<>(List.of("previous"));
    boolean previousSeen = false;
    for (String m : csv.split(",", -1)) {
      if (!List.of("previous", "slots", "current").contains(m)) {
        throw new IllegalArgumentException("--modes: unknown mode '" + m + "'");
      }
      if (m.equals("previous") ? previousSeen : modes.contains(m)) {
        throw new IllegalArgumentException("--modes: " + m + " is given twice");
      }
      if (m.equals("previous")) {
        previousSeen = true;
      } else {
        modes.add(m);
      }
    }
    return modes;
  }

  public static void main(String[] args) {
    Options opts = Flags.parseOrExit("usage: benchmarks/run slots [flags]\n"
        + "  many-slot engines, routing cost before vs now", args, SlotSimMain::options);
    int seeds = opts.seeds();
    List<String> modes = opts.modes();
    Params p = opts.params();
    System.out.printf(Locale.ROOT, "%d nodes x %d slots, %d-token KV cache each; %d system "
            + "prompts of %d tokens (Zipf %.2f) + 16..%d-token questions, %d output tokens; %d "
            + "requests at %s/s (Poisson), first 20%% not measured; 1 ms one-way delay%n",
        p.nodes(), p.slots(), p.capacityTokens(), p.prompts(), p.systemTokens(), p.zipf(),
        p.maxSuffix() + 15, p.outputTokens(), p.requests(),
        SimFleet.setting(p.ratePerSecond()));
    System.out.println("seed  mode      hit-rate  mean-ms  p50-ms  p99-ms  forwarded  spread  "
        + "busy  failed");
    List<Outcome[]> all = new ArrayList<>();
    for (int s = 1; s <= seeds; s++) {
      Outcome[] o = new Outcome[modes.size()];
      for (int m = 0; m < modes.size(); m++) {
        o[m] = run(p, s, modes.get(m));
        print(s, modes.get(m), o[m]);
      }
      all.add(o);
    }
    for (int m = 1; m < modes.size(); m++) {
      System.out.printf(Locale.ROOT, "%s / %s: hit rate, mean, p50, p99 latency, forwarded, "
          + "spread%n", modes.get(m), modes.get(0));
      for (int s = 0; s < all.size(); s++) {
        Outcome a = all.get(s)[m];
        Outcome b = all.get(s)[0];
        System.out.printf(Locale.ROOT, "seed %d  %s  %s  %s  %s  %s  %s%n", s + 1,
            SimFleet.figure(a.hitRate() / b.hitRate(), "%.3fx"),
            SimFleet.figure(a.meanMs() / b.meanMs(), "%.3fx"),
            SimFleet.figure(a.p50Ms() / b.p50Ms(), "%.3fx"),
            SimFleet.figure(a.p99Ms() / b.p99Ms(), "%.3fx"),
            SimFleet.figure(a.forwarded() / b.forwarded(), "%.3fx"),
            SimFleet.figure(a.spread() / b.spread(), "%.3fx"));
      }
    }
  }

  private static void print(int seed, String mode, Outcome o) {
    System.out.printf(Locale.ROOT,
        "%4d  %-8s  %8.3f  %7.1f  %6.1f  %6.1f  %9.3f  %6.3f  %4s  %6d%n",
        seed, mode, o.hitRate(), o.meanMs(), o.p50Ms(), o.p99Ms(), o.forwarded(), o.spread(),
        SimFleet.figure(o.utilization(), "%.2f"), o.failed());
  }

  /** Runs the workload of {@code seed} with the nodes pricing as {@code mode} says. */
  static Outcome run(Params p, long seed, String mode) {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = SimFleet.network(sim, seed, p.oneWayDelayNanos());
    List<PeerAddress> all = SimFleet.addresses(p.nodes());
    RouterConfig cfg = RouterConfig.builder().blockSize(16)
        .treeCapacityTokens(p.capacityTokens()).build();
    List<PrefixRouterNode> nodes = new ArrayList<>();
    List<SimulatedEngine> engines = new ArrayList<>();
    for (int i = 0; i < p.nodes(); i++) {
      SimulatedEngine e = SimFleet.engine(sim, p.slots(), p.capacityTokens()).build();
      engines.add(e);
      PrefixRouterNode n = SimFleet.node(i, all, cfg, net.transport("n" + i), e, sim, seed);
      if (!mode.equals("current")) {
        PricingAccess.usePreviousPricing(n, mode.equals("previous"), true);
      }
      nodes.add(n);
      n.start();
    }
    sim.advanceBy(Duration.ofSeconds(3).toNanos()); // membership converges

    // the workload: the same in every mode
    SplittableRandom r = new SplittableRandom(seed);
    int[][] system = SimFleet.systemPrompts(r, p.prompts(), p.systemTokens());
    ZipfDraw popularity = ZipfDraw.of(p.prompts(), p.zipf());
    long[] submitted = new long[p.requests()];
    long[] done = new long[p.requests()];
    List<CompletableFuture<InferenceResponse>> futures = new ArrayList<>();
    long t = sim.nanoTime();
    for (int q = 0; q < p.requests(); q++) {
      t += SimFleet.poissonGap(r, p.ratePerSecond());
      int k = popularity.rank(r.nextDouble());
      int[] prompt = Tokens.concat(system[k], SimFleet.tokens(r, 16 + r.nextInt(p.maxSuffix())));
      int entry = r.nextInt(p.nodes());
      sim.advanceTo(t);
      submitted[q] = sim.nanoTime();
      final int index = q;
      CompletableFuture<InferenceResponse> f = nodes.get(entry).submit(
          new InferenceRequest("q" + q, prompt, GenerationParams.greedy(p.outputTokens())));
      f.whenComplete((v, err) -> done[index] = sim.nanoTime());
      futures.add(f);
    }
    long arrivals = t - submitted[0];
    SimFleet.awaitAll(sim, futures);
    int warmup = p.requests() / 5;
    SimFleet.Tally tally = new SimFleet.Tally();
    long[] served = new long[p.nodes()];
    double[] latencies = new double[futures.size() - warmup];
    for (int q = warmup; q < futures.size(); q++) {
      latencies[q - warmup] = (done[q] - submitted[q]) / 1e6;
      InferenceResponse resp = tally.add(futures.get(q));
      if (resp != null) {
        served[Integer.parseInt(resp.servedBy().substring(1))]++;
      }
    }
    // slot time busy over the slot time of the arrival period (the whole run, warm-up included)
    long busy = engines.stream().mapToLong(e -> e.stats().busyNanos()).sum();
    double utilization = (double) busy / ((double) arrivals * p.nodes() * p.slots());
    SimFleet.stopAll(sim, nodes);
    SimFleet.Latencies l = SimFleet.Latencies.of(latencies);
    double meanServed = Arrays.stream(served).average().orElse(0);
    double maxServed = Arrays.stream(served).max().orElse(0);
    return new Outcome(tally.hitRate(), l.mean(), l.p50(), l.p99(),
        (double) tally.forwarded() / latencies.length, maxServed / meanServed, utilization,
        tally.failed());
  }
}
