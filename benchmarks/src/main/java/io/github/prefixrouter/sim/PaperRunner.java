package io.github.prefixrouter.sim;

import io.github.prefixrouter.workload.PromptSource;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Runs the whole comparison matrix (policies × delays × distributions) on the same traces and
 * seeds, in parallel runs that are each deterministic.
 */
final class PaperRunner {

  private PaperRunner() {}

  static List<Scenario> scenarios(SimConfig cfg) {
    List<Scenario> out = new ArrayList<>();
    for (Distribution d : cfg.distributions()) {
      for (int delay : cfg.delaysMs()) {
        for (Policy p : cfg.policies()) {
          out.add(new Scenario(p, delay, d));
        }
      }
    }
    return out;
  }

  static List<RunResult> run(
      SimConfig cfg, PromptSource prompts, Simulation.ClusterFactory factory, ProgressBar bar)
      throws InterruptedException {
    Map<Distribution, Trace> traces = new EnumMap<>(Distribution.class);
    for (Distribution d : cfg.distributions()) {
      traces.put(d, Trace.generate(prompts, d, cfg, cfg.seed()));
    }
    List<Scenario> scenarios = scenarios(cfg);
    ExecutorService pool =
        Executors.newFixedThreadPool(
            cfg.threads(),
            r -> {
              Thread t = new Thread(r, "sim-run");
              t.setDaemon(true);
              return t;
            });
    try {
      List<Future<RunResult>> futures = new ArrayList<>();
      for (Scenario s : scenarios) {
        futures.add(
            pool.submit(
                () -> {
                  RunResult r =
                      Simulation.run(
                          s,
                          cfg,
                          prompts,
                          traces.get(s.distribution()),
                          factory,
                          n -> {
                            if (bar != null) {
                              bar.advance(n);
                            }
                          });
                  if (bar != null) {
                    bar.runFinished();
                  }
                  return r;
                }));
      }
      List<RunResult> out = new ArrayList<>();
      for (Future<RunResult> f : futures) {
        try {
          out.add(f.get());
        } catch (ExecutionException e) {
          Throwable c = e.getCause();
          if (c instanceof RuntimeException re) {
            throw re;
          }
          throw new IllegalStateException(c);
        }
      }
      if (bar != null) {
        bar.finish();
      }
      return out;
    } catch (RuntimeException | Error | InterruptedException e) {
      if (bar != null) {
        bar.abandon(); // the failure's trace was written after the bar, on its line
      }
      throw e;
    } finally {
      pool.shutdownNow();
    }
  }

  /** The result of a scenario, or null. */
  static RunResult find(List<RunResult> results, Policy p, int delayMs, Distribution d) {
    for (RunResult r : results) {
      Scenario s = r.scenario();
      if (s.policy() == p && s.delayMs() == delayMs && s.distribution() == d) {
        return r;
      }
    }
    return null;
  }
}
