package io.github.prefixrouter.contract;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The {@link Transport} contract, as a test kit any implementation can run.
 *
 * <p>Extend it in your test tree and supply {@link #createTransport(String)} (a fresh, unstarted
 * transport for a node id, reachable by the others created in the same test) and
 * {@link #unreachableAddress()}. Transports in simulated time also override
 * {@link #awaitCondition(BooleanSupplier, Duration)} to advance their clock instead of
 * sleeping. Depend on the {@code tests} classifier of {@code prefix-router}:
 *
 * <pre>{@code
 * class HttpTransportContractTest extends TransportContractTest {
 *   static final byte[] KEY = "0123456789abcdef0123456789abcdef".getBytes(US_ASCII);
 *
 *   protected Transport createTransport(String nodeId) {
 *     return HttpTransport.builder().nodeId(nodeId).listen("127.0.0.1", 0).clusterKey(KEY).build();
 *   }
 *
 *   protected PeerAddress unreachableAddress() { return new PeerAddress("ghost", "127.0.0.1:1"); }
 *
 *   protected int requestLimitBytes() { return 4 << 20; } // HttpTransport's default maxMessageBytes
 * }
 * }</pre>
 *
 * Checked: answers reach the requester with the sender's identity, one-way messages arrive,
 * timeouts are honoured (never early: not done at nine tenths of the timeout; nor more than 2 s
 * late, in a run the machine did not stall in, and a late answer does not override them, nor
 * does a timeout passing override an answer given in time), handler
 * failures surface as {@link TransportException}, every request completes exactly once and
 * reaches the peer's handler once (also one the handler fails or refuses, or that times out:
 * no retry), the caller's thread is never blocked (also not while the peer's handler is busy),
 * {@code close()} fails pending requests with {@code CLOSED},
 * returning within 3 s while a peer holds one, and stops inbound delivery (and a send on the
 * closed transport, from a callback of a request it failed, neither throws nor goes out), and many concurrent requests each get their own answer, also when
 * the peer answers them in another order than they arrived; a handler that throws or returns
 * null fails only its own request (and a message handler that throws, only its message), and an
 * answer arriving after the requester closed does not replace {@code CLOSED}; a handler whose
 * answer is null fails its request; a timeout that is not positive fails {@code TIMEOUT}, and
 * one too long for any clock (up to {@code ChronoUnit.FOREVER}) waits for the answer; a request
 * above the limit a transport declares ({@link #requestLimitBytes()}) fails {@code TOO_LARGE}
 * and never reaches the peer, while one at the limit is answered (without a declared limit,
 * the transport's own {@link Transport#maxMessageBytes()} is checked that way, up to 64 MiB);
 * {@code maxMessageBytes()} is positive, the same on every call and the declared limit. And
 * what the node relies on beyond that: the handler's {@code from} is the sender's {@code localAddress()}; a handler's
 * {@code PROTOCOL} failure reaches the requester as {@code PROTOCOL} with the handler's message,
 * whole for 100 characters of printable ASCII;
 * a handler may send and request through its own transport; payload arrays passed in are left
 * unchanged; a one-way message as large as the largest gossip message a node may send on the
 * transport arrives intact (16 MiB, {@code RouterConfig.MAX_GOSSIP_MESSAGE_BYTES}, or the
 * transport's {@code maxMessageBytes()} if that is less);
 * requests whose futures the caller cancelled hold nothing that keeps a later request from being
 * answered; a request's callbacks may send and request, and {@code close()} called in one
 * returns within 3 s; and sends and requests from several threads at once each reach their own peer and
 * answer.
 */
public abstract class TransportContractTest {

  private final List<Transport> created = new ArrayList<>();

  /** A fresh, unstarted transport for {@code nodeId}. */
  protected abstract Transport createTransport(String nodeId);

  /** An address where nothing listens. */
  protected abstract PeerAddress unreachableAddress();

  /** The timeout used by the timeout tests; short but above the transport's round trip. */
  protected Duration shortTimeout() {
    return Duration.ofMillis(300);
  }

  /**
   * The largest request payload, in bytes, the transports {@link #createTransport} makes send;
   * a larger one must fail with {@link TransportException.Kind#TOO_LARGE} without reaching the
   * peer. The default, {@code -1}, declares no limit, and the check is skipped.
   */
  protected int requestLimitBytes() {
    return -1;
  }

  /** The longest any answer may take in these tests. */
  protected Duration patience() {
    return Duration.ofSeconds(10);
  }

  /**
   * Waits until {@code condition} holds or {@code max} elapses, returning the condition's final
   * value. The default polls in real time; simulated transports advance their clock instead.
   */
  protected boolean awaitCondition(BooleanSupplier condition, Duration max) {
    return RealTimeWait.await(condition, max);
  }

  /** Lets {@code d} of (real or simulated) time pass. */
  protected void pass(Duration d) {
    awaitCondition(() -> false, d);
  }

  @AfterEach
  void closeAll() {
    for (Transport t : created) {
      try {
        t.close();
      } catch (RuntimeException e) {
        // closing twice or after failure must not matter here
      }
    }
  }

  private Transport started(String nodeId, Transport.InboundHandler handler) {
    Transport t = createTransport(nodeId);
    assertNotNull(t, "createTransport returned null");
    created.add(t);
    t.start(handler);
    return t;
  }

  private static Transport.InboundHandler echo() {
    return (from, payload) -> CompletableFuture.completedFuture(
        concat((from.nodeId() + ":").getBytes(StandardCharsets.US_ASCII), payload));
  }

  /**
   * A handler that counts in {@code delivered} every message and request it is given, and
   * answers a request with its own payload.
   *
   * @param delivered the count
   * @return the handler
   */
  public static Transport.InboundHandler counting(AtomicInteger delivered) {
    return new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        delivered.incrementAndGet();
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        delivered.incrementAndGet();
        return CompletableFuture.completedFuture(payload);
      }
    };
  }

  private static byte[] concat(byte[] a, byte[] b) {
    byte[] r = new byte[a.length + b.length];
    System.arraycopy(a, 0, r, 0, a.length);
    System.arraycopy(b, 0, r, a.length, b.length);
    return r;
  }

  /** What a completed request came to: its answer's bytes, or its failure. */
  private static String outcome(CompletableFuture<byte[]> f) {
    return f.handle((v, e) -> e == null ? java.util.Arrays.toString(v)
        : "failed: " + (e instanceof CompletionException && e.getCause() != null
            ? e.getCause() : e)).join();
  }

  private static TransportException.Kind kindOf(CompletableFuture<?> f) {
    try {
      f.join();
      return fail("expected the request to fail");
    } catch (CompletionException e) {
      Throwable c = e.getCause();
      assertInstanceOf(TransportException.class, c, "failures must be TransportException: " + c);
      return ((TransportException) c).kind();
    }
  }

  @Test
  void requestGetsTheAnswerAndTheHandlerSeesTheSender() {
    Transport b = started("b", echo());
    Transport a = started("a", echo());
    byte[] payload = {1, 2, 3, 4, 5};
    CompletableFuture<byte[]> f = a.request(b.localAddress(), payload, patience());
    assertTrue(awaitCondition(f::isDone, patience()), "no answer");
    assertArrayEquals(concat("a:".getBytes(StandardCharsets.US_ASCII), payload), f.join());
  }

  @Test
  void maxMessageBytesIsPositiveAndTheSameOnEveryCall() {
    Transport a = started("a", echo());
    int declared = a.maxMessageBytes();
    assertTrue(declared > 0, "maxMessageBytes() must be positive, was " + declared);
    assertEquals(declared, a.maxMessageBytes(), "maxMessageBytes() changed between two calls");
    int limit = requestLimitBytes();
    if (limit > 0 && declared != Integer.MAX_VALUE) {
      assertEquals(limit, declared, "maxMessageBytes() is not the requestLimitBytes() declared");
    }
  }

  @Test
  void aRequestAboveTheLimitFailsTooLargeAndNeverReachesThePeer() {
    AtomicInteger delivered = new AtomicInteger();
    Transport b = started("b", counting(delivered));
    Transport a = started("a", echo());
    int limit = requestLimitBytes();
    if (limit <= 0 && a.maxMessageBytes() != Integer.MAX_VALUE) {
      limit = a.maxMessageBytes(); // the limit the transport itself declares
    }
    org.junit.jupiter.api.Assumptions.assumeTrue(limit > 0, "the transport declares no limit");
    org.junit.jupiter.api.Assumptions.assumeTrue(limit <= MAX_CHECKED_LIMIT_BYTES,
        "the transport's limit is too large to send here");
    CompletableFuture<byte[]> big = a.request(b.localAddress(), new byte[limit + 1], patience());
    assertTrue(awaitCondition(big::isDone, patience()), "no answer");
    CompletionException e = org.junit.jupiter.api.Assertions.assertThrows(
        CompletionException.class, big::join);
    TransportException te = assertInstanceOf(TransportException.class, e.getCause());
    assertEquals(TransportException.Kind.TOO_LARGE, te.kind());
    CompletableFuture<byte[]> atLimit = a.request(b.localAddress(), new byte[limit], patience());
    assertTrue(awaitCondition(atLimit::isDone, patience()), "no answer at the limit");
    assertEquals(limit, atLimit.join().length, "the request at the limit is answered");
    assertEquals(1, delivered.get(), "only the request at the limit reached the peer");
  }

  @Test
  void oneWayMessageArrivesWithTheSendersIdentity() {
    ConcurrentLinkedQueue<String> got = new ConcurrentLinkedQueue<>();
    Transport b = started("b", new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        got.add(from.nodeId() + "/" + new String(payload, StandardCharsets.US_ASCII));
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(new byte[0]);
      }
    });
    Transport a = started("a", echo());
    a.send(b.localAddress(), "hello".getBytes(StandardCharsets.US_ASCII));
    assertTrue(awaitCondition(() -> !got.isEmpty(), patience()), "message not delivered");
    assertEquals("a/hello", got.peek());
  }

  @Test
  void timeoutIsHonouredAndALateAnswerDoesNotOverrideIt() {
    CompletableFuture<byte[]> never = new CompletableFuture<>();
    Transport b = started("b", (from, p) -> never);
    Transport a = started("a", echo());
    long asked = System.nanoTime();
    CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {9}, shortTimeout());
    // nine tenths of the timeout: a transport may time out on a coarse timer, but not much
    // before the time it was given (half of it, looked at before, let one fail requests at 60%)
    pass(shortTimeout().minus(shortTimeout().dividedBy(10)));
    // early only if it was done before its timeout had passed in real time too: on a loaded
    // machine this thread may wake from the wait after the timeout, which has rightly fired
    boolean done = f.isDone();
    boolean inTime = System.nanoTime() - asked < shortTimeout().toNanos();
    assertFalse(done && inTime, "the request completed before its timeout without an answer");
    assertTrue(awaitCondition(f::isDone, shortTimeout().multipliedBy(3).plus(patience())),
        "the timeout was not honoured");
    assertEquals(TransportException.Kind.TIMEOUT, kindOf(f));
    never.complete(new byte[] {1});
    pass(shortTimeout());
    assertEquals(TransportException.Kind.TIMEOUT, kindOf(f), "a late answer changed the outcome");
  }

  /**
   * A request answered within its timeout keeps its answer once the timeout has passed: it
   * completes once. A transport whose timer, not stopped by the answer, then writes
   * {@code TIMEOUT} over it (with {@code obtrudeException}) fails a forward the node has taken
   * the answer of, and every later look at the future says the peer never answered. (On a
   * machine so loaded that the answer comes too late, the request fails {@code TIMEOUT}, and
   * that outcome must stay as it is.)
   */
  @Test
  void anAnswerGivenInTimeIsNotOverriddenWhenTheTimeoutPasses() {
    Transport b = started("b", (from, p) -> CompletableFuture.completedFuture(p));
    Transport a = started("a", echo());
    CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {4}, shortTimeout());
    assertTrue(awaitCondition(f::isDone, shortTimeout().multipliedBy(3).plus(patience())),
        "the request never completed");
    String first = outcome(f);
    pass(shortTimeout().multipliedBy(2));
    assertEquals(first, outcome(f), "the request's outcome changed once its timeout had passed");
  }

  /**
   * A request without an answer fails {@code TIMEOUT} soon after its own timeout, within
   * {@link #TIMEOUT_LATENESS} of it, not at a deadline of the transport's (a socket's read
   * timeout, a sweep for expired requests every few seconds): the node falls back to another
   * peer or its own engine when a forward's timeout has passed (its guard against a transport
   * that ignores timeouts fires only a quarter of the timeout later).
   *
   * <p>A stall of the whole machine (or of the JVM: a long collection) as long as the lateness
   * allowed holds the transport's timer too, and would fail a transport that keeps its
   * timeouts. Such a stall holds this test's thread as well: a run during which it was held for
   * over {@link #STALL} between two looks at the request says nothing, and is made again with a
   * new request, up to {@link #TIMEOUT_RUNS} times. A transport that is late fails every run
   * the machine did not stall in.
   */
  @Test
  void aTimeoutEndsTheRequestSoonAfterItPasses() {
    CompletableFuture<byte[]> never = new CompletableFuture<>();
    Transport b = started("b", (from, p) -> never);
    Transport a = started("a", echo());
    for (int run = 1; ; run++) {
      long[] lastLook = {System.nanoTime()};
      long[] longestGap = {0};
      CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {9}, shortTimeout());
      boolean done = awaitCondition(() -> {
        long now = System.nanoTime();
        longestGap[0] = Math.max(longestGap[0], now - lastLook[0]);
        lastLook[0] = now;
        return f.isDone();
      }, shortTimeout().plus(TIMEOUT_LATENESS));
      longestGap[0] = Math.max(longestGap[0], System.nanoTime() - lastLook[0]);
      if (!done && longestGap[0] > STALL.toNanos() && run < TIMEOUT_RUNS) {
        continue; // the machine stalled: this run says nothing
      }
      assertTrue(done, "a request with a timeout of " + shortTimeout().toMillis() + " ms and no "
          + "answer was still pending " + TIMEOUT_LATENESS.toMillis() + " ms after its timeout"
          + (longestGap[0] > STALL.toNanos() ? " (in each of " + TIMEOUT_RUNS + " runs, this "
              + "thread was held for over " + STALL.toMillis() + " ms at a time)" : ""));
      assertEquals(TransportException.Kind.TIMEOUT, kindOf(f));
      return;
    }
  }

  /** How late, in real time on a loaded machine, a request may fail after its timeout. */
  private static final Duration TIMEOUT_LATENESS = Duration.ofSeconds(2);
  /**
   * A hold of the test's own thread, between two looks at the request, that makes a run of
   * {@link #aTimeoutEndsTheRequestSoonAfterItPasses} say nothing: the machine stalled.
   */
  private static final Duration STALL = Duration.ofMillis(500);
  /** Runs of {@link #aTimeoutEndsTheRequestSoonAfterItPasses} before a stalled one fails it. */
  private static final int TIMEOUT_RUNS = 4;

  @Test
  void handlerFailureSurfacesAsTransportException() {
    Transport b = started("b", (from, p) -> CompletableFuture.failedFuture(
        new IllegalStateException("boom")));
    Transport a = started("a", echo());
    CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {1}, patience());
    assertTrue(awaitCondition(f::isDone, patience()), "no answer");
    assertNotNull(kindOf(f));
  }

  @Test
  void everyRequestCompletesExactlyOnce() {
    AtomicInteger served = new AtomicInteger();
    Transport b = started("b", (from, p) -> {
      served.incrementAndGet();
      return CompletableFuture.completedFuture(p);
    });
    Transport a = started("a", echo());
    int n = 50;
    List<CompletableFuture<byte[]>> fs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      fs.add(a.request(b.localAddress(), new byte[] {(byte) i}, patience()));
    }
    // a CompletableFuture completes once (an outcome written over a first one is what the
    // late-answer checks look for): what is checked here is that each request completes, with
    // its own answer, and reaches the handler once
    assertTrue(awaitCondition(() -> fs.stream().allMatch(CompletableFuture::isDone), patience()),
        fs.stream().filter(f -> !f.isDone()).count() + " of " + n + " requests never completed");
    for (int i = 0; i < n; i++) {
      assertArrayEquals(new byte[] {(byte) i}, fs.get(i).join(), "answer of request " + i);
    }
    // each request reaches the peer's handler once: the node runs every request it is given,
    // so one delivered again (a redelivery after its answer, say) runs on its engine again
    pass(shortTimeout());
    assertEquals(n, served.get(), "the peer's handler was given " + served.get()
        + " requests for the " + n + " sent, all of them answered");
  }

  /**
   * A request reaches the peer's handler once also when it fails there, and at most once when
   * it goes unanswered: the handler throws, fails it (with an exception of its own, {@code
   * PROTOCOL} or {@code BUSY}) or never answers, and the request is not delivered again, neither
   * before it completes nor within {@link #shortTimeout()} after (the one that timed out may
   * never have been delivered: a transport may give up on it first). A transport that retries a failed request (as an HTTP
   * client retries a 5xx) or resends one whose answer is late (attempts of part of the timeout
   * each) runs it twice on the peer's engine: the node's handler runs whatever it is given, and
   * a failure or a timeout does not mean the engine did nothing.
   */
  @Test
  void aRequestThatFailsOrTimesOutReachesItsHandlerOnce() {
    java.util.Map<Byte, AtomicInteger> deliveries = new java.util.concurrent.ConcurrentHashMap<>();
    List<CompletableFuture<byte[]>> held = new java.util.concurrent.CopyOnWriteArrayList<>();
    Transport b = started("b", (from, p) -> {
      deliveries.computeIfAbsent(p[0], k -> new AtomicInteger()).incrementAndGet();
      return switch (p[0]) {
        case 0 -> throw new IllegalStateException("the engine failed the request");
        case 1 -> CompletableFuture.failedFuture(
            new IllegalStateException("the engine failed the request"));
        case 2 -> CompletableFuture.failedFuture(
            new TransportException(TransportException.Kind.PROTOCOL, "refused"));
        case 3 -> CompletableFuture.failedFuture(
            new TransportException(TransportException.Kind.BUSY, "overloaded"));
        default -> { // never answered: the request times out
          CompletableFuture<byte[]> h = new CompletableFuture<>();
          held.add(h);
          yield h;
        }
      };
    });
    Transport a = started("a", echo());
    List<CompletableFuture<byte[]>> fs = new ArrayList<>();
    try {
      for (byte kind = 0; kind <= 4; kind++) {
        fs.add(a.request(b.localAddress(), new byte[] {kind},
            kind == 4 ? shortTimeout() : patience()));
      }
      assertTrue(awaitCondition(() -> fs.stream().allMatch(CompletableFuture::isDone),
          shortTimeout().multipliedBy(3).plus(patience())), "a request never completed");
      for (CompletableFuture<byte[]> f : fs) {
        kindOf(f);
      }
      // a retry may come a while after the failure it follows
      pass(shortTimeout());
      String[] what = {"the request whose handler threw", "the one its handler failed",
          "the one refused PROTOCOL", "the one refused BUSY", "the one that timed out"};
      // the four its handler failed reached it; the one that timed out may not have (a
      // transport may give up on it before delivery, on a busy machine): at most once
      java.util.Map<String, Integer> seen = new java.util.LinkedHashMap<>();
      java.util.Map<String, Integer> expected = new java.util.LinkedHashMap<>();
      for (byte kind = 0; kind <= 4; kind++) {
        AtomicInteger n = deliveries.get(kind);
        int count = n == null ? 0 : n.get();
        seen.put(what[kind], count);
        expected.put(what[kind], kind == 4 ? Math.min(count, 1) : 1);
      }
      assertEquals(expected, seen, "how often each request reached the peer's handler");
    } finally {
      held.forEach(h -> h.complete(new byte[] {0}));
    }
  }

  @Test
  void answersGivenInAnotherOrderReachTheirOwnRequests() {
    // the node answers forwarded requests as engines finish, not in arrival order
    List<CompletableFuture<byte[]>> held = new ArrayList<>();
    List<byte[]> asked = new ArrayList<>();
    Transport b = started("b", (from, p) -> {
      CompletableFuture<byte[]> f = new CompletableFuture<>();
      synchronized (held) {
        held.add(f);
        asked.add(p);
      }
      return f;
    });
    Transport a = started("a", echo());
    int n = 8;
    List<CompletableFuture<byte[]>> fs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      fs.add(a.request(b.localAddress(), new byte[] {(byte) i}, patience()));
    }
    assertTrue(awaitCondition(() -> {
      synchronized (held) {
        return held.size() == n;
      }
    }, patience()), "not every request reached the handler");
    synchronized (held) {
      for (int i = n - 1; i >= 0; i--) {
        held.get(i).complete(new byte[] {asked.get(i)[0], 42});
      }
    }
    assertTrue(awaitCondition(() -> fs.stream().allMatch(CompletableFuture::isDone), patience()));
    for (int i = 0; i < n; i++) {
      assertArrayEquals(new byte[] {(byte) i, 42}, fs.get(i).join(),
          "request " + i + " got another request's answer");
    }
  }

  @Test
  void aClosedTransportDeliversNothingInbound() {
    AtomicInteger delivered = new AtomicInteger();
    Transport b = started("b", counting(delivered));
    Transport a = started("a", echo());
    PeerAddress to = b.localAddress();
    b.close();
    a.send(to, new byte[] {1});
    CompletableFuture<byte[]> f = a.request(to, new byte[] {2}, shortTimeout());
    assertTrue(awaitCondition(f::isDone, shortTimeout().multipliedBy(3).plus(patience())),
        "a request to a closed transport never completed");
    assertTrue(f.isCompletedExceptionally(), "a closed transport answered a request");
    kindOf(f);
    pass(shortTimeout());
    assertEquals(0, delivered.get(), "a closed transport still delivered inbound traffic");
  }

  /**
   * The longest, in real time, one {@code request} or {@code send} may take in
   * {@link #requestAndSendNeverBlockTheCaller}: a call that hands the message on takes well under
   * a millisecond, but the thread making it can lose the processor on a loaded machine.
   */
  private static final Duration CALL_BOUND = Duration.ofSeconds(2);

  /**
   * How long, in real time, the busy peer of {@link #requestAndSendNeverBlockTheCaller} waits
   * for the caller's calls to return before it gives up and takes its next message.
   */
  private static final Duration BUSY_PEER_BOUND = Duration.ofSeconds(10);

  /**
   * {@code request} and {@code send} hand the message on and return, whatever the peer does:
   * the node calls them on its request, engine and scheduler threads. While the peer's handler
   * is busy with an earlier message (it waits until the caller's calls have returned), a request
   * to it (whose handler will not answer until the end), a message to it and a message to an
   * unreachable address each return within {@link #CALL_BOUND}, timed on the calling thread. A
   * transport that writes a message through to the peer before it returns (or waits for the
   * peer to take it, or for the answer) blocks the caller as long as the peer is busy: its call
   * takes longer, or never returns, and the busy peer waits out {@link #BUSY_PEER_BOUND}.
   */
  @Test
  void requestAndSendNeverBlockTheCaller() throws InterruptedException {
    CompletableFuture<byte[]> slow = new CompletableFuture<>();
    java.util.concurrent.CountDownLatch busy = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch callsReturned = new java.util.concurrent.CountDownLatch(1);
    AtomicBoolean gaveUp = new AtomicBoolean();
    AtomicBoolean busyDone = new AtomicBoolean();
    ConcurrentLinkedQueue<String> messages = new ConcurrentLinkedQueue<>();
    AtomicInteger requests = new AtomicInteger();
    Transport b = started("b", new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        messages.add(java.util.Arrays.toString(payload));
        if (payload.length == 1 && payload[0] == 0) { // keeps the peer busy
          busy.countDown();
          try {
            gaveUp.set(!callsReturned.await(BUSY_PEER_BOUND.toMillis(),
                java.util.concurrent.TimeUnit.MILLISECONDS));
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          } finally {
            busyDone.set(true);
          }
        }
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        requests.incrementAndGet();
        return slow;
      }
    });
    Transport a = started("a", echo());
    a.send(b.localAddress(), new byte[] {0});
    // the calls are made on a thread of their own once the peer is busy (in simulated time the
    // peer's handler runs on this thread, in awaitCondition)
    ConcurrentLinkedQueue<String> slowCalls = new ConcurrentLinkedQueue<>();
    AtomicReference<String> inCall = new AtomicReference<>("none yet: the peer never got busy");
    AtomicReference<CompletableFuture<byte[]>> request = new AtomicReference<>();
    List<Throwable> thrown = java.util.Collections.synchronizedList(new ArrayList<>());
    Thread caller = new Thread(() -> {
      try {
        if (!busy.await(patience().plus(BUSY_PEER_BOUND).toMillis(),
            java.util.concurrent.TimeUnit.MILLISECONDS)) {
          return;
        }
        timed("request to the busy peer", inCall, slowCalls,
            () -> request.set(a.request(b.localAddress(), new byte[] {1}, patience())));
        timed("send to the busy peer", inCall, slowCalls,
            () -> a.send(b.localAddress(), new byte[] {2}));
        timed("send to an unreachable address", inCall, slowCalls,
            () -> a.send(unreachableAddress(), new byte[] {3}));
        inCall.set(null);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } catch (RuntimeException | Error e) {
        thrown.add(e);
      } finally {
        callsReturned.countDown();
      }
    }, "transport-kit-caller");
    caller.setDaemon(true);
    caller.start();
    assertTrue(awaitCondition(busyDone::get, patience().plus(BUSY_PEER_BOUND)),
        "the message keeping the peer busy never arrived, or its handler never returned");
    caller.join(patience().toMillis()); // it counts callsReturned down last
    assertEquals(List.of(), thrown, "the calls threw");
    String blocked = inCall.get();
    assertFalse(gaveUp.get(), "the peer was busy for " + BUSY_PEER_BOUND.toSeconds() + " s "
        + "waiting for the caller's calls to return, and they had not: "
        + (blocked == null ? "they returned only later" : "the " + blocked
            + " blocked the caller while the peer was busy"));
    assertEquals(List.of(), List.copyOf(slowCalls), "calls that blocked the caller while the "
        + "peer was busy (each may take " + CALL_BOUND.toMillis() + " ms)");
    CompletableFuture<byte[]> f = request.get();
    assertNotNull(f, "request returned null");
    assertTrue(awaitCondition(() -> requests.get() == 1 && messages.contains("[2]"), patience()),
        "once the peer was no longer busy, the request (" + requests.get() + " arrived) or the "
            + "message " + messages + " never arrived");
    assertFalse(f.isDone(), "the request completed although the handler has not answered: "
        + (f.isDone() ? outcome(f) : ""));
    slow.complete(new byte[] {7});
    assertTrue(awaitCondition(f::isDone, patience()), "the answer never came");
    assertArrayEquals(new byte[] {7}, f.join());
  }

  /** Runs {@code call}, adding to {@code slow} what it was if it took over CALL_BOUND. */
  private static void timed(String what, AtomicReference<String> inCall,
      ConcurrentLinkedQueue<String> slow, Runnable call) {
    inCall.set(what);
    long start = System.nanoTime();
    call.run();
    long took = System.nanoTime() - start;
    if (took > CALL_BOUND.toNanos()) {
      slow.add(what + " took " + took / 1_000_000 + " ms");
    }
  }

  @Test
  void closeFailsPendingRequestsWithClosed() {
    AtomicInteger arrived = new AtomicInteger();
    Transport b = started("b", (from, p) -> {
      arrived.incrementAndGet();
      return new CompletableFuture<>();
    });
    Transport a = started("a", echo());
    CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {1}, patience());
    // closed while the peer holds the request, not while it may still be on its way
    assertTrue(awaitCondition(() -> arrived.get() == 1, patience()), "the request never arrived");
    a.close();
    assertTrue(awaitCondition(f::isDone, patience()), "close left a request pending");
    assertEquals(TransportException.Kind.CLOSED, kindOf(f));
  }

  @Test
  void requestAfterCloseFailsWithClosed() {
    Transport b = started("b", echo());
    Transport a = started("a", echo());
    a.close();
    CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {1}, patience());
    assertTrue(awaitCondition(f::isDone, patience()));
    assertEquals(TransportException.Kind.CLOSED, kindOf(f));
  }

  @Test
  void unreachablePeerFailsWithoutHanging() {
    Transport a = started("a", echo());
    CompletableFuture<byte[]> f = a.request(unreachableAddress(), new byte[] {1}, shortTimeout());
    assertTrue(awaitCondition(f::isDone, shortTimeout().multipliedBy(3).plus(patience())));
    TransportException.Kind k = kindOf(f);
    assertTrue(k == TransportException.Kind.UNREACHABLE || k == TransportException.Kind.TIMEOUT,
        "expected UNREACHABLE or TIMEOUT, got " + k);
  }

  @Test
  void largePayloadRoundTrips() {
    Transport b = started("b", (from, p) -> CompletableFuture.completedFuture(p));
    Transport a = started("a", echo());
    byte[] big = new byte[256 * 1024];
    for (int i = 0; i < big.length; i++) {
      big[i] = (byte) (i * 31);
    }
    CompletableFuture<byte[]> f = a.request(b.localAddress(), big, patience());
    assertTrue(awaitCondition(f::isDone, patience()));
    assertArrayEquals(big, f.join());
  }

  @Test
  void aHandlerThatThrowsOrReturnsNullFailsOnlyThatRequest() {
    AtomicInteger calls = new AtomicInteger();
    Transport b = started("b", new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        calls.incrementAndGet();
        if (payload[0] == 4) {
          throw TransportContractTest.<RuntimeException>undeclared(
              new java.io.IOException("a handler that throws a checked exception"));
        }
        throw new IllegalStateException("a handler that throws");
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        calls.incrementAndGet();
        return switch (payload[0]) {
          case 0 -> throw new IllegalStateException("a handler that throws");
          case 1 -> null;
          case 2 -> CompletableFuture.completedFuture(null);
          // a checked exception thrown undeclared (as code in other JVM languages may)
          case 4 -> throw TransportContractTest.<RuntimeException>undeclared(
              new java.io.IOException("a handler that throws a checked exception"));
          default -> CompletableFuture.completedFuture(payload);
        };
      }
    });
    Transport a = started("a", echo());
    a.send(b.localAddress(), new byte[] {4});
    a.send(b.localAddress(), new byte[] {0});
    a.send(b.localAddress(), new byte[] {0});
    assertTrue(awaitCondition(() -> calls.get() == 3, patience()),
        "a message after one whose handler threw was not delivered");
    for (byte kind : new byte[] {0, 1, 2, 4}) {
      CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {kind}, patience());
      assertTrue(awaitCondition(f::isDone, patience()), "no answer");
      assertNotNull(kindOf(f), "handler case " + kind + " was answered");
    }
    CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {3}, patience());
    assertTrue(awaitCondition(f::isDone, patience()), "no answer after failed handlers");
    assertArrayEquals(new byte[] {3}, f.join());
  }

  @Test
  void aTimeoutThatIsNotPositiveFailsTimeoutAndOneBeyondAnyClockIsHonoured() {
    Transport b = started("b", (from, p) -> CompletableFuture.completedFuture(p));
    Transport a = started("a", echo());
    for (Duration d : List.of(Duration.ZERO, Duration.ofNanos(-1))) {
      CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {1}, d);
      assertTrue(awaitCondition(f::isDone, patience()), "no completion for a timeout of " + d);
      assertEquals(TransportException.Kind.TIMEOUT, kindOf(f), "timeout " + d);
    }
    CompletableFuture<byte[]> f =
        a.request(b.localAddress(), new byte[] {2}, java.time.temporal.ChronoUnit.FOREVER.getDuration());
    assertTrue(awaitCondition(f::isDone, patience()), "no answer with the longest timeout");
    assertArrayEquals(new byte[] {2}, f.join());
  }

  @Test
  void theHandlerIsGivenTheSendersOwnAddress() {
    // the node answers to `from` (gossip, streamed output) and gossip adopts it as the peer's
    // address: an address the sender cannot be reached at would cut the peer off
    ConcurrentLinkedQueue<PeerAddress> seen = new ConcurrentLinkedQueue<>();
    Transport b = started("b", new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        seen.add(from);
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        seen.add(from);
        return CompletableFuture.completedFuture(payload);
      }
    });
    Transport a = started("a", echo());
    a.send(b.localAddress(), new byte[] {1});
    CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {2}, patience());
    assertTrue(awaitCondition(() -> seen.size() == 2 && f.isDone(), patience()),
        "the message or the request did not arrive");
    assertEquals("[2]", outcome(f), "the answer");
    for (PeerAddress from : seen) {
      assertEquals(a.localAddress(), from, "the handler was not given the sender's address");
    }
  }

  @Test
  void aHandlersProtocolFailureReachesTheRequesterWithItsMessage() {
    // the node refuses a request it cannot serve with a PROTOCOL failure whose message says why
    // (another model id, an unknown FORWARD version); the requester reads it there
    String why = "MODEL_MISMATCH: node b serves model id 'm-1', the request is for 'm-2'";
    String message = protocolFailureOfAHandlerSaying(why);
    assertTrue(message.contains(why), "the handler's message did not reach the requester: "
        + message);
  }

  /**
   * Starts a peer whose handler fails every request {@code PROTOCOL} with {@code why}, requests
   * from another, checks that the request fails {@code PROTOCOL}, and gives its message.
   */
  private String protocolFailureOfAHandlerSaying(String why) {
    Transport b = started("b", (from, p) -> CompletableFuture.failedFuture(
        new TransportException(TransportException.Kind.PROTOCOL, why)));
    Transport a = started("a", echo());
    CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {1}, patience());
    assertTrue(awaitCondition(f::isDone, patience()), "no answer");
    TransportException e = assertInstanceOf(TransportException.class,
        org.junit.jupiter.api.Assertions.assertThrows(CompletionException.class, f::join)
            .getCause(), "failures must be TransportException");
    assertEquals(TransportException.Kind.PROTOCOL, e.kind(), "the handler's PROTOCOL failure");
    return String.valueOf(e.getMessage());
  }

  /**
   * Starts a transport whose handler answers no request: it adds each request's answer future
   * to {@code held}, for the test to complete.
   */
  private Transport startedHolding(String nodeId, List<CompletableFuture<byte[]>> held) {
    return started(nodeId, (from, p) -> {
      CompletableFuture<byte[]> h = new CompletableFuture<>();
      held.add(h);
      return h;
    });
  }

  /**
   * The handler's {@code PROTOCOL} message reaches the requester whole for any message the
   * contract covers: 100 characters, every printable ASCII one among them (quotes, a backslash,
   * a percent sign, separators a header or a URL would escape), starting with a space.
   */
  @Test
  void aHandlersProtocolMessageOfAHundredPrintableCharactersArrivesWhole() {
    StringBuilder sb = new StringBuilder(" ");
    for (char c = 0x20; c < 0x7f; c++) {
      sb.append(c);
    }
    while (sb.length() < 100) {
      sb.append('x');
    }
    String why = sb.toString();
    String message = protocolFailureOfAHandlerSaying(why);
    assertTrue(message.contains(why),
        "the handler's message [" + why + "] did not reach the requester whole: [" + message
            + "]");
  }

  @Test
  void aHandlerCanSendAndRequestThroughItsOwnTransport() {
    // the node answers gossip from inside onMessage, and from inside onRequest streams output
    // to the requester and relays the request to another peer
    ConcurrentLinkedQueue<String> gotByA = new ConcurrentLinkedQueue<>();
    Transport a = started("a", new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        gotByA.add(new String(payload, StandardCharsets.US_ASCII));
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(concat("a:".getBytes(StandardCharsets.US_ASCII),
            payload));
      }
    });
    Transport c = started("c", echo());
    PeerAddress toA = a.localAddress();
    PeerAddress toC = c.localAddress();
    java.util.concurrent.atomic.AtomicReference<Transport> self =
        new java.util.concurrent.atomic.AtomicReference<>();
    List<CompletableFuture<byte[]>> askedFromInside =
        new java.util.concurrent.CopyOnWriteArrayList<>();
    Transport b = started("b", new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        self.get().send(toA, "reply".getBytes(StandardCharsets.US_ASCII));
        askedFromInside.add(self.get().request(toA, new byte[] {5}, patience()));
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        self.get().send(toA, "piece".getBytes(StandardCharsets.US_ASCII));
        return self.get().request(toC, payload, patience());
      }
    });
    self.set(b);
    a.send(b.localAddress(), new byte[] {1});
    CompletableFuture<byte[]> relayed = a.request(b.localAddress(), new byte[] {7}, patience());
    assertTrue(awaitCondition(() -> relayed.isDone() && askedFromInside.size() == 1
        && askedFromInside.get(0).isDone() && gotByA.size() == 2, patience()),
        "what the handler sent or asked did not arrive: messages " + gotByA + ", requests "
            + askedFromInside + ", relayed " + relayed);
    assertEquals(java.util.Arrays.toString(new byte[] {'b', ':', 7}), outcome(relayed),
        "the relayed answer");
    assertEquals(java.util.Arrays.toString(new byte[] {'a', ':', 5}),
        outcome(askedFromInside.get(0)), "the answer to the request made inside onMessage");
    assertEquals(Set.of("reply", "piece"), Set.copyOf(gotByA));
  }

  @Test
  void theTransportLeavesThePayloadsItIsGivenUnchanged() {
    // the node sends the same array again and to other peers (gossip snapshot chunks are
    // cached and served to every peer that asks), and never changes one it has passed on
    ConcurrentLinkedQueue<String> got = new ConcurrentLinkedQueue<>();
    Transport.InboundHandler recording = new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        got.add(java.util.Arrays.toString(payload));
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(payload);
      }
    };
    Transport b = started("b", recording);
    Transport c = started("c", recording);
    Transport a = started("a", echo());
    byte[] message = {3, 1, 4, 1, 5, 9, 2, 6};
    byte[] request = {2, 7, 1, 8, 2, 8};
    a.send(b.localAddress(), message);
    assertTrue(awaitCondition(() -> got.size() == 1, patience()), "the message did not arrive");
    a.send(c.localAddress(), message);
    assertTrue(awaitCondition(() -> got.size() == 2, patience()),
        "the message sent again did not arrive");
    List<CompletableFuture<byte[]>> fs = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      CompletableFuture<byte[]> f = a.request(b.localAddress(), request, patience());
      assertTrue(awaitCondition(f::isDone, patience()), "no answer");
      fs.add(f);
    }
    assertArrayEquals(new byte[] {3, 1, 4, 1, 5, 9, 2, 6}, message,
        "the transport changed a message's payload");
    assertArrayEquals(new byte[] {2, 7, 1, 8, 2, 8}, request,
        "the transport changed a request's payload");
    assertEquals(List.of("[3, 1, 4, 1, 5, 9, 2, 6]", "[3, 1, 4, 1, 5, 9, 2, 6]"),
        List.copyOf(got), "what arrived of a message sent twice");
    for (CompletableFuture<byte[]> f : fs) {
      assertEquals("[2, 7, 1, 8, 2, 8]", outcome(f), "the answers to one payload");
    }
  }

  @Test
  void aOneWayMessageAsLargeAsTheNodesGossipArrivesIntact() {
    // gossip messages (digests, deltas, snapshot chunks) are sent one way, up to the node's
    // gossipMessageBytes, which its build lets go up to the transport's maxMessageBytes() and
    // 16 MiB: a transport declaring no limit must carry 16 MiB one way. Checked at 64 KiB (the
    // default) only, one that dropped every larger message passed, and its nodes lost their
    // larger gossip messages without a word
    ConcurrentLinkedQueue<byte[]> got = new ConcurrentLinkedQueue<>();
    Transport b = started("b", new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        got.add(payload);
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(payload);
      }
    });
    Transport a = started("a", echo());
    // a transport that carries less runs nodes whose gossipMessageBytes fits its limit
    byte[] gossip = new byte[Math.min(MAX_GOSSIP_MESSAGE_BYTES, a.maxMessageBytes())];
    for (int i = 0; i < gossip.length; i++) {
      gossip[i] = (byte) (i * 17 + 3);
    }
    a.send(b.localAddress(), gossip.clone());
    assertTrue(awaitCondition(() -> !got.isEmpty(), patience()),
        "a " + gossip.length + "-byte message did not arrive");
    assertArrayEquals(gossip, got.peek());
  }

  /** The largest gossip message a node may send: the largest gossipMessageBytes, 16 MiB. */
  private static final int MAX_GOSSIP_MESSAGE_BYTES = RouterConfig.MAX_GOSSIP_MESSAGE_BYTES;

  /** The largest limit whose request at the limit the kit sends (64 MiB). */
  private static final int MAX_CHECKED_LIMIT_BYTES = 64 << 20;

  @Test
  void aRequestWhoseFutureIsCancelledHoldsNothingMore() {
    // the node cancels the future of a forward it stopped awaiting (its stream went silent, or
    // the peer is suspected): the transport must let go of it, as of a failed one, or many
    // such requests would use up what it has for the peer
    List<CompletableFuture<byte[]>> held = new java.util.concurrent.CopyOnWriteArrayList<>();
    Transport b = started("b", (from, p) -> {
      if (p[0] == 0) {
        CompletableFuture<byte[]> h = new CompletableFuture<>();
        held.add(h);
        return h;
      }
      return CompletableFuture.completedFuture(p);
    });
    Transport a = started("a", echo());
    try {
      for (int i = 0; i < CANCELLED_REQUESTS; i++) {
        // a timeout beyond the check's end: only the cancel can free what the request holds
        CompletableFuture<byte[]> f =
            a.request(b.localAddress(), new byte[] {0}, patience().multipliedBy(10));
        f.cancel(false);
      }
      // a request failing at once may meet the peer still refusing the cancelled ones (as busy):
      // it is asked again until one is answered
      java.util.concurrent.atomic.AtomicReference<CompletableFuture<byte[]>> g =
          new java.util.concurrent.atomic.AtomicReference<>(
              a.request(b.localAddress(), new byte[] {1}, patience()));
      boolean answered = awaitCondition(() -> {
        CompletableFuture<byte[]> last = g.get();
        if (!last.isDone()) {
          return false;
        }
        if (!last.isCompletedExceptionally()) {
          return true;
        }
        g.set(a.request(b.localAddress(), new byte[] {1}, patience()));
        return false;
      }, patience());
      assertTrue(answered, "no request was answered after " + CANCELLED_REQUESTS
          + " cancelled ones; the last: " + (g.get().isDone() ? outcome(g.get()) : "pending"));
      assertEquals("[1]", outcome(g.get()),
          "a request after " + CANCELLED_REQUESTS + " cancelled ones");
    } finally {
      held.forEach(h -> h.complete(new byte[] {0}));
    }
  }

  /** How many requests the cancel check cancels: more than a transport keeps for one peer. */
  private static final int CANCELLED_REQUESTS = 100;

  @Test
  void closeCalledWhereARequestCompletesReturnsPromptly() {
    // a stopping node closes its transport from whichever thread completes its last request:
    // the transport's own, which close must not wait for
    CompletableFuture<byte[]> held = new CompletableFuture<>();
    AtomicInteger arrived = new AtomicInteger();
    Transport b = started("b", (from, p) -> {
      arrived.incrementAndGet();
      return held;
    });
    Transport a = started("a", echo());
    java.util.concurrent.atomic.AtomicLong closeNanos =
        new java.util.concurrent.atomic.AtomicLong(-1);
    CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {1}, patience());
    f.whenComplete((v, e) -> {
      long t0 = System.nanoTime();
      a.close();
      closeNanos.set(System.nanoTime() - t0);
    });
    assertTrue(awaitCondition(() -> arrived.get() == 1, patience()), "the request never arrived");
    held.complete(new byte[] {2});
    assertTrue(awaitCondition(() -> closeNanos.get() >= 0, patience().plus(PROMPT_CLOSE)),
        "close, called where the answer completed the request, did not return");
    assertEquals("[2]", outcome(f), "the request whose completion closed the transport");
    assertTrue(closeNanos.get() <= PROMPT_CLOSE.toNanos(), "close, called where the answer "
        + "completed the request, took " + closeNanos.get() / 1_000_000 + " ms");
    CompletableFuture<byte[]> after = a.request(b.localAddress(), new byte[] {3}, patience());
    assertTrue(awaitCondition(after::isDone, patience()), "no completion after close");
    assertEquals(TransportException.Kind.CLOSED, kindOf(after), "a request after that close");
  }

  /**
   * {@code close()} returns promptly, within {@link #PROMPT_CLOSE}, while a peer holds one of its
   * requests: it fails the request {@code CLOSED} and lets go of the exchange rather than wait
   * for the answer (a graceful drain would hold a stopping node for as long as its slowest
   * peer).
   */
  @Test
  void closeWithARequestPendingReturnsPromptly() {
    List<CompletableFuture<byte[]>> held = new java.util.concurrent.CopyOnWriteArrayList<>();
    Transport b = startedHolding("b", held);
    Transport a = started("a", echo());
    CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {1}, patience());
    try {
      assertTrue(awaitCondition(() -> !held.isEmpty(), patience()), "the request never arrived");
      long t0 = System.nanoTime();
      a.close();
      long took = System.nanoTime() - t0;
      assertTrue(took <= PROMPT_CLOSE.toNanos(),
          "close, with a request the peer holds, took " + took / 1_000_000 + " ms");
      assertTrue(awaitCondition(f::isDone, patience()), "close left the request pending");
      assertEquals(TransportException.Kind.CLOSED, kindOf(f));
    } finally {
      held.forEach(h -> h.complete(new byte[] {0}));
    }
  }

  /**
   * A send on a closed transport is a message lost, never a throw ({@code send} never throws
   * for delivery problems), and a request on it fails {@code CLOSED}: the callbacks of the
   * requests {@code close()} fails run on the closing thread, and the node sends a failed
   * forward's CANCEL and forwards to the next peer from there.
   */
  @Test
  void callsFromTheCompletionOfARequestCloseFailedAreRefusedQuietly() {
    AtomicInteger delivered = new AtomicInteger();
    AtomicInteger held = new AtomicInteger();
    Transport b = started("b", new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        delivered.incrementAndGet();
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        if (payload[0] == 1) {
          held.incrementAndGet();
          return new CompletableFuture<>(); // held
        }
        delivered.incrementAndGet();
        return CompletableFuture.completedFuture(payload);
      }
    });
    Transport a = started("a", echo());
    PeerAddress to = b.localAddress();
    List<Throwable> thrown = new java.util.concurrent.CopyOnWriteArrayList<>();
    List<CompletableFuture<byte[]>> next = new java.util.concurrent.CopyOnWriteArrayList<>();
    CompletableFuture<byte[]> f = a.request(to, new byte[] {1}, patience());
    f.whenComplete((v, e) -> {
      try {
        a.send(to, new byte[] {2});
        next.add(a.request(to, new byte[] {3}, patience()));
      } catch (RuntimeException | Error t) {
        thrown.add(t);
      }
    });
    assertTrue(awaitCondition(() -> held.get() == 1, patience()), "the request never arrived");
    a.close();
    assertTrue(awaitCondition(f::isDone, patience()), "close left the request pending");
    assertEquals(TransportException.Kind.CLOSED, kindOf(f));
    assertEquals(List.of(), thrown, "a send or a request on the closed transport threw");
    assertEquals(1, next.size(), "the callback did not run");
    assertTrue(awaitCondition(next.get(0)::isDone, patience()),
        "a request on the closed transport never completed");
    assertEquals(TransportException.Kind.CLOSED, kindOf(next.get(0)),
        "a request on the closed transport");
    pass(shortTimeout());
    assertEquals(0, delivered.get(), "a closed transport sent a message or a request");
  }

  @Test
  void callsFromARequestsCompletionWork() {
    // when a forward fails, the node sends the peer a CANCEL and forwards to the next peer
    // from the callback of the failed request's future, on the thread that completed it
    CompletableFuture<byte[]> held = new CompletableFuture<>();
    AtomicInteger arrived = new AtomicInteger();
    Transport b = started("b", (from, p) -> {
      arrived.incrementAndGet();
      return held;
    });
    ConcurrentLinkedQueue<String> gotByC = new ConcurrentLinkedQueue<>();
    Transport c = started("c", new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        gotByC.add(new String(payload, StandardCharsets.US_ASCII));
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(payload);
      }
    });
    Transport a = started("a", echo());
    List<CompletableFuture<byte[]>> next = new java.util.concurrent.CopyOnWriteArrayList<>();
    CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {1}, patience());
    f.whenComplete((v, e) -> {
      a.send(c.localAddress(), "cancel".getBytes(StandardCharsets.US_ASCII));
      next.add(a.request(c.localAddress(), new byte[] {2}, patience()));
    });
    assertTrue(awaitCondition(() -> arrived.get() == 1, patience()), "the request never arrived");
    held.completeExceptionally(new TransportException(TransportException.Kind.PROTOCOL, "no"));
    assertTrue(awaitCondition(() -> next.size() == 1 && next.get(0).isDone()
        && !gotByC.isEmpty(), patience()),
        "what the callback sent or asked did not arrive: messages " + gotByC + ", requests "
            + next);
    assertEquals("[2]", outcome(next.get(0)), "the request made in the callback");
    assertEquals(List.of("cancel"), List.copyOf(gotByC), "the message sent in the callback");
  }

  /** How long a close may take, in real time, on a loaded machine. */
  private static final Duration PROMPT_CLOSE = Duration.ofSeconds(3);

  @Test
  void callsFromManyThreadsAtOnceEachGetTheirOwnAnswer() throws InterruptedException {
    // the node sends and requests from its callers', its engine's, its scheduler's and the
    // transport's own threads at once
    ConcurrentLinkedQueue<String> gotByC = new ConcurrentLinkedQueue<>();
    Transport b = started("b", (from, p) -> CompletableFuture.completedFuture(p));
    Transport c = started("c", new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        gotByC.add(java.util.Arrays.toString(payload));
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(payload);
      }
    });
    Transport a = started("a", echo());
    int threads = 4;
    int each = 5;
    @SuppressWarnings("unchecked")
    CompletableFuture<byte[]>[][] fs = new CompletableFuture[threads][each];
    java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
    List<Thread> callers = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      int caller = t;
      Thread th = new Thread(() -> {
        try {
          go.await();
        } catch (InterruptedException e) {
          return;
        }
        for (int i = 0; i < each; i++) {
          byte[] p = {(byte) caller, (byte) i};
          fs[caller][i] = a.request(b.localAddress(), p, patience());
          a.send(c.localAddress(), p);
        }
      }, "transport-kit-caller-" + t);
      th.setDaemon(true);
      th.start();
      callers.add(th);
    }
    go.countDown();
    for (Thread th : callers) {
      th.join(patience().toMillis());
      assertFalse(th.isAlive(), "a caller's sends and requests did not return");
    }
    assertTrue(awaitCondition(() -> gotByC.size() >= threads * each
        && java.util.Arrays.stream(fs).flatMap(java.util.Arrays::stream)
            .allMatch(CompletableFuture::isDone), patience()),
        "not every request was answered, or not every message arrived (" + gotByC.size() + ")");
    Set<String> sent = new java.util.HashSet<>();
    for (int t = 0; t < threads; t++) {
      for (int i = 0; i < each; i++) {
        String p = java.util.Arrays.toString(new byte[] {(byte) t, (byte) i});
        sent.add(p);
        assertEquals(p, outcome(fs[t][i]), "the answer to request " + i + " of caller " + t);
      }
    }
    assertEquals(sent, Set.copyOf(gotByC), "the messages that arrived");
  }

  @Test
  void anAnswerAfterTheRequesterClosedDoesNotOverrideClosed() {
    List<CompletableFuture<byte[]>> held = new java.util.concurrent.CopyOnWriteArrayList<>();
    Transport b = startedHolding("b", held);
    Transport a = started("a", echo());
    CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {1}, patience());
    assertTrue(awaitCondition(() -> !held.isEmpty(), patience()), "the request never arrived");
    a.close();
    assertTrue(awaitCondition(f::isDone, patience()), "close left the request pending");
    assertEquals(TransportException.Kind.CLOSED, kindOf(f), "the request close() failed");
    held.get(0).complete(new byte[] {7});
    pass(shortTimeout());
    assertEquals(TransportException.Kind.CLOSED, kindOf(f), "a late answer changed the outcome");
  }

  /** Throws {@code t}, whatever it is, from a method that declares nothing. */
  @SuppressWarnings("unchecked")
  private static <T extends Throwable> T undeclared(Throwable t) throws T {
    throw (T) t;
  }
}
