package io.github.prefixrouter.engine.vllm;

import static io.github.prefixrouter.engine.vllm.FakeVllmPublisher.payload;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.github.prefixrouter.testing.Await;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A subscription that stops delivering while its engine keeps serving: the publisher keeps the
 * connection open and sends nothing more on it (its host gone without a reset, a firewall or NAT
 * dropping the flow), so the subscriber, which waits for the next message without a timeout,
 * waited for ever while the mirror stayed frozen. It now drops the connection once the engine
 * has completed {@code silenceLimit} requests that store a block since the last message (or the
 * connection), and the minimum time has passed, and makes it again. Time is the test's clock.
 */
class VllmKvEventSilenceTest {

  private static final int BLOCK = 16;
  private static final Duration AFTER = Duration.ofSeconds(30);

  private final RecordingSink sink = new RecordingSink();
  private final AtomicLong now = new AtomicLong(1_000_000_000L);
  private final ReaderThreads factory = new ReaderThreads();
  private final List<AutoCloseable> toClose = new ArrayList<>();

  /** The test's publisher, once connected() made it. */
  private SilentPublisher vllm;

  @AfterEach
  void closeAll() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    factory.assertAllEnded();
  }

  private VllmKvEventSubscriber start(String endpoint, int requests, Duration after) {
    VllmKvEventSubscriber s = VllmKvEventSubscriber.builder()
        .endpoint(endpoint)
        .sink(sink)
        .blockSize(BLOCK)
        .threadFactory(factory)
        .reconnectBackoff(Duration.ofMillis(10), Duration.ofMillis(100))
        .silenceLimit(requests, after)
        .clock(now::get)
        .build();
    toClose.add(s);
    s.start();
    return s;
  }

  /**
   * A subscriber checking for silence after {@code requests} requests and {@link #AFTER}, on a
   * silent publisher of its own, once message 0 on its first connection reached the sink.
   */
  private VllmKvEventSubscriber connected(int requests) throws Exception {
    vllm = new SilentPublisher();
    toClose.add(vllm);
    VllmKvEventSubscriber s = start(vllm.endpoint(), requests, AFTER);
    deliver(1, 0);
    return s;
  }

  /** Sends {@code seq} on connection {@code k} and waits for it to reach the sink. */
  private void deliver(int k, long seq) throws InterruptedException {
    vllm.send(k, seq, payload(seq));
    Await.until(() -> sink.sawLive(seq), "message " + seq + " on connection " + k);
  }

  /** A request of 40 prompt tokens, none cached, and 10 output tokens: it stores 3 blocks. */
  private static void storingRequest(VllmKvEventSubscriber s) {
    s.requestCompleted(40, 10, 0);
  }

  @Test
  void aConnectionSilentWhileTheEngineServesIsDroppedAndMadeAgain() throws Exception {
    VllmKvEventSubscriber s = connected(4);
    deliver(1, 1);
    // the connection goes silent; the engine serves on
    now.addAndGet(AFTER.toNanos());
    for (int i = 0; i < 3; i++) {
      storingRequest(s);
    }
    assertEquals(0, s.stats().silenceReconnects(), "3 requests, below the limit of 4");
    assertEquals(1, s.stats().connects());
    storingRequest(s);
    assertEquals(1, s.stats().silenceReconnects(), "the 4th request: " + s.stats());
    Await.until(() -> vllm.subscriptions() == 2, "subscribed again");
    deliver(2, 7); // published after the new connection: it arrives
    VllmKvEventSubscriber.Stats st = s.stats();
    assertEquals(2, st.connects(), st.toString());
    assertEquals(1, st.disconnects(), st.toString());
    assertEquals(1, sink.resets(), "the stream starts over, as after any lost connection");
    assertEquals(List.of(0L, 1L, RecordingSink.RESET, 7L),
        sink.allCalls().stream().map(RecordingSink.Call::seq).toList());
  }

  @Test
  void theMinimumTimeMustHavePassedToo() throws Exception {
    VllmKvEventSubscriber s = connected(4);
    now.addAndGet(AFTER.toNanos() - 1);
    for (int i = 0; i < 20; i++) {
      storingRequest(s);
    }
    assertEquals(0, s.stats().silenceReconnects(), "20 requests within 30 s less 1 ns");
    now.incrementAndGet();
    storingRequest(s);
    assertEquals(1, s.stats().silenceReconnects(), "the next request once 30 s have passed");
    Await.until(() -> s.stats().connects() == 2, "connected again");
  }

  @Test
  void aMessageStartsTheCountAndTheTimeAfresh() throws Exception {
    VllmKvEventSubscriber s = connected(4);
    now.addAndGet(AFTER.toNanos());
    for (int i = 0; i < 3; i++) {
      storingRequest(s);
    }
    deliver(1, 1);
    for (int i = 0; i < 3; i++) {
      storingRequest(s);
    }
    assertEquals(0, s.stats().silenceReconnects(), "3 requests since the last message");
    for (int i = 0; i < 10; i++) {
      storingRequest(s);
    }
    assertEquals(0, s.stats().silenceReconnects(), "13 requests, but no time since the message");
    now.addAndGet(AFTER.toNanos());
    storingRequest(s);
    assertEquals(1, s.stats().silenceReconnects(), s.stats().toString());
  }

  /**
   * A day with no request completed: vLLM publishes nothing while idle, rightly. The quiet day
   * counts as no request: once the engine serves again, the connection is dropped only after
   * the limit's requests, as after any message.
   */
  @Test
  void aQuietEngineCausesNoReconnect() throws Exception {
    VllmKvEventSubscriber s = connected(4);
    now.addAndGet(TimeUnit.DAYS.toNanos(1));
    for (int i = 0; i < 3; i++) {
      storingRequest(s);
    }
    VllmKvEventSubscriber.Stats st = s.stats();
    assertEquals(0, st.silenceReconnects(), "3 requests after a quiet day: " + st);
    assertEquals(1, st.connects(), st.toString());
    assertEquals(0, sink.resets());
    storingRequest(s);
    assertEquals(1, s.stats().silenceReconnects(), "the 4th request: " + s.stats());
  }

  /**
   * Requests that store no block give vLLM nothing to publish: shorter than a block, or whose
   * blocks the prefix cache served (vLLM computes a prompt's last token again, so a prompt of
   * whole blocks reports one block fewer cached than it holds).
   */
  @Test
  void requestsThatStoreNoBlockAreNotCounted() throws Exception {
    VllmKvEventSubscriber s = connected(4);
    now.addAndGet(AFTER.toNanos());
    for (int i = 0; i < 10; i++) {
      s.requestCompleted(10, 6, 0); // 15 tokens computed (not the last one): no full block
      s.requestCompleted(40, 8, 32); // 47 tokens computed: 2 blocks, both cached
      s.requestCompleted(32, 16, 16); // 47 tokens: 2 blocks, the prompt's, both cached
      s.requestCompleted(15, 1, -1); // 15 tokens, cached unknown
      // cached unknown: a cached prefix with a short new part would store nothing
      s.requestCompleted(2000, 1, -1);
    }
    assertEquals(0, s.stats().silenceReconnects(), s.stats().toString());
    for (int i = 0; i < 4; i++) {
      s.requestCompleted(32, 0, 0); // two blocks computed, none cached
    }
    assertEquals(1, s.stats().silenceReconnects(), s.stats().toString());
    Await.until(() -> vllm.subscriptions() == 2, "subscribed again");
    deliver(2, 3);
    for (int i = 0; i < 10; i++) {
      s.requestCompleted(10, 6, 0);
      s.requestCompleted(40, 8, 32);
      s.requestCompleted(32, 16, 16);
      s.requestCompleted(15, 1, -1);
    }
    now.addAndGet(AFTER.toNanos());
    s.requestCompleted(10, 6, 0);
    assertEquals(1, s.stats().silenceReconnects(), "none of these stores a block");
    for (int i = 0; i < 4; i++) {
      s.requestCompleted(32, 17, 16); // 48 tokens: a third block, of output
    }
    assertEquals(2, s.stats().silenceReconnects(), s.stats().toString());
  }

  @Test
  void zeroRequestsTurnsTheCheckOff() throws Exception {
    VllmKvEventSubscriber s = connected(0);
    now.addAndGet(TimeUnit.DAYS.toNanos(1));
    for (int i = 0; i < 1000; i++) {
      storingRequest(s);
    }
    assertEquals(0, s.stats().silenceReconnects(), s.stats().toString());
    assertEquals(1, s.stats().connects());
  }

  /**
   * A replay holds the live stream: its messages wait in the connection while the reader asks
   * the replay endpoint for the gap, for up to eight replay timeouts. Requests completed
   * meanwhile are not silence (the connection delivers; the reader is not reading it), and the
   * count and the time start afresh once the replay ends.
   */
  @Test
  void aLongReplayIsNotTakenForSilence() throws Exception {
    try (ServerSocket replay = new ServerSocket(0, 4, InetAddress.getLoopbackAddress())) {
      vllm = new SilentPublisher();
      toClose.add(vllm);
      VllmKvEventSubscriber s = VllmKvEventSubscriber.builder()
          .endpoint(vllm.endpoint())
          .replayEndpoint("tcp://127.0.0.1:" + replay.getLocalPort())
          .replayTimeout(Duration.ofSeconds(20))
          .sink(sink)
          .blockSize(BLOCK)
          .threadFactory(factory)
          .reconnectBackoff(Duration.ofMillis(10), Duration.ofMillis(100))
          .silenceLimit(4, AFTER)
          .clock(now::get)
          .build();
      toClose.add(s);
      s.start();
      deliver(1, 0);
      vllm.send(1, 5, payload(5)); // a gap: the reader asks the replay endpoint for 1..4
      Socket held = replay.accept(); // and the endpoint never answers
      Await.until(() -> s.stats().replaysRequested() == 1, "the replay started");
      now.addAndGet(AFTER.toNanos());
      for (int i = 0; i < 10; i++) {
        storingRequest(s);
      }
      assertEquals(0, s.stats().silenceReconnects(), "requests during the replay: " + s.stats());
      held.close(); // the replay fails; message 5 goes on to the sink
      Await.until(() -> sink.sawLive(5), "message 5 after the replay");
      for (int i = 0; i < 10; i++) {
        storingRequest(s);
      }
      assertEquals(0, s.stats().silenceReconnects(), "no time has passed since the replay ended");
      now.addAndGet(AFTER.toNanos());
      storingRequest(s);
      assertEquals(1, s.stats().silenceReconnects(), "then the check is on again: " + s.stats());
      assertEquals(1, s.stats().replayFailures(), s.stats().toString());
    }
  }

  @Test
  void requestsWhileNotConnectedAreNotCounted() throws Exception {
    // nothing listens on port 1: every attempt is refused
    VllmKvEventSubscriber s = start("tcp://127.0.0.1:1", 1, Duration.ZERO);
    for (int i = 0; i < 10; i++) {
      storingRequest(s);
    }
    assertEquals(0, s.stats().silenceReconnects(), s.stats().toString());
    assertEquals(0, s.stats().connects(), s.stats().toString());
  }

  @Test
  void theLimitsAreChecked() {
    VllmKvEventSubscriber.Builder b = VllmKvEventSubscriber.builder();
    assertThrows(IllegalArgumentException.class, () -> b.silenceLimit(-1, AFTER));
    assertThrows(IllegalArgumentException.class,
        () -> b.silenceLimit(4, Duration.ofSeconds(-1)));
    assertThrows(IllegalArgumentException.class, () -> b.silenceLimit(4, Duration.ofDays(366)));
    assertThrows(NullPointerException.class, () -> b.silenceLimit(4, null));
  }
}
