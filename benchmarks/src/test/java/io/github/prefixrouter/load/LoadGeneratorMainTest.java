package io.github.prefixrouter.load;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.server.LoadDriver;
import io.github.prefixrouter.workload.SyntheticMmluPrompts;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LoadGeneratorMainTest {

  private static final SyntheticMmluPrompts PROMPTS = SyntheticMmluPrompts.create(2, 3);

  private static int subjectOf(int[] prompt) {
    for (int s = 0; s < PROMPTS.subjectCount(); s++) {
      int[] prefix = PROMPTS.sharedPrefix(s);
      if (prompt.length >= prefix.length
          && Arrays.equals(prompt, 0, prefix.length, prefix, 0, prefix.length)) {
        return s;
      }
    }
    throw new AssertionError("prompt of no subject");
  }

  private static double topSubjectShare(List<int[]> seq) {
    int[] counts = new int[PROMPTS.subjectCount()];
    seq.forEach(p -> counts[subjectOf(p)]++);
    return Arrays.stream(counts).max().getAsInt() / (double) seq.size();
  }

  @Test
  void fallbacksAreCountedAsTheNodesTotalIsWithoutLocalRunsTriedOnAPeer() {
    // /v1/stats lists every cause; LOCAL_FAILED counts local runs tried on a peer afterwards,
    // which NodeStats.totalFallbacks leaves out: the report's column must match the node's total
    Map<String, Object> stats = Map.of("fallbacks", Map.of("TIMEOUT", 2, "BUSY", 3,
        "LOCAL_FAILED", 5, "IN_FLIGHT_LIMIT", 7));
    assertEquals(12, LoadGeneratorMain.fallbacks(stats));
    assertEquals(0, LoadGeneratorMain.fallbacks(Map.of()));
  }

  @Test
  void zipfSequenceConcentratesOnFewSubjectsAndUniformDoesNot() {
    List<int[]> uniform = LoadGeneratorMain.requestSequence(PROMPTS, 2000, 0, 3);
    List<int[]> zipf = LoadGeneratorMain.requestSequence(PROMPTS, 2000, 1.2, 3);
    assertEquals(2000, uniform.size());
    assertTrue(topSubjectShare(uniform) < 0.05, "uniform top subject share " + topSubjectShare(uniform));
    assertTrue(topSubjectShare(zipf) > 0.25, "zipf top subject share " + topSubjectShare(zipf));
  }

  @Test
  void sameSeedSameSequence() {
    List<int[]> a = LoadGeneratorMain.requestSequence(PROMPTS, 100, 1.0, 9);
    List<int[]> b = LoadGeneratorMain.requestSequence(PROMPTS, 100, 1.0, 9);
    for (int i = 0; i < a.size(); i++) {
      assertArrayEquals(a.get(i), b.get(i));
    }
  }

  /** A given {@code --mmlu} directory is used or is an error, on both routes. */
  @Test
  void aMissingMmluDirectoryIsAnErrorNotTheGenerator(@TempDir Path tmp) {
    String missing = tmp.resolve("no-such-mmlu").toString();
    IllegalArgumentException tokens = assertThrows(IllegalArgumentException.class,
        () -> LoadGeneratorMain.tokenPrompts(missing, 1));
    assertTrue(tokens.getMessage().contains(missing), tokens.getMessage());
    IllegalArgumentException chats = assertThrows(IllegalArgumentException.class,
        () -> LoadGeneratorMain.chats(missing, 1, 1600, 600));
    assertTrue(chats.getMessage().contains(missing), chats.getMessage());
  }

  @Test
  void aGivenMmluDirectoryIsLoadedAndNoneMeansTheGenerator(@TempDir Path tmp) throws Exception {
    Files.createDirectories(tmp.resolve("dev"));
    Files.createDirectories(tmp.resolve("test"));
    Files.writeString(tmp.resolve("dev/x_dev.csv"), "q,a,b,c,d,A\n".repeat(5));
    Files.writeString(tmp.resolve("test/x_test.csv"), "q1,a,b,c,d,B\n");
    assertTrue(LoadGeneratorMain.tokenPrompts(tmp.toString(), 1).description()
        .startsWith("MMLU 5-shot prompts from"));
    assertTrue(LoadGeneratorMain.chats(tmp.toString(), 1, 1600, 600).description()
        .startsWith("MMLU chats from"));
    assertTrue(LoadGeneratorMain.tokenPrompts(null, 1).description()
        .startsWith("synthetic MMLU-shaped prompts"));
    assertEquals(16, LoadGeneratorMain.chats(null, 1, 1600, 600).subjectCount());
  }

  private static String refused(String... args) {
    return assertThrows(IllegalArgumentException.class,
        () -> LoadGeneratorMain.flags(args, new ArrayList<>())).getMessage();
  }

  /** A misspelt flag is not ignored, nor is a repeated one overridden. */
  @Test
  void unknownAndRepeatedFlagsAreRefused() {
    assertEquals("unknown flag '--mmul'", refused("--nodes", "h:1", "--mmul", "/data/mmlu"));
    assertEquals("unknown flag '--concurency'", refused("--concurency", "4", "--nodes", "h:1"));
    assertEquals("--requests is given twice",
        refused("--nodes", "h:1", "--requests", "100", "--requests", "200"));
    assertEquals("--stream is given twice", refused("--stream", "--nodes", "h:1", "--stream"));
    assertEquals("--seed needs a value", refused("--nodes", "h:1", "--seed"));
    assertEquals("bad argument 'h:1'", refused("--nodes", "h:1", "h:1"));
  }

  /** The exit code and standard error of the main run in a process of its own. */
  private static String[] run(String... args) throws Exception {
    List<String> cmd = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-cp", System.getProperty("java.class.path"), LoadGeneratorMain.class.getName()));
    cmd.addAll(List.of(args));
    Process p = new ProcessBuilder(cmd).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
    String err = new String(p.getErrorStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
    return new String[] {String.valueOf(p.waitFor()), err};
  }

  /**
   * A value that is not a number, or a count or number that runs nothing, stops the generator
   * with {@code error: ...} naming the flag and exit code 2 before anything is sent, as a bad
   * flag does: {@code --zipf} and {@code --temperature} ended in a NumberFormatException's stack
   * trace (exit code 1), and {@code --concurrency 0} or {@code --requests -1} were taken.
   */
  @Test
  void badValuesAreRefusedWithTheirNameAndExitCode2() throws Exception {
    String[][] cases = {
        {"--zipf", "steep"}, {"--zipf", "-1"}, {"--zipf", "NaN"},
        {"--temperature", "warm"}, {"--temperature", "Infinity"},
        {"--concurrency", "0"}, {"--requests", "-1"}, {"--max-tokens", "0"},
        {"--max-user-chars", "many"}, {"--warmup", "-1"}, {"--warmup", "1000000"},
        {"--node-pids", "12,x"}, {"--node-pids", "12,"}, {"--relay-pids", "0"}};
    for (String[] c : cases) {
      String[] r = run("--nodes", "127.0.0.1:9", c[0], c[1]);
      assertEquals("2", r[0], String.join(" ", c) + ": " + r[1]);
      assertTrue(r[1].startsWith("error: " + c[0] + " "), String.join(" ", c) + ": " + r[1]);
    }
  }

  /**
   * A flag whose value was left out is followed by another flag: that flag was taken for its
   * value and dropped ({@code --json --stream} wrote the results to a file named --stream, and
   * did not stream), as the other mains' flags refuse it; a stop string that only looks like a
   * flag is still one.
   */
  @Test
  void aFlagIsNotTakenForTheValueOfTheOneBefore() {
    assertEquals("--json needs a value, but is followed by the flag --stream",
        refused("--nodes", "h:1", "--json", "--stream"));
    assertEquals("--stop needs a value, but is followed by the flag --seed",
        refused("--nodes", "h:1", "--api", "chat", "--stop", "--seed", "3"));
    List<String> stops = new ArrayList<>();
    LoadGeneratorMain.flags(new String[] {"--nodes", "h:1", "--stop", "--end--"}, stops);
    assertEquals(List.of("--end--"), stops);
  }

  /**
   * A {@code --nodes} list the load driver cannot use (no endpoint, an entry without a port) or
   * a {@code --concurrency} above its 10,000 is refused naming the flag, with exit code 2 and
   * before the workload is built: the driver's own refusal ended in a stack trace (exit code 1)
   * once the workload had been built.
   */
  @Test
  void nodesAndConcurrencyTheDriverCannotUseAreRefusedWithTheirName() throws Exception {
    String[][] cases = {
        {"--nodes", ","}, {"--nodes", "127.0.0.1:9,localhost"}, {"--nodes", "h 1:9"},
        {"--concurrency", "10001", "--nodes", "127.0.0.1:9"}};
    for (String[] c : cases) {
      String[] r = run(c);
      assertEquals("2", r[0], String.join(" ", c) + ": " + r[1]);
      assertTrue(r[1].startsWith("error: " + c[0] + " "), String.join(" ", c) + ": " + r[1]);
    }
  }

  /**
   * A {@code --json} file that cannot be written (in a directory that does not exist, a
   * directory itself) is refused naming the flag, with exit code 2 and
   * before anything is sent: it failed only once the whole run was over, in a
   * NoSuchFileException's stack trace (exit code 1), its figures lost.
   */
  @Test
  void aJsonFileThatCannotBeWrittenIsRefusedBeforeTheRun(@TempDir Path tmp) throws Exception {
    for (String json : List.of(tmp.resolve("no-such-dir").resolve("r.json").toString(),
        tmp.toString())) {
      String[] r = run("--nodes", "127.0.0.1:9", "--requests", "1", "--json", json);
      assertEquals("2", r[0], json + ": " + r[1]);
      assertTrue(r[1].startsWith("error: --json "), json + ": " + r[1]);
      assertTrue(!r[1].contains("\tat "), "a stack trace: " + r[1]);
    }
    assertTrue(assertThrows(IllegalArgumentException.class,
        () -> LoadGeneratorMain.jsonFile("r\u0000.json")).getMessage()
        .startsWith("not a file name"));
    Path ok = tmp.resolve("r.json");
    String[] r = run("--nodes", "127.0.0.1:9", "--requests", "1", "--json", ok.toString());
    assertEquals("1", r[0], "nothing answered: " + r[1]);
    assertTrue(Files.readString(ok).contains("\"answered\":0"), Files.readString(ok));
  }

  /**
   * The driver's checks of the endpoints and the concurrency are the only ones: its message,
   * after the flag as given. The generator repeated them with messages of its own, which were
   * to be kept in step with the driver's by hand.
   */
  @Test
  void theDriversRefusalIsSaidAfterTheFlag() throws Exception {
    String[][] cases = {
        {"error: --nodes ',': endpoints must name at least one", "--nodes", ","},
        {"error: --nodes '127.0.0.1:9,localhost': endpoints must be host:port, was 'localhost'",
            "--nodes", "127.0.0.1:9,localhost"},
        {"error: --nodes 'h 1:9': endpoints must be host:port, was 'h 1:9'", "--nodes", "h 1:9"},
        {"error: --concurrency 10001: concurrency must be 1 to 10000, was 10001",
            "--concurrency", "10001", "--nodes", "127.0.0.1:9"},
        {"error: --concurrency 0: concurrency must be 1 to 10000, was 0",
            "--concurrency", "0", "--nodes", "127.0.0.1:9"},
        // above the nodes' limits every request was sent, and refused with a 400
        {"error: --max-tokens 1048577: maxTokens must be 1 to 1048576, was 1048577",
            "--max-tokens", "1048577", "--nodes", "127.0.0.1:9", "--requests", "1"},
        {"error: --temperature 150: temperature must be 0 to 100, was 150.0",
            "--temperature", "150", "--nodes", "127.0.0.1:9", "--requests", "1"}};
    for (String[] c : cases) {
      String[] r = run(Arrays.copyOfRange(c, 1, c.length));
      assertEquals("2", r[0], r[1]);
      assertEquals(c[0], r[1].lines().findFirst().orElse(""), r[1]);
    }
  }

  /**
   * Stop strings the load driver cannot send (more than 16, an empty one, one above 256
   * characters) are refused naming {@code --stop}, with exit code 2 and before the workload is
   * built: the driver refused them once the workload had been built, in an
   * IllegalArgumentException's stack trace (exit code 1).
   */
  @Test
  void stopStringsTheDriverCannotSendAreRefusedWithTheirName() throws Exception {
    List<String> many = new ArrayList<>(List.of("--nodes", "127.0.0.1:9", "--api", "chat",
        "--requests", "1"));
    for (int i = 0; i < 17; i++) {
      many.addAll(List.of("--stop", "s" + i));
    }
    String[][] cases = {many.toArray(new String[0]),
        {"--nodes", "127.0.0.1:9", "--api", "chat", "--requests", "1", "--stop", ""},
        {"--nodes", "127.0.0.1:9", "--api", "chat", "--requests", "1", "--stop", "x".repeat(257)}};
    for (String[] c : cases) {
      String[] r = run(c);
      assertEquals("2", r[0], r[1]);
      assertTrue(r[1].startsWith("error: --stop: "), r[1]);
      assertTrue(!r[1].contains("\tat "), "a stack trace: " + r[1]);
    }
  }

  /**
   * {@code --max-system-chars} and {@code --max-user-chars} shape the chats only: on the token
   * route they were accepted and ignored, as --stop is not.
   */
  @Test
  void theChatLimitsNeedTheChatRoute() throws Exception {
    for (String flag : List.of("--max-system-chars", "--max-user-chars")) {
      String[] r = run("--nodes", "127.0.0.1:9", "--requests", "1", flag, "300");
      assertEquals("2", r[0], flag + ": " + r[1]);
      assertTrue(r[1].startsWith("error: " + flag + " needs --api chat"), r[1]);
    }
  }

  /**
   * A {@code --requests} far above any sensible run (above 1,000,000) is refused naming the
   * flag, with exit code 2 and before the workload is built: 2,000,000,000 ran out of memory
   * building it (an OutOfMemoryError's stack trace, exit code 1).
   */
  /**
   * {@code --model} names the cache scope on the token route too: the driver sends it there and
   * the node reads it (a LoRA adapter's scope), but the generator refused it as needing
   * {@code --api chat}.
   */
  @Test
  void theModelIsSentOnTheTokenRoute() throws Exception {
    List<String> bodies = new ArrayList<>();
    String[] r = runAgainstARefusingNode(bodies, "--requests", "2", "--concurrency", "1",
        "--model", "sql-lora");
    assertTrue(!r[1].contains("--api chat"), r[1]);
    assertEquals(2, bodies.size(), r[0] + ": " + r[1]);
    for (String b : bodies) {
      assertEquals("sql-lora", ((Map<?, ?>) Json.parse(b)).get("model"), b);
    }
  }

  /**
   * Runs the generator with {@code flags} against one node that answers every request 503,
   * adding the bodies sent to its token route to {@code bodies} in the order they came.
   *
   * @return the exit code and standard error, as {@link #run}
   */
  private static String[] runAgainstARefusingNode(List<String> bodies, String... flags)
      throws Exception {
    List<String> seen = java.util.Collections.synchronizedList(new ArrayList<>());
    com.sun.net.httpserver.HttpServer server =
        com.sun.net.httpserver.HttpServer.create(new java.net.InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext("/", ex -> {
      String body = new String(ex.getRequestBody().readAllBytes(),
          java.nio.charset.StandardCharsets.UTF_8);
      if (ex.getRequestURI().getPath().equals("/v1/route/completions")) {
        seen.add(body);
      }
      ex.sendResponseHeaders(503, -1);
      ex.close();
    });
    server.start();
    try {
      List<String> args = new ArrayList<>(List.of("--nodes",
          "127.0.0.1:" + server.getAddress().getPort()));
      args.addAll(List.of(flags));
      String[] r = run(args.toArray(String[]::new));
      bodies.addAll(seen);
      return r;
    } finally {
      server.stop(0);
    }
  }

  /**
   * The warm-up's requests are sent first, under ids of their own, and the measured requests
   * are the ones a run without a warm-up sends, in the same order; the JSON counts the
   * measured requests and says how many warmed up.
   */
  @Test
  void theWarmupIsSentFirstAndLeavesTheMeasuredRequestsAsTheyWere(@TempDir Path tmp)
      throws Exception {
    List<String[]> without = routeRequests(tmp.resolve("a.json"), "--requests", "3");
    List<String[]> with = routeRequests(tmp.resolve("b.json"), "--requests", "3", "--warmup", "4");
    assertEquals(3, without.size());
    assertEquals(7, with.size());
    for (int i = 0; i < 7; i++) {
      assertEquals(i < 4, with.get(i)[0].contains("-warmup-"), "request " + i + ": " + with.get(i)[0]);
    }
    for (int i = 0; i < 3; i++) {
      assertEquals(without.get(i)[1], with.get(4 + i)[1], "measured request " + i + "'s prompt");
    }
    assertTrue(!with.get(0)[1].equals(with.get(4)[1]), "the warm-up repeats the measured prompts");
    Map<?, ?> json = (Map<?, ?>) Json.parse(Files.readString(tmp.resolve("b.json")));
    assertEquals(3L, ((Number) json.get("requests")).longValue(), json.toString());
    assertEquals(4L, ((Number) json.get("warmup")).longValue(), json.toString());
  }

  /**
   * With --node-pids and --relay-pids the JSON has each group's CPU per measured request (here
   * this test's own process, which is there), and a process that is not there leaves its group
   * null, saying why; the output says it once.
   */
  @Test
  void theCpuOfTheGivenProcessesIsInTheJson(@TempDir Path tmp) throws Exception {
    assumeTrue(Files.isRegularFile(Path.of("/proc/self/stat")), "Linux's /proc only");
    String self = Long.toString(ProcessHandle.current().pid());
    Path json = tmp.resolve("cpu.json");
    String[] r = runAgainstARefusingNode(new ArrayList<>(), "--requests", "2", "--json",
        json.toString(), "--node-pids", self + "," + self, "--relay-pids", "4194305");
    assertTrue(Files.exists(json), "no JSON written (exit status " + r[0] + "): " + r[1]);
    Map<?, ?> j = (Map<?, ?>) Json.parse(Files.readString(json));
    Map<?, ?> cpu = (Map<?, ?>) j.get("cpu_ms_per_request");
    assertTrue(cpu != null && cpu.get("nodes") instanceof Number
        && ((Number) cpu.get("nodes")).doubleValue() >= 0, "no CPU of the nodes: " + j + r[1]);
    assertEquals(Json.NULL, cpu.get("relays"), j.toString());
    assertEquals("no /proc/4194305/stat (the process is not there)", j.get("cpu_unmeasured"),
        j.toString());
  }

  /**
   * The route requests a run sends, in order (one at a time), to a server that refuses each:
   * their request id and their prompt's token ids.
   */
  private static List<String[]> routeRequests(Path json, String... flags) throws Exception {
    List<String> args = new ArrayList<>(List.of("--concurrency", "1", "--json", json.toString()));
    args.addAll(List.of(flags));
    List<String> bodies = new ArrayList<>();
    String[] r = runAgainstARefusingNode(bodies, args.toArray(String[]::new));
    assertEquals("1", r[0], "nothing was answered: " + r[1]);
    List<String[]> seen = new ArrayList<>();
    for (String b : bodies) {
      Map<?, ?> m = (Map<?, ?>) Json.parse(b);
      seen.add(new String[] {String.valueOf(m.get("id")), String.valueOf(m.get("prompt"))});
    }
    return seen;
  }

  /**
   * The bar is drawn once at 100%: the last request's update drew it and the run's finish drew
   * it again, which stderr redirected to a file kept as two lines' worth of bars.
   */
  @Test
  void theBarIsDrawnOnceAtTheEnd() {
    for (int total : new int[] {1, 3}) {
      java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
      LoadGeneratorMain.ProgressBar bar = new LoadGeneratorMain.ProgressBar(
          new java.io.PrintStream(err, true, java.nio.charset.StandardCharsets.UTF_8), total);
      for (int done = 1; done <= total; done++) {
        bar.update(done);
      }
      bar.finish();
      String drawn = err.toString(java.nio.charset.StandardCharsets.UTF_8);
      assertEquals(1, drawn.split("100%", -1).length - 1, drawn);
      assertTrue(drawn.contains("] 100% " + total + "/" + total + " ")
          && drawn.endsWith(System.lineSeparator()), drawn);
    }
    // a run whose last update did not come (nothing drawn at 100%): finish draws it
    java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
    LoadGeneratorMain.ProgressBar bar = new LoadGeneratorMain.ProgressBar(
        new java.io.PrintStream(err, true, java.nio.charset.StandardCharsets.UTF_8), 5);
    bar.finish();
    assertEquals(1, err.toString(java.nio.charset.StandardCharsets.UTF_8).split("100%", -1).length
        - 1);
  }

  @Test
  void requestsBeyondTheBoundAreRefusedBeforeTheWorkloadIsBuilt() throws Exception {
    for (String n : new String[] {"2000000000", "1000001"}) {
      String[] r = run("--nodes", "127.0.0.1:9", "--requests", n);
      assertEquals("2", r[0], n + ": " + r[1]);
      assertTrue(r[1].startsWith("error: --requests must be at most 1000000, was " + n), r[1]);
    }
  }

  /**
   * {@code --seed} takes any 64-bit whole number, as the paper simulator's does: it was limited
   * to the int range, so a seed of 2^32 was refused as "needs an integer".
   */
  @Test
  void theSeedIsAWhole64BitNumber() throws Exception {
    for (String seed : new String[] {"4294967296", "-9223372036854775808"}) {
      String[] r = run("--nodes", "127.0.0.1:9", "--requests", "1", "--seed", seed);
      assertTrue(!r[0].equals("2") && !r[1].contains("--seed"), seed + ": " + r[0] + " " + r[1]);
    }
    String[] r = run("--nodes", "127.0.0.1:9", "--seed", "9223372036854775808");
    assertEquals("2", r[0], r[1]);
    assertTrue(r[1].startsWith("error: --seed needs a whole number, was '9223372036854775808'"),
        r[1]);
  }

  /**
   * --help has a line on every flag the generator takes, with its default where it has one:
   * --max-system-chars and --max-user-chars were named only inside the text on --api.
   */
  @Test
  void theUsageHasALineOnEveryFlag() {
    List<String> missing = new ArrayList<>();
    for (String flag : new java.util.TreeSet<>(LoadGeneratorMain.VALUE_FLAGS)) {
      if (!java.util.regex.Pattern.compile("\n  --" + flag + " \\S").matcher(
          LoadGeneratorMain.USAGE).find()) {
        missing.add("--" + flag);
      }
    }
    for (String flag : new java.util.TreeSet<>(LoadGeneratorMain.SWITCHES)) {
      if (!LoadGeneratorMain.USAGE.contains("\n  --" + flag + " ")) {
        missing.add("--" + flag);
      }
    }
    assertEquals(List.of(), missing, "flags without their line in --help");
    for (String d : List.of("--max-system-chars N  ", "--max-user-chars N  ")) {
      String u = LoadGeneratorMain.USAGE;
      int from = u.indexOf("\n  " + d);
      int to = u.indexOf("\n  --", from + 1);
      String text = u.substring(from, to < 0 ? u.length() : to).replaceAll("\\s+", " ");
      assertTrue(text.contains("(default " + (d.contains("system") ? 1600 : 600) + ")"), text);
    }
  }

  @Test
  void knownFlagsAreParsedAndStopsKeptInOrder() {
    List<String> stops = new ArrayList<>();
    Map<String, String> o = LoadGeneratorMain.flags(new String[] {"--nodes", "h:1,h:2",
        "--api", "chat", "--stop", "a\\n", "--stream", "--stop", "b", "--max-user-chars", "300"},
        stops);
    assertEquals(Map.of("nodes", "h:1,h:2", "api", "chat", "stream", "true",
        "max-user-chars", "300"), o);
    assertEquals(List.of("a\n", "b"), stops);
    assertNull(LoadGeneratorMain.flags(new String[] {"--nodes", "h:1", "--help"}, stops));
    // -h as the other mains take it: it was refused as "bad argument '-h'", exit code 2
    assertNull(LoadGeneratorMain.flags(new String[] {"-h"}, stops));
    assertNull(LoadGeneratorMain.flags(new String[] {"--nodes", "h:1", "-h"}, stops));
  }

  /**
   * A run that got no answer has no latency or time to the first piece: --json writes null
   * there, not NaN (which JSON has not, so the results file used to be lost to an exception).
   */
  @Test
  void figuresWithoutAValueAreNullInTheJson() {
    Map<String, Object> j = LoadGeneratorMain.summary(
        new LoadDriver.Result(List.of(), 2_000_000_000L, 0), "w", LoadDriver.Api.ROUTE, 5, 0, true);
    String json = Json.write(j);
    Map<?, ?> back = (Map<?, ?>) Json.parse(json);
    assertEquals(Json.NULL, ((Map<?, ?>) back.get("latency_ms")).get("p50"), json);
    assertEquals(Json.NULL, ((Map<?, ?>) back.get("latency_ms")).get("mean"), json);
    assertEquals(Json.NULL, ((Map<?, ?>) back.get("ttft_ms")).get("p99"), json);
    assertEquals(2.0, ((Number) back.get("wall_seconds")).doubleValue(), json);
    assertEquals(0L, ((Number) back.get("answered")).longValue(), json);
  }

  /** The figures used to follow the default locale: {@code 1234,5} on a decimal-comma one. */
  @Test
  void figuresAreInTheRootLocaleWhateverTheDefault() {
    LoadDriver.Sample a = new LoadDriver.Sample(0, "a", "n:1", "n1", true, null, 1_234_500_000L,
        8, 2, null, 0, null, 1_500_000L, "x", null);
    Locale before = Locale.getDefault();
    Locale.setDefault(Locale.GERMANY);
    try {
      String n = System.lineSeparator();
      assertEquals("answered 1 of 2 (1 errors), 2.5 s, 0.4 requests/s, 0 client failovers" + n
              + "latency ms: mean 1234.5  p50 1234.5  p90 1234.5  p99 1234.5  max 1234.5" + n
              + "time to first piece ms: p50 1.5  p90 1.5  p99 1.5  max 1.5" + n
              + "cache hit rate (cached / prompt tokens, engine-reported): 0.250" + n
              + "forwarded share: 1.000" + n,
          LoadGeneratorMain.figures(new LoadDriver.Result(List.of(a), 2_500_000_000L, 1), 2, true));
    } finally {
      Locale.setDefault(before);
    }
  }

  /**
   * A run that got no answer has no latency or time to the first piece: the figures used to
   * print NaN there (the JSON has null); they print "-".
   */
  @Test
  void figuresWithoutAValuePrintAsADash() {
    LoadDriver.Sample failed = new LoadDriver.Sample(0, "a", "n:1", null, false, null,
        5_000_000L, -1, -1, new int[0], 1, "connection refused", -1, null, null);
    String n = System.lineSeparator();
    assertEquals("answered 0 of 1 (1 errors), 2.0 s, 0.0 requests/s, 1 client failovers" + n
            + "latency ms: mean -  p50 -  p90 -  p99 -  max -" + n
            + "time to first piece ms: p50 -  p90 -  p99 -  max -" + n
            + "cache hit rate (cached / prompt tokens, engine-reported): 0.000" + n
            + "forwarded share: 0.000" + n,
        LoadGeneratorMain.figures(new LoadDriver.Result(List.of(failed), 2_000_000_000L, 0), 1,
            true));
  }
}
