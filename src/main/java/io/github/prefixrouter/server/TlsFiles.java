package io.github.prefixrouter.server;

import io.github.prefixrouter.internal.tls.CertificateNodeIds;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.net.Socket;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.Principal;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.function.Supplier;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509ExtendedKeyManager;
import javax.net.ssl.X509ExtendedTrustManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * TLS for a port of a {@link NodeMain} process (the peer port, the client port), from PKCS12
 * files that it re-reads while it runs, so that a certificate can be renewed without a restart.
 *
 * <p>The {@link SSLContext} is built once, over a key manager and a trust manager that hand every
 * call to the managers of the files last read. {@link #check()} reads the files again when their
 * bytes or their password changed and, if both load, swaps both managers at once: handshakes
 * from then on present the new certificate and trust the new trust store; connections already
 * open keep theirs. The password is asked for again at every check (the node reads its password
 * file again), so that a keystore renewed under a new password loads once both are in place. Files
 * that cannot be read or loaded leave the managers as they were, counted and logged once per
 * distinct problem; so does anything else thrown as they are read or put in use (a JCA provider
 * that throws, an {@link Error}, the JDK's PKCS12 parser thrown off by a damaged file), and the
 * files are tried again at every check until they are put in use. Files may also be held to a
 * node id ({@code --tls-bind-node-ids}): a keystore whose certificate does not name it is refused
 * like one that cannot be loaded, at the start and at every re-read. Thread-safe.
 */
final class TlsFiles {

  private static final Logger log = LoggerFactory.getLogger(TlsFiles.class);

  /** Which port the files are for: how logs and messages name them and their password. */
  enum Use {
    /** The peer port: {@code --tls-keystore}, {@code --tls-truststore}. */
    PEER("TLS", "--tls-password-file or PREFIX_ROUTER_TLS_PASSWORD"),
    /** The client port: {@code --client-tls-keystore}, {@code --client-tls-truststore}. */
    CLIENT("client TLS", "--client-tls-password-file or PREFIX_ROUTER_CLIENT_TLS_PASSWORD");

    /** The files' name in the log ("TLS", "client TLS"). */
    final String what;
    /** Where the password comes from, for the message of a wrong one. */
    final String passwordFrom;

    Use(String what, String passwordFrom) {
      this.what = what;
      this.passwordFrom = passwordFrom;
    }
  }

  private final Use use;
  private final Path keystore;
  private final Path truststore;
  /** The password, asked for at the start and at every {@link #check()}. */
  private final Supplier<char[]> passwordSource;
  /** The password the files in use loaded with. */
  private char[] password;
  private final String nodeId;
  private final SwappableKeyManager keys = new SwappableKeyManager();
  private final SwappableTrustManager trust = new SwappableTrustManager();
  private final SSLContext context;
  private byte[] keystoreBytes;
  private byte[] truststoreBytes;
  private volatile long notAfterSeconds;
  private final ReloadOutcomes outcomes;

  /**
   * Loads the files.
   *
   * @param use the port they are for
   * @param keystore PKCS12: the private key and certificate chain this port presents (usually
   *     one key entry; with several, the TLS stack picks one per handshake and the stats report
   *     the earliest expiry)
   * @param truststore PKCS12: the certificates the other side's chain must lead to, at least one
   *     (a store with none is refused, at the start and at every re-read); null for the
   *     keystore's own certificates (on the client port, which then asks clients for no
   *     certificate, the trust manager is never consulted)
   * @param password the password of both files
   * @throws IllegalArgumentException naming the file and the problem if one cannot be loaded,
   *     whatever the JDK or a JCA provider threw as it was read or set up
   * @throws IllegalStateException naming the files and what was thrown if the TLS context
   *     cannot be set up over them (no TLS in the JDK, a JCA provider that throws)
   */
  TlsFiles(Use use, Path keystore, Path truststore, char[] password) {
    this(use, keystore, truststore, password, null);
  }

  /**
   * Loads the files, which must present a certificate naming {@code nodeId}.
   *
   * @param nodeId the node id the certificate of every key entry of the keystore, now and after
   *     each re-read, must name as {@code --tls-bind-node-ids} needs (a DNS or URI subject
   *     alternative name equal to it, as {@link CertificateNodeIds#names} reads it); null for no
   *     such check
   * @throws IllegalArgumentException naming the file and the problem if one cannot be loaded,
   *     or if the keystore's certificate does not name {@code nodeId}
   * @see #TlsFiles(Use, Path, Path, char[])
   */
  TlsFiles(Use use, Path keystore, Path truststore, char[] password, String nodeId) {
    this(use, keystore, truststore, fixed(password), nodeId);
  }

  /**
   * Loads the files with a password that may change: {@code password} is called at the start
   * and at every {@link #check()}.
   *
   * @param password gives the password of both files, a new array each call (it is kept); it
   *     throws {@link IllegalArgumentException} naming the problem if it cannot (a password file
   *     that cannot be read), which at a check leaves the files in use, as a file that does not
   *     load does
   * @see #TlsFiles(Use, Path, Path, char[], String)
   */
  TlsFiles(Use use, Path keystore, Path truststore, Supplier<char[]> password, String nodeId) {
    this.use = use;
    this.nodeId = nodeId;
    this.outcomes = new ReloadOutcomes(use.what + " files");
    this.keystore = keystore;
    this.truststore = truststore;
    this.passwordSource = password;
    char[] p = password.get();
    byte[] k = read(keystore);
    byte[] t = truststore == null ? k : read(truststore);
    install(k, t, p);
    try {
      context = SSLContext.getInstance("TLS");
      context.init(new KeyManager[] {keys}, new TrustManager[] {trust}, null);
    } catch (Throwable e) {
      // no TLS in the JDK's providers, or a JCA provider that throws (a ProviderException, an
      // Error, a checked exception thrown undeclared) as the context is looked up or set up:
      // not the files' problem, but the start's one line names them
      throw new IllegalStateException("cannot set up TLS with " + keystore
          + (truststore == null ? "" : " and " + truststore) + ": the JDK or a JCA provider "
          + "failed setting up its context: " + thrown(e), e);
    }
  }

  /** The context to serve (and connect) with: its managers follow the files. */
  SSLContext context() {
    return context;
  }

  /**
   * Counters of the reloads, and when this node's certificate expires: the earliest expiry of
   * the keystore's key entries, if it holds several.
   */
  record Stats(long reloads, long reloadFailures, long certificateNotAfterSeconds) {}

  synchronized Stats stats() {
    return new Stats(outcomes.reloads(), outcomes.failures(), notAfterSeconds);
  }

  /** A password that never changes. */
  private static Supplier<char[]> fixed(char[] password) {
    char[] kept = password.clone();
    return kept::clone;
  }

  /**
   * Reads the files and the password again and, if one changed and the files load, uses them.
   * Whatever fails or is thrown on the way (a file that cannot be read or loaded, a JCA provider
   * that throws, an {@link Error}) leaves the files in use, counted and logged once per distinct
   * problem; nothing is thrown.
   */
  synchronized void check() {
    try {
      char[] p = passwordSource.get();
      byte[] k = read(keystore);
      byte[] t = truststore == null ? k : read(truststore);
      if (Arrays.equals(k, keystoreBytes) && Arrays.equals(t, truststoreBytes)
          && Arrays.equals(p, password)) {
        outcomes.unchanged();
        return;
      }
      install(k, t, p);
    } catch (Throwable e) {
      // install and load say what went wrong, naming the file; anything else thrown on the way
      // (by the password's source, say) fails the check too. Nothing is rethrown: the file
      // watch's executor would keep it in the task's future, counted and logged nowhere
      outcomes.failed(e instanceof IllegalArgumentException && e.getMessage() != null
          ? e.getMessage() : "cannot read " + use.what + " files " + keystore
              + (truststore == null ? "" : ", " + truststore) + ": " + thrown(e));
      return;
    }
    outcomes.reloaded();
    log.info("{}: now presenting the certificate of {} (valid until {})", use.what, keystore,
        java.time.Instant.ofEpochSecond(notAfterSeconds));
  }

  private void install(byte[] k, byte[] t, char[] p) {
    KeyStore ks = load(k, keystore, p);
    KeyStore ts = truststore == null ? ks : load(t, truststore, p);
    X509ExtendedKeyManager km;
    X509ExtendedTrustManager tm;
    long notAfter;
    Path settingUp = keystore; // the file whose manager is being set up, for a failure's message
    try {
      KeyManagerFactory kmf = KeyManagerFactory.getInstance("PKIX");
      kmf.init(ks, p);
      km = (X509ExtendedKeyManager) only(kmf.getKeyManagers(), X509ExtendedKeyManager.class,
          keystore);
      settingUp = truststore == null ? keystore : truststore;
      TrustManagerFactory tmf = TrustManagerFactory.getInstance("PKIX");
      tmf.init(ts);
      tm = (X509ExtendedTrustManager) only(tmf.getTrustManagers(),
          X509ExtendedTrustManager.class, truststore == null ? keystore : truststore);
      if (tm.getAcceptedIssuers().length == 0) {
        // a PKCS12 store with no entry, or only a secret key: in use, it would fail every
        // handshake whose other side's certificate it checks
        throw new IllegalArgumentException("cannot use " + settingUp + ": it holds no "
            + "certificate to trust (keytool -importcert adds one)");
      }
      settingUp = keystore;
      List<X509Certificate> presented = keyCertificates(ks, p);
      // the key manager picks an entry per handshake (by key type and the peer's issuers), so
      // the one that expires first is the one to alert on; the first listed was arbitrary
      notAfter = Long.MAX_VALUE;
      for (X509Certificate c : presented) {
        notAfter = Math.min(notAfter, c.getNotAfter().toInstant().getEpochSecond());
      }
      if (nodeId != null) {
        for (X509Certificate c : presented) {
          if (!CertificateNodeIds.names(c, nodeId)) {
            throw new IllegalArgumentException("the certificate in " + keystore + " ("
                + CertificateNodeIds.subject(c) + ", names " + CertificateNodeIds.shownNames(c)
                + ") does not name this node's id " + nodeId + ", which --tls-bind-node-ids "
                + "needs");
          }
        }
      }
    } catch (GeneralSecurityException e) {
      throw new IllegalArgumentException("cannot use " + settingUp + ": " + describe(e), e);
    } catch (IllegalArgumentException e) {
      throw e;
    } catch (Throwable e) {
      // a JCA provider that throws (a ProviderException, an Error, a checked exception thrown
      // undeclared) as a manager is looked up or set up: the file it was setting up
      throw new IllegalArgumentException("cannot use " + settingUp + ": the JDK or a JCA "
          + "provider failed setting it up: " + thrown(e), e);
    }
    // a handshake under way may see the new key and the old trust or the other way round;
    // during a renewal both pairs work (docs/deployment.md)
    keys.install(km);
    trust.delegate = tm;
    keystoreBytes = k;
    truststoreBytes = t;
    password = p;
    notAfterSeconds = notAfter;
  }

  private static Object only(Object[] managers, Class<?> type, Path file) {
    for (Object m : managers) {
      if (type.isInstance(m)) {
        return m;
      }
    }
    throw new IllegalArgumentException("no " + type.getSimpleName() + " for " + file);
  }

  /**
   * The certificates of the keystore's key entries (the ones the key manager may present), the
   * first one's first; at least one.
   */
  private List<X509Certificate> keyCertificates(KeyStore ks, char[] p)
      throws GeneralSecurityException {
    List<X509Certificate> out = new ArrayList<>();
    for (String alias : Collections.list(ks.aliases())) {
      if (ks.isKeyEntry(alias) && ks.getKey(alias, p) instanceof PrivateKey) {
        Certificate c = ks.getCertificate(alias);
        if (c instanceof X509Certificate x) {
          out.add(x);
        }
      }
    }
    if (out.isEmpty()) {
      throw new IllegalArgumentException(keystore
          + " holds no private key with an X.509 certificate");
    }
    return out;
  }

  private KeyStore load(byte[] bytes, Path file, char[] p) {
    KeyStore ks;
    try {
      ks = KeyStore.getInstance("PKCS12");
    } catch (Throwable e) {
      // no PKCS12 in the JDK's providers (a KeyStoreException), or a JCA provider that throws as
      // the store is looked up, a checked exception undeclared too: not the file's problem
      throw new IllegalArgumentException("cannot load " + file + ": the JDK or a JCA provider "
          + "failed reading it: " + thrown(e), e);
    }
    try {
      ks.load(new ByteArrayInputStream(bytes), p);
      return ks;
    } catch (IOException | GeneralSecurityException e) {
      throw new IllegalArgumentException("cannot load " + file + ": "
          + loadProblem(bytes, e, use.passwordFrom), e);
    } catch (Throwable e) {
      // a JCA provider that throws (a ProviderException, an Error, a checked exception thrown
      // undeclared) as the store's integrity is checked; or the JDK's parser
      // thrown off by a damaged or hostile file (an index out of bounds, say)
      throw new IllegalArgumentException("cannot load " + file + ": the JDK or a JCA provider "
          + "failed reading it: " + thrown(e), e);
    }
  }

  /**
   * Why a file did not load as PKCS12, for an operator: the password, or the file's format (the
   * JDK's own messages name parser internals, or are null for a file cut short).
   *
   * @param passwordFrom where the password came from ({@link Use#passwordFrom})
   */
  static String loadProblem(byte[] bytes, Exception e, String passwordFrom) {
    if (e.getCause() instanceof java.security.UnrecoverableKeyException) {
      return "the password is wrong (" + passwordFrom + "), or the file is damaged";
    }
    String detail = " (" + describe(e) + ")";
    if (bytes.length == 0) {
      return "the file is empty, not a PKCS12 store";
    }
    String head = new String(bytes, 0, Math.min(bytes.length, 64),
        java.nio.charset.StandardCharsets.ISO_8859_1).stripLeading();
    if (head.startsWith("-----BEGIN")) {
      return "it is PEM text, not a PKCS12 store: convert the key and certificate with "
          + "openssl pkcs12 -export" + detail;
    }
    if (bytes.length >= 4 && (bytes[0] & 0xff) == 0xce && (bytes[1] & 0xff) == 0xce
        && (bytes[2] & 0xff) == 0xce && (bytes[3] & 0xff) == 0xce) {
      return "it is a JCEKS store, not PKCS12: convert it with keytool -importkeystore "
          + "-deststoretype PKCS12" + detail;
    }
    return "it is not a PKCS12 store, or it is damaged or cut short" + detail;
  }

  /**
   * What was thrown, for an operator: its message and its type ({@code token removed
   * (ProviderException)}), or its type alone when it has no message.
   */
  private static String thrown(Throwable e) {
    String m = e.getMessage();
    String type = e.getClass().getSimpleName();
    return m == null || m.isBlank() ? type : m + " (" + type + ")";
  }

  /** An exception's message, or its type when it has none (an EOFException, say). */
  private static String describe(Exception e) {
    String m = e.getMessage();
    return m == null || m.isBlank() ? e.getClass().getSimpleName() : m;
  }

  /**
   * The largest file read: far above a keystore (a few KiB) or a trust store of every public CA
   * (about 160 KiB for the JDK's 144).
   */
  static final int MAX_FILE_BYTES = 8 << 20;

  /**
   * The bytes of a file, at most {@link #MAX_FILE_BYTES}: a larger one is another file named by
   * mistake (a log, {@code /dev/zero}), refused without reading it whole, at every check.
   */
  private static byte[] read(Path file) {
    byte[] raw = NodeMain.readAtMost(file, MAX_FILE_BYTES, "");
    if (raw.length > MAX_FILE_BYTES) {
      throw new IllegalArgumentException("cannot load " + file + ": it is larger than "
          + MAX_FILE_BYTES + " bytes, not a keystore or trust store");
    }
    return raw;
  }

  /**
   * A key manager that hands every call to the one last installed. The alias it chooses names
   * the installation too ({@code generation@alias}), and the certificate chain and private key
   * of an alias come from the installation that chose it: a handshake that chose its alias just
   * before a renewal still gets that alias's certificate and key (the new installation may
   * not hold them), rather than none, which would fail the handshake. The installation before
   * the current one is kept for that.
   */
  static final class SwappableKeyManager extends X509ExtendedKeyManager {
    private record Installed(long generation, X509ExtendedKeyManager manager) {}

    private volatile Installed current;
    private volatile Installed previous;

    synchronized void install(X509ExtendedKeyManager manager) {
      previous = current;
      current = new Installed(current == null ? 1 : current.generation + 1, manager);
    }

    private static String tag(Installed i, String alias) {
      return alias == null ? null : i.generation + "@" + alias;
    }

    private static String[] tag(Installed i, String[] aliases) {
      if (aliases == null) {
        return null;
      }
      String[] out = new String[aliases.length];
      for (int k = 0; k < aliases.length; k++) {
        out[k] = tag(i, aliases[k]);
      }
      return out;
    }

    /** The installation a tagged alias came from, or null if it is gone or not tagged. */
    private Installed of(String tagged) {
      int at = tagged == null ? -1 : tagged.indexOf('@');
      if (at <= 0) {
        return null;
      }
      long generation;
      try {
        generation = Long.parseLong(tagged.substring(0, at));
      } catch (NumberFormatException e) {
        return null;
      }
      Installed c = current;
      Installed p = previous;
      return c != null && c.generation == generation ? c
          : p != null && p.generation == generation ? p : null;
    }

    @Override
    public String[] getClientAliases(String keyType, Principal[] issuers) {
      Installed i = current;
      return tag(i, i.manager.getClientAliases(keyType, issuers));
    }

    @Override
    public String chooseClientAlias(String[] keyType, Principal[] issuers, Socket socket) {
      Installed i = current;
      return tag(i, i.manager.chooseClientAlias(keyType, issuers, socket));
    }

    @Override
    public String[] getServerAliases(String keyType, Principal[] issuers) {
      Installed i = current;
      return tag(i, i.manager.getServerAliases(keyType, issuers));
    }

    @Override
    public String chooseServerAlias(String keyType, Principal[] issuers, Socket socket) {
      Installed i = current;
      return tag(i, i.manager.chooseServerAlias(keyType, issuers, socket));
    }

    @Override
    public X509Certificate[] getCertificateChain(String alias) {
      Installed i = of(alias);
      return i == null ? null : i.manager.getCertificateChain(alias.substring(alias.indexOf('@') + 1));
    }

    @Override
    public PrivateKey getPrivateKey(String alias) {
      Installed i = of(alias);
      return i == null ? null : i.manager.getPrivateKey(alias.substring(alias.indexOf('@') + 1));
    }

    @Override
    public String chooseEngineClientAlias(String[] keyType, Principal[] issuers, SSLEngine e) {
      Installed i = current;
      return tag(i, i.manager.chooseEngineClientAlias(keyType, issuers, e));
    }

    @Override
    public String chooseEngineServerAlias(String keyType, Principal[] issuers, SSLEngine e) {
      Installed i = current;
      return tag(i, i.manager.chooseEngineServerAlias(keyType, issuers, e));
    }
  }

  /** A trust manager that hands every call to the one last installed. */
  private static final class SwappableTrustManager extends X509ExtendedTrustManager {
    volatile X509ExtendedTrustManager delegate;

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, Socket socket)
        throws CertificateException {
      delegate.checkClientTrusted(chain, authType, socket);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, Socket socket)
        throws CertificateException {
      delegate.checkServerTrusted(chain, authType, socket);
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, SSLEngine e)
        throws CertificateException {
      delegate.checkClientTrusted(chain, authType, e);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, SSLEngine e)
        throws CertificateException {
      delegate.checkServerTrusted(chain, authType, e);
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType)
        throws CertificateException {
      delegate.checkClientTrusted(chain, authType);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType)
        throws CertificateException {
      delegate.checkServerTrusted(chain, authType);
    }

    @Override
    public X509Certificate[] getAcceptedIssuers() {
      return delegate.getAcceptedIssuers();
    }
  }
}
