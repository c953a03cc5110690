package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.testing.Await;
import io.github.prefixrouter.testing.TlsStalls;
import io.github.prefixrouter.testing.TlsStalls.Stall;
import io.github.prefixrouter.testing.TlsStalls.Stalled;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The peer port over TLS with connections that stall before, during or right after the
 * handshake: a connection that stalls in it holds its reader thread for at most
 * {@code inboundIoTimeout}, is counted in {@code slowConnectionsClosed}, and a peer's requests
 * are answered once it is cut. A TCP connection that sends nothing takes no reader at all.
 */
class HttpTransportTlsStallTest extends HttpTransportFixture {

  private static final Duration IO_TIMEOUT = Duration.ofSeconds(1);
  /** What a cut may take beyond the I/O timeout, and an honest answer at most: generous. */
  private static final long MARGIN_MILLIS = 5_000;
  private static final long BOUND_MILLIS = IO_TIMEOUT.toMillis() + MARGIN_MILLIS;

  @TempDir static Path dir;
  /** Presents the cluster's certificate and trusts it: the nodes' context, and the stallers'. */
  static SSLContext tls;

  private final List<Stalled> stalled = new ArrayList<>();

  @BeforeAll
  static void makeCertificate() throws Exception {
    Path ks = HttpTransportTlsTest.keystore(dir, "node", "san=ip:127.0.0.1");
    KeyStore store = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(ks)) {
      store.load(in, "changeit".toCharArray());
    }
    KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
    kmf.init(store, "changeit".toCharArray());
    TrustManagerFactory tmf =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(store);
    tls = SSLContext.getInstance("TLS");
    tls.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
  }

  /** Node {@code a} over TLS with {@code readerThreads} readers and the short I/O timeout. */
  private HttpTransport a(int readerThreads) {
    return start(node("a").tls(tls).inboundIoTimeout(IO_TIMEOUT).readerThreads(readerThreads)
        .connectTimeout(Duration.ofSeconds(10)), new HttpTransportTest.Recorder());
  }

  /** Node {@code b} over TLS: the honest peer. */
  private HttpTransport b() {
    return start(node("b").tls(tls).connectTimeout(Duration.ofSeconds(10)),
        new HttpTransportTest.Recorder());
  }

  private Stalled open(Stall stall, HttpTransport to) throws Exception {
    Stalled s = TlsStalls.open(stall, HttpTransportTest.hostPort(to.localAddress().address()),
        tls);
    stalled.add(s);
    toClose.add(0, s.socket()); // closed before the transports
    return s;
  }

  /**
   * Sends requests from {@code b} to {@code a} until one is answered (a connection beyond the
   * reader threads is closed at once, and tried again 20 ms later); the requests that failed.
   *
   * @throws AssertionError if none was answered within {@link #BOUND_MILLIS} of {@code since}
   */
  private static int answered(HttpTransport b, HttpTransport a, long since) throws Exception {
    long deadline = since + TimeUnit.MILLISECONDS.toNanos(BOUND_MILLIS);
    int failed = 0;
    while (true) {
      try {
        byte[] answer = b.request(a.localAddress(), "hi".getBytes(StandardCharsets.UTF_8),
            Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS);
        assertEquals("echo b hi", new String(answer, StandardCharsets.UTF_8));
        return failed;
      } catch (ExecutionException closedAtOnce) {
        failed++;
      }
      assertTrue(System.nanoTime() < deadline, "no answer to the honest peer within "
          + BOUND_MILLIS + " ms; " + failed + " requests failed");
      Thread.sleep(20);
    }
  }

  /**
   * TCP connections that send nothing, three times as many as the reader threads: no handshake,
   * and so no reader, starts before a connection's first byte, so a peer's requests are
   * answered at once while they are open, and nothing is refused or cut. (The JDK server closes
   * them after its idle interval, 30 s by default, not the I/O timeout.)
   */
  @Test
  void connectionsThatSendNothingTakeNoReaderThread() throws Exception {
    HttpTransport a = a(2);
    HttpTransport b = b();
    for (int i = 0; i < 6; i++) {
      open(Stall.SILENT, a);
    }
    Thread.sleep(200); // accepted by the server
    long t0 = System.nanoTime();
    for (int i = 0; i < 3; i++) {
      byte[] answer = b.request(a.localAddress(), "hi".getBytes(StandardCharsets.UTF_8),
          Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS);
      assertEquals("echo b hi", new String(answer, StandardCharsets.UTF_8));
    }
    long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertTrue(tookMillis < MARGIN_MILLIS, "three answers took " + tookMillis + " ms");
    assertEquals(0, a.stats().readsRefused());
    assertEquals(0, a.stats().slowConnectionsClosed());
  }

  /**
   * One connection stalled in or right after the handshake, with a single reader thread: it
   * holds that reader until the I/O deadline, which closes the connection and counts it; the
   * honest peer's request is then answered.
   */
  @ParameterizedTest
  @EnumSource(value = Stall.class, names = {"PARTIAL_RECORD_HEADER", "CLIENT_HELLO",
      "HANDSHAKE_DONE", "HALF_REQUEST_LINE"})
  void aConnectionStalledInOrAfterTheHandshakeIsCutWithinTheIoTimeout(Stall stall)
      throws Exception {
    HttpTransport a = a(1);
    HttpTransport b = b();
    Stalled s = open(stall, a);
    assertTrue(!s.closedAtOnce(), "the handshake failed");
    long cutAfter = TlsStalls.millisUntilClosed(s, BOUND_MILLIS);
    Await.until(() -> a.stats().slowConnectionsClosed() == 1, "the stalled connection counted");
    int failed = answered(b, a, s.openedNanos());
    long answeredAfter = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - s.openedNanos());
    System.out.printf("peer port, %s: cut after %d ms, honest peer answered after %d ms "
        + "(%d failed on the way)%n", stall, cutAfter, answeredAfter, failed);
    assertEquals(1, a.stats().slowConnectionsClosed());
    assertEquals(1, a.stats().requestsReceived());
  }

  /**
   * Four connections of every kind at once, with two reader threads: those that start a
   * handshake beyond the two readers are refused (answered, or cut, by a refuser, or closed at
   * once when those are busy too), the two that got a reader are cut
   * within the I/O timeout, the honest peer is answered as soon as a reader is free, and every
   * stalled connection that sent a byte is either cut and counted or refused and counted.
   */
  @Test
  void manyStalledConnectionsAtOnceAreCutAndPeersAnswered() throws Exception {
    HttpTransport a = a(2);
    HttpTransport b = b();
    long t0 = System.nanoTime();
    int sendingBytes = 0;
    for (int i = 0; i < 4; i++) {
      for (Stall stall : Stall.values()) {
        open(stall, a);
        sendingBytes += stall.sendsBytes() ? 1 : 0;
      }
    }
    int failed = answered(b, a, t0);
    long answeredAfter = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    long slowest = 0;
    for (Stalled s : stalled) {
      if (s.stall().sendsBytes()) {
        slowest = Math.max(slowest, TlsStalls.millisUntilClosed(s, BOUND_MILLIS));
      }
    }
    int total = sendingBytes;
    Await.until(() -> a.stats().slowConnectionsClosed() + a.stats().readsRefused()
        >= total + failed, "every stalled connection cut or refused");
    long cut = a.stats().slowConnectionsClosed();
    long refused = a.stats().readsRefused();
    System.out.printf("peer port, %d stalled connections (%d sending bytes), 2 readers: "
        + "honest peer answered after %d ms (%d failed on the way), the last stalled "
        + "connection closed %d ms after it was opened, %d cut, %d refused%n", stalled.size(),
        sendingBytes, answeredAfter, failed, slowest, cut, refused - failed);
    assertEquals(total + failed, cut + refused);
    assertTrue(cut >= 2 && cut <= total, "cut " + cut);
    assertEquals(1, a.stats().requestsReceived());
  }
}
