package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.Principal;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509ExtendedKeyManager;
import javax.net.ssl.X509TrustManager;

/**
 * PKCS12 files made with the JDK's {@code keytool} for a test run (password
 * {@value #PASSWORD}), and TLS clients of a node's ports: the TLS tests' shared helpers.
 */
final class TlsCertificates {

  /** The password of every file made here. */
  static final String PASSWORD = "changeit";

  private TlsCertificates() {}

  /**
   * Runs keytool with {@code args}; fails the test if it fails. Its JVM runs with the quick
   * compiler and the serial collector: keytool's work is a start-up, and these halve its CPU time.
   */
  static void keytool(String... args) throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "keytool").toString());
    cmd.addAll(List.of("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC"));
    cmd.addAll(List.of(args));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "keytool failed: " + out);
  }

  /**
   * {@code dir/NAME.p12}: an EC key under alias {@code name} with a self-signed certificate
   * {@code CN=name} for 127.0.0.1, valid 2 days.
   */
  static Path keystore(Path dir, String name) throws Exception {
    return keystore(dir, name, "ip:127.0.0.1");
  }

  /**
   * {@code dir/NAME.p12}: an EC key under alias {@code name} with a self-signed certificate
   * {@code CN=name} whose subject alternative names are {@code san} (keytool's syntax:
   * {@code dns:n1,ip:127.0.0.1}), valid 2 days.
   */
  static Path keystore(Path dir, String name, String san) throws Exception {
    Path ks = dir.resolve(name + ".p12");
    keytool("-genkeypair", "-alias", name, "-keyalg", "EC", "-groupname", "secp256r1", "-dname",
        "CN=" + name, "-ext", "san=" + san, "-validity", "2", "-storetype", "PKCS12",
        "-keystore", ks.toString(), "-storepass", PASSWORD, "-keypass", PASSWORD);
    return ks;
  }

  /**
   * A trust store at {@code file} holding the certificates of keystores made by
   * {@link #keystore} in {@code dir}, named by their {@code names}: what keytool's
   * {@code -exportcert} and {@code -importcert} make, written in this JVM.
   */
  static Path truststore(Path dir, Path file, String... names) throws Exception {
    KeyStore trust = KeyStore.getInstance("PKCS12");
    trust.load(null, null);
    for (String name : names) {
      trust.setCertificateEntry(name, load(dir.resolve(name + ".p12")).getCertificate(name));
    }
    try (OutputStream out = Files.newOutputStream(file)) {
      trust.store(out, PASSWORD.toCharArray());
    }
    return file;
  }

  private static KeyStore load(Path file) throws Exception {
    KeyStore ks = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(file)) {
      ks.load(in, PASSWORD.toCharArray());
    }
    return ks;
  }

  /** The key managers of {@code keystore}'s key; null for none. */
  private static KeyManager[] keyManagers(Path keystore) throws Exception {
    if (keystore == null) {
      return null;
    }
    KeyManagerFactory kmf = KeyManagerFactory.getInstance("PKIX");
    kmf.init(load(keystore), PASSWORD.toCharArray());
    return kmf.getKeyManagers();
  }

  /**
   * A client's TLS context trusting the certificates in {@code truststore} and presenting the
   * key of {@code keystore} when asked for a certificate (null: none).
   */
  static SSLContext clientContext(Path truststore, Path keystore) throws Exception {
    TrustManagerFactory tmf = TrustManagerFactory.getInstance("PKIX");
    tmf.init(load(truststore));
    KeyManager[] keys = keyManagers(keystore);
    SSLContext c = SSLContext.getInstance("TLS");
    c.init(keys, tmf.getTrustManagers(), null);
    return c;
  }

  /**
   * As {@link #clientContext}, but presenting the key of {@code keystore} whatever issuers the
   * server names: a JDK client offers only a certificate whose chain leads to one of them, and
   * so presents none to a port whose trust store does not hold its certificate.
   */
  static SSLContext insistentClientContext(Path truststore, Path keystore) throws Exception {
    TrustManagerFactory tmf = TrustManagerFactory.getInstance("PKIX");
    tmf.init(load(truststore));
    // SunX509's aliases are the keystore's own
    KeyManagerFactory kmf = KeyManagerFactory.getInstance("SunX509");
    kmf.init(load(keystore), PASSWORD.toCharArray());
    X509ExtendedKeyManager keys = (X509ExtendedKeyManager) kmf.getKeyManagers()[0];
    String chosen = load(keystore).aliases().nextElement();
    X509ExtendedKeyManager insistent = new X509ExtendedKeyManager() {
      @Override
      public String[] getClientAliases(String keyType, Principal[] issuers) {
        return keys.getClientAliases(keyType, null);
      }

      @Override
      public String chooseClientAlias(String[] keyType, Principal[] issuers, Socket socket) {
        return chosen;
      }

      @Override
      public String chooseEngineClientAlias(String[] keyType, Principal[] issuers,
          SSLEngine engine) {
        return chosen;
      }

      @Override
      public String[] getServerAliases(String keyType, Principal[] issuers) {
        return keys.getServerAliases(keyType, issuers);
      }

      @Override
      public String chooseServerAlias(String keyType, Principal[] issuers, Socket socket) {
        return keys.chooseServerAlias(keyType, issuers, socket);
      }

      @Override
      public X509Certificate[] getCertificateChain(String a) {
        return keys.getCertificateChain(a);
      }

      @Override
      public PrivateKey getPrivateKey(String a) {
        return keys.getPrivateKey(a);
      }
    };
    SSLContext c = SSLContext.getInstance("TLS");
    c.init(new KeyManager[] {insistent}, tmf.getTrustManagers(), null);
    return c;
  }

  /** The certificate the TLS port at {@code address} presents, taken by a client trusting all. */
  static X509Certificate presented(String address) throws Exception {
    return presented(address, null);
  }

  /**
   * The certificate the TLS port at {@code address} presents, taken by a client trusting all
   * and presenting the key of {@code keystore} when asked for a certificate (null: none), as a
   * port that requires client certificates asks.
   */
  static X509Certificate presented(String address, Path keystore) throws Exception {
    KeyManager[] keys = keyManagers(keystore);
    SSLContext c = SSLContext.getInstance("TLS");
    c.init(keys, new TrustManager[] {new X509TrustManager() {
      @Override
      public void checkClientTrusted(X509Certificate[] chain, String authType) {}

      @Override
      public void checkServerTrusted(X509Certificate[] chain, String authType) {}

      @Override
      public X509Certificate[] getAcceptedIssuers() {
        return new X509Certificate[0];
      }
    }}, null);
    String[] hp = address.split(":");
    try (SSLSocket s = (SSLSocket) c.getSocketFactory().createSocket(hp[0], Integer.parseInt(hp[1]))) {
      s.setSoTimeout(10_000);
      s.startHandshake();
      return (X509Certificate) s.getSession().getPeerCertificates()[0];
    }
  }

  /** A certificate's subject, {@code CN=a}. */
  static String cn(X509Certificate c) {
    return c.getSubjectX500Principal().getName();
  }
}
