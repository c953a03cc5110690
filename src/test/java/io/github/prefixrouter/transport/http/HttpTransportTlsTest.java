package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.TransportException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** TLS between two transports, with a self-signed certificate made by keytool for this run. */
class HttpTransportTlsTest {

  @TempDir static Path dir;
  static SSLContext trusted;
  static SSLContext untrusted;

  @BeforeAll
  static void makeCertificates() throws Exception {
    Path ks = keystore("node", "san=ip:127.0.0.1");
    trusted = context(ks, true);
    untrusted = context(ks, false);
  }

  private static Path keystore(String name, String san) throws Exception {
    return keystore(dir, name, san);
  }

  /**
   * A PKCS12 keystore {@code dir/name.p12} (password {@code changeit}) holding a key pair and a
   * self-signed EC certificate for {@code CN=name} with the extension {@code san}, made by
   * keytool.
   */
  static Path keystore(Path dir, String name, String san) throws Exception {
    Path ks = dir.resolve(name + ".p12");
    String keytool = Path.of(System.getProperty("java.home"), "bin", "keytool").toString();
    Process p = new ProcessBuilder(keytool, "-genkeypair", "-alias", name, "-keyalg", "EC", "-groupname",
        "secp256r1", "-dname", "CN=" + name, "-ext", san, "-validity", "2", "-storetype", "PKCS12",
        "-keystore", ks.toString(), "-storepass", "changeit", "-keypass", "changeit")
        .redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "keytool failed: " + out);
    return ks;
  }

  /**
   * Key and trust from the same keystore, so the cluster trusts its own certificate; or, with
   * {@code trust} false, the same key and an empty trust store, which trusts no peer.
   */
  private static SSLContext context(Path ks, boolean trust) throws Exception {
    KeyStore store = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(ks)) {
      store.load(in, "changeit".toCharArray());
    }
    KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
    kmf.init(store, "changeit".toCharArray());
    TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    KeyStore empty = KeyStore.getInstance("PKCS12");
    empty.load(null, null);
    tmf.init(trust ? store : empty);
    SSLContext c = SSLContext.getInstance("TLS");
    c.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
    return c;
  }

  @Test
  void requestsAndMessagesTravelOverTls() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    try (HttpTransport a = HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
            .clusterKey(HttpTransportTest.KEY).tls(trusted).connectTimeout(Duration.ofSeconds(20)).build();
        HttpTransport b = HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
            .clusterKey(HttpTransportTest.KEY).tls(trusted).connectTimeout(Duration.ofSeconds(20)).build()) {
      a.start(ra);
      b.start(new HttpTransportTest.Recorder());
      byte[] answer = b.request(a.localAddress(), "tls".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10))
          .get(20, TimeUnit.SECONDS);
      assertEquals("echo b tls", new String(answer, StandardCharsets.UTF_8));
      b.send(a.localAddress(), "m".getBytes(StandardCharsets.UTF_8));
      assertEquals("b@" + b.localAddress().address() + ":m", ra.messages.poll(10, TimeUnit.SECONDS));
    }
  }

  @Test
  void peerWithAnUntrustedCertificateIsRefused() throws Exception {
    // b trusts no certificate, so it must refuse a's
    try (HttpTransport a = HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
            .clusterKey(HttpTransportTest.KEY).tls(trusted).connectTimeout(Duration.ofSeconds(20)).build();
        HttpTransport b = HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
            .clusterKey(HttpTransportTest.KEY).tls(untrusted).connectTimeout(Duration.ofSeconds(20)).build()) {
      a.start(new HttpTransportTest.Recorder());
      b.start(new HttpTransportTest.Recorder());
      CompletableFuture<byte[]> f = b.request(a.localAddress(), new byte[1], Duration.ofSeconds(10));
      ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(60, TimeUnit.SECONDS));
      TransportException te = (TransportException) e.getCause();
      assertTrue(te.kind() == TransportException.Kind.PROTOCOL || te.kind() == TransportException.Kind.UNREACHABLE,
          "kind " + te.kind());
      assertEquals(0, a.stats().requestsReceived());
    }
  }

  /**
   * A context that was never initialized is refused by build() with a message that says so. It
   * was accepted, and start() then threw the JDK's IllegalStateException from building the
   * client, after the server had started listening on the port (its dispatcher thread alive).
   */
  @Test
  void anUninitializedContextIsRefusedByBuild() throws Exception {
    SSLContext uninitialized = SSLContext.getInstance("TLS");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
            .clusterKey(HttpTransportTest.KEY).tls(uninitialized).build());
    assertTrue(e.getMessage().contains("tls") && e.getMessage().contains("init"), e.getMessage());
  }
}
