package io.github.prefixrouter.server;

import static io.github.prefixrouter.server.TlsCertificates.PASSWORD;

import io.github.prefixrouter.testing.LoggedLines;
import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.statistics.Statistics;
import net.jqwik.api.Tuple;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.junit.jupiter.api.Assertions;

/**
 * Trust stores cut short, with a byte or a bit changed, or no trust store at all, read as a
 * {@link NodeMain} reads its {@code --tls-truststore} and {@code --client-tls-truststore}: at the
 * start ({@link TlsFiles}' constructor) and at a re-read ({@link TlsFiles#check()}). Each is
 * refused with an {@link IllegalArgumentException} naming the trust store (a failed start, one
 * line, status 1), and at a re-read counted as a failed reload, logged naming it, the files in
 * use kept; none is put in use unless the JDK reads it as a PKCS12 store holding a certificate.
 * The property's tries are {@code jqwik.tries.default}: 200, 10,000 with {@code -Plong}.
 */
class TrustStoreFuzzProperties {

  private static Path dir;
  private static Path key;
  /** A trust store as {@code keytool -importcert} makes it, the JDK's PKCS12 defaults. */
  private static byte[] good;
  /** For each use, files in use whose trust store is re-read. */
  private static final Map<TlsFiles.Use, TlsFiles> watching = new EnumMap<>(TlsFiles.Use.class);
  private static final Map<TlsFiles.Use, Path> watched = new EnumMap<>(TlsFiles.Use.class);

  @BeforeContainer
  static void makeFiles() throws Exception {
    dir = Files.createTempDirectory("truststore-fuzz");
    // the keystore's PKCS12 iteration counts are 1, which makes each read of it about 10 ms
    // shorter: the trust store is what is damaged here, and keeps the JDK's counts
    key = dir.resolve("fz.p12");
    TlsCertificates.keytool("-J-Dkeystore.pkcs12.macIterationCount=1",
        "-J-Dkeystore.pkcs12.keyPbeIterationCount=1",
        "-J-Dkeystore.pkcs12.certPbeIterationCount=1", "-genkeypair", "-alias", "fz",
        "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=fz", "-ext",
        "san=ip:127.0.0.1", "-validity", "2", "-storetype", "PKCS12", "-keystore",
        key.toString(), "-storepass", PASSWORD, "-keypass", PASSWORD);
    good = Files.readAllBytes(TlsCertificates.truststore(dir, dir.resolve("trust.p12"), "fz"));
    for (TlsFiles.Use use : TlsFiles.Use.values()) {
      Path file = Files.write(dir.resolve("watched-" + use + ".p12"), good);
      watched.put(use, file);
      watching.put(use, new TlsFiles(use, key, file, PASSWORD.toCharArray()));
    }
  }

