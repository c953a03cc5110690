package io.github.prefixrouter.sim;

import io.github.prefixrouter.workload.PromptSource;
import io.github.prefixrouter.workload.SubjectPopularity;
import java.util.ArrayList;
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
  private final SubjectPopularity popularity;

  private Trace(List<Arrival> arrivals, SubjectPopularity popularity) {
    this.arrivals = arrivals;
    this.popularity = popularity;
  }

  List<Arrival> arrivals() {
    return arrivals;
  }

  /** The subject with popularity rank {@code r} (0 = most popular). */
  int subjectOfRank(int r) {
    return popularity.subjectOfRank(r);
  }

  static Trace generate(PromptSource prompts, Distribution dist, SimConfig cfg, long seed) {
    SplittableRandom rnd = new SplittableRandom(seed ^ (dist.ordinal() + 1) * 0x9E3779B97F4A7C15L);
    // popularity ranks in a seeded random order, so rank 1 is not always the first file
    SubjectPopularity popularity = SubjectPopularity.of(
        prompts.subjectCount(), dist == Distribution.UNIFORM ? 0 : cfg.zipfExponent(), rnd.nextLong());
    List<Arrival> out = new ArrayList<>(cfg.requests());
    double t = 0;
    for (int i = 0; i < cfg.requests(); i++) {
      t += -Math.log(1.0 - rnd.nextDouble()) / cfg.ratePerSecond();
      int subject = popularity.sample(rnd.nextDouble());
      int question = rnd.nextInt(prompts.promptCount(subject));
      int entry = rnd.nextInt(cfg.nodes());
      out.add(new Arrival(i, Math.round(t * 1e9), entry, subject, question));
    }
    return new Trace(List.copyOf(out), popularity);
  }
}
