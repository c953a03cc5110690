package io.github.prefixrouter.sim;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.bench.ResultsJson;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.function.Function;

/**
 * Everything a simulation run depends on. Same configuration, same results.
 *
 * @param seed master seed: workload, network jitter, node randomness and baselines derive from it
 * @param nodes number of nodes
 * @param ratePerSecond cluster-wide Poisson arrival rate, requests per simulated second, at
 *     least {@link Flags#MIN_RATE} (the arrivals of a run then fit the simulated clock)
 * @param requests requests per run, warm-up included, at most {@link #MAX_REQUESTS}
 * @param warmupRequests first requests of each run that are executed but not measured
 * @param zipfExponent exponent of the subject popularity of the skewed distribution
 * @param delaysMs one-way network delays to compare, in milliseconds, each once
 * @param jitterFraction each message takes delay + uniform[0, jitterFraction × delay)
 * @param lossProbability probability that a one-way message between the library's nodes is lost
 *     (forwarding and gossip); the baselines' links never lose a message
 * @param outputTokens tokens generated per request, 1 to 2^20 (the nodes' range)
 * @param engine the engine model of every node
 * @param timelineWindowSeconds width of the windows of the over-time series: at least 1 ns,
 *     and wide enough that the run's expected length makes at most {@link #MAX_TIMELINE_WINDOWS}
 * @param threads runs executed in parallel, 1 to {@link #MAX_THREADS} (each run is
 *     single-threaded and deterministic)
 * @param policies the policies to compare, each once
 * @param distributions the popularity distributions to compare, each once
 * @param mmluDir the MMLU data directory, or null for the MMLU-shaped generator
 * @param outDir where the JSON and plots go
 */
