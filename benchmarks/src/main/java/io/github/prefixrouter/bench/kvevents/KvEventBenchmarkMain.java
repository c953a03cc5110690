package io.github.prefixrouter.bench.kvevents;

import static io.github.prefixrouter.bench.ResultsJson.num;
import static io.github.prefixrouter.bench.ResultsJson.str;

import io.github.prefixrouter.bench.ResultsJson;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.options.CommandLineOptionException;
import org.openjdk.jmh.runner.options.CommandLineOptions;
import org.openjdk.jmh.runner.options.OptionsBuilder;

/**
 * Runs {@link KvEventBenchmark} (JMH's own flags, for example {@code -f 2 -wi 3 -w 1s -i 5 -r
 * 1s}; without them the class's defaults; {@code -bm} other than {@code avgt}, {@code -tu}
 * other than {@code ns}, {@code -opi} and {@code -bs} other than 1 and JMH's help and list flags
 * are refused,
 * see {@link #refused}), prints
 * per batch and per block the cost of each benchmark and the ratios against the msgpack-core
 * baselines of the same run, and writes {@code benchmarks/target/results/kvevents.json}.
 *
 * <pre>
 *   taskset -c 1 java -cp benchmarks/target/benchmarks.jar \
 *       io.github.prefixrouter.bench.kvevents.KvEventBenchmarkMain -f 2 -wi 3 -w 1s -i 5 -r 1s
 *   benchmarks/run kvevents [JMH flags]
 * </pre>
 *
 * "Per block" divides the time per batch by the blocks a batch stores on average (each of them
 * is also removed once in the cycle, by a {@code BlockRemoved} event of its own); blocks per
 * second per core is its inverse.
 */
public final class KvEventBenchmarkMain {

  static final String APPLY = "applyToTree";
  static final String[] METHODS = {
    APPLY, "receiveNoTree", "decodeOnly", "msgpackCoreValues", "msgpackCoreTyped"};
  static final String[] KINDS = {"INT", "BIN"};

  private KvEventBenchmarkMain() {}

  static final String USAGE = """
      usage: benchmarks/run kvevents [JMH flags]
        decoding vLLM KV-event batches and applying them to an engine-driven tree (JMH),
        written to kvevents.json; JMH's flags (-f, -wi, -w, -i, -r, ...) with -bm avgt,
        -tu ns, -opi 1 and -bs 1 only; JMH's own help and lists: benchmarks/run jmh -h
      """;

  /**
   * Why JMH flags cannot give the figures this main reports, or null: it prints and writes every
   * score as nanoseconds per batch and its ratios as time over time, so a benchmark mode other
   * than average time ({@code -bm}) or a time unit other than nanoseconds ({@code -tu}) would
   * be reported under the wrong unit (or, for throughput, as inverted ratios), and operations
   * per invocation other than 1 ({@code -opi}; every invocation applies one batch) would divide
   * every time per batch by that number, and a measurement batch size other than 1 ({@code -bs};
   * in average-time mode JMH still calls the benchmark once per operation but divides the
   * operations counted by it) would multiply it. JMH's help and list flags ({@code -h}, {@code -l},
   * {@code -lp}, {@code -lprof}, {@code -lrf}) are refused too: the runner does not act on them,
   * so they would run every benchmark and overwrite the results ({@link #main} answers
   * {@code -h} and {@code --help} with its {@link #USAGE} before).
   *
   * @param cmd the parsed JMH flags
   * @return the message, or null if the flags are fine
   */
  static String refused(CommandLineOptions cmd) {
    String listing = cmd.shouldHelp() ? "-h" : cmd.shouldList() ? "-l"
        : cmd.shouldListWithParams() ? "-lp" : cmd.shouldListProfilers() ? "-lprof"
        : cmd.shouldListResultFormats() ? "-lrf" : null;
    if (listing != null) {
      return listing + ": this main only runs the benchmark (JMH's runner ignores " + listing
          + "); for JMH's help and lists, benchmarks/run jmh " + listing;
    }
    Collection<Mode> modes = cmd.getBenchModes();
    if (modes.stream().anyMatch(m -> m != Mode.AverageTime)) {
      return "-bm " + modes.stream().map(Mode::shortLabel).collect(Collectors.joining(","))
          + ": the figures are average times per batch; only -bm avgt is possible";
    }
    if (cmd.getTimeUnit().hasValue() && cmd.getTimeUnit().get() != TimeUnit.NANOSECONDS) {
      return "-tu " + cmd.getTimeUnit().get() + ": the figures are nanoseconds per batch;"
          + " only -tu ns is possible";
    }
    if (cmd.getOperationsPerInvocation().hasValue()
        && cmd.getOperationsPerInvocation().get() != 1) {
      return "-opi " + cmd.getOperationsPerInvocation().get() + ": every invocation applies one"
          + " batch and the figures are per batch; only -opi 1 is possible";
    }
    if (cmd.getMeasurementBatchSize().hasValue() && cmd.getMeasurementBatchSize().get() != 1) {
      return "-bs " + cmd.getMeasurementBatchSize().get() + ": outside single-shot mode JMH"
          + " calls the benchmark once per operation but divides the operations by the batch"
          + " size; only -bs 1 is possible";
    }
    return null;
  }

