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
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.SimulatedEngine;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A FORWARD too large for the link (the sender's transport limit, or the peer's lower one) is
 * nothing wrong with the peer: the request runs locally, without trying the other peers (whose
 * link has the same limit) and without cooling the peer down, and the fallback says why.
 */
class TooLargeForwardTest {

  static final int[] PREFIX = prompt(42, 480);
  static final int[] OTHER_PREFIX = prompt(43, 480);
  /** 480 + 2,600 tokens below 1,000: about 5.5 KB as a FORWARD. */
  static final InferenceRequest BIG = new InferenceRequest("big",
      concat(PREFIX, prompt(7, 2_600)), GenerationParams.greedy(4));
  /** 520 tokens, of another prefix: about 1 KB. */
  static final InferenceRequest SMALL = new InferenceRequest("small",
      concat(OTHER_PREFIX, prompt(8, 40)), GenerationParams.greedy(4));
  /** What the links carry: more than SMALL's FORWARD, less than BIG's. */
  static final int LIMIT = 4_096;

  @Test
  void theFramesAreOnEitherSideOfTheLimit() {
    assertTrue(ForwardCodec.forward(BIG, "n0", 1).length > LIMIT);
    assertTrue(ForwardCodec.forward(SMALL, "n0", 1).length < LIMIT);
  }

