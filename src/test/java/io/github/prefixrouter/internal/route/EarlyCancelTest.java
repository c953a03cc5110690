package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.ForwardingTransport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * A CANCEL that the network delivers before its FORWARD: the serving node remembers it, and the
 * FORWARD, when it comes, is answered as cancelled without running. Within bounds: a CANCEL for
 * a request that already ended, another sender's CANCEL, or one older than the memory's time
 * bound stops nothing else.
 */
class EarlyCancelTest {

  static final int[] PREFIX = prompt(42, 480);

  static InferenceRequest generating(String id, long question, int maxTokens) {
    return new InferenceRequest(id, concat(PREFIX, prompt(question, 40)),
        GenerationParams.greedy(maxTokens));
  }

  /** Two nodes; n0's FORWARDs reach the network {@code delay} late, its CANCELs at once. */
  static final class Reordering {
    final OracleCluster c;
    final AtomicInteger runsAtN1 = new AtomicInteger();

    Reordering(RouterConfig cfg, Duration delay) {
      OracleCluster.Hooks h = new OracleCluster.Hooks();
      h.transportWrap = t -> new ForwardingTransport(t) {
        @Override
        public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
            Duration timeout) {
          CompletableFuture<byte[]> answer = new CompletableFuture<>();
          // the sender's own timeout still counts from now
          c().sim.schedule(timeout.toNanos(), () -> answer.completeExceptionally(
              new io.github.prefixrouter.spi.TransportException(
                  io.github.prefixrouter.spi.TransportException.Kind.TIMEOUT, "no answer")));
          c().sim.schedule(delay.toNanos(), () -> super.request(to, payload, timeout)
              .whenComplete((b, e) -> {
                if (e != null) {
                  answer.completeExceptionally(e);
                } else {
                  answer.complete(b);
                }
              }));
          return answer;
        }
      };
      AtomicInteger built = new AtomicInteger();
      h.engineWrap = e -> built.getAndIncrement() != 1 ? e : new ForwardingEngine(e) {
        @Override
        public CompletableFuture<EngineResult> execute(InferenceRequest r) {
          runsAtN1.incrementAndGet();
          return super.execute(r);
        }
      };
      c = new OracleCluster(2, cfg, 1, h).rtt(Duration.ofMillis(1)).start();
      c.warm("n1", concat(PREFIX, prompt(9, 40))); // n1 holds the prefix: n0 forwards there
    }

