package io.github.prefixrouter.server;

import static io.github.prefixrouter.testing.LoggedLines.logged;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.internal.wire.SelectorThreads;
import io.github.prefixrouter.testing.ThrowingProxySelector;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class NodeMainTest {

  static final String KEY_HEX = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

  @TempDir Path dir;

  private static NodeOptions parse(String... args) {
    return NodeOptions.parse(args, Map.of("PREFIX_ROUTER_CLUSTER_KEY", KEY_HEX));
  }

  /** As {@link #parse}, with no cluster key in the environment. */
  private static NodeOptions parseWithoutKey(String... args) {
    return NodeOptions.parse(args, Map.of());
  }

  @Test
  void parsesFlagsAndAPropertiesFileWithFlagsWinning() throws Exception {
    Path cfg = dir.resolve("node.properties");
    Files.writeString(cfg, "id=n1\nlisten=127.0.0.1:7001\npolicy=local-only\nseeds=n2@127.0.0.1:7002, n3@h:7003\n");
    NodeOptions o = parse("--config", cfg.toString(), "--policy=longest-prefix", "--block-size", "32");
    assertEquals("n1", o.id);
    assertEquals(7001, o.listenPort);
    assertEquals(RoutingPolicy.LONGEST_PREFIX, o.config.policy());
    assertEquals(32, o.config.blockSize());
    assertEquals(2, o.seeds.size());
    assertEquals("n3", o.seeds.get(1).nodeId());
    assertEquals("h:7003", o.seeds.get(1).address());
    assertEquals(32, o.clusterKeys.get(0).length);
    // the reference engine's cache (65,536 tokens by default) unless the flag says otherwise
    assertEquals(65_536, o.config.treeCapacityTokens());
    NodeOptions sized = parse("--config", cfg.toString(), "--tree-capacity-tokens", "200000");
    assertEquals(200_000, sized.config.treeCapacityTokens());
  }

  /** A properties file an editor saved with a UTF-8 byte order mark reads as without one. */
  @Test
  void aByteOrderMarkBeforeTheFirstKeyOfTheFileIsSkipped() throws Exception {
    Path cfg = dir.resolve("bom.properties");
    Files.writeString(cfg, "\uFEFFid=n1\nlisten=127.0.0.1:7001\n", StandardCharsets.UTF_8);
    NodeOptions o = parse("--config", cfg.toString());
    assertEquals("n1", o.id);
    assertEquals(7001, o.listenPort);
  }

  /**
   * The password file loses its trailing white space only, as documented: a password beginning
   * with a space lost it, and the keystore then did not open with it.
   */
  @Test
  void theTlsPasswordFileLosesOnlyItsTrailingWhiteSpace() throws Exception {
    Path pw = dir.resolve("tls.password");
    Files.writeString(pw, "  two leading spaces \r\n", StandardCharsets.UTF_8);
    NodeOptions o = parse("--id", "a", "--listen", "h:1", "--tls-keystore",
        dir.resolve("node.p12").toString(), "--tls-password-file", pw.toString());
    assertEquals("  two leading spaces", new String(o.tlsPassword));
  }

  /**
   * A password file an editor saved with a UTF-8 byte order mark gives the password it shows (the
   * mark was taken into the password, and the keystore then did not open: "the password is
   * wrong"); one in another encoding, or too large to be a password file, is refused naming the
   * flag and the file (it was "Input length = 1", or the whole file taken for the password).
   */
  @Test
  void aPasswordFileIsUtf8TextAByteOrderMarkSkipped() throws Exception {
    Path pw = dir.resolve("tls.password");
    Files.writeString(pw, "\uFEFFsecret\r\n", StandardCharsets.UTF_8);
    String p12 = dir.resolve("node.p12").toString();
    assertEquals("secret", new String(parse("--id", "a", "--listen", "h:1", "--tls-keystore", p12,
        "--tls-password-file", pw.toString()).tlsPassword));
    assertEquals("secret", new String(parse("--id", "a", "--listen", "h:1",
        "--client-tls-keystore", p12, "--client-tls-password-file", pw.toString())
        .clientTlsPassword));
    Files.write(pw, "caf\u00e9\n".getBytes(StandardCharsets.ISO_8859_1));
    assertMessage("--tls-password-file " + pw + " is not UTF-8 text", () -> parse("--id", "a",
        "--listen", "h:1", "--tls-keystore", p12, "--tls-password-file", pw.toString()));
    Files.writeString(pw, "\uFEFFsecret\n", StandardCharsets.UTF_16LE);
    assertMessage("--client-tls-password-file " + pw + " is text saved as UTF-16 (little-endian)",
        () -> parse("--id", "a", "--listen", "h:1", "--client-tls-keystore", p12,
            "--client-tls-password-file", pw.toString()));
    Files.writeString(pw, "x".repeat(NodeOptions.MAX_PASSWORD_FILE_BYTES + 1));
    assertMessage("--tls-password-file " + pw + " is larger than 65536 bytes", () -> parse("--id",
        "a", "--listen", "h:1", "--tls-keystore", p12, "--tls-password-file", pw.toString()));
  }

  @Test
  void badFlagsAreRejectedWithAMessageThatSaysWhatToFix() {
    assertMessage("--id is required", () -> parse("--listen", "127.0.0.1:1"));
    assertMessage("HOST:PORT", () -> parse("--id", "a", "--listen", "nowhere"));
    assertMessage("unknown flag --bogus", () -> parse("--id", "a", "--bogus", "1"));
    // a misspelt flag last on the line is unknown, not one that lacks its value
    assertMessage("unknown flag --insecur", () -> parse("--id", "a", "--listen", "h:1",
        "--insecur"));
    assertMessage("--policy must be", () -> parse("--id", "a", "--listen", "h:1", "--policy", "random"));
    assertMessage("id@host:port", () -> parse("--id", "a", "--listen", "h:1", "--seeds", "h:2"));
    assertMessage("cluster key is required",
        () -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1"}, Map.of()));
    assertMessage("at least 16 bytes",
        () -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1"}, Map.of("PREFIX_ROUTER_CLUSTER_KEY", "00ff")));
    assertMessage("--engine must be", () -> parse("--id", "a", "--listen", "h:1", "--engine", "gpt"));
    assertMessage("needs an integer", () -> parse("--id", "a", "--listen", "h:1", "--block-size", "x"));
    assertMessage("--kv-events needs --engine URL",
        () -> parse("--id", "a", "--listen", "h:1", "--kv-events", "tcp://127.0.0.1:5557"));
    assertMessage("only tcp:// endpoints", () -> parse("--id", "a", "--listen", "h:1",
        "--engine", "http://127.0.0.1:8000", "--kv-events", "ipc:///tmp/kv"));
    assertMessage("--kv-events-replay needs --kv-events", () -> parse("--id", "a", "--listen", "h:1",
        "--engine", "http://127.0.0.1:8000", "--kv-events-replay", "tcp://127.0.0.1:5558"));
    assertMessage("--engine is not a URL: Expected authority at index 7: http://",
        () -> parse("--id", "a", "--listen", "h:1", "--engine", "http://"));
    // a bad endpoint's message names its flag: the two take the same form
    assertMessage("--kv-events: endpoint 'tcp://h' has no port", () -> parse("--id", "a",
        "--listen", "h:1", "--engine", "http://127.0.0.1:8000", "--kv-events", "tcp://h"));
    assertMessage("--kv-events-replay: endpoint 'tcp://h' has no port", () -> parse("--id", "a",
        "--listen", "h:1", "--engine", "http://127.0.0.1:8000", "--kv-events",
        "tcp://127.0.0.1:5557", "--kv-events-replay", "tcp://h"));
    NodeOptions kv = parse("--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000",
        "--kv-events", "tcp://127.0.0.1:5557", "--kv-events-replay", "tcp://127.0.0.1:5558",
        "--kv-events-topic", "kv");
    assertEquals("tcp://127.0.0.1:5557", kv.kvEvents);
    assertEquals("tcp://127.0.0.1:5558", kv.kvEventsReplay);
    assertEquals("kv", kv.kvEventsTopic);
    assertMessage("--tree-capacity-tokens must be at least --block-size",
        () -> parse("--id", "a", "--listen", "h:1", "--tree-capacity-tokens", "8"));
    assertMessage("--listen 0.0.0.0 (every interface) needs --advertise",
        () -> parse("--id", "a", "--listen", "0.0.0.0:7000"));
    assertEquals("10.0.0.1:7000",
        parse("--id", "a", "--listen", "0.0.0.0:7000", "--advertise", "10.0.0.1:7000").advertise);
    assertMessage("--engine-threads must be 1 to 256, was 0",
        () -> parse("--id", "a", "--listen", "h:1", "--engine-threads", "0"));
    assertMessage("--engine-cache-tokens must be at least the block size (16), was -1",
        () -> parse("--id", "a", "--listen", "h:1", "--engine-cache-tokens", "-1"));
    assertMessage("--shutdown-grace-ms must be 0 to 365 days in milliseconds, was -1",
        () -> parse("--id", "a", "--listen", "h:1", "--shutdown-grace-ms", "-1"));
    assertMessage("needs an integer",
        () -> parse("--id", "a", "--listen", "h:1", "--shutdown-grace-ms", "soon"));
    assertEquals(java.time.Duration.ofSeconds(25), parse("--id", "a", "--listen", "h:1").shutdownGrace);
    assertEquals(java.time.Duration.ZERO,
        parse("--id", "a", "--listen", "h:1", "--shutdown-grace-ms", "0").shutdownGrace);
    // 2^32 + 16 must not wrap to a valid block size (or thread count, cache size, hop limit)
    for (String flag : new String[] {"--block-size", "--engine-threads", "--engine-cache-tokens",
        "--hop-limit"}) {
      assertMessage(flag + " is out of range, was '4294967312'",
          () -> parse("--id", "a", "--listen", "h:1", flag, "4294967312"));
    }
  }

  /**
   * An integer too large for its flag's type says it is out of range, and on which side: it said
   * the flag "needs an integer", which the value is, and later the type's range, which none of
   * these flags takes (--engine-failures takes 0 to 1000, not -2^31 to 2^31-1).
   */
  @Test
  void anIntegerTooLargeForItsTypeIsOutOfRange() {
    assertMessage("--block-size is out of range, was '99999999999': above any value it takes",
        () -> parse("--id", "a", "--listen", "h:1", "--block-size", "99999999999"));
    assertMessage("--engine-failures is out of range, was '99999999999': above any value it "
        + "takes", () -> parse("--id", "a", "--listen", "h:1", "--engine-failures", "99999999999"));
    assertMessage("--engine-threads is out of range, was '-4294967312': below any value it takes",
        () -> parse("--id", "a", "--listen", "h:1", "--engine-threads", "-4294967312"));
    assertMessage("--shutdown-grace-ms is out of range, was '99999999999999999999': above any "
        + "value it takes",
        () -> parse("--id", "a", "--listen", "h:1", "--shutdown-grace-ms",
            "99999999999999999999"));
    assertMessage("--advertise port must be at most 65535, was 99999999999",
        () -> parse("--id", "a", "--listen", "h:1", "--advertise", "10.0.0.1:99999999999"));
    assertMessage("--block-size needs an integer, was '1e3'",
        () -> parse("--id", "a", "--listen", "h:1", "--block-size", "1e3"));
  }

  @Test
  void theAddressesPeersConnectToNeedAPortTheyCanReach() {
    // the advertised address is what the node gossips for peers to connect to, and seeds are
    // contacted as given: a port that is no port was accepted, and the node then ran unreachable
    // (or joined nobody) with nothing but failed connections to show for it
    for (String bad : new String[] {"http", "0", "70000", "-1"}) {
      assertMessage("--advertise", () -> parse("--id", "a", "--listen", "0.0.0.0:7000",
          "--advertise", "10.0.0.1:" + bad));
      assertMessage("--seeds", () -> parse("--id", "a", "--listen", "h:1",
          "--seeds", "b@10.0.0.2:7000,c@10.0.0.3:" + bad));
    }
    assertMessage("--advertise port must be 1 to 65535, was 0",
        () -> parse("--id", "a", "--listen", "h:1", "--advertise", "10.0.0.1:0"));
    assertMessage("--seeds needs an integer, was 'x'",
        () -> parse("--id", "a", "--listen", "h:1", "--seeds", "b@h:x"));
    assertEquals(List.of(new io.github.prefixrouter.spi.PeerAddress("b", "10.0.0.2:65535")),
        parse("--id", "a", "--listen", "h:1", "--seeds", "b@10.0.0.2:65535").seeds);
    assertEquals("[::1]:1",
        parse("--id", "a", "--listen", "h:1", "--advertise", "[::1]:1").advertise);
  }

  /** Only a 2xx is a healthy engine: a redirect (its server moved) or an error is warned of. */
  @Test
  void theHealthCheckPassesOn2xxOnly() {
    String url = "http://127.0.0.1:8000";
    for (int ok : new int[] {200, 204, 299}) {
      assertEquals(null, NodeMain.healthWarning(ok, url, false), "HTTP " + ok);
    }
    for (int bad : new int[] {199, 300, 302, 500}) {
      String w = NodeMain.healthWarning(bad, url, false);
      assertTrue(w != null && w.contains("fails its health check: HTTP " + bad), bad + ": " + w);
    }
  }

  @Test
  void anEmptyModelOrReadyFileIsABadFlag() throws Exception {
    // model= from a template whose variable was empty: the node took "" for the base model's
    // name, so every client naming the real model was taken to name a LoRA adapter, whose
    // scope the mirror of vLLM's cache (the base model's) never matches
    assertMessage("--model must not be empty", () -> parse("--id", "a", "--listen", "h:1",
        "--engine", "http://127.0.0.1:8000", "--model", ""));
    assertMessage("--model must not be empty", () -> parse("--config",
        writeConfig("id=n1\nlisten=h:1\nengine=http://127.0.0.1:8000\nmodel=\n").toString()));
    // blank, as the config file's blank value (trimmed to empty) is: a name of spaces is no
    // model's, and the node sent it as the base model's to the server
    for (String blank : List.of(" ", "\t", "  \u3000")) {
      assertMessage("--model must not be empty or blank", () -> parse("--id", "a", "--listen",
          "h:1", "--engine", "http://127.0.0.1:8000", "--model", blank));
      assertMessage("--model-id must not be empty or blank", () -> parse("--id", "a", "--listen",
          "h:1", "--model-id", blank));
    }
    // the ready file is replaced and removed: a directory there must not be
    assertMessage("--ready-file must name a file", () -> parse("--id", "a", "--listen", "h:1",
        "--ready-file", ""));
    Path sub = Files.createDirectory(dir.resolve("sub"));
    assertMessage("--ready-file must name a file, not the directory " + sub,
        () -> parse("--id", "a", "--listen", "h:1", "--ready-file", sub.toString()));
    assertTrue(Files.isDirectory(sub));
    assertEquals(dir.resolve("sub/ready"), parse("--id", "a", "--listen", "h:1",
        "--ready-file", dir.resolve("sub/ready").toString()).readyFile);
  }

  @Test
  void aNodeWhoseClientPortIsTakenStopsAndReleasesItsPeerPort() throws Exception {
    int peerPort;
    try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      peerPort = probe.getLocalPort();
    }
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      NodeOptions o = parse("--id", "blocked", "--listen", "127.0.0.1:" + peerPort,
          "--client", "127.0.0.1:" + taken.getLocalPort());
      assertThrows(IOException.class, () -> NodeMain.start(o));
    }
    // the node that could not open its client endpoint must not stay behind as a cluster
    // member: its transport is closed (the peer port is free again) and its timer thread ends
    try (ServerSocket again = new ServerSocket(peerPort, 1, InetAddress.getLoopbackAddress())) {
      assertEquals(peerPort, again.getLocalPort());
    }
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (threadNamed("prefix-router-blocked") && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertFalse(threadNamed("prefix-router-blocked"), "the node's scheduler thread still runs");
  }

  /**
   * A node in front of a model server whose start fails at its client port leaves no HTTP
   * client's selector thread behind: not the base-model question's, the engine adapter's, the
   * tokenizer's, the transport's, or that of the adapter the flags' check built (JDK 17's
   * clients cannot be closed; each selector ran until its client was garbage collected).
   */
  @Test
  void aFailedStartInFrontOfAServerLeavesNoSelectorThread() throws Exception {
    java.util.Set<Thread> before = SelectorThreads.now();
    try (io.github.prefixrouter.engine.openai.FakeOpenAiServer server =
            io.github.prefixrouter.engine.openai.FakeOpenAiServer.start(
                io.github.prefixrouter.engine.openai.FakeOpenAiServer.ECHO);
        ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      NodeOptions o = parse("--id", "blocked-engine", "--listen", "127.0.0.1:0",
          "--engine", server.baseUrl(), "--tokenizer", "auto",
          "--client", "127.0.0.1:" + taken.getLocalPort());
      IOException e = assertThrows(IOException.class, () -> NodeMain.start(o));
      assertTrue(e.getMessage().startsWith("the client port"), e.getMessage());
    }
    assertEquals(List.of(), SelectorThreads.aliveAfterWaiting(SelectorThreads.since(before)),
        "alive after the failed start");
  }

  /** Checking the engine's flags builds an adapter, which leaves no selector thread behind. */
  @Test
  void parsingTheEngineFlagsLeavesNoSelectorThread() throws Exception {
    java.util.Set<Thread> before = SelectorThreads.now();
    parse("--id", "a", "--listen", "127.0.0.1:0", "--engine", "http://127.0.0.1:8000");
    assertEquals(List.of(), SelectorThreads.aliveAfterWaiting(SelectorThreads.since(before)),
        "alive after the flags were parsed");
  }

  @Test
  void theReadyFileIsThereOnlyWhileTheNodeServes() throws Exception {
    Path ready = dir.resolve("ready");
    // a previous run's file, naming ports this run does not serve on: a script waiting for
    // the file must not take it for this run being ready
    Files.writeString(ready, "peer=127.0.0.1:1 client=127.0.0.1:2\n");
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      NodeOptions o = parse("--id", "stale", "--listen", "127.0.0.1:0",
          "--client", "127.0.0.1:" + taken.getLocalPort(), "--ready-file", ready.toString());
      assertThrows(IOException.class, () -> NodeMain.start(o));
    }
    assertFalse(Files.exists(ready), "a node that never served leaves no ready file");
    NodeOptions o = parse("--id", "fresh", "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0",
        "--ready-file", ready.toString());
    NodeMain.Running r = NodeMain.start(o);
    try {
      assertEquals("peer=" + r.transport.localAddress().address() + " client=" + r.clientAddress
          + "\n", Files.readString(ready));
    } finally {
      r.close();
    }
    assertFalse(Files.exists(ready), "a stopped node is no longer serving");
    assertFalse(Files.exists(dir.resolve("ready.tmp")));
  }

  /**
   * An IPv6 client address is written HOST:PORT with the host in brackets, in the ready file
   * and the banner, as every address the node takes and prints is: it was written without
   * them ({@code client=0:0:0:0:0:0:0:1:PORT}), which no script or client could take apart.
   */
  @Test
  void anIpv6ClientAddressIsBracketedInTheReadyFile() throws Exception {
    Path ready = dir.resolve("ready6");
    NodeMain.Running r = NodeMain.start(parse("--id", "six", "--listen", "[::1]:0",
        "--client", "[::1]:0", "--ready-file", ready.toString()));
    try {
      assertTrue(r.clientAddress.startsWith("[") && r.clientAddress.contains("]:"),
          r.clientAddress);
      String text = Files.readString(ready);
      assertTrue(text.matches("peer=\\[[0-9a-f:]+\\]:[0-9]+ client=\\[[0-9a-f:]+\\]:[0-9]+\n"),
          text);
      HttpResponse<String> health = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
          URI.create("http://" + r.clientAddress + "/health")).build(),
          HttpResponse.BodyHandlers.ofString());
      assertEquals(200, health.statusCode(), health.body());
    } finally {
      r.close();
    }
  }

  private static boolean threadNamed(String prefix) {
    return Thread.getAllStackTraces().keySet().stream()
        .anyMatch(t -> t.isAlive() && t.getName().startsWith(prefix));
  }

  /** A stopped node leaves no thread of its tokenizer behind (the JDK client's executor's). */
  @Test
  void aStoppedNodeLeavesNoTokenizerThreadBehind() throws Exception {
    com.sun.net.httpserver.HttpServer tokenize =
        io.github.prefixrouter.internal.wire.JdkHttpServers.create(
            new java.net.InetSocketAddress("127.0.0.1", 0), 0);
    tokenize.createContext("/tokenize", ex -> {
      ex.getRequestBody().readAllBytes();
      byte[] b = "{\"tokens\":[5,6,7,8]}".getBytes(java.nio.charset.StandardCharsets.UTF_8);
      ex.sendResponseHeaders(200, b.length);
      ex.getResponseBody().write(b);
      ex.close();
    });
    tokenize.start();
    String prefix;
    try {
      NodeMain.Running r = NodeMain.start(parse("--id", "tok", "--listen", "127.0.0.1:0",
          "--tokenizer", "http://127.0.0.1:" + tokenize.getAddress().getPort() + "/tokenize"));
      try {
        prefix = ((EngineTokenizer) r.tokenizer).threadNamePrefix();
        HttpResponse<String> resp = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                URI.create("http://" + r.clientAddress + "/v1/completions"))
            .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":\"hello\",\"max_tokens\":2}"))
            .build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, resp.statusCode(), resp.body());
        assertTrue(EngineTokenizerTest.threadsNamed(prefix), "the tokenizer's threads did no work");
      } finally {
        r.close();
      }
    } finally {
      tokenize.stop(0);
    }
    assertTrue(EngineTokenizerTest.threadsEnd(prefix), "a tokenizer thread remains after stop");
  }

  /**
   * A server that takes connections and never answers holds the start's health check for at most
   * its wait, not for the engine's request timeout (here 10 minutes), as it did.
   */
  @Test
  void theStartsHealthCheckWaitsNoLongerThanItsBound() throws Exception {
    try (ServerSocket silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine engine =
            io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine.builder()
                .baseUrl("http://127.0.0.1:" + silent.getLocalPort())
                .requestTimeout(java.time.Duration.ofMinutes(10)).build()) {
      // the kernel completes the connection; nothing ever accepts it, let alone answers
      String url = "http://127.0.0.1:" + silent.getLocalPort();
      assertEquals("engine at " + url + " does not answer its health check yet",
          org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(
              java.time.Duration.ofSeconds(60),
              () -> NodeMain.healthWarning(engine, java.time.Duration.ofMillis(200), url, false)));
    }
  }

  @Test
  void theBaseModelIsTakenFromTheServersModelListUnlessGiven() throws Exception {
    try (io.github.prefixrouter.engine.openai.FakeOpenAiServer server =
        io.github.prefixrouter.engine.openai.FakeOpenAiServer.start(
            io.github.prefixrouter.engine.openai.FakeOpenAiServer.ECHO)) {
      assertEquals("fake-base", NodeMain.discoverBaseModel(server.baseUrl(), null));
      assertEquals("fake-base", NodeMain.discoverBaseModel(server.baseUrl() + "/", null));
      // as the engine adapter and the tokenizer take it: with /v1
      assertEquals("fake-base", NodeMain.discoverBaseModel(server.baseUrl() + "/v1", null));
      try (NodeMain.Running r = NodeMain.start(parse("--id", "a", "--listen", "127.0.0.1:0",
          "--engine", server.baseUrl()))) {
        assertEquals("fake-base", r.endpoint.baseModel());
      }
      try (NodeMain.Running r = NodeMain.start(parse("--id", "a", "--listen", "127.0.0.1:0",
          "--engine", server.baseUrl(), "--model", "mine"))) {
        assertEquals("mine", r.endpoint.baseModel());
      }
      server.models("{\"data\":[{\"id\":\"a\"},{\"id\":\"b\",\"parent\":null}]}");
      assertEquals(null, NodeMain.discoverBaseModel(server.baseUrl(), null), "two base models");
      server.models("not json");
      assertEquals(null, NodeMain.discoverBaseModel(server.baseUrl(), null));
    }
    assertEquals(null, NodeMain.discoverBaseModel("http://127.0.0.1:1", null), "nothing listening");
    // the reference engine's model has a name, so OpenAI clients (which always name one) can
    // name the base model
    try (NodeMain.Running r = NodeMain.start(parse("--id", "a", "--listen", "127.0.0.1:0"))) {
      assertEquals("reference", r.endpoint.baseModel());
    }
    try (NodeMain.Running r = NodeMain.start(parse("--id", "a", "--listen", "127.0.0.1:0",
        "--model", "demo"))) {
      assertEquals("demo", r.endpoint.baseModel());
    }
  }

  /**
   * The start's {@code GET /v1/models} that the HTTP client cannot send, for an {@link Error}
   * (here of the host's proxy selector, which the client asks for the route; or the heap running
   * out), is no answer: no base model, with a warning naming what was thrown and saying to pass
   * {@code --model}. Only a RuntimeException was caught there, so the {@link Error} was thrown
   * out of the discovery and failed the start.
   */
  @Test
  void aModelListTheClientCannotAskForIsNoneWithAWarning() {
    for (Error thrown : List.of(new InternalError("proxy configuration broken"),
        new OutOfMemoryError("Java heap space"))) {
      List<String> lines = ThrowingProxySelector.asDefault(thrown,
          () -> logged("/v1/models", () -> {
            String base;
            try {
              base = NodeMain.discoverBaseModel("http://127.0.0.1:1", null);
            } catch (Throwable t) {
              throw new AssertionError("discoverBaseModel threw " + t + " instead of returning "
                  + "none with a warning", t);
            }
            assertNull(base, "with " + thrown);
          }));
      assertEquals(1, lines.size(), thrown + ": " + lines);
      assertTrue(lines.get(0).contains(thrown.toString()) && lines.get(0).contains("--model"),
          lines.get(0));
    }
  }

  /**
   * The start's {@code GET /v1/models} answer is parsed within the bound a completions answer
   * has ({@link io.github.prefixrouter.internal.json.AnswerHeap}): under 1 MiB of tiny objects
   * would take some 50 MB of heap parsed, and was parsed whole (its one base model taken). It
   * is refused now, with a warning saying why; a deeply nested answer is refused too.
   */
  @Test
  void aModelListThatWouldTakeTooMuchHeapParsedIsRefused() throws Exception {
    try (io.github.prefixrouter.engine.openai.FakeOpenAiServer server =
        io.github.prefixrouter.engine.openai.FakeOpenAiServer.start(
            io.github.prefixrouter.engine.openai.FakeOpenAiServer.ECHO)) {
      server.models("{\"data\":[" + "{},".repeat(340_000) + "{\"id\":\"big-base\"}]}");
      List<String> lines = logged("/v1/models",
          () -> assertNull(NodeMain.discoverBaseModel(server.baseUrl(), null)));
      assertEquals(1, lines.size(), lines.toString());
      assertTrue(lines.get(0).contains("bytes of heap once parsed")
          && lines.get(0).contains("--model"), lines.get(0));
      server.models("{\"data\":[{\"id\":\"deep\",\"x\":" + "[".repeat(5_000)
          + "]".repeat(5_000) + "}]}");
      assertNull(NodeMain.discoverBaseModel(server.baseUrl(), null));
      server.models("{\"data\":[" + "{\"id\":\"lora\",\"parent\":\"base\"},".repeat(2_000)
          + "{\"id\":\"base\",\"parent\":null}]}");
      assertEquals("base", NodeMain.discoverBaseModel(server.baseUrl(), null),
          "a long list of real entries is within the bound");
    }
  }

  /**
   * An {@code --engine} URL with a path the server does not have answers the start's
   * {@code GET /v1/models} and its health check 404: the warnings say that nothing serves there
   * and point at {@code --engine}. They used to say only to pass {@code --model}, and that the
   * health check failed with HTTP 404.
   */
  @Test
  void aWrongEnginePathIsNamedAtTheStart() throws Exception {
    try (io.github.prefixrouter.engine.openai.FakeOpenAiServer server =
            io.github.prefixrouter.engine.openai.FakeOpenAiServer.start(
                io.github.prefixrouter.engine.openai.FakeOpenAiServer.ECHO);
        io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine engine =
            io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine.builder()
                .baseUrl(server.baseUrl() + "/vllm").build()) {
      String url = server.baseUrl() + "/vllm";
      List<String> lines = logged("/vllm/v1/models",
          () -> assertNull(NodeMain.discoverBaseModel(url, null)));
      assertEquals(1, lines.size(), lines.toString());
      assertTrue(lines.get(0).contains("answered 404") && lines.get(0).contains("--engine"),
          lines.get(0));
      String health = NodeMain.healthWarning(engine, java.time.Duration.ofSeconds(10), url, false);
      assertTrue(health.contains("HTTP 404") && health.contains("--engine"), health);
    }
  }

  /**
   * Asking the server for its base model leaves no HTTP client's selector thread behind, on an
   * answer as on a failure. JDK 17's client cannot be closed, and the selector of the client
   * built for the question ran until the client was garbage collected, for as long as the node
   * ran if the heap stayed quiet.
   */
  @Test
  void askingForTheBaseModelLeavesNoSelectorThread() throws Exception {
    java.util.Set<Thread> before = SelectorThreads.now();
    try (io.github.prefixrouter.engine.openai.FakeOpenAiServer server =
        io.github.prefixrouter.engine.openai.FakeOpenAiServer.start(
            io.github.prefixrouter.engine.openai.FakeOpenAiServer.ECHO)) {
      assertEquals("fake-base", NodeMain.discoverBaseModel(server.baseUrl(), null));
    }
    assertEquals(null, NodeMain.discoverBaseModel("http://127.0.0.1:1", null), "nothing listening");
    assertEquals(List.of(), SelectorThreads.aliveAfterWaiting(SelectorThreads.since(before)),
        "alive after the base model was asked for");
  }

  @Test
  void timeoutFlagsReachTheAdapterTheTransportAndTheConfig() {
    NodeOptions o = parse("--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000",
        "--engine-request-timeout-ms", "900000", "--peer-max-handling-ms", "1200000",
        "--engine-timeout-ms", "1500000");
    assertEquals(java.time.Duration.ofMinutes(15), o.engineRequestTimeout);
    assertEquals(java.time.Duration.ofMinutes(20), o.peerMaxHandling);
    assertEquals(java.time.Duration.ofMinutes(25), o.config.engineTimeout());
    NodeOptions d = parse("--id", "a", "--listen", "h:1");
    assertEquals(null, d.engineRequestTimeout);
    assertEquals(null, d.peerMaxHandling);
    assertEquals(io.github.prefixrouter.RouterConfig.defaults().engineTimeout(),
        d.config.engineTimeout());
    for (String flag : new String[] {"--engine-request-timeout-ms", "--peer-max-handling-ms",
        "--engine-timeout-ms"}) {
      assertMessage(flag + " must be 1 to 365 days in milliseconds, was 0",
          () -> parse("--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000", flag,
              "0"));
      assertMessage("needs an integer", () -> parse("--id", "a", "--listen", "h:1", "--engine",
          "http://127.0.0.1:8000", flag, "1m"));
    }
    // the transport takes at most a day: a longer value must be a bad flag, not a failed start
    assertMessage("--peer-max-handling-ms must be at most a day (86400000 ms), was 86400001",
        () -> parse("--id", "a", "--listen", "h:1", "--peer-max-handling-ms", "86400001"));
    assertEquals(java.time.Duration.ofDays(1), parse("--id", "a", "--listen", "h:1",
        "--peer-max-handling-ms", "86400000").peerMaxHandling);
    assertEquals(java.time.Duration.ofSeconds(30), d.config.engineStallTimeout());
    assertEquals(java.time.Duration.ofSeconds(90), parse("--id", "a", "--listen", "h:1",
        "--engine-stall-ms", "90000").config.engineStallTimeout());
    assertEquals(java.time.Duration.ZERO, parse("--id", "a", "--listen", "h:1",
        "--engine-stall-ms", "0").config.engineStallTimeout());
    assertMessage("--engine-stall-ms must be 0 (never) to 365 days in milliseconds, was -1",
        () -> parse("--id", "a", "--listen", "h:1", "--engine-stall-ms", "-1"));
    assertEquals(3, d.config.engineFailureLimit());
    assertEquals(5, parse("--id", "a", "--listen", "h:1",
        "--engine-failures", "5").config.engineFailureLimit());
    assertEquals(0, parse("--id", "a", "--listen", "h:1",
        "--engine-failures", "0").config.engineFailureLimit());
    assertMessage("--engine-failures must be between 0 (never avoid a failing engine) and 1000,"
        + " was -1", () -> parse("--id", "a", "--listen", "h:1", "--engine-failures", "-1"));
    assertEquals(250_000, parse("--id", "a", "--listen", "h:1", "--initial-prefill-ns-per-token",
        "250000").config.initialPrefillNanosPerToken());
    assertMessage("--initial-prefill-ns-per-token", () -> parse("--id", "a", "--listen", "h:1",
        "--initial-prefill-ns-per-token", "0"));
    assertEquals(java.time.Duration.ZERO, parse("--id", "a", "--listen", "h:1",
        "--stream-interval-ms", "0").config.streamInterval());
    assertEquals(java.time.Duration.ofMillis(50), parse("--id", "a", "--listen", "h:1",
        "--stream-interval-ms", "50").config.streamInterval());
    assertEquals(io.github.prefixrouter.RouterConfig.defaults().streamInterval(),
        d.config.streamInterval());
    assertMessage("--stream-interval-ms", () -> parse("--id", "a", "--listen", "h:1",
        "--stream-interval-ms", "60000"));
    assertMessage("--engine-request-timeout-ms needs --engine URL",
        () -> parse("--id", "a", "--listen", "h:1", "--engine-request-timeout-ms", "1000"));
  }

  @Test
  void theTreeCapacityDefaultsToTheReferenceEnginesCache() {
    assertEquals(8192, parse("--id", "a", "--listen", "h:1", "--engine-cache-tokens", "8192")
        .config.treeCapacityTokens());
    assertEquals(65536, parse("--id", "a", "--listen", "h:1").config.treeCapacityTokens());
    assertEquals(4096, parse("--id", "a", "--listen", "h:1", "--engine-cache-tokens", "8192",
        "--tree-capacity-tokens", "4096").config.treeCapacityTokens());
    assertEquals(1 << 20, parse("--id", "a", "--listen", "h:1", "--engine",
        "http://127.0.0.1:8000").config.treeCapacityTokens());
  }

  /**
   * The node's KV-event subscriber runs the silence check {@code --kv-events-silence} asks for,
   * and the subscriber's own (32 requests, 60 s) without it: the node built the subscriber with
   * the defaults whatever the flags said.
   */
  @Test
  void theNodesKvEventSubscriberHasTheSilenceCheckOfItsFlag() throws Exception {
    int closed;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      closed = s.getLocalPort(); // nothing listens there: the subscriber keeps trying
    }
    try (var server = io.github.prefixrouter.engine.openai.FakeOpenAiServer.start(
        io.github.prefixrouter.engine.openai.FakeOpenAiServer.ECHO)) {
      for (String[] c : List.of(new String[] {"5,1500", "5", "1500"},
          new String[] {"0", "0", null}, new String[] {null, "32", "60000"})) {
        List<String> args = new java.util.ArrayList<>(List.of("--id", "k", "--listen",
            "127.0.0.1:0", "--client", "127.0.0.1:0", "--engine", server.baseUrl(), "--model",
            "fake-base", "--kv-events", "tcp://127.0.0.1:" + closed));
        if (c[0] != null) {
          args.addAll(List.of("--kv-events-silence", c[0]));
        }
        try (NodeMain.Running r = NodeMain.start(parse(args.toArray(new String[0])),
            new java.io.PrintStream(java.io.OutputStream.nullOutputStream()))) {
          var sub = assertInstanceOf(io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine.class,
              r.engine).kvEventSubscriber();
          assertEquals(Integer.parseInt(c[1]), subscriberField(sub, "silenceRequests"),
              String.valueOf(c[0]));
          if (c[2] != null) {
            assertEquals(java.time.Duration.ofMillis(Long.parseLong(c[2])).toNanos(),
                subscriberField(sub, "silenceNanos"), String.valueOf(c[0]));
          }
        }
      }
    }
  }

  /** A private field of the node's KV-event subscriber: its settings have no accessor. */
  private static Object subscriberField(Object sub, String name) throws ReflectiveOperationException {
    java.lang.reflect.Field f = sub.getClass().getDeclaredField(name);
    f.setAccessible(true);
    return f.get(sub);
  }

  @Test
  void theMirrorLimitFollowsTheTreeCapacityUnlessGiven() {
    assertEquals(1L << 24, parse("--id", "a", "--listen", "h:1", "--engine",
        "http://127.0.0.1:8000").config.mirrorLimitTokens());
    assertEquals(1L << 26, parse("--id", "a", "--listen", "h:1", "--engine",
        "http://127.0.0.1:8000", "--tree-capacity-tokens", "16777216").config.mirrorLimitTokens());
    assertEquals(3_000_000, parse("--id", "a", "--listen", "h:1", "--engine",
        "http://127.0.0.1:8000", "--kv-events", "tcp://127.0.0.1:5557", "--tree-capacity-tokens",
        "2000000", "--mirror-limit-tokens", "3000000").config.mirrorLimitTokens());
    assertMessage("--mirror-limit-tokens must be 0", () -> parse("--id", "a", "--listen", "h:1",
        "--tree-capacity-tokens", "4096", "--mirror-limit-tokens", "4095"));
  }

  @Test
  void aRestartedNodeStartsAHigherGossipGeneration() throws Exception {
    io.github.prefixrouter.RouterConfig c = parse("--id", "a", "--listen", "h:1").config;
    long first = NodeMain.withGossipGeneration(c).gossipGeneration();
    Thread.sleep(2);
    long second = NodeMain.withGossipGeneration(c).gossipGeneration();
    assertTrue(first > 1_600_000_000_000_000L, "not wall-clock microseconds: " + first);
    assertTrue(second > first, first + " then " + second);
    io.github.prefixrouter.RouterConfig set = c.toBuilder().gossipGeneration(7).build();
    assertEquals(7, NodeMain.withGossipGeneration(set).gossipGeneration());
  }

  @Test
  void engineSlotsAndInFlightCapAreFlagsOfTheOpenAiEngine() {
    NodeOptions o = parse("--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000",
        "--engine-slots", "8", "--engine-max-in-flight", "12");
    var e = o.openAiBuilder().build();
    assertEquals(8, e.slots());
    assertEquals(12, e.maxInFlight());
    assertEquals(16, parse("--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000",
        "--engine-slots", "8").openAiBuilder().build().maxInFlight());
    assertMessage("--engine-slots must be at least 1", () -> parse("--id", "a", "--listen", "h:1",
        "--engine", "http://127.0.0.1:8000", "--engine-slots", "0"));
    assertMessage("--engine-max-in-flight (4) must be at least --engine-slots (8)",
        () -> parse("--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000",
            "--engine-slots", "8", "--engine-max-in-flight", "4"));
    assertMessage("need --engine URL", () -> parse("--id", "a", "--listen", "h:1",
        "--engine-slots", "8"));
  }

  @Test
  void theReferenceEnginesFlagsAreRefusedWithAServerEngine() {
    // the server's own settings decide these: accepted, they would be silently ignored
    for (String flag : List.of("--engine-threads", "--engine-cache-tokens")) {
      assertMessage(flag + " needs --engine reference",
          () -> parse("--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000",
              flag, "4096"));
    }
    assertEquals(2, parse("--id", "a", "--listen", "h:1", "--engine-threads", "2").engineThreads);
  }

  /**
   * {@code --engine-seed} seeds the reference engine's weights only: with {@code --engine URL} it
   * was accepted and unused, so an operator who meant it to make a server's sampling repeatable
   * was told nothing. It is refused as the reference engine's other flags are; left out, its
   * default stands for the reference engine alone.
   */
  @Test
  void theReferenceEnginesSeedIsRefusedWithAServerEngine() {
    assertMessage("--engine-seed needs --engine reference",
        () -> parse("--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000",
            "--engine-seed", "7"));
    assertEquals(7, parse("--id", "a", "--listen", "h:1", "--engine-seed", "7").engineSeed);
    assertEquals(42, parse("--id", "a", "--listen", "h:1").engineSeed);
    parse("--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000");
  }

  @Test
  void theTokenizerIsTheEnginesUnlessAnotherOrNoneIsGiven() {
    assertInstanceOf(ReferenceTokenizer.class,
        NodeMain.tokenizer(parse("--id", "a", "--listen", "h:1")));
    assertEquals(java.net.URI.create("http://127.0.0.1:8000/tokenize"), ((EngineTokenizer)
        NodeMain.tokenizer(parse("--id", "a", "--listen", "h:1", "--engine",
            "http://127.0.0.1:8000/v1"))).uri());
    assertEquals(java.net.URI.create("http://10.0.0.9:30000/tokenize"), ((EngineTokenizer)
        NodeMain.tokenizer(parse("--id", "a", "--listen", "h:1", "--engine",
            "http://127.0.0.1:8000", "--tokenizer", "http://10.0.0.9:30000/tokenize"))).uri());
    assertEquals(java.net.URI.create("http://10.0.0.9:30000/tokenize"), ((EngineTokenizer)
        NodeMain.tokenizer(parse("--id", "a", "--listen", "h:1",
            "--tokenizer", "http://10.0.0.9:30000/tokenize"))).uri(),
        "the reference engine with a server's tokenizer");
    assertNull(NodeMain.tokenizer(parse("--id", "a", "--listen", "h:1", "--tokenizer", "none")));
    assertNull(NodeMain.tokenizer(parse("--id", "a", "--listen", "h:1", "--engine",
        "http://127.0.0.1:8000", "--tokenizer", "none")));
    assertMessage("--tokenizer must be auto, none or an http(s) URL", () -> parse("--id", "a",
        "--listen", "h:1", "--tokenizer", "vllm"));
    assertMessage("--tokenizer is not a URL", () -> parse("--id", "a", "--listen", "h:1",
        "--tokenizer", "http://bad host/tokenize"));
  }

  /**
   * {@code --tokenizer-answer-budget} is the heap the tokenizer's answers may hold at once, as
   * the node builds its tokenizer: that budget, and the largest answer cap one answer at which
   * fits it, at most 64 MiB; not given, 592 MiB and the cap of 64 MiB. The budget followed the
   * fixed cap, with no setting of its own.
   */
  @Test
  void theTokenizerIsBuiltWithItsAnswerBudget() {
    String[] engine = {"--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000"};
    // the caps: (budget - 16 MiB) / 9, at most 64 MiB
    Map<String, Integer> caps = Map.of("100m", 9_786_709, "25m", 1 << 20, "1g", 64 << 20);
    for (Map.Entry<String, Long> given : Map.of("100m", 100L << 20, "25m", 25L << 20,
        "1g", 1L << 30).entrySet()) {
      for (String[] args : List.of(engine, new String[] {"--id", "a", "--listen", "h:1",
          "--tokenizer", "http://10.0.0.9:30000/tokenize"})) {
        String[] all = java.util.stream.Stream.concat(java.util.Arrays.stream(args),
            java.util.stream.Stream.of("--tokenizer-answer-budget", given.getKey()))
            .toArray(String[]::new);
        EngineTokenizer t = (EngineTokenizer) NodeMain.tokenizer(parse(all));
        try {
          assertEquals(given.getValue(), t.answerBudgetAvailable(), "the tokenizer's answer "
              + "budget with " + String.join(" ", all));
          assertEquals(caps.get(given.getKey()), t.maxAnswerBytes(), "the tokenizer's answer "
              + "cap with " + String.join(" ", all));
        } finally {
          t.close();
        }
      }
    }
    EngineTokenizer byDefault = (EngineTokenizer) NodeMain.tokenizer(parse(engine));
    try {
      assertEquals(592L << 20, byDefault.answerBudgetAvailable(), "the default budget");
      assertEquals(64 << 20, byDefault.maxAnswerBytes(), "the default cap");
    } finally {
      byDefault.close();
    }
  }

  /**
   * A {@code --tokenizer} URL whose port no connection can have was accepted, as {@code --engine}'s
   * is not: the node started, and every text prompt and conversation was answered 502 ("port out
   * of range:99999").
   */
  @Test
  void aTokenizerPortOutsideOneTo65535IsABadFlag() {
    for (String port : List.of("65536", "99999", "0")) {
      assertMessage("--tokenizer needs a host an HTTP client can use", () -> parse("--id", "a",
          "--listen", "h:1", "--tokenizer", "http://10.0.0.9:" + port + "/tokenize"));
    }
    assertEquals(java.net.URI.create("http://10.0.0.9:65535/tokenize"),
        parse("--id", "a", "--listen", "h:1", "--tokenizer", "http://10.0.0.9:65535/tokenize")
            .tokenizerUri);
    assertEquals(java.net.URI.create("http://tok.example/tokenize"),
        parse("--id", "a", "--listen", "h:1", "--tokenizer", "http://tok.example/tokenize")
            .tokenizerUri, "no port: the scheme's");
  }

  @Test
  void theReaderLimitsAreFlagsAndConfigKeysCheckedLikeTheOthers() throws Exception {
    NodeOptions none = parse("--id", "a", "--listen", "h:1");
    assertEquals(List.of(0, 0, 0, 0), List.of(none.peerReaderThreads, none.peerMaxUnfinishedReads,
        none.clientReaderThreads, none.clientMaxUnfinishedReads), "not given: the defaults hold");
    NodeOptions o = parse("--id", "a", "--listen", "h:1", "--peer-reader-threads", "5",
        "--peer-max-unfinished-reads=2", "--client-reader-threads", "4096",
        "--client-max-unfinished-reads", "1");
    assertEquals(List.of(5, 2, 4096, 1), List.of(o.peerReaderThreads, o.peerMaxUnfinishedReads,
        o.clientReaderThreads, o.clientMaxUnfinishedReads));
    Path cfg = dir.resolve("limits.properties");
    Files.writeString(cfg, "id=n1\nlisten=127.0.0.1:7001\npeer-reader-threads=7\n"
        + "client-max-unfinished-reads=3\n");
    NodeOptions f = parse("--config", cfg.toString(), "--client-max-unfinished-reads", "9");
    assertEquals(7, f.peerReaderThreads);
    assertEquals(9, f.clientMaxUnfinishedReads, "the flag wins over the file");
    for (String flag : List.of("--peer-reader-threads", "--peer-max-unfinished-reads",
        "--client-reader-threads", "--client-max-unfinished-reads")) {
      assertTrue(NodeOptions.USAGE.contains("  " + flag + " N"), flag + " is not in --help");
      for (String bad : List.of("0", "-1", "4097")) {
        assertMessage(flag + " must be 1 to 4096, was " + bad,
            () -> parse("--id", "a", "--listen", "h:1", flag, bad));
      }
      assertMessage(flag + " needs an integer", () -> parse("--id", "a", "--listen", "h:1", flag, "x"));
      assertMessage(flag + " is out of range, was '4294967297'",
          () -> parse("--id", "a", "--listen", "h:1", flag, "4294967297"));
      assertMessage(flag + " must be 1 to 4096", () -> parse("--config",
          writeConfig("id=n1\nlisten=h:1\n" + flag.substring(2) + "=0\n").toString()));
    }
  }

  @Test
  void theClientBodyBudgetIsASizeOfAtLeastOneLargestRequest() throws Exception {
    assertEquals(0, parse("--id", "a", "--listen", "h:1").clientBodyBudget,
        "not given: the default holds");
    for (Map.Entry<String, Long> ok : Map.of("256m", 256L << 20, "73M", 73L << 20,
        "76546048", 76_546_048L, "1g", 1L << 30, "131072k", 128L << 20, " 2G ", 2L << 30)
        .entrySet()) {
      assertEquals(ok.getValue(), parse("--id", "a", "--listen", "h:1", "--client-body-budget",
          ok.getKey()).clientBodyBudget, ok.getKey());
    }
    assertEquals(100L << 20, parse("--config",
        writeConfig("id=n1\nlisten=h:1\nclient-body-budget=100m\n").toString())
        .clientBodyBudget);
    assertTrue(NodeOptions.USAGE.contains("  --client-body-budget SIZE"), "not in --help");
    for (String small : List.of("72m", "76546047", "0", "64k")) {
      assertMessage("--client-body-budget must be at least 73m (76546048 bytes: one request of "
          + "the largest body, 8 MiB, read or tokenized), was " + small,
          () -> parse("--id", "a", "--listen", "h:1", "--client-body-budget", small));
    }
    for (String bad : List.of("x", "256mb", "m", "-5m", "1.5g", "256 m", "0x10m", "")) {
      assertMessage("--client-body-budget needs a size: a number of bytes, or a number with k, "
          + "m or g (KiB, MiB, GiB) such as 256m; was '" + bad + "'",
          () -> parse("--id", "a", "--listen", "h:1", "--client-body-budget", bad));
    }
    for (String huge : List.of("8589934592g", "9223372036854775808")) {
      assertMessage("--client-body-budget is too large, was '" + huge + "'",
          () -> parse("--id", "a", "--listen", "h:1", "--client-body-budget", huge));
    }
  }

  @Test
  void theEngineAnswerBudgetIsASizeOfAtLeastOneLargestAnswer() throws Exception {
    String[] engine = {"--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000"};
    assertEquals(0, parse(engine).engineAnswerBudget, "not given: the engine's default holds");
    for (Map.Entry<String, Long> ok : Map.of("256m", 256L << 20, "192m", 192L << 20,
        "1g", 1L << 30).entrySet()) {
      NodeOptions o = parse(java.util.stream.Stream.concat(java.util.Arrays.stream(engine),
          java.util.stream.Stream.of("--engine-answer-budget", ok.getKey()))
          .toArray(String[]::new));
      assertEquals(ok.getValue(), o.engineAnswerBudget, ok.getKey());
      io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine built =
          o.openAiBuilder().build();
      built.close();
    }
    assertTrue(NodeOptions.USAGE.contains("  --engine-answer-budget SIZE"), "not in --help");
    for (String small : List.of("191m", "0", "64k")) {
      assertMessage("--engine-answer-budget must be at least 192m (201326592 bytes: one answer "
          + "of the largest size, 8 MiB, with its text, parsed JSON and output), was " + small,
          () -> parse(java.util.stream.Stream.concat(java.util.Arrays.stream(engine),
              java.util.stream.Stream.of("--engine-answer-budget", small))
              .toArray(String[]::new)));
    }
    assertMessage("--engine-answer-budget needs --engine URL",
        () -> parse("--id", "a", "--listen", "h:1", "--engine-answer-budget", "300m"));
  }

  /**
   * {@code --tokenizer-answer-budget} is a size of at least one answer of 1 MiB, 25m, given to a
   * tokenizer that asks a {@code /tokenize} endpoint (the server's, or a URL's), and refused as a
   * bad flag otherwise, as {@code --engine-answer-budget} is without {@code --engine URL}.
   */
  @Test
  void theTokenizerAnswerBudgetIsASizeOfAtLeastOneAnswerOf1MiB() throws Exception {
    String[] engine = {"--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000"};
    assertEquals(0, parse(engine).tokenizerAnswerBudget, "not given: the tokenizer's default");
    for (Map.Entry<String, Long> ok : Map.of("592m", 592L << 20, "25m", 25L << 20,
        "26214400", 26_214_400L, "1g", 1L << 30, " 100M ", 100L << 20).entrySet()) {
      assertEquals(ok.getValue(), parse(java.util.stream.Stream.concat(
          java.util.Arrays.stream(engine),
          java.util.stream.Stream.of("--tokenizer-answer-budget", ok.getKey()))
          .toArray(String[]::new)).tokenizerAnswerBudget, ok.getKey());
    }
    assertEquals(30L << 20, parse("--id", "a", "--listen", "h:1", "--tokenizer",
        "http://10.0.0.9:30000/tokenize", "--tokenizer-answer-budget", "30m")
        .tokenizerAnswerBudget, "the reference engine with a server's tokenizer");
    assertEquals(100L << 20, parse("--config", writeConfig("id=n1\nlisten=h:1\n"
        + "engine=http://127.0.0.1:8000\ntokenizer-answer-budget=100m\n").toString())
        .tokenizerAnswerBudget);
    assertTrue(NodeOptions.USAGE.contains("  --tokenizer-answer-budget SIZE"), "not in --help");
    for (String small : List.of("24m", "26214399", "0", "64k")) {
      assertMessage("--tokenizer-answer-budget must be at least 25m (26214400 bytes: one answer "
          + "of 1 MiB, with its text and parsed JSON), was " + small,
          () -> parse(java.util.stream.Stream.concat(java.util.Arrays.stream(engine),
              java.util.stream.Stream.of("--tokenizer-answer-budget", small))
              .toArray(String[]::new)));
    }
    for (String bad : List.of("x", "592mb", "-5m", "1.5g", "")) {
      assertMessage("--tokenizer-answer-budget needs a size: a number of bytes, or a number with "
          + "k, m or g (KiB, MiB, GiB) such as 256m; was '" + bad + "'",
          () -> parse(java.util.stream.Stream.concat(java.util.Arrays.stream(engine),
              java.util.stream.Stream.of("--tokenizer-answer-budget", bad))
              .toArray(String[]::new)));
    }
    assertMessage("--tokenizer-answer-budget needs a tokenizer that asks a /tokenize endpoint: "
        + "--engine URL (with --tokenizer auto) or --tokenizer URL (the reference engine's "
        + "per-character tokenizer reads no answers)",
        () -> parse("--id", "a", "--listen", "h:1", "--tokenizer-answer-budget", "100m"));
    assertMessage("--tokenizer-answer-budget needs a tokenizer that asks a /tokenize endpoint: "
        + "--engine URL (with --tokenizer auto) or --tokenizer URL (--tokenizer none takes "
        + "token ids only and reads no answers)",
        () -> parse("--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000",
            "--tokenizer", "none", "--tokenizer-answer-budget", "100m"));
  }

  @Test
  void thePeerBodyBudgetIsASizeOfAtLeastTwoLargestMessages() throws Exception {
    assertEquals(0, parse("--id", "a", "--listen", "h:1").peerBodyBudget,
        "not given: the transport's default holds");
    for (Map.Entry<String, Long> ok : Map.of("64m", 64L << 20, "8M", 8L << 20,
        "8388608", 8_388_608L, "1g", 1L << 30).entrySet()) {
      assertEquals(ok.getValue(), parse("--id", "a", "--listen", "h:1", "--peer-body-budget",
          ok.getKey()).peerBodyBudget, ok.getKey());
    }
    assertEquals(100L << 20, parse("--config",
        writeConfig("id=n1\nlisten=h:1\npeer-body-budget=100m\n").toString()).peerBodyBudget);
    assertTrue(NodeOptions.USAGE.contains("  --peer-body-budget SIZE"), "not in --help");
    for (String small : List.of("7m", "8388607", "0", "64k")) {
      assertMessage("--peer-body-budget must be at least 8m (8388608 bytes: one message of the "
          + "largest size, 4 MiB, while it is read), was " + small,
          () -> parse("--id", "a", "--listen", "h:1", "--peer-body-budget", small));
    }
    assertMessage("--peer-body-budget needs a size: a number of bytes, or a number with k, "
        + "m or g (KiB, MiB, GiB) such as 256m; was '64mb'",
        () -> parse("--id", "a", "--listen", "h:1", "--peer-body-budget", "64mb"));
  }

  /**
   * {@code --gossip-message-bytes} sets the node's {@link RouterConfig#gossipMessageBytes()}, a
   * size from 1k up to what the peer transport carries (its default maxMessageBytes, 4 MiB):
   * larger gossip messages would be dropped by the node's own transport.
   */
  @Test
  void theGossipMessageBytesIsASizeUpToWhatThePeerPortCarries() throws Exception {
    assertEquals(65_536, parse("--id", "a", "--listen", "h:1").config.gossipMessageBytes(),
        "not given: 64 KiB");
    for (Map.Entry<String, Integer> ok : Map.of("256k", 262_144, "1K", 1_024, "1024", 1_024,
        "4m", 4 << 20, "131072", 131_072).entrySet()) {
      assertEquals(ok.getValue(), parse("--id", "a", "--listen", "h:1", "--gossip-message-bytes",
          ok.getKey()).config.gossipMessageBytes(), ok.getKey());
    }
    assertEquals(2 << 20, parse("--config", writeConfig(
        "id=n1\nlisten=h:1\ngossip-message-bytes=2m\n").toString()).config.gossipMessageBytes());
    assertTrue(NodeOptions.USAGE.contains("  --gossip-message-bytes SIZE"), "not in --help");
    for (String bad : List.of("1023", "0", "4097k", "5m", "16m", "1g")) {
      assertMessage("--gossip-message-bytes must be 1k to 4m (1024 to 4194304 bytes: the peer "
          + "port carries no larger message), was " + bad,
          () -> parse("--id", "a", "--listen", "h:1", "--gossip-message-bytes", bad));
    }
    assertMessage("--gossip-message-bytes needs a size: a number of bytes, or a number with k, "
        + "m or g (KiB, MiB, GiB) such as 256m; was '64kb'",
        () -> parse("--id", "a", "--listen", "h:1", "--gossip-message-bytes", "64kb"));
  }

  @Test
  void theFlagsWithoutAValueTakeOnlyTrueOrFalseInTheConfigFile() throws Exception {
    // any value but exactly "false" turned insecure mode on: insecure=no, 0, False or an empty
    // value switched message authentication off
    for (String bad : List.of("no", "0", "", "off", "yes", "1", "falsee")) {
      assertMessage("--insecure must be true or false, was '" + bad + "'", () -> parse("--config",
          writeConfig("id=n1\nlisten=h:1\ninsecure=" + bad + "\n").toString()));
      assertMessage("--help must be true or false, was '" + bad + "'", () -> parse("--config",
          writeConfig("id=n1\nlisten=h:1\nhelp=" + bad + "\n").toString()));
      assertMessage("--insecure must be true or false, was '" + bad + "'",
          () -> parse("--id", "a", "--listen", "h:1", "--insecure=" + bad));
    }
    for (String off : List.of("false", "False", "FALSE")) {
      NodeOptions o = parse("--config", writeConfig("id=n1\nlisten=h:1\ninsecure=" + off
          + "\nhelp=" + off + "\n").toString());
      assertFalse(o.help, off);
      assertEquals(32, o.clusterKeys.get(0).length, "insecure=" + off + " keeps the cluster key");
    }
    for (String on : List.of("true", "True", "TRUE")) {
      assertNull(parseWithoutKey("--config", writeConfig("id=n1\nlisten=h:1\ninsecure=" + on
          + "\n").toString()).clusterKeys, "insecure=" + on);
      assertTrue(parse("--config", writeConfig("help=" + on + "\n").toString()).help, on);
    }
    Path insecure = writeConfig("id=n1\nlisten=h:1\ninsecure=true\n");
    assertNull(parseWithoutKey("--config", insecure.toString()).clusterKeys);
    assertEquals(32, parse("--config", insecure.toString(), "--insecure=false").clusterKeys.get(0)
        .length, "the flag wins over the file");
    assertNull(parseWithoutKey("--id", "a", "--listen", "h:1", "--insecure").clusterKeys);
    assertTrue(parse("--help").help);
  }

  @Test
  void anInFlightCapAloneSetsTheSlotsUpTo256() throws Exception {
    String[] engine = {"--id", "a", "--listen", "h:1", "--engine", "http://127.0.0.1:8000"};
    var none = parse(engine).openAiBuilder().build();
    assertEquals(List.of(256, 512), List.of(none.slots(), none.maxInFlight()));
    var low = parse(concat(engine, "--engine-max-in-flight", "100")).openAiBuilder().build();
    assertEquals(List.of(100, 100), List.of(low.slots(), low.maxInFlight()));
    var high = parse(concat(engine, "--engine-max-in-flight", "1000")).openAiBuilder().build();
    assertEquals(List.of(256, 1000), List.of(high.slots(), high.maxInFlight()));
  }

  private static String[] concat(String[] a, String... b) {
    String[] out = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }

  private Path writeConfig(String text) throws IOException {
    Path p = Files.createTempFile(dir, "node", ".properties");
    Files.writeString(p, text);
    return p;
  }

  private static void assertMessage(String fragment, org.junit.jupiter.api.function.Executable e) {
    IllegalArgumentException x = assertThrows(IllegalArgumentException.class, e);
    assertTrue(x.getMessage().contains(fragment), "'" + x.getMessage() + "' should mention '" + fragment + "'");
  }

  @Test
  void servesClientRequestsOverHttpAndReportsStats() throws Exception {
    Path ready = dir.resolve("ready");
    NodeOptions o = parse("--id", "solo", "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0",
        "--ready-file", ready.toString());
    try (NodeMain.Running r = NodeMain.start(o)) {
      assertTrue(Files.readString(ready).contains("client=" + r.clientAddress));
      HttpClient c = HttpClient.newHttpClient();
      String body = "{\"id\":\"q1\",\"prompt\":[5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21],\"max_tokens\":3}";
      HttpResponse<String> resp = c.send(HttpRequest.newBuilder(URI.create("http://" + r.clientAddress + "/v1/route/completions"))
          .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
      assertEquals(200, resp.statusCode(), resp.body());
      Map<?, ?> m = (Map<?, ?>) Json.parse(resp.body());
      assertEquals("q1", m.get("id"));
      assertEquals("solo", m.get("served_by"));
      assertEquals(3, ((List<?>) m.get("token_ids")).size());
      assertEquals(17L, m.get("prompt_tokens"));
      // bad input gets a 400 that names the problem
      HttpResponse<String> bad = c.send(HttpRequest.newBuilder(URI.create("http://" + r.clientAddress + "/v1/route/completions"))
          .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":[]}")).build(), HttpResponse.BodyHandlers.ofString());
      assertEquals(400, bad.statusCode());
      assertTrue(bad.body().contains("at least one token"), bad.body());
      HttpResponse<String> stats = c.send(HttpRequest.newBuilder(URI.create("http://" + r.clientAddress + "/v1/stats")).build(),
          HttpResponse.BodyHandlers.ofString());
      Map<?, ?> s = (Map<?, ?>) Json.parse(stats.body());
      assertEquals(1L, s.get("requests"));
      assertEquals(1L, ((Map<?, ?>) s.get("engine")).get("requests"));
      // every transport counter reaches the operator (dropped messages, slow connections, ...)
      Map<?, ?> transport = (Map<?, ?>) s.get("transport");
      for (var rc : HttpTransport.Stats.class.getRecordComponents()) {
        String key = rc.getName().replaceAll("([A-Z])", "_$1").toLowerCase(java.util.Locale.ROOT);
        assertTrue(transport.containsKey(key), "/v1/stats lacks transport." + key + ": " + transport);
      }
      Map<?, ?> client = (Map<?, ?>) s.get("client");
      assertEquals(0L, client.get("slow_connections_closed"), String.valueOf(s));
      assertEquals(0L, client.get("rejected_busy"), String.valueOf(s));
    }
  }

  @Test
  void aDemoNodeEndsItsAnswersAtTheFirstStopWholeAndStreamed() throws Exception {
    NodeOptions o = parse("--id", "solo", "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0");
    try (NodeMain.Running r = NodeMain.start(o)) {
      HttpClient c = HttpClient.newHttpClient();
      URI uri = URI.create("http://" + r.clientAddress + "/v1/completions");
      String base = "\"prompt\":\"Question: why?\\nAnswer:\",\"max_tokens\":40,\"seed\":5,"
          + "\"temperature\":0.9";
      Map<?, ?> plain = (Map<?, ?>) Json.parse(c.send(HttpRequest.newBuilder(uri)
          .POST(HttpRequest.BodyPublishers.ofString("{" + base + "}")).build(),
          HttpResponse.BodyHandlers.ofString()).body());
      String text = (String) ((Map<?, ?>) ((List<?>) plain.get("choices")).get(0)).get("text");
      assertEquals(40, text.codePointCount(0, text.length()), text);
      // a stop string the answer holds: two of its characters from the middle
      int at = text.offsetByCodePoints(0, 12);
      String stop = text.substring(at, text.offsetByCodePoints(at, 2));
      String want = text.substring(0, text.indexOf(stop));
      String withStop = "{" + base + ",\"stop\":[" + Json.write(stop) + "]}";
      Map<?, ?> cut = (Map<?, ?>) Json.parse(c.send(HttpRequest.newBuilder(uri)
          .POST(HttpRequest.BodyPublishers.ofString(withStop)).build(),
          HttpResponse.BodyHandlers.ofString()).body());
      Map<?, ?> choice = (Map<?, ?>) ((List<?>) cut.get("choices")).get(0);
      assertEquals(want, choice.get("text"), cut.toString());
      assertEquals("stop", choice.get("finish_reason"));
      assertEquals(stop, choice.get("stop_reason"));
      // the engine stopped at the token that completed the stop: one token per character
      long tokens = want.codePointCount(0, want.length()) + 2;
      assertEquals(tokens, ((Map<?, ?>) cut.get("usage")).get("completion_tokens"));
      // streamed: the chunks' texts are the whole answer's
      String streamed = c.send(HttpRequest.newBuilder(uri).POST(HttpRequest.BodyPublishers
          .ofString(withStop.replace("}", ",\"stream\":true}"))).build(),
          HttpResponse.BodyHandlers.ofString()).body();
      StringBuilder chunks = new StringBuilder();
      for (Object e : Sse.parse(streamed)) {
        if (e instanceof Map<?, ?> m) {
          chunks.append(((Map<?, ?>) ((List<?>) m.get("choices")).get(0)).get("text"));
        }
      }
      assertEquals(want, chunks.toString());
      // the engine generated the tokens through the stop, not up to max_tokens, each time
      assertEquals(40 + 2 * tokens,
          ((io.github.prefixrouter.engine.reference.ReferenceEngine) r.engine).stats()
              .generatedTokens());
    }
  }
}
