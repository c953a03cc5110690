package io.github.prefixrouter.bench.tree;

import static io.github.prefixrouter.bench.ResultsJson.num;
import static io.github.prefixrouter.bench.ResultsJson.str;

import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.bench.ResultsJson;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import org.openjdk.jmh.runner.options.VerboseMode;
import org.openjdk.jmh.util.Statistics;

/**
 * {@code benchmarks/run tree [--mmlu DIR] [--full] [--out FILE]}: the prefix tree against
 * concurrent-trees' ConcurrentRadixTree and Commons Collections' PatriciaTrie, side by side in
 * one run: longest-prefix match time (median and mean), insert throughput and retained bytes
 * per cached token, on the MMLU workload and random 512- and 4,096-token sequences. Prints a
 * table with ratios against the better baseline and writes {@code target/results/tree.json}.
 *
 * <p>Every benchmark runs in a JVM of its own, so no implementation is compiled with profiles
 * shaped by another's. Quick mode (default) forks one JVM per benchmark with short iterations,
 * about 100 seconds on two cores; {@code --full} forks two per benchmark with five 1-second
 * warmup and measurement iterations, about 6 minutes. The memory section also prints, per
 * workload, half the better baseline's bytes per token (the memory target) and the order-0
 * entropy of the distinct cached tokens; the match section, per workload, the median that 3x
 * the better baseline needs next to two bounds timed the same way (see
 * {@link TreeBenchmark.BoundState}).
 */
public final class TreeBenchmarkMain {

  static final String OURS = "prefix-tree";
  static final String[] MATCH_IMPLS = {OURS, "concurrent-radix-tree", "patricia-trie"};
  static final String[] BASELINES = {"concurrent-radix-tree", "patricia-trie"};
  /** The two bounds of {@link TreeBenchmark.BoundState}, reported as rows of their own. */
  static final String ORACLE = "oracle";
  static final String QUERY_READ = "query-read";

  /** Everything measured for one (implementation, workload). */
  static final class Row {
    final String impl;
    final String workload;
    double matchP50 = Double.NaN;
    double matchMean = Double.NaN;
    double matchP99 = Double.NaN;
    double insertNs = Double.NaN;
    long retained = -1;
    long tokens;

    Row(String impl, String workload) {
      this.impl = impl;
      this.workload = workload;
    }

    double bytesPerToken() {
      return retained < 0 ? Double.NaN : (double) retained / tokens;
    }
  }

  static final String USAGE = "usage: benchmarks/run tree [--mmlu DIR] [--full] [--out FILE]";

  /** The settings of a run; {@code mmlu} and {@code out} null when not given. */
  record Options(String mmlu, boolean full, Path out, boolean help) {}

  /**
   * Parses the command line.
   *
   * @throws IllegalArgumentException for an unknown flag, one given twice or one without its
   *     value, or an {@code --out} that is a directory or lies under a file
   *     ({@link Flags#output})
   */
  static Options options(String[] args) {
    Flags f = Flags.parse(args, Set.of("--full", "-h", "--help"), Set.of("--mmlu", "--out"));
    return new Options(f.string("--mmlu", null), f.has("--full"),
        f.has("--out") ? Flags.output("--out", Path.of(f.string("--out", null)), false) : null,
        f.has("-h") || f.has("--help"));
  }

