package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.testing.FailingJcaProvider;
import java.io.IOException;
import java.nio.file.Path;
import java.security.Provider;
import java.security.Security;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What {@link TlsFiles}' constructor throws, and says, when the host's JCA providers fail: a
 * typed exception whose message names the files, whatever was thrown, so that a node's start
 * says in one line which files it could not put in use.
 */
class TlsFilesTest {

  @TempDir static Path dir;
  static Path key;
  static Path trust;

  @BeforeAll
  static void makeFiles() throws Exception {
    key = TlsCertificates.keystore(dir, "f1");
    trust = TlsCertificates.truststore(dir, dir.resolve("trust.p12"), "f1");
  }

  /**
   * Builds {@link TlsFiles} with {@link FailingJcaProvider} first among the providers, throwing
   * {@code thrown} at {@code at}; what the constructor threw, or a problem's description.
   */
  private static Throwable failing(String at, Throwable thrown, Path truststore) {
    Provider hsm = FailingJcaProvider.provider();
    FailingJcaProvider.at = at;
    FailingJcaProvider.toThrow = thrown;
    assertTrue(Security.insertProviderAt(hsm, 1) > 0, "provider installed");
    try {
      new TlsFiles(TlsFiles.Use.PEER, key, truststore, TlsCertificates.PASSWORD.toCharArray());
      return null;
    } catch (Throwable e) {
      return e;
    } finally {
      FailingJcaProvider.toThrow = null;
      Security.removeProvider(hsm.getName());
    }
  }

  /**
   * A JCA provider (a hardware token's, say) that throws as the TLS context is looked up fails
   * the constructor with an {@link IllegalStateException} naming the files and what was thrown:
   * it caught only a {@link java.security.GeneralSecurityException}, which it made an exception
   * naming no file, and an {@link Error} or a RuntimeException escaped as it was, so that a
   * node's start said {@code the TLS files: InternalError: token driver}.
   */
  @Test
  void aProviderThatThrowsAsTheTlsContextIsLookedUpFailsNamingTheFiles() {
    List<Object[]> cases = List.of(
        new Object[] {new InternalError("token driver"), null,
            "cannot set up TLS with " + key + ": the JDK or a JCA provider failed setting up "
                + "its context: token driver (InternalError)"},
        new Object[] {new AssertionError("a provider that breaks"), trust,
            "cannot set up TLS with " + key + " and " + trust + ": the JDK or a JCA provider "
                + "failed setting up its context: a provider that breaks (AssertionError)"},
        new Object[] {new java.security.ProviderException("token removed"), trust,
            "cannot set up TLS with " + key + " and " + trust + ": the JDK or a JCA provider "
                + "failed setting up its context: token removed (ProviderException)"},
        new Object[] {new java.security.NoSuchAlgorithmException("TLS SSLContext not available"),
            null, "cannot set up TLS with " + key + ": the JDK or a JCA provider failed setting "
                + "up its context: TLS SSLContext not available (NoSuchAlgorithmException)"});
    List<String> problems = new ArrayList<>();
    for (Object[] c : cases) {
      Throwable e = failing(FailingJcaProvider.lookup("SSLContext"), (Throwable) c[0], (Path) c[1]);
      if (!(e instanceof IllegalStateException) || !c[2].equals(e.getMessage())
          || e.getCause() != c[0]) {
        problems.add(c[0] + ": threw " + e);
      }
    }
    assertEquals(List.of(), problems, "what the TLS context's lookup that throws made");
  }

  /**
   * A JCA provider that throws a checked exception as the keystore is looked up says that the
   * JDK or the provider failed, as for anything else thrown there: an {@link IOException} thrown
   * undeclared, or the {@link java.security.KeyStoreException} of a JDK without PKCS12, was
   * taken for the file's own problem, {@code it is not a PKCS12 store, or it is damaged or cut
   * short}.
   */
  @Test
  void aCheckedExceptionAsTheKeystoreIsLookedUpIsNotTakenForADamagedFile() {
    List<Object[]> cases = List.of(
        new Object[] {new IOException("token unreachable"),
            "cannot load " + key + ": the JDK or a JCA provider failed reading it: "
                + "token unreachable (IOException)"},
        new Object[] {new java.security.KeyStoreException("PKCS12 not found"),
            "cannot load " + key + ": the JDK or a JCA provider failed reading it: "
                + "PKCS12 not found (KeyStoreException)"});
    List<String> problems = new ArrayList<>();
    for (Object[] c : cases) {
      Throwable e = failing(FailingJcaProvider.lookup("KeyStore"), (Throwable) c[0], null);
      if (!(e instanceof IllegalArgumentException) || !c[1].equals(e.getMessage())) {
        problems.add(c[0] + ": threw " + e);
      }
    }
    assertEquals(List.of(), problems, "what the keystore's lookup that throws made");
  }

  /**
   * A trust manager that cannot be looked up (no PKIX in the JDK's providers, a provider that
   * throws the JDK's checked exception) names the trust store: the message of such a
   * {@link java.security.GeneralSecurityException} named the keystore, whichever manager was
   * being set up.
   */
  @Test
  void aTrustManagerThatCannotBeLookedUpNamesTheTrustStore() {
    Throwable e = failing(FailingJcaProvider.lookup("TrustManagerFactory"),
        new java.security.NoSuchAlgorithmException("PKIX TrustManagerFactory not available"),
        trust);
    assertTrue(e instanceof IllegalArgumentException, "threw " + e);
    assertEquals("cannot use " + trust + ": PKIX TrustManagerFactory not available",
        e.getMessage(), "the file named");
  }
}
