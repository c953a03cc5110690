package io.github.prefixrouter.sim;

import io.github.prefixrouter.workload.PromptSource;
import io.github.prefixrouter.workload.SubjectPopularity;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.SplittableRandom;

/**
 * The requests of one run, the same for every policy of a (distribution, seed): Poisson arrival
 * times, a subject drawn from the popularity distribution, a question of that subject drawn
 * uniformly, and an entry node drawn uniformly. The arrivals are not stored: {@link #arrivals()}
 * draws them again from the seeded stream each time, so that a run holds none of the arrivals it
 * has not reached yet (nor any it has passed), whatever the number of requests.
 */
final class Trace {

  /** One request of the trace. */
  record Arrival(int index, long atNanos, int entry, int subject, int question) {}

  private final PromptSource prompts;
  private final SubjectPopularity popularity;
  private final long streamSeed;
  private final int requests;
  private final double ratePerSecond;
  private final int nodes;
  private final long lastAtNanos;

  private Trace(PromptSource prompts, SubjectPopularity popularity, long streamSeed, SimConfig cfg) {
    this.prompts = prompts;
    this.popularity = popularity;
    this.streamSeed = streamSeed;
    this.requests = cfg.requests();
    this.ratePerSecond = cfg.ratePerSecond();
    this.nodes = cfg.nodes();
    long last = 0;
    for (Iterator<Arrival> it = arrivals(); it.hasNext(); ) {
      last = it.next().atNanos();
    }
    this.lastAtNanos = last;
  }

  /** The arrivals in order of time (and of index), drawn afresh: the same on every call. */
  Iterator<Arrival> arrivals() {
    SplittableRandom rnd = new SplittableRandom(streamSeed);
    rnd.nextLong(); // the popularity ranking's draw
    return new Iterator<>() {
      private int i;
      private double t;

      @Override
      public boolean hasNext() {
        return i < requests;
      }

      @Override
      public Arrival next() {
        if (i >= requests) {
          throw new NoSuchElementException();
        }
        t += -Math.log(1.0 - rnd.nextDouble()) / ratePerSecond;
        int subject = popularity.sample(rnd.nextDouble());
        int question = rnd.nextInt(prompts.promptCount(subject));
        int entry = rnd.nextInt(nodes);
        return new Arrival(i++, Math.round(t * 1e9), entry, subject, question);
      }
    };
  }

  /** The number of arrivals. */
  int size() {
    return requests;
  }

  /** The time of the last arrival. */
  long lastAtNanos() {
    return lastAtNanos;
  }

  /** The subject with popularity rank {@code r} (0 = most popular). */
  int subjectOfRank(int r) {
    return popularity.subjectOfRank(r);
  }

  static Trace generate(PromptSource prompts, Distribution dist, SimConfig cfg, long seed) {
    long streamSeed = seed ^ (dist.ordinal() + 1) * 0x9E3779B97F4A7C15L;
    SplittableRandom rnd = new SplittableRandom(streamSeed);
    // popularity ranks in a seeded random order, so rank 1 is not always the first file
    SubjectPopularity popularity = SubjectPopularity.of(
        prompts.subjectCount(), dist == Distribution.UNIFORM ? 0 : cfg.zipfExponent(), rnd.nextLong());
    return new Trace(prompts, popularity, streamSeed, cfg);
  }
}
