package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.json.Json;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.KeyStore;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link NodeMain} nodes with {@code --tls-bind-node-ids true}: nodes whose certificates name
 * them gossip and forward, also across a renewal of a certificate; a node speaking with another
 * node's certificate is refused and counted in {@code /v1/stats} and {@code /metrics}, where it
 * is heard without the flag.
 */
class CertifiedNodeIdsNodeTest {

  @TempDir static Path dir;
  static Path keyA;
  static Path keyARenewed;
  static Path keyB;
  static Path keyC;
  static Path trust;
  static Path passwordFile;

  @BeforeAll
  static void makeCertificates() throws Exception {
    keyA = keystore("a", "a", "a");
    keyARenewed = keystore("a-renewed", "a", "a-renewed");
    keyB = keystore("b", "b", "b");
    keyC = keystore("c", "c", "c");
    // every certificate trusted (during a renewal of self-signed certificates, the old and new)
    KeyStore t = KeyStore.getInstance("PKCS12");
    t.load(null, null);
    for (Path p : List.of(keyA, keyARenewed, keyB, keyC)) {
      KeyStore k = load(p);
      String alias = k.aliases().nextElement();
      t.setCertificateEntry(p.getFileName().toString(), k.getCertificate(alias));
    }
    trust = dir.resolve("trust.p12");
    try (OutputStream out = Files.newOutputStream(trust)) {
      t.store(out, "changeit".toCharArray());
    }
    passwordFile = dir.resolve("tls.password");
    Files.writeString(passwordFile, "changeit\n");
  }

  /** {@code dir/file.p12}: a self-signed certificate for CN={@code cn} naming {@code id}. */
  private static Path keystore(String file, String id, String cn) throws Exception {
    Path ks = dir.resolve(file + ".p12");
    TlsCertificates.keytool("-genkeypair", "-alias", file, "-keyalg", "EC", "-groupname", "secp256r1",
        "-dname", "CN=" + cn, "-ext", "san=dns:" + id + ",ip:127.0.0.1", "-validity", "2",
        "-storetype", "PKCS12", "-keystore", ks.toString(), "-storepass", "changeit",
        "-keypass", "changeit");
    return ks;
  }