    OracleCluster c() {
      return c;
    }
  }

  static RouterConfig.Builder forwarding() {
    return RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).coldPlacement(false);
  }

  @Test
  void aForwardOvertakenByTheClientsCancelNeverRunsAtThePeer() {
    Reordering r = new Reordering(forwarding().build(), Duration.ofMillis(30));
    CompletableFuture<InferenceResponse> f = r.c.node("n0").submit(generating("r1", 7, 50));
    r.c.sim.advanceBy(Duration.ofMillis(2).toNanos());
    assertTrue(f.cancel(true)); // CANCEL at once; the FORWARD reaches n1 28 ms later
    r.c.sim.runUntilIdle(1_000_000);
    assertEquals(0, r.runsAtN1.get(), "the peer ran a request its sender had cancelled");
    assertEquals(0, r.c.engine("n1").stats().requests() - 1, "only the warm-up ran at n1");
    assertEquals(1, r.c.node("n1").forwardsCancelledBeforeArrival());
    assertEquals(0, r.c.node("n1").stats().servedForPeers());
    assertEquals(0, r.c.node("n1").stats().inFlight());
    assertEquals(0, r.c.node("n0").stats().inFlight());
    assertEquals(1, r.c.node("n0").stats().failed());
  }

  @Test
  void aForwardOvertakenByTheCancelOfItsTimeoutNeverRunsAtThePeer() {
    // n0 waits 1 to 2 s, then cancels and runs the request itself; the FORWARD arrives at 4 s
    Reordering r = new Reordering(forwarding()
        .forwardTimeout(Duration.ofSeconds(1), Duration.ofSeconds(2)).build(),
        Duration.ofSeconds(4));
    InferenceRequest q = generating("r1", 7, 20);
    InferenceResponse resp = r.c.submitAndWait("n0", q);
    r.c.sim.runUntilIdle(1_000_000);
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.TIMEOUT, resp.fallbackCause());
    assertArrayEquals(OracleCluster.expected(q), resp.result().outputTokens());
    assertEquals(0, r.runsAtN1.get(), "the peer ran a request its sender had given up");
    assertEquals(1, r.c.node("n1").forwardsCancelledBeforeArrival());
    assertEquals(0, r.c.node("n1").stats().inFlight());
  }

  @Test
  void aForwardArrivingLongerThanTheMemoryAfterItsCancelRuns() {
    // the memory keeps a CANCEL 3 forwarding timeout bounds (6 s here): a FORWARD 10 s late
    // runs, as every FORWARD did before CANCELs were remembered
    Reordering r = new Reordering(forwarding()
        .forwardTimeout(Duration.ofSeconds(1), Duration.ofSeconds(2)).build(),
        Duration.ofSeconds(10));
    InferenceResponse resp = r.c.submitAndWait("n0", generating("r1", 7, 20));
    r.c.sim.runUntilIdle(1_000_000);
    assertEquals("n0", resp.servedBy());
    assertEquals(1, r.runsAtN1.get());
    assertEquals(0, r.c.node("n1").forwardsCancelledBeforeArrival());
  }

  // ------------------------------------------------- one serving node, scripted peers

  static ServingHarness serving() {
    return new ServingHarness(RouterConfig.builder().policy(RoutingPolicy.LOCAL_ONLY)
        .forwardTimeout(Duration.ofSeconds(1), Duration.ofSeconds(10)).build(),
        UnaryOperator.identity());
  }

  @Test
  void aCancelBeforeItsForwardStopsItAndItsDuplicatesButNotAnotherRequestOfTheSameId() {
    ServingHarness s = serving();
    InferenceRequest r1 = generating("x", 1, 10);
    InferenceRequest r2 = generating("x", 2, 10); // the same id, another request (a relay's)
    s.cancel("p", "x");
    CompletableFuture<byte[]> a1 = s.forward("p", r1);
    CompletableFuture<byte[]> again = s.forward("p", r1);
    CompletableFuture<byte[]> a2 = s.forward("p", r2);
    s.advance(Duration.ofMinutes(1));
    assertTrue(ServingHarness.stoppedAnswer(ServingHarness.decode(a1)));
    assertTrue(ServingHarness.stoppedAnswer(ServingHarness.decode(again)));
    assertInstanceOf(ForwardCodec.Result.class, ServingHarness.decode(a2));
    assertEquals(List.of(), s.runsOf(r1));
    assertEquals(1, s.runsOf(r2).size());
    assertEquals(2, s.node.forwardsCancelledBeforeArrival());
    assertEquals(1, s.node.stats().servedForPeers());
  }

  @Test
  void aCancelThatCrossedTheAnswerStopsOnlyThatRequestComingAgain() {
    ServingHarness s = serving();
    InferenceRequest r1 = generating("x", 1, 10);
    InferenceRequest r2 = generating("x", 2, 10);
    CompletableFuture<byte[]> a1 = s.forward("p", r1);
    s.advance(Duration.ofSeconds(5));
    assertInstanceOf(ForwardCodec.Result.class, ServingHarness.decode(a1));
    s.cancel("p", "x"); // late: r1 was answered
    CompletableFuture<byte[]> a2 = s.forward("p", r2);
    CompletableFuture<byte[]> replay = s.forward("p", r1);
    s.advance(Duration.ofMinutes(1));
    assertInstanceOf(ForwardCodec.Result.class, ServingHarness.decode(a2));
    assertTrue(ServingHarness.stoppedAnswer(ServingHarness.decode(replay)));
    assertEquals(1, s.runsOf(r1).size());
    assertEquals(1, s.runsOf(r2).size());
  }

  @Test
  void aRelaysCancelForOneOriginsRequestDoesNotStopAnotherOriginsRequestOfTheSameId() {
    // a relay r passes on the ids of its origins a and b: both send a request "x"
    ServingHarness s = new ServingHarness(RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).hopLimit(2).build(), UnaryOperator.identity());
    InferenceRequest fromA = generating("x", 1, 10);
    InferenceRequest fromB = generating("x", 2, 10);
    CompletableFuture<byte[]> a = s.relayed("r", "a", fromA);
    s.advance(Duration.ofSeconds(5));
    assertInstanceOf(ForwardCodec.Result.class, ServingHarness.decode(a));
    s.cancel("r", "a", "x"); // a's request, given up by r as its answer was on its way
    CompletableFuture<byte[]> b = s.relayed("r", "b", fromB);
    s.advance(Duration.ofMinutes(1));
    assertInstanceOf(ForwardCodec.Result.class, ServingHarness.decode(b));
    assertEquals(1, s.runsOf(fromB).size());
    assertEquals(0, s.node.forwardsCancelledBeforeArrival());
  }

  @Test
  void aCancelThatEndedARunningRequestStopsItComingAgain() {
    ServingHarness s = serving();
    InferenceRequest r1 = generating("x", 1, 200);
    CompletableFuture<byte[]> a1 = s.forward("p", r1);
    s.advance(Duration.ofMillis(50));
    s.cancel("p", "x");
    ForwardCodec.Message m = ServingHarness.decode(a1);
    assertInstanceOf(ForwardCodec.Failed.class, m);
    assertFalse(((ForwardCodec.Failed) m).retryable());
    CompletableFuture<byte[]> replay = s.forward("p", r1);
    s.advance(Duration.ofMinutes(1));
    assertTrue(ServingHarness.stoppedAnswer(ServingHarness.decode(replay)));
    assertEquals(1, s.runsOf(r1).size());
  }

  @Test
  void aDuplicateJoiningARunningRequestIsUnaffected() {
    ServingHarness s = serving();
    InferenceRequest r1 = generating("x", 1, 10);
    InferenceRequest r2 = generating("x", 2, 50);
    s.cancel("p", "x");
    CompletableFuture<byte[]> stopped = s.forward("p", r1);
    CompletableFuture<byte[]> first = s.forward("p", r2);
    s.advance(Duration.ofMillis(20));
    CompletableFuture<byte[]> dup = s.forward("p", r2); // joins the run of r2
    s.advance(Duration.ofMinutes(1));
    assertTrue(ServingHarness.stoppedAnswer(ServingHarness.decode(stopped)));
    ForwardCodec.Result r = (ForwardCodec.Result) ServingHarness.decode(first);
    ForwardCodec.Result d = (ForwardCodec.Result) ServingHarness.decode(dup);
    assertArrayEquals(r.result().outputTokens(), d.result().outputTokens());
    assertEquals(1, s.runsOf(r2).size(), "the duplicate ran again");
  }

  @Test
  void anotherSendersCancelStopsNothing() {
    ServingHarness s = serving();
    InferenceRequest r1 = generating("x", 1, 10);
    s.cancel("q", "x");
    CompletableFuture<byte[]> a = s.forward("p", r1);
    s.advance(Duration.ofMinutes(1));
    assertInstanceOf(ForwardCodec.Result.class, ServingHarness.decode(a));
    assertEquals(0, s.node.forwardsCancelledBeforeArrival());
  }

  @Test
  void theMemoryIsBoundedInTime() {
    ServingHarness s = serving(); // forwardTimeoutMax 10 s: CANCELs are kept 30 s
    assertEquals(Duration.ofSeconds(30).toNanos(), s.node.earlyCancels().ttlNanos());
    s.cancel("p", "x");
    s.cancel("p", "y");
    s.advance(Duration.ofMillis(29_999));
    CompletableFuture<byte[]> x = s.forward("p", generating("x", 1, 10));
    s.advance(Duration.ofMillis(1));
    CompletableFuture<byte[]> y = s.forward("p", generating("y", 1, 10));
    s.advance(Duration.ofMinutes(1));
    assertTrue(ServingHarness.stoppedAnswer(ServingHarness.decode(x)));
    assertInstanceOf(ForwardCodec.Result.class, ServingHarness.decode(y));
  }

  @Test
  void theMemoryIsBoundedInSizeAndForgetsTheOldestFirst() {
    ServingHarness s = serving();
    int n = EarlyCancels.CAPACITY + 1;
    for (int i = 0; i < n; i++) {
      s.cancel("p", "c" + i);
    }
    assertEquals(EarlyCancels.CAPACITY, s.node.earlyCancels().cancelsRemembered());
    List<CompletableFuture<byte[]>> answers = new ArrayList<>();
    answers.add(s.forward("p", generating("c0", 1, 1))); // the oldest: forgotten
    answers.add(s.forward("p", generating("c1", 1, 1)));
    answers.add(s.forward("p", generating("c" + (n - 1), 1, 1)));
    s.advance(Duration.ofMinutes(1));
    assertInstanceOf(ForwardCodec.Result.class, ServingHarness.decode(answers.get(0)));
    assertTrue(ServingHarness.stoppedAnswer(ServingHarness.decode(answers.get(1))));
    assertTrue(ServingHarness.stoppedAnswer(ServingHarness.decode(answers.get(2))));
  }
}
