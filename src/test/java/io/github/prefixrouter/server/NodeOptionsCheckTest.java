package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.spi.PeerAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Bad settings are refused by {@link NodeOptions#parse}, the entry point of {@link NodeMain#main},
 * with an {@link IllegalArgumentException} naming the flag (or config file key) the operator
 * wrote.
 */
class NodeOptionsCheckTest {

  @TempDir Path dir;

  private static NodeOptions parse(String... args) {
    return NodeOptions.parse(args, Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
  }

  /** {@code --id a --listen h:1} and then {@code more}. */
  private static NodeOptions node(String... more) {
    List<String> a = new ArrayList<>(List.of("--id", "a", "--listen", "h:1"));
    a.addAll(List.of(more));
    return parse(a.toArray(new String[0]));
  }

  private static String refused(org.junit.jupiter.api.function.Executable e, String... fragments) {
    IllegalArgumentException x = assertThrows(IllegalArgumentException.class, e);
    for (String f : fragments) {
      assertTrue(x.getMessage().contains(f), "'" + x.getMessage() + "' should mention '" + f + "'");
    }
    return x.getMessage();
  }

  @Test
  void aBadRouterConfigNamesTheFlagsNotTheConfigsFields() {
    String m = refused(() -> node("--watermarks", "40,32"),
        "--watermarks LOW (40) must be below --watermarks HIGH (32)");
    assertFalse(m.contains("Watermark"), m);
    refused(() -> node("--watermarks", "0,0"), "--watermarks HIGH must be >= 1");
    m = refused(() -> node("--tree-capacity-tokens", "8"),
        "--tree-capacity-tokens must be at least --block-size (16)");
    assertFalse(m.contains("treeCapacityTokens") || m.contains("blockSize"), m);
    refused(() -> node("--block-size", "0"), "--block-size must be between 1 and 1024");
    refused(() -> node("--hop-limit", "9"), "--hop-limit must be between 0");
    refused(() -> node("--tree-capacity-tokens", "4096", "--mirror-limit-tokens", "4095"),
        "--mirror-limit-tokens must be 0");
    refused(() -> node("--initial-prefill-ns-per-token", "0"),
        "--initial-prefill-ns-per-token must be between 1 ns and 1 s, was 0");
    // durations as the flags take them: milliseconds
    refused(() -> node("--gossip-interval-ms", "200", "--peer-suspect-ms", "300"),
        "--peer-suspect-ms (300 ms) must be at least twice --gossip-interval-ms (200 ms)");
    refused(() -> node("--peer-suspect-ms", "3000", "--peer-dead-ms", "2500"),
        "--peer-dead-ms (2500 ms) must exceed --peer-suspect-ms (3000 ms)");
    refused(() -> node("--stream-interval-ms", "60000"),
        "--stream-interval-ms must be at most 10000 ms", "was 60000 ms");
    refused(() -> node("--gossip-interval-ms", "-5"), "--gossip-interval-ms must be positive");
    // the library keeps its own names
    refused(() -> RouterConfig.builder().watermarks(40, 32).build(), "lowWatermark (40)");
  }

  @Test
  void theStreamIdleBoundIsTakenInMillisecondsForAnEngineUrlOnly() {
    String url = "http://127.0.0.1:8000";
    assertEquals(java.time.Duration.ofSeconds(5),
        node("--engine", url, "--engine-stream-idle-ms", "5000").engineStreamIdle);
    assertEquals(null, node("--engine", url).engineStreamIdle);
    refused(() -> node("--engine", url, "--engine-stream-idle-ms", "0"),
        "--engine-stream-idle-ms must be 1 to 365 days in milliseconds, was 0");
    refused(() -> node("--engine-stream-idle-ms", "5000"),
        "--engine-stream-idle-ms needs --engine URL");
  }

  /** The flag reaches the adapter the node builds, as --engine-request-timeout-ms does. */
  @Test
  void theStreamIdleBoundIsGivenToTheAdapter() throws Exception {
    String url = "http://127.0.0.1:8000";
    var b = node("--engine", url, "--engine-stream-idle-ms", "5000").openAiBuilder();
    java.lang.reflect.Field f = b.getClass().getDeclaredField("streamIdleTimeout");
    f.setAccessible(true);
    assertEquals(java.time.Duration.ofSeconds(5), f.get(b));
    var d = node("--engine", url).openAiBuilder();
    assertEquals(io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine
        .DEFAULT_STREAM_IDLE_TIMEOUT, f.get(d));
  }

  /**
   * The server's request timeout must end a request before the node's own limits do: at or
   * above {@code --engine-timeout-ms} the node's engine timeout cuts it first, and at or above
   * {@code --peer-max-handling-ms} a peer's forward is answered 504 by the transport first, so
   * the timeout set never takes effect. Such a pair is a bad flag naming both flags, the flags
   * not given counting at their defaults (240000, 600000 and 300000 ms). It was accepted.
   */
  @Test
  void anEngineRequestTimeoutNotBelowTheNodesOwnLimitsIsABadFlag() {
    String url = "http://127.0.0.1:8000";
    String m = refused(() -> node("--engine", url, "--engine-request-timeout-ms", "900000"),
        "--engine-request-timeout-ms (900000 ms) must be below --engine-timeout-ms"
            + " (600000 ms, the default)",
        "--engine-request-timeout-ms (900000 ms) must be below --peer-max-handling-ms"
            + " (300000 ms, the default)");
    assertFalse(m.contains("requestTimeout") || m.contains("maxHandlingTime"), m);
    // equal is not below: the two timers race
    refused(() -> node("--engine", url, "--engine-request-timeout-ms", "300000"),
        "--engine-request-timeout-ms (300000 ms) must be below --peer-max-handling-ms"
            + " (300000 ms, the default)");
    // the request timeout's default counts too
    m = refused(() -> node("--engine", url, "--peer-max-handling-ms", "240000"),
        "--engine-request-timeout-ms (240000 ms, the default) must be below"
            + " --peer-max-handling-ms (240000 ms)");
    assertFalse(m.contains("--engine-timeout-ms"), m);
    refused(() -> node("--engine", url, "--engine-timeout-ms", "120000"),
        "--engine-request-timeout-ms (240000 ms, the default) must be below"
            + " --engine-timeout-ms (120000 ms)");
    refused(() -> node("--engine", url, "--engine-request-timeout-ms", "400000",
        "--peer-max-handling-ms", "500000", "--engine-timeout-ms", "400000"),
        "--engine-request-timeout-ms (400000 ms) must be below --engine-timeout-ms (400000 ms)");
    // in order, defaults included: accepted as before
    assertEquals(null, node("--engine", url).engineRequestTimeout);
    assertEquals(java.time.Duration.ofMillis(299_999), node("--engine", url,
        "--engine-request-timeout-ms", "299999").engineRequestTimeout);
    NodeOptions o = node("--engine", url, "--engine-request-timeout-ms", "900000",
        "--peer-max-handling-ms", "1200000", "--engine-timeout-ms", "1500000");
    assertEquals(java.time.Duration.ofMinutes(15), o.engineRequestTimeout);
    assertEquals(java.time.Duration.ofMillis(240_001), node("--engine", url,
        "--peer-max-handling-ms", "240001").peerMaxHandling);
    // the reference engine has no request timeout: the node's limits may be set as low as wanted
    assertEquals(java.time.Duration.ofSeconds(1), node("--engine-timeout-ms", "1000",
        "--peer-max-handling-ms", "1000").peerMaxHandling);
  }

  @Test
  void aModelIdRouterConfigWouldRefuseIsABadFlag() {
    String tooLong = "m".repeat(257);
    refused(() -> node("--model-id", tooLong), "--model-id must be at most 256 UTF-8 bytes");
    refused(() -> node("--model", tooLong),
        "--model (the model id when --model-id is not given) must be at most 256");
    assertEquals("short", node("--model", tooLong, "--model-id", "short").modelId);
    refused(() -> node("--model-id", "a\u0001b"), "--model-id must be text without control");
  }

  @Test
  void aKeyGivenTwiceInTheConfigFileIsRefusedNamingBothLines() throws Exception {
    Path cfg = dir.resolve("node.properties");
    Files.writeString(cfg, "# node a\nid=a\nlisten=h:1\npolicy=local-only\n\npolicy = cost-aware\n");
    refused(() -> parse("--config", cfg.toString()), "key policy is given twice in --config "
        + cfg + ": on line 4 and on line 6");
    // a value continued on the next line is one entry, and the line numbers count the file's
    Files.writeString(cfg, "id=a\nseeds=b@h:2,\\\n  c@h:3\nlisten=h:1\nseeds:d@h:4\n");
    refused(() -> parse("--config", cfg.toString()),
        "key seeds is given twice in --config " + cfg + ": on line 2 and on line 5");
    // once each (a comment ending in a backslash continues nothing): read as before
    Files.writeString(cfg, "id=a\n# see \\\nseeds=b@h:2,\\\n  c@h:3\nlisten=h:1\n");
    assertEquals(List.of(new PeerAddress("b", "h:2"), new PeerAddress("c", "h:3")),
        parse("--config", cfg.toString()).seeds);
    // a flag still wins over the file's key
    assertEquals("h:9", parse("--config", cfg.toString(), "--seeds", "x@h:9").seeds.get(0)
        .address());
    refused(() -> parse("--config", Files.writeString(dir.resolve("bad.properties"),
        "id=a\nlisten=h:1\nbogus=1\n").toString()), "unknown key", "bogus", "line 3");
    Path latin1 = dir.resolve("latin1.properties");
    Files.write(latin1, "id=caf\u00e9\nlisten=h:1\n".getBytes(StandardCharsets.ISO_8859_1));
    refused(() -> parse("--config", latin1.toString()), "--config " + latin1, "not UTF-8");
  }

  /**
   * A flag given twice on the command line is refused, naming both values, as a key given twice
   * in the config file is: the last was taken silently, so {@code --seeds b@h:2 --seeds c@h:3}
   * joined through c alone, and a script's second {@code --cluster-key-file} replaced its first.
   */
  @Test
  void aFlagGivenTwiceOnTheCommandLineIsRefusedNamingBothValues() throws Exception {
    refused(() -> node("--seeds", "b@h:2", "--seeds", "c@h:3"),
        "--seeds is given twice: 'b@h:2' and 'c@h:3'");
    refused(() -> node("--policy", "local-only", "--policy=cost-aware"),
        "--policy is given twice: 'local-only' and 'cost-aware'");
    refused(() -> parse("--id", "a", "--listen", "h:1", "--id", "b"), "--id is given twice");
    refused(() -> node("--insecure", "--insecure=false"), "--insecure is given twice");
    // a flag without a value is named as typed: 'true' and 'true' was no value given
    String m = refused(() -> node("--insecure", "--insecure"),
        "--insecure is given twice: --insecure and --insecure (keep one)");
    assertFalse(m.contains("'true'"), m);
    refused(() -> node("--insecure", "--insecure=false"),
        "--insecure is given twice: --insecure and --insecure=false (keep one)");
    // a flag and the same key in the config file are no repeat: the flag wins
    Path cfg = Files.writeString(dir.resolve("node.properties"), "id=a\nlisten=h:1\nseeds=b@h:2\n");
    assertEquals(List.of(new PeerAddress("c", "h:3")),
        parse("--config", cfg.toString(), "--seeds", "c@h:3").seeds);
  }

  /**
   * A flag whose value is missing, followed by another flag (a script's {@code --model $MODEL
   * --insecure} with the variable unset), is refused naming both: the next flag was taken for
   * its value, so {@code --model} was silently {@code --insecure} and the node ran without it,
   * or the flag's own value was then refused as an "unexpected argument".
   */
  @Test
  void aFlagFollowedByAnotherFlagInsteadOfItsValueIsRefused() {
    refused(() -> node("--model", "--insecure"),
        "--model needs a value, but is followed by the flag --insecure");
    refused(() -> parse("--id", "a", "--seeds", "--listen", "h:1"),
        "--seeds needs a value, but is followed by the flag --listen");
    refused(() -> node("--policy", "--client=h:2"),
        "--policy needs a value, but is followed by the flag --client=h:2");
    // a value that only looks like a flag is still a value
    assertEquals("--x", node("--model", "--x").model);
  }

  /**
   * A {@code --config} file is read up to {@link NodeOptions#MAX_CONFIG_FILE_BYTES}: another file
   * named by mistake (a log, a model's weights, {@code /dev/zero}) was read whole into memory,
   * lines and all, before its first key was looked at, and one without line breaks ran the
   * process out of memory, a stack trace rather than a bad flag.
   */
  @Test
  void aConfigFileLargerThanItsCapIsRefusedWithoutReadingIt() throws Exception {
    StringBuilder big = new StringBuilder("id=a\nlisten=h:1\n");
    while (big.length() <= NodeOptions.MAX_CONFIG_FILE_BYTES) {
      big.append("# a comment line that makes the file larger than a config file\n");
    }
    Path cfg = Files.writeString(dir.resolve("big.properties"), big);
    refused(() -> parse("--config", cfg.toString()), "--config " + cfg + " is larger than "
        + NodeOptions.MAX_CONFIG_FILE_BYTES + " bytes: not a config file");
    // up to the cap it is read as before, a byte order mark and line breaks of any kind
    Path ok = Files.writeString(dir.resolve("ok.properties"), "\uFEFFid=a\r\nlisten=h:1\r"
        + "policy=local-only");
    NodeOptions o = parse("--config", ok.toString());
    assertEquals(List.of("a", "h", io.github.prefixrouter.RoutingPolicy.LOCAL_ONLY),
        List.of(o.id, o.listenHost, o.config.policy()));
    refused(() -> parse("--config", dir.resolve("missing.properties").toString()),
        "cannot read --config " + dir.resolve("missing.properties") + ": no such file");
    Path zero = Path.of("/dev/zero");
    if (Files.isReadable(zero)) {
      refused(() -> parse("--config", zero.toString()), "is larger than");
    }
  }

  /**
   * A config file naming another with {@code config=} is refused: no file is read from a file,
   * and the key was taken and its file never read, the settings in it silently missing.
   */
  @Test
  void aConfigFileNamingAnotherConfigFileIsRefused() throws Exception {
    Path other = Files.writeString(dir.resolve("other.properties"), "policy=local-only\n");
    Path cfg = Files.writeString(dir.resolve("node.properties"),
        "id=a\nlisten=h:1\nconfig=" + other + "\n");
    refused(() -> parse("--config", cfg.toString()), "key config in --config " + cfg
        + " (line 3)", "cannot name another");
    // its keys in the file itself are read as before
    Files.writeString(cfg, "id=a\nlisten=h:1\npolicy=local-only\n");
    assertEquals(io.github.prefixrouter.RoutingPolicy.LOCAL_ONLY,
        parse("--config", cfg.toString()).config.policy());
  }

  /**
   * {@code --insecure} while the environment holds a cluster key: the key was silently ignored,
   * and the node ran without authentication where its operator may have meant it to have some
   * (as with {@code --cluster-key-file}, the two are refused together).
   */
  @Test
  void insecureWithAClusterKeyInTheEnvironmentIsRefused() {
    refused(() -> node("--insecure"), "--insecure and env PREFIX_ROUTER_CLUSTER_KEY are exclusive");
    Path cfg = dir.resolve("insecure.properties");
    refused(() -> parse("--config", Files.writeString(cfg, "id=a\nlisten=h:1\ninsecure=true\n")
        .toString()), "--insecure and env PREFIX_ROUTER_CLUSTER_KEY are exclusive");
    assertNull(NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1", "--insecure"},
        Map.of()).clusterKeys, "without a key in the environment it runs unauthenticated");
    assertEquals(1, node("--insecure=false").clusterKeys.size());
  }

  /**
   * A secret given both as a file and in the environment: the file was taken and the variable
   * silently ignored, so a node could run with another cluster key (or TLS password) than the
   * one its operator set in the environment. Both at once are refused, naming both.
   */
  @Test
  void aSecretGivenAsAFileAndInTheEnvironmentIsRefusedNamingBoth() throws Exception {
    Path key = Files.writeString(dir.resolve("cluster.key"), NodeMainTest.KEY_HEX + "\n");
    refused(() -> node("--cluster-key-file", key.toString()),
        "--cluster-key-file and env PREFIX_ROUTER_CLUSTER_KEY are exclusive");
    assertEquals(1, NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--cluster-key-file", key.toString()}, Map.of()).clusterKeys.size());
    Path pw = Files.writeString(dir.resolve("tls.password"), "from file\n");
    Map<String, String> env = Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX,
        "PREFIX_ROUTER_TLS_PASSWORD", "from env", "PREFIX_ROUTER_CLIENT_TLS_PASSWORD", "env");
    refused(() -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--tls-keystore", "node.p12", "--tls-password-file", pw.toString()}, env),
        "--tls-password-file and env PREFIX_ROUTER_TLS_PASSWORD are exclusive");
    refused(() -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--client-tls-keystore", "client.p12", "--client-tls-password-file", pw.toString()},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX,
            "PREFIX_ROUTER_CLIENT_TLS_PASSWORD", "env")),
        "--client-tls-password-file and env PREFIX_ROUTER_CLIENT_TLS_PASSWORD are exclusive");
    // each port's variable is its own: the peer port's file next to the client port's variable
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--tls-keystore", "node.p12", "--tls-password-file", pw.toString(),
        "--client-tls-keystore", "client.p12"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX,
            "PREFIX_ROUTER_CLIENT_TLS_PASSWORD", "env"));
    assertEquals("from file", new String(o.tlsPassword));
    assertEquals("env", new String(o.clientTlsPassword));
  }

  /**
   * {@code PREFIX_ROUTER_CLUSTER_KEY} set but empty (or blank), as {@code KEY=} or a compose file
   * substituting an unset variable leaves it: it counted as given, so the key file or
   * {@code --insecure} next to it was refused as a second way of giving the keys, and alone it
   * was refused as keys not in hex. It holds no key and counts as unset.
   */
  @Test
  void anEmptyClusterKeyVariableCountsAsUnset() throws Exception {
    Path key = Files.writeString(dir.resolve("cluster.key"), NodeMainTest.KEY_HEX + "\n");
    String[] id = {"--id", "a", "--listen", "h:1"};
    for (String empty : List.of("", "  ")) {
      Map<String, String> env = Map.of("PREFIX_ROUTER_CLUSTER_KEY", empty);
      NodeOptions o = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
          "--cluster-key-file", key.toString()}, env);
      assertEquals(1, o.clusterKeys.size());
      assertEquals(NodeMainTest.KEY_HEX, java.util.HexFormat.of().formatHex(o.clusterKeys.get(0)));
      assertNull(NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1", "--insecure"},
          env).clusterKeys);
      refused(() -> NodeOptions.parse(id, env), "a cluster key is required");
    }
  }

  /**
   * An empty secret is never taken for one. A TLS password variable set but empty (or blank)
   * counts as unset, as the cluster key's does: it was taken for an empty password, refused as
   * a second way of giving it next to the password file, and refused without the keystore. An
   * empty password file (or one of white space only) is refused naming the flag and the file,
   * as an empty cluster key file is: its empty password was handed to the keystore, which
   * failed the start as a wrong password.
   */
  @Test
  void anEmptyTlsPasswordIsNeverTakenForOne() throws Exception {
    Path pw = Files.writeString(dir.resolve("tls.password"), "secret\n");
    for (String empty : List.of("", "  ")) {
      Map<String, String> env = Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX,
          "PREFIX_ROUTER_TLS_PASSWORD", empty, "PREFIX_ROUTER_CLIENT_TLS_PASSWORD", empty);
      NodeOptions o = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
          "--tls-keystore", "node.p12", "--tls-password-file", pw.toString(),
          "--client-tls-keystore", "client.p12", "--client-tls-password-file", pw.toString()},
          env);
      assertEquals("secret", new String(o.tlsPassword));
      assertEquals("secret", new String(o.clientTlsPassword));
      assertNull(NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1"}, env)
          .tlsPassword);
      refused(() -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
          "--tls-keystore", "node.p12"}, env), "--tls-keystore needs a password",
          "env PREFIX_ROUTER_TLS_PASSWORD is empty");
      refused(() -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
          "--client-tls-keystore", "client.p12"}, env), "--client-tls-keystore needs a password",
          "env PREFIX_ROUTER_CLIENT_TLS_PASSWORD is empty");
    }
    for (String text : List.of("", "\n", " \r\n", "\uFEFF\n")) {
      Path blank = Files.writeString(dir.resolve("blank.password"), text);
      refused(() -> node("--tls-keystore", "node.p12", "--tls-password-file", blank.toString()),
          "--tls-password-file " + blank + " holds no password");
      refused(() -> node("--client-tls-keystore", "c.p12", "--client-tls-password-file",
          blank.toString()), "--client-tls-password-file " + blank + " holds no password");
    }
  }

  /**
   * A companion of {@code --kv-events} given without it is named alone: the message named both
   * {@code --kv-events-replay} and {@code --kv-events-topic} whichever was given, sending an
   * operator who gave only the topic to look for a replay flag that was not there.
   */
  @Test
  void aKvEventsCompanionWithoutKvEventsIsNamedAlone() {
    String[] engine = {"--engine", "http://127.0.0.1:8000"};
    assertEquals("--kv-events-topic needs --kv-events", refused(() -> node(engine[0], engine[1],
        "--kv-events-topic", "kv")));
    assertEquals("--kv-events-replay needs --kv-events", refused(() -> node(engine[0],
        engine[1], "--kv-events-replay", "tcp://127.0.0.1:5558")));
    assertEquals("--kv-events-replay and --kv-events-topic need --kv-events", refused(() ->
        node(engine[0], engine[1], "--kv-events-replay", "tcp://127.0.0.1:5558",
            "--kv-events-topic", "kv")));
  }

  /** A private field of {@code o}, for a builder's setting. */
  private static Object field(Object o, String name) throws ReflectiveOperationException {
    java.lang.reflect.Field f = o.getClass().getDeclaredField(name);
    f.setAccessible(true);
    return f.get(o);
  }

  /**
   * {@code --kv-events-replay-backoff-ms MIN,MAX} sets the subscriber's backoff after a failed
   * replay (it had no flag, so a node could not shorten or lengthen it as the other subscriber
   * settings are set), checked as the subscriber checks it, naming the flag.
   */
  @Test
  void theReplayBackoffIsSetByItsFlag() throws Exception {
    String[] kv = {"--engine", "http://127.0.0.1:8000", "--kv-events", "tcp://127.0.0.1:5557",
        "--kv-events-replay", "tcp://127.0.0.1:5558"};
    List<String> a = new ArrayList<>(List.of(kv));
    a.addAll(List.of("--kv-events-replay-backoff-ms", "250, 30000"));
    NodeOptions o = node(a.toArray(new String[0]));
    var b = o.kvEventsBuilder();
    assertEquals(java.time.Duration.ofMillis(250), field(b, "minReplayBackoff"));
    assertEquals(java.time.Duration.ofMillis(30_000), field(b, "maxReplayBackoff"));
    // without the flag, the subscriber's defaults
    var d = node(kv).kvEventsBuilder();
    var dflt = io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber.builder();
    assertEquals(field(dflt, "minReplayBackoff"), field(d, "minReplayBackoff"));
    assertEquals(field(dflt, "maxReplayBackoff"), field(d, "maxReplayBackoff"));
    String flag = "--kv-events-replay-backoff-ms";
    refused(() -> node("--engine", "http://127.0.0.1:8000", "--kv-events",
        "tcp://127.0.0.1:5557", flag, "1000,60000"), flag + " needs --kv-events-replay");
    for (String bad : List.of("1000", "1000,", "x,60000", "0,60000", "2000,1000", "-1,5",
        "1000," + (java.time.Duration.ofDays(365).toMillis() + 1), "1,99999999999999999999")) {
      List<String> args = new ArrayList<>(List.of(kv));
      args.addAll(List.of(flag, bad));
      refused(() -> node(args.toArray(new String[0])), flag);
    }
  }

  /**
   * {@code --kv-events-silence REQUESTS,MS} sets the subscriber's silence check (it had no flag:
   * a node always dropped a connection silent over 32 block-storing requests and 60 s, and an
   * operator could neither tune nor turn it off); {@code 0}, alone or with a time, turns it
   * off; bad values are refused naming the flag, the form and the ranges.
   */
  @Test
  void theSilenceCheckIsSetByItsFlag() throws Exception {
    String[] kv = {"--engine", "http://127.0.0.1:8000", "--kv-events", "tcp://127.0.0.1:5557"};
    String flag = "--kv-events-silence";
    List<String> a = new ArrayList<>(List.of(kv));
    a.addAll(List.of(flag, "64, 120000"));
    var b = node(a.toArray(new String[0])).kvEventsBuilder();
    assertEquals(64, field(b, "silenceRequests"));
    assertEquals(java.time.Duration.ofMinutes(2), field(b, "silenceTime"));
    a.set(a.size() - 1, "1,0"); // the least: every block-storing request after the last message
    b = node(a.toArray(new String[0])).kvEventsBuilder();
    assertEquals(1, field(b, "silenceRequests"));
    assertEquals(java.time.Duration.ZERO, field(b, "silenceTime"));
    for (String off : List.of("0", "0,60000", " 0 ")) {
      a.set(a.size() - 1, off);
      assertEquals(0, field(node(a.toArray(new String[0])).kvEventsBuilder(), "silenceRequests"),
          off);
    }
    // without the flag, the subscriber's defaults (32 and 60 s)
    var d = node(kv).kvEventsBuilder();
    assertEquals(32, field(d, "silenceRequests"));
    assertEquals(java.time.Duration.ofSeconds(60), field(d, "silenceTime"));
    // it needs the connection it watches, and is named alone or with the others given
    assertEquals(flag + " needs --kv-events", refused(() -> node("--engine",
        "http://127.0.0.1:8000", flag, "32,60000")));
    assertEquals("--kv-events-topic and " + flag + " need --kv-events", refused(() -> node(
        "--engine", "http://127.0.0.1:8000", "--kv-events-topic", "kv", flag, "0")));
    assertEquals("--kv-events-replay, --kv-events-topic and " + flag + " need --kv-events",
        refused(() -> node("--engine", "http://127.0.0.1:8000", "--kv-events-replay",
            "tcp://127.0.0.1:5558", "--kv-events-topic", "kv", flag, "0")));
    String range = flag + " must be REQUESTS,MS with REQUESTS 0 (off) to 2147483647 and MS 0 to "
        + "31536000000 (365 days), was ";
    Map<String, String> bad = new java.util.LinkedHashMap<>();
    bad.put("32", flag + " must be REQUESTS,MS, or 0 to turn it off, was 32");
    bad.put("32,", flag + " needs an integer, was ''");
    bad.put("32,60000,1", flag + " must be REQUESTS,MS, or 0 to turn it off, was 32,60000,1");
    bad.put("x,60000", flag + " needs an integer, was 'x'");
    bad.put("0,x", flag + " needs an integer, was 'x'");
    bad.put("-1,60000", range + "-1,60000");
    bad.put("32,-1", range + "32,-1");
    bad.put("0,-1", range + "0,-1");
    bad.put("2147483648,60000", range + "2147483648,60000");
    bad.put("32,31536000001", range + "32,31536000001");
    bad.put("32,99999999999999999999", flag + " is out of range, was '99999999999999999999': "
        + "above any value it takes");
    bad.forEach((value, message) -> {
      List<String> args = new ArrayList<>(List.of(kv));
      args.addAll(List.of(flag, value));
      assertEquals(message, refused(() -> node(args.toArray(new String[0]))), value);
    });
    // the longest time the subscriber takes is accepted
    a.set(a.size() - 1, "1,31536000000");
    assertEquals(java.time.Duration.ofDays(365),
        field(node(a.toArray(new String[0])).kvEventsBuilder(), "silenceTime"));
  }

  /** The silence check's key in a {@code --config} file, as every flag's. */
  @Test
  void theSilenceCheckIsAKeyOfTheConfigFile() throws Exception {
    Path cfg = dir.resolve("kv.properties");
    java.nio.file.Files.writeString(cfg, "engine=http://127.0.0.1:8000\n"
        + "kv-events=tcp://127.0.0.1:5557\nkv-events-silence=0\n");
    assertEquals(0, field(node("--config", cfg.toString()).kvEventsBuilder(), "silenceRequests"));
  }

  /** {@code --engine} with an IPv6 address without brackets says to bracket it, as HOST:PORT flags do. */
  @Test
  void anEngineUrlWithAnIpv6AddressWithoutBracketsSaysToBracketIt() {
    refused(() -> node("--engine", "http://::1:8000"),
        "--engine has an IPv6 address without brackets", "http://[::1]:8000");
    assertEquals("http://[::1]:8000", node("--engine", "http://[::1]:8000").engine);
  }

  /**
   * An {@code --engine} URL with user information is refused, without the password, saying how
   * the node takes the server's key: the flag and the variable, not the adapter's setter
   * ({@code apiKey}), which no operator can set.
   */
  @Test
  void anEngineUrlWithUserInformationNamesTheKeysFlag() {
    for (String url : List.of("http://user:s3cret@127.0.0.1:8000", "https://s3cret@h/v1",
        "http://u:s3cret @h:8000")) {
      String m = refused(() -> node("--engine", url),
          "--engine must not carry user information (user:password@)",
          "--engine-api-key-file FILE or env PREFIX_ROUTER_ENGINE_API_KEY");
      assertFalse(m.contains("s3cret"), m);
      assertFalse(m.contains("apiKey"), m);
    }
  }

  /**
   * A {@code --tokenizer} URL with user information ({@code user:password@}) is refused as the
   * {@code --engine} URL is, without echoing the password: the HTTP client sends nothing of it,
   * so every prompt went to the server without credentials, and the password stood in every
   * message and banner naming the tokenizer.
   */
  @Test
  void aTokenizerUrlWithUserInformationIsRefusedWithoutEchoingIt() {
    for (String url : List.of("http://user:s3cret@127.0.0.1:8000/tokenize",
        "https://s3cret@h/tokenize", "http://user:s3cret@h:8000", "http://u:s3cret @h/tokenize")) {
      String m = refused(() -> node("--tokenizer", url),
          "--tokenizer must not carry user information (user:password@)",
          "--engine-api-key-file");
      assertFalse(m.contains("s3cret"), m);
    }
    assertEquals("http://h:8000/tokenize",
        node("--tokenizer", "http://h:8000/tokenize").tokenizerUri.toString());
  }

  /**
   * A TLS password in the environment without its port's keystore: the variable was silently
   * ignored, and the port spoke plain HTTP where its operator set a password for TLS (as with
   * the password file without the keystore, and a cluster key in the environment with
   * {@code --insecure}, it is refused, naming the variable and the flag it needs).
   */
  @Test
  void aTlsPasswordInTheEnvironmentWithoutItsKeystoreIsRefused() {
    String key = NodeMainTest.KEY_HEX;
    refused(() -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", key, "PREFIX_ROUTER_TLS_PASSWORD", "pw")),
        "env PREFIX_ROUTER_TLS_PASSWORD needs --tls-keystore");
    refused(() -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", key, "PREFIX_ROUTER_CLIENT_TLS_PASSWORD", "pw")),
        "env PREFIX_ROUTER_CLIENT_TLS_PASSWORD needs --client-tls-keystore");
    // each port's variable is its own: the client port's keystore does not take the peer's
    refused(() -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--client-tls-keystore", "client.p12"}, Map.of("PREFIX_ROUTER_CLUSTER_KEY", key,
        "PREFIX_ROUTER_CLIENT_TLS_PASSWORD", "pw", "PREFIX_ROUTER_TLS_PASSWORD", "pw")),
        "env PREFIX_ROUTER_TLS_PASSWORD needs --tls-keystore");
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--tls-keystore", "node.p12"}, Map.of("PREFIX_ROUTER_CLUSTER_KEY", key,
        "PREFIX_ROUTER_TLS_PASSWORD", "pw"));
    assertEquals("pw", new String(o.tlsPassword));
    assertNull(o.clientTlsPassword);
  }

  /**
   * The model server's API key comes from a file ({@code --engine-api-key-file}) or the
   * environment ({@code PREFIX_ROUTER_ENGINE_API_KEY}), as the TLS passwords do, never as a
   * flag's value (which {@code ps} shows): not both, not with the reference engine, not empty,
   * and never echoed in a message.
   */
  @Test
  void theEngineApiKeyComesFromAFileOrTheEnvironment() throws Exception {
    String engine = "http://127.0.0.1:8000";
    Path keyFile = Files.writeString(dir.resolve("engine.key"), "\uFEFFsk-f1le-KEY_42 \n");
    Map<String, String> noKey = Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX);
    assertNull(node("--engine", engine).engineApiKey);
    assertEquals("sk-f1le-KEY_42",
        node("--engine", engine, "--engine-api-key-file", keyFile.toString()).engineApiKey);
    for (String blank : List.of("", "  ")) {
      Map<String, String> env = Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX,
          "PREFIX_ROUTER_ENGINE_API_KEY", blank);
      // set but empty (a compose file substituting an unset variable): no key given
      assertNull(NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1", "--engine",
          engine}, env).engineApiKey);
      assertNull(NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1"}, env)
          .engineApiKey);
      assertEquals("sk-f1le-KEY_42", NodeOptions.parse(new String[] {"--id", "a", "--listen",
          "h:1", "--engine", engine, "--engine-api-key-file", keyFile.toString()}, env)
          .engineApiKey);
    }
    Map<String, String> env = Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX,
        "PREFIX_ROUTER_ENGINE_API_KEY", "sk-3nv-KEY");
    assertEquals("sk-3nv-KEY", NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--engine", engine}, env).engineApiKey);
    String m = refused(() -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--engine", engine, "--engine-api-key-file", keyFile.toString()}, env),
        "--engine-api-key-file and env PREFIX_ROUTER_ENGINE_API_KEY are exclusive");
    assertFalse(m.contains("KEY_42") || m.contains("3nv"), m);
    // the reference engine asks no server: a key for it is a mistake, not ignored
    refused(() -> node("--engine-api-key-file", keyFile.toString()),
        "--engine-api-key-file needs --engine URL");
    m = refused(() -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1"}, env),
        "env PREFIX_ROUTER_ENGINE_API_KEY needs --engine URL");
    assertFalse(m.contains("3nv"), m);
    for (String text : List.of("", "\n", " \r\n", "\uFEFF\n")) {
      Path blank = Files.writeString(dir.resolve("blank.key"), text);
      refused(() -> node("--engine", engine, "--engine-api-key-file", blank.toString()),
          "--engine-api-key-file " + blank + " holds no API key");
    }
    refused(() -> node("--engine", engine, "--engine-api-key-file",
        dir.resolve("missing.key").toString()), "cannot read --engine-api-key-file",
        "no such file");
    // what no bearer token is: refused, naming the flag or the variable, never the key
    for (String bad : List.of("Bearer sk-s3cret", "sk-s3cret\nsk-other", "sk-s3cret\u00e9")) {
      Path f = Files.writeString(dir.resolve("bad.key"), bad + "\n");
      m = refused(() -> node("--engine", engine, "--engine-api-key-file", f.toString()),
          "--engine-api-key-file " + f + ": the API key must be printable ASCII without spaces");
      assertFalse(m.contains("s3cret"), m);
      m = refused(() -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
          "--engine", engine}, Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX,
          "PREFIX_ROUTER_ENGINE_API_KEY", bad)),
          "env PREFIX_ROUTER_ENGINE_API_KEY: the API key must be printable ASCII without spaces");
      assertFalse(m.contains("s3cret"), m);
    }
    refused(() -> node("--engine", engine, "--engine-api-key-file", Files.writeString(
        dir.resolve("bearer.key"), "Bearer sk-s3cret").toString()), "without 'Bearer '");
    assertNull(NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1", "--engine",
        engine}, noKey).engineApiKey);
  }

  /**
   * A file flag with an empty value (an unset variable in a script, {@code tls-keystore=} in the
   * file) named the working directory, and the node failed only at start, as "Is a directory".
   */
  @Test
  void anEmptyFileNameIsABadFlag() throws Exception {
    for (String f : List.of("cluster-key-file", "tls-keystore", "tls-truststore",
        "tls-password-file", "client-tls-keystore", "client-tls-truststore",
        "client-tls-password-file", "engine-api-key-file")) {
      refused(() -> node("--" + f, ""), "--" + f + " must name a file, was empty");
      refused(() -> node("--" + f + "= "), "--" + f + " must name a file, was empty");
      Path cfg = Files.writeString(dir.resolve(f + ".properties"), "id=a\nlisten=h:1\n" + f
          + "=\n");
      refused(() -> parse("--config", cfg.toString()), "--" + f + " must name a file, was empty");
    }
    // the config file too: it was read as the working directory ("Is a directory")
    refused(() -> parse("--config", "", "--id", "a", "--listen", "h:1"),
        "--config must name a file, was empty");
    refused(() -> parse("--config= ", "--id", "a", "--listen", "h:1"),
        "--config must name a file, was empty");
  }

  /**
   * A file flag whose value no path can be (a NUL character: a script's mangled variable) is a
   * bad flag naming the flag, as an empty one is: {@code Path.of} threw its own
   * InvalidPathException, "Nul character not allowed: ...", which named no flag and printed the
   * NUL. Every flag naming a file, on the command line and in the config file.
   */
  @Test
  void aFileNameNoPathCanBeIsABadFlagNamingIt() throws Exception {
    for (String f : List.of("cluster-key-file", "tls-keystore", "tls-truststore",
        "tls-password-file", "client-tls-keystore", "client-tls-truststore",
        "client-tls-password-file", "engine-api-key-file", "ready-file")) {
      List<String> args = new ArrayList<>(List.of("--id", "a", "--listen", "h:1", "--" + f,
          "a\u0000b"));
      if (f.equals("engine-api-key-file")) {
        args.addAll(List.of("--engine", "http://127.0.0.1:8000"));
      }
      // the cluster key file without the variable, which it excludes
      Map<String, String> env = f.equals("cluster-key-file") ? Map.of()
          : Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX);
      String m = refused(() -> NodeOptions.parse(args.toArray(new String[0]), env),
          "--" + f + " must name a file, was 'a\\0b': ");
      assertFalse(m.contains("\u0000"), m);
      Path cfg = Files.writeString(dir.resolve(f + ".properties"), "id=a\nlisten=h:1\n" + f
          + "=a\\u0000b\n" + (args.size() > 6 ? "engine=http://127.0.0.1:8000\n" : ""));
      refused(() -> NodeOptions.parse(new String[] {"--config", cfg.toString()}, env),
          "--" + f + " must name a file, was 'a\\0b': ");
    }
    String m = refused(() -> parse("--config", "a\u0000b", "--id", "a", "--listen", "h:1"),
        "--config must name a file, was 'a\\0b': ");
    assertFalse(m.contains("\u0000"), m);
  }

  @Test
  void aSeedListNamingANodeTwiceIsRefused() {
    refused(() -> node("--seeds", "b@10.0.0.2:7000,c@10.0.0.3:7000,b@10.0.0.4:7000"),
        "--seeds names node b twice: 'b@10.0.0.2:7000' and 'b@10.0.0.4:7000'");
    refused(() -> node("--seeds", "b@h:2,b@h:2"), "--seeds names node b twice");
    assertEquals(2, node("--seeds", "b@h:2,c@h:2").seeds.size(), "two nodes on one address");
    refused(() -> node("--seeds", "b\u00e9@h:2"), "--seeds entry 'b\u00e9@h:2'");
    refused(() -> parse("--id", "a b", "--listen", "h:1"), "--id");
  }

  /**
   * {@code --mirror-limit-tokens} bounds only a tree that mirrors the engine's cache events (the
   * reference engine's, or {@code --kv-events}); with {@code --engine URL} alone the tree is
   * self-managed and the flag was accepted and silently ignored.
   */
  @Test
  void aMirrorLimitWithoutCacheEventsIsABadFlag() {
    for (String limit : List.of("33554432", "0")) {
      refused(() -> node("--engine", "http://127.0.0.1:8000", "--mirror-limit-tokens", limit),
          "--mirror-limit-tokens needs --kv-events or --engine reference");
    }
    assertEquals(33554432L, node("--engine", "http://127.0.0.1:8000", "--kv-events",
        "tcp://127.0.0.1:5557", "--mirror-limit-tokens", "33554432").config.mirrorLimitTokens());
    assertEquals(33554432L, node("--mirror-limit-tokens", "33554432").config.mirrorLimitTokens(),
        "the reference engine reports its cache");
  }

  /**
   * A number is written in ASCII digits, as the help says: {@code Integer.parseInt} also takes
   * the digits of other scripts (Arabic-Indic, Devanagari, full-width), so {@code --hop-limit ٣}
   * was taken for 3 and a value pasted from a document in another script ran a node set by it.
   */
  @Test
  void aNumberInDigitsOfAnotherScriptIsNoNumber() {
    for (String bad : List.of("\u0663", "\u0968", "\uff13")) {
      refused(() -> node("--hop-limit", bad), "--hop-limit needs an integer, was '" + bad + "'");
      refused(() -> node("--gossip-interval-ms", "2" + bad + "0"),
          "--gossip-interval-ms needs an integer");
      refused(() -> node("--peer-dead-ms", bad + "000"), "--peer-dead-ms needs an integer");
      refused(() -> node("--watermarks", "8," + bad + "2"), "--watermarks needs an integer");
      refused(() -> node("--block-size", "1" + bad), "--block-size needs an integer");
    }
    assertEquals(3, node("--hop-limit", " 3").config.hopLimit());
  }

  /**
   * The reference engine's threads are 1 to 256, a bad flag outside them (naming it, status 2),
   * not a failure of the engine's builder while the node starts.
   */
  @Test
  void theReferenceEnginesThreadsAreOneTo256() {
    assertEquals(256, node("--engine-threads", "256").engineThreads);
    refused(() -> node("--engine-threads", "257"), "--engine-threads must be 1 to 256, was 257");
    refused(() -> node("--engine-threads", "0"), "--engine-threads must be 1 to 256, was 0");
  }

  /** The shutdown grace is 0 to 365 days in milliseconds, as its message says. */
  @Test
  void theShutdownGraceIsAtMost365Days() {
    long most = java.time.Duration.ofDays(365).toMillis();
    assertEquals(java.time.Duration.ofMillis(most),
        node("--shutdown-grace-ms", String.valueOf(most)).shutdownGrace);
    refused(() -> node("--shutdown-grace-ms", String.valueOf(most + 1)),
        "--shutdown-grace-ms must be 0 to 365 days in milliseconds, was " + (most + 1));
    assertEquals(java.time.Duration.ZERO, node("--shutdown-grace-ms", "0").shutdownGrace);
  }

  @Test
  void watermarksAreExactlyTwoNumbers() {
    for (String bad : List.of("16,32,", "16,,32", ",16,32", "16", "16,32,48")) {
      refused(() -> node("--watermarks", bad), "--watermarks must be LOW,HIGH, was " + bad);
    }
    RouterConfig c = node("--watermarks", " 8, 24").config;
    assertEquals(List.of(8, 24), List.of(c.lowWatermark(), c.highWatermark()));
  }

  /**
   * The wildcard address, in any of its forms, is where a node listens, never where peers
   * connect: {@code --advertise 0.0.0.0:7000} passed the check that {@code --listen 0.0.0.0} has
   * an {@code --advertise}, and the node gossiped an address at which a peer on another host
   * reaches itself; {@code --listen [0::0]:7000} was not seen as a wildcard at all.
   */
  @Test
  void theWildcardAddressIsNoAddressPeersConnectTo() {
    refused(() -> parse("--id", "a", "--listen", "0.0.0.0:7000", "--advertise", "0.0.0.0:7000"),
        "--advertise 0.0.0.0:7000 is every interface, no address peers can reach");
    refused(() -> node("--advertise", "[::]:7000"), "--advertise [::]:7000 is every interface");
    refused(() -> node("--advertise", "[0:0::0]:7000"), "is every interface");
    refused(() -> parse("--id", "a", "--listen", "[0::0]:7000"),
        "(every interface) needs --advertise");
    refused(() -> node("--seeds", "b@10.0.0.2:7000,c@0.0.0.0:7000"),
        "--seeds entry 'c@0.0.0.0:7000' is every interface, no address of a peer");
    refused(() -> node("--seeds", "c@[::]:7000"), "--seeds entry 'c@[::]:7000' is every");
    // listening on every interface with an address to advertise, and seeds that are addresses
    assertEquals("10.0.0.1:7000", parse("--id", "a", "--listen", "0.0.0.0:7000", "--advertise",
        "10.0.0.1:7000").advertise);
    assertEquals("[fd00::1]:7000", parse("--id", "a", "--listen", "[::]:7000", "--advertise",
        "[fd00::1]:7000", "--seeds", "b@10.0.0.2:7000").advertise);
  }

  @Test
  void hostsAreCheckedByTheirFormWithoutALookup() {
    String[][] bad = {
        {"--listen", "[]:7000", "--listen host is empty"},
        {"--listen", "my host:7000", "--listen host has a character no host name has, a space"},
        {"--listen", "node_1:7000", "'_'"},
        {"--listen", "a..b:7000", "--listen host is not a host name"},
        {"--listen", "-a.b:7000", "cannot begin or end with a hyphen"},
        {"--listen", "10.0.0.256:7000", "--listen host is not an IP address"},
        {"--listen", "[example.com]:7000", "--listen host is not an IPv6 address"},
        {"--client", "h\u00e9:8000", "--client host has a character no host name has, U+00E9"},
        {"--advertise", "bad host:7000", "--advertise host has a character"},
        {"--advertise", "::1:7000", "--advertise has an IPv6 address without brackets"},
        {"--seeds", "b@:7000", "--seeds must be HOST:PORT"},
        {"--seeds", "b@1.2.3:7000", "--seeds host is not an IP address"},
        {"--seeds", "b@x y:7000", "--seeds host has a character"},
    };
    for (String[] b : bad) {
      List<String> args = new ArrayList<>(List.of("--id", "a"));
      if (!b[0].equals("--listen")) {
        args.addAll(List.of("--listen", "h:1"));
      }
      args.addAll(List.of(b[0], b[1]));
      refused(() -> parse(args.toArray(new String[0])), b[2], "was '" + b[1].replaceFirst("^b@", "") + "'");
    }
    refused(() -> parse("--id", "a", "--listen", "h:65536"), "--listen port must be 0 to 65535");
    // a port URLs refuse (the transport then failed to start)
    refused(() -> node("--advertise", "h:+80"), "--advertise port must be digits only, was '+80'");
    // accepted: names, IPv4, IPv6 (in brackets where peers connect), wildcards
    assertEquals("::1", parse("--id", "a", "--listen", "[::1]:0").listenHost);
    assertEquals("::", parse("--id", "a", "--listen", "[::]:7000", "--advertise",
        "[fd00::1]:7000").listenHost);
    assertEquals("node-1.example.com.", parse("--id", "a", "--listen", "node-1.example.com.:0")
        .listenHost);
    assertEquals("localhost", parse("--id", "a", "--listen", "h:1", "--client", "localhost:0")
        .clientHost);
    assertEquals("n2.cluster.local:7000", node("--seeds", "b@n2.cluster.local:7000,c@[::1]:7000")
        .seeds.get(0).address());
  }

  /**
   * A host name has at most 253 characters, not counting the final dot of a fully qualified
   * name, in parts of 1 to 63 characters between dots: the longest are taken, one more is
   * refused.
   */
  @Test
  void aHostNameIsAtMost253CharactersInPartsOfAtMost63() {
    String longest = "a".repeat(63) + "." + "b".repeat(63) + "." + "c".repeat(63) + "."
        + "d".repeat(61);
    assertEquals(253, longest.length());
    assertEquals(longest, node("--client", longest + ":0").clientHost);
    assertEquals(longest + ".", node("--client", longest + ".:0").clientHost);
    refused(() -> node("--client", longest + "d:0"),
        "--client host is not a host name: it has more than 253 characters");
    assertEquals("x." + "e".repeat(63), node("--client", "x." + "e".repeat(63) + ":0").clientHost);
    refused(() -> node("--client", "x." + "e".repeat(64) + ":0"),
        "--client host is not a host name: a part between dots must have 1 to 63 characters");
  }

  /**
   * An IPv6 address without brackets cannot be told from its port: {@code fd00::2:1}, an address
   * given without a port, was taken as host {@code fd00::2} and port 1, and {@code ::0:7000} as
   * every interface. Every HOST:PORT flag refuses it, saying how to write it.
   */
  @Test
  void anIpv6AddressWithoutBracketsIsRefusedInEveryHostPortFlag() {
    String[][] bad = {
        {"--client", "fd00::2:1", "[fd00::2]:1 or [fd00::2:1]:PORT"},
        {"--client", "::ffff:1", "[::ffff]:1 or [::ffff:1]:PORT"},
        {"--client", "::1", "[::1]:PORT"},
        {"--client", "::1:8000", "[::1]:8000 or [::1:8000]:PORT"},
        {"--listen", "::0:7000", "[::0]:7000 or [::0:7000]:PORT"},
        {"--listen", ":::7000", "[::]:7000,"},
        {"--advertise", "::1:7000", "[::1]:7000 or [::1:7000]:PORT"},
        {"--seeds", "b@fd00::2:7000", "[fd00::2]:7000 or [fd00::2:7000]:PORT"},
    };
    for (String[] b : bad) {
      List<String> args = new ArrayList<>(List.of("--id", "a"));
      if (!b[0].equals("--listen")) {
        args.addAll(List.of("--listen", "h:1"));
      }
      args.addAll(List.of(b[0], b[1]));
      refused(() -> parse(args.toArray(new String[0])),
          b[0] + " has an IPv6 address without brackets", "write it in brackets, " + b[2],
          "was '" + b[1].replaceFirst("^b@", "") + "'");
    }
    assertEquals("fd00::2", parse("--id", "a", "--listen", "h:1", "--client", "[fd00::2]:1")
        .clientHost);
    // a URL has no host without its brackets
    refused(() -> node("--tokenizer", "http://::1:8000"), "IPv6 in brackets: http://[::1]:8000",
        "was http://::1:8000");
  }

  /**
   * The secrets given by a file flag or an environment variable (the TLS passwords, the engine's
   * API key) are refused with these messages, whole, and taken as written: a TLS password from
   * the environment as it is (it may begin or end with a space), an API key from it stripped, an
   * API key file whose key begins with a space refused.
   */
  @Test
  void theSecretsOfAFileOrAVariableAreRefusedAndTakenAlike() throws Exception {
    Path pw = Files.writeString(dir.resolve("secret.txt"), "from file\n");
    String engine = "http://127.0.0.1:8000";
    String key = NodeMainTest.KEY_HEX;
    String[][] cases = {
        {"--tls-password-file and env PREFIX_ROUTER_TLS_PASSWORD are exclusive: give the "
            + "password one way, unset the variable or drop the flag",
            "PREFIX_ROUTER_TLS_PASSWORD", "--tls-keystore", "n.p12", "--tls-password-file"},
        {"--client-tls-password-file and env PREFIX_ROUTER_CLIENT_TLS_PASSWORD are exclusive: "
            + "give the password one way, unset the variable or drop the flag",
            "PREFIX_ROUTER_CLIENT_TLS_PASSWORD", "--client-tls-keystore", "c.p12",
            "--client-tls-password-file"},
        {"--engine-api-key-file and env PREFIX_ROUTER_ENGINE_API_KEY are exclusive: give the "
            + "key one way, unset the variable or drop the flag",
            "PREFIX_ROUTER_ENGINE_API_KEY", "--engine", engine, "--engine-api-key-file"}};
    for (String[] c : cases) {
      String m = refused(() -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
          c[2], c[3], c[4], pw.toString()},
          Map.of("PREFIX_ROUTER_CLUSTER_KEY", key, c[1], "env")));
      assertEquals(c[0], m);
    }
    assertEquals("env PREFIX_ROUTER_TLS_PASSWORD needs --tls-keystore: give the keystore, or "
        + "unset the variable for a port without TLS", refused(() -> NodeOptions.parse(
            new String[] {"--id", "a", "--listen", "h:1"},
            Map.of("PREFIX_ROUTER_CLUSTER_KEY", key, "PREFIX_ROUTER_TLS_PASSWORD", "x"))));
    assertEquals("--tls-password-file needs --tls-keystore",
        refused(() -> node("--tls-password-file", pw.toString())));
    assertEquals("--tls-keystore needs a password: --tls-password-file FILE or env "
        + "PREFIX_ROUTER_TLS_PASSWORD", refused(() -> node("--tls-keystore", "n.p12")));
    assertEquals("--engine-api-key-file needs --engine URL (the reference engine asks no "
        + "server)", refused(() -> node("--engine-api-key-file", pw.toString())));
    assertEquals("env PREFIX_ROUTER_ENGINE_API_KEY needs --engine URL (the reference engine "
        + "asks no server): unset the variable, or give the server's URL",
        refused(() -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1"},
            Map.of("PREFIX_ROUTER_CLUSTER_KEY", key, "PREFIX_ROUTER_ENGINE_API_KEY", "k"))));
    Map<String, String> spaced = Map.of("PREFIX_ROUTER_CLUSTER_KEY", key,
        "PREFIX_ROUTER_TLS_PASSWORD", " pass word ", "PREFIX_ROUTER_ENGINE_API_KEY", " sk-1 ");
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--tls-keystore", "n.p12", "--engine", engine}, spaced);
    assertEquals(" pass word ", new String(o.tlsPassword));
    assertEquals("sk-1", o.engineApiKey);
    Path leading = Files.writeString(dir.resolve("leading.key"), " sk-1\n");
    assertEquals("--engine-api-key-file " + leading + ": the API key must be printable ASCII "
        + "without spaces, as a bearer token is",
        refused(() -> node("--engine", engine, "--engine-api-key-file", leading.toString())));
    assertEquals(" pass", new String(node("--tls-keystore", "n.p12", "--tls-password-file",
        Files.writeString(dir.resolve("leading.password"), " pass\n").toString()).tlsPassword));
  }
}