  public static void main(String[] args) throws RunnerException, IOException {
    Options o = Flags.parseOrExit(args, TreeBenchmarkMain::options, USAGE);
    if (o.help()) {
      System.out.println(USAGE);
      return;
    }
    String mmlu = o.mmlu();
    boolean full = o.full();
    Path out = o.out();
    TreeWorkload.useMmluOrExit(mmlu);
    if (out == null) {
      out = ResultsJson.resultsDir(TreeBenchmarkMain.class).resolve("tree.json");
    }
    long t0 = System.nanoTime();

    Map<String, Row> rows = new LinkedHashMap<>();
    List<String> impls = List.of(OURS, "prefix-tree-lru", "concurrent-radix-tree", "patricia-trie",
        ORACLE, QUERY_READ);
    for (String w : TreeWorkload.NAMES) {
      for (String impl : impls) {
        rows.put(key(impl, w), new Row(impl, w));
      }
    }

    System.out.println("== workloads");
    for (String w : TreeWorkload.NAMES) {
      TreeWorkload wl = TreeWorkload.get(w);
      System.out.printf(Locale.ROOT, "%-12s %s; %d cached sequences, %d distinct cached tokens%n",
          w, wl.description, wl.cached.length, wl.distinctCachedTokens);
      int disagreements = verifyAgreement(wl);
      if (disagreements > 0) {
        System.out.printf(Locale.ROOT, "   WARNING: %d answers where a baseline's or the oracle's longest match"
            + " differs from the prefix tree's%n", disagreements);
      }
    }

    String memoryUnreliable = MemoryMeter.unreliableReason();
    if (memoryUnreliable != null) {
      System.out.println("== memory skipped: " + memoryUnreliable);
    } else {
      System.out.println("== memory (retained heap after GC, median of 3 builds)");
    }
    for (String w : memoryUnreliable != null ? new String[0] : TreeWorkload.NAMES) {
      TreeWorkload wl = TreeWorkload.get(w);
      for (String impl : MATCH_IMPLS) {
        Row r = rows.get(key(impl, w));
        r.retained = MemoryMeter.retainedBytes(impl, wl, 3);
        r.tokens = wl.distinctCachedTokens;
        System.out.printf(Locale.ROOT, "%-12s %-22s %,12d bytes %8.2f bytes/token%n", w, impl,
            r.retained, r.bytesPerToken());
      }
      Row b = better(rows, w, Row::bytesPerToken, true);
      System.out.printf(Locale.ROOT, "%-12s half the better baseline: %.2f bytes/token;"
          + " order-0 entropy of the distinct cached tokens: %.2f bits = %.2f bytes/token%n", w,
          b.bytesPerToken() / 2, wl.entropyBitsPerToken, wl.entropyBitsPerToken / 8);
    }

    System.out.println("== JMH (" + (full ? "full" : "quick") + " mode)");
    List<RunResult> results = new ArrayList<>();
    // match: time-based iterations, each call sampled (median and percentiles)
    results.addAll(new Runner(jmhOptions(full, mmlu, ".match$", false).build()).run());
    // the bounds, timed the same way on the same queries (shorter in quick mode: their code is
    // one intrinsic, compiled within the first warmup iteration)
    ChainedOptionsBuilder bounds = jmhOptions(full, mmlu, ".(matchOracle|readQuery)$", false);
    if (!full) {
      bounds.warmupIterations(2).warmupTime(TimeValue.milliseconds(500))
          .measurementIterations(2);
    }
    results.addAll(new Runner(bounds.build()).run());
    // insert: one batch per iteration on a freshly filled structure, so more iterations
    results.addAll(new Runner(jmhOptions(full, mmlu, ".insertBatch$", true).build()).run());
    for (RunResult rr : results) {
      String bench = rr.getParams().getBenchmark();
      String impl = bench.endsWith(".matchOracle") ? ORACLE
          : bench.endsWith(".readQuery") ? QUERY_READ : rr.getParams().getParam("impl");
      String w = rr.getParams().getParam("workload");
      Row r = rows.get(key(impl, w));
      Statistics st = rr.getPrimaryResult().getStatistics();
      if (!bench.endsWith(".insertBatch")) {
        r.matchP50 = st.getPercentile(50);
        r.matchP99 = st.getPercentile(99);
        r.matchMean = st.getMean();
      } else {
        r.insertNs = st.getMean() / TreeWorkload.get(w).inserts.length;
      }
    }

    printTable(rows);
    String json = toJson(rows, full, mmlu, (System.nanoTime() - t0) / 1e9);
    Files.createDirectories(out.toAbsolutePath().getParent());
    Files.writeString(out, json, StandardCharsets.UTF_8);
    System.out.printf(Locale.ROOT, "%nwrote %s (%.0f s)%n", out, (System.nanoTime() - t0) / 1e9);
  }

  private static ChainedOptionsBuilder jmhOptions(boolean full, String mmlu, String method,
      boolean batches) {
    ChainedOptionsBuilder opts = new OptionsBuilder()
        .include(TreeBenchmark.class.getName() + method)
        .shouldFailOnError(true)
        .verbosity(VerboseMode.SILENT)
        .timeUnit(TimeUnit.NANOSECONDS);
    // every benchmark runs in a JVM of its own, so no implementation's match runs with a
    // profile (call sites, inlining) shaped by another's
    List<String> jvmArgs = new ArrayList<>(List.of("-Xmx4g", "-Xms1g"));
    if (mmlu != null) {
      jvmArgs.add("-D" + TreeWorkload.MMLU_PROPERTY + "="
          + System.getProperty(TreeWorkload.MMLU_PROPERTY));
    }
    opts.forks(full ? 2 : 1).jvmArgsAppend(jvmArgs.toArray(String[]::new));
    if (full) {
      if (batches) {
        opts.warmupIterations(20).measurementIterations(20);
      } else {
        opts.warmupIterations(5).warmupTime(TimeValue.seconds(1))
            .measurementIterations(5).measurementTime(TimeValue.seconds(1));
      }
    } else {
      if (batches) {
        opts.warmupIterations(8).measurementIterations(6);
      } else {
        opts.warmupIterations(3).warmupTime(TimeValue.seconds(1))
            .measurementIterations(3).measurementTime(TimeValue.milliseconds(500));
      }
    }
    return opts;
  }