  @AfterContainer
  static void removeFiles() throws Exception {
    try (Stream<Path> files = Files.walk(dir)) {
      for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }

  /**
   * A trust store's bytes and how they were made, which a failing try reports.
   *
   * @param kind how, in one word, for the run's statistics
   */
  record Damaged(String kind, String how, byte[] bytes) {
    @Override
    public String toString() {
      return how + " (" + bytes.length + " bytes)";
    }
  }

  @Provide
  Arbitrary<Damaged> damaged() {
    int n = good.length;
    Arbitrary<Integer> at = Arbitraries.integers().between(0, n - 1);
    Arbitrary<Damaged> cut = at.map(len -> new Damaged("cut", "cut to " + len + " bytes",
        Arrays.copyOf(good, len)));
    Arbitrary<Damaged> byteChanged = Combinators.combine(at, Arbitraries.integers().between(1, 255))
        .as((i, x) -> {
          byte[] b = good.clone();
          b[i] ^= (byte) (int) x;
          return new Damaged("byte", "byte " + i + " xor " + x, b);
        });
    Arbitrary<Damaged> bitFlipped = Combinators.combine(at, Arbitraries.integers().between(0, 7))
        .as((i, bit) -> {
          byte[] b = good.clone();
          b[i] ^= (byte) (1 << bit);
          return new Damaged("bit", "bit " + bit + " of byte " + i + " flipped", b);
        });
    Arbitrary<Damaged> garbage = Arbitraries.bytes().array(byte[].class).ofMaxSize(2 * n)
        .map(b -> new Damaged("random", "random bytes", b));
    return Arbitraries.frequencyOf(Tuple.of(3, cut), Tuple.of(3, byteChanged),
        Tuple.of(3, bitFlipped), Tuple.of(1, garbage));
  }

  @Property
  void aDamagedTrustStoreIsRefusedNamingItAtTheStartAndAtAReRead(
      @ForAll("damaged") Damaged d, @ForAll TlsFiles.Use use) throws Exception {
    Read read = quietly(d.bytes(), use, null);
    Statistics.label("damage, outcome").collect(d.kind(),
        read.refused() ? "refused" : "put in use");
    Assertions.assertEquals(List.of(), read.problems(),
        "what reading " + d + " as a trust store did");
  }

  /** Whether the start refused a trust store, and the ways its reads went wrong. */
  record Read(boolean refused, List<String> problems) {}

  /**
   * Reads {@code bytes} as the trust store of {@code use} at a start and at a re-read.
   *
   * @param refusalSays what the refusal's message must say, after the file's name; null for
   *     anything, or for files the JDK reads as a PKCS12 store holding a certificate, which may be
   *     put in use
   */
  private static Read readBothWays(byte[] bytes, TlsFiles.Use use, String refusalSays)
      throws Exception {
    List<String> problems = new ArrayList<>();
    Path file = Files.write(dir.resolve("damaged.p12"), bytes);
    Throwable refused = null;
    try {
      new TlsFiles(use, key, file, PASSWORD.toCharArray());
    } catch (Throwable e) {
      refused = e;
    }
    if (refused == null) {
      if (refusalSays != null || !jdkReadsACertificate(bytes)) {
        problems.add("the start put it in use, though it holds no certificate the JDK reads");
      }
    } else if (!(refused instanceof IllegalArgumentException) || !namesIt(refused.getMessage(),
        file, refusalSays)) {
      problems.add("the start threw " + refused + (refusalSays == null ? ""
          : ", not naming the file and saying " + refusalSays));
    }
    TlsFiles tls = watching.get(use);
    Path watchedFile = watched.get(use);
    TlsFiles.Stats before = tls.stats();
    Files.write(watchedFile, bytes);
    List<String> lines;
    try {
      lines = LoggedLines.logged("unchanged in use", tls::check);
    } catch (Throwable e) {
      problems.add("the re-read threw " + e);
      lines = List.of();
    }
    TlsFiles.Stats after = tls.stats();
    Files.write(watchedFile, good);
    tls.check();
    TlsFiles.Stats again = tls.stats();
    if (refused != null || refusalSays != null) {
      if (!after.equals(new TlsFiles.Stats(before.reloads(), before.reloadFailures() + 1,
          before.certificateNotAfterSeconds()))) {
        problems.add("the re-read was not one failed reload: " + before + " then " + after
            + (after.reloads() > before.reloads() ? ", it was put in use" : ""));
      }
      if (lines.size() != 1 || !namesIt(lines.get(0).substring(
          lines.get(0).indexOf("unchanged in use: ") + "unchanged in use: ".length()),
          watchedFile, refusalSays)) {
        problems.add("the re-read's log did not name the file once: " + lines);
      }
      if (!again.equals(after)) {
        problems.add("the files in use were not kept: the good trust store read again after "
            + "the failed re-read was " + (again.reloads() > after.reloads() ? "a change put in use"
                : "not unchanged") + ": " + after + " then " + again);
      }
    } else if (after.reloads() != before.reloads() + 1 || after.reloadFailures()
        != before.reloadFailures()) {
      problems.add("a trust store the start put in use was not at the re-read: " + before
          + " then " + after);
    }
    return new Read(refused != null, problems);
  }

  /** Whether a refusal's message names {@code file} first, and says {@code says} if given. */
  private static boolean namesIt(String message, Path file, String says) {
    return message != null
        && (message.startsWith("cannot load " + file + ": ")
            || message.startsWith("cannot use " + file + ": "))
        && (says == null || message.contains(says));
  }

  /** Whether the JDK loads {@code bytes} as a PKCS12 store holding at least one certificate. */
  private static boolean jdkReadsACertificate(byte[] bytes) {
    try {
      KeyStore ks = KeyStore.getInstance("PKCS12");
      ks.load(new ByteArrayInputStream(bytes), PASSWORD.toCharArray());
      for (String alias : Collections.list(ks.aliases())) {
        if (ks.getCertificate(alias) != null) {
          return true;
        }
      }
      return false;
    } catch (Exception | Error e) {
      return false;
    }
  }

  /** {@link #readBothWays}, what it logs kept from the test's output. */
  private static Read quietly(byte[] bytes, TlsFiles.Use use, String refusalSays) {
    Read[] read = new Read[1];
    LoggedLines.logged("", () -> {
      try {
        read[0] = readBothWays(bytes, use, refusalSays);
      } catch (Exception e) {
        read[0] = new Read(false, List.of("the test could not write the file: " + e));
      }
    });
    return read[0];
  }

  /** A trust store whose problem is known, refused at the start and at a re-read alike. */
  private static void refused(byte[] bytes, String says) {
    List<String> problems = new ArrayList<>();
    for (TlsFiles.Use use : TlsFiles.Use.values()) {
      quietly(bytes, use, says).problems().forEach(p -> problems.add(use + ": " + p));
    }
    Assertions.assertEquals(List.of(), problems, "what reading the trust store did");
  }

  private static byte[] stored(KeyStore ks, String password) throws Exception {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    ks.store(out, password.toCharArray());
    return out.toByteArray();
  }

  private static KeyStore emptyStore() throws Exception {
    KeyStore ks = KeyStore.getInstance("PKCS12");
    ks.load(null, null);
    return ks;
  }

  @Example
  void anEmptyFile() throws Exception {
    refused(new byte[0], "the file is empty");
  }

  @Example
  void aTrustStoreUnderAnotherPassword() throws Exception {
    KeyStore ks = KeyStore.getInstance("PKCS12");
    ks.load(new ByteArrayInputStream(good), PASSWORD.toCharArray());
    refused(stored(ks, "another"), "the password is wrong");
  }

  /**
   * A PKCS12 store holding no certificate, none at all or only a secret key, is refused as a
   * trust store: it was put in use, at the start and at a re-read, and every handshake whose
   * other side's certificate it was to check then failed.
   */
  @Example
  void aStoreWithNoCertificate() throws Exception {
    refused(stored(emptyStore(), PASSWORD), "holds no certificate");
    KeyStore secret = emptyStore();
    secret.setEntry("s", new KeyStore.SecretKeyEntry(
        new javax.crypto.spec.SecretKeySpec(new byte[16], "AES")),
        new KeyStore.PasswordProtection(PASSWORD.toCharArray()));
    refused(stored(secret, PASSWORD), "holds no certificate");
  }

  @Example
  void pemText() throws Exception {
    refused(("-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIEYX0wCgYIKoZIzj0EAwIwDTEL\n"
        + "-----END CERTIFICATE-----\n").getBytes(StandardCharsets.US_ASCII), "PEM text");
  }

  @Example
  void garbage() throws Exception {
    refused("not a trust store at all\n".getBytes(StandardCharsets.US_ASCII),
        "not a PKCS12 store");
  }
}
