package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PaperMainTest {

  @Test
  void parsesFlags() {
    PaperMain.Options o =
        PaperMain.parse(new String[] {
          "--seed", "7", "--nodes", "6", "--rate", "3.5", "--requests", "1000", "--zipf", "1.2",
          "--delays", "5, 50", "--policies", "paper,cost-aware", "--distributions", "skewed",
          "--capacity", "8192", "--no-plots"
        });
    SimConfig c = o.config();
    assertEquals(7, c.seed());
    assertEquals(6, c.nodes());
    assertEquals(3.5, c.ratePerSecond());
    assertEquals(200, c.warmupRequests()); // 20% by default
    assertEquals(1.2, c.zipfExponent());
    assertEquals(List.of(5, 50), c.delaysMs());
    assertEquals(List.of(Policy.PAPER, Policy.COST_AWARE), c.policies());
    assertEquals(List.of(Distribution.SKEWED), c.distributions());
    assertEquals(8192, c.engine().capacityTokens());
    assertEquals(false, o.plots());
    assertNull(PaperMain.parse(new String[] {"--help"}));
  }

  @Test
  void rejectsBadFlagsWithClearMessages() {
    assertTrue(
        assertThrows(IllegalArgumentException.class, () -> PaperMain.parse(new String[] {"--x", "1"}))
            .getMessage().contains("unknown flag --x"));
    assertTrue(
        assertThrows(IllegalArgumentException.class,
                () -> PaperMain.parse(new String[] {"--rate", "fast"}))
            .getMessage().contains("not a number"));
    assertTrue(
        assertThrows(IllegalArgumentException.class,
                () -> PaperMain.parse(new String[] {"--policies", "magic"}))
            .getMessage().contains("unknown policy"));
    assertTrue(
        assertThrows(IllegalArgumentException.class,
                () -> PaperMain.parse(new String[] {"--nodes", "0"}))
            .getMessage().contains("nodes"));
    assertTrue(
        assertThrows(IllegalArgumentException.class, () -> PaperMain.parse(new String[] {"--seed"}))
            .getMessage().contains("needs a value"));
  }

  /**
   * A request count far above any sensible run (above 1,000,000) is refused before anything
   * runs: 2,000,000,000 was taken, and ran out of memory building the first run's arrivals.
   */
  @Test
  void requestsBeyondTheBoundAreRefusedBeforeAnythingRuns() throws Exception {
    for (String n : new String[] {"2000000000", "1000001"}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> PaperMain.parse(new String[] {"--requests", n}), n);
      assertEquals("--requests must be at most 1000000, was " + n, e.getMessage());
    }
    assertEquals(1_000_000, PaperMain.parse(new String[] {"--requests", "1000000"}).config()
        .requests());
    Run run = execute("--requests", "1000001");
    assertEquals(2, run.code());
    assertTrue(run.err().startsWith("error: --requests must be at most 1000000"), run.err());
  }

  /**
   * A thread count above {@link SimConfig#MAX_THREADS} is refused before anything runs: each
   * run in progress holds its whole cluster and results, and any count was taken, as many runs
   * at once as the command makes.
   */
  @Test
  void threadsBeyondTheBoundAreRefusedBeforeAnythingRuns() throws Exception {
    for (String n : new String[] {"1000", "17", "0"}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> PaperMain.parse(new String[] {"--threads", n}), n);
      assertEquals("threads must be 1 to 16, was " + n, e.getMessage());
    }
    assertEquals(16, PaperMain.parse(new String[] {"--threads", "16"}).config().threads());
    Run run = execute("--threads", "1000", "--requests", "10", "--policies", "paper",
        "--delays", "2", "--distributions", "uniform", "--no-plots");
    assertEquals(2, run.code());
    assertTrue(run.err().startsWith("error: threads must be 1 to 16, was 1000"), run.err());
  }

  /**
   * A rate so low that the run's arrivals pass the simulated clock's range (a long of
   * nanoseconds) is refused, even with a window wide enough for few windows: it ran, and
   * reported every request of every policy failed.
   */
  @Test
  void aRateTooLowForTheSimulatedClockIsRefusedBeforeAnythingRuns() throws Exception {
    for (String[] args : new String[][] {{"--rate", "1e-300", "--window", "1e300"},
        {"--rate", "0.0009", "--window", "1e9"}}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> PaperMain.parse(args), String.join(" ", args));
      assertEquals("rate must be at least 0.001 requests/s, was " + Double.parseDouble(args[1]),
          e.getMessage());
    }
    assertEquals(0.001, PaperMain.parse(new String[] {"--rate", "0.001", "--window", "1e9"})
        .config().ratePerSecond());
  }

  @Test
  void aTimelineWindowTooSmallToCountIsRejectedBeforeAnythingRuns() throws Exception {
    // 0.1 ns rounds to a 0 ns window (a division by zero at the end of every run); 1 us makes
    // 1.7 billion windows for the default run's 1,670 s
    for (String w : new String[] {"1e-10", "0.000001"}) {
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class,
              () -> PaperMain.parse(new String[] {"--window", w}), w);
      assertTrue(e.getMessage().contains("timeline window"), e.getMessage());
    }
    // below a nanosecond even when the run is short enough to have few windows
    assertThrows(IllegalArgumentException.class,
        () -> PaperMain.parse(new String[] {"--window", "1e-10", "--requests", "1", "--rate", "1e12"}));
    assertEquals(0.5, PaperMain.parse(new String[] {"--window", "0.5"}).config()
        .timelineWindowSeconds());
  }

  @Test
  void writesTableJsonAndPlots(@TempDir Path dir) throws Exception {
    PaperMain.Options o =
        PaperMain.parse(new String[] {
          "--requests", "200", "--delays", "2,200", "--out", dir.toString(), "--threads", "2"
        });
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PaperMain.run(o.config(), true, new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
    String table = out.toString(StandardCharsets.UTF_8);
    for (Policy p : Policy.defaults()) {
      assertTrue(table.contains("| " + p.label()), p.label());
    }
    assertTrue(!table.contains("| " + Policy.COST_AWARE_GREEDY.label()), "ablation not by default");
    assertTrue(err.toString(StandardCharsets.UTF_8).contains("100%"));
    String json = Files.readString(dir.resolve("paper.json"));
    for (String field : List.of("\"policy\"", "\"delay_ms\"", "\"distribution\"",
        "\"mean_latency_s\"", "\"p50_latency_s\"", "\"p99_latency_s\"", "\"hit_rate\"",
        "\"forwarded_share\"", "\"max_node_share\"", "\"gossip_bytes_per_node_per_s\"",
        "\"timeline\"")) {
      assertTrue(json.contains(field), field);
    }
    assertEquals(32, json.split("\"policy\"").length - 1, "one record per policy x delay x dist");
    assertTrue(Files.size(dir.resolve("latency-vs-delay-uniform.png")) > 1000);
    assertTrue(Files.size(dir.resolve("hit-rate-over-time-skewed.png")) > 1000);
    assertTrue(Files.size(dir.resolve("topic-share-over-time-paper.png")) > 1000);
  }

  @Test
  void anMmluDirectoryThatCannotBeLoadedIsReportedAsAnError(@TempDir Path dir) throws Exception {
    Path mmlu = Files.createDirectories(dir.resolve("mmlu"));
    Path out = dir.resolve("out");
    Run run = execute("--mmlu", mmlu.toString(), "--out", out.toString(), "--no-plots");
    assertEquals(2, run.code());
    String err = run.err();
    assertTrue(err.startsWith("error: --mmlu " + mmlu), err);
    assertTrue(err.contains("needs dev/ and test/"), err);
    assertEquals("", run.out());
    assertTrue(!Files.exists(out.resolve("paper.json")), "nothing run");
  }

  @Test
  void anMmluDirectoryThatDoesNotExistIsReportedAsTheOtherCommandsReportIt(@TempDir Path dir)
      throws Exception {
    Path mmlu = dir.resolve("no-such-mmlu");
    Run run = execute("--mmlu", mmlu.toString(), "--out", dir.resolve("out").toString());
    assertEquals(2, run.code());
    String err = run.err();
    // README: every command that takes --mmlu stops with "error: --mmlu DIR: ..."
    assertTrue(err.startsWith("error: --mmlu " + mmlu + ": not a directory"), err);
    assertEquals("", run.out());
  }

  /**
   * README: results go to benchmarks/target/results, next to the jar, whatever directory the
   * command runs in (the tests run in benchmarks/, where a path relative to the working
   * directory would be benchmarks/benchmarks/target/results).
   */
  @Test
  void theDefaultOutputDirectoryIsTheModulesTargetResultsWhereverItRuns() {
    assertEquals(Path.of("target", "results").toAbsolutePath(),
        PaperMain.parse(new String[0]).config().outDir().toAbsolutePath().normalize());
  }

  @Test
  void aBadFlagIsReportedWithTheUsage() throws Exception {
    Run run = execute("--delays", "2,fast");
    assertEquals(2, run.code());
    String err = run.err();
    assertTrue(err.startsWith("error: flag --delays: not a number: '2,fast'"), err);
    assertTrue(err.contains("usage: benchmarks/run paper"), err);
  }

  @Test
  void anOutputPathThatIsAFileIsRejectedBeforeAnythingRuns(@TempDir Path dir) throws Exception {
    Path file = Files.writeString(dir.resolve("results"), "not a directory");
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class,
            () -> PaperMain.parse(new String[] {"--out", file.toString()}));
    assertTrue(e.getMessage().contains("--out " + file), e.getMessage());
  }

  /**
   * An output directory that cannot be made, because a file stands where one of its parents
   * would be, is refused as well: it was accepted, and the JSON failed with a stack trace after
   * the whole simulation.
   */
  @Test
  void anOutputPathUnderAFileIsRejectedBeforeAnythingRuns(@TempDir Path dir) throws Exception {
    Path file = Files.writeString(dir.resolve("results"), "not a directory");
    Path under = file.resolve("paper").resolve("out");
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class,
            () -> PaperMain.parse(new String[] {"--out", under.toString()}));
    assertEquals("--out " + under + ": " + file + " exists and is not a directory",
        e.getMessage());
    Run run = execute("--out", under.toString(), "--requests", "10", "--no-plots");
    assertEquals(2, run.code());
    assertTrue(run.err().startsWith("error: --out " + under), run.err());
  }

  @Test
  void aFlagGivenTwiceIsRefusedInsteadOfTheLastOneWinning() {
    for (String[] args : new String[][] {
        {"--seed", "1", "--seed", "2"},
        {"--requests", "100", "--nodes", "3", "--requests", "200"},
        {"--delays", "2", "--delays", "200"},
        {"--no-plots", "--no-plots"}}) {
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> PaperMain.parse(args),
              String.join(" ", args));
      assertTrue(e.getMessage().contains(args[0] + " is given twice"), e.getMessage());
    }
  }

  /**
   * The command line is read as the other mains read theirs ({@code bench.Flags}): a misspelt
   * flag last on the line is unknown (it was refused as a flag that "needs a value"), and an
   * argument that is no flag is a bad argument (it was taken for a flag: "flag 8 needs a value",
   * or "unknown flag" for a stray word that happened to be followed by another).
   */
  @Test
  void aMisspeltFlagLastAndAStrayArgumentAreNamedForWhatTheyAre() {
    String[][] cases = {
        {"unknown flag --nodse", "--seed", "1", "--nodse"},
        {"bad argument '8'", "--nodes", "4", "8"},
        {"bad argument 'fast'", "fast", "--seed", "1"},
        {"--seed needs a value", "--nodes", "4", "--seed"}};
    for (String[] c : cases) {
      String[] args = java.util.Arrays.copyOfRange(c, 1, c.length);
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> PaperMain.parse(args),
              String.join(" ", args));
      assertEquals(c[0], e.getMessage(), String.join(" ", args));
    }
    assertNull(PaperMain.parse(new String[] {"--seed", "1", "-h"}));
    assertEquals(false, PaperMain.parse(new String[] {"--no-plots", "--seed", "3"}).plots());
  }

  @Test
  void engineTimingsThatAreNotFiniteOrAreNegativeAreRefused() {
    for (String flag : new String[] {
        "--prefill-overhead-ms", "--prefill-ms-per-token", "--decode-ms-per-token"}) {
      // NaN used to round to 0 ns, Infinity and 1e300 to Long.MAX_VALUE ns, -1e-7 ms to 0 ns
      for (String v : new String[] {"NaN", "Infinity", "-Infinity", "1e300", "-1e-7", "-2"}) {
        IllegalArgumentException e =
            assertThrows(IllegalArgumentException.class,
                () -> PaperMain.parse(new String[] {flag, v}), flag + " " + v);
        assertTrue(e.getMessage().startsWith("flag " + flag + ":"), e.getMessage());
      }
    }
    EngineProfile e = PaperMain.parse(new String[] {
        "--prefill-overhead-ms", "0", "--prefill-ms-per-token", "0.5",
        "--decode-ms-per-token", "1e-7"}).config().engine();
    assertEquals(0, e.prefillOverheadNanos());
    assertEquals(500_000, e.prefillNanosPerToken());
    assertEquals(0, e.decodeNanosPerToken());
  }

  /**
   * A block size, slot count, capacity or output length the simulated engine or the nodes refuse
   * is refused with the flags: it was taken, and every run then failed in a stack trace (exit
   * code 1) as its first engine or request was made.
   */
  @Test
  void engineSettingsTheSimulatedEngineRefusesAreRefusedBeforeAnythingRuns() {
    String[][] cases = {
        {"--block-size", "2048", "blockSize must be 1 to 1024 tokens, was 2048"},
        {"--slots", "5000", "slots must be 1 to 4096, was 5000"},
        {"--capacity", "100000000000", "capacityTokens must be at most 2147483647 blocks"},
        {"--output-tokens", "2000000", "output tokens must be 1 to 1048576, was 2000000"}};
    assertEachRefused(cases);
    SimConfig c = PaperMain.parse(new String[] {"--block-size", "1024", "--slots", "4096",
        "--capacity", "1048576", "--output-tokens", "1048576"}).config();
    assertEquals(1024, c.engine().blockSize());
    assertEquals(4096, c.engine().slots());
    assertEquals(1_048_576, c.outputTokens());
  }

  @Test
  void aDelayPolicyOrDistributionListedTwiceIsRefused() {
    // each would run its cells twice, and the table and charts show the first run's figures twice
    String[][] cases = {
        {"--delays", "2,200,2", "network delay 2 ms is given twice"},
        {"--policies", "paper,no-routing,PAPER", "policy paper is given twice"},
        {"--distributions", "skewed,skewed", "distribution skewed is given twice"}};
    assertEachRefused(cases);
    assertEquals(List.of(1000, 2), PaperMain.parse(new String[] {"--delays", "1000,2"}).config()
        .delaysMs());
  }

  /** Each {flag, value, text}: the flag with that value alone is refused with that text. */
  private static void assertEachRefused(String[][] cases) {
    for (String[] c : cases) {
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class,
              () -> PaperMain.parse(new String[] {c[0], c[1]}), c[0] + " " + c[1]);
      assertTrue(e.getMessage().contains(c[2]), e.getMessage());
    }
  }

  @Test
  void anMmluQuestionThatDoesNotTokenizeAfterItsPrefixIsAnErrorNotAStackTrace(@TempDir Path dir)
      throws Exception {
    Path mmlu = dir.resolve("mmlu");
    Files.createDirectories(mmlu.resolve("dev"));
    Files.createDirectories(mmlu.resolve("test"));
    Files.writeString(mmlu.resolve("dev/x_dev.csv"), "q,a,b,c,d,A\n".repeat(5));
    Files.writeString(mmlu.resolve("test/x_test.csv"), "\"\nWhich?\",a,b,c,d,B\n");
    Run run = execute("--mmlu", mmlu.toString(), "--out", dir.resolve("out").toString());
    assertEquals(2, run.code());
    String err = run.err();
    assertTrue(err.startsWith("error: --mmlu " + mmlu + ": MMLU file "), err);
    assertTrue(err.contains("x_test.csv: row 1"), err);
    assertEquals("", run.out());
  }

  /** What {@link PaperMain#execute} returned and printed. */
  private record Run(int code, String out, String err) {}

  private static Run execute(String... args) throws Exception {
    ByteArrayOutputStream stdout = new ByteArrayOutputStream();
    ByteArrayOutputStream stderr = new ByteArrayOutputStream();
    int code = PaperMain.execute(args, new PrintStream(stdout, true, StandardCharsets.UTF_8),
        new PrintStream(stderr, true, StandardCharsets.UTF_8));
    return new Run(code, stdout.toString(StandardCharsets.UTF_8),
        stderr.toString(StandardCharsets.UTF_8));
  }
}
