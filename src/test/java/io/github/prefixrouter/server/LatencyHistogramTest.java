package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.server.PrometheusText.Type;
import io.github.prefixrouter.server.PrometheusTextParser.Histogram;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import org.junit.jupiter.api.Test;

/** The latency histogram, and how the text format writes it. */
class LatencyHistogramTest {

  private static final long MS = 1_000_000L;

  @Test
  void theTextHasCumulativeBucketsTheSumInSecondsAndTheCount() {
    LatencyHistogram h = new LatencyHistogram();
    h.record(5 * MS);
    h.record(10 * MS); // on a bound: counted in its bucket (le is "at most")
    h.record(10 * MS + 1);
    h.record(3_000 * MS);
    h.record(200_000 * MS); // above the last bound: +Inf only
    h.record(-7); // a clock that went back: 0
    String text = new PrometheusText().family("d_seconds", Type.HISTOGRAM, "Durations.")
        .histogram("served", "local", h.snapshot()).toString();
    assertEquals("# HELP d_seconds Durations.\n"
        + "# TYPE d_seconds histogram\n"
        + "d_seconds_bucket{served=\"local\",le=\"0.01\"} 3\n"
        + "d_seconds_bucket{served=\"local\",le=\"0.025\"} 4\n"
        + "d_seconds_bucket{served=\"local\",le=\"0.05\"} 4\n"
        + "d_seconds_bucket{served=\"local\",le=\"0.1\"} 4\n"
        + "d_seconds_bucket{served=\"local\",le=\"0.25\"} 4\n"
        + "d_seconds_bucket{served=\"local\",le=\"0.5\"} 4\n"
        + "d_seconds_bucket{served=\"local\",le=\"1.0\"} 4\n"
        + "d_seconds_bucket{served=\"local\",le=\"2.5\"} 4\n"
        + "d_seconds_bucket{served=\"local\",le=\"5.0\"} 5\n"
        + "d_seconds_bucket{served=\"local\",le=\"10.0\"} 5\n"
        + "d_seconds_bucket{served=\"local\",le=\"15.0\"} 5\n"
        + "d_seconds_bucket{served=\"local\",le=\"30.0\"} 5\n"
        + "d_seconds_bucket{served=\"local\",le=\"60.0\"} 5\n"
        + "d_seconds_bucket{served=\"local\",le=\"120.0\"} 5\n"
        + "d_seconds_bucket{served=\"local\",le=\"+Inf\"} 6\n"
        + "d_seconds_sum{served=\"local\"} 203.025000001\n"
        + "d_seconds_count{served=\"local\"} 6\n", text);
    Histogram read = PrometheusTextParser.parse(text).get("d_seconds")
        .histogram("served", "local");
    assertEquals(6.0, read.count());
    assertEquals(1.0, read.above(120.0));
  }

  @Test
  void anEmptyHistogramHasEveryBucketAtZero() {
    String text = new PrometheusText().family("d_seconds", Type.HISTOGRAM, "h")
        .histogram(null, null, new LatencyHistogram().snapshot()).toString();
    assertTrue(text.contains("d_seconds_bucket{le=\"0.01\"} 0\n"), text);
    assertTrue(text.contains("d_seconds_bucket{le=\"+Inf\"} 0\n"), text);
    assertTrue(text.endsWith("d_seconds_sum 0.0\nd_seconds_count 0\n"), text);
    Histogram read = PrometheusTextParser.parse(text).get("d_seconds").histogram(null, null);
    assertEquals(LatencyHistogram.BOUNDS_SECONDS.length + 1, read.le().size());
  }

  @Test
  void theSeriesLabelIsEscaped() {
    LatencyHistogram h = new LatencyHistogram();
    h.record(MS);
    String value = "a\"b\\c\nd";
    String text = new PrometheusText().family("d_seconds", Type.HISTOGRAM, "h")
        .histogram("served", value, h.snapshot()).toString();
    assertTrue(text.contains("d_seconds_bucket{served=\"a\\\"b\\\\c\\nd\",le=\"0.01\"} 1\n"),
        text);
    assertTrue(text.contains("d_seconds_count{served=\"a\\\"b\\\\c\\nd\"} 1\n"), text);
    assertEquals(1.0, PrometheusTextParser.parse(text).get("d_seconds")
        .histogram("served", value).count());
  }

