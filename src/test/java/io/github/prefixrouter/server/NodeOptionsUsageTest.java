package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The usage line shows as required exactly the flags that are, and the table of flags in
 * docs/deployment.md lists every flag with the default the code has.
 */
class NodeOptionsUsageTest {

  private static final Map<String, String> ENV = Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX);
  /** A valid value for every flag the usage line may name. */
  private static final Map<String, String> VALUES = Map.of(
      "--id", "n1", "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0");

  @Test
  void theUsageLineShowsExactlyTheRequiredFlagsOutsideBrackets() {
    String line = NodeOptions.USAGE.lines().findFirst().orElseThrow();
    // flags outside [...] are shown as required
    String outside = line.replaceAll("\\[[^\\]]*\\]", "");
    List<String> shownRequired = new ArrayList<>();
    Matcher m = Pattern.compile("--[a-z-]+").matcher(outside);
    while (m.find()) {
      shownRequired.add(m.group());
    }
    assertEquals(List.of("--id", "--listen"), shownRequired, line);
    Map<String, String> all = new LinkedHashMap<>();
    for (String f : List.of("--id", "--listen", "--client")) {
      all.put(f, VALUES.get(f));
    }
    assertDoesNotThrow(() -> NodeOptions.parse(args(all, null), ENV));
    for (String f : all.keySet()) {
      if (shownRequired.contains(f)) {
        assertThrows(IllegalArgumentException.class, () -> NodeOptions.parse(args(all, f), ENV), f);
      } else {
        assertDoesNotThrow(() -> NodeOptions.parse(args(all, f), ENV), f + " is optional");
      }
    }
  }

  /**
   * The default cell of every row of docs/deployment.md's "NodeMain flags" table that states a
   * plain value (several flags in one row: their values, comma-separated) is the code's default,
   * read off a node's options parsed from the required flags alone, or off the builders the node
   * leaves at their defaults.
   */
  @Test
  void theDeploymentGuideStatesEveryFlagWithItsDefault() throws Exception {
    NodeOptions o = NodeOptions.parse(
        new String[] {"--id", "n1", "--listen", "127.0.0.1:0"}, ENV);
    RouterConfig c = o.config;
    Map<String, String> expected = new LinkedHashMap<>();
    expected.put("--client HOST:PORT", o.clientHost + ":" + o.clientPort);
    expected.put("--cluster-key-check-ms N", String.valueOf(o.clusterKeyCheck.toMillis()));
    expected.put("--tls-check-ms N", String.valueOf(o.tlsCheck.toMillis()));
    expected.put("--tls-bind-node-ids true|false", String.valueOf(o.tlsBindNodeIds));
    expected.put("--engine reference|URL", o.engine);
    expected.put("--engine-seed, --engine-threads, --engine-cache-tokens",
        o.engineSeed + ", " + o.engineThreads + ", " + o.engineCacheTokens);
    expected.put("--policy", c.policy().name().toLowerCase(java.util.Locale.ROOT).replace('_', '-'));
    expected.put("--block-size N", String.valueOf(c.blockSize()));
    expected.put("--gossip-interval-ms, --peer-suspect-ms, --peer-dead-ms",
        c.gossipInterval().toMillis() + ", " + c.peerSuspectAfter().toMillis() + ", "
            + c.peerDeadAfter().toMillis());
    expected.put("--gossip-message-bytes SIZE", (c.gossipMessageBytes() >> 10) + "k");
    expected.put("--hop-limit N", String.valueOf(c.hopLimit()));
    expected.put("--watermarks LOW,HIGH", c.lowWatermark() + "," + c.highWatermark());
    Object transport = HttpTransport.builder();
    expected.put("--peer-reader-threads N", String.valueOf(field(transport, "readerThreads")));
    expected.put("--peer-max-unfinished-reads N",
        String.valueOf(field(transport, "maxUnfinishedReadsPerAddress")));
    expected.put("--client-reader-threads N",
        String.valueOf(ClientEndpoint.DEFAULT_READER_THREADS));
    expected.put("--client-max-unfinished-reads N",
        String.valueOf(ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS));
    expected.put("--client-body-budget SIZE", (ClientEndpoint.DEFAULT_BODY_BUDGET >> 20) + "m");
    expected.put("--peer-body-budget SIZE", (HttpTransport.DEFAULT_BODY_BUDGET >> 20) + "m");
    expected.put("--engine-answer-budget SIZE",
        (OpenAiCompatibleEngine.DEFAULT_ANSWER_BUDGET >> 20) + "m");
    expected.put("--tokenizer-answer-budget SIZE",
        (EngineTokenizer.answerBudget(EngineTokenizer.DEFAULT_MAX_ANSWER_BYTES) >> 20) + "m");
    expected.put("--engine-request-timeout-ms N", String.valueOf(((java.time.Duration)
        field(OpenAiCompatibleEngine.builder(), "requestTimeout")).toMillis()));
    expected.put("--engine-stream-idle-ms N", String.valueOf(((java.time.Duration)
        field(OpenAiCompatibleEngine.builder(), "streamIdleTimeout")).toMillis()));
    expected.put("--initial-prefill-ns-per-token N",
        String.valueOf(c.initialPrefillNanosPerToken()));
    expected.put("--engine-timeout-ms N", String.valueOf(c.engineTimeout().toMillis()));
    expected.put("--engine-stall-ms N", String.valueOf(c.engineStallTimeout().toMillis()));
    expected.put("--engine-failures N", String.valueOf(c.engineFailureLimit()));
    expected.put("--peer-max-handling-ms N", String.valueOf(((java.time.Duration)
        field(transport, "maxHandlingTime")).toMillis()));
    expected.put("--stream-interval-ms N", String.valueOf(c.streamInterval().toMillis()));
    expected.put("--shutdown-grace-ms N", String.valueOf(o.shutdownGrace.toMillis()));
    Object events = io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber.builder();
    expected.put("--kv-events-replay-backoff-ms MIN,MAX",
        ((java.time.Duration) field(events, "minReplayBackoff")).toMillis() + ","
            + ((java.time.Duration) field(events, "maxReplayBackoff")).toMillis());
    expected.put("--kv-events-silence REQUESTS,MS", field(events, "silenceRequests") + ","
        + ((java.time.Duration) field(events, "silenceTime")).toMillis());

    Map<String, String> rows = flagRows();
    List<String> named = new ArrayList<>();
    for (String flags : rows.keySet()) {
      Matcher m = Pattern.compile("--[a-z-]+").matcher(flags);
      while (m.find()) {
        named.add(m.group().substring(2));
      }
    }
    List<String> keys = new ArrayList<>(NodeOptions.KEYS);
    keys.remove("help"); // NodeMain --help prints the list
    assertEquals(new java.util.TreeSet<>(keys), new java.util.TreeSet<>(named),
        "the flags of docs/deployment.md's table");
    expected.forEach((flags, value) -> {
      String cell = rows.get(flags);
      assertEquals(value, cell == null ? null : cell.replace("`", ""),
          "docs/deployment.md, the default of " + flags);
      // and --help says the same, flag by flag
      String[] names = flags.split(", ");
      String[] values = value.split(", ");
      for (int k = 0; k < names.length; k++) {
        String flag = names[k].split(" ")[0];
        String text = usageOf(flag).replaceAll("\\s+", " ");
        assertTrue(text.contains("default " + values[k]), "--help on " + flag + ": " + text);
      }
    });
  }

  /**
   * Every flag the table of docs/deployment.md gives a default (a cell other than empty,
   * "required" or "none...") states one in --help too: --engine, --advertise and --insecure did
   * not. And the defaults --help states in words are the code's: the slots and the in-flight cap
   * of an OpenAI-compatible engine, the tree's capacity and the mirror limit.
   */
  @Test
  void theHelpStatesTheDefaultOfEveryFlagThatHasOne() throws Exception {
    List<String> without = new ArrayList<>();
    flagRows().forEach((flags, dflt) -> {
      String[] names = flags.split(", ");
      String[] values = dflt.split(", ");
      for (int k = 0; k < names.length; k++) {
        String value = (values.length == names.length ? values[k] : dflt).replace("`", "");
        String flag = names[k].split(" ")[0];
        boolean hasDefault = !value.isBlank() && !value.equals("required")
            && !value.startsWith("none");
        if (hasDefault && !usageOf(flag).contains("default")) {
          without.add(flag + " (docs/deployment.md: " + value + ")");
        }
      }
    });
    assertEquals(List.of(), without, "flags whose --help states no default");

    var engine = NodeOptions.parse(new String[] {"--id", "n1", "--listen", "127.0.0.1:0",
        "--engine", "http://127.0.0.1:8000"}, ENV);
    OpenAiCompatibleEngine built = engine.openAiBuilder().build();
    try {
      assertTrue(text("--engine-slots").contains("default " + built.slots() + ","),
          text("--engine-slots"));
      assertTrue(text("--engine-max-in-flight").contains("(" + built.maxInFlight()
          + " when neither is given)"), text("--engine-max-in-flight"));
    } finally {
      built.close();
    }
    RouterConfig c = engine.config;
    assertTrue(text("--tree-capacity-tokens").contains("else " + c.treeCapacityTokens()),
        text("--tree-capacity-tokens"));
    assertTrue(text("--mirror-limit-tokens").contains("default 0: 4 x that, at least "
        + RouterConfig.MIN_AUTOMATIC_MIRROR_LIMIT_TOKENS), text("--mirror-limit-tokens"));
    assertTrue(text("--tokenizer").contains("default auto") && engine.tokenizes
        && engine.tokenizerUri == null, text("--tokenizer"));
  }

  /** {@link #usageOf} with its white space runs as one space. */
  private static String text(String flag) {
    return usageOf(flag).replaceAll("\\s+", " ");
  }

  /** The text of NodeOptions.USAGE on one flag: from its line to the next flag's. */
  private static String usageOf(String flag) {
    Matcher m = Pattern.compile("\n  " + Pattern.quote(flag) + "\\s[\\s\\S]*?(?=\n  --|$)")
        .matcher(NodeOptions.USAGE);
    assertTrue(m.find(), "--help has no line on " + flag);
    return m.group();
  }

  /** The rows of docs/deployment.md's table of NodeMain flags: the flag cell to the default cell. */
  private static Map<String, String> flagRows() throws java.io.IOException {
    List<String> lines = Files.readAllLines(Path.of("docs", "deployment.md"));
    int i = lines.indexOf("### NodeMain flags");
    assertTrue(i >= 0, "docs/deployment.md has no NodeMain flags section");
    while (!lines.get(i).startsWith("| flag |")) {
      i++;
    }
    Map<String, String> rows = new LinkedHashMap<>();
    for (i += 2; i < lines.size() && lines.get(i).startsWith("|"); i++) {
      String[] cells = lines.get(i).replace("\\|", "|").split(" \\| ");
      // an empty default cell, "| |", is no separator of its own: the next cell follows it
      String dflt = cells[1].trim();
      rows.put(cells[0].substring(1).trim().replace("`", ""), dflt.startsWith("|") ? "" : dflt);
    }
    return rows;
  }

  /**
   * A chat sent without {@code max_tokens} may generate up to the rest of the model's context,
   * minutes at a GPU server's speed: the server's answer must be waited for that long, and the
   * three timeouts a forwarded generation meets must give up in order: the serving node's adapter
   * first (a FAILED answer, not run again elsewhere, as a generation too long for one server is
   * too long for any), then its transport (504, which the sender takes for a lost forward and
   * runs the request again), and the sender's own limit on a run last.
   */
  @Test
  void timeoutDefaultsLetLongGenerationsFinishAndGiveUpInOrder() throws Exception {
    java.time.Duration request =
        (java.time.Duration) field(OpenAiCompatibleEngine.builder(), "requestTimeout");
    java.time.Duration handling =
        (java.time.Duration) field(HttpTransport.builder(), "maxHandlingTime");
    java.time.Duration run = RouterConfig.defaults().engineTimeout();
    assertTrue(request.compareTo(java.time.Duration.ofMinutes(4)) >= 0,
        "the adapter's default requestTimeout, " + request + ", cuts off a default chat's "
            + "generation after " + request.toSeconds() + " s (want at least 4 min)");
    assertTrue(request.compareTo(handling) < 0 && handling.compareTo(run) <= 0,
        "defaults out of order: requestTimeout " + request + ", the transport's maxHandlingTime "
            + handling + ", engineTimeout " + run);
  }

  /** A builder's field as it is when built without setting it: its default. */
  private static Object field(Object builder, String name) throws ReflectiveOperationException {
    java.lang.reflect.Field f = builder.getClass().getDeclaredField(name);
    f.setAccessible(true);
    return f.get(builder);
  }

  private static String[] args(Map<String, String> flags, String without) {
    List<String> a = new ArrayList<>();
    flags.forEach((k, v) -> {
      if (!k.equals(without)) {
        a.add(k);
        a.add(v);
      }
    });
    return a.toArray(new String[0]);
  }
}
