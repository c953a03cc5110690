package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link HttpTransport.Builder#bindNodeIdsToCertificates}: nodes whose certificates name them talk
 * as before; a holder of the cluster key whose certificate names another node cannot send, or
 * answer, in the name of a node its certificate does not name. Each refusal is shown to come from
 * the option: the same traffic passes with it off.
 */
class CertifiedNodeIdsTest {

  private static final String SPIFFE_ID = "spiffe://example.org/node/s";

  @TempDir static Path dir;
  /** Contexts presenting a certificate naming a, b, c, the SPIFFE id; all trust all of them. */
  static SSLContext certA;
  static SSLContext certB;
  static SSLContext certC;
  static SSLContext certSpiffe;
  /** A certificate whose subject is CN=a but that names nothing in its alternative names. */
  static SSLContext certCommonNameA;
  /** Trusts the certificates, presents none. */
  static SSLContext noCertificate;

  @BeforeAll
  static void makeCertificates() throws Exception {
    Path ka = HttpTransportTlsTest.keystore(dir, "a", "san=dns:a,ip:127.0.0.1");
    Path kb = HttpTransportTlsTest.keystore(dir, "b", "san=dns:b,ip:127.0.0.1");
    Path kc = HttpTransportTlsTest.keystore(dir, "c", "san=dns:c,ip:127.0.0.1");
    Path ks = HttpTransportTlsTest.keystore(dir, "s", "san=uri:" + SPIFFE_ID + ",ip:127.0.0.1");
    Path cnOnly = Files.createDirectory(dir.resolve("cn-only"));
    Path kcn = HttpTransportTlsTest.keystore(cnOnly, "a", "san=ip:127.0.0.1");
    // one trust store holding every node's self-signed certificate
    KeyStore trust = KeyStore.getInstance("PKCS12");
    trust.load(null, null);
    int n = 0;
    for (Path p : List.of(ka, kb, kc, ks, kcn)) {
      KeyStore k = load(p);
      trust.setCertificateEntry("node-" + n++, k.getCertificate(k.aliases().nextElement()));
    }
    certA = context(ka, trust);
    certB = context(kb, trust);
    certC = context(kc, trust);
    certSpiffe = context(ks, trust);
    certCommonNameA = context(kcn, trust);
    noCertificate = context(null, trust);
  }

