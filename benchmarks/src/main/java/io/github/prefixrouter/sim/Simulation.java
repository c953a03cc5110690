package io.github.prefixrouter.sim;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import io.github.prefixrouter.workload.PromptSource;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.IntConsumer;

/**
 * Runs one scenario: a fresh simulated clock, one {@link SimulatedEngine} per node, the cluster
 * of the scenario's policy, and the trace's arrivals. Single-threaded and deterministic: the same
 * configuration, trace and scenario give the same result.
 */
final class Simulation {

  /** Builds the cluster of a policy around the run's engines. */
  interface ClusterFactory {
    SimCluster create(Context context);
  }

  /**
   * What a cluster is built from.
   *
   * @param scenario the scenario
   * @param config the configuration
   * @param scheduler the run's clock and scheduler, shared by every component (which schedules
   *     only through it: it schedules the arrivals just in time)
   * @param engines one engine per node
   * @param seed the run's seed: the same for every policy of a (delay, distribution) cell
   */
  record Context(
      Scenario scenario,
      SimConfig config,
      RunClock scheduler,
      List<RecordingEngine> engines,
      long seed) {

    long delayNanos() {
      return scenario.delayMs() * 1_000_000L;
    }

    SimLink newLink(long salt) {
      return new SimLink(
          delayNanos(), config.jitterFraction(), new SplittableRandom(seed ^ Baselines.mix(salt)));
    }
  }

  private static final long GRACE_NANOS = 600_000_000_000L;

  private Simulation() {}

  /** A seed shared by every policy of the same (delay, distribution) cell. */
  static long cellSeed(SimConfig cfg, Scenario s) {
    return Baselines.mix(cfg.seed() ^ Baselines.mix(s.delayMs() * 31L + s.distribution().ordinal()));
  }

  static RunResult run(
      Scenario scenario,
      SimConfig cfg,
      PromptSource prompts,
      Trace trace,
      ClusterFactory factory,
      IntConsumer progress) {
    RunClock clock = new RunClock(new SimulatedScheduler());
    int n = trace.size();
    RunRecorder rec = new RunRecorder(n);
    long seed = cellSeed(cfg, scenario);
    List<RecordingEngine> engines = new ArrayList<>();
    for (int i = 0; i < cfg.nodes(); i++) {
      SimulatedEngine e = cfg.engine().newEngine(clock, Baselines.mix(seed + i));
      engines.add(new RecordingEngine(i, e, rec, cfg.engine().reportsTimings()));
    }
    SimCluster cluster = factory.create(new Context(scenario, cfg, clock, engines, seed));
    int[] done = new int[1];
    GenerationParams params = GenerationParams.greedy(cfg.outputTokens());
    clock.startArrivals(
        trace.arrivals(),
        a -> () -> {
          int[] tokens = prompts.prompt(a.subject(), a.question());
          InferenceRequest req = new InferenceRequest(RunRecorder.requestId(a.index()), tokens,
              params);
          rec.submitted(a, tokens.length);
          cluster
              .submit(a.entry(), req)
              .whenComplete(
                  (r, e) -> {
                    rec.completed(a.index(), clock.nanoTime(), e == null);
                    done[0]++;
                    progress.accept(1);
                  });
        });
    long deadline = trace.lastAtNanos() + GRACE_NANOS;
    while (done[0] < n && clock.nanoTime() <= deadline && clock.runNext()) {
      // run the simulation until every request has its answer
    }
    long end = clock.nanoTime();
    long gossip = cluster.gossipBytesSent();
    cluster.close();
    if (done[0] < n) {
      progress.accept(n - done[0]);
    }
    return summarize(scenario, cfg, prompts, trace, rec, end, gossip);
  }