  @Test
  void theWriterKeepsHistogramsAndOtherSamplesApart() {
    LatencyHistogram.Snapshot s = new LatencyHistogram().snapshot();
    assertThrows(IllegalStateException.class,
        () -> new PrometheusText().family("g", Type.GAUGE, "h").histogram("a", "b", s));
    assertThrows(IllegalStateException.class,
        () -> new PrometheusText().family("d_seconds", Type.HISTOGRAM, "h").sample(1));
    assertThrows(IllegalArgumentException.class, () -> new PrometheusText()
        .family("d_seconds", Type.HISTOGRAM, "h").histogram("le", "1", s));
    for (String name : List.of("d_total", "d_bucket", "d_sum", "d_count")) {
      assertThrows(IllegalArgumentException.class,
          () -> new PrometheusText().family(name, Type.HISTOGRAM, "h"), name);
    }
  }

  /** The reader refuses histograms the format does not allow: the tests built on it can fail. */
  @Test
  void theReaderChecksHistograms() {
    String head = "# HELP d h\n# TYPE d histogram\n";
    String ok = head + "d_bucket{le=\"1\"} 1\nd_bucket{le=\"+Inf\"} 2\nd_sum 3.5\nd_count 2\n";
    assertEquals(2.0, PrometheusTextParser.parse(ok).get("d").histogram(null, null).count());
    List<String> bad = List.of(
        head + "d_bucket{le=\"1\"} 1\nd_bucket{le=\"+Inf\"} 2\nd_sum 3.5\nd_count 3\n",
        head + "d_bucket{le=\"1\"} 2\nd_bucket{le=\"+Inf\"} 1\nd_sum 3.5\nd_count 1\n",
        head + "d_bucket{le=\"1\"} 1\nd_sum 3.5\nd_count 1\n",
        head + "d_bucket{le=\"+Inf\"} 1\nd_bucket{le=\"1\"} 1\nd_sum 3.5\nd_count 1\n",
        head + "d_bucket{le=\"+Inf\"} 1\nd_count 1\n",
        head + "d_bucket{le=\"+Inf\"} 1\nd_sum 1\n",
        head + "d_bucket 1\nd_sum 1\nd_count 1\n",
        head + "d 1\n",
        head + "d_bucket{le=\"+Inf\"} 1\nd_sum{le=\"1\"} 1\nd_count 1\n");
    for (String text : bad) {
      assertThrows(PrometheusTextParser.FormatException.class,
          () -> PrometheusTextParser.parse(text), text);
    }
  }

  /**
   * Durations anywhere from a clock that went back to past the last bound, and often exactly on
   * a bound or a nanosecond either side of it, where a bucket's "at most" is told from "below".
   */
  @Provide
  Arbitrary<List<Long>> durations() {
    List<Long> edges = new ArrayList<>();
    for (double b : LatencyHistogram.BOUNDS_SECONDS) {
      long nanos = Math.round(b * 1e9);
      edges.addAll(List.of(nanos - 1, nanos, nanos + 1));
    }
    return Arbitraries.frequencyOf(
            Tuple.of(1, Arbitraries.longs().between(-1_000, 200_000_000_000L)),
            Tuple.of(1, Arbitraries.of(edges)))
        .list();
  }

  /** Against a model: each bucket counts the durations up to its bound; the sum is theirs. */
  @Property(tries = 200)
  void bucketsCountTheDurationsUpToTheirBound(@ForAll("durations") List<Long> durations) {
    LatencyHistogram h = new LatencyHistogram();
    durations.forEach(h::record);
    LatencyHistogram.Snapshot s = h.snapshot();
    double[] bounds = LatencyHistogram.BOUNDS_SECONDS;
    long sumNanos = 0;
    for (long d : durations) {
      sumNanos += Math.max(0, d);
    }
    for (int i = 0; i <= bounds.length; i++) {
      double bound = i < bounds.length ? bounds[i] : Double.POSITIVE_INFINITY;
      long expected = durations.stream().filter(d -> Math.max(0, d) / 1e9 <= bound).count();
      assertEquals(expected, s.cumulative()[i], "le " + bound);
    }
    assertEquals(durations.size(), s.count());
    assertEquals(sumNanos / 1e9, s.sumSeconds(), 1e-9);
  }