  private static KeyStore load(Path p) throws Exception {
    KeyStore k = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(p)) {
      k.load(in, "changeit".toCharArray());
    }
    return k;
  }

  private static SSLContext context(Path keystore, KeyStore trust) throws Exception {
    KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
    TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(trust);
    SSLContext c = SSLContext.getInstance("TLS");
    if (keystore == null) {
      c.init(null, tmf.getTrustManagers(), null);
    } else {
      kmf.init(load(keystore), "changeit".toCharArray());
      c.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
    }
    return c;
  }

  /** A started transport called {@code id}, over TLS with {@code tls}, holding the cluster key. */
  private static HttpTransport start(String id, SSLContext tls, boolean bind,
      Transport.InboundHandler handler) {
    HttpTransport t = HttpTransport.builder().nodeId(id).listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY).tls(tls).bindNodeIdsToCertificates(bind)
        .connectTimeout(Duration.ofSeconds(20)).build();
    t.start(handler);
    return t;
  }

  private static void await(String what, BooleanSupplier done) throws InterruptedException {
    for (int i = 0; i < 800 && !done.getAsBoolean(); i++) {
      Thread.sleep(25);
    }
    assertTrue(done.getAsBoolean(), what);
  }

  private static String text(CompletableFuture<byte[]> f) throws Exception {
    return new String(f.get(30, TimeUnit.SECONDS), StandardCharsets.UTF_8);
  }

  private static TransportException failure(CompletableFuture<byte[]> f) {
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(30, TimeUnit.SECONDS));
    assertTrue(e.getCause() instanceof TransportException, "cause: " + e.getCause());
    return (TransportException) e.getCause();
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void nodesWhoseCertificatesNameThemExchangeMessagesRequestsAndAnswers() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    HttpTransportTest.Recorder rb = new HttpTransportTest.Recorder();
    try (HttpTransport a = start("a", certA, true, ra); HttpTransport b = start("b", certB, true, rb)) {
      assertEquals("echo b x", text(b.request(a.localAddress(), bytes("x"), Duration.ofSeconds(20))));
      assertEquals("echo a y", text(a.request(b.localAddress(), bytes("y"), Duration.ofSeconds(20))));
      b.send(a.localAddress(), bytes("m"));
      a.send(b.localAddress(), bytes("n"));
      assertEquals("b@" + b.localAddress().address() + ":m", ra.messages.poll(20, TimeUnit.SECONDS));
      assertEquals("a@" + a.localAddress().address() + ":n", rb.messages.poll(20, TimeUnit.SECONDS));
      for (HttpTransport t : List.of(a, b)) {
        assertEquals(0, t.stats().senderNotInCertificate(), t.stats().toString());
        assertEquals(0, t.stats().requestsFailed() + t.stats().messagesFailed(), t.stats().toString());
      }
    }
  }

  /**
   * A mixed rollout: a binds node ids, b does not, and each certificate names its node. Messages
   * and requests flow both ways (b presents its certificate to a, which requires one; a's
   * certificate names a, so b's answers and a's are taken), with nothing refused.
   */
  @Test
  void nodesWithAndWithoutTheOptionTalkWhenEveryCertificateNamesItsNode() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    HttpTransportTest.Recorder rb = new HttpTransportTest.Recorder();
    try (HttpTransport a = start("a", certA, true, ra);
        HttpTransport b = start("b", certB, false, rb)) {
      assertEquals("echo b x", text(b.request(a.localAddress(), bytes("x"), Duration.ofSeconds(20))));
      assertEquals("echo a y", text(a.request(b.localAddress(), bytes("y"), Duration.ofSeconds(20))));
      b.send(a.localAddress(), bytes("m"));
      a.send(b.localAddress(), bytes("n"));
      assertEquals("b@" + b.localAddress().address() + ":m", ra.messages.poll(20, TimeUnit.SECONDS));
      assertEquals("a@" + a.localAddress().address() + ":n", rb.messages.poll(20, TimeUnit.SECONDS));
      for (HttpTransport t : List.of(a, b)) {
        assertEquals(0, t.stats().senderNotInCertificate(), t.stats().toString());
        assertEquals(0, t.stats().requestsFailed() + t.stats().messagesFailed(), t.stats().toString());
        assertEquals(0, t.stats().authFailures(), t.stats().toString());
      }
      assertEquals(Set.of(), a.uncertifiedSendersSeen());
    }
  }

  /**
   * A mixed rollout where x, without the option, has a certificate that does not name x (it
   * names c): a, with the option, refuses x's messages and requests, and drops x's answers to
   * its own requests (a server whose certificate does not name the node asked), so forwards
   * between them fail both ways and fall back; only a's one-way messages reach x, which checks
   * no certificate, and a counts them as failed, x's 204 being an answer from a server whose
   * certificate does not name x. Shown to come from the option: a node without it hears x and
   * takes its answers.
   */
  @Test
  void aNodeWithTheOptionRefusesANodeWithoutItWhoseCertificateDoesNotNameIt() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    HttpTransportTest.Recorder rx = new HttpTransportTest.Recorder();
    HttpTransportTest.Recorder unbound = new HttpTransportTest.Recorder();
    try (HttpTransport a = start("a", certA, true, ra);
        HttpTransport x = start("x", certC, false, rx);
        HttpTransport open = start("a", certA, false, unbound)) {
      // x to a: refused
      x.send(a.localAddress(), bytes("m"));
      await("x's message refused", () -> x.stats().messagesFailed() == 1);
      TransportException toA = failure(x.request(a.localAddress(), bytes("q"),
          Duration.ofSeconds(20)));
      assertEquals(TransportException.Kind.PROTOCOL, toA.kind(), toA.getMessage());
      assertTrue(toA.getMessage().contains("not named by this connection's TLS certificate"),
          toA.getMessage());
      assertEquals(2, a.stats().senderNotInCertificate(), a.stats().toString());
      assertEquals(0, a.stats().messagesReceived() + a.stats().requestsReceived(),
          a.stats().toString());
      assertTrue(ra.messages.isEmpty(), "delivered: " + ra.messages);

      // a to x: a's messages are delivered (x checks no certificate), x's 204 not taken ...
      a.send(x.localAddress(), bytes("n"));
      assertEquals("a@" + a.localAddress().address() + ":n", rx.messages.poll(20, TimeUnit.SECONDS));
      await("x's 204 refused", () -> a.stats().messagesFailed() == 1);
      assertEquals(3, a.stats().senderNotInCertificate(), a.stats().toString());
      // ... but x's answers to a's requests are not: x served the request, a dropped the answer
      TransportException fromX = failure(a.request(x.localAddress(), bytes("r"),
          Duration.ofSeconds(20)));
      assertEquals(TransportException.Kind.PROTOCOL, fromX.kind(), fromX.getMessage());
      assertTrue(fromX.getMessage().contains("does not name x"), fromX.getMessage());
      assertEquals(1, x.stats().requestsReceived(), x.stats().toString());
      assertEquals(4, a.stats().senderNotInCertificate(), a.stats().toString());
      assertEquals(Set.of("x CN=c"), a.uncertifiedSendersSeen());
      assertEquals(0, x.stats().senderNotInCertificate(), x.stats().toString());

      // the same traffic between x and a node without the option passes both ways
      x.send(open.localAddress(), bytes("m"));
      assertEquals("x@" + x.localAddress().address() + ":m",
          unbound.messages.poll(20, TimeUnit.SECONDS));
      assertEquals("echo x q", text(x.request(open.localAddress(), bytes("q"),
          Duration.ofSeconds(20))));
      assertEquals("echo a r", text(open.request(x.localAddress(), bytes("r"),
          Duration.ofSeconds(20))));
      assertEquals(0, open.stats().senderNotInCertificate(), open.stats().toString());
    }
  }

  /**
   * c holds the cluster key and a certificate naming c, and sends in b's name: a refuses every
   * message and request, counts each, warns once, and its handler sees nothing. The same
   * forgery reaches a node that does not bind node ids.
   */
  @Test
  void aKeyHolderCannotSendInTheNameOfANodeItsCertificateDoesNotName() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    HttpTransportTest.Recorder unbound = new HttpTransportTest.Recorder();
    try (HttpTransport a = start("a", certA, true, ra);
        HttpTransport a2 = start("a", certA, false, unbound);
        HttpTransport forger = start("b", certC, true, new HttpTransportTest.Recorder())) {
      for (int i = 0; i < 3; i++) {
        forger.send(a.localAddress(), bytes("clear " + i));
      }
      await("the three messages refused", () -> forger.stats().messagesFailed() == 3);
      TransportException e = failure(forger.request(a.localAddress(), bytes("forward"),
          Duration.ofSeconds(20)));
      assertEquals(TransportException.Kind.PROTOCOL, e.kind(), e.getMessage());
      assertTrue(e.getMessage().contains("not named by this connection's TLS certificate"),
          e.getMessage());
      HttpTransport.Stats s = a.stats();
      assertEquals(4, s.senderNotInCertificate(), s.toString());
      assertEquals(0, s.messagesReceived() + s.requestsReceived(), s.toString());
      assertEquals(0, s.authFailures() + s.replaysRejected(), s.toString());
      assertEquals(0, s.bytesIn(), s.toString());
      assertTrue(ra.messages.isEmpty(), "delivered: " + ra.messages);
      assertEquals(Set.of("b CN=c"), a.uncertifiedSendersSeen(), "warned once for the pair");

      // without the option, the very same forgery is delivered in b's name
      forger.send(a2.localAddress(), bytes("clear"));
      assertEquals("b@" + forger.localAddress().address() + ":clear",
          unbound.messages.poll(20, TimeUnit.SECONDS));
      assertEquals("echo b forward", text(forger.request(a2.localAddress(), bytes("forward"),
          Duration.ofSeconds(20))));
      assertEquals(0, a2.stats().senderNotInCertificate());
    }
  }

  /**
   * A server at the address of a whose certificate names c, holding the cluster key, answers a
   * request sent to a correctly signed in a's name: a client that binds node ids drops the
   * answer (the request fails, to fall back like any failed forward), one that does not takes it.
   */
  @Test
  void anAnswerFromAServerWhoseCertificateDoesNotNameTheNodeAskedIsRefused() throws Exception {
    try (HttpTransport impostor = start("a", certC, false, new HttpTransportTest.Recorder());
        HttpTransport b = start("b", certB, true, new HttpTransportTest.Recorder());
        HttpTransport b2 = start("b", certB, false, new HttpTransportTest.Recorder())) {
      PeerAddress asA = new PeerAddress("a", impostor.localAddress().address());
      TransportException e = refusedAsNotNamingA(b, asA);
      assertEquals(0, b.stats().bytesIn(), b.stats().toString());
      // the answer was sent, and is taken by a client that does not bind node ids
      assertEquals("echo b q", text(b2.request(asA, bytes("q"), Duration.ofSeconds(20))));
      assertEquals(0, b2.stats().senderNotInCertificate());
    }
  }

  /**
   * An error answer is an answer too: a server at the address of a whose certificate names c
   * answering 503 (busy) or 500 with a refusal's text (another model) is dropped as its 200 is,
   * so that it cannot make the client take a for busy, or for a node of another model, which it
   * then skips for every request. Only the 200 was checked: the 503 failed the request as BUSY
   * and the 500 as a PROTOCOL failure carrying the impostor's text, nothing counted.
   */
  @Test
  void anErrorAnswerFromAServerWhoseCertificateDoesNotNameTheNodeAskedIsRefused()
      throws Exception {
    HttpTransportTest.Recorder busy = new HttpTransportTest.Recorder();
    busy.busy = true;
    Transport.InboundHandler otherModel = (from, payload) -> CompletableFuture.failedFuture(
        new TransportException(TransportException.Kind.PROTOCOL,
            "MODEL_MISMATCH: node a serves model id 'other'"));
    for (Transport.InboundHandler h : List.of(busy, otherModel)) {
      try (HttpTransport impostor = start("a", certC, false, h);
          HttpTransport b = start("b", certB, true, new HttpTransportTest.Recorder());
          HttpTransport b2 = start("b", certB, false, new HttpTransportTest.Recorder())) {
        PeerAddress asA = new PeerAddress("a", impostor.localAddress().address());
        TransportException e = refusedAsNotNamingA(b, asA);
        assertFalse(e.getMessage().contains("MODEL_MISMATCH"), e.getMessage());
        // the error answer was sent, and is taken by a client that does not bind node ids
        TransportException taken = failure(b2.request(asA, bytes("q"), Duration.ofSeconds(20)));
        assertEquals(h == busy ? TransportException.Kind.BUSY : TransportException.Kind.PROTOCOL,
            taken.kind(), taken.getMessage());
        assertEquals(0, b2.stats().senderNotInCertificate());
      }
    }
  }

  /**
   * {@code b}'s request to {@code asA}, whose server's certificate names c, failed as PROTOCOL
   * for a certificate that does not name a, counted once, nothing left pending.
   */
  private static TransportException refusedAsNotNamingA(HttpTransport b, PeerAddress asA)
      throws Exception {
    TransportException e = failure(b.request(asA, bytes("q"), Duration.ofSeconds(20)));
    assertEquals(TransportException.Kind.PROTOCOL, e.kind(), e.getMessage());
    assertTrue(e.getMessage().contains("does not name a"), e.getMessage());
    assertEquals(1, b.stats().senderNotInCertificate(), b.stats().toString());
    assertEquals(Set.of("a CN=c"), b.uncertifiedSendersSeen());
    assertEquals(0, b.stats().pendingRequests());
    return e;
  }

  /**
   * The answers to one-way messages are answers too: a server at the address of a whose
   * certificate names c answers b's message 204 (taken), or 401 saying it is another node
   * (which has b warn that its peer list is wrong): a client that binds node ids counts the
   * message as failed and warns of the certificate instead, for either. Only the answers to
   * requests were checked: the 204 counted as delivered, and the 401 had b warn that the node
   * at a's address is z, nothing counted. A client that does not bind node ids takes both.
   */
  @Test
  void theAnswerToAMessageFromAServerWhoseCertificateDoesNotNameTheNodeIsRefused()
      throws Exception {
    HttpTransportTest.Recorder heard = new HttpTransportTest.Recorder();
    try (HttpTransport impostor = start("a", certC, false, heard);
        HttpTransport otherNode = start("z", certC, false, new HttpTransportTest.Recorder());
        HttpTransport b = start("b", certB, true, new HttpTransportTest.Recorder());
        HttpTransport b2 = start("b", certB, false, new HttpTransportTest.Recorder())) {
      PeerAddress asA = new PeerAddress("a", impostor.localAddress().address());
      PeerAddress zAsA = new PeerAddress("a", otherNode.localAddress().address());
      b.send(asA, bytes("m"));
      assertEquals("b@" + b.localAddress().address() + ":m", heard.messages.poll(20, TimeUnit.SECONDS));
      await("the 204 refused", () -> b.stats().messagesFailed() == 1);
      b.send(zAsA, bytes("n"));
      await("the 401 refused", () -> b.stats().messagesFailed() == 2);
      assertEquals(2, b.stats().senderNotInCertificate(), b.stats().toString());
      assertEquals(Set.of("a CN=c"), b.uncertifiedSendersSeen());
      assertTrue(b.otherNodesSeen().isEmpty(), "warned: " + b.otherNodesSeen());

      // the same answers are taken by a client that does not bind node ids
      b2.send(asA, bytes("m"));
      assertEquals("b@" + b2.localAddress().address() + ":m", heard.messages.poll(20, TimeUnit.SECONDS));
      b2.send(zAsA, bytes("n"));
      await("the 401 taken", () -> b2.stats().messagesFailed() == 1);
      assertEquals(Map.of(zAsA.address() + " a", "z"), b2.otherNodesSeen());
      assertEquals(0, b2.stats().senderNotInCertificate(), b2.stats().toString());
    }
  }

  @Test
  void aClientWithoutACertificateCannotReachAServerThatBindsNodeIds() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    try (HttpTransport a = start("a", certA, true, ra);
        HttpTransport open = start("a", certA, false, new HttpTransportTest.Recorder());
        HttpTransport anonymous = start("b", noCertificate, false, new HttpTransportTest.Recorder())) {
      TransportException e = failure(anonymous.request(a.localAddress(), bytes("q"),
          Duration.ofSeconds(20)));
      assertTrue(e.kind() == TransportException.Kind.PROTOCOL
          || e.kind() == TransportException.Kind.UNREACHABLE, e.kind() + ": " + e.getMessage());
      anonymous.send(a.localAddress(), bytes("m"));
      await("the message failed", () -> anonymous.stats().messagesFailed() == 1);
      assertEquals(0, a.stats().requestsReceived() + a.stats().messagesReceived(), a.stats().toString());
      // refused by the handshake, before any request was read
      assertEquals(0, a.stats().senderNotInCertificate(), a.stats().toString());
      assertTrue(ra.messages.isEmpty());
      // a server that does not bind node ids asks for no certificate
      assertEquals("echo b q", text(anonymous.request(open.localAddress(), bytes("q"),
          Duration.ofSeconds(20))));
    }
  }

  /**
   * Only the DNS and URI alternative names count: a certificate whose subject is CN=a names no
   * node, and one whose URI name is a SPIFFE id names the node of that id.
   */
  @Test
  void aUriNameNamesANodeAndTheSubjectsCommonNameDoesNot() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    try (HttpTransport a = start("a", certA, true, ra);
        HttpTransport commonNameA = start("a", certCommonNameA, false, new HttpTransportTest.Recorder());
        HttpTransport spiffe = start(SPIFFE_ID, certSpiffe, true, new HttpTransportTest.Recorder())) {
      PeerAddress target = new PeerAddress("a", a.localAddress().address());
      // addressed to a, claiming to be a, with a certificate whose subject is CN=a
      TransportException e = failure(commonNameA.request(target, bytes("q"), Duration.ofSeconds(20)));
      assertEquals(TransportException.Kind.PROTOCOL, e.kind(), e.getMessage());
      assertEquals(1, a.stats().senderNotInCertificate());
      assertEquals("echo " + SPIFFE_ID + " q", text(spiffe.request(a.localAddress(), bytes("q"),
          Duration.ofSeconds(20))));
      assertEquals("echo a r", text(a.request(spiffe.localAddress(), bytes("r"),
          Duration.ofSeconds(20))));
      assertEquals(1, a.stats().senderNotInCertificate());
      assertEquals(0, spiffe.stats().senderNotInCertificate());
    }
  }

  /** One message, signed with the cluster key, posted over a connection made with {@code tls}. */
  private static int post(HttpClient client, HttpTransport to, String sender, String nonce,
      long timestamp, String payload) throws Exception {
    String senderAddress = "127.0.0.1:9";
    String recipient = to.localAddress().nodeId();
    String ts = Long.toString(timestamp);
    byte[] body = bytes(payload);
    String mac = new MessageAuthenticator(List.of(HttpTransportTest.KEY)).sign(body,
        HttpTransport.TAG_MESSAGE, sender, senderAddress, recipient, ts, nonce);
    HttpRequest req = HttpRequest.newBuilder(URI.create("https://" + to.localAddress().address()
            + HttpTransport.MESSAGE_PATH))
        .timeout(Duration.ofSeconds(20))
        .header(HttpTransport.H_SENDER, sender)
        .header(HttpTransport.H_SENDER_ADDRESS, senderAddress)
        .header(HttpTransport.H_RECIPIENT, recipient)
        .header(HttpTransport.H_TIMESTAMP, ts)
        .header(HttpTransport.H_NONCE, nonce)
        .header(HttpTransport.H_MAC, mac)
        .POST(HttpRequest.BodyPublishers.ofByteArray(body))
        .build();
    return client.send(req, HttpResponse.BodyHandlers.discarding()).statusCode();
  }

  private static HttpClient client(SSLContext tls) {
    return HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).sslContext(tls)
        .connectTimeout(Duration.ofSeconds(20)).build();
  }

  /**
   * A refused message changes nothing at the receiver: its nonce is not taken by the replay
   * guard, so the very same message (sender, nonce, timestamp, MAC) then sent by b over b's
   * certificate is delivered.
   */
  @Test
  void aRefusedMessageLeavesNoNonceBehind() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    try (HttpTransport a = start("a", certA, true, ra)) {
      long now = System.currentTimeMillis();
      assertEquals(401, post(client(certC), a, "b", "n-1", now, "clear"));
      assertEquals(1, a.stats().senderNotInCertificate());
      assertEquals(204, post(client(certB), a, "b", "n-1", now, "clear"));
      assertEquals("b@127.0.0.1:9:clear", ra.messages.poll(20, TimeUnit.SECONDS));
      // and that one, now accepted, is a replay
      assertEquals(401, post(client(certB), a, "b", "n-1", now, "clear"));
      assertEquals(1, a.stats().replaysRejected());
    }
  }

  /**
   * Claims under ever-new ids are all refused and counted; the warnings stay bounded, at most
   * {@link HttpTransport#WARNINGS_PER_MINUTE} a minute and the
   * {@link HttpTransport#MAX_OTHER_NODES} pairs seen most recently remembered, and never stop for
   * good: a pair forgotten warns again. They stopped for good once 1,024 pairs had been warned
   * of, whoever had claimed them.
   */
  @Test
  void theWarningsAreBoundedWhateverIdsAreClaimed() throws Exception {
    AtomicLong wall = new AtomicLong(System.currentTimeMillis());
    HttpTransport t = HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY).tls(certA).bindNodeIdsToCertificates(true)
        .connectTimeout(Duration.ofSeconds(20)).wallClockMillis(wall::get).build();
    t.start(new HttpTransportTest.Recorder());
    try (HttpTransport a = t) {
      HttpClient c = client(certC);
      long now = System.currentTimeMillis();
      int perMinute = HttpTransport.WARNINGS_PER_MINUTE;
      int claims = 0;
      // in one minute: perMinute warned of, the rest left out
      for (int i = 0; i < perMinute + 5; i++) {
        assertEquals(401, post(c, a, "n" + claims, "x-" + claims++, now, "m"));
      }
      assertEquals(perMinute, a.uncertifiedSendersSeen().size());
      while (claims < HttpTransport.MAX_OTHER_NODES + 20) {
        wall.addAndGet(60_000);
        for (int i = 0; i < perMinute; i++) {
          assertEquals(401, post(c, a, "n" + claims, "x-" + claims++, now, "m"));
        }
      }
      assertEquals(claims, a.stats().senderNotInCertificate());
      assertEquals(HttpTransport.MAX_OTHER_NODES, a.uncertifiedSendersSeen().size());
      assertFalse(a.uncertifiedSendersSeen().contains("n0 CN=c"), "the least recently seen");
      wall.addAndGet(60_000);
      assertEquals(401, post(c, a, "n0", "x-again", now, "m"));
      assertTrue(a.uncertifiedSendersSeen().contains("n0 CN=c"), "a forgotten pair warns again");
      assertEquals(HttpTransport.MAX_OTHER_NODES, a.uncertifiedSendersSeen().size());
      assertEquals(0, a.stats().messagesReceived());
    }
  }

  @Test
  void bindingNodeIdsNeedsTls() throws Exception {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
            .clusterKey(HttpTransportTest.KEY).bindNodeIdsToCertificates(true).build());
    assertTrue(e.getMessage().contains("bindNodeIdsToCertificates(true) needs tls(context)"),
        e.getMessage());
    // off, or with TLS, it builds
    HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0).clusterKey(HttpTransportTest.KEY)
        .bindNodeIdsToCertificates(false).build().close();
    HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0).clusterKey(HttpTransportTest.KEY)
        .tls(certA).bindNodeIdsToCertificates(true).build().close();
  }
}
