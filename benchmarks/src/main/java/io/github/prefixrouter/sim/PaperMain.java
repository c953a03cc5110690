package io.github.prefixrouter.sim;

import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.workload.PromptSource;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * The main job: the source paper's evaluation on a simulated cluster running the library's real
 * nodes, with baselines side by side on the same seeds. Prints the table, writes
 * {@code paper.json} and the plots. {@code --help} lists the flags.
 */
public final class PaperMain {

  private PaperMain() {}

  static final String USAGE =
      """
      usage: benchmarks/run paper [flags]
        --mmlu DIR               build real MMLU 5-shot prompts from DIR (else MMLU-shaped generator)
        --seed N                 master seed (default 42)
        --nodes N                number of nodes (default 4)
        --rate R                 cluster-wide Poisson arrival rate, requests/s (default 4.5,
                                 at least 0.001)
        --requests N             requests per run, warm-up included (default 7500, at
                                 most 1,000,000)
        --warmup N               first requests not measured (default 20%% of requests)
        --zipf S                 Zipf exponent of the skewed distribution (default 1.0)
        --delays A,B,..          one-way network delays in ms (default 2,200,1000)
        --jitter F               extra delay, uniform in [0, F x delay) (default 0.1)
        --loss P                 message loss probability, library nodes only (default 0)
        --output-tokens N        tokens generated per request, 1 to 1048576 (default 1)
        --capacity TOKENS        KV-cache capacity per node in tokens (default 65536)
        --slots N                concurrent requests per engine, 1 to 4096 (default 1)
        --block-size N           tokens per KV block, 1 to 1024 (default 16)
        --prefill-overhead-ms X  fixed prefill time (default 10)
        --prefill-ms-per-token X prefill time per uncached token (default 2.5)
        --decode-ms-per-token X  decode time per output token (default 15)
        --no-engine-timings      the engines' results carry no prefill and decode times, as
                                 over the OpenAI-compatible adapter (default: they do)
        --policies A,B,..        subset of: %s
        --distributions A,B      subset of: uniform,skewed
        --window S               timeline window in simulated seconds (default 20; at
                                 most 100,000 windows in requests/rate seconds)
        --threads N              runs in parallel, 1 to 16 (default: cores, at most 4)
        --out DIR                output directory (default benchmarks/target/results)
        --no-plots               skip the PNG charts
        --help                   this text
      """.formatted(Policy.labels());

  public static void main(String[] args) throws Exception {
    System.setProperty("java.awt.headless", "true");
    int code = execute(args, System.out, System.err);
    if (code != 0) {
      System.exit(code);
    }
  }

  /**
   * Parses the flags, loads the prompts and runs; returns the exit code: 0, or 2 after printing
   * {@code error: ...} for a bad flag or an MMLU directory that cannot be loaded.
   */
  static int execute(String[] args, PrintStream out, PrintStream err)
      throws IOException, InterruptedException {
    Options o;
    try {
      o = parse(args);
    } catch (IllegalArgumentException e) {
      err.println("error: " + e.getMessage());
      err.print(USAGE);
      return 2;
    }
    if (o == null) {
      out.print(USAGE);
      return 0;
    }
    PromptSource prompts;
    try {
      prompts = Prompts.load(o.config.mmluDir(), o.config.seed());
    } catch (IllegalArgumentException | UncheckedIOException e) {
      err.println("error: --mmlu " + o.config.mmluDir() + ": " + e.getMessage());
      return 2;
    }
    run(o.config, prompts, o.plots, out, err);
    return 0;
  }

  static List<RunResult> run(SimConfig cfg, boolean plots, PrintStream out, PrintStream err)
      throws IOException, InterruptedException {
    return run(cfg, Prompts.load(cfg.mmluDir(), cfg.seed()), plots, out, err);
  }

  static List<RunResult> run(
      SimConfig cfg, PromptSource prompts, boolean plots, PrintStream out, PrintStream err)
      throws IOException, InterruptedException {
    List<Scenario> scenarios = PaperRunner.scenarios(cfg);
    err.printf(Locale.ROOT, "%d runs x %d requests, %d nodes, %s%n",
        scenarios.size(), cfg.requests(), cfg.nodes(), prompts.description());
    ProgressBar bar =
        new ProgressBar(err, "simulating", (long) scenarios.size() * cfg.requests(),
            scenarios.size());
    List<RunResult> results = PaperRunner.run(cfg, prompts, Clusters::create, bar);
    out.print(Report.table(cfg, results));
    Path json = cfg.outDir().resolve("paper.json");
    Report.writeJson(json, cfg, prompts.description(), results);
    out.println();
    out.println("JSON: " + json.toAbsolutePath().normalize());
    if (plots) {
      for (Path p : Plots.write(cfg.outDir(), cfg, results)) {
        out.println("plot: " + p.toAbsolutePath().normalize());
      }
    }
    return results;
  }

  record Options(SimConfig config, boolean plots) {}

  /** The flags that take a value, in the order their values are read. */
  private static final List<String> VALUE_FLAGS = List.of("--mmlu", "--seed", "--nodes",
      "--rate", "--requests", "--warmup", "--zipf", "--delays", "--jitter", "--loss",
      "--output-tokens", "--capacity", "--slots", "--block-size", "--prefill-overhead-ms",
      "--prefill-ms-per-token", "--decode-ms-per-token", "--window", "--threads", "--policies",
      "--distributions", "--out");

