package io.github.prefixrouter.server;

import static io.github.prefixrouter.server.TlsCertificates.cn;
import static io.github.prefixrouter.server.TlsCertificates.keystore;
import static io.github.prefixrouter.server.TlsCertificates.keytool;
import static io.github.prefixrouter.server.TlsCertificates.presented;
import static io.github.prefixrouter.server.TlsCertificates.truststore;
import static io.github.prefixrouter.testing.LoggedLines.logged;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.testing.FailingJcaProvider;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.Provider;
import java.security.ProviderException;
import java.security.Security;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link NodeMain} nodes with TLS on their peer port, from PKCS12 files made by keytool for this
 * run: they gossip over it; a certificate renewed in place is presented from the next handshake
 * on, without a restart; a broken file leaves the one in use.
 */
class PeerTlsTest {

  @TempDir static Path dir;
  static Path keyA;
  static Path keyB;
  static Path trustBoth;
  static Path passwordFile;

  @BeforeAll
  static void makeCertificates() throws Exception {
    keyA = keystore(dir, "a");
    keyB = keystore(dir, "b");
    trustBoth = truststore(dir, dir.resolve("trust.p12"), "a", "b");
    passwordFile = dir.resolve("tls.password");
    Files.writeString(passwordFile, "changeit\n");
  }

