package io.github.prefixrouter.server;

import static io.github.prefixrouter.server.TlsCertificates.clientContext;
import static io.github.prefixrouter.server.TlsCertificates.keystore;
import static io.github.prefixrouter.server.TlsCertificates.truststore;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.testing.Await;
import io.github.prefixrouter.testing.TlsStalls;
import io.github.prefixrouter.testing.TlsStalls.Stall;
import io.github.prefixrouter.testing.TlsStalls.Stalled;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateException;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509ExtendedTrustManager;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The client port over TLS with clients that stall before, during or right after the handshake:
 * the handshake is read on the connection's reader thread under the I/O deadline, so a client
 * that stalls in it holds its reader for at most the I/O timeout, is counted in
 * {@code slow_connections_closed}, and honest HTTPS clients are answered once it is cut. A TCP
 * connection that sends nothing takes no reader at all.
 */
class ClientTlsStallTest {

  private static final Duration IO_TIMEOUT = Duration.ofSeconds(1);
  /** What a cut may take beyond the I/O timeout, and an honest answer at most: generous. */
  private static final long MARGIN_MILLIS = 5_000;
  private static final long BOUND_MILLIS = IO_TIMEOUT.toMillis() + MARGIN_MILLIS;

  @TempDir static Path dir;
  static SSLContext serverTls;
  static SSLContext clientTls;
  /** Trusts the port's certificate. */
  static Path trust;

  private final StubNode stub = new StubNode();
  private final List<Stalled> stalled = new ArrayList<>();
  private ClientEndpoint endpoint;
  private InetSocketAddress address;