  /**
   * Parses the flags; returns null for {@code --help}.
   *
   * @throws IllegalArgumentException for an unknown flag (wherever it stands), an argument that
   *     is no flag's value, a flag given twice or without its value, a value that is not a
   *     number or is out of range, or an {@code --out} that is a file or lies under one
   */
  static Options parse(String[] args) {
    SimConfig d = SimConfig.defaults();
    long seed = d.seed();
    int nodes = d.nodes();
    double rate = d.ratePerSecond();
    int requests = d.requests();
    Integer warmup = null;
    double zipf = d.zipfExponent();
    List<Integer> delays = d.delaysMs();
    double jitter = d.jitterFraction();
    double loss = d.lossProbability();
    int outputTokens = d.outputTokens();
    EngineProfile e = d.engine();
    int blockSize = e.blockSize();
    long capacity = e.capacityTokens();
    int slots = e.slots();
    double overheadMs = e.prefillOverheadNanos() / 1e6;
    double prefillMs = e.prefillNanosPerToken() / 1e6;
    double decodeMs = e.decodeNanosPerToken() / 1e6;
    double window = d.timelineWindowSeconds();
    int threads = d.threads();
    List<Policy> policies = d.policies();
    List<Distribution> dists = d.distributions();
    Path mmlu = null;
    Path outDir = d.outDir();
    for (String a : args) {
      if (a.equals("--help") || a.equals("-h")) {
        return null;
      }
    }
    // the shared reader: a flag given twice is refused rather than the last one winning without
    // a word, and a misspelt flag is unknown wherever it stands
    Flags f = Flags.parse(args, Set.of("--no-plots", "--no-engine-timings"),
        Set.copyOf(VALUE_FLAGS));
    boolean plots = !f.has("--no-plots");
    for (String a : VALUE_FLAGS) {
      if (!f.has(a)) {
        continue;
      }
      String v = f.string(a, null);
      try {
        switch (a) {
          case "--mmlu" -> mmlu = Path.of(v);
          case "--seed" -> seed = Long.parseLong(v);
          case "--nodes" -> nodes = Integer.parseInt(v);
          case "--rate" -> rate = Double.parseDouble(v);
          case "--requests" -> requests = Integer.parseInt(v);
          case "--warmup" -> warmup = Integer.parseInt(v);
          case "--zipf" -> zipf = Double.parseDouble(v);
          case "--delays" -> {
            delays = new ArrayList<>();
            for (String s : v.split(",")) {
              delays.add(Integer.parseInt(s.trim()));
            }
          }
          case "--jitter" -> jitter = Double.parseDouble(v);
          case "--loss" -> loss = Double.parseDouble(v);
          case "--output-tokens" -> outputTokens = Integer.parseInt(v);
          case "--capacity" -> capacity = Long.parseLong(v);
          case "--slots" -> slots = Integer.parseInt(v);
          case "--block-size" -> blockSize = Integer.parseInt(v);
          case "--prefill-overhead-ms" -> overheadMs = Double.parseDouble(v);
          case "--prefill-ms-per-token" -> prefillMs = Double.parseDouble(v);
          case "--decode-ms-per-token" -> decodeMs = Double.parseDouble(v);
          case "--window" -> window = Double.parseDouble(v);
          case "--threads" -> threads = Integer.parseInt(v);
          case "--policies" -> {
            policies = new ArrayList<>();
            for (String s : v.split(",")) {
              policies.add(Policy.parse(s.trim()));
            }
          }
          case "--distributions" -> {
            dists = new ArrayList<>();
            for (String s : v.split(",")) {
              dists.add(parseDistribution(s.trim()));
            }
          }
          case "--out" -> outDir = Path.of(v);
          default -> throw new IllegalArgumentException("unknown flag " + a);
        }
      } catch (NumberFormatException ex) {
        throw new IllegalArgumentException("flag " + a + ": not a number: '" + v + "'");
      }
    }
    if (mmlu != null && !Files.isDirectory(mmlu)) {
      throw new IllegalArgumentException("--mmlu " + mmlu + ": not a directory");
    }
    // checked now: the JSON and charts are written only after the whole simulation
    Flags.output("--out", outDir, true);
    EngineProfile engine =
        new EngineProfile(
            blockSize,
            capacity,
            slots,
            nanos("--prefill-overhead-ms", overheadMs),
            nanos("--prefill-ms-per-token", prefillMs),
            nanos("--decode-ms-per-token", decodeMs),
            !f.has("--no-engine-timings"));
    if (requests > SimConfig.MAX_REQUESTS) {
      // checked before the configuration, whose timeline check would refuse it for its windows
      throw new IllegalArgumentException("--requests must be at most " + SimConfig.MAX_REQUESTS
          + ", was " + requests);
    }
    int w = warmup != null ? warmup : requests / 5;
    SimConfig cfg =
        new SimConfig(seed, nodes, rate, requests, w, zipf, delays, jitter, loss, outputTokens,
            engine, window, threads, policies, dists, mmlu, outDir);
    return new Options(cfg, plots);
  }

  /**
   * An engine timing given in milliseconds, in nanoseconds. Checked before rounding: NaN would
   * round to 0 ns, an infinity or a huge value to {@code Long.MAX_VALUE} ns, and a negative
   * value above -0.5 ns to 0 ns, all of which the engine profile would then accept.
   */
  private static long nanos(String flag, double ms) {
    if (!(ms >= 0 && ms * 1e6 < Long.MAX_VALUE)) {
      throw new IllegalArgumentException(
          "flag " + flag + ": must be a finite number of ms, 0 or more, not " + ms);
    }
    return Math.round(ms * 1e6);
  }

  private static Distribution parseDistribution(String s) {
    for (Distribution d : Distribution.values()) {
      if (d.label().equalsIgnoreCase(s)) {
        return d;
      }
    }
    throw new IllegalArgumentException("unknown distribution '" + s + "'; known: uniform, skewed");
  }
}
