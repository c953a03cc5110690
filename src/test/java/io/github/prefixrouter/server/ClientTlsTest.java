package io.github.prefixrouter.server;

import static io.github.prefixrouter.server.TlsCertificates.clientContext;
import static io.github.prefixrouter.server.TlsCertificates.cn;
import static io.github.prefixrouter.server.TlsCertificates.keystore;
import static io.github.prefixrouter.server.TlsCertificates.presented;
import static io.github.prefixrouter.server.TlsCertificates.truststore;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.json.Json;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLHandshakeException;
import javax.net.ssl.SSLSocket;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link NodeMain} nodes with TLS on their client port ({@code --client-tls-keystore}), from
 * PKCS12 files made by keytool for this run: clients get completions over HTTPS and nothing over
 * plain HTTP; a certificate renewed in place is presented from the next handshake on, without a
 * restart, and a broken file leaves the one in use; with {@code --client-tls-truststore} only
 * clients presenting a certificate of the trust store are answered.
 */
class ClientTlsTest {

  @TempDir static Path dir;
  /** The client port's certificate, and the one it is renewed with. */
  static Path keyC;
  static Path keyD;
  /** Trusts both: the clients' trust store. */
  static Path trustCd;
  /** A client's key, whose certificate is in {@link #trustAlice} (d's is not). */
  static Path keyAlice;
  static Path trustAlice;
  static Path passwordFile;

  @BeforeAll
  static void makeCertificates() throws Exception {
    keyC = keystore(dir, "c");
    keyD = keystore(dir, "d");
    keyAlice = keystore(dir, "alice");
    trustCd = truststore(dir, dir.resolve("trust-cd.p12"), "c", "d");
    trustAlice = truststore(dir, dir.resolve("trust-alice.p12"), "alice");
    passwordFile = dir.resolve("client-tls.password");
    Files.writeString(passwordFile, "changeit\n");
  }