  private static NodeOptions options(String id, Path keystore, String seeds, String... more) {
    List<String> args = new ArrayList<>(List.of("--id", id, "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0", "--gossip-interval-ms", "50", "--seeds", seeds,
        "--tls-keystore", keystore.toString(), "--tls-password-file", passwordFile.toString()));
    args.addAll(List.of(more));
    return NodeOptions.parse(args.toArray(new String[0]),
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
  }

  /**
   * Both nodes receive further gossip from each other, none refused: a window in which each
   * receives 3 more messages and no message of either fails. Until a node has a connection to
   * its peer, every gossip round opens one of its own; on a loaded machine those handshakes
   * compete for the CPU, outlast the transport's 2 s connect timeout and fail as timeouts, not
   * refusals, until one gets through. A window with failures is therefore tried again, for 20 s;
   * a refusal fails every window, as its messages never arrive.
   */
  private static void bothHear(NodeMain.Running a, NodeMain.Running b) throws Exception {
    long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(20);
    while (true) {
      long failed = a.transport.stats().messagesFailed() + b.transport.stats().messagesFailed();
      long ma = a.transport.stats().messagesReceived();
      long mb = b.transport.stats().messagesReceived();
      while ((a.transport.stats().messagesReceived() < ma + 3
          || b.transport.stats().messagesReceived() < mb + 3) && System.nanoTime() < deadline) {
        Thread.sleep(25);
      }
      assertTrue(a.transport.stats().messagesReceived() >= ma + 3, a.transport.stats().toString());
      assertTrue(b.transport.stats().messagesReceived() >= mb + 3, b.transport.stats().toString());
      if (a.transport.stats().messagesFailed() + b.transport.stats().messagesFailed() == failed) {
        return;
      }
      assertTrue(System.nanoTime() < deadline, "no window without failed messages in 20 s: "
          + a.transport.stats() + " " + b.transport.stats());
    }
  }

  private static Map<?, ?> tlsStats(NodeMain.Running r) throws Exception {
    HttpResponse<String> resp = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
        URI.create("http://" + r.clientAddress + "/v1/stats")).build(),
        HttpResponse.BodyHandlers.ofString());
    return (Map<?, ?>) ((Map<?, ?>) Json.parse(resp.body())).get("tls");
  }

  @Test
  void nodesGossipOverTlsAndThePeerPortSpeaksNoPlainHttp() throws Exception {
    try (NodeMain.Running a = NodeMain.start(options("a", keyA, ""));
        NodeMain.Running b = NodeMain.start(options("b", keyA,
            "a@" + a.transport.localAddress().address()))) {
      bothHear(a, b);
      assertEquals("CN=a", cn(presented(a.transport.localAddress().address())));
      HttpClient plain = HttpClient.newHttpClient();
      assertThrows(IOException.class, () -> plain.send(HttpRequest.newBuilder(URI.create(
          "http://" + a.transport.localAddress().address() + "/prefix-router/v1/message"))
          .timeout(java.time.Duration.ofSeconds(10))
          .POST(HttpRequest.BodyPublishers.ofString("x")).build(),
          HttpResponse.BodyHandlers.ofString()));
      Map<?, ?> tls = tlsStats(a);
      assertEquals(0L, tls.get("reloads"));
      long notAfter = ((Number) tls.get("certificate_not_after_seconds")).longValue();
      long now = System.currentTimeMillis() / 1000;
      assertTrue(notAfter > now + 86_400 && notAfter <= now + 2 * 86_400 + 60, "2 days: " + tls);
    }
  }

  @Test
  void aRenewedCertificateIsPresentedWithoutARestartAndABrokenOneIsNot() throws Exception {
    Path ka = dir.resolve("node-a.p12");
    Path kb = dir.resolve("node-b.p12");
    Files.copy(keyA, ka, StandardCopyOption.REPLACE_EXISTING);
    Files.copy(keyA, kb, StandardCopyOption.REPLACE_EXISTING);
    String[] watch = {"--tls-truststore", trustBoth.toString(), "--tls-check-ms", "50"};
    try (NodeMain.Running a = NodeMain.start(options("a", ka, "", watch));
        NodeMain.Running b = NodeMain.start(options("b", kb,
            "a@" + a.transport.localAddress().address(), watch))) {
      bothHear(a, b);
      String addressA = a.transport.localAddress().address();
      assertEquals("CN=a", cn(presented(addressA)));
      // a's certificate renewed in place (a new key and certificate, as a renewal makes)
      Path next = dir.resolve("next.p12");
      Files.copy(keyB, next, StandardCopyOption.REPLACE_EXISTING);
      Files.move(next, ka, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
      // handshakes go on while it is renewed, and none fails (one that chose its key just
      // before the renewal still gets that key's certificate)
      for (int i = 0; i < 400 && !cn(presented(addressA)).equals("CN=b"); i++) {
        Thread.sleep(10);
      }
      assertEquals("CN=b", cn(presented(addressA)));
      assertEquals(1L, tlsStats(a).get("reloads"));
      bothHear(a, b);
      // a broken file: the renewed certificate stays in use, the failure is counted
      Files.write(ka, new byte[] {1, 2, 3});
      for (int i = 0; i < 400 && ((Number) tlsStats(a).get("reload_failures")).longValue() == 0; i++) {
        Thread.sleep(25);
      }
      assertTrue(((Number) tlsStats(a).get("reload_failures")).longValue() > 0);
      assertEquals("CN=b", cn(presented(addressA)));
      bothHear(a, b);
    }
  }

  private static javax.net.ssl.X509ExtendedKeyManager managerOf(Path keystore) throws Exception {
    java.security.KeyStore ks = java.security.KeyStore.getInstance("PKCS12");
    try (java.io.InputStream in = Files.newInputStream(keystore)) {
      ks.load(in, "changeit".toCharArray());
    }
    javax.net.ssl.KeyManagerFactory kmf = javax.net.ssl.KeyManagerFactory.getInstance("PKIX");
    kmf.init(ks, "changeit".toCharArray());
    return (javax.net.ssl.X509ExtendedKeyManager) kmf.getKeyManagers()[0];
  }

  @Test
  void aHandshakeThatChoseItsKeyBeforeARenewalGetsThatKeysCertificate() throws Exception {
    TlsFiles.SwappableKeyManager m = new TlsFiles.SwappableKeyManager();
    m.install(managerOf(keyA));
    String chosen = m.chooseServerAlias("EC", null, null);
    m.install(managerOf(keyB)); // the renewal, between the choice and the chain
    assertEquals("CN=a", cn(m.getCertificateChain(chosen)[0]));
    assertTrue(m.getPrivateKey(chosen) != null);
    String after = m.chooseServerAlias("EC", null, null);
    assertEquals("CN=b", cn(m.getCertificateChain(after)[0]));
    m.install(managerOf(keyA));
    m.install(managerOf(keyB));
    assertEquals(null, m.getCertificateChain(chosen), "two renewals later it is gone");
    assertEquals(null, m.getPrivateKey("not tagged"));
  }

  private static java.security.KeyStore loadStore(Path file, String password) throws Exception {
    java.security.KeyStore ks = java.security.KeyStore.getInstance("PKCS12");
    try (var in = Files.newInputStream(file)) {
      ks.load(in, password.toCharArray());
    }
    return ks;
  }

  /** Rewrites {@code store}, whose one key entry is {@code alias}, under a new password. */
  private static void newPassword(Path store, String alias, String password, String newPassword)
      throws Exception {
    java.security.KeyStore.Entry e = loadStore(store, password).getEntry(alias,
        new java.security.KeyStore.PasswordProtection(password.toCharArray()));
    java.security.KeyStore ks = java.security.KeyStore.getInstance("PKCS12");
    ks.load(null, null);
    ks.setEntry(alias, e, new java.security.KeyStore.PasswordProtection(newPassword.toCharArray()));
    try (var out = Files.newOutputStream(store)) {
      ks.store(out, newPassword.toCharArray());
    }
  }

  @Test
  void theTlsFlagsAreChecked() throws Exception {
    Map<String, String> env = Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX);
    IllegalArgumentException noKeystore = assertThrows(IllegalArgumentException.class,
        () -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1", "--tls-truststore",
            trustBoth.toString()}, env));
    assertTrue(noKeystore.getMessage().contains("--tls-truststore needs --tls-keystore"));
    IllegalArgumentException noPassword = assertThrows(IllegalArgumentException.class,
        () -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1", "--tls-keystore",
            keyA.toString()}, env));
    assertTrue(noPassword.getMessage().contains("needs a password"), noPassword.getMessage());
    NodeOptions fromEnv = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--tls-keystore", keyA.toString()},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX,
            "PREFIX_ROUTER_TLS_PASSWORD", "changeit"));
    assertArrayEquals("changeit".toCharArray(), fromEnv.tlsPassword);
    IllegalArgumentException wrong = assertThrows(IllegalArgumentException.class,
        () -> new TlsFiles(TlsFiles.Use.PEER, keyA, null, "wrong".toCharArray()));
    assertTrue(wrong.getMessage().contains("cannot load " + keyA), wrong.getMessage());
    assertTrue(wrong.getMessage().contains("the password is wrong"), wrong.getMessage());
    IllegalArgumentException missing = assertThrows(IllegalArgumentException.class,
        () -> new TlsFiles(TlsFiles.Use.PEER, dir.resolve("absent.p12"), null, "changeit".toCharArray()));
    assertTrue(missing.getMessage().contains("cannot read"), missing.getMessage());
    IllegalArgumentException noKey = assertThrows(IllegalArgumentException.class,
        () -> new TlsFiles(TlsFiles.Use.PEER, trustBoth, null, "changeit".toCharArray()));
    assertTrue(noKey.getMessage().contains("no private key"), noKey.getMessage());
  }

  /**
   * A keystore renewed under a new password loads once the password file holds the new one: the
   * password file was read only at the start, so such a renewal failed every check until the
   * node restarted. A password file that changes alone is taken too, and a wrong one leaves the
   * files in use.
   */
  @Test
  void aKeystoreRenewedUnderANewPasswordLoadsOnceThePasswordFileSaysIt() throws Exception {
    Path store = dir.resolve("repassworded.p12");
    Files.copy(keyA, store, StandardCopyOption.REPLACE_EXISTING);
    Path pw = dir.resolve("repassworded.password");
    Files.writeString(pw, "changeit\n");
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--tls-keystore", store.toString(), "--tls-password-file", pw.toString()},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
    TlsFiles tls = new TlsFiles(TlsFiles.Use.PEER, store, null, o.tlsPasswordSource(), null);
    long notAfter = tls.stats().certificateNotAfterSeconds();
    Path next = dir.resolve("next.p12");
    Files.copy(keyB, next, StandardCopyOption.REPLACE_EXISTING);
    newPassword(next, "b", "changeit", "renewed-pass"); // as keytool -storepasswd does
    Files.copy(next, store, StandardCopyOption.REPLACE_EXISTING);
    tls.check();
    assertEquals(new TlsFiles.Stats(0, 1, notAfter), tls.stats(), "old password: refused");
    Files.writeString(pw, "renewed-pass\n");
    tls.check();
    assertEquals(1, tls.stats().reloads(), "the new password loads the new keystore");
    tls.check();
    assertEquals(1, tls.stats().reloads(), "nothing changed since");
    assertEquals(1, tls.stats().reloadFailures());
    Files.writeString(pw, "wrong\n");
    tls.check();
    assertEquals(1, tls.stats().reloads());
    assertEquals(2, tls.stats().reloadFailures(), "a wrong password leaves the files in use");
    Files.writeString(pw, "renewed-pass\n");
    tls.check();
    assertEquals(1, tls.stats().reloads(), "back to the password in use: nothing to reload");
    assertEquals(2, tls.stats().reloadFailures());
    NodeOptions fromEnv = NodeOptions.parse(new String[] {"--id", "a", "--listen", "h:1",
        "--tls-keystore", store.toString()},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX,
            "PREFIX_ROUTER_TLS_PASSWORD", "renewed-pass"));
    assertArrayEquals("renewed-pass".toCharArray(), fromEnv.tlsPasswordSource().get());
  }

  /**
   * Anything thrown as the files are read again and put in use is a failed reload, as a file
   * that does not load is: counted, logged once per distinct problem naming the file, the files
   * in use kept, and the files tried again at every check until they are put in use. Such a
   * throw is a JCA provider's (a hardware token's, say) as the keystore, the key manager or the
   * trust manager is looked up or set up, or as the PKCS12 integrity check's MAC is: a
   * {@link ProviderException}, an {@link Error}, a checked exception thrown undeclared; or the
   * JDK's own, a {@link RuntimeException} of its PKCS12 parser. Only an
   * {@link IllegalArgumentException} was caught: anything else escaped the check into the file
   * watch's task, whose executor kept it in the task's future, counted and logged nowhere.
   */
  @Test
  void anythingThrownAsTheFilesAreReadAgainIsAFailedReloadCountedAndLoggedOnce()
      throws Exception {
    Path store = dir.resolve("token.p12");
    Files.copy(keyA, store, StandardCopyOption.REPLACE_EXISTING);
    TlsFiles tls = new TlsFiles(TlsFiles.Use.PEER, store, trustBoth, "changeit".toCharArray());
    long notAfter = tls.stats().certificateNotAfterSeconds();
    Files.copy(keyB, store, StandardCopyOption.REPLACE_EXISTING); // renewed
    ProviderException removed = new ProviderException("token removed");
    // where the provider throws, and what: the same problem twice, then others
    List<Object[]> cases = List.of(
        new Object[] {FailingJcaProvider.lookup("KeyStore"), removed},
        new Object[] {FailingJcaProvider.lookup("KeyStore"), removed},
        new Object[] {FailingJcaProvider.LOOKUP, new InternalError("token driver")},
        new Object[] {FailingJcaProvider.lookup("KeyManagerFactory"),
            new InternalError("token driver")},
        new Object[] {FailingJcaProvider.lookup("TrustManagerFactory"),
            new IOException("token unreachable")});
    Provider hsm = FailingJcaProvider.provider();
    List<String> escaped = new ArrayList<>();
    TlsFiles.Stats[] afterFailures = new TlsFiles.Stats[1];
    List<String> lines = logged("TLS", () -> {
      for (Object[] c : cases) {
        FailingJcaProvider.at = (String) c[0];
        FailingJcaProvider.toThrow = (Throwable) c[1];
        assertTrue(Security.insertProviderAt(hsm, 1) > 0, "provider installed");
        try {
          tls.check();
        } catch (Throwable e) {
          escaped.add("the check failing at " + c[0] + " threw " + e);
        } finally {
          FailingJcaProvider.toThrow = null;
          Security.removeProvider(hsm.getName());
        }
      }
      afterFailures[0] = tls.stats();
      tls.check(); // the provider sound again
    });
    assertEquals(List.of(), escaped, "what the checks threw instead of counting a failed reload");
    assertEquals(new TlsFiles.Stats(0, cases.size(), notAfter), afterFailures[0],
        "reloads and failed reloads, the files in use kept");
    assertEquals(1, tls.stats().reloads(), "the renewed files put in use once they could be");
    String[][] expected = {
        {"ERROR", "cannot load " + store + ": ", "token removed (ProviderException)"},
        {"ERROR", "cannot load " + store + ": ", "token driver (InternalError)"},
        {"ERROR", "cannot use " + store + ": ", "token driver (InternalError)"},
        {"ERROR", "cannot use " + trustBoth + ": ", "token unreachable (IOException)"},
        {"INFO", "read again without error"},
        {"INFO", "now presenting the certificate of " + store}};
    assertEquals(expected.length, lines.size(), "lines logged:\n" + String.join("\n", lines));
    for (int i = 0; i < expected.length; i++) {
      for (String part : expected[i]) {
        assertTrue(lines.get(i).contains(part), "line " + (i + 1) + " lacks " + part + ": "
            + lines.get(i));
      }
    }
  }

  /**
   * A file above {@link TlsFiles#MAX_FILE_BYTES} is refused without being read whole, at the
   * start and at a re-read (which leaves the files in use): it was read whole, at every check,
   * so that one named by mistake ({@code /dev/zero}, a log) filled the heap.
   */
  @Test
  void aFileTooLargeForAStoreIsRefusedWithoutReadingItWhole() throws Exception {
    Path large = dir.resolve("large.p12");
    try (var out = Files.newOutputStream(large)) {
      out.write(Files.readAllBytes(keyA));
      out.write(new byte[TlsFiles.MAX_FILE_BYTES]);
    }
    String said = "cannot load " + large + ": it is larger than " + TlsFiles.MAX_FILE_BYTES
        + " bytes";
    IllegalArgumentException k = assertThrows(IllegalArgumentException.class,
        () -> new TlsFiles(TlsFiles.Use.PEER, large, null, "changeit".toCharArray()));
    assertTrue(k.getMessage().startsWith(said), k.getMessage());
    IllegalArgumentException t = assertThrows(IllegalArgumentException.class,
        () -> new TlsFiles(TlsFiles.Use.CLIENT, keyA, large, "changeit".toCharArray()));
    assertTrue(t.getMessage().startsWith(said), t.getMessage());
    Path renewed = dir.resolve("renewed.p12");
    Files.copy(keyA, renewed, StandardCopyOption.REPLACE_EXISTING);
    TlsFiles tls = new TlsFiles(TlsFiles.Use.PEER, renewed, null, "changeit".toCharArray());
    long notAfter = tls.stats().certificateNotAfterSeconds();
    Files.copy(large, renewed, StandardCopyOption.REPLACE_EXISTING);
    tls.check();
    assertEquals(new TlsFiles.Stats(0, 1, notAfter), tls.stats());
  }

  /**
   * A file that is no PKCS12 store says so: a store cut short (whose JDK exception has no
   * message) read "password: null", and the others named the JDK's DER parser's internals.
   */
  @Test
  void aFileThatIsNotAPkcs12StoreSaysWhatItIs() throws Exception {
    byte[] whole = Files.readAllBytes(keyA);
    Path cut = dir.resolve("cut.p12");
    Files.write(cut, java.util.Arrays.copyOf(whole, whole.length / 2));
    Path pem = dir.resolve("key.pem");
    Files.writeString(pem, "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n"
        + "-----END PRIVATE KEY-----\n");
    Path empty = Files.write(dir.resolve("empty.p12"), new byte[0]);
    Path jceks = dir.resolve("store.jceks");
    java.security.KeyStore secret = java.security.KeyStore.getInstance("JCEKS");
    secret.load(null, null);
    secret.setEntry("s", new java.security.KeyStore.SecretKeyEntry(
        new javax.crypto.spec.SecretKeySpec(new byte[16], "AES")),
        new java.security.KeyStore.PasswordProtection("changeit".toCharArray()));
    try (var out = Files.newOutputStream(jceks)) {
      secret.store(out, "changeit".toCharArray());
    }
    Map<Path, String> expected = Map.of(
        cut, "not a PKCS12 store, or it is damaged or cut short",
        pem, "PEM text, not a PKCS12 store",
        empty, "the file is empty",
        jceks, "a JCEKS store, not PKCS12");
    for (var e : expected.entrySet()) {
      IllegalArgumentException x = assertThrows(IllegalArgumentException.class,
          () -> new TlsFiles(TlsFiles.Use.PEER, e.getKey(), null, "changeit".toCharArray()));
      assertTrue(x.getMessage().startsWith("cannot load " + e.getKey() + ": "), x.getMessage());
      assertTrue(x.getMessage().contains(e.getValue()), x.getMessage());
      assertFalse(x.getMessage().contains("null"), x.getMessage());
      // as the trust store too
      IllegalArgumentException t = assertThrows(IllegalArgumentException.class,
          () -> new TlsFiles(TlsFiles.Use.PEER, keyA, e.getKey(), "changeit".toCharArray()));
      assertTrue(t.getMessage().contains(e.getValue()), t.getMessage());
    }
  }

  /**
   * A keystore of several key entries reports the earliest expiry among them, whichever entry
   * the file lists first: it reported the first listed entry's, so that an entry about to expire
   * (which the key manager may still present) could hide behind one valid for a month.
   */
  @Test
  void theReportedExpiryIsTheEarliestOfTheKeyEntries() throws Exception {
    // an entry valid 30 days; keyA's, valid 2 days, is the other
    Path monthStore = dir.resolve("month.p12");
    keytool("-genkeypair", "-alias", "month", "-keyalg", "EC", "-groupname", "secp256r1",
        "-dname", "CN=month", "-ext", "san=ip:127.0.0.1", "-validity", "30", "-storetype",
        "PKCS12", "-keystore", monthStore.toString(), "-storepass", "changeit", "-keypass",
        "changeit");
    var protection = new java.security.KeyStore.PasswordProtection("changeit".toCharArray());
    Map<String, java.security.KeyStore.Entry> entries = Map.of(
        "month", loadStore(monthStore, "changeit").getEntry("month", protection),
        "days", loadStore(keyA, "changeit").getEntry("a", protection));
    for (String[] order : new String[][] {{"month", "days"}, {"days", "month"}}) {
      Path store = dir.resolve("two-" + order[0] + ".p12");
      java.security.KeyStore two = java.security.KeyStore.getInstance("PKCS12");
      two.load(null, null);
      for (String alias : order) {
        two.setEntry(alias, entries.get(alias), protection);
      }
      try (var out = Files.newOutputStream(store)) {
        two.store(out, "changeit".toCharArray());
      }
      java.security.KeyStore ks = loadStore(store, "changeit");
      assertEquals(List.of(order), java.util.Collections.list(ks.aliases()),
          "the file lists the entries in this order");
      long days = ((java.security.cert.X509Certificate) ks.getCertificate("days")).getNotAfter()
          .toInstant().getEpochSecond();
      long month = ((java.security.cert.X509Certificate) ks.getCertificate("month"))
          .getNotAfter().toInstant().getEpochSecond();
      assertTrue(days < month);
      TlsFiles tls = new TlsFiles(TlsFiles.Use.PEER, store, null, "changeit".toCharArray());
      assertEquals(days, tls.stats().certificateNotAfterSeconds(),
          "entries added in the order " + List.of(order));
    }
  }
}
