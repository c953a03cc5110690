package io.github.prefixrouter.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.testing.LoggedLines;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.statistics.Statistics;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@link CountedFailureLog}: every failure counted, at most {@code perMinute} lines a minute by
 * the caller's clock, the next line logged saying how many were left out; an {@link Error} at
 * ERROR, anything else at WARN.
 */
class CountedFailureLogTest {

  private static final Logger LOG = LoggerFactory.getLogger(CountedFailureLogTest.class);
  private static final Pattern LEFT_OUT =
      Pattern.compile("\\((\\d+) more such failures left out before this one, above (\\d+) a "
          + "minute\\)");

  private final AtomicLong now = new AtomicLong(1_700_000_000_000L);

  @Test
  void countsEveryFailureAndLogsAtMostPerMinuteLinesAMinute() {
    CountedFailureLog failures = new CountedFailureLog(LOG, 3, now::get);
    List<String> first = LoggedLines.logged("bounded-failure", () -> {
      for (int i = 0; i < 7; i++) {
        failures.failed(null, "bounded-failure {}", i);
        now.addAndGet(1_000);
      }
    });
    assertEquals(List.of("bounded-failure 0", "bounded-failure 1", "bounded-failure 2"),
        first.stream().map(l -> l.substring(l.indexOf("bounded-failure"))).toList(),
        "the lines of 7 failures within a minute, 3 a minute at most");
    assertEquals(7, failures.count(), "failures counted, the 4 left out too");

    now.addAndGet(60_000);
    List<String> next = LoggedLines.logged("bounded-failure", () -> {
      failures.failed(null, "bounded-failure {}", 7);
      failures.failed(null, "bounded-failure {}", 8);
    });
    assertEquals(2, next.size(), "a minute later, a line each: " + next);
    assertTrue(next.get(0).endsWith("bounded-failure 7 (4 more such failures left out before "
        + "this one, above 3 a minute)"), "the first line a minute later: " + next.get(0));
    assertTrue(next.get(1).endsWith("bounded-failure 8"), "the second: " + next.get(1));
    assertEquals(9, failures.count());
  }

  @Test
  void logsAnErrorAtErrorAndAnythingElseAtWarnWithItsTrace() {
    CountedFailureLog failures = new CountedFailureLog(LOG, 10, now::get);
    List<String> lines = LoggedLines.logged("leveled-failure", () -> {
      failures.failed(new OutOfMemoryError("leveled-failure heap"), "leveled-failure {}", "e");
      failures.failed(new IllegalStateException("leveled-failure state"), "leveled-failure {}",
          "x");
      failures.failed(null, "leveled-failure {}", "none");
      CountedFailureLog.log(LOG, new StackOverflowError("leveled-failure stack"),
          "leveled-failure {}", "unbounded");
    });
    assertEquals(List.of(
        " ERROR " + LOG.getName() + " - leveled-failure e",
        "java.lang.OutOfMemoryError: leveled-failure heap",
        " WARN " + LOG.getName() + " - leveled-failure x",
        "java.lang.IllegalStateException: leveled-failure state",
        " WARN " + LOG.getName() + " - leveled-failure none",
        " ERROR " + LOG.getName() + " - leveled-failure unbounded",
        "java.lang.StackOverflowError: leveled-failure stack"),
        lines.stream().map(l -> l.startsWith("[") ? l.substring(l.indexOf(']') + 1) : l)
            .toList(),
        "each line at its level, with what was thrown");
    assertEquals(3, failures.count(), "log() counts nothing");
  }

  /**
   * Whatever the clock does between failures (forwards by up to two minutes, backwards, or not
   * at all), the count is every failure reported, no line is logged without one, every failure
   * is accounted for: logged, or counted as left out by a later line (here, one a minute after
   * the last), and of failures at one instant at most {@code perMinute} are logged.
   */
  @Property(tries = 200)
  void everyFailureIsCountedAndLoggedOrLeftOutOnce(
      @ForAll("steps") List<Long> steps, @ForAll @IntRange(min = 1, max = 5) int perMinute) {
    CountedFailureLog failures = new CountedFailureLog(LOG, perMinute, now::get);
    List<String> lines = new ArrayList<>(LoggedLines.logged("conserved-failure", () -> {
      for (int i = 0; i < steps.size(); i++) {
        now.addAndGet(steps.get(i));
        failures.failed(null, "conserved-failure {}", i);
      }
    }));
    assertEquals(steps.size(), failures.count(), "failures counted");
    now.addAndGet(60_000);
    lines.addAll(LoggedLines.logged("conserved-failure",
        () -> failures.failed(null, "conserved-failure {}", steps.size())));
    long accounted = 0;
    for (String line : lines) {
      accounted++;
      Matcher m = LEFT_OUT.matcher(line);
      if (m.find()) {
        accounted += Long.parseLong(m.group(1));
        assertEquals(perMinute, Integer.parseInt(m.group(2)), line);
      }
    }
    assertEquals(steps.size() + 1, accounted,
        "failures logged or counted as left out, of " + (steps.size() + 1) + ": " + lines);
    // the lines of each run of failures at one instant (steps of 0 after its first)
    int[] loggedInRun = new int[steps.size()];
    for (String line : lines) {
      Matcher m = INDEX.matcher(line);
      assertTrue(m.find(), line);
      int i = Integer.parseInt(m.group(1));
      while (i > 0 && i < steps.size() && steps.get(i) == 0) {
        i--;
      }
      if (i < steps.size()) {
        loggedInRun[i]++;
      }
    }
    boolean burst = false;
    for (int start = 0; start < steps.size(); start++) {
      assertTrue(loggedInRun[start] <= perMinute, loggedInRun[start] + " lines at one instant, "
          + "above " + perMinute + ": " + lines);
      int end = start + 1;
      while (end < steps.size() && steps.get(end) == 0) {
        end++;
      }
      burst |= end - start > perMinute;
    }
    Statistics.label("more failures at one instant than lines a minute").collect(burst);
    Statistics.label("more failures at one instant than lines a minute")
        .coverage(c -> c.check(true).percentage(p -> p >= 20));
  }

  private static final Pattern INDEX = Pattern.compile("conserved-failure (\\d+)");

  /** Steps of the clock: forwards by up to two minutes, backwards by up to a second, often 0. */
  @Provide
  Arbitrary<List<Long>> steps() {
    return Arbitraries.frequencyOf(
        Tuple.of(1, Arbitraries.just(0L)),
        Tuple.of(1, Arbitraries.longs().between(-1_000, 120_000))).list().ofMaxSize(60);
  }
}
