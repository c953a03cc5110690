package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.InFlightLimitException;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.SimulatedEngine;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * A forward the sender's own transport refuses, its limit of requests in flight to the peer
 * reached ({@code HttpTransport}'s {@code maxInFlightPerPeer}), is nothing the peer said: the
 * peer is not cooled down and the refusal is not counted as push-back; the request goes to the
 * next candidate or runs locally ({@link FallbackCause#IN_FLIGHT_LIMIT}), and, nothing having
 * been sent, the refusal does not use up one of its forwards (up to
 * {@link RouterNode#MAX_UNSENT_FORWARDS} refusals). A BUSY the peer's side raised stays
 * push-back.
 */
class InFlightLimitForwardTest {

  static final int[] PREFIX = prompt(42, 480);

  private static InferenceRequest request(String id, int seed) {
    return new InferenceRequest(id, prompt(seed, 64), GenerationParams.greedy(4));
  }

  private static RouteDecision.Candidate candidate(RouteDecision d, String nodeId) {
    return d.candidates().stream().filter(c -> c.nodeId().equals(nodeId)).findFirst()
        .orElseThrow(() -> new AssertionError(nodeId + " is no candidate: " + d));
  }

  /**
   * Three nodes; n1 and n2 hold PREFIX, n1 more of it, so n0 forwards there first; n0's
   * transport fails its requests to n1 with {@code refusal}.
   */
  private static OracleCluster refusedByTheTransportToN1(Supplier<TransportException> refusal) {
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.transportWrap = t -> new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        if (to.nodeId().equals("n1")) {
          return CompletableFuture.failedFuture(refusal.get());
        }
        return super.request(to, payload, timeout);
      }
    };
    OracleCluster c = new OracleCluster(3, RouterConfig.builder()
        .policy(RoutingPolicy.LONGEST_PREFIX).coldPlacement(false).build(), 1, h)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 64)));
    c.warm("n2", concat(PREFIX, prompt(9, 16)));
    return c;
  }

  @Test
  void aRefusalOfTheSendersTransportGoesToTheNextPeerWithoutCoolingTheFirst() {
    OracleCluster c = refusedByTheTransportToN1(() -> new InFlightLimitException(
        "60 requests and messages already in flight to n1"));
    InferenceRequest r = new InferenceRequest("q1", concat(PREFIX, prompt(9, 64)),
        GenerationParams.greedy(4));
    assertEquals("n1", c.node("n0").explain(r).targetNodeId());

    InferenceResponse resp = c.submitAndWait("n0", r);
    assertEquals("n2", resp.servedBy(), resp.toString());
    assertEquals(FallbackCause.IN_FLIGHT_LIMIT, resp.fallbackCause());
    assertEquals(2, resp.attempts());
    assertArrayEquals(OracleCluster.expected(r), resp.result().outputTokens());
    NodeStats s = c.node("n0").stats();
    assertEquals(0, s.pushedBack(), s.toString());
    assertEquals(0, s.fallbacks().get(FallbackCause.BUSY));
    assertEquals(1, s.fallbacks().get(FallbackCause.IN_FLIGHT_LIMIT));
    assertEquals(1, s.totalFallbacks());
    // n1 is not cooled down: the next request for its prefix is meant for it again
    RouteDecision d = c.node("n0").explain(r);
    assertEquals("n1", d.targetNodeId(), d.toString());
    assertEquals(RouteDecision.SkipReason.NONE, candidate(d, "n1").skipped());
  }

  @Test
  void refusalsOfTheSendersTransportDoNotUseUpTheRequestsForwards() {
    // n1, n2 and n3 hold more of PREFIX than n4, and n0's transport is at its limit to each of
    // them: nothing reaches them, so the request goes on to n4, which holds the prefix too,
    // rather than running on n0 after three forwards that never left
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.transportWrap = t -> new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        if (!to.nodeId().equals("n4")) {
          return CompletableFuture.failedFuture(new InFlightLimitException(
              "60 requests and messages already in flight to " + to));
        }
        return super.request(to, payload, timeout);
      }
    };
    OracleCluster c = new OracleCluster(5, RouterConfig.builder()
        .policy(RoutingPolicy.LONGEST_PREFIX).coldPlacement(false).build(), 1, h)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 64)));
    c.warm("n2", concat(PREFIX, prompt(9, 48)));
    c.warm("n3", concat(PREFIX, prompt(9, 32)));
    c.warm("n4", concat(PREFIX, prompt(9, 16)));
    InferenceRequest r = new InferenceRequest("q1", concat(PREFIX, prompt(9, 64)),
        GenerationParams.greedy(4));
    assertEquals("n1", c.node("n0").explain(r).targetNodeId());

    InferenceResponse resp = c.submitAndWait("n0", r);
    assertEquals("n4", resp.servedBy(), resp.toString());
    assertTrue(resp.forwarded(), resp.toString());
    assertEquals(FallbackCause.IN_FLIGHT_LIMIT, resp.fallbackCause());
    assertEquals(4, resp.attempts());
    assertArrayEquals(OracleCluster.expected(r), resp.result().outputTokens());
    NodeStats s = c.node("n0").stats();
    assertEquals(3, s.fallbacks().get(FallbackCause.IN_FLIGHT_LIMIT), s.toString());
    assertEquals(0, s.servedLocally(), s.toString());
    assertEquals(1, s.forwarded(), s.toString());
  }

  @Test
  void refusalsOfTheSendersTransportEverywhereRunTheRequestLocallyOnce() {
    // every peer refused by n0's own transport: each is tried once, then the request runs here
    int[] refusedTo = new int[1];
    OracleCluster.Hooks h = refusingEveryRequest(refusedTo);
    OracleCluster c = new OracleCluster(6, RouterConfig.builder()
        .policy(RoutingPolicy.LONGEST_PREFIX).coldPlacement(false).build(), 1, h)
        .rtt(Duration.ofMillis(1)).start();
    for (int i = 1; i < 6; i++) {
      c.warm("n" + i, concat(PREFIX, prompt(9, 16 * i)));
    }
    refusedTo[0] = 0;
    InferenceRequest r = new InferenceRequest("q1", concat(PREFIX, prompt(9, 80)),
        GenerationParams.greedy(4));
    InferenceResponse resp = c.submitAndWait("n0", r);
    assertEquals("n0", resp.servedBy(), resp.toString());
    assertEquals(FallbackCause.IN_FLIGHT_LIMIT, resp.fallbackCause());
    assertEquals(5, refusedTo[0], "each peer tried once");
    assertEquals(6, resp.attempts());
    assertEquals(5, c.node("n0").stats().fallbacks().get(FallbackCause.IN_FLIGHT_LIMIT));
    assertEquals(1, c.engine("n0").stats().requests());
  }

  @Test
  void refusalsOfTheSendersTransportPastTheirBoundUseUpForwards() {
    // more peers than the refusals a request passes over: past them, refusals are forwards
    int peers = RouterNode.MAX_UNSENT_FORWARDS + RouterNode.MAX_FORWARDS + 4;
    int[] refusedTo = new int[1];
    OracleCluster.Hooks h = refusingEveryRequest(refusedTo);
    OracleCluster c = new OracleCluster(peers + 1, RouterConfig.builder()
        .policy(RoutingPolicy.LONGEST_PREFIX).coldPlacement(false).build(), 1, h)
        .rtt(Duration.ofMillis(1)).start();
    for (int i = 1; i <= peers; i++) {
      c.warm("n" + i, concat(PREFIX, prompt(9, 16)));
    }
    refusedTo[0] = 0;
    InferenceRequest r = new InferenceRequest("q1", concat(PREFIX, prompt(9, 16)),
        GenerationParams.greedy(4));
    assertTrue(c.node("n0").explain(r).candidates().stream().filter(x -> !x.local())
        .allMatch(x -> x.skipped() == RouteDecision.SkipReason.NONE), "a peer is skipped");
    InferenceResponse resp = c.submitAndWait("n0", r);
    assertEquals("n0", resp.servedBy(), resp.toString());
    assertEquals(16 + 3, refusedTo[0]);
    assertEquals(16 + 3 + 1, resp.attempts());
    assertEquals(16 + 3, c.node("n0").stats().fallbacks().get(FallbackCause.IN_FLIGHT_LIMIT));
  }

  @Test
  void aBusyOfThePeersSideStaysPushBack() {
    // a BUSY the transport reports for the peer (over HTTP, its 503) cools the peer down
    OracleCluster c = refusedByTheTransportToN1(() -> new TransportException(
        TransportException.Kind.BUSY, "n1 is busy"));
    InferenceRequest r = new InferenceRequest("q1", concat(PREFIX, prompt(9, 64)),
        GenerationParams.greedy(4));
    InferenceResponse resp = c.submitAndWait("n0", r);
    assertEquals("n2", resp.servedBy(), resp.toString());
    assertEquals(FallbackCause.BUSY, resp.fallbackCause());
    NodeStats s = c.node("n0").stats();
    assertEquals(1, s.pushedBack());
    assertEquals(1, s.fallbacks().get(FallbackCause.BUSY));
    assertEquals(0, s.fallbacks().get(FallbackCause.IN_FLIGHT_LIMIT));
    RouteDecision d = c.node("n0").explain(r);
    assertEquals(RouteDecision.SkipReason.BUSY_COOLDOWN, candidate(d, "n1").skipped(),
        d.toString());
  }

  @Test
  void overHttpARequestBeyondTheSendersLimitRunsLocallyAndThePeerIsNotCooled()
      throws Exception {
    byte[] key = "in-flight-limit-cluster-key-32by".getBytes();
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .coldPlacement(false).build();
    // 4 slots to n1, the last one kept for messages: 3 forwards fill what requests may take
    try (HttpNodePair p = new HttpNodePair("in-flight-limit", cfg, key,
        b -> b.maxInFlightPerPeer(4), b -> b,
        e -> e.slots(4).prefillNanosPerToken(1_000).decodeNanosPerToken(1_000)
            .vocabularySize(1000))) {
      p.e1.stallNext(3);
      List<CompletableFuture<InferenceResponse>> held = new ArrayList<>();
      try {
        beyondTheLimit(p, held);
      } finally {
        for (CompletableFuture<InferenceResponse> f : held) {
          f.cancel(true);
        }
      }
      // the CANCELs of the held forwards hold slots until n1 has taken them: requests run here
      // meanwhile, never cooling n1 down, and go to n1 again once they are through
      InferenceResponse next = null;
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      for (int i = 0; System.nanoTime() < deadline; i++) {
        next = p.n0.submit(request("after" + i, 30 + i)).get(30, TimeUnit.SECONDS);
        if (next.forwarded()) {
          break;
        }
        assertEquals(FallbackCause.IN_FLIGHT_LIMIT, next.fallbackCause(), next.toString());
        Thread.sleep(5);
      }
      assertEquals("n1", next.servedBy(), next.toString());
      assertEquals(1, next.attempts());
      assertEquals(0, p.n0.stats().pushedBack());
    }
  }

  /** Holds n0's 3 request slots to n1 with stalled forwards, then submits one more. */
  private static void beyondTheLimit(HttpNodePair p,
      List<CompletableFuture<InferenceResponse>> held) throws Exception {
    for (int i = 0; i < 3; i++) {
      held.add(p.n0.submit(request("held" + i, 10 + i)));
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (p.e1.stats().requests() < 3 && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    assertEquals(3, p.e1.stats().requests(), "the 3 forwards did not reach n1's engine");

    InferenceRequest r = request("beyond", 20);
    InferenceResponse resp = p.n0.submit(r).get(30, TimeUnit.SECONDS);
    assertEquals("n0", resp.servedBy(), resp.toString());
    assertFalse(resp.forwarded());
    assertArrayEquals(SimulatedEngine.expectedOutput(r.tokens(), r.params(), 1000),
        resp.result().outputTokens());
    assertEquals(1, p.t0.stats().outboundBusy(), "refused by n0's transport");
    assertEquals(3, p.t1.stats().requestsReceived(), "more than the held forwards reached n1");
    assertEquals(0, p.n1.stats().refusedForPeers());

    NodeStats s = p.n0.stats();
    assertEquals(0, s.pushedBack(), "n1 said nothing, yet counted as push-back: " + s);
    assertEquals(0, s.fallbacks().get(FallbackCause.BUSY), s.toString());
    // n1 is idle but for the held forwards: it is not cooled down
    RouteDecision d = p.n0.explain(request("next", 21));
    assertEquals(RouteDecision.SkipReason.NONE, d.candidates().get(1).skipped(), d.toString());
    assertEquals(FallbackCause.IN_FLIGHT_LIMIT, resp.fallbackCause());
    assertEquals(1, s.fallbacks().get(FallbackCause.IN_FLIGHT_LIMIT));
    assertEquals(1, s.totalFallbacks());
    assertTrue(held.stream().noneMatch(CompletableFuture::isDone), "a held forward ended");
  }

  /** Hooks whose transports refuse every request as their own in-flight limit, counting them. */
  private static OracleCluster.Hooks refusingEveryRequest(int[] refusedTo) {
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.transportWrap = t -> new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        refusedTo[0]++;
        return CompletableFuture.failedFuture(new InFlightLimitException(
            "60 requests and messages already in flight to " + to));
      }
    };
    return h;
  }
}