  @BeforeAll
  static void makeCertificates() throws Exception {
    Path ks = keystore(dir, "port");
    KeyStore store = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(ks)) {
      store.load(in, TlsCertificates.PASSWORD.toCharArray());
    }
    KeyManagerFactory kmf = KeyManagerFactory.getInstance("PKIX");
    kmf.init(store, TlsCertificates.PASSWORD.toCharArray());
    serverTls = SSLContext.getInstance("TLS");
    serverTls.init(kmf.getKeyManagers(), null, null);
    trust = truststore(dir, dir.resolve("trust.p12"), "port");
    clientTls = clientContext(trust, null);
    // the JVM's first handshakes load and initialise its TLS code: on a loaded machine that
    // outlasted the 1 s I/O timeout, and the honest client a test expects answered was cut and
    // counted as slow. A few handshakes here, before any test, take that cost. (With one reader
    // thread, a connection that came while the last one's thread was still ending was closed at
    // once, and the warm-up failed the class on a loaded machine.)
    ClientEndpoint warm = new ClientEndpoint(new StubNode().node, List::of, 16,
        Duration.ofSeconds(30), "base", 4, ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS);
    InetSocketAddress at = warm.start("127.0.0.1", 0, serverTls, false);
    try {
      for (int i = 0; i < 3; i++) {
        assertEquals("HTTP/1.1 200 OK", health(at));
      }
    } finally {
      warm.stop();
    }
  }

  /**
   * A client context trusting the port's certificate that takes {@code millis} to check it, in
   * the middle of the handshake: the port has sent its flight and waits for the client's.
   */
  private static SSLContext slowToTrust(long millis) throws Exception {
    KeyStore store = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(trust)) {
      store.load(in, TlsCertificates.PASSWORD.toCharArray());
    }
    TrustManagerFactory tmf = TrustManagerFactory.getInstance("PKIX");
    tmf.init(store);
    X509ExtendedTrustManager pkix = (X509ExtendedTrustManager) tmf.getTrustManagers()[0];
    X509ExtendedTrustManager slow = new X509ExtendedTrustManager() {
      private void pause() {
        try {
          Thread.sleep(millis);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }

      @Override
      public void checkServerTrusted(X509Certificate[] chain, String authType, Socket socket)
          throws CertificateException {
        pause();
        pkix.checkServerTrusted(chain, authType, socket);
      }

      @Override
      public void checkServerTrusted(X509Certificate[] chain, String authType, SSLEngine engine)
          throws CertificateException {
        pause();
        pkix.checkServerTrusted(chain, authType, engine);
      }

      @Override
      public void checkServerTrusted(X509Certificate[] chain, String authType)
          throws CertificateException {
        pause();
        pkix.checkServerTrusted(chain, authType);
      }

      @Override
      public void checkClientTrusted(X509Certificate[] chain, String authType, Socket socket)
          throws CertificateException {
        pkix.checkClientTrusted(chain, authType, socket);
      }

      @Override
      public void checkClientTrusted(X509Certificate[] chain, String authType, SSLEngine engine)
          throws CertificateException {
        pkix.checkClientTrusted(chain, authType, engine);
      }

      @Override
      public void checkClientTrusted(X509Certificate[] chain, String authType)
          throws CertificateException {
        pkix.checkClientTrusted(chain, authType);
      }

      @Override
      public X509Certificate[] getAcceptedIssuers() {
        return pkix.getAcceptedIssuers();
      }
    };
    SSLContext c = SSLContext.getInstance("TLS");
    c.init(null, new TrustManager[] {slow}, null);
    return c;
  }

  @AfterEach
  void stop() throws IOException {
    for (Stalled s : stalled) {
      s.socket().close();
    }
    if (endpoint != null) {
      endpoint.stop();
    }
  }

  private void start(int readerThreads) throws IOException {
    start(readerThreads, IO_TIMEOUT);
  }

  private void start(int readerThreads, Duration ioTimeout) throws IOException {
    endpoint = new ClientEndpoint(stub.node, List::of, 16, ioTimeout, "base", readerThreads,
        ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS);
    address = endpoint.start("127.0.0.1", 0, serverTls, false);
  }

  private Stalled open(Stall stall) throws IOException {
    Stalled s = TlsStalls.open(stall, address, clientTls);
    stalled.add(s);
    return s;
  }

  /** One {@code GET /health} over HTTPS on a connection of its own; its status line. */
  private String health() throws IOException {
    return health(address);
  }

  private static String health(InetSocketAddress address) throws IOException {
    try (SSLSocket s = (SSLSocket) clientTls.getSocketFactory().createSocket(
        address.getAddress(), address.getPort())) {
      s.setSoTimeout(10_000);
      s.getOutputStream().write("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
          .getBytes(StandardCharsets.US_ASCII));
      s.getOutputStream().flush();
      String answer = new String(s.getInputStream().readAllBytes(), StandardCharsets.US_ASCII);
      int eol = answer.indexOf("\r\n");
      return eol < 0 ? answer : answer.substring(0, eol);
    }
  }

  /**
   * Asks {@code /health} until it is answered 200 (a connection beyond the reader threads is
   * closed at once, and tried again 20 ms later); the connections refused on the way.
   *
   * @throws AssertionError if no answer came within {@link #BOUND_MILLIS} of {@code since}
   */
  private int healthAnswered(long since) throws Exception {
    long deadline = since + TimeUnit.MILLISECONDS.toNanos(BOUND_MILLIS);
    int refused = 0;
    while (true) {
      try {
        assertEquals("HTTP/1.1 200 OK", health());
        return refused;
      } catch (IOException closedAtOnce) {
        refused++;
      }
      assertTrue(System.nanoTime() < deadline, "no answer to an honest client within "
          + BOUND_MILLIS + " ms; " + refused + " connections refused");
      Thread.sleep(20);
    }
  }

  /**
   * TCP connections that send nothing, three times as many as the reader threads: the server
   * starts no handshake, and so no reader, before a connection's first byte, so honest clients
   * are answered at once while they are open, and nothing is refused or cut. (The JDK server
   * closes them after its idle interval, 30 s by default, not the I/O timeout.) Nothing here is
   * to be cut, so the I/O timeout is a long one: with the 1 s of the other tests, an honest
   * exchange (its handshake, its request and its answer) that a loaded machine made last longer
   * was cut, and read as an empty answer.
   */
  @Test
  void connectionsThatSendNothingTakeNoReaderThread() throws Exception {
    start(2, Duration.ofSeconds(30));
    for (int i = 0; i < 6; i++) {
      open(Stall.SILENT);
    }
    Thread.sleep(200); // accepted by the server
    long t0 = System.nanoTime();
    for (int i = 0; i < 3; i++) {
      assertEquals("HTTP/1.1 200 OK", health(), "answered at the first try");
    }
    long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertTrue(tookMillis < MARGIN_MILLIS, "three answers took " + tookMillis + " ms");
    assertEquals(0, endpoint.readsRefused());
    assertEquals(0, endpoint.slowConnectionsClosed());
  }

  /**
   * One connection stalled in or right after the handshake, with a single reader thread: it
   * holds that reader until the I/O deadline, which closes the connection and counts it; the
   * honest client is then answered.
   */
  @ParameterizedTest
  @EnumSource(value = Stall.class, names = {"PARTIAL_RECORD_HEADER", "CLIENT_HELLO",
      "HANDSHAKE_DONE", "HALF_REQUEST_LINE"})
  void aConnectionStalledInOrAfterTheHandshakeIsCutWithinTheIoTimeout(Stall stall)
      throws Exception {
    start(1);
    Stalled s = open(stall);
    assertTrue(!s.closedAtOnce(), "the handshake failed");
    long cutAfter = TlsStalls.millisUntilClosed(s, BOUND_MILLIS);
    Await.until(() -> endpoint.slowConnectionsClosed() == 1, "the stalled connection counted");
    int refused = healthAnswered(s.openedNanos());
    long answeredAfter = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - s.openedNanos());
    System.out.printf("client port, %s: cut after %d ms, honest client answered after %d ms "
        + "(%d refused on the way)%n", stall, cutAfter, answeredAfter, refused);
    assertEquals(1, endpoint.slowConnectionsClosed());
    assertEquals(refused, endpoint.readsRefused());
  }

  /**
   * The handshake takes its time from the request's I/O deadline, which starts at the
   * connection's first byte: a client whose handshake takes 4 s of the 8 s and that then stalls
   * in its request line is cut about 8 s after it connected, 4 s before a deadline started
   * after the handshake would have passed (12 s). The check allows the cut up to 1 s short of
   * that, so a stall of the machine of up to 3 s as the deadline passes does not fail it (with
   * a 2 s handshake against 3 s, one of 2 s could); one of over 4 s during the handshake lets
   * the deadline cut the handshake itself, and only the cut is then checked. The client's
   * context is made before the connection is timed: timed with it, it took about a second more
   * on a loaded machine, and the 2 s handshake was cut within the 3 s, leaving the check unmade.
   */
  @Test
  void theHandshakeAndTheRequestShareOneDeadline() throws Exception {
    Duration io = Duration.ofSeconds(8);
    long handshakeSleepMillis = 4_000;
    start(1, io);
    SSLSocketFactory slow = slowToTrust(handshakeSleepMillis).getSocketFactory();
    long opened = System.nanoTime();
    SSLSocket s = (SSLSocket) slow.createSocket(address.getAddress(), address.getPort());
    boolean handshaken = true;
    try {
      s.setSoTimeout(20_000);
      s.startHandshake();
      s.getOutputStream().write("GET /hea".getBytes(StandardCharsets.US_ASCII));
      s.getOutputStream().flush();
    } catch (IOException cutInTheHandshake) { // only after a stall of over 4 s in it
      handshaken = false;
    }
    long handshakeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - opened);
    Stalled st = new Stalled(Stall.HALF_REQUEST_LINE, s, opened, !handshaken);
    stalled.add(st);
    long cutAfter = TlsStalls.millisUntilClosed(st, io.toMillis() + MARGIN_MILLIS);
    System.out.printf("client port, a 4 s handshake then half a request line: handshake done "
        + "after %d ms, cut after %d ms (I/O timeout %d ms)%n", handshakeMillis, cutAfter,
        io.toMillis());
    if (handshaken) {
      long ownDeadline = handshakeMillis + io.toMillis();
      assertTrue(cutAfter < ownDeadline - 1_000, "cut after " + cutAfter + " ms: a deadline of "
          + "its own for the request, after the " + handshakeMillis + " ms handshake, passes at "
          + ownDeadline + " ms");
    }
    Await.until(() -> endpoint.slowConnectionsClosed() == 1, "the stalled connection counted");
  }

  /**
   * Four connections of every kind at once, with two reader threads: those that start a
   * handshake beyond the two readers are closed at once, the two that got a reader are cut
   * within the I/O timeout, honest clients are answered as soon as a reader is free, and every
   * stalled connection that sent a byte is either cut and counted or refused and counted.
   */
  @Test
  void manyStalledConnectionsAtOnceAreCutAndHonestClientsAnswered() throws Exception {
    start(2);
    long t0 = System.nanoTime();
    int sendingBytes = 0;
    for (int i = 0; i < 4; i++) {
      for (Stall stall : Stall.values()) {
        open(stall);
        sendingBytes += stall.sendsBytes() ? 1 : 0;
      }
    }
    int honestRefused = healthAnswered(t0);
    long answeredAfter = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    long slowest = 0;
    for (Stalled s : stalled) {
      if (s.stall().sendsBytes()) {
        slowest = Math.max(slowest, TlsStalls.millisUntilClosed(s, BOUND_MILLIS));
      }
    }
    int total = sendingBytes;
    Await.until(() -> endpoint.slowConnectionsClosed() + endpoint.readsRefused()
        >= total + honestRefused, "every stalled connection cut or refused");
    long cut = endpoint.slowConnectionsClosed();
    System.out.printf("client port, %d stalled connections (%d sending bytes), 2 readers: "
        + "honest client answered after %d ms (%d refused on the way), the last stalled "
        + "connection closed %d ms after it was opened, %d cut, %d refused%n", stalled.size(),
        sendingBytes, answeredAfter, honestRefused, slowest, cut,
        endpoint.readsRefused() - honestRefused);
    assertEquals(total + honestRefused, cut + endpoint.readsRefused());
    assertTrue(cut >= 2 && cut <= total, "cut " + cut);
    // the readers are free again: honest clients at the same time are all answered
    for (int i = 0; i < 2; i++) {
      assertEquals("HTTP/1.1 200 OK", health());
    }
  }
}