public record SimConfig(
    long seed,
    int nodes,
    double ratePerSecond,
    int requests,
    int warmupRequests,
    double zipfExponent,
    List<Integer> delaysMs,
    double jitterFraction,
    double lossProbability,
    int outputTokens,
    EngineProfile engine,
    double timelineWindowSeconds,
    int threads,
    List<Policy> policies,
    List<Distribution> distributions,
    Path mmluDir,
    Path outDir) {

  /**
   * Most windows a run's over-time series may have (about {@code requests / ratePerSecond /
   * timelineWindowSeconds}): each window holds per-node arrays and is written to the JSON.
   */
  public static final int MAX_TIMELINE_WINDOWS = 100_000;

  /**
   * Most requests per run: far above any sensible run (the default is 7,500). Each run holds its
   * results, 37 bytes per request (its arrivals only as it reaches them), for as many runs at
   * once as {@link #threads}.
   */
  public static final int MAX_REQUESTS = 1_000_000;

  /**
   * Most runs executed in parallel: each run in progress holds its whole cluster and results, so
   * more at once than cores to run them fill the heap and gain nothing.
   */
  public static final int MAX_THREADS = 16;

  /** The main job's defaults (docs/simulator.md explains each). */
  public static SimConfig defaults() {
    return new SimConfig(
        42L,
        4,
        4.5,
        7_500,
        1_500,
        1.0,
        List.of(2, 200, 1000),
        0.1,
        0.0,
        1,
        EngineProfile.DEFAULT,
        20.0,
        Math.max(1, Math.min(4, Runtime.getRuntime().availableProcessors())),
        Policy.defaults(),
        List.of(Distribution.values()),
        null,
        ResultsJson.resultsDir(SimConfig.class));
  }

  public SimConfig {
    Objects.requireNonNull(delaysMs, "delaysMs");
    Objects.requireNonNull(engine, "engine");
    Objects.requireNonNull(policies, "policies");
    Objects.requireNonNull(distributions, "distributions");
    Objects.requireNonNull(outDir, "outDir");
    delaysMs = List.copyOf(delaysMs);
    policies = List.copyOf(policies);
    distributions = List.copyOf(distributions);
    if (nodes < 1 || nodes > 1024) {
      throw new IllegalArgumentException("nodes must be 1 to 1024, was " + nodes);
    }
    if (!(ratePerSecond > 0) || Double.isInfinite(ratePerSecond)) {
      throw new IllegalArgumentException("rate must be > 0 requests/s, was " + ratePerSecond);
    }
    if (ratePerSecond < Flags.MIN_RATE) {
      // below it the arrivals of a long run pass a long of nanoseconds: every request failed
      throw new IllegalArgumentException("rate must be at least " + Flags.MIN_RATE
          + " requests/s, was " + ratePerSecond);
    }
    if (requests < 1 || requests > MAX_REQUESTS) {
      throw new IllegalArgumentException("requests must be >= 1 and <= " + MAX_REQUESTS
          + ", was " + requests);
    }
    if (warmupRequests < 0 || warmupRequests >= requests) {
      throw new IllegalArgumentException(
          "warm-up must be in [0, requests=" + requests + "), was " + warmupRequests);
    }
    if (!(zipfExponent >= 0) || Double.isInfinite(zipfExponent)) {
      throw new IllegalArgumentException("zipf exponent must be >= 0, was " + zipfExponent);
    }
    if (delaysMs.isEmpty()) {
      throw new IllegalArgumentException("give at least one network delay");
    }
    for (int d : delaysMs) {
      if (d < 0) {
        throw new IllegalArgumentException("network delays must be >= 0 ms, was " + d);
      }
    }
    requireDistinct(delaysMs, d -> "network delay " + d + " ms");
    if (!(jitterFraction >= 0 && jitterFraction < 1)) {
      throw new IllegalArgumentException("jitter must be in [0, 1), was " + jitterFraction);
    }
    if (!(lossProbability >= 0 && lossProbability < 1)) {
      throw new IllegalArgumentException("loss must be in [0, 1), was " + lossProbability);
    }
    if (outputTokens < 1 || outputTokens > GenerationParams.MAX_TOKENS_LIMIT) {
      // the nodes' range: beyond it every run failed as its first request was made
      throw new IllegalArgumentException("output tokens must be 1 to "
          + GenerationParams.MAX_TOKENS_LIMIT + ", was " + outputTokens);
    }
    if (!(timelineWindowSeconds >= 1e-9)) {
      throw new IllegalArgumentException(
          "timeline window must be at least 1 ns (1e-9 s), was " + timelineWindowSeconds);
    }
    double windows = requests / ratePerSecond / timelineWindowSeconds;
    if (windows > MAX_TIMELINE_WINDOWS) {
      throw new IllegalArgumentException(String.format(java.util.Locale.ROOT,
          "timeline window of %s s makes about %.3g windows over the run's %.0f s; at most %d",
          timelineWindowSeconds, windows, requests / ratePerSecond, MAX_TIMELINE_WINDOWS));
    }
    if (threads < 1 || threads > MAX_THREADS) {
      throw new IllegalArgumentException(
          "threads must be 1 to " + MAX_THREADS + ", was " + threads);
    }
    if (policies.isEmpty() || distributions.isEmpty()) {
      throw new IllegalArgumentException("give at least one policy and one distribution");
    }
    requireDistinct(policies, p -> "policy " + p.label());
    requireDistinct(distributions, d -> "distribution " + d.label());
  }

  /** Refuses an element listed twice: its cell would be simulated, printed and written twice. */
  private static <T> void requireDistinct(List<T> list, Function<T, String> name) {
    for (int i = 0; i < list.size(); i++) {
      if (list.subList(0, i).contains(list.get(i))) {
        throw new IllegalArgumentException(name.apply(list.get(i)) + " is given twice");
      }
    }
  }

  SimConfig withSeed(long s) {
    return new SimConfig(s, nodes, ratePerSecond, requests, warmupRequests, zipfExponent,
        delaysMs, jitterFraction, lossProbability, outputTokens, engine, timelineWindowSeconds,
        threads, policies, distributions, mmluDir, outDir);
  }
}
