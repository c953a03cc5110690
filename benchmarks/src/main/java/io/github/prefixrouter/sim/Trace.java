package io.github.prefixrouter.sim;

import io.github.prefixrouter.workload.PromptSource;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.SplittableRandom;

/**
 * The requests of one run, generated once per (distribution, seed) so that every policy sees the
 * very same arrivals: Poisson arrival times, a subject drawn from the popularity distribution, a
 * question of that subject drawn uniformly, and an entry node drawn uniformly.
 */
final class Trace {

  /** One request of the trace. */
  record Arrival(int index, long atNanos, int entry, int subject, int question) {}

  private final List<Arrival> arrivals;
  private final int[] popularityRank;

  private Trace(List<Arrival> arrivals, int[] popularityRank) {
    this.arrivals = arrivals;
    this.popularityRank = popularityRank;
  }

  List<Arrival> arrivals() {
    return arrivals;
  }

  /** The subject with popularity rank {@code r} (0 = most popular). */
  int subjectOfRank(int r) {
    return popularityRank[r];
  }

  static Trace generate(PromptSource prompts, Distribution dist, SimConfig cfg, long seed) {
    SplittableRandom rnd = new SplittableRandom(seed ^ (dist.ordinal() + 1) * 0x9E3779B97F4A7C15L);
    int n = prompts.subjectCount();
    // popularity ranks in a seeded random order, so rank 1 is not always the first file
    List<Integer> order = new ArrayList<>();
    for (int s = 0; s < n; s++) {
      order.add(s);
    }
    Collections.shuffle(order, new java.util.Random(rnd.nextLong()));
    int[] rank = order.stream().mapToInt(Integer::intValue).toArray();
    double[] cdf = new double[n];
    double sum = 0;
    for (int r = 0; r < n; r++) {
      double w = dist == Distribution.UNIFORM ? 1.0 : 1.0 / Math.pow(r + 1, cfg.zipfExponent());
      sum += w;
      cdf[r] = sum;
    }
    for (int r = 0; r < n; r++) {
      cdf[r] /= sum;
    }
    List<Arrival> out = new ArrayList<>(cfg.requests());
    double t = 0;
    for (int i = 0; i < cfg.requests(); i++) {
      t += -Math.log(1.0 - rnd.nextDouble()) / cfg.ratePerSecond();
      double u = rnd.nextDouble();
      int r = 0;
      while (r < n - 1 && cdf[r] < u) {
        r++;
      }
      int subject = rank[r];
      int question = rnd.nextInt(prompts.promptCount(subject));
      int entry = rnd.nextInt(cfg.nodes());
      out.add(new Arrival(i, Math.round(t * 1e9), entry, subject, question));
    }
    return new Trace(List.copyOf(out), rank);
  }
}
