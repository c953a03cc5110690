package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeNotRunningException;
import io.github.prefixrouter.PrefixRouterNode.State;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.EngineTimeoutException;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.ForwardingTransport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * An engine or a transport whose {@code close()} leaves the futures of its pending work
 * uncompleted (against the transport's contract; the engine SPI has no {@code close()}, and a
 * host's may do anything) costs no answer: the node bounds every run on its engine by
 * {@code engineTimeout} and every forward by its guard timer, a stop's grace period abandons
 * what is still unanswered when it ends, and the node closes its transport only once nothing it
 * sent is awaited there. Each accepted request is answered exactly once, and the stop completes.
 */
class PendingWorkAtCloseTest {

  static final int[] PREFIX = prompt(42, 480);
  static final long MS = 1_000_000L;

  /**
   * A host's engine whose close stops answering: the runs it has taken are never completed
   * (their futures stay open whatever the engine underneath does, a cancel included), and a
   * run asked for afterwards fails at once, retryably.
   */
  static final class ClosingEngine extends ForwardingEngine {
    final List<CompletableFuture<EngineResult>> pending = new ArrayList<>();
    final List<String> cancelled = new ArrayList<>();
    volatile boolean closed;

    ClosingEngine(InferenceEngine e) {
      super(e);
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest request) {
      if (closed) {
        return CompletableFuture.failedFuture(new EngineException("the engine is closed", true));
      }
      CompletableFuture<EngineResult> mine = new CompletableFuture<>();
      pending.add(mine);
      delegate.execute(request).whenComplete((v, err) -> {
        if (closed) {
          return; // closed: nothing more is answered
        }
        if (err != null) {
          mine.completeExceptionally(err instanceof CompletionException c ? c.getCause() : err);
        } else {
          mine.complete(v);
        }
      });
      return mine;
    }

    @Override
    public void cancel(String requestId) {
      cancelled.add(requestId);
      delegate.cancel(requestId);
    }

    void close() {
      closed = true;
    }
  }

  static InferenceRequest generating(String id, long seed, int maxTokens) {
    return new InferenceRequest(id, concat(PREFIX, prompt(seed, 40)),
        GenerationParams.greedy(maxTokens));
  }

  static Throwable failure(CompletableFuture<?> f) {
    assertTrue(f.isDone(), "not answered");
    return assertThrows(CompletionException.class, f::join).getCause();
  }

  static OracleCluster localOnly(List<ClosingEngine> engines) {
    return OracleCluster.withWrappedEngines(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).engineTimeout(Duration.ofSeconds(5)).build(), 1,
        b -> b, ClosingEngine::new, engines);
  }

  @Test
  void aRunTheClosedEngineNeverAnswersIsAnsweredAtEngineTimeoutAndTheStopWaitsForIt() {
    List<ClosingEngine> engines = new ArrayList<>();
    OracleCluster c = localOnly(engines);
    RouterNode n0 = c.node("n0");
    CompletableFuture<InferenceResponse> f = n0.submit(generating("r1", 1, 200)); // ~1 s
    AtomicInteger answers = new AtomicInteger();
    f.whenComplete((v, t) -> answers.incrementAndGet());
    c.sim.advanceBy(10 * MS);
    engines.get(0).close(); // the host closes its engine before the node
    CompletableFuture<Void> stopped = n0.stop();

    c.sim.advanceBy(4_980 * MS); // 4.99 s into the run: the engine would have answered long ago
    assertFalse(f.isDone(), "answered before engineTimeout");
    assertFalse(stopped.isDone(), "the stop did not wait for the accepted request");
    assertEquals(State.STOPPING, n0.state());
    c.sim.advanceBy(20 * MS);

    RequestFailedException e = assertInstanceOf(RequestFailedException.class, failure(f));
    assertInstanceOf(EngineTimeoutException.class, e.getCause());
    assertTrue(stopped.isDone(), "the stop did not complete once the request was answered");
    assertEquals(State.STOPPED, n0.state());
    assertEquals(List.of("r1"), engines.get(0).cancelled, "the run given up was not cancelled");
    assertFalse(engines.get(0).pending.get(0).isDone(), "the engine answered after all");
    c.sim.advanceBy(Duration.ofSeconds(30).toNanos());
    assertEquals(1, answers.get());
    assertEquals(0, n0.stats().inFlight());
  }

  @Test
  void aRunTheClosedEngineNeverAnswersIsAnsweredWhenTheStopsGracePeriodEnds() {
    List<ClosingEngine> engines = new ArrayList<>();
    OracleCluster c = localOnly(engines);
    RouterNode n0 = c.node("n0");
    CompletableFuture<InferenceResponse> f = n0.submit(generating("r1", 1, 200));
    AtomicInteger answers = new AtomicInteger();
    f.whenComplete((v, t) -> answers.incrementAndGet());
    c.sim.advanceBy(10 * MS);
    engines.get(0).close();
    CompletableFuture<Void> stopped = n0.stop(Duration.ofSeconds(1));
    c.sim.advanceBy(999 * MS);
    assertFalse(f.isDone(), "abandoned before the grace period ended");
    c.sim.advanceBy(2 * MS);

    assertEquals(State.STOPPING,
        assertInstanceOf(NodeNotRunningException.class, failure(f)).state());
    assertTrue(stopped.isDone());
    assertEquals(State.STOPPED, n0.state());
    assertEquals(List.of("r1"), engines.get(0).cancelled);
    c.sim.advanceBy(Duration.ofSeconds(30).toNanos()); // engineTimeout passes: nothing more
    assertEquals(1, answers.get());
  }

  @Test
  void aRequestAfterTheEngineClosedFailsAtOnce() {
    List<ClosingEngine> engines = new ArrayList<>();
    OracleCluster c = localOnly(engines);
    engines.get(0).close();
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(generating("r1", 1, 4));
    c.sim.advanceBy(MS);
    RequestFailedException e = assertInstanceOf(RequestFailedException.class, failure(f));
    assertInstanceOf(EngineException.class, e.getCause());
    assertTrue(c.node("n0").stop().isDone());
  }

  /**
   * n0's transport: its requests are never answered, nor failed at their timeout or on close;
   * it records whether any was still awaited (not cancelled by the node) when it was closed.
   */
  static final class SilentTransport extends ForwardingTransport {
    final List<CompletableFuture<byte[]>> sent = new ArrayList<>();
    final List<String> awaitedAtClose = new ArrayList<>();
    int closes;

    SilentTransport(Transport t) {
      super(t);
    }

    @Override
    public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
      CompletableFuture<byte[]> f = new CompletableFuture<>();
      sent.add(f);
      return f;
    }

    @Override
    public void close() {
      closes++;
      for (CompletableFuture<byte[]> f : sent) {
        if (!f.isDone()) {
          awaitedAtClose.add("a forward");
        }
      }
      super.close(); // the network's own transport: it has none of these requests
    }
  }

  static OracleCluster forwarding(List<SilentTransport> transports) {
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    hooks.transportWrap = t -> {
      if (!t.localAddress().nodeId().equals("n0")) {
        return t;
      }
      SilentTransport s = new SilentTransport(t);
      transports.add(s);
      return s;
    };
    OracleCluster c = new OracleCluster(2, RouterConfig.builder()
        .policy(RoutingPolicy.LONGEST_PREFIX).coldPlacement(false)
        .forwardTimeout(Duration.ofMillis(500), Duration.ofMillis(500)).build(), 1, hooks)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    return c;
  }

  @Test
  void aForwardTheTransportNeverAnswersEndsAtTheGuardAndIsLetGoOfBeforeTheClose() {
    List<SilentTransport> transports = new ArrayList<>();
    OracleCluster c = forwarding(transports);
    SilentTransport t = transports.get(0);
    RouterNode n0 = c.node("n0");
    InferenceRequest r = generating("r1", 1, 4);
    CompletableFuture<InferenceResponse> f = n0.submit(r);
    AtomicInteger answers = new AtomicInteger();
    f.whenComplete((v, e) -> answers.incrementAndGet());
    c.sim.advanceBy(10 * MS);
    assertEquals(1, t.sent.size(), "expected a forward to n1");
    CompletableFuture<Void> stopped = n0.stop();
    assertFalse(stopped.isDone());
    assertEquals(0, t.closes, "the transport was closed with a forward awaited");

    // the forwarding timeout is 500 ms, its guard a quarter later; the local run takes ~30 ms
    c.sim.advanceBy(1_000 * MS);

    assertTrue(f.isDone(), "the forwarded request was never answered");
    InferenceResponse resp = f.join();
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.TIMEOUT, resp.fallbackCause());
    assertArrayEquals(expected(r), resp.result().outputTokens());
    assertTrue(stopped.isDone());
    assertEquals(State.STOPPED, n0.state());
    assertEquals(1, t.closes);
    assertEquals(List.of(), t.awaitedAtClose, "the node left a forward to the transport's close");
    assertTrue(t.sent.get(0).isCancelled(), "the forward given up is still awaited");
    assertEquals(1, answers.get());
  }

  @Test
  void aForwardTheTransportNeverAnswersIsAnsweredWhenTheStopsGracePeriodEnds() {
    List<SilentTransport> transports = new ArrayList<>();
    OracleCluster c = forwarding(transports);
    SilentTransport t = transports.get(0);
    RouterNode n0 = c.node("n0");
    CompletableFuture<InferenceResponse> f = n0.submit(generating("r1", 1, 4));
    AtomicInteger answers = new AtomicInteger();
    f.whenComplete((v, e) -> answers.incrementAndGet());
    c.sim.advanceBy(10 * MS);
    assertEquals(1, t.sent.size(), "expected a forward to n1");
    CompletableFuture<Void> stopped = n0.stop(Duration.ofMillis(100));
    c.sim.advanceBy(99 * MS);
    assertFalse(f.isDone(), "abandoned before the grace period ended");
    c.sim.advanceBy(2 * MS);

    assertInstanceOf(NodeNotRunningException.class, failure(f));
    assertTrue(stopped.isDone());
    assertEquals(State.STOPPED, n0.state());
    assertEquals(1, t.closes);
    assertEquals(List.of(), t.awaitedAtClose, "the node left a forward to the transport's close");
    assertTrue(t.sent.get(0).isCancelled());
    c.sim.runUntilIdle(1_000_000);
    assertEquals(1, answers.get());
  }
}
