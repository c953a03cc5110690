package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.github.prefixrouter.workload.PromptSource;
import io.github.prefixrouter.workload.SyntheticMmluPrompts;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;


class TraceTest {

  private final PromptSource prompts = SyntheticMmluPrompts.create(1, 50);

  private SimConfig cfg(int requests, double rate, double zipf) {
    SimConfig d = SimConfig.defaults();
    return new SimConfig(7, 4, rate, requests, 0, zipf, d.delaysMs(), 0.1, 0, 1, d.engine(), 20,
        1, d.policies(), d.distributions(), null, d.outDir());
  }

  @Test
  void poissonArrivalsAtTheConfiguredRateWithUniformEntryNodes() {
    Trace t = Trace.generate(prompts, Distribution.UNIFORM, cfg(20_000, 8.0, 1.0), 7);
    List<Trace.Arrival> a = all(t);
    double seconds = a.get(a.size() - 1).atNanos() / 1e9;
    assertEquals(8.0, a.size() / seconds, 0.25);
    int[] entries = new int[4];
    long prev = -1;
    for (Trace.Arrival x : a) {
      entries[x.entry()]++;
      assertTrue(x.atNanos() >= prev);
      prev = x.atNanos();
    }
    for (int e : entries) {
      assertEquals(5000, e, 250);
    }
  }

  @Test
  void zipfPopularityFollowsTheExponent() {
    int n = 57;
    Trace t = Trace.generate(prompts, Distribution.SKEWED, cfg(50_000, 8.0, 1.0), 7);
    int[] bySubject = new int[n];
    for (Trace.Arrival x : all(t)) {
      bySubject[x.subject()]++;
    }
    double h = 0;
    for (int r = 1; r <= n; r++) {
      h += 1.0 / r;
    }
    // rank 1 gets 1/H(57) of the traffic, rank 2 half of that
    assertEquals(50_000 / h, bySubject[t.subjectOfRank(0)], 50_000 / h * 0.05);
    assertEquals(50_000 / h / 2, bySubject[t.subjectOfRank(1)], 50_000 / h / 2 * 0.07);
    Trace u = Trace.generate(prompts, Distribution.UNIFORM, cfg(57_000, 8.0, 1.0), 7);
    int[] uni = new int[n];
    for (Trace.Arrival x : all(u)) {
      uni[x.subject()]++;
    }
    for (int c : uni) {
      assertEquals(1000, c, 130);
    }
  }

  /** Every arrival of a trace, in order. */
  static List<Trace.Arrival> all(Trace t) {
    List<Trace.Arrival> out = new ArrayList<>();
    t.arrivals().forEachRemaining(out::add);
    return out;
  }

  @Test
  void sameSeedSameTrace() {
    SimConfig c = cfg(500, 8.0, 1.2);
    assertEquals(
        all(Trace.generate(prompts, Distribution.SKEWED, c, 3)),
        all(Trace.generate(prompts, Distribution.SKEWED, c, 3)));
    assertTrue(
        !all(Trace.generate(prompts, Distribution.SKEWED, c, 3))
            .equals(all(Trace.generate(prompts, Distribution.SKEWED, c, 4))));
  }
}