  private static KeyStore load(Path p) throws Exception {
    KeyStore k = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(p)) {
      k.load(in, "changeit".toCharArray());
    }
    return k;
  }

  private static NodeMain.Running start(String id, Path keystore, String bind, String seeds,
      String... more) throws Exception {
    List<String> args = new ArrayList<>(List.of("--id", id, "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0", "--gossip-interval-ms", "50", "--seeds", seeds,
        "--tls-keystore", keystore.toString(), "--tls-truststore", trust.toString(),
        "--tls-password-file", passwordFile.toString(), "--tls-bind-node-ids", bind));
    args.addAll(List.of(more));
    return NodeMain.start(NodeOptions.parse(args.toArray(new String[0]),
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX)));
  }

  private static String seed(NodeMain.Running r) {
    return r.node.nodeId() + "@" + r.transport.localAddress().address();
  }

  private static void await(String what, BooleanSupplier done) throws InterruptedException {
    for (int i = 0; i < 800 && !done.getAsBoolean(); i++) {
      Thread.sleep(25);
    }
    assertTrue(done.getAsBoolean(), what);
  }

  /** Both nodes receive further gossip from each other. */
  private static void bothHear(NodeMain.Running a, NodeMain.Running b) throws Exception {
    long ma = a.transport.stats().messagesReceived();
    long mb = b.transport.stats().messagesReceived();
    await(a.transport.stats().toString(), () -> a.transport.stats().messagesReceived() >= ma + 3);
    await(b.transport.stats().toString(), () -> b.transport.stats().messagesReceived() >= mb + 3);
  }

  private static String get(NodeMain.Running r, String path) throws Exception {
    return HttpClient.newHttpClient().send(HttpRequest.newBuilder(
        URI.create("http://" + r.clientAddress + path)).build(),
        HttpResponse.BodyHandlers.ofString()).body();
  }

  private static Map<?, ?> complete(NodeMain.Running r, String body) throws Exception {
    HttpResponse<String> resp = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
        URI.create("http://" + r.clientAddress + "/v1/route/completions"))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(200, resp.statusCode(), resp.body());
    return (Map<?, ?>) Json.parse(resp.body());
  }

  private static long refused(NodeMain.Running r) throws Exception {
    Map<?, ?> stats = (Map<?, ?>) Json.parse(get(r, "/v1/stats"));
    return ((Number) ((Map<?, ?>) stats.get("transport")).get("sender_not_in_certificate"))
        .longValue();
  }

  private static double refusedInMetrics(NodeMain.Running r) throws Exception {
    return PrometheusTextParser.parse(get(r, "/metrics"))
        .get("prefix_router_transport_sender_not_in_certificate_total").value();
  }

  @Test
  void nodesWhoseCertificatesNameThemGossipAndForwardAcrossARenewal() throws Exception {
    Path ka = dir.resolve("node-a.p12");
    Files.copy(keyA, ka, StandardCopyOption.REPLACE_EXISTING);
    // a serves its own clients itself (no cold placement on b), and serves b's forwards
    try (NodeMain.Running a = start("a", ka, "true", "", "--tls-check-ms", "50",
            "--policy", "local-only");
        NodeMain.Running b = start("b", keyB, "true", seed(a), "--policy", "longest-prefix")) {
      bothHear(a, b);
      // a caches a prompt; once b holds a's replica, b forwards the same prompt to a
      String prompt = "[5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,"
          + "31,32,33,34,35,36,37]";
      assertEquals("a", complete(a, "{\"prompt\":" + prompt + ",\"max_tokens\":2}").get("served_by"));
      await("b learns a's cache", () -> b.node.stats().replicaBlocks() >= 2);
      Map<?, ?> answer = complete(b, "{\"prompt\":" + prompt + ",\"max_tokens\":2}");
      assertEquals("a", answer.get("served_by"), answer.toString());
      assertEquals(true, answer.get("forwarded"), answer.toString());
      assertEquals(1, a.transport.stats().requestsReceived(), a.transport.stats().toString());
      assertEquals(0, b.transport.stats().requestsFailed(), b.transport.stats().toString());

      // a's certificate renewed in place: a new key, a new certificate that names a too
      Path next = dir.resolve("next.p12");
      Files.copy(keyARenewed, next, StandardCopyOption.REPLACE_EXISTING);
      Files.move(next, ka, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
      await("a reloads its certificate", () -> tlsReloads(a) == 1);
      // a node that joins now connects to a, and a to it, over the renewed certificate only
      try (NodeMain.Running c = start("c", keyC, "true", seed(a))) {
        bothHear(a, c);
        bothHear(a, b);
        for (NodeMain.Running r : List.of(a, b, c)) {
          assertEquals(0, refused(r), r.transport.stats().toString());
          assertEquals(0, r.transport.stats().authFailures(), r.transport.stats().toString());
        }
      }
    }
  }

  /** {@code tls.reloads} of the node's {@code /v1/stats}. */
  private static long tlsReloads(NodeMain.Running r) {
    return tlsStat(r, "reloads");
  }

  /** {@code tls.NAME} of the node's {@code /v1/stats}. */
  private static long tlsStat(NodeMain.Running r, String name) {
    try {
      Map<?, ?> stats = (Map<?, ?>) Json.parse(get(r, "/v1/stats"));
      return ((Number) ((Map<?, ?>) stats.get("tls")).get(name)).longValue();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  /** Replaces {@code file} by a copy of {@code with} in one step, as a renewal does. */
  private static void renew(Path file, Path with) throws Exception {
    Path next = dir.resolve("next.p12");
    Files.copy(with, next, StandardCopyOption.REPLACE_EXISTING);
    Files.move(next, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
  }

  /**
   * A renewal whose certificate does not name the node (c's certificate, trusted by every node,
   * put in a's keystore file) is refused like a file that cannot be loaded: a goes on presenting
   * its certificate in use, to new handshakes too, its gossip is heard with nothing refused, and
   * the refusal counts in reload_failures at every re-read. A renewal naming a is then taken.
   */
  @Test
  void aRenewalWhoseCertificateDoesNotNameTheNodeIsRefusedAndTheOneInUseStays() throws Exception {
    Path ka = dir.resolve("node-a-refused.p12");
    Files.copy(keyA, ka, StandardCopyOption.REPLACE_EXISTING);
    try (NodeMain.Running a = start("a", ka, "true", "", "--tls-check-ms", "50");
        NodeMain.Running b = start("b", keyB, "true", seed(a))) {
      bothHear(a, b);
      String addressA = a.transport.localAddress().address();
      assertEquals("CN=a", TlsCertificates.cn(TlsCertificates.presented(addressA, keyB)));

      renew(ka, keyC);
      await("a refuses, at two re-reads, a certificate that names c",
          () -> tlsStat(a, "reload_failures") >= 2);
      assertEquals(0, tlsStat(a, "reloads"));
      assertEquals("CN=a", TlsCertificates.cn(TlsCertificates.presented(addressA, keyB)));
      bothHear(a, b);
      for (NodeMain.Running r : List.of(a, b)) {
        assertEquals(0, refused(r), r.transport.stats().toString());
      }

      renew(ka, keyARenewed);
      await("a reloads a certificate that names it", () -> tlsStat(a, "reloads") == 1);
      long failures = tlsStat(a, "reload_failures");
      assertEquals("CN=a-renewed", TlsCertificates.cn(TlsCertificates.presented(addressA, keyB)));
      bothHear(a, b);
      assertEquals(failures, tlsStat(a, "reload_failures"), "the renewal in use is not refused");
      for (NodeMain.Running r : List.of(a, b)) {
        assertEquals(0, refused(r), r.transport.stats().toString());
      }
    }
  }

  /**
   * A node calling itself b with a's certificate: a node binding node ids refuses its gossip,
   * counted in /v1/stats and /metrics, and never takes it for a member; one that does not bind
   * them hears it.
   */
  @Test
  void aNodeSpeakingWithAnotherNodesCertificateIsRefusedAndCounted() throws Exception {
    try (NodeMain.Running a = start("a", keyA, "true", "");
        NodeMain.Running open = start("o", keyA, "false", "");
        NodeMain.Running x = start("b", keyA, "false", seed(a) + "," + seed(open))) {
      await("a refuses the messages of b", () -> a.transport.stats().senderNotInCertificate() >= 3);
      assertTrue(refused(a) >= 3);
      assertTrue(refusedInMetrics(a) >= 3);
      assertEquals(0, a.transport.stats().messagesReceived(), a.transport.stats().toString());
      assertEquals(0, a.node.stats().peersLive(), a.node.stats().toString());
      // where node ids are not bound, the same node is heard
      await("the node without the flag hears b", () -> open.transport.stats().messagesReceived() >= 3);
      assertEquals(0, refused(open));
      assertEquals(0.0, refusedInMetrics(open));
    }
  }

  @Test
  void theFlagNeedsAKeystoreAndTakesTrueOrFalse() throws Exception {
    Map<String, String> env = Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX);
    IllegalArgumentException noKeystore = assertThrows(IllegalArgumentException.class,
        () -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
            "--tls-bind-node-ids", "true"}, env));
    assertEquals("--tls-bind-node-ids needs --tls-keystore", noKeystore.getMessage());
    String[] tls = {"--id", "a", "--listen", "h:1", "--tls-keystore", keyA.toString(),
        "--tls-password-file", passwordFile.toString()};
    IllegalArgumentException notBoolean = assertThrows(IllegalArgumentException.class,
        () -> NodeOptions.parse(with(tls, "--tls-bind-node-ids", "yes"), env));
    assertTrue(notBoolean.getMessage().contains("--tls-bind-node-ids must be true or false"),
        notBoolean.getMessage());
    assertFalse(NodeOptions.parse(tls, env).tlsBindNodeIds);
    assertTrue(NodeOptions.parse(with(tls, "--tls-bind-node-ids", "TRUE"), env).tlsBindNodeIds);
    assertFalse(NodeOptions.parse(with(tls, "--tls-bind-node-ids", "false"), env).tlsBindNodeIds);
  }

  private static String[] with(String[] args, String... more) {
    List<String> all = new ArrayList<>(List.of(args));
    all.addAll(List.of(more));
    return all.toArray(new String[0]);
  }
}
