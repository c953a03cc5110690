package io.github.prefixrouter.bench.stall;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.bench.Stdout;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class StallSimMainTest {

  /**
   * On a short run (an engine hung for 30 s of 60): with the watch off, every request the hung
   * engine is given fails; a 10 s stall timeout gives it fewer and fails fewer; requests outside
   * the hang never fail; and a seed replays to the same figures.
   */
  @Test
  void theWatchGivesAHungEngineFewerRequestsAndTheRunIsDeterministic() {
    long s = 1_000_000_000L;
    StallSimMain.Params p = new StallSimMain.Params(4, 8, 65_536, 16, 512, 64, 8, 1.0, 20,
        60 * s, 10 * s, 30 * s, 1_000_000);
    StallSimMain.Outcome off = StallSimMain.run(p, 1, Duration.ZERO);
    StallSimMain.Outcome on = StallSimMain.run(p, 1, Duration.ofSeconds(10));
    assertEquals(off.requests(), on.requests(), "the same requests");
    assertEquals(0, off.stalls());
    assertEquals(1, on.stalls(), on.toString());
    assertTrue(off.givenToHungEngine() > 30, "too few requests hung to say anything: " + off);
    assertTrue(on.givenToHungEngine() < off.givenToHungEngine() * 0.7, on + " vs " + off);
    assertTrue(on.hangFailed() < off.hangFailed(), on + " vs " + off);
    assertTrue(on.reroutes() > 0, on.toString());
    // requests submitted before or after the hang are all answered
    assertEquals(off.failed(), off.hangFailed(), off.toString());
    assertEquals(on.failed(), on.hangFailed(), on.toString());
    assertEquals(on, StallSimMain.run(p, 1, Duration.ofSeconds(10)), "replays from its seed");
  }

  /**
   * On a short run (an engine refusing every request for 30 s of 60, at once): with the check
   * off the failing engine is given a request whenever one would run there, with the default
   * limit of 3 only those 3 and a probe per 2 s failureCooldown; no client sees a failure
   * either way (each failed run is tried on a peer), and a seed replays to the same figures.
   */
  @Test
  void theFailureLimitGivesAFailingEngineFarFewerRequests() {
    long s = 1_000_000_000L;
    StallSimMain.Params p = new StallSimMain.Params(4, 8, 65_536, 16, 512, 64, 8, 1.0, 20,
        60 * s, 10 * s, 30 * s, 1_000_000);
    StallSimMain.FailOutcome off = StallSimMain.runFailing(p, 1, 0, 0);
    StallSimMain.FailOutcome on = StallSimMain.runFailing(p, 1, 3, 0);
    assertEquals(off.requests(), on.requests(), "the same requests");
    assertEquals(off.failRequests(), on.failRequests(), "the same requests");
    assertEquals(0, off.failingSpells(), off.toString());
    assertEquals(1, on.failingSpells(), on.toString());
    assertTrue(off.givenToFailing() > 60, "too few requests failed to say anything: " + off);
    // 3 failures in a row, then at most one probe per 2 s of the 30 s
    assertTrue(on.givenToFailing() <= 3 + 15 + 1, on.toString());
    assertTrue(on.givenToFailing() < off.givenToFailing() * 0.3, on + " vs " + off);
    assertTrue(on.localFallbacks() < off.localFallbacks() * 0.3, on + " vs " + off);
    assertEquals(0, off.failed(), off.toString());
    assertEquals(0, on.failed(), on.toString());
    // the engine answers again once it has recovered, with the check on after a probe
    assertTrue(off.localAgainMs() >= 0 && on.localAgainMs() >= 0, on + " vs " + off);
    assertEquals(on, StallSimMain.runFailing(p, 1, 3, 0), "replays from its seed");
  }

  /**
   * When each failure takes a second (a proxy answering 502 only after its connect timeout),
   * the failing engine's detours cost its clients latency, and the check saves most of it.
   */
  @Test
  void slowFailuresCostLatencyThatTheFailureLimitSaves() {
    long s = 1_000_000_000L;
    StallSimMain.Params p = new StallSimMain.Params(4, 8, 65_536, 16, 512, 64, 8, 1.0, 20,
        60 * s, 10 * s, 30 * s, 1_000_000);
    StallSimMain.FailOutcome off = StallSimMain.runFailing(p, 1, 0, s);
    StallSimMain.FailOutcome on = StallSimMain.runFailing(p, 1, 3, s);
    assertTrue(off.givenToFailing() > 60, "too few requests failed to say anything: " + off);
    assertTrue(on.givenToFailing() < off.givenToFailing() * 0.3, on + " vs " + off);
    assertTrue(on.failMeanMs() < off.failMeanMs() * 0.6, on + " vs " + off);
    assertEquals(0, off.failed(), off.toString());
    assertEquals(0, on.failed(), on.toString());
  }

  /**
   * The failing scenario's flags: limits with the check off (0) first, each once and at most
   * RouterConfig's limit; each scenario's flags refused in the other.
   */
  @Test
  void theFailingScenarioReadsItsOwnFlags() {
    StallSimMain.Options o = StallSimMain.options(new String[] {"--scenario", "fail"});
    assertTrue(o.fail());
    assertEquals(List.of(0L, 3L), o.limits());
    assertEquals(0, o.failNanos());
    assertEquals(60_000_000_000L, o.params().hangNanos());
    o = StallSimMain.options(new String[] {"--scenario", "fail", "--failure-limits", "3,1",
        "--fail-ms", "250", "--fail-seconds", "20"});
    assertEquals(List.of(0L, 3L, 1L), o.limits());
    assertEquals(250_000_000L, o.failNanos());
    assertEquals(20_000_000_000L, o.params().hangNanos());
    assertFalse(StallSimMain.options(new String[0]).fail(), "a hang by default");
    assertEquals("--scenario must be hang or fail, not 'crash'", refused("--scenario", "crash"));
    assertEquals("--hang-seconds is for --scenario hang only",
        refused("--scenario", "fail", "--hang-seconds", "5"));
    assertEquals("--stall-timeouts is for --scenario hang only",
        refused("--scenario", "fail", "--stall-timeouts", "5"));
    assertEquals("--failure-limits is for --scenario fail only",
        refused("--failure-limits", "3"));
    assertEquals("--fail-ms is for --scenario fail only",
        refused("--scenario", "hang", "--fail-ms", "3"));
    assertEquals("--failure-limits: 1001 is more than 1000",
        refused("--scenario", "fail", "--failure-limits", "3,1001"));
    assertEquals("--failure-limits: 3 is given twice",
        refused("--scenario", "fail", "--failure-limits", "3,3"));
    assertEquals("--failure-limits: -1 is negative",
        refused("--scenario", "fail", "--failure-limits", "-1"));
    assertEquals("--failure-limits: 'x' is not a whole number",
        refused("--scenario", "fail", "--failure-limits", "x"));
    assertEquals("--fail-ms must be 0 to 60000, not 60001",
        refused("--scenario", "fail", "--fail-ms", "60001"));
    assertEquals("--fail-seconds must be 0 to 1000000, not -1",
        refused("--scenario", "fail", "--fail-seconds", "-1"));
  }

  /** A failing scenario of no failures prints its figures over nothing as a dash. */
  @Test
  void theFailingScenarioPrintsItsTableAndRatios() {
    String out = output("--scenario", "fail", "--seeds", "1", "--rate", "0.2",
        "--fail-seconds", "0", "--failure-limits", "3");
    assertTrue(out.contains("n0's engine fails every request at once from 30 s for 0 s"), out);
    List<String> rows = out.lines().filter(l -> l.startsWith("   1  ")).toList();
    assertEquals(2, rows.size(), out);
    assertTrue(rows.get(0).startsWith("   1    off  "), out);
    assertTrue(rows.get(1).startsWith("   1      3  "), out);
    assertTrue(out.contains("limit 3 / limit off, while failing:"), out);
    assertTrue(out.lines().anyMatch(l -> l.equals("seed 1  -  -  -  -  -  -")), out);
    assertFalse(out.contains("NaN"), out);
    // every figure ends under the end of its column's name
    String header = out.lines().filter(l -> l.startsWith("seed  limit")).findFirst().orElseThrow();
    for (String row : rows) {
      for (int end : ends(row)) {
        assertTrue(ends(header).contains(end), "column ending at " + end + ":\n" + out);
      }
    }
  }

  /** The indexes just after each word of {@code line}. */
  private static List<Integer> ends(String line) {
    List<Integer> ends = new java.util.ArrayList<>();
    java.util.regex.Matcher m = java.util.regex.Pattern.compile("\\S+").matcher(line);
    while (m.find()) {
      ends.add(m.end());
    }
    return ends;
  }

  /**
   * Every timeout's ratios are printed against the first run as "watch off": that run is the
   * watch off whatever the list says, and a list that would run a timeout twice or a negative
   * one is refused.
   */
  @Test
  void theWatchOffBaselineRunsFirstAndEveryTimeoutOnce() {
    assertEquals(List.of(0L, 30L, 10L), StallSimMain.stallTimeouts("0,30,10"));
    assertEquals(List.of(0L, 30L, 10L), StallSimMain.stallTimeouts("30,10"));
    assertEquals(List.of(0L, 10L, 30L), StallSimMain.stallTimeouts("10, 0, 30"));
    assertEquals(List.of(0L), StallSimMain.stallTimeouts("0"));
    assertThrows(IllegalArgumentException.class, () -> StallSimMain.stallTimeouts("0,30,30"));
    assertThrows(IllegalArgumentException.class, () -> StallSimMain.stallTimeouts("0,0,30"));
    assertThrows(IllegalArgumentException.class, () -> StallSimMain.stallTimeouts("0,-5"));
    assertThrows(IllegalArgumentException.class, () -> StallSimMain.stallTimeouts("0,1.5"));
  }

  private static String refused(String... args) {
    return assertThrows(IllegalArgumentException.class, () -> StallSimMain.options(args))
        .getMessage();
  }

  /**
   * A --rate whose arrivals cannot be simulated is refused naming the flag: 1e-300 overflowed
   * the arrival times ("cannot go back in time" in a stack trace), and 1e9 ran out of memory
   * or ran practically forever.
   */
  @Test
  void ratesThatCannotBeSimulatedAreRefused() {
    for (String r : new String[] {"1e-300", "0.0009", "1e9", "5000.5"}) {
      assertEquals("--rate must be from 0.001 to 5000, not " + r, refused("--rate", r));
    }
  }

  /** A command line that would run nothing, or end in a stack trace, is refused. */
  @Test
  void badCommandLinesAreRefused() {
    assertEquals("--seeds must be at least 1 (and at most 2147483647), not 0",
        refused("--seeds", "0"));
    assertEquals("--seeds must be at least 1 (and at most 2147483647), not -1",
        refused("--seeds", "-1"));
    assertEquals("--rate must be from 0.001 to 5000, not -3", refused("--rate", "-3"));
    assertEquals("--hang-seconds must be 0 to 1000000, not -5", refused("--hang-seconds", "-5"));
    assertEquals("--stall-timeouts needs a value", refused("--seeds", "1", "--stall-timeouts"));
    assertEquals("--seeds is given twice", refused("--seeds", "1", "--seeds", "1"));
    assertEquals("--stall-timeouts: 5 is given twice", refused("--stall-timeouts", "5,5"));
    StallSimMain.Options o = StallSimMain.options(new String[] {"--stall-timeouts", "10"});
    assertEquals(3, o.seeds());
    assertEquals(List.of(0L, 10L), o.timeouts());
  }

  private static String output(String... args) {
    return Stdout.of(() -> StallSimMain.main(args));
  }

  /**
   * Without a hang no request is submitted during it: its latencies do not exist and its
   * ratios are over nothing. They used to print as NaN and NaNx.
   */
  @Test
  void figuresAndRatiosOverNoHangPrintAsADash() {
    String out = output("--seeds", "1", "--rate", "0.2", "--hang-seconds", "0",
        "--stall-timeouts", "10");
    // a rate below 1 per second used to be printed as 0 requests/s
    assertTrue(out.contains("; 0.2 requests/s (Poisson) for 150 s"), out);
    List<String> rows = out.lines().filter(l -> l.startsWith("   1  ")).toList();
    assertEquals(2, rows.size(), out);
    for (String row : rows) {
      assertTrue(row.matches(".*\\|              0       0        -        -              0  \\|.*"),
          out);
    }
    assertTrue(out.contains("\nseed 1  -  -  -\n")
        || out.contains("seed 1  -  -  -" + System.lineSeparator()), out);
    assertFalse(out.contains("NaN"), out);
  }
}
