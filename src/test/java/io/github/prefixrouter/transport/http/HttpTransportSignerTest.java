package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.contract.ThrowingCacheEventListener;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.FailingJcaProvider;
import io.github.prefixrouter.testing.LoggedLines;
import io.github.prefixrouter.transport.http.HttpTransportTest.Recorder;
import java.nio.charset.StandardCharsets;
import java.security.InvalidAlgorithmParameterException;
import java.security.InvalidKeyException;
import java.security.Key;
import java.security.Provider;
import java.security.ProviderException;
import java.security.Security;
import java.security.spec.AlgorithmParameterSpec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The HMAC of the cluster key comes from the host's JCA providers: one whose HmacSHA256 throws
 * as a request or a message is signed (a hardware token gone away) fails that request or drops
 * that message, and costs no in-flight slot: once it signs again, the peer is reached. One that
 * throws as a request or a message received is checked, or as an answer is signed, has it
 * answered at once, and the node goes on serving; one that throws as an answer is checked fails
 * that request at once.
 */
class HttpTransportSignerTest extends HttpTransportFixture {

  /** This test's cluster key, the only one {@link FailingHmac} fails for. */
  private static final byte[] KEY =
      "signer-test-cluster-key-32-bytes".getBytes(StandardCharsets.US_ASCII);
  /** Failures of each kind, more than the sender's {@code maxInFlightPerPeer} in all. */
  private static final int FAILURES = 12;
  private static final int MAX_IN_FLIGHT = 4;

  /**
   * A request or a message whose signing throws (a RuntimeException, an Error, a checked
   * exception thrown undeclared, in turn) fails the request with a typed error or drops the
   * message, never throws, and gives back its in-flight slot: more of them than the sender's
   * {@code maxInFlightPerPeer}, then a request and a message with the signer healthy again are
   * answered and delivered.
   */
  @Test
  void aSignerThatThrowsFailsTheRequestAndKeepsNoSlot() throws Exception {
    Recorder ra = new Recorder();
    HttpTransport a;
    HttpTransport b;
    // the HMACs are chosen as the transports are built; the provider is taken out after
    Provider hsm = FailingHmac.provider();
    assertTrue(Security.insertProviderAt(hsm, 1) > 0, "provider installed");
    try {
      a = start(node("a").clusterKey(KEY), ra);
      b = start(node("b").clusterKey(KEY).maxInFlightPerPeer(MAX_IN_FLIGHT), new Recorder());
    } finally {
      Security.removeProvider(hsm.getName());
    }
    PeerAddress at = a.localAddress();
    List<String> problems = new ArrayList<>();
    long droppedBefore = b.stats().messagesDropped();

    FailingHmac.armed = true;
    for (int i = 0; i < FAILURES; i++) {
      String id = "r" + i;
      CompletableFuture<byte[]> f;
      try {
        f = b.request(at, id.getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(3));
      } catch (Throwable e) {
        problems.add("request " + id + " threw " + e);
        continue;
      }
      try {
        byte[] answer = f.get(6, TimeUnit.SECONDS);
        problems.add("request " + id + " answered " + new String(answer, StandardCharsets.UTF_8)
            + " though it could not be signed");
      } catch (ExecutionException e) {
        expectUnreachable(id, e.getCause(), problems);
      } catch (TimeoutException e) {
        problems.add("request " + id + " never completed");
      }
    }
    for (int i = 0; i < FAILURES; i++) {
      try {
        b.send(at, ("m" + i).getBytes(StandardCharsets.UTF_8));
      } catch (Throwable e) {
        problems.add("send of m" + i + " threw " + e);
      }
    }
    FailingHmac.armed = false;
    assertTrue(FailingHmac.thrown.get() > 0, "the signer threw");

    CompletableFuture<byte[]> after =
        b.request(at, "after".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(3));
    try {
      assertEquals("echo b after", new String(after.get(6, TimeUnit.SECONDS), StandardCharsets.UTF_8));
    } catch (ExecutionException e) {
      fail("a request with the signer healthy again, after " + FAILURES + " requests and "
          + FAILURES + " messages whose signing threw, was not answered: " + e.getCause());
    }
    b.send(at, "m-after".getBytes(StandardCharsets.UTF_8));
    assertEquals("b@" + b.localAddress().address() + ":m-after",
        ra.messages.poll(5, TimeUnit.SECONDS),
        "a message with the signer healthy again delivered (" + ra.messages + " before it)");
    assertEquals(List.of(), problems, "what the signer throwing did");
    assertEquals(FAILURES, b.stats().messagesDropped() - droppedBefore,
        "messages dropped and counted");
    assertEquals(0, b.stats().pendingRequests(), "requests still pending");
  }

