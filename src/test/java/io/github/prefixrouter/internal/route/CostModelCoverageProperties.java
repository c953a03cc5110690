package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.EngineResult;
import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/**
 * What {@link CostModel} says the samples cover, against a naive model that keeps every sample:
 * the longest uncached prompt part of a sample, and the longest time (reported prefill, else the
 * timed service of an engine that reports none, whose cached count the node may estimate) at
 * that length; and that the bound it gives is
 * above the prefill of every covered length when the prefill time per token grows with the
 * length.
 */
class CostModelCoverageProperties {

  /** One result: prompt and cached tokens, whether timings are reported, and the elapsed time. */
  record Sample(int prompt, int cached, boolean reported, boolean cachedKnown, boolean timed,
      boolean estimated) {}

  @Provide
  Arbitrary<List<Sample>> samples() {
    Arbitrary<Sample> s = Combinators.combine(
        Arbitraries.integers().between(0, 4_000), Arbitraries.integers().between(0, 100),
        Arbitraries.of(true, false), Arbitraries.of(true, true, true, false),
        Arbitraries.of(true, true, true, false), Arbitraries.of(true, false))
        .as((p, cachedPercent, rep, known, timed, est) -> new Sample(p, p * cachedPercent / 100,
            rep, known, timed, est));
    return s.list().ofMinSize(0).ofMaxSize(40);
  }

  /** Prefill nanos of {@code u} uncached tokens: {@code b u + c u²}, per token growing. */
  static long prefill(int u, int b, int c) {
    return (long) b * u + (long) c * u * u;
  }

  @Property(tries = 300)
  void coverageAndBoundMatchTheNaiveModel(@ForAll("samples") List<Sample> samples,
      @ForAll @IntRange(min = 1, max = 2_000_000) int b, @ForAll @IntRange(max = 500) int c,
      @ForAll @IntRange(max = 50_000_000) int decodePerToken) {
    CostModel m = new CostModel(100_000);
    List<long[]> seen = new ArrayList<>(); // {uncached, nanos} of every sample that counts
    for (Sample s : samples) {
      int u = s.prompt() - s.cached();
      int out = 4;
      long pre = prefill(u, b, c);
      long dec = (long) decodePerToken * out;
      int cached = s.cachedKnown() ? s.cached() : -1;
      EngineResult r = new EngineResult(new int[out], "", s.prompt(), cached,
          s.reported() ? pre : -1, s.reported() ? dec : -1);
      long elapsed = s.timed() ? pre + dec + 1_000_000 : -1;
      // the node's estimate of the cached tokens, when it has one (here: right)
      m.observe(r, elapsed, s.estimated() ? s.cached() : -1);
      if (s.reported() && s.cachedKnown() && u >= 1) {
        seen.add(new long[] {u, pre});
      } else if (!s.reported() && s.timed() && (s.cachedKnown() || s.estimated()) && u >= 1) {
        seen.add(new long[] {u, elapsed});
      }
      // the naive model: the longest sampled length, and the longest time at it
      long longest = 0;
      long time = 0;
      for (long[] x : seen) {
        if (x[0] > longest) {
          longest = x[0];
          time = x[1];
        } else if (x[0] == longest) {
          time = Math.max(time, x[1]);
        }
      }
      assertTrue(m.covers(0));
      assertTrue(m.covers((int) longest));
      assertFalse(m.covers((int) longest + 1));
      double bound = longest > 0 ? (double) time / longest : 0;
      assertEquals(bound, m.prefillBoundNanosPerToken(), 1e-9 * Math.max(1, bound));
      // sound: every covered length's prefill is within the bound
      for (int k = 1; k <= longest; k += Math.max(1, (int) longest / 50)) {
        assertTrue(k * m.prefillBoundNanosPerToken() >= prefill(k, b, c) - 1e-6 * prefill(k, b, c),
            "prefill of " + k + " tokens above the bound");
      }
    }
  }
}