  private static final Map<String, String> ENV =
      Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX);

  private static NodeOptions options(Path keystore, String... more) {
    List<String> args = new ArrayList<>(List.of("--id", "c", "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0", "--client-tls-keystore", keystore.toString(),
        "--client-tls-password-file", passwordFile.toString()));
    args.addAll(List.of(more));
    return NodeOptions.parse(args.toArray(new String[0]), ENV);
  }

  private static HttpClient client(SSLContext tls) {
    return HttpClient.newBuilder().sslContext(tls).connectTimeout(Duration.ofSeconds(10)).build();
  }

  /** A text completion of two tokens at the node; its answer. */
  private static HttpResponse<String> complete(HttpClient c, String scheme, NodeMain.Running r)
      throws Exception {
    return c.send(HttpRequest.newBuilder(URI.create(scheme + "://" + r.clientAddress
            + "/v1/completions")).timeout(Duration.ofSeconds(10))
        .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":\"hello\",\"max_tokens\":2}"))
        .build(), HttpResponse.BodyHandlers.ofString());
  }

  /** The completion's text; fails unless it was answered 200. */
  private static String text(HttpResponse<String> resp) throws Exception {
    assertEquals(200, resp.statusCode(), resp.body());
    Map<?, ?> answer = (Map<?, ?>) Json.parse(resp.body());
    return (String) ((Map<?, ?>) ((List<?>) answer.get("choices")).get(0)).get("text");
  }

  /** The number of characters of the text of a completion answered 200. */
  private static int chars(HttpResponse<String> resp) throws Exception {
    String t = text(resp);
    return t.codePointCount(0, t.length());
  }

  /** {@code /v1/stats}, asked over HTTPS by a client trusting both certificates. */
  private static Map<?, ?> stats(NodeMain.Running r) throws Exception {
    HttpResponse<String> resp = client(clientContext(trustCd, null)).send(
        HttpRequest.newBuilder(URI.create("https://" + r.clientAddress + "/v1/stats"))
            .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
    assertEquals(200, resp.statusCode(), resp.body());
    return (Map<?, ?>) Json.parse(resp.body());
  }

  private static long clientTls(NodeMain.Running r, String key) throws Exception {
    return ((Number) ((Map<?, ?>) stats(r).get("client_tls")).get(key)).longValue();
  }

  /** A TLS 1.2 handshake with the node's client port; throws if it fails. */
  private static void handshakeOverTls12(NodeMain.Running r, SSLContext tls) throws Exception {
    String[] hp = r.clientAddress.split(":");
    try (SSLSocket s = (SSLSocket) tls.getSocketFactory().createSocket(hp[0],
        Integer.parseInt(hp[1]))) {
      s.setSoTimeout(10_000);
      s.setEnabledProtocols(new String[] {"TLSv1.2"});
      s.startHandshake();
    }
  }

  @Test
  void aCompletionIsAnsweredOverHttpsAndNothingOverPlainHttp() throws Exception {
    try (NodeMain.Running r = NodeMain.start(options(keyC))) {
      assertEquals("CN=c", cn(presented(r.clientAddress)));
      assertEquals(2, chars(complete(client(clientContext(trustCd, null)), "https", r)));
      // a client that does not trust the certificate (the JDK's default trust store) is refused
      assertThrows(SSLHandshakeException.class,
          () -> complete(HttpClient.newHttpClient(), "https", r));
      // plain HTTP gets no answer: the port speaks TLS only
      assertThrows(IOException.class, () -> complete(HttpClient.newHttpClient(), "http", r));
      Map<?, ?> s = stats(r);
      Map<?, ?> tls = (Map<?, ?>) s.get("client_tls");
      assertEquals(0L, tls.get("reloads"));
      assertEquals(0L, tls.get("reload_failures"));
      long notAfter = ((Number) tls.get("certificate_not_after_seconds")).longValue();
      long now = System.currentTimeMillis() / 1000;
      assertTrue(notAfter > now + 86_400 && notAfter <= now + 2 * 86_400 + 60, "2 days: " + tls);
      assertNull(s.get("tls"), "the peer port has no TLS: " + s);
      HttpResponse<String> metrics = client(clientContext(trustCd, null)).send(
          HttpRequest.newBuilder(URI.create("https://" + r.clientAddress + "/metrics"))
              .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
      assertEquals((double) notAfter, PrometheusTextParser.parse(metrics.body())
          .get("prefix_router_client_tls_certificate_not_after_seconds").value());
    }
  }

  @Test
  void aRenewedCertificateIsPresentedWithoutARestartAndABrokenOneIsNot() throws Exception {
    Path kc = dir.resolve("client-port.p12");
    Files.copy(keyC, kc, StandardCopyOption.REPLACE_EXISTING);
    HttpClient trusting = client(clientContext(trustCd, null));
    try (NodeMain.Running r = NodeMain.start(options(kc, "--tls-check-ms", "50"))) {
      assertEquals("CN=c", cn(presented(r.clientAddress)));
      // renewed in place: a new key and certificate, in one move
      Path next = dir.resolve("next.p12");
      Files.copy(keyD, next, StandardCopyOption.REPLACE_EXISTING);
      Files.move(next, kc, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
      for (int i = 0; i < 400 && !cn(presented(r.clientAddress)).equals("CN=d"); i++) {
        Thread.sleep(10);
      }
      assertEquals("CN=d", cn(presented(r.clientAddress)));
      assertEquals(1L, clientTls(r, "reloads"));
      assertEquals(2, chars(complete(trusting, "https", r)));
      // a broken file: the renewed certificate stays in use, the failure is counted
      Files.write(kc, new byte[] {1, 2, 3});
      for (int i = 0; i < 400 && clientTls(r, "reload_failures") == 0; i++) {
        Thread.sleep(25);
      }
      assertTrue(clientTls(r, "reload_failures") > 0);
      assertEquals(1L, clientTls(r, "reloads"));
      assertEquals("CN=d", cn(presented(r.clientAddress)));
      assertEquals(2, chars(complete(trusting, "https", r)));
    }
  }

  @Test
  void withATrustStoreOnlyClientsPresentingOneOfItsCertificatesAreAnswered() throws Exception {
    try (NodeMain.Running r = NodeMain.start(options(keyC,
        "--client-tls-truststore", trustAlice.toString()))) {
      // a certificate the trust store does not hold, presented: refused at the handshake. Under
      // TLS 1.2 the client's handshake fails; under TLS 1.3 (the HTTP client's) the client has
      // finished its side when the server checks its certificate, and the server closes the
      // connection without an answer
      assertThrows(IOException.class,
          () -> handshakeOverTls12(r, TlsCertificates.insistentClientContext(trustCd, keyD)));
      assertThrows(IOException.class, () -> complete(
          client(TlsCertificates.insistentClientContext(trustCd, keyD)), "https", r));
      // no certificate (a JDK client with d's key offers none, d's issuer not being one the
      // port names): the handshake is made, and every path but /health answers 401 saying why
      HttpClient anonymous = null;
      for (Path key : new Path[] {keyD, null}) {
        handshakeOverTls12(r, clientContext(trustCd, key));
        anonymous = client(clientContext(trustCd, key));
        HttpResponse<String> refused = complete(anonymous, "https", r);
        assertEquals(401, refused.statusCode(), refused.body());
        Map<?, ?> error = (Map<?, ?>) ((Map<?, ?>) Json.parse(refused.body())).get("error");
        assertEquals("client_certificate_required", error.get("code"), refused.body());
        assertTrue(((String) error.get("message")).contains("a client certificate is required"),
            refused.body());
      }
      for (String path : List.of("/v1/stats", "/metrics", "/v1/models")) {
        assertEquals(401, get(anonymous, r, path).statusCode(), path);
      }
      HttpResponse<String> health = get(anonymous, r, "/health"); // probes carry no certificate
      assertEquals(200, health.statusCode(), health.body());
      assertEquals("RUNNING", ((Map<?, ?>) Json.parse(health.body())).get("state"));

      handshakeOverTls12(r, clientContext(trustCd, keyAlice));
      HttpClient alice = client(clientContext(trustCd, keyAlice));
      assertEquals(2, chars(complete(alice, "https", r)));
      HttpResponse<String> stats = get(alice, r, "/v1/stats");
      Map<?, ?> m = (Map<?, ?>) Json.parse(stats.body());
      // the refused clients' requests never reached the node, and the endpoint counted them
      assertEquals(1L, m.get("requests"), stats.body());
      assertEquals(5L, ((Map<?, ?>) m.get("client")).get("refused_without_certificate"),
          stats.body());
    }
  }

  /** {@code GET path} at the node's client port over HTTPS. */
  private static HttpResponse<String> get(HttpClient c, NodeMain.Running r, String path)
      throws Exception {
    return c.send(HttpRequest.newBuilder(URI.create("https://" + r.clientAddress + path))
        .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void theClientTlsFlagsAreChecked() throws Exception {
    String[] base = {"--id", "a", "--listen", "h:1"};
    Map<String, String> flagErrors = Map.of(
        "--client-tls-truststore needs --client-tls-keystore",
        "--client-tls-truststore " + trustAlice,
        "--client-tls-password-file needs --client-tls-keystore",
        "--client-tls-password-file " + passwordFile,
        "--tls-check-ms needs --tls-keystore or --client-tls-keystore",
        "--tls-check-ms 50",
        // the peer port's password is not the client port's
        "--client-tls-keystore needs a password: --client-tls-password-file FILE or env "
            + "PREFIX_ROUTER_CLIENT_TLS_PASSWORD",
        "--tls-keystore " + keyD + " --client-tls-keystore " + keyC,
        "cannot read --client-tls-password-file " + dir.resolve("absent") + ": no such file",
        "--client-tls-keystore " + keyC + " --client-tls-password-file " + dir.resolve("absent"));
    for (var e : flagErrors.entrySet()) {
      List<String> args = new ArrayList<>(List.of(base));
      args.addAll(List.of(e.getValue().split(" ")));
      // the peer port's password is in the environment where the peer port has TLS (without
      // its keystore the variable is refused)
      Map<String, String> env = args.contains("--tls-keystore")
          ? Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX,
              "PREFIX_ROUTER_TLS_PASSWORD", "changeit")
          : Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX);
      IllegalArgumentException x = assertThrows(IllegalArgumentException.class,
          () -> NodeOptions.parse(args.toArray(new String[0]), env), e.getValue());
      assertEquals(e.getKey(), x.getMessage());
    }
    NodeOptions fromEnv = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--client-tls-keystore", keyC.toString(), "--tls-check-ms", "50"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX,
            "PREFIX_ROUTER_CLIENT_TLS_PASSWORD", "from env"));
    assertArrayEquals("from env".toCharArray(), fromEnv.clientTlsPassword);
    assertNull(fromEnv.tlsPassword);
    assertEquals(Duration.ofMillis(50), fromEnv.tlsCheck);
    Path spaced = Files.writeString(dir.resolve("spaced.password"), "  two leading spaces \n");
    NodeOptions fromFile = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--client-tls-keystore", keyC.toString(), "--client-tls-password-file",
        spaced.toString(), "--client-tls-truststore", trustAlice.toString()}, ENV);
    assertArrayEquals("  two leading spaces".toCharArray(), fromFile.clientTlsPassword);
    assertEquals(trustAlice, fromFile.clientTlsTruststore);
    // a wrong password names the client port's password flags, not the peer port's
    IllegalArgumentException wrong = assertThrows(IllegalArgumentException.class,
        () -> new TlsFiles(TlsFiles.Use.CLIENT, keyC, null, "wrong".toCharArray()));
    assertTrue(wrong.getMessage().contains("the password is wrong (--client-tls-password-file or "
        + "PREFIX_ROUTER_CLIENT_TLS_PASSWORD)"), wrong.getMessage());
    assertFalse(wrong.getMessage().contains("PREFIX_ROUTER_TLS_PASSWORD"), wrong.getMessage());
  }
}