  static String key(String impl, String workload) {
    return impl + "|" + workload;
  }

  /**
   * Counts queries on which a baseline's longest match (in tokens), or the oracle's, differs
   * from the tree's.
   */
  static int verifyAgreement(TreeWorkload w) {
    PrefixIndex[] idx = new PrefixIndex[MATCH_IMPLS.length];
    for (int i = 0; i < idx.length; i++) {
      idx[i] = PrefixIndex.create(MATCH_IMPLS[i], Long.MAX_VALUE);
      for (int k = 0; k < w.cached.length; k++) {
        idx[i].insert(w.cached[k], w.cachedKeys[k]);
      }
    }
    int[][] partners = TreeBenchmark.partners(w);
    int bad = 0;
    for (int q = 0; q < w.queries.length; q++) {
      int ours = idx[0].match(w.queries[q], w.queryKeys[q]);
      if (TreeBenchmark.commonPrefix(w.queries[q], partners[q]) != ours) {
        bad++;
      }
      for (int i = 1; i < idx.length; i++) {
        int theirs = idx[i].matchedTokens(w.queries[q], idx[i].match(w.queries[q], w.queryKeys[q]));
        if (theirs != ours) {
          bad++;
        }
      }
    }
    return bad;
  }

  /** A row of the printed table; a figure not measured (the LRU tree's match) is "-". */
  static String tableRow(Row r) {
    return String.format(Locale.ROOT, "%-12s %-22s %12s %12s %12s %14s %12s", r.workload,
        r.impl, fmtNs(r.matchP50), fmtNs(r.matchMean), fmtRate(r.matchMean),
        fmtRate(r.insertNs), Double.isNaN(r.bytesPerToken()) ? "-"
            : String.format(Locale.ROOT, "%.2f", r.bytesPerToken()));
  }

  private static String fmtNs(double ns) {
    return Double.isNaN(ns) ? "-" : String.format(Locale.ROOT, "%.0f ns", ns);
  }

  static Row better(Map<String, Row> rows, String w, java.util.function.ToDoubleFunction<Row> f,
      boolean lowerIsBetter) {
    Row best = null;
    for (String b : BASELINES) {
      Row r = rows.get(key(b, w));
      double v = f.applyAsDouble(r);
      if (Double.isNaN(v)) {
        continue;
      }
      if (best == null || (lowerIsBetter ? v < f.applyAsDouble(best) : v > f.applyAsDouble(best))) {
        best = r;
      }
    }
    return best;
  }

  private static void printTable(Map<String, Row> rows) {
    System.out.println();
    System.out.printf(Locale.ROOT, "%-12s %-22s %12s %12s %12s %14s %12s%n", "workload",
        "implementation", "match p50", "match mean", "match/s", "insert/s", "bytes/token");
    for (Row r : rows.values()) {
      System.out.println(tableRow(r));
    }
    System.out.println();
    System.out.println("prefix-tree against the better baseline (match and insert: times faster;"
        + " memory: fraction of its bytes per token)");
    for (String w : TreeWorkload.NAMES) {
      Row ours = rows.get(key(OURS, w));
      Row m = better(rows, w, r -> r.matchP50, true);
      Row i = better(rows, w, r -> r.insertNs, true);
      Row b = better(rows, w, Row::bytesPerToken, true);
      System.out.printf(Locale.ROOT,
          "%-12s match p50 %.1fx (vs %s)   insert %.1fx (vs %s)   memory %s%n", w,
          m.matchP50 / ours.matchP50, m.impl, i.insertNs / ours.insertNs, i.impl,
          b == null ? "-" : String.format(Locale.ROOT, "%.2fx (vs %s)",
              ours.bytesPerToken() / b.bytesPerToken(), b.impl));
    }
    System.out.println();
    System.out.println("what 3x the better baseline's match median leaves, against the bounds"
        + " measured in this run (oracle: one comparison with the right cached sequence;"
        + " query read: the query's tokens an exact match must look at, read once)");
    for (String w : TreeWorkload.NAMES) {
      Row m = better(rows, w, r -> r.matchP50, true);
      System.out.printf(Locale.ROOT, "%-12s 3x needs <= %.0f ns   prefix-tree %.0f ns"
          + "   oracle %.0f ns   query read %.0f ns%n", w, m.matchP50 / 3, rows.get(key(OURS, w)).matchP50,
          rows.get(key(ORACLE, w)).matchP50, rows.get(key(QUERY_READ, w)).matchP50);
    }
    Row r512 = rows.get(key(OURS, "random-512"));
    System.out.printf(Locale.ROOT, "target: 512-token match median <= 1000 ns: %.0f ns (%s)%n",
        r512.matchP50, r512.matchP50 <= 1000 ? "met" : "NOT met");
  }

