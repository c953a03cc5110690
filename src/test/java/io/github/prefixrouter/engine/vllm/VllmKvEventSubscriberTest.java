package io.github.prefixrouter.engine.vllm;

import static io.github.prefixrouter.engine.vllm.FakeVllmPublisher.TOPIC;
import static io.github.prefixrouter.engine.vllm.FakeVllmPublisher.payload;
import static io.github.prefixrouter.engine.vllm.FakeVllmPublisher.seq;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.common.util.concurrent.Uninterruptibles;
import io.github.prefixrouter.engine.vllm.RecordingSink.Call;
import io.github.prefixrouter.internal.zmq.HostilePeer;
import io.github.prefixrouter.internal.zmq.ZmtpBytes;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.testing.Await;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The subscriber end to end against a JeroMQ stand-in for vLLM's publisher (PUB and replay
 * ROUTER), with a recording sink.
 */
class VllmKvEventSubscriberTest {

  private RecordingSink sink = new RecordingSink(); // a new one for each run of a test that retries
  private final ReaderThreads factory = new ReaderThreads();
  private final List<Thread> threads = factory.made;
  private final List<AutoCloseable> toClose = new ArrayList<>();

  @AfterEach
  void closeAll() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    factory.assertAllEnded();
    assertFalse(sink.overlapped(), "the sink is never called from two threads at once");
  }

  private FakeVllmPublisher publisher(int buffer) {
    FakeVllmPublisher p = new FakeVllmPublisher(buffer);
    toClose.add(p);
    return p;
  }

  private VllmKvEventSubscriber.Builder builder(String endpoint) {
    return VllmKvEventSubscriber.builder()
        .endpoint(endpoint)
        .sink(sink)
        .threadFactory(factory)
        .reconnectBackoff(Duration.ofMillis(10), Duration.ofMillis(100));
  }

  private VllmKvEventSubscriber start(VllmKvEventSubscriber.Builder b) {
    VllmKvEventSubscriber s = b.build();
    toClose.add(s);
    s.start();
    return s;
  }

  /**
   * Publishes from 0 on until the subscriber receives a message, then waits for the last one
   * published, so that none is still on its way: a test counting the calls after this point
   * sees only the messages it publishes next. Returns the next number to publish.
   */
  private long joined(FakeVllmPublisher vllm) throws InterruptedException {
    long n = vllm.publishUntil(0, () -> sink.size() > 0);
    Await.until(() -> sink.sawLive(n - 1), "the last message published before joining arrived");
    return n;
  }

  /** The calls after the first {@code skip}. */
  private List<Call> callsAfter(int skip) {
    List<Call> c = sink.calls();
    return c.subList(skip, c.size());
  }

  private static void assertCall(Call c, boolean replayed, long seq) {
    assertEquals(replayed, c.replayed(), "replayed? " + c);
    assertEquals(seq, c.seq(), c.toString());
    assertArrayEquals(payload(seq), c.payload(), c.toString());
  }

  @Test
  void liveMessagesReachTheSinkInOrder() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    VllmKvEventSubscriber s = start(builder(vllm.endpoint()));
    long next = joined(vllm);
    for (int i = 0; i < 50; i++) {
      vllm.publish(next++);
    }
    long last = next - 1;
    Await.until(() -> sink.sawLive(last), "the last message arrived");
    List<Call> calls = sink.calls();
    long first = calls.get(0).seq();
    assertEquals(last - first + 1, calls.size(), calls.toString());
    for (int i = 0; i < calls.size(); i++) {
      assertCall(calls.get(i), false, first + i);
    }
    VllmKvEventSubscriber.Stats st = s.stats();
    assertEquals(1, st.connects());
    assertEquals(calls.size(), st.messages());
    assertEquals(0, st.malformedMessages());
    assertEquals(0, st.replaysRequested());
    assertEquals(threads, List.copyOf(sink.threads()), "only the reader thread calls the sink");
  }

  @Test
  void aGapIsFilledByReplayBeforeTheLiveMessage() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    String replay = vllm.startReplay();
    VllmKvEventSubscriber s = start(builder(vllm.endpoint()).replayEndpoint(replay));
    long n = joined(vllm);
    int before = sink.size();
    vllm.publish(n);
    vllm.lose(n + 1);
    vllm.lose(n + 2);
    vllm.lose(n + 3);
    vllm.publish(n + 4);
    vllm.publish(n + 5);
    Await.until(() -> sink.sawLive(n + 5), "the message after the gap arrived");
    List<Call> after = callsAfter(before);
    assertEquals(6, after.size(), after.toString());
    assertCall(after.get(0), false, n);
    assertCall(after.get(1), true, n + 1);
    assertCall(after.get(2), true, n + 2);
    assertCall(after.get(3), true, n + 3);
    assertCall(after.get(4), false, n + 4);
    assertCall(after.get(5), false, n + 5);
    VllmKvEventSubscriber.Stats st = s.stats();
    assertEquals(1, st.replaysRequested());
    assertEquals(3, st.replayedMessages());
    assertEquals(0, st.replayFailures());
    assertEquals(1, vllm.replayRequests());
    assertEquals(1, st.connects());
  }

  @Test
  void aReplayFromATrimmedBufferStartsLaterAndTheLiveMessageFollows() throws Exception {
    FakeVllmPublisher vllm = publisher(2);
    String replay = vllm.startReplay();
    VllmKvEventSubscriber s = start(builder(vllm.endpoint()).replayEndpoint(replay));
    long n = joined(vllm);
    int before = sink.size();
    for (long i = n; i < n + 4; i++) {
      vllm.lose(i);
    }
    vllm.publish(n + 4); // the buffer now holds n + 3 and n + 4
    Await.until(() -> sink.sawLive(n + 4), "the message after the gap arrived");
    List<Call> after = callsAfter(before);
    assertEquals(2, after.size(), after.toString());
    assertCall(after.get(0), true, n + 3);
    assertCall(after.get(1), false, n + 4);
    assertEquals(1, s.stats().replayedMessages());
  }

  @Test
  void withoutAReplayEndpointAGapGoesToTheSinkAsIs() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    VllmKvEventSubscriber s = start(builder(vllm.endpoint()));
    long n = joined(vllm);
    int before = sink.size();
    vllm.lose(n);
    vllm.lose(n + 1);
    vllm.publish(n + 2);
    Await.until(() -> sink.sawLive(n + 2), "the message after the gap arrived");
    List<Call> after = callsAfter(before);
    assertEquals(1, after.size(), after.toString());
    assertCall(after.get(0), false, n + 2);
    assertEquals(0, s.stats().replaysRequested());
  }

  @Test
  void aReplayServerThatIsDownIsCountedAndTheLiveMessageStillDelivered() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    int deadPort;
    try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      deadPort = ss.getLocalPort();
    }
    VllmKvEventSubscriber s = start(builder(vllm.endpoint())
        .replayEndpoint("tcp://127.0.0.1:" + deadPort)
        .replayTimeout(Duration.ofMillis(500)));
    long n = joined(vllm);
    int before = sink.size();
    vllm.lose(n);
    vllm.publish(n + 1);
    vllm.publish(n + 2);
    Await.until(() -> sink.sawLive(n + 2), "the messages after the gap arrived");
    List<Call> after = callsAfter(before);
    assertEquals(2, after.size(), after.toString());
    assertCall(after.get(0), false, n + 1);
    assertCall(after.get(1), false, n + 2);
    VllmKvEventSubscriber.Stats st = s.stats();
    assertEquals(1, st.replaysRequested());
    assertEquals(1, st.replayFailures());
    assertEquals(0, st.replayedMessages());
    assertEquals(1, st.connects(), "the live connection is kept");
    assertEquals(0, st.disconnects());
  }

  /**
   * A replay endpoint that is down while the live stream keeps losing messages (a subscriber
   * too slow for the publisher): every gap asks for a replay, and each failure used to be
   * logged at warn level, one warning per message. They are logged at the 1st, 2nd, 4th,
   * 8th... failure now, with the count so far, as gaps are.
   */
  @Test
  void replaysFailingOnEveryGapAreLoggedSparingly() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    int deadPort;
    try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      deadPort = ss.getLocalPort();
    }
    java.io.PrintStream err = System.err;
    java.io.ByteArrayOutputStream log = new java.io.ByteArrayOutputStream();
    VllmKvEventSubscriber s;
    System.setErr(new java.io.PrintStream(log, true, StandardCharsets.UTF_8));
    try {
      // the shortest replay backoff: every gap asks for its replay
      s = start(builder(vllm.endpoint()).replayEndpoint("tcp://127.0.0.1:" + deadPort)
          .replayBackoff(Duration.ofNanos(1), Duration.ofNanos(1)));
      long n = joined(vllm);
      for (int i = 0; i < 64; i++) {
        vllm.lose(n + 2 * i);
        vllm.publish(n + 2 * i + 1);
      }
      Await.until(() -> sink.sawLive(n + 127), "the last live message arrived");
      s.close();
    } finally {
      System.setErr(err);
    }
    assertEquals(64, s.stats().replayFailures());
    String text = log.toString(StandardCharsets.UTF_8);
    long warned = text.lines()
        .filter(l -> l.contains("WARN") && l.contains("KV-event replay from")).count();
    assertEquals(7, warned, text.length() > 2_000 ? text.substring(0, 2_000) : text);
  }

  /**
   * A replay endpoint that takes connections and never answers, while the live stream keeps
   * losing messages: every gap asked for a replay, and each held the live stream for the replay
   * timeout, so the subscriber fell ever further behind the publisher (20 gaps: 20 replays and
   * 20 timeouts). After a failed replay, gaps now go to the sink as they are, without a replay,
   * for the replay backoff. Here 30 gaps held for 0.5 s each would hold the stream 15 s: the
   * bound, one timeout and 5 s, leaves room for a stall of the machine.
   */
  @Test
  void aReplayEndpointThatNeverAnswersDoesNotHoldTheLiveStreamOnEveryGap() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    try (ServerSocket silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      // never accepted: the kernel completes the TCP handshake and nothing is ever answered
      Duration timeout = Duration.ofMillis(500);
      int gaps = 30;
      VllmKvEventSubscriber s = start(builder(vllm.endpoint())
          .replayEndpoint("tcp://127.0.0.1:" + silent.getLocalPort())
          .replayTimeout(timeout)
          .replayBackoff(Duration.ofSeconds(30), Duration.ofMinutes(1)));
      long n = joined(vllm);
      int before = sink.size();
      long started = System.nanoTime();
      for (int i = 0; i < gaps; i++) {
        vllm.lose(n + 2 * i);
        vllm.publish(n + 2 * i + 1);
      }
      Await.until(() -> sink.sawLive(n + 2 * gaps - 1), "the last live message arrived");
      long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
      List<Call> after = callsAfter(before);
      assertEquals(gaps, after.size(), after.toString());
      for (int i = 0; i < gaps; i++) {
        assertCall(after.get(i), false, n + 2 * i + 1);
      }
      VllmKvEventSubscriber.Stats st = s.stats();
      assertEquals(1, st.replaysRequested(), st.toString());
      assertEquals(1, st.replayFailures(), st.toString());
      assertEquals(gaps - 1, st.replaysSkipped(), st.toString());
      assertTrue(tookMillis < timeout.toMillis() + 5_000, "the live stream waited " + tookMillis
          + " ms for " + gaps + " gaps (a timeout of " + timeout.toMillis() + " ms on each: "
          + gaps * timeout.toMillis() + " ms)");
      assertEquals(1, st.connects(), "the live connection is kept");
    }
  }

  /**
   * The replay backoff doubles with each failed replay and restarts at its minimum after a
   * replay that succeeds: a gap within it gets no replay, one after it does. A gap after the
   * backoff is after it whatever the load (the test sleeps past it); one checked as within it
   * is, only if the time from the start of the failing gap to the end of that one was shorter
   * than the backoff. A stall of the machine that made it longer leaves the run saying nothing,
   * and it is made again with a new publisher and subscriber, up to 4 times.
   */
  @Test
  void theReplayBackoffDoublesOnFailuresAndRestartsAfterASuccess() throws Exception {
    int runs = 4;
    for (int run = 1; run <= runs; run++) {
      sink = new RecordingSink();
      if (replayBackoffRun()) {
        return;
      }
    }
    throw new AssertionError("a stall of the machine in each of " + runs + " runs left no gap "
        + "surely within the backoff");
  }

  /**
   * One run of {@link #theReplayBackoffDoublesOnFailuresAndRestartsAfterASuccess}: false if a
   * stall left a gap that should be within the backoff possibly after it.
   */
  private boolean replayBackoffRun() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    java.util.concurrent.atomic.AtomicBoolean answering =
        new java.util.concurrent.atomic.AtomicBoolean();
    // a failed replay: the connection is closed at once, so failing costs no timeout, and the
    // answered replay has the whole timeout (5 s) for each step
    HostilePeer replay = new HostilePeer((sock, in, out) -> {
      if (!answering.get()) {
        return; // closed
      }
      HostilePeer.readClientHandshake(in);
      out.write(ZmtpBytes.of().greeting().ready("ROUTER").bytes());
      out.flush();
      java.io.DataInputStream d = new java.io.DataInputStream(in);
      HostilePeer.readFrame(d); // the request: empty delimiter and the first sequence number
      HostilePeer.readFrame(d);
      out.write(ZmtpBytes.of().message(new byte[0], seq(-1), new byte[0]).bytes()); // the end
      out.flush();
      HostilePeer.awaitClientClose(in);
    });
    toClose.add(replay);
    // a backoff b starts when a replay fails, before the live message of its gap reaches the
    // sink: a sleep of b + 50 ms after that is past it whatever the load
    long b = 700;
    VllmKvEventSubscriber s = start(builder(vllm.endpoint())
        .replayEndpoint("tcp://127.0.0.1:" + replay.port())
        .replayTimeout(Duration.ofSeconds(5))
        .replayBackoff(Duration.ofMillis(b), Duration.ofMillis(10 * b)));
    long n = joined(vllm);
    long failing = System.nanoTime();
    n = gap(vllm, n); // fails: no replay for b
    n = gap(vllm, n);
    if (millisSince(failing) >= b) {
      return false;
    }
    assertEquals(List.of(1L, 1L, 1L), counts(s), "failed, then skipped");
    Thread.sleep(b + 50);
    failing = System.nanoTime();
    n = gap(vllm, n); // fails again: no replay for 2 b
    assertEquals(List.of(2L, 2L, 1L), counts(s), "asked for again after b");
    Thread.sleep(b + 50);
    n = gap(vllm, n);
    if (millisSince(failing) >= 2 * b) {
      return false;
    }
    assertEquals(List.of(2L, 2L, 2L), counts(s), "skipped: the backoff doubled");
    answering.set(true);
    Thread.sleep(b);
    n = gap(vllm, n); // succeeds: the backoff restarts
    assertEquals(List.of(3L, 2L, 2L), counts(s), "asked for again after 2 b, and answered");
    answering.set(false);
    failing = System.nanoTime();
    n = gap(vllm, n); // fails: no replay for b (not 4 b)
    n = gap(vllm, n);
    if (millisSince(failing) >= b) {
      return false;
    }
    assertEquals(List.of(4L, 3L, 3L), counts(s), "asked for at once after a success");
    Thread.sleep(b + 50);
    n = gap(vllm, n);
    assertEquals(List.of(5L, 4L, 3L), counts(s), "asked for again after b: restarted");
    assertEquals(1, s.stats().connects(), "the live connection is kept");
    return true;
  }

  private static long millisSince(long nanoTime) {
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - nanoTime);
  }

  /**
   * A replay endpoint given as a host name, with a name server that answers slowly (here 1 s,
   * within the 8 x 5 s a replay may take): every replay looked the host up again, and the
   * lookup cannot be cut short, so every gap held the live stream for the whole lookup (7 gaps:
   * 7 lookups, over 7 s). The address is now looked up once per live connection and kept until
   * a replay cannot connect to it: the 6 gaps after the first make no lookup, where a lookup on
   * each would hold them 6 s in all; the bound, half of that, leaves room for a stall.
   */
  @Test
  void aSlowLookupOfTheReplayHostIsMadeOncePerConnectionNotOnEveryGap() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    java.util.concurrent.atomic.AtomicInteger lookups =
        new java.util.concurrent.atomic.AtomicInteger();
    long lookupMillis = 1_000;
    int gaps = 7;
    VllmKvEventSubscriber s = start(slowReplayLookup(vllm, lookupMillis, 5_000, lookups));
    long n = joined(vllm);
    n = gap(vllm, n); // the first replay looks the host up
    long started = System.nanoTime();
    for (int i = 1; i < gaps; i++) {
      n = gap(vllm, n);
    }
    long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
    VllmKvEventSubscriber.Stats st = s.stats();
    assertEquals(List.of((long) gaps, 0L, 0L), counts(s), st.toString());
    assertEquals(gaps, st.replayedMessages(), st.toString());
    assertEquals(1, lookups.get(), "lookups of the replay host for " + gaps + " gaps");
    long each = (gaps - 1) * lookupMillis;
    assertTrue(tookMillis < each / 2, "the live stream waited " + tookMillis + " ms for the "
        + (gaps - 1) + " gaps after the first (a lookup on each: " + each + " ms)");
    assertEquals(1, st.connects(), "the live connection is kept");
  }

  /**
   * A lookup of the replay host slower than a replay may take in all fails the replay once it
   * returns. Each replay after the backoff looked the host up again, failed the same way and
   * held the live stream for the whole lookup, beyond the replay's limit, once per backoff for
   * as long as the name server stayed slow. The address found is kept now: the next replay
   * connects at once and succeeds. The replay's limit here is one timeout of 5 s (not 8), so
   * that the lookup passes it in 5.5 s while each step of the second replay has 5 s, room for
   * a stall of the machine; a second lookup would hold the live stream 5.5 s, where the bound
   * is the lookup's time.
   */
  @Test
  void aLookupOfTheReplayHostBeyondTheReplayLimitIsNotMadeAgainOnEachReplay() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    java.util.concurrent.atomic.AtomicInteger lookups =
        new java.util.concurrent.atomic.AtomicInteger();
    long timeoutMillis = 5_000;
    long lookupMillis = timeoutMillis + 500;
    VllmKvEventSubscriber s = start(slowReplayLookup(vllm, lookupMillis, timeoutMillis, lookups)
        .replaySteps(1)
        .replayBackoff(Duration.ofMillis(200), Duration.ofMillis(200)));
    long n = joined(vllm);
    n = gap(vllm, n);
    assertEquals(List.of(1L, 1L, 0L), counts(s), "the first replay took too long");
    Thread.sleep(400); // past the replay backoff, which started before the gap reached the sink
    long started = System.nanoTime();
    n = gap(vllm, n);
    long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
    VllmKvEventSubscriber.Stats st = s.stats();
    assertEquals(List.of(2L, 1L, 0L), counts(s), st.toString());
    assertEquals(1, st.replayedMessages(), st.toString());
    assertEquals(1, lookups.get(), "lookups of the replay host for 2 replays");
    assertTrue(tookMillis < lookupMillis, "the live stream waited " + tookMillis
        + " ms for a replay (a lookup takes " + lookupMillis + " ms)");
    assertEquals(1, st.connects(), "the live connection is kept");
  }

  /**
   * The replay endpoint's address is kept only while replays can connect to it: after one that
   * cannot (vLLM moved, say), the next replay looks the host up again.
   */
  @Test
  void aReplayThatCannotConnectLooksTheReplayHostUpAgain() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    String replay = vllm.startReplay();
    String replayPort = replay.substring(replay.lastIndexOf(':') + 1);
    java.util.concurrent.atomic.AtomicInteger lookups =
        new java.util.concurrent.atomic.AtomicInteger();
    VllmKvEventSubscriber s = start(builder(vllm.endpoint())
        .replayEndpoint("tcp://replay.example:" + replayPort)
        // the failed replay is refused at once (nothing listens on 127.0.0.2): the timeout only
        // bounds the replays that must succeed, which a stall of the machine must not fail
        .replayTimeout(Duration.ofSeconds(5))
        .replayBackoff(Duration.ofMillis(200), Duration.ofMillis(200))
        .resolver(host -> {
          if (host.equals("replay.example")) {
            // first where nothing listens (the replay endpoint is bound to 127.0.0.1 only)
            return InetAddress.getByName(
                lookups.incrementAndGet() == 1 ? "127.0.0.2" : "127.0.0.1");
          }
          return InetAddress.getByName(host);
        }));
    long n = joined(vllm);
    n = gap(vllm, n);
    assertEquals(List.of(1L, 1L, 0L), counts(s), "the first address refused the replay");
    Thread.sleep(400); // past the replay backoff
    n = gap(vllm, n);
    n = gap(vllm, n);
    VllmKvEventSubscriber.Stats st = s.stats();
    assertEquals(List.of(3L, 1L, 0L), counts(s), st.toString());
    assertEquals(2, st.replayedMessages(), st.toString());
    assertEquals(2, lookups.get(), "looked up again after the failed connect, then kept");
    assertEquals(1, st.connects(), "the live connection is kept");
  }

  /**
   * A subscriber replaying from {@code vllm} through the host name {@code replay.example},
   * whose lookup takes {@code millis} (counted in {@code lookups}); replay timeout
   * {@code timeoutMillis}.
   */
  private VllmKvEventSubscriber.Builder slowReplayLookup(FakeVllmPublisher vllm, long millis,
      long timeoutMillis, java.util.concurrent.atomic.AtomicInteger lookups) throws Exception {
    String replay = vllm.startReplay();
    String replayPort = replay.substring(replay.lastIndexOf(':') + 1);
    return builder(vllm.endpoint())
        .replayEndpoint("tcp://replay.example:" + replayPort)
        .replayTimeout(Duration.ofMillis(timeoutMillis))
        .resolver(host -> {
          if (host.equals("replay.example")) {
            lookups.incrementAndGet();
            Uninterruptibles.sleepUninterruptibly(millis, TimeUnit.MILLISECONDS);
            return InetAddress.getLoopbackAddress(); // where the replay endpoint is
          }
          return InetAddress.getByName(host);
        });
  }

  /**
   * Loses message {@code n}, publishes {@code n + 1} and waits for it to reach the sink;
   * returns the next number to publish.
   */
  private long gap(FakeVllmPublisher vllm, long n) throws InterruptedException {
    vllm.lose(n);
    vllm.publish(n + 1);
    Await.until(() -> sink.sawLive(n + 1), "the live message after the gap");
    return n + 2;
  }

  /** Replays requested, replays failed, replays skipped. */
  private static List<Long> counts(VllmKvEventSubscriber s) {
    VllmKvEventSubscriber.Stats st = s.stats();
    return List.of(st.replaysRequested(), st.replayFailures(), st.replaysSkipped());
  }

  /**
   * A replay endpoint that answers, but slowly: one message every 100 ms, each well within
   * {@code replayTimeout}, with a million messages to go before the live one. The live stream
   * waits during a replay, so it waited for the whole million (over a day); a replay now ends
   * after 8 × {@code replayTimeout} in all, counted as failed, and the live message follows.
   */
  @Test
  void aReplayThatTricklesEndsAfterItsOverallLimit() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    try (HostilePeer slow = new HostilePeer((sock, in, out) -> {
      HostilePeer.readClientHandshake(in);
      out.write(ZmtpBytes.of().greeting().ready("ROUTER").bytes());
      out.flush();
      java.io.DataInputStream d = new java.io.DataInputStream(in);
      HostilePeer.readFrame(d); // the request: empty delimiter and the first sequence number
      long from = java.nio.ByteBuffer.wrap(HostilePeer.readFrame(d)).getLong();
      for (long k = from; ; k++) {
        out.write(ZmtpBytes.of().message(new byte[0], seq(k), payload(k)).bytes());
        out.flush();
        Thread.sleep(100);
      }
    })) {
      VllmKvEventSubscriber s = start(builder(vllm.endpoint())
          .replayEndpoint("tcp://127.0.0.1:" + slow.port())
          .replayTimeout(Duration.ofMillis(300)));
      long n = joined(vllm);
      vllm.publish(n + 1_000_000); // a million lost
      Await.until(() -> sink.sawLive(n + 1_000_000), "the live message after the replay");
      VllmKvEventSubscriber.Stats st = s.stats();
      assertEquals(1, st.replaysRequested());
      assertEquals(1, st.replayFailures());
      assertTrue(st.replayedMessages() >= 1 && st.replayedMessages() < 100,
          "replayed " + st.replayedMessages());
      assertEquals(1, st.connects(), "the live connection is kept");
    }
  }

  /**
   * A replay endpoint that sends no message but a command every 100 ms, each well within
   * {@code replayTimeout}. Commands are skipped, and each restarted the wait for the next
   * message, so the replay never ended and the live stream waited for ever; the overall limit
   * now holds whatever the endpoint sends.
   */
  @Test
  void aReplayEndpointSendingOnlyCommandsEndsAfterTheOverallLimit() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    try (HostilePeer chatty = new HostilePeer((sock, in, out) -> {
      HostilePeer.readClientHandshake(in);
      out.write(ZmtpBytes.of().greeting().ready("ROUTER").bytes());
      out.flush();
      while (true) {
        out.write(ZmtpBytes.of().raw((byte) 0x04, (byte) 5).raw(ZmtpBytes.ascii("\u0004PONG"))
            .bytes()); // an unasked PONG command, which the client skips
        out.flush();
        Thread.sleep(100);
      }
    })) {
      VllmKvEventSubscriber s = start(builder(vllm.endpoint())
          .replayEndpoint("tcp://127.0.0.1:" + chatty.port())
          .replayTimeout(Duration.ofMillis(300)));
      long n = joined(vllm);
      vllm.publish(n + 10); // ten lost
      Await.until(() -> sink.sawLive(n + 10), "the live message after the replay");
      VllmKvEventSubscriber.Stats st = s.stats();
      assertEquals(1, st.replaysRequested());
      assertEquals(1, st.replayFailures());
      assertEquals(0, st.replayedMessages());
      assertEquals(1, st.connects(), "the live connection is kept");
    }
  }

  @Test
  void aRestartedPublisherIsReconnectedAndTheStreamGoesOn() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    VllmKvEventSubscriber s = start(builder(vllm.endpoint()));
    long n = joined(vllm);
    vllm.restartPublisher();
    Await.until(() -> s.stats().disconnects() == 1, "the broken connection was counted");
    int before = sink.size();
    long m = vllm.publishUntil(n, () -> sink.size() > before);
    vllm.publish(m);
    Await.until(() -> sink.sawLive(m), "messages arrive over the new connection");
    VllmKvEventSubscriber.Stats st = s.stats();
    assertEquals(2, st.connects());
    assertEquals(1, st.disconnects());
    // the new connection starts the stream over (the publisher may have restarted with an
    // empty cache): one reset, after every message of the first connection and before every
    // message of the second, which then follow one another
    List<Call> all = sink.allCalls();
    assertEquals(1, sink.resets(), all.toString());
    int r = all.indexOf(all.stream().filter(c -> c.seq() == RecordingSink.RESET).findFirst()
        .orElseThrow());
    for (int i = 0; i < r; i++) {
      assertTrue(all.get(i).seq() < n, all.toString());
    }
    List<Call> after = all.subList(r + 1, all.size());
    assertFalse(after.isEmpty(), all.toString());
    for (int i = 1; i < after.size(); i++) {
      assertEquals(after.get(i - 1).seq() + 1, after.get(i).seq(), all.toString());
    }
  }

  @Test
  void aBrokenConnectionClearsTheMirrorAtOnceNotWhenItIsMadeAgain() throws Exception {
    // the publisher sends one message and goes away; its port then refuses every handshake.
    // Meanwhile vLLM may evict what the mirror holds, and those removals are lost: the mirror
    // must not go on claiming the blocks until some later connection succeeds
    java.util.concurrent.atomic.AtomicInteger connections =
        new java.util.concurrent.atomic.AtomicInteger();
    byte[] oneMessage = ZmtpBytes.of().greeting().ready("PUB")
        .message(new byte[0], seq(0), payload(0)).bytes();
    try (HostilePeer peer = new HostilePeer((sock, in, out) -> {
      if (connections.incrementAndGet() > 1) {
        return; // closed before its greeting: the handshake fails
      }
      HostilePeer.readClientHandshake(in);
      out.write(oneMessage);
      out.flush();
    })) {
      VllmKvEventSubscriber s = start(builder("tcp://127.0.0.1:" + peer.port()));
      Await.until(() -> s.stats().connectFailures() >= 2, "two failed reconnects");
      assertEquals(1, s.stats().connects());
      assertEquals(1, s.stats().disconnects());
      assertEquals(List.of("live 0", "reset"),
          sink.allCalls().stream().map(Call::toString).toList());
    }
  }

  @Test
  void aPublisherDroppingEveryConnectionAfterItsHandshakeIsLoggedSparingly() throws Exception {
    // a flapping publisher (or a proxy in front of it) accepts, completes the handshake and
    // drops the connection: the backoff restarts at its minimum after every handshake, so each
    // connection and its loss used to be logged, at info and warn level, ten times a second
    java.io.PrintStream err = System.err;
    java.io.ByteArrayOutputStream log = new java.io.ByteArrayOutputStream();
    byte[] handshake = ZmtpBytes.of().greeting().ready("PUB").bytes();
    VllmKvEventSubscriber s;
    try (HostilePeer peer = new HostilePeer((sock, in, out) -> {
      HostilePeer.readClientHandshake(in);
      out.write(handshake);
      out.flush();
      HostilePeer.readFrame(new java.io.DataInputStream(in)); // the subscription
    })) {
      System.setErr(new java.io.PrintStream(log, true, StandardCharsets.UTF_8));
      try {
        s = start(builder("tcp://127.0.0.1:" + peer.port())
            .reconnectBackoff(Duration.ofMillis(1), Duration.ofMillis(2)));
        Await.until(() -> s.stats().disconnects() >= 64, "64 dropped connections");
        s.close();
      } finally {
        System.setErr(err);
      }
    }
    long disconnects = s.stats().disconnects();
    long connects = s.stats().connects();
    String text = log.toString(StandardCharsets.UTF_8);
    long lost = text.lines().filter(l -> l.contains("WARN") && l.contains(" lost (")).count();
    long connected = text.lines()
        .filter(l -> l.contains("INFO") && l.contains("connected to vLLM's")).count();
    // the 1st, 2nd, 4th, ... 64th (and 128th) loss in a row; the first connection, and each
    // one after a loss that was logged
    assertEquals(64 - Long.numberOfLeadingZeros(disconnects), lost, disconnects
        + " disconnects: " + (text.length() > 2_000 ? text.substring(0, 2_000) : text));
    assertEquals(1 + 64 - Long.numberOfLeadingZeros(connects - 1), connected,
        connects + " connects: " + (text.length() > 2_000 ? text.substring(0, 2_000) : text));
  }

  /**
   * A jitter source that records each backoff the reader draws a wait for and waits the whole
   * of it: the reader asks for a value below {@code backoff - backoff / 2 + 1}.
   */
  private static final class BackoffRecorder implements java.util.random.RandomGenerator {
    final List<Long> millis = new java.util.concurrent.CopyOnWriteArrayList<>();

    @Override
    public long nextLong() {
      throw new AssertionError("the reader draws bounded values only");
    }

    @Override
    public long nextLong(long bound) {
      millis.add(TimeUnit.NANOSECONDS.toMillis(2 * (bound - 1)));
      return bound - 1;
    }

    List<Long> first(int n) {
      return List.copyOf(millis.subList(0, n));
    }
  }

  /**
   * A publisher that completes each connection's handshake, reads its subscription, sends what
   * {@code afterSubscription} gives for that connection, and waits for the subscriber to close.
   */
  private static HostilePeer publisherSending(
      java.util.function.Supplier<byte[]> afterSubscription) throws java.io.IOException {
    byte[] handshake = ZmtpBytes.of().greeting().ready("PUB").bytes();
    return new HostilePeer((sock, in, out) -> {
      HostilePeer.readClientHandshake(in);
      out.write(handshake);
      out.flush();
      HostilePeer.readFrame(new java.io.DataInputStream(in)); // the subscription
      out.write(afterSubscription.get());
      out.flush();
      HostilePeer.awaitClientClose(in);
    });
  }

  /**
   * A publisher (or a proxy in front of it) whose first message after the handshake breaks a
   * limit on every connection is refused on each, before any message is taken: the backoff
   * restarted at its minimum after every handshake, so it was reconnected ten times a second
   * for ever (at the default 100 ms), the mirror cleared and a loss logged on each. It now
   * doubles up to its maximum, as for a publisher that refuses the connection.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"too many frames", "too large", "reserved flags"})
  void aPublisherWhoseFirstMessageBreaksALimitIsReconnectedEverMoreSlowly(String how)
      throws Exception {
    byte[] bad = switch (how) {
      case "too many frames" -> ZmtpBytes.of()
          .message(new byte[0], seq(0), payload(0), new byte[1]).bytes();
      case "too large" -> ZmtpBytes.of().message(new byte[0], seq(0), new byte[2048]).bytes();
      default -> ZmtpBytes.of().raw((byte) 0x80, (byte) 0).bytes();
    };
    BackoffRecorder backoffs = new BackoffRecorder();
    try (HostilePeer peer = publisherSending(() -> bad)) {
      VllmKvEventSubscriber s = start(builder("tcp://127.0.0.1:" + peer.port())
          .maxFramesPerMessage(3).maxMessageBytes(1024)
          .reconnectBackoff(Duration.ofMillis(2), Duration.ofMillis(32)).jitter(backoffs));
      Await.until(() -> backoffs.millis.size() >= 7, "seven refused connections");
      assertEquals(List.of(2L, 4L, 8L, 16L, 32L, 32L, 32L), backoffs.first(7),
          "the waits after connections ending in a protocol error, in ms");
      s.close();
      VllmKvEventSubscriber.Stats st = s.stats();
      assertEquals(0, st.messages());
      assertEquals(st.connects(), st.disconnects());
      assertEquals(0, st.connectFailures());
    }
    assertEquals(0, sink.size());
  }

  /**
   * A connection that delivered a message before it broke a limit shows a working publisher:
   * the backoff starts over at its minimum, however long it had grown before.
   */
  @Test
  void aConnectionThatDeliveredAMessageRestartsTheBackoff() throws Exception {
    byte[] bad = ZmtpBytes.of().raw((byte) 0x80, (byte) 0).bytes();
    byte[] goodThenBad = ZmtpBytes.of().message(new byte[0], seq(0), payload(0))
        .raw((byte) 0x80, (byte) 0).bytes();
    java.util.concurrent.atomic.AtomicInteger connections =
        new java.util.concurrent.atomic.AtomicInteger();
    BackoffRecorder backoffs = new BackoffRecorder();
    // the 4th connection delivers a message before its bad frame, the others do not
    try (HostilePeer peer =
        publisherSending(() -> connections.incrementAndGet() == 4 ? goodThenBad : bad)) {
      VllmKvEventSubscriber s = start(builder("tcp://127.0.0.1:" + peer.port())
          .reconnectBackoff(Duration.ofMillis(2), Duration.ofMillis(64)).jitter(backoffs));
      Await.until(() -> backoffs.millis.size() >= 6, "six lost connections");
      assertEquals(List.of(2L, 4L, 8L, 2L, 4L, 8L), backoffs.first(6),
          "the waits after each connection, in ms (the 4th delivered a message)");
      s.close();
      assertEquals(1, s.stats().messages());
    }
    assertEquals(1, sink.size());
  }

  @Test
  void byDefaultMessagesOfEveryTopicAreTaken() throws Exception {
    // vLLM's and SGLang's publishers send an empty topic unless told otherwise; a subscriber
    // left at its default must take those (it once subscribed to "kv-events" only, and then
    // received nothing from a publisher configured as vLLM documents it)
    FakeVllmPublisher vllm = publisher(100);
    VllmKvEventSubscriber s = start(builder(vllm.endpoint()));
    long n = joined(vllm);
    int before = sink.size();
    vllm.send(new byte[0], seq(n), payload(n));
    vllm.send("kv-events".getBytes(StandardCharsets.US_ASCII), seq(n + 1), payload(n + 1));
    vllm.send("another".getBytes(StandardCharsets.US_ASCII), seq(n + 2), payload(n + 2));
    Await.until(() -> sink.sawLive(n + 2), "the last message arrived");
    List<Call> after = callsAfter(before);
    assertEquals(3, after.size(), after.toString());
    for (int i = 0; i < 3; i++) {
      assertCall(after.get(i), false, n + i);
    }
    assertEquals(0, s.stats().otherTopicMessages(), s.stats().toString());
  }

  @Test
  void malformedMessagesAndOtherTopicsAreCountedAndDropped() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    VllmKvEventSubscriber s = start(builder(vllm.endpoint()).topic(TOPIC));
    long n = joined(vllm);
    int before = sink.size();
    byte[] topic = TOPIC.getBytes(StandardCharsets.US_ASCII);
    vllm.send(topic, new byte[4], payload(n));                  // short sequence number
    vllm.send(topic, seq(n));                                   // two frames
    vllm.send(topic, seq(n), payload(n), new byte[1]);          // four frames
    vllm.send("kv-events-other".getBytes(StandardCharsets.US_ASCII), seq(n), payload(n));
    vllm.publish(n);
    Await.until(() -> sink.sawLive(n), "the good message arrived");
    List<Call> after = callsAfter(before);
    assertEquals(1, after.size(), after.toString());
    VllmKvEventSubscriber.Stats st = s.stats();
    assertEquals(3, st.malformedMessages());
    assertEquals(1, st.otherTopicMessages());
    assertEquals(0, st.disconnects(), "a malformed message does not break the connection");
  }

  /**
   * A live number no message can follow (negative, or 2^63 - 1) is the sink's to drop as
   * malformed, and asks for no replay: 2^63 - 1 above the expected number asked for one, whose
   * messages the receiver then cleared with it; a negative number was dropped here, without
   * clearing the mirror its events were missing from.
   */
  @Test
  void aNumberNoMessageCanFollowGoesToTheSinkWithoutAReplay() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    String replay = vllm.startReplay();
    VllmKvEventSubscriber s = start(builder(vllm.endpoint()).topic(TOPIC).replayEndpoint(replay));
    long n = joined(vllm);
    int before = sink.size();
    byte[] topic = TOPIC.getBytes(StandardCharsets.US_ASCII);
    vllm.send(topic, seq(Long.MAX_VALUE), payload(n));
    vllm.send(topic, seq(-5), payload(n));
    vllm.publish(n);
    Await.until(() -> sink.sawLive(n), "the good message arrived");
    List<Call> after = callsAfter(before);
    assertEquals(List.of(Long.MAX_VALUE, -5L, n), after.stream().map(Call::seq).toList());
    VllmKvEventSubscriber.Stats st = s.stats();
    assertEquals(0, st.replaysRequested());
    assertEquals(0, vllm.replayRequests());
    assertEquals(0, st.malformedMessages());
  }

  /**
   * An exception, or an {@link Error} (the receiver's decoder running out of heap on a large
   * batch), from the sink is counted and the next message read. An Error used to end the reader
   * thread: no message reached the sink after it, nothing reconnected, and the mirror went on
   * claiming what it held.
   */
  @ParameterizedTest(name = "an Error: {0}")
  @ValueSource(booleans = {false, true})
  void aThrowFromTheSinkIsCountedAndTheLoopGoesOn(boolean error) throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    VllmKvEventSubscriber s = start(builder(vllm.endpoint()));
    long n = joined(vllm);
    if (error) {
      sink.failWithErrorOn(seq -> seq == n);
    } else {
      sink.failOn(seq -> seq == n);
    }
    vllm.publish(n);
    vllm.publish(n + 1);
    Await.until(() -> sink.sawLive(n + 1), "the message after the failing one arrived");
    assertEquals(1, s.stats().sinkFailures());
    assertEquals(0, s.stats().disconnects());
    assertTrue(threads.get(0).isAlive());
  }

  /**
   * The same for a checked exception thrown undeclared by the sink (as code in a language
   * without checked exceptions may throw it): it used to be taken for the connection failing,
   * counted as a disconnect, and the subscriber reconnected.
   */
  @Test
  void aCheckedExceptionFromTheSinkIsCountedAndTheLoopGoesOn() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    VllmKvEventSubscriber s = start(builder(vllm.endpoint()));
    long n = vllm.publishUntil(0, () -> sink.size() > 0);
    sink.failWithCheckedOn(seq -> seq == n);
    vllm.publish(n);
    vllm.publish(n + 1);
    Await.until(() -> sink.sawLive(n + 1), "the message after the failing one arrived");
    assertEquals(1, s.stats().sinkFailures());
    assertEquals(0, s.stats().disconnects());
    assertTrue(threads.get(0).isAlive());
  }

  @Test
  void anErrorFromTheSinkOnAReplayedMessageIsCountedAndTheLiveMessageFollows() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    String replay = vllm.startReplay();
    VllmKvEventSubscriber s = start(builder(vllm.endpoint()).replayEndpoint(replay));
    long n = joined(vllm);
    sink.failWithErrorOn(seq -> seq == n);
    vllm.lose(n);
    vllm.lose(n + 1);
    vllm.publish(n + 2);
    vllm.publish(n + 3);
    Await.until(() -> sink.sawLive(n + 3), "the live messages after the replay arrived");
    assertTrue(sink.sawLive(n + 2));
    VllmKvEventSubscriber.Stats st = s.stats();
    assertEquals(1, st.sinkFailures());
    assertEquals(2, st.replayedMessages(), "the replay went on after the failing message");
    assertEquals(0, st.replayFailures());
    assertTrue(threads.get(0).isAlive());
  }

  /**
   * An {@link Error} (the heap running out while a replayed message of up to 16 MiB is read,
   * say; here thrown by the host name lookup) or an unchecked exception in the replay used to
   * escape the reader thread and end it: the live message and everything after it never
   * reached the sink, nothing reconnected, and the mirror went on claiming what it held. It is
   * a failed replay now, and the live message follows.
   */
  @ParameterizedTest(name = "an Error: {0}")
  @ValueSource(booleans = {false, true})
  void anErrorInAReplayIsAFailedReplayAndTheLiveMessageFollows(boolean error) throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    String replay = vllm.startReplay();
    String replayPort = replay.substring(replay.lastIndexOf(':') + 1);
    VllmKvEventSubscriber s = start(builder(vllm.endpoint())
        .replayEndpoint("tcp://replay.example:" + replayPort)
        .resolver(host -> {
          if (host.equals("replay.example")) {
            if (error) {
              throw new OutOfMemoryError("Java heap space");
            }
            throw new IllegalStateException("a bug");
          }
          return InetAddress.getByName(host);
        }));
    long n = joined(vllm);
    vllm.lose(n);
    vllm.publish(n + 1);
    vllm.publish(n + 2);
    Await.until(() -> sink.sawLive(n + 2), "the live messages after the failed replay arrived");
    VllmKvEventSubscriber.Stats st = s.stats();
    assertEquals(1, st.replaysRequested());
    assertEquals(1, st.replayFailures());
    assertEquals(1, st.connects(), "the live connection is kept");
    assertTrue(threads.get(0).isAlive());
  }

  /**
   * The same on the live connection: an {@link Error} or unchecked exception while connecting
   * or reading ended the reader thread, which then never connected again. It is a failed
   * connection (or, once connected, a broken one, which clears the mirror) now, retried after
   * the backoff.
   */
  @ParameterizedTest(name = "an Error: {0}")
  @ValueSource(booleans = {false, true})
  void anErrorOnTheLiveConnectionIsRetried(boolean error) throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    String port = vllm.endpoint().substring(vllm.endpoint().lastIndexOf(':') + 1);
    java.util.concurrent.atomic.AtomicInteger lookups =
        new java.util.concurrent.atomic.AtomicInteger();
    VllmKvEventSubscriber s = start(builder("tcp://publisher.example:" + port).resolver(host -> {
      if (lookups.incrementAndGet() == 1) {
        if (error) {
          throw new OutOfMemoryError("Java heap space");
        }
        throw new IllegalStateException("a bug");
      }
      return InetAddress.getLoopbackAddress();
    }));
    joined(vllm);
    assertEquals(1, s.stats().connectFailures());
    assertEquals(1, s.stats().connects());
    assertTrue(threads.get(0).isAlive());
  }

  @Test
  void closeEndsTheThreadWhileItReadsAndIsIdempotent() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    VllmKvEventSubscriber s = start(builder(vllm.endpoint()));
    joined(vllm);
    s.close();
    assertFalse(threads.get(0).isAlive());
    s.close();
    assertThrows(IllegalStateException.class, s::start);
    assertEquals(0, s.stats().disconnects(), "close() is not a broken connection");
  }

  @Test
  void closeEndsTheThreadDuringALongBackoff() throws Exception {
    int deadPort;
    try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      deadPort = ss.getLocalPort();
    }
    VllmKvEventSubscriber s = start(builder("tcp://127.0.0.1:" + deadPort)
        .reconnectBackoff(Duration.ofHours(1), Duration.ofHours(1)));
    Await.until(() -> s.stats().connectFailures() == 1, "the refused connect was counted");
    s.close();
    assertFalse(threads.get(0).isAlive(), "close() does not wait out the backoff");
    assertEquals(1, s.stats().connectFailures());
  }

  /**
   * The JDK's host name lookup cannot be interrupted, and a name server that does not answer
   * holds it for as long as the system's resolver waits (tens of seconds): close() used to wait
   * for the thread in it up to its 10 s limit. It returns at once now, and the thread ends by
   * itself when the lookup returns, without connecting or calling the sink.
   */
  @Test
  void closeDoesNotWaitForAHostNameLookupThatDoesNotAnswer() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    String port = vllm.endpoint().substring(vllm.endpoint().lastIndexOf(':') + 1);
    CountDownLatch looking = new CountDownLatch(1);
    CountDownLatch answer = new CountDownLatch(1);
    VllmKvEventSubscriber s = start(builder("tcp://publisher.example:" + port).resolver(host -> {
      assertEquals("publisher.example", host);
      looking.countDown();
      Uninterruptibles.awaitUninterruptibly(answer); // as the JDK's lookup: no interrupt ends it
      return InetAddress.getLoopbackAddress(); // where the publisher is
    }));
    assertTrue(looking.await(10, TimeUnit.SECONDS), "the thread looks the host up");
    long start = System.nanoTime();
    s.close();
    long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertTrue(millis < 2_000, "close() took " + millis + " ms");
    // the lookup answers at last: the thread ends without connecting to the publisher
    answer.countDown();
    threads.get(0).join(10_000);
    assertFalse(threads.get(0).isAlive());
    assertEquals(0, s.stats().connects());
    assertEquals(0, s.stats().connectFailures(), "a close is not a failed connect");
    assertEquals(0, sink.size());
  }

  @Test
  void aHostNameLookupIsUsedForTheConnection() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    String port = vllm.endpoint().substring(vllm.endpoint().lastIndexOf(':') + 1);
    start(builder("tcp://publisher.example:" + port)
        .resolver(host -> InetAddress.getLoopbackAddress()));
    joined(vllm);
    assertTrue(sink.size() > 0);
  }

  @Test
  void theDefaultThreadIsOneDaemonNamedPrefixRouterKvEvents() throws Exception {
    FakeVllmPublisher vllm = publisher(100);
    VllmKvEventSubscriber s = VllmKvEventSubscriber.builder().endpoint(vllm.endpoint())
        .sink(sink).build();
    s.start();
    assertThrows(IllegalStateException.class, s::start, "one thread only");
    joined(vllm);
    assertEquals(1, sink.threads().size());
    Thread reader = sink.threads().iterator().next();
    assertEquals(VllmKvEventSubscriber.THREAD_NAME, reader.getName());
    assertTrue(reader.isDaemon());
    s.close();
    assertFalse(reader.isAlive());
  }

  @Test
  void aPeerThatIsNotAZmtpPublisherIsRetriedAndCounted() throws Exception {
    try (HostilePeer peer = new HostilePeer((sock, in, out) -> {
      out.write(new byte[] {0x01, 0x00}); // a ZMTP 1.0 greeting
      out.flush();
      HostilePeer.awaitClientClose(in);
    })) {
      VllmKvEventSubscriber s = start(builder("tcp://127.0.0.1:" + peer.port()));
      Await.until(() -> s.stats().connectFailures() >= 3, "three refused handshakes");
      assertEquals(0, s.stats().connects());
      s.close();
      assertFalse(threads.get(0).isAlive());
    }
    assertEquals(0, sink.size());
  }

  @Test
  void aPublisherStoppingInsideAMessageIsCutAndReconnected() throws Exception {
    byte[] stall = ZmtpBytes.of().greeting().ready("PUB")
        .raw((byte) 0x01, (byte) 9).raw(ZmtpBytes.ascii("kv-ev")).bytes();
    try (HostilePeer peer = new HostilePeer((sock, in, out) -> {
      HostilePeer.readClientHandshake(in);
      out.write(stall);
      out.flush();
      HostilePeer.awaitClientClose(in);
    })) {
      VllmKvEventSubscriber s = start(builder("tcp://127.0.0.1:" + peer.port())
          .readTimeout(Duration.ofMillis(200)));
      Await.until(() -> s.stats().disconnects() >= 2, "two stalled connections were cut");
      assertTrue(s.stats().connects() >= 2);
      s.close();
      assertFalse(threads.get(0).isAlive());
      // every broken connection started the stream over
      assertEquals(s.stats().disconnects(), sink.resets());
    }
    assertEquals(0, sink.size());
  }

  /**
   * The host's jitter source used to be drawn from inside the reader's failure handling: one
   * that threw ended the reader thread, and nothing reconnected again. One that returns a value
   * out of range must not make the reader spin either.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"throws", "out of range"})
  void aBrokenJitterSourceWaitsTheBackoffAndTheReaderGoesOn(String how) throws Exception {
    java.util.random.RandomGenerator broken = new java.util.random.RandomGenerator() {
      @Override
      public long nextLong() {
        if (how.equals("throws")) {
          throw new IllegalStateException("a broken random source");
        }
        return -1L << 40;
      }

      @Override
      public long nextLong(long bound) {
        return nextLong();
      }
    };
    try (java.net.ServerSocket refused = new java.net.ServerSocket(0)) {
      int port = refused.getLocalPort();
      refused.close(); // nothing listens there: every connect is refused
      VllmKvEventSubscriber s = start(builder("tcp://127.0.0.1:" + port).jitter(broken));
      Await.until(() -> s.stats().connectFailures() >= 3, "three refused connects");
      assertTrue(threads.get(0).isAlive(), "the reader goes on");
      // waits of 10 to 100 ms: a few dozen connects at most in 300 ms, not a spin
      long before = s.stats().connectFailures();
      Thread.sleep(300);
      long more = s.stats().connectFailures() - before;
      assertTrue(more <= 30, more + " refused connects in 300 ms");
      s.close();
      assertFalse(threads.get(0).isAlive());
    }
    assertEquals(List.of(), sink.allCalls());
  }

  @Test
  void jitterDrawsEachWaitFromTheUpperHalfOfTheBackoffReproducibly() {
    assertEquals(800, VllmKvEventSubscriber.delay(800, null));
    java.util.SplittableRandom a = new java.util.SplittableRandom(7);
    java.util.SplittableRandom b = new java.util.SplittableRandom(7);
    java.util.Set<Long> seen = new java.util.HashSet<>();
    for (int i = 0; i < 1000; i++) {
      long d = VllmKvEventSubscriber.delay(800, a);
      assertTrue(d >= 400 && d <= 800, "wait " + d);
      assertEquals(d, VllmKvEventSubscriber.delay(800, b), "same seed, same waits");
      seen.add(d);
    }
    assertTrue(seen.size() > 100, "the waits vary: " + seen.size());
    long tiny = VllmKvEventSubscriber.delay(1, new java.util.SplittableRandom(1));
    assertTrue(tiny == 0 || tiny == 1, "a backoff of 1 ns: " + tiny);
  }

  @Test
  void endpointsOtherThanTcpHostPortAreRefusedClearly() {
    VllmKvEventSubscriber.Builder b = VllmKvEventSubscriber.builder();
    IllegalArgumentException ipc =
        assertThrows(IllegalArgumentException.class, () -> b.endpoint("ipc:///tmp/kv"));
    assertTrue(ipc.getMessage().contains("only tcp://"), ipc.getMessage());
    IllegalArgumentException star =
        assertThrows(IllegalArgumentException.class, () -> b.endpoint("tcp://*:5557"));
    assertTrue(star.getMessage().contains("bind address"), star.getMessage());
    assertThrows(IllegalArgumentException.class, () -> b.replayEndpoint("inproc://replay"));
    assertThrows(IllegalArgumentException.class, () -> b.endpoint("tcp://localhost"));
    assertThrows(IllegalArgumentException.class, () -> b.endpoint("tcp://localhost:70000"));
  }

  @Test
  void timeoutsBeyondAYearAreRefusedByTheBuilderNotByTheReaderThread() {
    // "no timeout" written as a huge duration: the reader thread computed its deadlines in
    // nanoseconds, failed with an ArithmeticException on its first connect and ended, leaving
    // a subscriber that never connects nor retries
    Duration huge = Duration.ofSeconds(Long.MAX_VALUE);
    Duration overAYear = Duration.ofDays(366);
    List<java.util.function.UnaryOperator<VllmKvEventSubscriber.Builder>> settings = List.of(
        b -> b.connectTimeout(huge), b -> b.handshakeTimeout(huge), b -> b.readTimeout(huge),
        b -> b.idleTimeout(huge), b -> b.replayTimeout(huge),
        b -> b.connectTimeout(overAYear), b -> b.idleTimeout(overAYear),
        b -> b.replayTimeout(overAYear),
        b -> b.reconnectBackoff(Duration.ofMillis(100), huge),
        b -> b.reconnectBackoff(Duration.ofMillis(100), overAYear),
        b -> b.replayBackoff(Duration.ofMillis(100), huge),
        b -> b.replayBackoff(Duration.ofMillis(100), overAYear));
    for (int i = 0; i < settings.size(); i++) {
      VllmKvEventSubscriber.Builder b = VllmKvEventSubscriber.builder()
          .endpoint("tcp://127.0.0.1:5557").sink(sink);
      java.util.function.UnaryOperator<VllmKvEventSubscriber.Builder> setting = settings.get(i);
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> setting.apply(b).build(), "setting " + i);
      assertTrue(e.getMessage().contains("365 days"), e.getMessage());
    }
    assertNotNull(VllmKvEventSubscriber.builder().endpoint("tcp://127.0.0.1:5557").sink(sink)
        .connectTimeout(Duration.ofDays(365)).idleTimeout(Duration.ofDays(365))
        .replayTimeout(Duration.ofDays(365))
        .reconnectBackoff(Duration.ofDays(365), Duration.ofDays(365))
        .replayBackoff(Duration.ofDays(365), Duration.ofDays(365)).build());
    VllmKvEventSubscriber.Builder b = VllmKvEventSubscriber.builder();
    assertThrows(IllegalArgumentException.class,
        () -> b.replayBackoff(Duration.ZERO, Duration.ofSeconds(1)));
    assertThrows(IllegalArgumentException.class,
        () -> b.replayBackoff(Duration.ofSeconds(2), Duration.ofSeconds(1)));
  }

  @Test
  void limitsOutOfRangeAreRefusedNamingTheBuildersMethod() {
    List<java.util.function.UnaryOperator<VllmKvEventSubscriber.Builder>> settings = List.of(
        b -> b.maxFramesPerMessage(0), b -> b.maxMessageBytes(10),
        b -> b.connectTimeout(Duration.ZERO), b -> b.idleTimeout(Duration.ofSeconds(-1)));
    List<String> names = List.of("maxFramesPerMessage", "maxMessageBytes", "connectTimeout",
        "idleTimeout");
    for (int i = 0; i < settings.size(); i++) {
      VllmKvEventSubscriber.Builder b = VllmKvEventSubscriber.builder()
          .endpoint("tcp://127.0.0.1:5557").sink(sink);
      java.util.function.UnaryOperator<VllmKvEventSubscriber.Builder> setting = settings.get(i);
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> setting.apply(b).build(), names.get(i));
      assertTrue(e.getMessage().startsWith(names.get(i) + " "), e.getMessage());
    }
  }

  /**
   * Every vLLM message is three frames (topic, sequence number, payload), so a frame limit below
   * 3 can pass none: each message broke the limit, and the reader dropped the connection,
   * cleared the mirror and reconnected for ever (165 connections in 3 s, no message taken).
   */
  @Test
  void aFrameLimitBelowTheThreeFramesOfAVllmMessageIsRefused() {
    for (int bad : new int[] {1, 2}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> VllmKvEventSubscriber.builder().endpoint("tcp://127.0.0.1:5557").sink(sink)
              .maxFramesPerMessage(bad).build(), "maxFramesPerMessage(" + bad + ")");
      assertEquals("maxFramesPerMessage must be at least 3 (a vLLM message has 3 frames), was "
          + bad, e.getMessage());
    }
    assertNotNull(VllmKvEventSubscriber.builder().endpoint("tcp://127.0.0.1:5557").sink(sink)
        .maxFramesPerMessage(3).build());
  }

  @Test
  void theBuilderNeedsAnEndpointAndAListenerWithItsBlockSize() {
    CacheEventListener listener = new CacheEventListener() {};
    assertThrows(IllegalStateException.class,
        () -> VllmKvEventSubscriber.builder().listener(listener).blockSize(16).build());
    IllegalStateException noBlockSize = assertThrows(IllegalStateException.class,
        () -> VllmKvEventSubscriber.builder().endpoint("tcp://127.0.0.1:5557")
            .listener(listener).build());
    assertTrue(noBlockSize.getMessage().contains("blockSize"), noBlockSize.getMessage());
    assertThrows(IllegalStateException.class,
        () -> VllmKvEventSubscriber.builder().endpoint("tcp://127.0.0.1:5557").build());
    assertThrows(IllegalArgumentException.class,
        () -> VllmKvEventSubscriber.builder().reconnectBackoff(Duration.ofSeconds(2),
            Duration.ofSeconds(1)));
    assertNotNull(VllmKvEventSubscriber.builder().endpoint("tcp://[::1]:5557")
        .listener(listener).blockSize(16).build());
  }

  /**
   * A block size that is not positive is refused where it is given, naming the method and the
   * value: it was taken, and build() then said the block size "is required" with an
   * IllegalStateException, as if none had been given.
   */
  @Test
  void aBlockSizeThatIsNotPositiveIsRefusedByItsSetter() {
    for (int bad : new int[] {-1, 0, Integer.MIN_VALUE}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> VllmKvEventSubscriber.builder().blockSize(bad), "blockSize(" + bad + ")");
      assertEquals("blockSize must be positive, was " + bad, e.getMessage());
    }
  }
}
