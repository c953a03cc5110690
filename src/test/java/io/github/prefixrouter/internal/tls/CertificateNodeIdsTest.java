package io.github.prefixrouter.internal.tls;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Which node ids a certificate names, on certificates made with the JDK's {@code keytool}: only
 * the leaf's DNS and URI alternative names count, exactly, case included; never the subject's
 * common name, an IP address or an e-mail address.
 */
class CertificateNodeIdsTest {

  private static final String PASSWORD = "changeit";

  @TempDir static Path dir;

  /** CN=n2; DNS n1, URI spiffe://example.org/node/n1, IP 127.0.0.1, e-mail n3@example.org. */
  private static X509Certificate mixed;
  /** CN=n1 and no alternative names. */
  private static X509Certificate bare;
  /** DNS m0 to m10: eleven names. */
  private static X509Certificate many;

  @BeforeAll
  static void certificates() throws Exception {
    mixed = certificate("mixed", "CN=n2",
        "dns:n1,uri:spiffe://example.org/node/n1,ip:127.0.0.1,email:n3@example.org");
    bare = certificate("bare", "CN=n1", null);
    StringBuilder names = new StringBuilder();
    for (int i = 0; i <= 10; i++) {
      names.append(i == 0 ? "" : ",").append("dns:m").append(i);
    }
    many = certificate("many", "CN=many,O=Example", names.toString());
  }

  private static X509Certificate certificate(String alias, String dname, String san)
      throws Exception {
    Path ks = dir.resolve(alias + ".p12");
    List<String> cmd = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "keytool").toString(),
        "-genkeypair", "-alias", alias, "-keyalg", "EC", "-groupname", "secp256r1", "-dname",
        dname, "-validity", "2", "-storetype", "PKCS12", "-keystore", ks.toString(),
        "-storepass", PASSWORD, "-keypass", PASSWORD));
    if (san != null) {
      cmd.addAll(List.of("-ext", "san=" + san));
    }
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "keytool failed: " + out);
    KeyStore store = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(ks)) {
      store.load(in, PASSWORD.toCharArray());
    }
    return (X509Certificate) store.getCertificate(alias);
  }

  @Test
  void aDnsOrUriNameEqualToTheIdNamesIt() {
    assertTrue(CertificateNodeIds.names(mixed, "n1"));
    assertTrue(CertificateNodeIds.names(mixed, "spiffe://example.org/node/n1"));
    assertTrue(CertificateNodeIds.names(many, "m10"));
  }

  @Test
  void nothingElseNamesAnId() {
    assertFalse(CertificateNodeIds.names(mixed, "N1"), "case counts");
    assertFalse(CertificateNodeIds.names(mixed, "n"), "a prefix is not the name");
    assertFalse(CertificateNodeIds.names(mixed, "n2"), "the common name is never consulted");
    assertFalse(CertificateNodeIds.names(bare, "n1"), "the common name is never consulted");
    assertFalse(CertificateNodeIds.names(mixed, "127.0.0.1"), "an IP address is not a node id");
    assertFalse(CertificateNodeIds.names(mixed, "n3@example.org"), "nor an e-mail address");
    assertFalse(CertificateNodeIds.names(null, "n1"));
    assertFalse(CertificateNodeIds.names(mixed, null));
  }

  @Test
  void descriptionsShowTheSubjectAndTheFirstEightNames() {
    assertEquals("[n1, spiffe://example.org/node/n1]", CertificateNodeIds.shownNames(mixed));
    assertEquals("[]", CertificateNodeIds.shownNames(bare));
    assertEquals("[m0, m1, m2, m3, m4, m5, m6, m7] and 3 more",
        CertificateNodeIds.shownNames(many));
    assertEquals("CN=n2 [n1, spiffe://example.org/node/n1]", CertificateNodeIds.describe(mixed));
    assertEquals("CN=many,O=Example", CertificateNodeIds.subject(many));
    assertEquals("no certificate", CertificateNodeIds.describe(null));
    assertEquals("no certificate", CertificateNodeIds.subject(null));
  }

  /** A session whose {@code getPeerCertificates} answers {@code chain}, or throws if null. */
  private static SSLSession session(Certificate[] chain) {
    return (SSLSession) Proxy.newProxyInstance(SSLSession.class.getClassLoader(),
        new Class<?>[] {SSLSession.class}, (proxy, method, args) -> {
          if (method.getName().equals("getPeerCertificates")) {
            if (chain == null) {
              throw new SSLPeerUnverifiedException("peer not authenticated");
            }
            return chain;
          }
          throw new UnsupportedOperationException(method.getName());
        });
  }

  @Test
  void theLeafIsTheFirstCertificateOfThePeersChain() {
    assertSame(mixed, CertificateNodeIds.leaf(session(new Certificate[] {mixed, many})));
    assertNull(CertificateNodeIds.leaf(session(new Certificate[0])), "no certificate presented");
    assertNull(CertificateNodeIds.leaf(session(null)), "a peer that presented none");
    assertNull(CertificateNodeIds.leaf(null));
  }

  /**
   * CN=n1, and an alternative names extension that does not parse: DNS {@code a1}, then an IP
   * address of one byte (made with {@code openssl req -addext 2.5.29.17=DER:3006820261318701}).
   */
  private static final String MALFORMED_NAMES =
      "-----BEGIN CERTIFICATE-----\n"
      + "MIIBgjCCASigAwIBAgIUZ63+POx0NDDV2Zn/VYYCJBQEPFIwCgYIKoZIzj0EAwIw\n"
      + "DTELMAkGA1UEAwwCbjEwIBcNMjYxMjA0MTY0ODI3WhgPMjEyNjExMTAxNjQ4Mjda\n"
      + "MA0xCzAJBgNVBAMMAm4xMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEXnM1UdS7\n"
      + "lkbkLrL4dI7vVoCyMoZvUwGQXg15Dq0fItChNM7YU3yZVsKbavq6KGjQNGhAqII6\n"
      + "9L8x83jkd5RPYaNkMGIwHQYDVR0OBBYEFJSnpEgvsCc+hvm30QlxlyExZhrxMB8G\n"
      + "A1UdIwQYMBaAFJSnpEgvsCc+hvm30QlxlyExZhrxMA8GA1UdEwEB/wQFMAMBAf8w\n"
      + "DwYDVR0RBAgwBoICYTGHATAKBggqhkjOPQQDAgNIADBFAiBvWTba1L+ZsP8kProU\n"
      + "mHqedSpozNylPhR/vFD+T81YZwIhAIILNgij4JWKTP25MePVszFr+9rq/+xgkYdj\n"
      + "aZk0Podj\n"
      + "-----END CERTIFICATE-----\n";

  @Test
  void aCertificateWhoseNamesDoNotParseNamesNothing() throws Exception {
    X509Certificate c = (X509Certificate) java.security.cert.CertificateFactory
        .getInstance("X.509").generateCertificate(new java.io.ByteArrayInputStream(
            MALFORMED_NAMES.getBytes(StandardCharsets.US_ASCII)));
    assertFalse(CertificateNodeIds.names(c, "a1"));
    assertFalse(CertificateNodeIds.names(c, "n1"));
    assertEquals("[]", CertificateNodeIds.shownNames(c));
    assertEquals("CN=n1 []", CertificateNodeIds.describe(c));
  }
}