  private static String fmtRate(double nsPerOp) {
    if (Double.isNaN(nsPerOp)) {
      return "-";
    }
    double perSecond = 1e9 / nsPerOp;
    return perSecond >= 1e6 ? String.format(Locale.ROOT, "%.2f M", perSecond / 1e6)
        : String.format(Locale.ROOT, "%.1f k", perSecond / 1e3);
  }

  static String toJson(Map<String, Row> rows, boolean full, String mmlu, double seconds) {
    StringBuilder b = new StringBuilder();
    b.append("{\n");
    b.append("  \"benchmark\": \"tree\",\n");
    b.append("  \"mode\": \"").append(full ? "full" : "quick").append("\",\n");
    b.append("  \"mmlu_dir\": ").append(mmlu == null ? "null" : str(mmlu)).append(",\n");
    b.append("  \"java\": ").append(str(System.getProperty("java.vm.name") + " "
        + System.getProperty("java.version"))).append(",\n");
    b.append("  \"cpus\": ").append(Runtime.getRuntime().availableProcessors()).append(",\n");
    b.append("  \"seconds\": ").append(num(seconds)).append(",\n");
    b.append("  \"workloads\": {\n");
    for (int i = 0; i < TreeWorkload.NAMES.length; i++) {
      TreeWorkload w = TreeWorkload.get(TreeWorkload.NAMES[i]);
      b.append("    ").append(str(w.name)).append(": {\"description\": ").append(str(w.description))
          .append(", \"cached_sequences\": ").append(w.cached.length)
          .append(", \"distinct_cached_tokens\": ").append(w.distinctCachedTokens)
          .append(", \"entropy_bits_per_token\": ").append(num(w.entropyBitsPerToken))
          .append(", \"queries\": ").append(w.queries.length)
          .append(", \"insert_batch\": ").append(w.inserts.length).append("}")
          .append(i + 1 < TreeWorkload.NAMES.length ? ",\n" : "\n");
    }
    b.append("  },\n");
    b.append("  \"results\": [\n");
    int n = 0;
    for (Row r : rows.values()) {
      b.append("    {\"implementation\": ").append(str(r.impl))
          .append(", \"workload\": ").append(str(r.workload))
          .append(", \"match_ops_per_s\": ").append(num(1e9 / r.matchMean))
          .append(", \"match_ns_p50\": ").append(num(r.matchP50))
          .append(", \"match_ns_mean\": ").append(num(r.matchMean))
          .append(", \"match_ns_p99\": ").append(num(r.matchP99))
          .append(", \"insert_ops_per_s\": ").append(num(1e9 / r.insertNs))
          .append(", \"insert_ns_mean\": ").append(num(r.insertNs))
          .append(", \"retained_bytes\": ").append(r.retained < 0 ? "null" : r.retained)
          .append(", \"bytes_per_cached_token\": ").append(num(r.bytesPerToken()))
          .append("}").append(++n < rows.size() ? ",\n" : "\n");
    }
    b.append("  ],\n");
    b.append("  \"vs_better_baseline\": [\n");
    for (int i = 0; i < TreeWorkload.NAMES.length; i++) {
      String w = TreeWorkload.NAMES[i];
      Row ours = rows.get(key(OURS, w));
      Row m = better(rows, w, r -> r.matchP50, true);
      Row in = better(rows, w, r -> r.insertNs, true);
      Row mem = better(rows, w, Row::bytesPerToken, true);
      b.append("    {\"workload\": ").append(str(w))
          .append(", \"match_speedup_p50\": ").append(num(m.matchP50 / ours.matchP50))
          .append(", \"match_baseline\": ").append(str(m.impl))
          .append(", \"insert_speedup\": ").append(num(in.insertNs / ours.insertNs))
          .append(", \"insert_baseline\": ").append(str(in.impl))
          .append(", \"memory_ratio\": ")
          .append(mem == null ? "null" : num(ours.bytesPerToken() / mem.bytesPerToken()))
          .append(", \"memory_baseline\": ").append(mem == null ? "null" : str(mem.impl))
          .append(", \"match_ns_p50_for_3x\": ").append(num(m.matchP50 / 3))
          .append(", \"oracle_match_ns_p50\": ").append(num(rows.get(key(ORACLE, w)).matchP50))
          .append(", \"query_read_ns_p50\": ")
          .append(num(rows.get(key(QUERY_READ, w)).matchP50))
          .append("}").append(i + 1 < TreeWorkload.NAMES.length ? ",\n" : "\n");
    }
    b.append("  ]\n}\n");
    return b.toString();
  }



}
