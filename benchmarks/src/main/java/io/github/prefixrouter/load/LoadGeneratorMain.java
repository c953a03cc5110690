package io.github.prefixrouter.load;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.bench.SimFleet;
import io.github.prefixrouter.internal.CommonPoolSize;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.server.LoadDriver;
import io.github.prefixrouter.server.ReferenceChatTokens;
import io.github.prefixrouter.workload.ChatWorkload;
import io.github.prefixrouter.workload.MmluPrompts;
import io.github.prefixrouter.workload.PromptSource;
import io.github.prefixrouter.workload.SubjectPopularity;
import io.github.prefixrouter.workload.SyntheticMmluPrompts;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Drives a running cluster of nodes over HTTP with MMLU or an MMLU-shaped workload, and prints
 * latency percentiles (with {@code --stream}, also of the time to the first piece of output),
 * the cache hit rate, the forwarded share and per-node traffic.
 *
 * <p>With {@code --api chat} the requests are chat conversations sent to the nodes' OpenAI chat
 * route ({@code /v1/chat/completions}), each a system prompt shared by its subject and a user
 * message ({@link ChatWorkload}), sent with a seed of their own; with {@code --chat-as-ids} the
 * same conversations go to {@code /v1/route/completions} as the token ids the reference
 * engine's tokenizer gives them, to compare the two routes.
 *
 * <pre>
 * benchmarks/run load --nodes 127.0.0.1:8001,127.0.0.1:8002 [--requests 1000] [--warmup 0]
 *     [--concurrency 8]
 *     [--mmlu ../shared/data/mmlu] [--zipf 1.1] [--max-tokens 1] [--seed 1]
 *     [--stream] [--json results.json] [--api route|chat] [--chat-as-ids] [--temperature T]
 *     [--stop S]... [--max-system-chars N] [--max-user-chars N]
 *     [--node-pids PID,PID...] [--relay-pids PID,...]
 * </pre>
 *
 * <p>With {@code --warmup N}, N more requests of the same workload are sent first and left out
 * of every figure: the nodes' code and this process's are compiled by the JIT while the first
 * requests of a fresh cluster run, so without it the slowest requests of a short run are its
 * first ones whatever the routing does. The measured requests are the same with or without a
 * warm-up (the warm-up's are drawn after them from the same seeded sequence, and sent first).
 *
 * <p>With {@code --node-pids} (and {@code --relay-pids}) it also prints the CPU time those
 * processes spent from the start of the measured requests to their end, per measured request
 * ({@link ProcessCpu}): on a machine whose cores the nodes share, the cost of a forward's HTTP
 * exchange, relay and answer comes out of the same CPU as the engines' computation.
 *
 * <p>On a host of 1 or 2 processors it gives the JVM's common fork-join pool 2 threads as it
 * starts, unless the command line sizes it, as {@code NodeMain} does: with the default pool of
 * 1 thread the HTTP client of JDK 17 to 24 started and ended a thread for every request it
 * sent, about 0.7 ms of this process's CPU per request on the machine of docs/deployment.md
 * ("JVM settings on 1 or 2 processors: the common pool").
 */
public final class LoadGeneratorMain {

  private LoadGeneratorMain() {}

  static final String USAGE = String.join("\n",
      "Usage: LoadGeneratorMain --nodes HOST:PORT[,HOST:PORT...] [options]",
      "  --nodes LIST        client endpoints of the nodes (their --client addresses); required",
      "  --requests N        requests to issue, 1 to 1000000 (default 1000)",
      "  --warmup N          requests sent before them and left out of every figure and",
      "                      of the per-node rows, 0 or more (default 0); the measured",
      "                      requests are the same as without; requests and warmup",
      "                      together at most 1000000",
      "  --concurrency N     requests outstanding at once, 1 to 10000 (default 8)",
      "  --mmlu DIR          MMLU data directory (dev/, test/); one that cannot be loaded is",
      "                      an error; default: MMLU-shaped generator",
      "  --zipf S            Zipf exponent of subject popularity, 0 = uniform (default 0)",
      "  --max-tokens N      tokens generated per request, 1 to 1048576 (default 1)",
      "  --seed N            workload seed, any 64-bit whole number (default 1)",
      "  --stream            ask for streamed answers (\"stream\": true) and report the time",
      "                      to the first piece (TTFT) next to the latency",
      "  --json FILE         also write the results as JSON",
      "  --node-pids LIST    process ids of the nodes, comma-separated: print the CPU time",
      "                      (user and system, from Linux's /proc/PID/stat) they spent",
      "                      during the measured requests, per request (default none)",
      "  --relay-pids LIST   the same for the relays between the nodes, if any (default",
      "                      none)",
      "  --api route|chat    route: token ids to /v1/route/completions (default); chat:",
      "                      conversations to /v1/chat/completions, tokenized by the nodes",
      "                      (--tokenizer), each request a subject's system prompt and a",
      "                      user message, sent with the seed SEED*1000003+i; subjects",
      "                      Zipf-popular (--zipf, default 1.1 with --api chat). With --mmlu",
      "                      the system prompt is a subject's 5-shot header, the user message",
      "                      a test question; without, 16 generated system prompts of",
      "                      800-1600 characters. The reference engine's tokenizer is one",
      "                      token per character, so prompts are kept short: shots are",
      "                      dropped until the system prompt fits --max-system-chars",
      "                      (default 1600) and questions above --max-user-chars (default",
      "                      600) are skipped",
      "  --max-system-chars N  with --api chat: the longest system prompt, in characters;",
      "                      a subject's shots are dropped until it fits, the header kept",
      "                      whole even if longer (default 1600)",
      "  --max-user-chars N  with --api chat: a question longer, in characters, is skipped",
      "                      (default 600)",
      "  --chat-as-ids       with --api chat: send the same conversations, with the same",
      "                      seeds, to /v1/route/completions as the token ids a node with the",
      "                      reference engine gives them (its chat template, one id per",
      "                      character), to compare the chat route with the token route",
      "  --temperature T     the temperature every request sends, 0 to 100 (default: none,",
      "                      the route's default: 0 on the token route, 1 on the chat route)",
      "  --model NAME        the model the requests name (the cache scope: the base",
      "                      model, or a LoRA adapter), on either route (default none)",
      "  --stop S            with --api chat: a stop string every request sends (\\n is a",
      "                      newline); repeat for more, at most 16 (default none)");

  /** The flags that take no value. */
  static final Set<String> SWITCHES = Set.of("stream", "chat-as-ids");

  /**
   * The most {@code --requests}: far above any sensible run, and the workload of a larger one
   * would not fit the heap.
   */
  static final int MAX_REQUESTS = 1_000_000;

  /** The flags that take a value; all but {@code --stop} at most once. */
  static final Set<String> VALUE_FLAGS = Set.of("nodes", "requests", "warmup", "concurrency", "mmlu",
      "zipf", "max-tokens", "seed", "json", "api", "temperature", "model", "stop",
      "max-system-chars", "max-user-chars", "node-pids", "relay-pids");

  /**
   * Parses the command line: flag name (without {@code --}) to value, {@code "true"} for a
   * switch; the {@code --stop} values, in order, go to {@code stops}.
   *
   * @return the flags, or null if {@code --help} or {@code -h} was asked for
   * @throws IllegalArgumentException for a flag that is not one of {@link #USAGE}'s, a flag
   *     without its value (at the end, or followed by another of the flags), or a flag other
   *     than {@code --stop} given twice (a misspelt or
   *     repeated flag would otherwise be ignored or overridden without a word)
   */
  static Map<String, String> flags(String[] args, List<String> stops) {
    Map<String, String> o = new LinkedHashMap<>();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (a.equals("--help") || a.equals("-h")) {
        return null;
      }
      String name = a.startsWith("--") ? a.substring(2) : "";
      if (!SWITCHES.contains(name) && !VALUE_FLAGS.contains(name)) {
        throw new IllegalArgumentException(a.startsWith("--") ? "unknown flag '" + a + "'"
            : "bad argument '" + a + "'");
      }
      if (o.containsKey(name)) {
        throw new IllegalArgumentException(a + " is given twice");
      }
      if (SWITCHES.contains(name)) {
        o.put(name, "true");
        continue;
      }
      if (i + 1 >= args.length) {
        throw new IllegalArgumentException(a + " needs a value");
      }
      String next = args[i + 1];
      if (next.equals("--help") || next.startsWith("--")
          && (SWITCHES.contains(next.substring(2)) || VALUE_FLAGS.contains(next.substring(2)))) {
        // a value left out: the next flag was taken for it, and dropped (--json --stream wrote
        // the results to a file named --stream, and did not stream)
        throw new IllegalArgumentException(a + " needs a value, but is followed by the flag "
            + next);
      }
      if (name.equals("stop")) {
        stops.add(args[++i].replace("\\n", "\n"));
        continue;
      }
      o.put(name, args[++i]);
    }
    return o;
  }

  /**
   * The run's figures as printed after it, in {@link Locale#ROOT} whatever the default locale:
   * answers and throughput, latency, the time to the first piece if streamed, hit rate and
   * forwarded share. A latency or time to the first piece without a value (nothing answered,
   * no piece came) is "-", as it is null in the JSON.
   */
  static String figures(LoadDriver.Result r, int requests, boolean stream) {
    StringBuilder sb = new StringBuilder();
    sb.append(String.format(Locale.ROOT,
        "answered %d of %d (%d errors), %.1f s, %.1f requests/s, %d client failovers%n",
        r.answered().size(), requests, requests - r.answered().size(), r.wallNanos() / 1e9,
        r.answered().size() / (r.wallNanos() / 1e9), r.clientRetries()));
    sb.append(String.format(Locale.ROOT, "latency ms: mean %s  p50 %s  p90 %s  p99 %s  max %s%n",
        ms(r.meanLatencyMillis()), ms(r.latencyPercentileMillis(50)),
        ms(r.latencyPercentileMillis(90)), ms(r.latencyPercentileMillis(99)),
        ms(r.latencyPercentileMillis(100))));
    if (stream) {
      sb.append(String.format(Locale.ROOT, "time to first piece ms: p50 %s  p90 %s  p99 %s  max %s%n",
          ms(r.firstPiecePercentileMillis(50)), ms(r.firstPiecePercentileMillis(90)),
          ms(r.firstPiecePercentileMillis(99)), ms(r.firstPiecePercentileMillis(100))));
    }
    sb.append(String.format(Locale.ROOT, "cache hit rate (cached / prompt tokens, engine-reported): %.3f%n",
        r.hitRate()));
    sb.append(String.format(Locale.ROOT, "forwarded share: %.3f%n", r.forwardedShare()));
    return sb.toString();
  }

  /** Milliseconds with one decimal, or "-" when there is no value (NaN). */
  private static String ms(double v) {
    return SimFleet.figure(v, "%.1f");
  }

  /**
   * The figures of {@code r} for {@code --json} (without the per-node rows): a figure with no
   * value (a latency percentile when nothing was answered, the time to the first piece when no
   * piece came) is JSON null, not NaN, which JSON does not have.
   */
  static Map<String, Object> summary(LoadDriver.Result r, String description,
      LoadDriver.Api api, int requests, int warmup, boolean stream) {
    Map<String, Object> j = new LinkedHashMap<>();
    j.put("workload", description);
    j.put("api", api == LoadDriver.Api.CHAT ? "chat" : "route");
    j.put("requests", requests);
    j.put("warmup", warmup);
    j.put("answered", r.answered().size());
    j.put("wall_seconds", r.wallNanos() / 1e9);
    j.put("latency_ms", Map.of("mean", orNull(r.meanLatencyMillis()),
        "p50", orNull(r.latencyPercentileMillis(50)), "p90", orNull(r.latencyPercentileMillis(90)),
        "p99", orNull(r.latencyPercentileMillis(99))));
    if (stream) {
      j.put("ttft_ms", Map.of("p50", orNull(r.firstPiecePercentileMillis(50)),
          "p90", orNull(r.firstPiecePercentileMillis(90)),
          "p99", orNull(r.firstPiecePercentileMillis(99))));
    }
    j.put("hit_rate", orNull(r.hitRate()));
    j.put("forwarded_share", orNull(r.forwardedShare()));
    j.put("client_failovers", r.clientRetries());
    return j;
  }

  private static Object orNull(double v) {
    return Double.isFinite(v) ? (Object) v : Json.NULL;
  }

  public static void main(String[] args) throws Exception {
    // before anything creates the pool: on 1 or 2 processors each request started and ended a
    // thread of this process, whose CPU comes out of the same cores as the nodes'
    CommonPoolSize.twoAtLeast();
    List<String> stops = new ArrayList<>();
    Map<String, String> o = null;
    try {
      o = flags(args, stops);
    } catch (IllegalArgumentException e) {
      fail(e.getMessage());
    }
    if (o == null) {
      System.out.println(USAGE);
      return;
    }
    if (!o.containsKey("nodes")) {
      fail("--nodes is required");
    }
    List<String> nodes = Arrays.stream(o.get("nodes").split(",")).map(String::trim).filter(s -> !s.isEmpty()).toList();
    int requests = intArg(o, "requests", 1000, 1);
    // its range is the load driver's, checked when the driver is built below
    int concurrency = intArg(o, "concurrency", 8, Integer.MIN_VALUE);
    if (requests > MAX_REQUESTS) {
      // 2,000,000,000 ran out of memory building the workload
      fail("--requests must be at most " + MAX_REQUESTS + ", was " + requests);
    }
    int warmup = intArg(o, "warmup", 0, 0);
    if (warmup > MAX_REQUESTS - requests) {
      fail("--warmup " + warmup + " and --requests " + requests + " together must be at most "
          + MAX_REQUESTS);
    }
    // its range is the load driver's too
    int maxTokens = intArg(o, "max-tokens", 1, Integer.MIN_VALUE);
    long seed = longArg(o, "seed", 1);
    int maxSystemChars = intArg(o, "max-system-chars", 1600, 1);
    int maxUserChars = intArg(o, "max-user-chars", 600, 1);
    String apiName = o.getOrDefault("api", "route");
    if (!apiName.equals("route") && !apiName.equals("chat")) {
      fail("--api must be route or chat, was '" + apiName + "'");
    }
    boolean chat = apiName.equals("chat");
    // --model is sent on the token route too (its cache scope), so it goes with either
    if (!chat && (o.containsKey("chat-as-ids") || !stops.isEmpty())) {
      fail("--chat-as-ids and --stop need --api chat");
    }
    for (String k : List.of("max-system-chars", "max-user-chars")) {
      if (!chat && o.containsKey(k)) {
        // they shape the chats only: on the token route they were accepted and ignored
        fail("--" + k + " needs --api chat");
      }
    }
    if (o.containsKey("chat-as-ids") && !stops.isEmpty()) {
      fail("--stop cannot go with --chat-as-ids: the token route takes no stop strings");
    }
    Path json = null;
    if (o.containsKey("json")) {
      try {
        json = jsonFile(o.get("json"));
      } catch (IllegalArgumentException e) {
        fail("--json " + o.get("json") + ": " + e.getMessage());
      }
    }
    Map<String, List<Long>> cpuPids = new LinkedHashMap<>();
    for (String k : List.of("node-pids", "relay-pids")) {
      if (o.containsKey(k)) {
        try {
          cpuPids.put(k.equals("node-pids") ? "nodes" : "relays", ProcessCpu.pids(o.get(k)));
        } catch (IllegalArgumentException e) {
          fail("--" + k + " " + e.getMessage());
        }
      }
    }
    ProcessCpu cpu = new ProcessCpu(Path.of("/proc"), cpuPids, ProcessCpu::clockTicksPerSecond);
    boolean asIds = o.containsKey("chat-as-ids");
    LoadDriver.Api api = chat && !asIds ? LoadDriver.Api.CHAT : LoadDriver.Api.ROUTE;
    double zipf = numberArg(o, "zipf", chat ? 1.1 : 0);
    Double temperature = o.containsKey("temperature") ? numberArg(o, "temperature", 0) : null;
    // the driver's settings, given before the workload is built: stop strings it cannot send
    // (more than 16, an empty one, a long one) are a bad flag; they were refused once the
    // workload had been built, in a stack trace
    LoadDriver.Builder driverSettings = LoadDriver.builder()
        .endpoints(nodes)
        .model(o.get("model"))
        .concurrency(concurrency)
        .maxTokens(maxTokens)
        .stream(o.containsKey("stream"));
    try {
      driverSettings.stop(stops);
    } catch (IllegalArgumentException e) {
      fail("--stop: " + e.getMessage());
    }
    try { // above the nodes' 100 every request was sent, and refused
      driverSettings.temperature(temperature);
    } catch (IllegalArgumentException e) {
      fail(flagOf(e.getMessage(), o) + ": " + e.getMessage());
    }
    // built before the workload: the driver's refusal of its settings ended in
    // a stack trace once the workload had been built; its checks are the only ones, its
    // message says what is wrong and the flag is named here
    AtomicReference<ProgressBar> bar = new AtomicReference<>();
    LoadDriver driver = null;
    LoadDriver warmupDriver = null;
    String idPrefix = "load-" + Long.toHexString(System.currentTimeMillis()) + "-";
    try {
      driver = driverSettings
          .api(api)
          .idPrefix(idPrefix)
          .onCompleted(n -> bar.get().update(n))
          .build();
      // ids of its own: the driver numbers a run's requests from 0
      warmupDriver = driverSettings.idPrefix(idPrefix + "warmup-").build();
    } catch (IllegalArgumentException e) {
      fail(flagOf(e.getMessage(), o) + ": " + e.getMessage());
    }

    String description;
    int subjects;
    List<LoadDriver.Prompt> prompts;
    List<LoadDriver.Prompt> warmupPrompts;
    if (chat) {
      ChatWorkload w = null;
      try {
        w = chats(o.get("mmlu"), seed, maxSystemChars, maxUserChars);
      } catch (IllegalArgumentException | UncheckedIOException e) {
        fail("--mmlu " + o.get("mmlu") + ": " + e.getMessage());
      }
      List<LoadDriver.Prompt> chats = w.requests(requests + warmup, zipf, seed);
      long chars = 0;
      List<LoadDriver.Prompt> all = new ArrayList<>(chats.size());
      for (LoadDriver.Prompt p : chats) {
        int[] ids = ReferenceChatTokens.tokens(p.messages());
        chars += all.size() < requests ? ids.length : 0;
        all.add(asIds ? LoadDriver.Prompt.ofTokens(ids).withSeed(p.seed()) : p);
      }
      prompts = all.subList(0, requests);
      warmupPrompts = all.subList(requests, all.size());
      description = w.description() + (asIds
          ? ", sent as the reference tokenizer's ids to /v1/route/completions"
          : ", sent to /v1/chat/completions");
      subjects = w.subjectCount();
      System.out.printf(Locale.ROOT, "workload: %s, %d subjects, %d requests, %.0f characters per rendered chat "
              + "on average (reference engine: tokens), %s%n", description, subjects, requests,
          (double) chars / Math.max(1, requests), zipf > 0 ? "Zipf s=" + zipf : "uniform subjects");
    } else {
      PromptSource set = null;
      try {
        set = tokenPrompts(o.get("mmlu"), seed);
      } catch (IllegalArgumentException | UncheckedIOException e) {
        fail("--mmlu " + o.get("mmlu") + ": " + e.getMessage());
      }
      List<int[]> ids = requestSequence(set, requests + warmup, zipf, seed);
      long tokens = ids.subList(0, requests).stream().mapToLong(p -> p.length).sum();
      description = set.description();
      subjects = set.subjectCount();
      System.out.printf(Locale.ROOT, "workload: %s, %d subjects, %d requests, %.0f prompt tokens on average, %s%n",
          set.description(), set.subjectCount(), requests, (double) tokens / Math.max(1, requests),
          zipf > 0 ? "Zipf s=" + zipf : "uniform subjects");
      List<LoadDriver.Prompt> all = ids.stream().map(LoadDriver.Prompt::ofTokens).toList();
      prompts = all.subList(0, requests);
      warmupPrompts = all.subList(requests, all.size());
    }

    if (warmup > 0) {
      System.out.printf(Locale.ROOT, "warm-up: %d requests, left out of the figures%n", warmup);
      bar.set(new ProgressBar(warmup));
      LoadDriver.Result w = warmupDriver.runPrompts(warmupPrompts);
      bar.get().finish();
      System.out.printf(Locale.ROOT, "%nwarm-up: answered %d of %d%n", w.answered().size(), warmup);
    }
    bar.set(new ProgressBar(requests));
    Map<String, Map<?, ?>> before = new LinkedHashMap<>();
    for (String n : nodes) {
      before.put(n, driver.stats(n));
    }
    cpu.start();
    LoadDriver.Result r = driver.runPrompts(prompts);
    cpu.stop();
    bar.get().finish();

    System.out.println();
    System.out.print(figures(r, requests, o.containsKey("stream")));
    System.out.print(cpu.report(requests));
    System.out.println();
    System.out.printf(Locale.ROOT, "%-22s %10s %10s %10s %12s %10s %10s%n", "node", "served", "submitted", "forwarded",
        "servedForPeer", "pushedBack", "fallbacks");
    Map<String, Long> served = r.servedBy();
    List<Map<String, Object>> perNode = new ArrayList<>();
    for (String n : nodes) {
      Map<?, ?> s0 = before.get(n);
      Map<?, ?> s1 = driver.stats(n);
      String id = s1 != null ? String.valueOf(s1.get("node_id")) : s0 != null ? String.valueOf(s0.get("node_id")) : n;
      Map<String, Object> row = new LinkedHashMap<>();
      row.put("endpoint", n);
      row.put("node_id", id);
      row.put("served", served.getOrDefault(id, 0L));
      for (String k : List.of("requests", "forwarded", "served_for_peers", "pushed_back")) {
        row.put(k, delta(s0, s1, k));
      }
      row.put("fallbacks", s1 == null ? -1 : fallbacks(s1) - (s0 == null ? 0 : fallbacks(s0)));
      perNode.add(row);
      System.out.printf(Locale.ROOT, "%-22s %10d %10d %10d %12d %10d %10d%n", id + "@" + n, row.get("served"), row.get("requests"),
          row.get("forwarded"), row.get("served_for_peers"), row.get("pushed_back"), row.get("fallbacks"));
    }
    if (json != null) {
      Map<String, Object> j = summary(r, description, api, requests, warmup, o.containsKey("stream"));
      j.putAll(cpu.json(requests));
      j.put("nodes", perNode);
      Files.writeString(json, Json.write(j) + "\n", StandardCharsets.UTF_8);
    }
    if (r.answered().size() != requests) {
      System.exit(1);
    }
  }

  /**
   * The {@code --json} file, checked before the run: a name no path can be, a directory, or a
   * file in a directory that does not exist failed only once the run was over, its figures lost.
   *
   * @throws IllegalArgumentException saying which
   */
  static Path jsonFile(String value) {
    Path file;
    try {
      file = Path.of(value);
    } catch (java.nio.file.InvalidPathException e) {
      throw new IllegalArgumentException("not a file name: " + e.getReason(), e);
    }
    if (value.isBlank() || Files.isDirectory(file)) {
      throw new IllegalArgumentException("is a directory, not a file");
    }
    Path dir = file.toAbsolutePath().getParent();
    if (dir != null && !Files.isDirectory(dir)) {
      throw new IllegalArgumentException("no such directory: " + dir);
    }
    return file;
  }

  /**
   * The flag, as given, that a refusal of the load driver's settings is about: the driver's
   * message begins with its setting's name ({@code endpoints}, {@code concurrency},
   * {@code maxTokens}, {@code temperature}).
   */
  static String flagOf(String driverMessage, Map<String, String> o) {
    if (driverMessage.startsWith("endpoint")) {
      return "--nodes '" + o.get("nodes") + "'";
    }
    if (driverMessage.startsWith("concurrency")) {
      return "--concurrency " + o.getOrDefault("concurrency", "8");
    }
    if (driverMessage.startsWith("maxTokens")) {
      return "--max-tokens " + o.get("max-tokens");
    }
    if (driverMessage.startsWith("temperature")) {
      return "--temperature " + o.get("temperature");
    }
    return "the load driver's settings";
  }

  /**
   * The token-route workload: the MMLU data set in {@code mmlu} (at most 200 questions per
   * subject), or the MMLU-shaped generator when no directory is given.
   *
   * @throws IllegalArgumentException if {@code mmlu} is given but cannot be loaded (missing, not
   *     an MMLU directory, or a bad file, named in the message): a given directory is used or
   *     is an error, never replaced by the generator
   * @throws UncheckedIOException if it cannot be read
   */
  static PromptSource tokenPrompts(String mmlu, long seed) {
    return mmlu == null ? SyntheticMmluPrompts.create(seed, 200)
        : MmluPrompts.load(Path.of(mmlu), 200);
  }

  /**
   * The chat-route workload: conversations built from the MMLU data set in {@code mmlu}, or 16
   * generated system prompts when no directory is given.
   *
   * @throws IllegalArgumentException if {@code mmlu} is given but cannot be loaded, as
   *     {@link #tokenPrompts}
   * @throws UncheckedIOException if it cannot be read
   */
  static ChatWorkload chats(String mmlu, long seed, int maxSystemChars, int maxUserChars) {
    return mmlu == null ? ChatWorkload.synthetic(seed, 16, 200)
        : ChatWorkload.mmlu(Path.of(mmlu), maxSystemChars, maxUserChars, 200);
  }

  /**
   * The request sequence: {@code n} prompts, subjects drawn uniformly or from a Zipf law with
   * exponent {@code zipf} (0 for uniform) over a seeded random ranking of subjects, questions
   * drawn uniformly within the subject.
   */
  static List<int[]> requestSequence(PromptSource prompts, int n, double zipf, long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    SubjectPopularity popularity = SubjectPopularity.of(prompts.subjectCount(), zipf, rnd.nextLong());
    List<int[]> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      out.add(prompts.prompt(popularity.sample(rnd.nextDouble()), rnd));
    }
    return out;
  }

  private static long delta(Map<?, ?> a, Map<?, ?> b, String key) {
    if (b == null) {
      return -1;
    }
    long v1 = ((Number) b.get(key)).longValue();
    long v0 = a == null ? 0 : ((Number) a.get(key)).longValue();
    return v1 - v0;
  }

  /**
   * A node's fallbacks in its {@code /v1/stats}, as {@code NodeStats.totalFallbacks} counts
   * them: every cause but {@code LOCAL_FAILED} (local runs that failed and were then tried on a
   * peer, which are no forwards that fell back).
   */
  static long fallbacks(Map<?, ?> s) {
    Object f = s.get("fallbacks");
    long n = 0;
    if (f instanceof Map<?, ?> m) {
      for (Map.Entry<?, ?> e : m.entrySet()) {
        if (!FallbackCause.LOCAL_FAILED.name().equals(e.getKey())) {
          n += ((Number) e.getValue()).longValue();
        }
      }
    }
    return n;
  }

  /** A 64-bit whole-number flag; a bad value stops the run ({@link #fail}). */
  private static long longArg(Map<String, String> o, String key, long dflt) {
    String s = o.get(key);
    if (s == null) {
      return dflt;
    }
    try {
      return Long.parseLong(s.trim());
    } catch (NumberFormatException e) {
      fail("--" + key + " needs a whole number, was '" + s + "'");
      return dflt; // not reached: fail exits
    }
  }

  /** An integer flag, at least {@code min}; a bad value stops the run ({@link #fail}). */
  private static int intArg(Map<String, String> o, String key, int dflt, int min) {
    String s = o.get(key);
    if (s == null) {
      return dflt;
    }
    int v = dflt;
    try {
      v = Integer.parseInt(s.trim());
    } catch (NumberFormatException e) {
      fail("--" + key + " needs an integer, was '" + s + "'");
    }
    if (v < min) {
      // --concurrency 0 sent nothing, --requests -1 failed once the workload was built
      fail("--" + key + " must be at least " + min + ", was " + v);
    }
    return v;
  }

  /**
   * A number flag, finite and 0 or more; a bad value stops the run ({@link #fail}) rather than
   * ending in a NumberFormatException's stack trace.
   */
  private static double numberArg(Map<String, String> o, String key, double dflt) {
    String s = o.get(key);
    if (s == null) {
      return dflt;
    }
    double v = dflt;
    try {
      v = Double.parseDouble(s.trim());
    } catch (NumberFormatException e) {
      fail("--" + key + " needs a number, was '" + s + "'");
    }
    if (!(v >= 0) || Double.isInfinite(v)) {
      fail("--" + key + " must be a finite number, 0 or more, was '" + s + "'");
    }
    return v;
  }

  private static void fail(String message) {
    System.err.println("error: " + message);
    System.err.println(USAGE);
    System.exit(2);
  }

  /** A one-line progress bar on stderr, redrawn at most ten times a second. */
  static final class ProgressBar {
    private final java.io.PrintStream out;
    private final int total;
    private final long start = System.nanoTime();
    private final AtomicLong lastDraw = new AtomicLong();
    /** Whether the bar was drawn full: by the last request's update, or else by finish. */
    private boolean drawnFull;

    ProgressBar(int total) {
      this(System.err, total);
    }

    ProgressBar(java.io.PrintStream out, int total) {
      this.out = out;
      this.total = total;
    }

    void update(int done) {
      long now = System.nanoTime();
      long last = lastDraw.get();
      if (done < total && now - last < 100_000_000L) {
        return;
      }
      if (!lastDraw.compareAndSet(last, now)) {
        return;
      }
      draw(done, now);
    }

    private synchronized void draw(int done, long now) {
      if (drawnFull) {
        // drawn at 100% once: again was a second full bar, kept so in a file stderr goes to
        return;
      }
      drawnFull = done >= total;
      int width = 40;
      int filled = total == 0 ? width : (int) ((long) done * width / total);
      double secs = (now - start) / 1e9;
      out.printf(Locale.ROOT, "\r[%s%s] %3d%% %d/%d %.1f req/s", "#".repeat(filled), ".".repeat(width - filled),
          total == 0 ? 100 : done * 100 / total, done, total, done / Math.max(secs, 1e-9));
    }

    void finish() {
      draw(total, System.nanoTime());
      out.println();
    }
  }
}