  public static void main(String[] args) throws RunnerException, IOException {
    if (List.of(args).contains("-h") || List.of(args).contains("--help")) {
      System.out.print(USAGE);
      return;
    }
    CommandLineOptions cmd;
    try {
      cmd = new CommandLineOptions(args);
    } catch (CommandLineOptionException e) {
      System.err.println("bad JMH flags: " + e.getMessage());
      System.exit(2);
      return;
    }
    String refused = refused(cmd);
    if (refused != null) {
      System.err.println("bad JMH flags: " + refused);
      System.exit(2);
      return;
    }
    OptionsBuilder opts = new OptionsBuilder();
    opts.parent(cmd);
    if (cmd.getIncludes().isEmpty()) {
      opts.include(KvEventBenchmark.class.getName() + "\\.");
    }
    opts.shouldFailOnError(true);
    long t0 = System.nanoTime();
    Collection<RunResult> results = new Runner(opts.build()).run();

    Map<String, KvEventWorkload> workloads = new LinkedHashMap<>();
    for (String k : KINDS) {
      workloads.put(k, KvEventWorkload.standard(KvEventWorkload.HashKind.valueOf(k)));
    }
    Map<String, Result<?>> byKey = new LinkedHashMap<>();
    for (RunResult rr : results) {
      String bench = rr.getParams().getBenchmark();
      String method = bench.substring(bench.lastIndexOf('.') + 1);
      byKey.put(method + "|" + rr.getParams().getParam("hashes"), rr.getPrimaryResult());
    }

    StringBuilder json = new StringBuilder();
    json.append("{\n  \"benchmark\": \"kvevents\",\n");
    json.append("  \"command\": ").append(str("KvEventBenchmarkMain " + String.join(" ", args)))
        .append(",\n");
    json.append("  \"java\": ").append(str(System.getProperty("java.vm.name") + " "
        + System.getProperty("java.version"))).append(",\n");
    json.append("  \"cpus\": ").append(Runtime.getRuntime().availableProcessors()).append(",\n");
    json.append("  \"workloads\": {\n");
    int i = 0;
    for (Map.Entry<String, KvEventWorkload> e : workloads.entrySet()) {
      KvEventWorkload w = e.getValue();
      json.append("    ").append(str(e.getKey())).append(": {\"description\": ")
          .append(str(w.description())).append(", \"held_tokens\": ").append(w.heldTokens())
          .append(", \"batches_per_cycle\": ").append(w.batches())
          .append(", \"blocks_per_batch\": ").append(num(w.blocksPerBatch()))
          .append(", \"events_per_batch\": ").append(num(w.eventsPerBatch()))
          .append(", \"bytes_per_batch\": ").append(num(w.bytesPerBatch())).append("}")
          .append(++i < workloads.size() ? ",\n" : "\n");
    }
    json.append("  },\n  \"results\": [\n");

    System.out.println();
    for (KvEventWorkload w : workloads.values()) {
      System.out.println(w.description());
    }
    System.out.printf(Locale.ROOT, "%n%-6s %-18s %14s %10s %12s %16s%n", "hashes", "benchmark",
        "ns/batch", "+-", "ns/block", "blocks/s/core");
    int n = 0;
    for (String k : KINDS) {
      KvEventWorkload w = workloads.get(k);
      for (String m : METHODS) {
        Result<?> r = byKey.get(m + "|" + k);
        if (r == null) {
          continue;
        }
        double perBatch = r.getScore();
        double perBlock = perBatch / w.blocksPerBatch();
        System.out.printf(Locale.ROOT, "%-6s %-18s %,14.0f %10.0f %12.1f %,16.0f%n", k, m,
            perBatch, r.getScoreError(), perBlock, 1e9 / perBlock);
        json.append(n++ > 0 ? ",\n" : "").append("    {\"hashes\": ").append(str(k))
            .append(", \"benchmark\": ").append(str(m))
            .append(", \"ns_per_batch\": ").append(num(perBatch))
            .append(", \"ns_per_batch_error_99_9\": ").append(num(r.getScoreError()))
            .append(", \"ns_per_block\": ").append(num(perBlock))
            .append(", \"blocks_per_s_per_core\": ").append(num(1e9 / perBlock))
            .append(", \"batches_per_s_per_core\": ").append(num(1e9 / perBatch)).append("}");
      }
    }
    json.append("\n  ],\n  \"ratios\": [\n");
    System.out.println();
    n = 0;
    for (String k : KINDS) {
      String[][] pairs = {
        {APPLY, "msgpackCoreValues"}, {APPLY, "msgpackCoreTyped"}, {APPLY, "decodeOnly"},
        {"receiveNoTree", "decodeOnly"}, {"decodeOnly", "msgpackCoreValues"},
        {"decodeOnly", "msgpackCoreTyped"}};
      for (String[] p : pairs) {
        Result<?> a = byKey.get(p[0] + "|" + k);
        Result<?> b = byKey.get(p[1] + "|" + k);
        if (a == null || b == null) {
          continue;
        }
        double ratio = a.getScore() / b.getScore();
        System.out.printf(Locale.ROOT, "%-6s %-18s / %-18s = %.2fx%n", k, p[0], p[1], ratio);
        json.append(n++ > 0 ? ",\n" : "").append("    {\"hashes\": ").append(str(k))
            .append(", \"numerator\": ").append(str(p[0]))
            .append(", \"denominator\": ").append(str(p[1]))
            .append(", \"ratio\": ").append(num(ratio)).append("}");
      }
    }
    json.append("\n  ],\n  \"seconds\": ").append(num((System.nanoTime() - t0) / 1e9))
        .append("\n}\n");
    Path out = ResultsJson.resultsDir(KvEventBenchmarkMain.class).resolve("kvevents.json");
    Files.createDirectories(out.getParent());
    Files.writeString(out, json, StandardCharsets.UTF_8);
    System.out.printf(Locale.ROOT, "%nwrote %s%n", out);
  }



}
