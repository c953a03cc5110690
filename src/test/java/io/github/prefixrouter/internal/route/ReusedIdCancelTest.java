package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.EarlyCancelTest.PREFIX;
import static io.github.prefixrouter.internal.route.EarlyCancelTest.generating;
import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.ForwardingEngine;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A host that submits two requests under one id while the first still runs (against the
 * uniqueness of ids, which it owes its node) gets each answered once, and the cancel of one does
 * not end the other's run at the peer both were forwarded to: a peer matches a CANCEL by sender,
 * origin and id, which both share, so the origin sends none while the other is forwarded there,
 * as it cancels no run on its own engine that another request of the id shares.
 */
class ReusedIdCancelTest {

  /** Two nodes, n1 holding the prefix: n0 forwards both requests there. */
  static final class Pair {
    final OracleCluster c;
    final List<String> cancelsAtN1 = new ArrayList<>();
    final AtomicInteger runsAtN1 = new AtomicInteger();

    Pair() {
      OracleCluster.Hooks h = new OracleCluster.Hooks();
      AtomicInteger built = new AtomicInteger();
      h.engineWrap = e -> built.getAndIncrement() != 1 ? e : new ForwardingEngine(e) {
        @Override
        public CompletableFuture<EngineResult> execute(InferenceRequest r) {
          runsAtN1.incrementAndGet();
          return super.execute(r);
        }

        @Override
        public void cancel(String requestId) {
          cancelsAtN1.add(requestId);
          super.cancel(requestId);
        }
      };
      c = new OracleCluster(2, RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
          .coldPlacement(false).build(), 1, h).rtt(Duration.ofMillis(1)).start();
      c.warm("n1", concat(PREFIX, prompt(9, 40)));
    }

    /** Submits {@code a} to n0, {@code b} 2 ms later, and runs 5 ms on: both are at n1. */
    List<CompletableFuture<InferenceResponse>> submitTwo(InferenceRequest a, InferenceRequest b) {
      CompletableFuture<InferenceResponse> fa = c.node("n0").submit(a);
      c.sim.advanceBy(Duration.ofMillis(2).toNanos());
      CompletableFuture<InferenceResponse> fb = c.node("n0").submit(b);
      c.sim.advanceBy(Duration.ofMillis(5).toNanos());
      return List.of(fa, fb);
    }
  }

  @Test
  void cancellingTheSecondOfTwoRequestsOfOneIdLeavesTheFirstRunningAtThePeer() {
    Pair p = new Pair();
    InferenceRequest first = generating("x", 7, 50);
    InferenceRequest second = generating("x", 8, 50); // the same id, another prompt
    List<CompletableFuture<InferenceResponse>> f = p.submitTwo(first, second);
    CompletableFuture<InferenceResponse> f1 = f.get(0);
    CompletableFuture<InferenceResponse> f2 = f.get(1);
    assertTrue(f2.cancel(true));
    p.c.sim.runUntilIdle(1_000_000);

    InferenceResponse r1 = f1.join();
    assertEquals("n1", r1.servedBy(), "the first request's run at n1 was ended by the "
        + "second's cancel: " + r1);
    assertEquals(FallbackCause.NONE, r1.fallbackCause());
    assertArrayEquals(expected(first), r1.result().outputTokens());
    assertEquals(0, p.c.engine("n0").stats().requests(), "n0 ran a request itself");
    assertEquals(1, p.c.node("n0").stats().forwarded());
    assertEquals(1, p.c.node("n0").stats().failed()); // the cancelled one
    assertEquals(0, p.c.node("n0").stats().inFlight());
    assertEquals(0, p.c.node("n1").stats().inFlight());
  }

  @Test
  void cancellingOneOfTwoSubmitsOfOneRequestLeavesTheOtherRunningAtThePeer() {
    // the same request twice: its second FORWARD joins the first's run at n1
    Pair p = new Pair();
    InferenceRequest q = generating("x", 7, 50);
    List<CompletableFuture<InferenceResponse>> f = p.submitTwo(q, q);
    CompletableFuture<InferenceResponse> f1 = f.get(0);
    CompletableFuture<InferenceResponse> f2 = f.get(1);
    assertTrue(f1.cancel(true));
    p.c.sim.runUntilIdle(1_000_000);

    InferenceResponse r2 = f2.join();
    assertEquals("n1", r2.servedBy(), "the second submit's run at n1 was ended by the first's "
        + "cancel: " + r2);
    assertEquals(FallbackCause.NONE, r2.fallbackCause());
    assertArrayEquals(expected(q), r2.result().outputTokens());
    assertEquals(1, p.runsAtN1.get(), "n1 ran the request once");
    assertEquals(List.of(), p.cancelsAtN1);
    assertEquals(0, p.c.engine("n0").stats().requests(), "n0 ran a request itself");
    assertEquals(0, p.c.node("n1").stats().inFlight());
  }

  @Test
  void theCancelOfTheLastOfThemStillReachesThePeer() {
    // both submits of one request cancelled: the second cancel, with no other request of the
    // id forwarded there any more, ends the run at n1
    Pair p = new Pair();
    InferenceRequest q = generating("x", 7, 500);
    List<CompletableFuture<InferenceResponse>> f = p.submitTwo(q, q);
    CompletableFuture<InferenceResponse> f1 = f.get(0);
    CompletableFuture<InferenceResponse> f2 = f.get(1);
    assertTrue(f1.cancel(true));
    p.c.sim.advanceBy(Duration.ofMillis(5).toNanos());
    assertTrue(f2.cancel(true));
    p.c.sim.runUntilIdle(1_000_000);

    assertEquals(List.of("x"), p.cancelsAtN1, "the run at n1 was not cancelled");
    assertEquals(0, p.c.node("n1").stats().servedForPeers());
    assertEquals(0, p.c.node("n1").stats().inFlight());
    assertEquals(2, p.c.node("n0").stats().failed());
  }
}