  static RunResult summarize(
      Scenario scenario,
      SimConfig cfg,
      PromptSource prompts,
      Trace trace,
      RunRecorder rec,
      long endNanos,
      long gossipBytes) {
    int n = rec.arrivalNanos.length;
    int nodes = cfg.nodes();
    double[] lat = new double[Math.max(0, n - cfg.warmupRequests())];
    int m = 0;
    int failed = 0;
    int measured = 0;
    long prompt = 0;
    long cached = 0;
    int forwarded = 0;
    int served = 0;
    int[] perNode = new int[nodes];
    for (int i = cfg.warmupRequests(); i < n; i++) {
      measured++;
      if (rec.doneNanos[i] < 0 || rec.failed[i]) {
        failed++;
        continue;
      }
      lat[m++] = (rec.doneNanos[i] - rec.arrivalNanos[i]) / 1e9;
      if (rec.servedBy[i] >= 0) {
        served++;
        perNode[rec.servedBy[i]]++;
        prompt += rec.promptTokens[i];
        cached += rec.cachedTokens[i];
        if (rec.servedBy[i] != rec.entry[i]) {
          forwarded++;
        }
      }
    }
    double[] sorted = m == lat.length ? lat : Arrays.copyOf(lat, m);
    Arrays.sort(sorted);
    double mean = m == 0 ? Double.NaN : Arrays.stream(sorted).sum() / m;
    double[] shares = new double[nodes];
    double maxShare = 0;
    for (int i = 0; i < nodes; i++) {
      shares[i] = served == 0 ? 0 : (double) perNode[i] / served;
      maxShare = Math.max(maxShare, shares[i]);
    }
    double seconds = endNanos / 1e9;
    int top = trace.subjectOfRank(0);
    return new RunResult(
        scenario,
        measured,
        failed,
        mean,
        percentile(sorted, 0.50),
        percentile(sorted, 0.99),
        prompt == 0 ? 0 : (double) cached / prompt,
        served == 0 ? 0 : (double) forwarded / served,
        maxShare,
        shares,
        seconds <= 0 ? 0 : gossipBytes / (double) nodes / seconds,
        seconds,
        timeline(cfg, rec, top),
        prompts.subjectName(top));
  }

  /** Nearest-rank percentile of sorted values. */
  static double percentile(double[] sorted, double q) {
    if (sorted.length == 0) {
      return Double.NaN;
    }
    int rank = (int) Math.ceil(q * sorted.length);
    return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
  }

  private static List<RunResult.Window> timeline(SimConfig cfg, RunRecorder rec, int topSubject) {
    int n = rec.arrivalNanos.length;
    long w = Math.round(cfg.timelineWindowSeconds() * 1e9);
    long last = rec.arrivalNanos[n - 1];
    int windows = (int) (last / w) + 1;
    int nodes = cfg.nodes();
    long[] prompt = new long[windows];
    long[] cached = new long[windows];
    int[] count = new int[windows];
    int[][] perNode = new int[windows][nodes];
    int[][] topPerNode = new int[windows][nodes];
    int[] topCount = new int[windows];
    for (int i = 0; i < n; i++) {
      if (rec.servedBy[i] < 0) {
        continue;
      }
      int k = (int) (rec.arrivalNanos[i] / w);
      count[k]++;
      prompt[k] += rec.promptTokens[i];
      cached[k] += rec.cachedTokens[i];
      perNode[k][rec.servedBy[i]]++;
      if (rec.subject[i] == topSubject) {
        topCount[k]++;
        topPerNode[k][rec.servedBy[i]]++;
      }
    }
    List<RunResult.Window> out = new ArrayList<>(windows);
    for (int k = 0; k < windows; k++) {
      double[] s = new double[nodes];
      double[] t = new double[nodes];
      for (int j = 0; j < nodes; j++) {
        s[j] = count[k] == 0 ? 0 : (double) perNode[k][j] / count[k];
        t[j] = topCount[k] == 0 ? 0 : (double) topPerNode[k][j] / topCount[k];
      }
      out.add(
          new RunResult.Window(
              k * cfg.timelineWindowSeconds(),
              count[k],
              prompt[k] == 0 ? 0 : (double) cached[k] / prompt[k],
              s,
              t));
    }
    return out;
  }
}
