package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.testing.FailingJcaProvider;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What {@link NodeMain#main} prints and the status it exits with, through {@link
 * NodeMain#launch}: a node that cannot start says in one line which part failed and why, with
 * no stack trace (it printed the JVM's), and exits with 1; bad flags exit with 2.
 */
class NodeMainLaunchTest {

  @TempDir Path dir;

  private static final Map<String, String> ENV = Map.of(
      "PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX, "PREFIX_ROUTER_TLS_PASSWORD", "changeit",
      "PREFIX_ROUTER_CLIENT_TLS_PASSWORD", "changeit");

  /** The status, and what was printed to stderr and stdout. */
  private record Outcome(NodeMain.Launch launch, String err, String out) {}

  private static Outcome launch(String... args) {
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    Map<String, String> env = new java.util.HashMap<>(ENV);
    for (String secret : List.of("cluster-key-file", "tls-password-file",
        "client-tls-password-file")) { // a file given instead of its variable: not both
      if (List.of(args).contains("--" + secret)) {
        env.remove(Map.of("cluster-key-file", "PREFIX_ROUTER_CLUSTER_KEY", "tls-password-file",
            "PREFIX_ROUTER_TLS_PASSWORD", "client-tls-password-file",
            "PREFIX_ROUTER_CLIENT_TLS_PASSWORD").get(secret));
      }
    }
    // a port's TLS password is in the environment only where the port has TLS
    if (!List.of(args).contains("--tls-keystore")) {
      env.remove("PREFIX_ROUTER_TLS_PASSWORD");
    }
    if (!List.of(args).contains("--client-tls-keystore")) {
      env.remove("PREFIX_ROUTER_CLIENT_TLS_PASSWORD");
    }
    NodeMain.Launch l = NodeMain.launch(args, env,
        new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
    return new Outcome(l, err.toString(StandardCharsets.UTF_8), out.toString(StandardCharsets.UTF_8));
  }

  /**
   * A node's banner and the stats line its stop prints go to the stream launch() was given for
   * output, as {@code --help} does: they went to {@code System.out} whatever the caller passed.
   */
  @Test
  void theBannerAndTheStatsLineGoToTheOutputStreamGiven() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    NodeMain.Launch l = NodeMain.launch(new String[] {"--id", "printed", "--listen",
        "127.0.0.1:0", "--client", "127.0.0.1:0", "--insecure"}, Map.of(),
        new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
    assertEquals(0, l.status(), err.toString(StandardCharsets.UTF_8));
    l.running().close();
    List<String> lines = out.toString(StandardCharsets.UTF_8).lines().toList();
    assertEquals(2, lines.size(), "not the banner and the stats line: " + lines);
    assertTrue(lines.get(0).startsWith("node printed serving: "), lines.get(0));
    assertTrue(lines.get(1).startsWith("node printed stopped: requests=0 "), lines.get(1));
    // the gossip layer's health too: dropped and rejected messages, peers declared dead, and
    // whether another process ran with this node's id
    assertTrue(lines.get(1).contains(" gossipMalformed=0 gossipRejected=0 peersDeclaredDead=0 "
        + "nodeIdInUse=false "), lines.get(1));
  }

  /**
   * The banner names a tokenizer that asks a {@code /tokenize} with the cap on its answers and
   * its answer budget ({@code --tokenizer-answer-budget}), which it used to leave out.
   */
  @Test
  void theBannerNamesTheTokenizersCapAndAnswerBudget() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    NodeMain.Launch l = NodeMain.launch(new String[] {"--id", "printed", "--listen",
        "127.0.0.1:0", "--client", "127.0.0.1:0", "--insecure", "--tokenizer",
        "http://127.0.0.1:1/tokenize", "--tokenizer-answer-budget", "100m"}, Map.of(),
        new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
    assertEquals(0, l.status(), err.toString(StandardCharsets.UTF_8));
    l.running().close();
    String banner = out.toString(StandardCharsets.UTF_8).lines().findFirst().orElse("");
    assertTrue(banner.contains(", tokenizer http://127.0.0.1:1/tokenize (answers up to "
        + "9786709 bytes, 104857600 bytes at once), "), banner);
  }

  /** A failed start: status 1, no node, and one line on stderr that is {@code expected}. */
  private static void failsToStart(String expected, String... args) {
    Outcome o = launch(args);
    assertNull(o.launch().running());
    assertEquals(1, o.launch().status(), o.err());
    List<String> lines = o.err().lines().toList();
    assertEquals(1, lines.size(), "not one line: " + o.err());
    assertEquals(expected, lines.get(0));
    assertFalse(o.err().contains("\tat ") || o.err().contains("Exception:")
        || o.err().contains("java."), "a stack trace or an exception's toString: " + o.err());
  }

  @Test
  void aPortInUseIsOneLineNamingThePortAndStatus1() throws Exception {
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      int p = taken.getLocalPort();
      failsToStart("error: node c1 could not start: the client port 127.0.0.1:" + p
          + ": Address already in use",
          "--id", "c1", "--listen", "127.0.0.1:0", "--client", "127.0.0.1:" + p);
      failsToStart("error: node p1 could not start: the peer port 127.0.0.1:" + p
          + ": Address already in use", "--id", "p1", "--listen", "127.0.0.1:" + p);
    }
  }

  @Test
  void aFileThatCannotBeUsedIsOneLineNamingIt() throws Exception {
    Path cut = Files.write(dir.resolve("node.p12"), new byte[] {0x30, (byte) 0x82, 0x01});
    failsToStart("error: node t1 could not start: the TLS files: cannot load " + cut
        + ": it is not a PKCS12 store, or it is damaged or cut short (EOFException)",
        "--id", "t1", "--listen", "127.0.0.1:0", "--tls-keystore", cut.toString());
    Path absent = dir.resolve("absent.p12");
    failsToStart("error: node t2 could not start: the TLS files: cannot read " + absent
        + ": no such file", "--id", "t2", "--listen", "127.0.0.1:0",
        "--tls-keystore", absent.toString());
    Path ready = dir.resolve("gone").resolve("ready");
    failsToStart("error: node r1 could not start: the ready file " + ready + ": " + ready
        + ".tmp: no such file", "--id", "r1", "--listen", "127.0.0.1:0",
        "--ready-file", ready.toString());
  }

  /**
   * A TLS file whose loading throws something else than the JDK's exceptions for a bad file is
   * one line naming the file and status 1, as a file that cannot be loaded is: here a JCA
   * provider (a hardware token's, say) throwing as the keystore, the key manager or the trust
   * manager is looked up, a {@link java.security.ProviderException}, an {@link Error}, a checked
   * exception thrown undeclared. A {@link RuntimeException} gave a line naming what was thrown
   * but not the file, and an {@link Error} escaped the start, the JVM printing its stack trace.
   */
  @Test
  void aTlsFileWhoseLoadingThrowsIsOneLineNamingIt() throws Exception {
    Path key = TlsCertificates.keystore(dir, "t3");
    Path trust = TlsCertificates.truststore(dir, dir.resolve("trust.p12"), "t3");
    String peer = "error: node t3 could not start: the TLS files: ";
    String client = "error: node t4 could not start: the client TLS files "
        + "(--client-tls-keystore, --client-tls-truststore): ";
    // where the provider throws, what, and the line expected
    List<Object[]> cases = List.of(
        new Object[] {FailingJcaProvider.lookup("KeyStore"),
            new java.security.ProviderException("token removed"),
            peer + "cannot load " + key + ": the JDK or a JCA provider failed reading it: "
                + "token removed (ProviderException)"},
        new Object[] {FailingJcaProvider.lookup("KeyManagerFactory"),
            new InternalError("token driver"),
            peer + "cannot use " + key + ": the JDK or a JCA provider failed setting it up: "
                + "token driver (InternalError)"},
        new Object[] {FailingJcaProvider.lookup("TrustManagerFactory"),
            new IOException("token unreachable"),
            client + "cannot use " + trust + ": the JDK or a JCA provider failed setting it up: "
                + "token unreachable (IOException)"});
    String[][] args = {
        {"--id", "t3", "--listen", "127.0.0.1:0", "--tls-keystore", key.toString()},
        {"--id", "t3", "--listen", "127.0.0.1:0", "--tls-keystore", key.toString()},
        {"--id", "t4", "--listen", "127.0.0.1:0", "--client-tls-keystore", key.toString(),
            "--client-tls-truststore", trust.toString()}};
    java.security.Provider hsm = FailingJcaProvider.provider();
    List<String> problems = new java.util.ArrayList<>();
    for (int i = 0; i < cases.size(); i++) {
      Object[] c = cases.get(i);
      FailingJcaProvider.at = (String) c[0];
      FailingJcaProvider.toThrow = (Throwable) c[1];
      assertTrue(java.security.Security.insertProviderAt(hsm, 1) > 0, "provider installed");
      try {
        failsToStart((String) c[2], args[i]);
      } catch (AssertionError e) {
        problems.add("failing at " + c[0] + ": " + e.getMessage());
      } catch (Throwable e) {
        problems.add("failing at " + c[0] + ": the start threw " + e);
      } finally {
        FailingJcaProvider.toThrow = null;
        java.security.Security.removeProvider(hsm.getName());
      }
    }
    assertEquals(List.of(), problems, "what starts whose TLS files' loading throws did");
  }

  /**
   * Something else than a bad file or flag thrown as the node starts, an {@link Error} included
   * (here a JCA provider, a hardware token's say, throwing as the TLS context is looked up), is
   * one line naming the part that failed and what was thrown, its type and message, and status
   * 1, the ports it had bound released: an {@code Error} escaped the start, the JVM printing its
   * stack trace. The line names the TLS files too, which it did not
   * ({@code the TLS files: InternalError: token driver}).
   */
  @Test
  void anErrorAsTheNodeStartsIsOneLineNamingWhatWasThrown() throws Exception {
    Path key = TlsCertificates.keystore(dir, "t5");
    java.security.Provider hsm = FailingJcaProvider.provider();
    List<String> problems = new java.util.ArrayList<>();
    int port;
    try (ServerSocket free = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = free.getLocalPort();
    }
    for (Throwable thrown : List.of(new InternalError("token driver"),
        new AssertionError("a provider that breaks"))) {
      FailingJcaProvider.at = FailingJcaProvider.lookup("SSLContext");
      FailingJcaProvider.toThrow = thrown;
      assertTrue(java.security.Security.insertProviderAt(hsm, 1) > 0, "provider installed");
      try {
        failsToStart("error: node t5 could not start: the TLS files: cannot set up TLS with "
            + key + ": the JDK or a JCA provider failed setting up its context: "
            + thrown.getMessage() + " (" + thrown.getClass().getSimpleName() + ")",
            "--id", "t5", "--listen", "127.0.0.1:" + port, "--tls-keystore", key.toString());
      } catch (Throwable e) { // an AssertionError of failsToStart, or what the start threw
        problems.add(thrown + ": " + (e == thrown ? "the start threw it" : e.getMessage()));
      } finally {
        FailingJcaProvider.toThrow = null;
        java.security.Security.removeProvider(hsm.getName());
      }
    }
    assertEquals(List.of(), problems, "what starts that threw an Error did");
    try (ServerSocket again = new ServerSocket(port, 1, InetAddress.getLoopbackAddress())) {
      assertEquals(port, again.getLocalPort(), "the peer port released");
    }
  }

  /**
   * The engine adapter is closed when the start fails after it was built, as every part started
   * is: it was built before the block that closes what had started, so that a throw in between
   * (an {@link Error} of the host's proxy selector as the start's health check asked it the
   * engine's route, before the health check took that for no answer; here the TLS files that
   * cannot be read, which come next) left its HTTP client's selector thread running for as long
   * as the process did.
   */
  @Test
  void anEngineBuiltBeforeAFailedStartIsClosed() throws Exception {
    java.util.Set<Thread> before = engineClientThreads();
    Path absent = dir.resolve("absent.p12");
    // --model: no model list asked for, whose own client is ended as it returns
    failsToStart("error: node e1 could not start: the TLS files: cannot read " + absent
        + ": no such file", "--id", "e1", "--listen", "127.0.0.1:0", "--engine",
        "http://127.0.0.1:1", "--model", "m", "--tls-keystore", absent.toString());
    long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
    java.util.Set<Thread> left = engineClientThreads();
    left.removeAll(before);
    while (!left.isEmpty() && System.nanoTime() < deadline) {
      Thread.sleep(20);
      left.retainAll(engineClientThreads());
    }
    assertEquals(java.util.Set.of(), left, "the engine's HTTP client threads still running 10 s "
        + "after the failed start");
  }

  /** The live threads of the engine adapters' HTTP clients (their selector threads). */
  private static java.util.Set<Thread> engineClientThreads() {
    java.util.Set<Thread> out = new java.util.HashSet<>();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      ThreadGroup g = t.getThreadGroup();
      if (t.isAlive() && g != null && g.getName().equals("prefix-router-openai-client-build")) {
        out.add(t);
      }
    }
    return out;
  }

  /**
   * The shutdown hook is in place before the node serves: it used to be registered only once the
   * ready file was written, so a SIGTERM sent as the file appeared (a script waiting for it and
   * stopping the node at once) found no hook, and the JVM exited leaving the ready file of a
   * node that no longer ran. The hook stops the node and removes the file.
   */
  @Test
  void theShutdownHookIsInPlaceBeforeTheReadyFileAppears() throws Exception {
    Path ready = dir.resolve("ready");
    java.util.concurrent.CompletableFuture<Boolean> readyAtRegistration =
        new java.util.concurrent.CompletableFuture<>();
    java.util.concurrent.atomic.AtomicReference<Thread> hook =
        new java.util.concurrent.atomic.AtomicReference<>();
    java.util.concurrent.CompletableFuture<Integer> status =
        java.util.concurrent.CompletableFuture.supplyAsync(() -> {
          try {
            return NodeMain.serve(new String[] {"--id", "h1", "--listen", "127.0.0.1:0",
                "--ready-file", ready.toString()},
                Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX), new PrintStream(
                    new ByteArrayOutputStream(), true, StandardCharsets.UTF_8),
                new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8),
                h -> {
                  readyAtRegistration.complete(Files.exists(ready));
                  hook.set(h);
                });
          } catch (InterruptedException e) {
            throw new IllegalStateException(e);
          }
        });
    assertFalse(readyAtRegistration.get(60, java.util.concurrent.TimeUnit.SECONDS),
        "the shutdown hook was registered after the ready file was written");
    io.github.prefixrouter.testing.Await.until(() -> Files.exists(ready), "the ready file");
    hook.get().start(); // SIGTERM
    hook.get().join(60_000);
    assertEquals(0, status.get(60, java.util.concurrent.TimeUnit.SECONDS));
    assertFalse(Files.exists(ready), "the ready file outlived the node");
  }

  /**
   * A ready file that cannot be moved in place (here a directory with a file in it took its
   * name) fails with the move's error and leaves no {@code .tmp} behind: the temporary file
   * used to stay, next to where a script waits for the ready file.
   */
  @Test
  void aReadyFileThatCannotBeMovedInPlaceLeavesNoTemporaryFile() throws Exception {
    Path ready = Files.createDirectory(dir.resolve("ready"));
    Files.writeString(ready.resolve("in the way"), "x");
    assertThrows(IOException.class, () -> NodeMain.writeReadyFile(ready, "peer=a client=b\n"));
    assertFalse(Files.exists(dir.resolve("ready.tmp")), "the temporary file was left behind");
    assertTrue(Files.isDirectory(ready));
    Path fine = dir.resolve("fine");
    NodeMain.writeReadyFile(fine, "peer=a client=b\n");
    assertEquals("peer=a client=b\n", Files.readString(fine));
    assertFalse(Files.exists(dir.resolve("fine.tmp")));
  }

  /**
   * A ready file that cannot be written (its directory missing) fails the start before a port
   * opens: it was found only once the node served, its ports open, its seeds joined and
   * "serving" printed, and the node then stopped again; here, with the client port taken too,
   * the ready file is what the start names.
   */
  @Test
  void aReadyFileThatCannotBeWrittenFailsTheStartBeforeAPortOpens() throws Exception {
    Path ready = dir.resolve("gone").resolve("ready");
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      failsToStart("error: node r2 could not start: the ready file " + ready + ": " + ready
          + ".tmp: no such file", "--id", "r2", "--listen", "127.0.0.1:0", "--client",
          "127.0.0.1:" + taken.getLocalPort(), "--ready-file", ready.toString());
    }
    // a directory it can be written in: the file once serving, nothing else left there
    Path here = dir.resolve("ready");
    Outcome ok = launch("--id", "r3", "--listen", "127.0.0.1:0", "--ready-file", here.toString());
    try (NodeMain.Running r = ok.launch().running()) {
      assertTrue(r != null, ok.err());
      assertTrue(Files.readString(here).startsWith("peer=127.0.0.1:"));
      assertFalse(Files.exists(dir.resolve("ready.tmp")));
    }
    assertFalse(Files.exists(here), "removed on stop");
  }

  @Test
  void aClientTlsFileThatCannotBeUsedIsOneLineNamingItsFlag() throws Exception {
    Path cut = Files.write(dir.resolve("client.p12"), new byte[] {0x30, (byte) 0x82, 0x01});
    failsToStart("error: node c1 could not start: the client TLS files (--client-tls-keystore): "
        + "cannot load " + cut + ": it is not a PKCS12 store, or it is damaged or cut short "
        + "(EOFException)",
        "--id", "c1", "--listen", "127.0.0.1:0", "--client-tls-keystore", cut.toString());
    Path absent = dir.resolve("absent.p12");
    failsToStart("error: node c2 could not start: the client TLS files (--client-tls-keystore): "
        + "cannot read " + absent + ": no such file",
        "--id", "c2", "--listen", "127.0.0.1:0", "--client-tls-keystore", absent.toString());
    Path key = TlsCertificates.keystore(dir, "c");
    failsToStart("error: node c3 could not start: the client TLS files (--client-tls-keystore, "
        + "--client-tls-truststore): cannot read " + absent + ": no such file",
        "--id", "c3", "--listen", "127.0.0.1:0", "--client-tls-keystore", key.toString(),
        "--client-tls-truststore", absent.toString());
    Path wrong = Files.writeString(dir.resolve("wrong.password"), "wrong\n");
    failsToStart("error: node c4 could not start: the client TLS files (--client-tls-keystore): "
        + "cannot load " + key + ": the password is wrong (--client-tls-password-file or "
        + "PREFIX_ROUTER_CLIENT_TLS_PASSWORD), or the file is damaged",
        "--id", "c4", "--listen", "127.0.0.1:0", "--client-tls-keystore", key.toString(),
        "--client-tls-password-file", wrong.toString());
    Outcome bad = launch("--id", "c5", "--listen", "127.0.0.1:0", "--client-tls-truststore",
        key.toString());
    assertEquals(2, bad.launch().status());
    assertNull(bad.launch().running());
    assertTrue(bad.err().startsWith(
        "error: --client-tls-truststore needs --client-tls-keystore"), bad.err());
  }

  /**
   * With --tls-bind-node-ids true, a peer keystore whose certificate does not name the node's id
   * (names another id, or has the id only as its common name) is a failed start, as every
   * message the node sent would be refused; without the flag the same files start, and the
   * client port's certificate is not held to the id.
   */
  @Test
  void aPeerCertificateThatDoesNotNameTheNodeIsAFailedStartWhenNodeIdsAreBound() throws Exception {
    Path other = TlsCertificates.keystore(dir, "n2", "dns:n2,ip:127.0.0.1");
    failsToStart("error: node n1 could not start: the TLS files: the certificate in " + other
        + " (CN=n2, names [n2]) does not name this node's id n1, which --tls-bind-node-ids needs",
        "--id", "n1", "--listen", "127.0.0.1:0", "--tls-keystore", other.toString(),
        "--tls-bind-node-ids", "true");
    Path commonNameOnly = TlsCertificates.keystore(dir, "n1", "ip:127.0.0.1");
    failsToStart("error: node n1 could not start: the TLS files: the certificate in "
        + commonNameOnly + " (CN=n1, names []) does not name this node's id n1, which "
        + "--tls-bind-node-ids needs",
        "--id", "n1", "--listen", "127.0.0.1:0", "--tls-keystore", commonNameOnly.toString(),
        "--tls-bind-node-ids", "true");
    Outcome unbound = launch("--id", "n1", "--listen", "127.0.0.1:0", "--tls-keystore",
        other.toString(), "--tls-bind-node-ids", "false");
    try (NodeMain.Running r = unbound.launch().running()) {
      assertEquals(0, unbound.launch().status(), unbound.err());
      assertTrue(r != null, unbound.err());
    }
    Path named = TlsCertificates.keystore(dir, "n3", "dns:n3,ip:127.0.0.1");
    Outcome bound = launch("--id", "n3", "--listen", "127.0.0.1:0", "--tls-keystore",
        named.toString(), "--tls-bind-node-ids", "true", "--client-tls-keystore",
        other.toString());
    try (NodeMain.Running r = bound.launch().running()) {
      assertEquals(0, bound.launch().status(), bound.err());
      assertTrue(r != null, bound.err());
    }
  }

  @Test
  void badFlagsAreStatus2WithTheUsageAndHelpIsStatus0() {
    Outcome bad = launch("--id", "a", "--listen", "h:1", "--watermarks", "16,32,");
    assertEquals(2, bad.launch().status());
    assertTrue(bad.err().startsWith("error: --watermarks must be LOW,HIGH"), bad.err());
    assertTrue(bad.err().contains(NodeOptions.USAGE), bad.err());
    Outcome help = launch("--help");
    assertEquals(0, help.launch().status());
    assertNull(help.launch().running());
    assertEquals(NodeOptions.USAGE + System.lineSeparator(), help.out());
  }

  /**
   * {@code -h} is {@code --help}, as every benchmarks/run command takes it: it was refused as
   * "unexpected argument '-h'" with the usage and status 2. As a flag's value it stays a value.
   */
  @Test
  void minusHIsHelpAsEverywhere() {
    for (String[] args : List.of(new String[] {"-h"}, new String[] {"--id", "a", "-h"})) {
      Outcome help = launch(args);
      assertEquals(0, help.launch().status(), List.of(args) + ": " + help.err());
      assertNull(help.launch().running());
      assertEquals(NodeOptions.USAGE + System.lineSeparator(), help.out());
      assertEquals("", help.err());
    }
    NodeOptions asValue = NodeOptions.parse(new String[] {"--id", "-h", "--listen", "h:1"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
    assertEquals("-h", asValue.id);
    assertFalse(asValue.help);
    assertTrue(NodeOptions.USAGE.contains("\n  --help, -h "), "--help does not name -h");
  }

  /**
   * Help asked twice, {@code -h} and {@code --help} (a wrapper's own and the user's), is help:
   * it was refused with status 2 as "--help is given twice: 'true' and 'true'", which names
   * neither of what was typed.
   */
  @Test
  void helpAskedTwiceIsHelp() {
    for (String[] args : List.of(new String[] {"-h", "--help"}, new String[] {"--help", "-h"},
        new String[] {"-h", "-h"}, new String[] {"--id", "a", "--help=true", "-h"})) {
      Outcome help = launch(args);
      assertEquals(0, help.launch().status(), List.of(args) + ": " + help.err());
      assertEquals(NodeOptions.USAGE + System.lineSeparator(), help.out());
      assertEquals("", help.err());
    }
  }

  /**
   * Help on the command line wins over a {@code --config} that cannot be read (a wrapper's
   * default path, missing where the user only asks for the usage): the file was read first,
   * and the missing file exited 2 instead of printing the help.
   */
  @Test
  void helpWinsOverAConfigThatCannotBeRead() throws Exception {
    String missing = dir.resolve("missing.properties").toString();
    java.nio.file.Path bad = dir.resolve("bad.properties");
    java.nio.file.Files.writeString(bad, "no-such-key=1\n");
    for (String[] args : List.of(new String[] {"--help", "--config", missing},
        new String[] {"--config", missing, "-h"}, new String[] {"--config", bad.toString(),
            "--help"}, new String[] {"--config", dir.toString(), "--help=true"})) {
      Outcome help = launch(args);
      assertEquals(0, help.launch().status(), List.of(args) + ": " + help.err());
      assertEquals(NodeOptions.USAGE + System.lineSeparator(), help.out());
      assertEquals("", help.err());
    }
    // help turned off on the command line still reads the file, and refuses the missing one
    assertEquals(2, launch("--help=false", "--config", missing).launch().status());
  }

  @Test
  void aNodeThatStartsIsHandedBack() throws Exception {
    Outcome o = launch("--id", "ok", "--listen", "127.0.0.1:0");
    assertEquals(0, o.launch().status());
    try (NodeMain.Running r = o.launch().running()) {
      assertEquals("", o.err());
      assertTrue(r.clientAddress.startsWith("127.0.0.1:"));
    }
  }
}