  @Test
  void inTheSimulatedClusterItRunsLocallyAndNoPeerIsTriedOrCooled() {
    // every link carries LIMIT bytes: a larger request fails as the HTTP transport fails it,
    // before anything is sent
    Map<String, AtomicInteger> sentTo = new ConcurrentHashMap<>();
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.transportWrap = t -> new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        if (payload.length > LIMIT) {
          return CompletableFuture.failedFuture(new TransportException(
              TransportException.Kind.TOO_LARGE, "request of " + payload.length
                  + " bytes exceeds maxMessageBytes " + LIMIT));
        }
        sentTo.computeIfAbsent(to.nodeId(), k -> new AtomicInteger()).incrementAndGet();
        return super.request(to, payload, timeout);
      }
    };
    OracleCluster c = new OracleCluster(3, RouterConfig.builder()
        .policy(RoutingPolicy.LONGEST_PREFIX).coldPlacement(false).build(), 1, h)
        .rtt(Duration.ofMillis(1)).start();
    for (String peer : List.of("n1", "n2")) {
      c.warm(peer, concat(PREFIX, prompt(9, 40)));
      c.warm(peer, concat(OTHER_PREFIX, prompt(9, 40)));
    }

    InferenceResponse big = c.submitAndWait("n0", BIG);
    assertEquals("n0", big.servedBy());
    assertFalse(big.forwarded());
    assertEquals(FallbackCause.TOO_LARGE, big.fallbackCause());
    assertEquals(2, big.attempts(), "one forward, then the local run: " + big);
    assertArrayEquals(OracleCluster.expected(BIG), big.result().outputTokens());
    assertEquals(Map.of(), Map.copyOf(sentTo), "another peer was tried");
    NodeStats s = c.node("n0").stats();
    assertEquals(1, s.fallbacks().get(FallbackCause.TOO_LARGE));
    assertEquals(0, s.fallbacks().get(FallbackCause.PROTOCOL_ERROR));
    assertEquals(1, s.totalFallbacks());
    assertEquals(1, s.servedLocally());

    // the peer was not cooled down: the next request for its prefix goes there at once
    InferenceResponse small = c.submitAndWait("n0", SMALL);
    assertTrue(small.forwarded(), small.toString());
    assertEquals(1, small.attempts());
    assertEquals(FallbackCause.NONE, small.fallbackCause());
  }

  @Test
  void aLocalFailureAfterATooLargeForwardIsFinalWithoutTryingAnotherPeer() {
    // the forward is too large for the link, the local run then fails retryably: the other
    // peers' links have the same limit, so the local failure is final (old code: the local
    // failure's fallback sent the request to the next peer, too large again, then failed)
    AtomicInteger tooLarge = new AtomicInteger();
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.transportWrap = t -> new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        if (payload.length > LIMIT) {
          tooLarge.incrementAndGet();
          return CompletableFuture.failedFuture(new TransportException(
              TransportException.Kind.TOO_LARGE, "request of " + payload.length
                  + " bytes exceeds maxMessageBytes " + LIMIT));
        }
        return super.request(to, payload, timeout);
      }
    };
    OracleCluster c = new OracleCluster(3, RouterConfig.builder()
        .policy(RoutingPolicy.LONGEST_PREFIX).coldPlacement(false).build(), 1, h)
        .rtt(Duration.ofMillis(1)).start();
    for (String peer : List.of("n1", "n2")) {
      c.warm(peer, concat(PREFIX, prompt(9, 40)));
    }
    c.engine("n0").failNext(1);
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(BIG);
    c.sim.runUntilIdle(1_000_000);
    assertTrue(f.isCompletedExceptionally(), "the local engine's failure is final");
    Throwable e = f.handle((r, t) -> t).join();
    assertTrue(e instanceof io.github.prefixrouter.RequestFailedException, String.valueOf(e));
    assertEquals(1, tooLarge.get(), "a FORWARD too large for the link was sent again");
    NodeStats s = c.node("n0").stats();
    assertEquals(1, s.fallbacks().get(FallbackCause.TOO_LARGE));
    assertEquals(0, s.fallbacks().get(FallbackCause.LOCAL_FAILED));
    assertEquals(0, s.inFlight());
  }

  /**
   * 520 tokens asking for 2,500 outputs: a FORWARD of about 1 KB, an answer of about 5 KB (the
   * output's token ids, 2 bytes each, and its text).
   */
  static final InferenceRequest LONG_ANSWER = new InferenceRequest("long",
      concat(OTHER_PREFIX, prompt(10, 40)), GenerationParams.greedy(2_500));

  /** Two nodes on loopback; n0's FORWARDs go to n1, which holds every prefix. */
  private static void overHttp(int n0Limit, int n1Limit, boolean refusedByPeer)
      throws Exception {
    overHttp(n0Limit, n1Limit, refusedByPeer, BIG, false);
  }

  /**
   * The same with {@code request}, which reaches n1 and runs there if {@code ranAtPeer} (its
   * answer is what is too large).
   */
  private static void overHttp(int n0Limit, int n1Limit, boolean refusedByPeer,
      InferenceRequest request, boolean ranAtPeer) throws Exception {
    byte[] key = "too-large-test-cluster-key-32-by".getBytes();
    // gossip within the smaller transport limit, which a node's build requires
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .coldPlacement(false).gossipMessageBytes(Math.min(n0Limit, n1Limit)).build();
    try (HttpNodePair p = new HttpNodePair("too-large", cfg, key,
        b -> b.maxMessageBytes(n0Limit), b -> b.maxMessageBytes(n1Limit),
        // 10 us a token: LONG_ANSWER's 2,500 tokens take 25 ms where they run (5 s at 1 ms)
        e -> e.prefillNanosPerToken(1_000).decodeNanosPerToken(10_000).vocabularySize(1000))) {
      RouterNode n0 = p.n0;
      InferenceResponse big = n0.submit(request).get(60, TimeUnit.SECONDS);
      assertEquals("n0", big.servedBy());
      assertEquals(FallbackCause.TOO_LARGE, big.fallbackCause());
      assertEquals(2, big.attempts(), big.toString());
      assertArrayEquals(SimulatedEngine.expectedOutput(request.tokens(), request.params(), 1000),
          big.result().outputTokens());
      assertEquals(1, n0.stats().fallbacks().get(FallbackCause.TOO_LARGE));
      assertEquals(0, n0.stats().fallbacks().get(FallbackCause.PROTOCOL_ERROR));
      assertEquals(ranAtPeer ? 1 : 0, p.e1.stats().requests(), "ran at the peer");
      assertEquals(ranAtPeer ? 1 : 0, p.t1.stats().requestsReceived());
      assertEquals(refusedByPeer && !ranAtPeer ? 1 : 0, p.t1.stats().oversizeRejected());

      // not cooled down: the next request is forwarded to n1 at once
      InferenceResponse small = n0.submit(SMALL).get(30, TimeUnit.SECONDS);
      assertEquals("n1", small.servedBy());
      assertEquals(1, small.attempts());
      assertEquals(1, n0.stats().totalFallbacks());
    }
  }

  @Test
  void overHttpAForwardAboveTheSendersLimitRunsLocallyAndThePeerIsNotCooled()
      throws Exception {
    overHttp(LIMIT, 4 << 20, false);
  }

  @Test
  void overHttpAForwardThePeerRefusesWith413RunsLocallyAndThePeerIsNotCooled()
      throws Exception {
    overHttp(4 << 20, LIMIT, true);
  }

  @Test
  void overHttpAnAnswerAboveTheSendersLimitRunsLocallyAndThePeerIsNotCooled()
      throws Exception {
    assertTrue(ForwardCodec.forward(LONG_ANSWER, "n0", 1).length < LIMIT);
    overHttp(LIMIT, 4 << 20, false, LONG_ANSWER, true);
  }

  @Test
  void overHttpAnAnswerAboveThePeersLimitIsRefusedWith413AndRunsLocally() throws Exception {
    overHttp(4 << 20, LIMIT, true, LONG_ANSWER, true);
  }
}
