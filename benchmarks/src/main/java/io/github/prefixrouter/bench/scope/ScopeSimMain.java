package io.github.prefixrouter.bench.scope;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.bench.SimFleet;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import io.github.prefixrouter.workload.Tokens;
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
 * A multi-LoRA fleet in simulated time: several adapters share the same system prompts, and the
 * engines key their prefix caches by adapter (as vLLM does). The same requests, on the same
 * seeds, run through the library twice, side by side in one process:
 *
 * <ul>
 *   <li><b>scope-aware</b>: requests carry their {@link CacheScope}; the trees, replicas and
 *       forwards separate scopes (the current code);
 *   <li><b>scope-blind</b>: the router sees every request as the base model's and the engine's
 *       cache events credit every chain to the base model (the behaviour before scopes), while
 *       the engines still run each request under its adapter, so a prefix cached for one
 *       adapter is a miss for another.
 * </ul>
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar io.github.prefixrouter.bench.scope.ScopeSimMain \
 *     [--seeds N] [--requests N] [--adapters N] [--prompts N] [--rate PER_SECOND]
 * </pre>
 *
 * <p>Prints, per seed and mode, the prompt-token hit rate (cached / prompt tokens, from the
 * engines' own results) and the latency (submission to answer, simulated) mean, median and
 * p99, then the aware / blind ratios ({@code -} for one that does not exist: a hit rate of 0
 * in blind mode).
 */
public final class ScopeSimMain {

  record Params(int nodes, int requests, int adapters, int prompts, int systemTokens,
      int maxSuffix, double ratePerSecond, long oneWayDelayNanos, int capacityTokens) {}

  record Outcome(double hitRate, double meanMs, double p50Ms, double p99Ms, long forwarded,
      long failed) {}

  private ScopeSimMain() {}

  /** The seeds to run (1..{@code seeds}) and the workload. */
  record Options(int seeds, Params params) {}

  /**
   * Parses the command line.
   *
   * @throws IllegalArgumentException for an unknown flag, one given twice or without its value,
   *     a value that is not a number, a count below 1 or a rate outside {@link Flags#MIN_RATE} to
   *     {@link Flags#MAX_RATE}
   */
  static Options options(String[] args) {
    Flags f = Flags.parse(args, Set.of(),
        Set.of("--seeds", "--requests", "--adapters", "--prompts", "--rate"));
    return new Options(f.atLeast("--seeds", 3, 1), new Params(4,
        f.atLeast("--requests", 6000, 1, Flags.MAX_REQUESTS), f.atLeast("--adapters", 4, 1),
        f.atLeast("--prompts", 8, 1), 1024, 128,
        f.between("--rate", 120, Flags.MIN_RATE, Flags.MAX_RATE), 1_000_000, 24_576));
  }

  public static void main(String[] args) {
    Options opts = Flags.parseOrExit("usage: benchmarks/run scope [flags]\n"
        + "  multi-LoRA fleet, scope-aware vs scope-blind", args, ScopeSimMain::options);
    int seeds = opts.seeds();
    Params p = opts.params();
    System.out.printf(Locale.ROOT, "%d nodes, %d adapters x %d shared system prompts of %d "
            + "tokens (+0..%d-token questions), %d requests at %s/s, %d-token KV cache per node,"
            + " 1 ms one-way delay%n", p.nodes(), p.adapters(), p.prompts(), p.systemTokens(),
        p.maxSuffix(), p.requests(), SimFleet.setting(p.ratePerSecond()), p.capacityTokens());
    System.out.println("seed  mode    hit-rate  mean-ms  p50-ms  p99-ms  forwarded  failed");
    List<double[]> ratios = new ArrayList<>();
    for (int s = 1; s <= seeds; s++) {
      Outcome blind = run(p, s, false);
      Outcome aware = run(p, s, true);
      print(s, "blind", blind);
      print(s, "aware", aware);
      ratios.add(new double[] {aware.hitRate() / blind.hitRate(), aware.meanMs() / blind.meanMs(),
          aware.p50Ms() / blind.p50Ms(), aware.p99Ms() / blind.p99Ms()});
    }
    System.out.println("aware / blind: hit rate, mean, p50, p99 latency");
    for (int s = 0; s < ratios.size(); s++) {
      double[] r = ratios.get(s);
      System.out.printf(Locale.ROOT, "seed %d  %s  %s  %s  %s%n", s + 1,
          SimFleet.figure(r[0], "%.2fx"), SimFleet.figure(r[1], "%.2fx"),
          SimFleet.figure(r[2], "%.2fx"), SimFleet.figure(r[3], "%.2fx"));
    }
  }

  private static void print(int seed, String mode, Outcome o) {
    System.out.printf(Locale.ROOT, "%4d  %-6s  %7.3f  %7.1f  %6.1f  %6.1f  %9d  %6d%n", seed,
        mode, o.hitRate(), o.meanMs(), o.p50Ms(), o.p99Ms(), o.forwarded(), o.failed());
  }

  /**
   * Runs the workload of {@code seed}; {@code aware}: the current routing, else scope-blind
   * (see the class notes).
   */
  static Outcome run(Params p, long seed, boolean aware) {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, seed);
    net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofNanos(p.oneWayDelayNanos())));
    Map<String, CacheScope> scopes = new HashMap<>(); // request id -> its adapter (blind mode)
    List<PeerAddress> all = SimFleet.addresses(p.nodes());
    RouterConfig cfg = RouterConfig.builder().blockSize(16)
        .treeCapacityTokens(p.capacityTokens()).build();
    List<PrefixRouterNode> nodes = new ArrayList<>();
    for (int i = 0; i < p.nodes(); i++) {
      SimulatedEngine e = SimFleet.engine(sim, 4, p.capacityTokens()).build();
      InferenceEngine engine = aware ? e : new ScopeBlind(e, scopes);
      PrefixRouterNode n = SimFleet.node(i, all, cfg, net.transport("n" + i), engine, sim, seed);
      nodes.add(n);
      n.start();
    }
    sim.advanceBy(Duration.ofSeconds(3).toNanos()); // membership converges

    // the workload: the same for both modes
    SplittableRandom r = new SplittableRandom(seed);
    int[][] system = SimFleet.systemPrompts(r, p.prompts(), p.systemTokens());
    CacheScope[] adapterScopes = new CacheScope[p.adapters()];
    for (int a = 0; a < adapterScopes.length; a++) {
      adapterScopes[a] = CacheScope.adapter("lora-" + a);
    }
    long[] submitted = new long[p.requests()];
    List<CompletableFuture<InferenceResponse>> futures = new ArrayList<>();
    long[] done = new long[p.requests()];
    long t = sim.nanoTime();
    for (int q = 0; q < p.requests(); q++) {
      t += SimFleet.poissonGap(r, p.ratePerSecond());
      int k = r.nextInt(system.length);
      CacheScope scope = adapterScopes[r.nextInt(adapterScopes.length)];
      int[] prompt = Tokens.concat(system[k], SimFleet.tokens(r, 16 + r.nextInt(p.maxSuffix())));
      int entry = r.nextInt(p.nodes());
      String id = "q" + q;
      sim.advanceTo(t);
      InferenceRequest req = new InferenceRequest(id, prompt, GenerationParams.greedy(8));
      if (aware) {
        req = req.withScope(scope);
      } else {
        scopes.put(id, scope);
      }
      submitted[q] = sim.nanoTime();
      final int index = q;
      CompletableFuture<InferenceResponse> f = nodes.get(entry).submit(req);
      f.whenComplete((v, err) -> done[index] = sim.nanoTime());
      futures.add(f);
    }
    SimFleet.awaitAll(sim, futures);
    SimFleet.Tally tally = new SimFleet.Tally();
    double[] latencies = new double[futures.size()];
    for (int q = 0; q < futures.size(); q++) {
      latencies[q] = (done[q] - submitted[q]) / 1e6;
      tally.add(futures.get(q));
    }
    SimFleet.stopAll(sim, nodes);
    SimFleet.Latencies l = SimFleet.Latencies.of(latencies);
    return new Outcome(tally.hitRate(), l.mean(), l.p50(), l.p99(), tally.forwarded(),
        tally.failed());
  }

  /**
   * The behaviour before scopes, around an engine that keys its cache by adapter: requests
   * reach the router without their adapter, which the engine gets back from {@code scopes} (by
   * request id) when it runs them; its cache events credit every chain to the base model.
   */
  static final class ScopeBlind extends ForwardingEngine {
    private final Map<String, CacheScope> scopes;

    ScopeBlind(SimulatedEngine engine, Map<String, CacheScope> scopes) {
      super(engine);
      this.scopes = scopes;
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest request) {
      return delegate.execute(request.withScope(
          scopes.getOrDefault(request.id(), CacheScope.DEFAULT)));
    }

    @Override
    public void setCacheEventListener(CacheEventListener listener) {
      delegate.setCacheEventListener(new CacheEventListener() {
        @Override
        public void onBlocksStored(long parent, long[] hashes, int[] tokens) {
          listener.onBlocksStored(parent, hashes, tokens);
        }

        @Override
        public void onBlocksStored(CacheScope scope, long parent, long[] hashes, int[] tokens) {
          listener.onBlocksStored(parent, hashes, tokens); // every chain: the base model's
        }

        @Override
        public void onBlocksRemoved(long[] hashes) {
          listener.onBlocksRemoved(hashes);
        }

        @Override
        public void onAllCleared() {
          listener.onAllCleared();
        }
      });
    }
  }
}