  /**
   * A scrape's sum covers no duration its count misses: with every duration 1 s, the sum in
   * seconds is never above the count, also while threads record (the sum is read before the
   * buckets, each duration being added to its bucket before the sum).
   */
  @Test
  void aScrapesSumHasNoDurationItsCountMisses() throws Exception {
    LatencyHistogram h = new LatencyHistogram();
    AtomicBoolean done = new AtomicBoolean();
    List<Thread> recorders = new ArrayList<>();
    for (int t = 0; t < 2; t++) {
      Thread r = new Thread(() -> {
        while (!done.get()) {
          h.record(1_000 * MS);
        }
      });
      r.start();
      recorders.add(r);
    }
    try {
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
      int scrapes = 0;
      while (System.nanoTime() < until) {
        LatencyHistogram.Snapshot s = h.snapshot();
        scrapes++;
        assertTrue(s.sumSeconds() <= s.count(), "scrape " + scrapes + ": a sum of "
            + s.sumSeconds() + " s for " + s.count() + " durations of 1 s");
      }
    } finally {
      done.set(true);
      for (Thread r : recorders) {
        r.join();
      }
    }
  }

  /**
   * Threads recording while another writes the text: in every scrape _count is the +Inf
   * bucket's (the reader checks it) and no bucket's count falls from one scrape to the next; at
   * the end every duration is counted, and summed.
   */
  @Test
  void scrapesWhileRecordingAreConsistentAndMonotonic() throws Exception {
    LatencyHistogram h = new LatencyHistogram();
    int threads = 4;
    int perThread = 50_000;
    CountDownLatch go = new CountDownLatch(1);
    List<Thread> recorders = new ArrayList<>();
    long[] sums = new long[threads];
    // scrapes done so far: each recorder waits at its halfway point for two, so that some
    // scrapes meet recording even when the scraper thread is not scheduled before the recorders
    // are done (on a loaded machine it was not, once, and the test saw no scrape at all)
    AtomicInteger scraped = new AtomicInteger();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    for (int t = 0; t < threads; t++) {
      int id = t;
      Thread r = new Thread(() -> {
        SplittableRandom random = new SplittableRandom(id);
        try {
          go.await();
        } catch (InterruptedException e) {
          return;
        }
        for (int i = 0; i < perThread; i++) {
          if (i == perThread / 2) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (scraped.get() < 2 && failure.get() == null
                && System.nanoTime() - deadline < 0) {
              Thread.onSpinWait();
            }
          }
          long d = random.nextLong(150_000 * MS);
          sums[id] += d;
          h.record(d);
        }
      });
      r.start();
      recorders.add(r);
    }
    AtomicBoolean done = new AtomicBoolean();
    List<Integer> scrapes = new ArrayList<>();
    Thread scraper = new Thread(() -> {
      try {
        List<Double> last = null;
        int n = 0;
        while (!done.get()) {
          String text = new PrometheusText().family("d_seconds", Type.HISTOGRAM, "h")
              .histogram("served", "local", h.snapshot()).toString();
          Histogram read = PrometheusTextParser.parse(text).get("d_seconds")
              .histogram("served", "local");
          assertEquals(read.count(), read.cumulative().get(read.cumulative().size() - 1));
          if (last != null) {
            for (int i = 0; i < last.size(); i++) {
              assertTrue(read.cumulative().get(i) >= last.get(i),
                  "bucket " + read.le().get(i) + " fell from " + last.get(i) + " to "
                      + read.cumulative().get(i));
            }
          }
          last = read.cumulative();
          n++;
          scraped.incrementAndGet();
        }
        scrapes.add(n);
      } catch (Throwable e) {
        failure.set(e);
      }
    });
    scraper.start();
    go.countDown();
    for (Thread r : recorders) {
      r.join(TimeUnit.SECONDS.toMillis(60));
    }
    done.set(true);
    scraper.join(TimeUnit.SECONDS.toMillis(60));
    if (failure.get() != null) {
      throw new AssertionError(failure.get());
    }
    assertTrue(scrapes.get(0) > 1, "scrapes: " + scrapes);
    LatencyHistogram.Snapshot end = h.snapshot();
    assertEquals((long) threads * perThread, end.count());
    long sum = 0;
    for (long s : sums) {
      sum += s;
    }
    assertEquals(sum / 1e9, end.sumSeconds(), 1e-6);
  }
}