  /**
   * A receiver whose HmacSHA256 throws as it checks a request's or a message's MAC (a
   * RuntimeException, an Error, a checked exception thrown undeclared, in turn) answers each at
   * once with 500, as any failure of its own: the sender's request fails {@code PROTOCOL} then,
   * not at its timeout, and its message counts as failed at once. The receiver counts none as
   * malformed or as failing authentication (the sender did nothing wrong), delivers none, and
   * goes on serving: with the HMAC healthy again, a request is answered and a message delivered.
   */
  @Test
  void aReceiverWhoseHmacThrowsAsItChecksAnswersEachAtOnce() throws Exception {
    Recorder ra = new Recorder();
    HttpTransport a = startWithFailingHmac(node("a").clusterKey(KEY), ra);
    // the sender's HMAC is the JDK's: only the receiver's throws; a message the receiver does
    // not answer would fail only at this timeout
    HttpTransport b = start(node("b").clusterKey(KEY).messageTimeout(Duration.ofSeconds(60)),
        new Recorder());
    PeerAddress at = a.localAddress();
    List<String> problems = new ArrayList<>();
    long failedBefore = b.stats().messagesFailed();
    long thrownBefore = FailingHmac.thrown.get();

    FailingHmac.armed = true;
    requestsAnswered500(b, at, "its MAC could not be checked", problems);
    for (int i = 0; i < FAILURES; i++) {
      b.send(at, ("m" + i).getBytes(StandardCharsets.UTF_8));
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (b.stats().messagesFailed() - failedBefore < FAILURES && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    long failed = b.stats().messagesFailed() - failedBefore;
    if (failed != FAILURES) {
      problems.add(failed + " of " + FAILURES + " messages failed at the sender within 5 s");
    }
    FailingHmac.armed = false;
    thrownOnceEach(thrownBefore, 2 * FAILURES, "requests and messages", problems);
    if (!ra.messages.isEmpty()) {
      problems.add("delivered though their MACs could not be checked: " + ra.messages);
    }
    if (a.stats().malformedRejected() != 0 || a.stats().authFailures() != 0) {
      problems.add("counted at the receiver as malformed " + a.stats().malformedRejected()
          + ", as failing authentication " + a.stats().authFailures());
    }

    requestAfterAnswered(b, at, Duration.ofSeconds(5),
        "request after, with the HMAC healthy again, not answered:", problems);
    b.send(at, "m-after".getBytes(StandardCharsets.UTF_8));
    String got = ra.messages.poll(5, TimeUnit.SECONDS);
    if (!("b@" + b.localAddress().address() + ":m-after").equals(got)) {
      problems.add("message m-after, with the HMAC healthy again, not delivered (" + got + ")");
    }
    assertEquals(List.of(), problems, "what the receiver's HMAC throwing as it checked did");
  }

  /**
   * A requester whose HmacSHA256 throws as it checks an answer's MAC (each kind in turn) fails
   * the request at once with a typed error, what was thrown its cause, and gives back its
   * in-flight slot: more such answers than the requester's {@code maxInFlightPerPeer}, then a
   * request with the HMAC healthy again is answered.
   */
  @Test
  void aRequesterWhoseHmacThrowsAsItChecksAnAnswerFailsTheRequestAtOnce() throws Exception {
    HttpTransport a = start(node("a").clusterKey(KEY), new Recorder());
    HttpTransport b = startWithFailingHmac(
        node("b").clusterKey(KEY).maxInFlightPerPeer(MAX_IN_FLIGHT), new Recorder());
    PeerAddress at = a.localAddress();
    List<String> problems = new ArrayList<>();
    long thrownBefore = FailingHmac.thrown.get();

    FailingHmac.armedFor = HttpTransport.TAG_RESPONSE; // the requests are signed, and answered
    FailingHmac.armed = true;
    for (int i = 0; i < FAILURES; i++) {
      String id = "r" + i;
      CompletableFuture<byte[]> f =
          b.request(at, id.getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(60));
      try {
        byte[] answer = f.get(5, TimeUnit.SECONDS);
        problems.add("request " + id + " answered " + new String(answer, StandardCharsets.UTF_8)
            + " though its answer's MAC could not be checked");
      } catch (ExecutionException e) {
        expectUnreachable(id, e.getCause(), problems);
      } catch (TimeoutException e) {
        problems.add("request " + id + " neither answered nor failed within 5 s");
      }
    }
    FailingHmac.armed = false;
    thrownOnceEach(thrownBefore, FAILURES, "answers", problems);

    requestAfterAnswered(b, at, Duration.ofSeconds(5),
        "request after, with the HMAC healthy again, not answered:", problems);
    if (b.stats().pendingRequests() != 0) {
      problems.add(b.stats().pendingRequests() + " requests still pending");
    }
    assertEquals(List.of(), problems, "what the requester's HMAC throwing as it checked did");
  }

  /**
   * A server whose HmacSHA256 throws as it signs an answer (each kind in turn) answers the
   * request 500 at once, as any failure of its own: the requester's request fails
   * {@code PROTOCOL} then, not at its timeout. The thread writing the answers survives (no thread
   * is started in place of one that ended), and with the HMAC healthy again the server answers.
   */
  @Test
  void aServerWhoseHmacThrowsAsItSignsAnAnswerAnswersAtOnce() throws Exception {
    String id = "answer-signer";
    HttpTransport a = startWithFailingHmac(node(id).clusterKey(KEY).serverThreads(1),
        new Recorder());
    HttpTransport b = start(node("b").clusterKey(KEY), new Recorder());
    PeerAddress at = a.localAddress();
    List<String> problems = new ArrayList<>();
    long thrownBefore = FailingHmac.thrown.get();

    FailingHmac.armedFor = HttpTransport.TAG_RESPONSE; // the requests are checked, and handled
    FailingHmac.armed = true;
    requestsAnswered500(b, at, "its answer could not be signed", problems);
    FailingHmac.armed = false;
    thrownOnceEach(thrownBefore, FAILURES, "answers", problems);

    requestAfterAnswered(b, at, Duration.ofSeconds(5),
        "request after, with the HMAC healthy again, not answered:", problems);
    List<String> servers = new ArrayList<>();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      if (t.getName().matches("prefix-router-http-" + id + "-server-\\d+")) {
        servers.add(t.getName());
      }
    }
    if (!servers.equals(List.of("prefix-router-http-" + id + "-server-1"))) {
      problems.add("the one server thread is now " + servers);
    }
    assertEquals(List.of(), problems, "what the server's HMAC throwing as it signed did");
  }

  /**
   * {@link #FAILURES} requests from {@code b} to {@code at}, one after the other, each to be
   * answered 500 at once (within 5 s, well before its 60 s timeout): the request fails
   * {@code PROTOCOL}. {@code though} says why an answer would be wrong.
   */
  private static void requestsAnswered500(HttpTransport b, PeerAddress at, String though,
      List<String> problems) {
    for (int i = 0; i < FAILURES; i++) {
      failsWith500(b, at, "r" + i, " though " + though, problems);
    }
  }

  /** Notes it if {@link FailingHmac} has not thrown {@code times} times since {@code before}. */
  private static void thrownOnceEach(long before, int times, String each,
      List<String> problems) {
    if (FailingHmac.thrown.get() - before != times) {
      problems.add("the HMAC threw " + (FailingHmac.thrown.get() - before) + " times, not "
          + "once for each of the " + times + " " + each);
    }
  }

  /**
   * The requests a receiver answers 500 because its HmacSHA256 throws, as it checks their MACs
   * or signs their answers, are counted ({@code internalErrors}), and logged at most
   * {@link HttpTransport#WARNINGS_PER_MINUTE} lines a minute, the first line logged after those
   * left out saying how many were. Each was logged, a WARN line a request, and counted nowhere:
   * a node whose provider failed showed it only in its log, and filled it.
   */
  @Test
  void theReceiversOwnHmacFailuresAreCountedAndTheirWarningsBounded() throws Exception {
    int perMinute = HttpTransport.WARNINGS_PER_MINUTE;
    AtomicLong wall = new AtomicLong(1_700_000_000_000L);
    HttpTransport a = startWithFailingHmac(node("a").clusterKey(KEY).wallClockMillis(wall::get),
        new Recorder());
    HttpTransport b = start(node("b").clusterKey(KEY).wallClockMillis(wall::get), new Recorder());
    PeerAddress at = a.localAddress();
    List<String> problems = new ArrayList<>();

    FailingHmac.armedFor = HttpTransport.TAG_REQUEST;
    FailingHmac.armed = true;
    List<String> checking = LoggedLines.logged("a: cannot check the MAC", () -> {
      for (int i = 0; i < 2 * perMinute; i++) {
        failsWith500(b, at, "c" + i, "", problems);
      }
    });
    if (checking.size() != perMinute) {
      problems.add(checking.size() + " lines logged in a minute for " + 2 * perMinute
          + " MACs that could not be checked, not " + perMinute + ": " + checking);
    }
    wall.addAndGet(60_000);
    FailingHmac.armedFor = HttpTransport.TAG_RESPONSE;
    List<String> signing = LoggedLines.logged("a: cannot sign the answer", () -> {
      for (int i = 0; i <= perMinute; i++) {
        failsWith500(b, at, "s" + i, "", problems);
      }
    });
    FailingHmac.armed = false;
    if (signing.size() != perMinute || !signing.get(0).contains("(" + perMinute
        + " more such failures left out before this one, above " + perMinute + " a minute)")) {
      problems.add("a minute later, for " + (perMinute + 1) + " answers that could not be signed, "
          + "logged " + signing);
    }
    HttpTransport.Stats st = a.stats();
    if (st.internalErrors() != 3 * perMinute + 1 || st.malformedRejected() != 0
        || st.authFailures() != 0) {
      problems.add("counted at the receiver: internal errors " + st.internalErrors() + ", not "
          + (3 * perMinute + 1) + "; malformed " + st.malformedRejected()
          + ", failing authentication " + st.authFailures());
    }
    assertEquals(List.of(), problems, "what the receiver's HMAC failures counted and logged");
  }

  /**
   * Adds to {@code problems} unless request {@code id} from {@code b} is answered 500 at once;
   * {@code though} ends the problem of an answer (why it is wrong).
   */
  private static void failsWith500(HttpTransport b, PeerAddress at, String id, String though,
      List<String> problems) {
    CompletableFuture<byte[]> f =
        b.request(at, id.getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(60));
    try {
      problems.add("request " + id + " answered "
          + new String(f.get(5, TimeUnit.SECONDS), StandardCharsets.UTF_8) + though);
    } catch (ExecutionException e) {
      if (!(e.getCause() instanceof TransportException te)
          || te.kind() != TransportException.Kind.PROTOCOL
          || !te.getMessage().contains("HTTP 500")) {
        problems.add("request " + id + " failed " + e.getCause());
      }
    } catch (TimeoutException e) {
      problems.add("request " + id + " not answered within 5 s");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      problems.add("interrupted waiting for request " + id);
    }
  }

  /**
   * A host's JCA provider that throws as the cluster keys are set up (as the HmacSHA256 is looked
   * up or given a key, or as a key's SHA-256, its id, is taken; a RuntimeException, an Error, a
   * checked exception thrown undeclared) fails {@code build()} and {@code updateClusterKeys}
   * with an {@link IllegalStateException} naming the problem, what was thrown its cause, as the
   * provider's checked exceptions do; an update that fails leaves the keys in use as they were,
   * and the transport goes on authenticating with them.
   */
  @Test
  void aProviderThatThrowsAsTheKeysAreSetUpFailsWithATypedError() throws Exception {
    byte[] next = "the next cluster key of 32 bytes".getBytes(StandardCharsets.US_ASCII);
    HttpTransport a = start(node("a").clusterKey(KEY), new Recorder());
    HttpTransport b = start(node("b").clusterKey(KEY), new Recorder());
    java.util.Map<String, Integer> keysBefore = a.stats().clusterKeys();
    List<String> problems = new ArrayList<>();
    // where the provider throws, and what; an HmacSHA256 whose key is refused with an exception
    // is passed over by the JDK for the next provider's, so there only an Error reaches the caller
    List<Object[]> cases = new ArrayList<>();
    for (String at : List.of(FailingJcaProvider.LOOKUP, FailingJcaProvider.DIGEST)) {
      cases.add(new Object[] {at, new ProviderException("token removed")});
      cases.add(new Object[] {at, new SignerError("token driver")});
      cases.add(new Object[] {at, new java.io.IOException("token unreachable")});
    }
    cases.add(new Object[] {FailingJcaProvider.INIT, new SignerError("token driver")});
    Provider hsm = FailingJcaProvider.provider();
    for (Object[] c : cases) {
      String at = (String) c[0];
      Throwable thrown = (Throwable) c[1];
      String what = thrown.getClass().getSimpleName() + " as " + at;
      FailingJcaProvider.at = at;
      FailingJcaProvider.toThrow = thrown;
      assertTrue(Security.insertProviderAt(hsm, 1) > 0, "provider installed");
      try {
        try {
          HttpTransport t = node("c").clusterKey(KEY).build();
          toClose.add(t);
          problems.add(what + ": build() passed");
        } catch (Throwable e) {
          expectTyped(what + ": build()", e, thrown, problems);
        }
        try {
          a.updateClusterKeys(next, KEY);
          problems.add(what + ": updateClusterKeys passed");
        } catch (Throwable e) {
          expectTyped(what + ": updateClusterKeys", e, thrown, problems);
        }
      } finally {
        FailingJcaProvider.toThrow = null;
        Security.removeProvider(hsm.getName());
      }
      if (!a.stats().clusterKeys().equals(keysBefore) || a.stats().keyUpdates() != 0) {
        problems.add(what + ": the keys in use are now " + a.stats().clusterKeys() + " after "
            + a.stats().keyUpdates() + " updates");
      }
    }
    CompletableFuture<byte[]> after =
        b.request(a.localAddress(), "after".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(5));
    try {
      String answer = new String(after.get(10, TimeUnit.SECONDS), StandardCharsets.UTF_8);
      if (!answer.equals("echo b after")) {
        problems.add("request after answered " + answer);
      }
    } catch (ExecutionException | TimeoutException e) {
      problems.add("request after the failed updates not answered: " + e);
    }
    assertEquals(List.of(), problems, "what a provider throwing as the keys were set up did");
  }

  /**
   * Adds to {@code problems} unless {@code e} is an {@link IllegalStateException} whose cause is
   * {@code thrown} and whose message names what could not be set up.
   */
  private static void expectTyped(String what, Throwable e, Throwable thrown,
      List<String> problems) {
    if (!(e instanceof IllegalStateException) || e.getCause() != thrown
        || !String.valueOf(e.getMessage()).matches("(?s).*(HmacSHA256|SHA-256).*")) {
      problems.add(what + " threw " + e + " (cause " + e.getCause() + ")");
    }
  }

  /**
   * Builds and starts a transport whose HmacSHA256 is {@link FailingHmac}; the transports built
   * before and after it have the JDK's.
   */
  private HttpTransport startWithFailingHmac(HttpTransport.Builder b, Recorder h) {
    Provider hsm = FailingHmac.provider();
    assertTrue(Security.insertProviderAt(hsm, 1) > 0, "provider installed");
    try {
      return start(b, h);
    } finally {
      Security.removeProvider(hsm.getName());
    }
  }

  @AfterEach
  void disarm() {
    FailingHmac.armed = false;
    FailingHmac.armedFor = null;
  }

  /**
   * An HmacSHA256 of a host's JCA provider (a hardware token's, say) that computes what the
   * JDK's does, but once {@link #armed} throws as it is given input under {@link #KEY}: in turn a
   * {@link ProviderException} (what a provider throws when its token fails), an {@link Error} and
   * an {@link java.io.IOException} thrown undeclared. With {@link #armedFor} set, it throws only
   * for the MACs of that domain tag, the first field of {@link MessageAuthenticator}'s input
   * (so that one node's answers, say, fail while its requests are signed and checked).
   */
  public static final class FailingHmac extends FailingJcaProvider.JdkHmac {

    static volatile boolean armed;
    /** The domain tag ("request", "message", "response") whose MACs fail; null for all. */
    static volatile String armedFor;
    static final AtomicLong thrown = new AtomicLong();

    private boolean underKey;
    /** The first bytes of the input since the last reset, enough to read the domain tag. */
    private byte[] head = new byte[0];

    static Provider provider() {
      return new Provider("SignerTestHsm", "1.0", "an HmacSHA256 that fails on demand") {
        {
          putService(new Service(this, "Mac", "HmacSHA256", FailingHmac.class.getName(), null,
              null) {
            @Override
            public Object newInstance(Object parameter) {
              return new FailingHmac();
            }
          });
        }
      };
    }

    @Override
    protected void engineInit(Key key, AlgorithmParameterSpec params)
        throws InvalidKeyException, InvalidAlgorithmParameterException {
      super.engineInit(key, params);
      underKey = Arrays.equals(key.getEncoded(), KEY);
    }

    @Override
    protected void engineUpdate(byte[] input, int offset, int len) {
      if (head.length < 64) {
        int n = Math.min(len, 64 - head.length);
        byte[] more = Arrays.copyOf(head, head.length + n);
        System.arraycopy(input, offset, more, head.length, n);
        head = more;
      }
      failIfArmed();
      super.engineUpdate(input, offset, len);
    }

    @Override
    protected byte[] engineDoFinal() {
      head = new byte[0];
      return super.engineDoFinal();
    }

    @Override
    protected void engineReset() {
      head = new byte[0];
      super.engineReset();
    }

    private void failIfArmed() {
      if (!armed || !underKey || !tagged(armedFor)) {
        return;
      }
      switch ((int) (thrown.getAndIncrement() % 3)) {
        case 0 -> throw new ProviderException("token removed");
        case 1 -> throw new SignerError("token driver");
        default -> throw ThrowingCacheEventListener.<RuntimeException>undeclared(
            new java.io.IOException("token unreachable"));
      }
    }

    /**
     * Whether the input so far starts with {@code tag} as its first length-prefixed field (any
     * input for a null tag); false while too little of it has come to tell.
     */
    private boolean tagged(String tag) {
      if (tag == null) {
        return true;
      }
      byte[] t = tag.getBytes(StandardCharsets.UTF_8);
      if (head.length < 4 + t.length) {
        return false;
      }
      int len = (head[0] & 0xff) << 24 | (head[1] & 0xff) << 16 | (head[2] & 0xff) << 8
          | (head[3] & 0xff);
      return len == t.length && Arrays.equals(head, 4, 4 + t.length, t, 0, t.length);
    }
  }

  /** An Error a provider may throw (an assertion in its code, a native library missing). */
  static final class SignerError extends Error {
    private static final long serialVersionUID = 1L;

    SignerError(String message) {
      super(message);
    }
  }

  /**
   * Adds to {@code problems} unless request {@code id} failed with what it threw as a typed
   * {@link TransportException} of kind {@code UNREACHABLE} with a cause.
   */
  private static void expectUnreachable(String id, Throwable failure, List<String> problems) {
    if (!(failure instanceof TransportException te)) {
      problems.add("request " + id + " failed with an untyped " + failure);
    } else if (te.kind() != TransportException.Kind.UNREACHABLE || te.getCause() == null) {
      problems.add("request " + id + " failed " + te + " (cause " + te.getCause() + ")");
    }
  }
}
