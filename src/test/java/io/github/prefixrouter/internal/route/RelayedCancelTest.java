package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * CANCELs of relayed requests (hop limit above 1). A CANCEL names the request's origin, as its
 * FORWARD does, and a serving node keys its peers' requests by sender, origin and id: a relay
 * passing on requests of one id for several origins reaches each with its own CANCEL, and a
 * client's cancel at the origin travels the whole path, origin to relay to the node that runs
 * the request.
 */
class RelayedCancelTest {

  static final int[] PREFIX = prompt(42, 480);

  static InferenceRequest generating(String id, long question, int maxTokens) {
    return new InferenceRequest(id, concat(PREFIX, prompt(question, 40)),
        GenerationParams.greedy(maxTokens));
  }

  // ------------------------------------------------------------ one relay, two origins, one id

  @Test
  void aRelaysCancelReachesTheRequestOfTheOriginItNames() {
    // relay r passes on request "x" of origin a, then another "x" of origin b: both run here
    ServingHarness s = new ServingHarness(RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).hopLimit(2).build(), UnaryOperator.identity());
    InferenceRequest fromA = generating("x", 1, 200); // about a second each
    InferenceRequest fromB = generating("x", 2, 200);
    CompletableFuture<byte[]> a = s.relayed("r", "a", fromA);
    CompletableFuture<byte[]> b = s.relayed("r", "b", fromB);
    s.advance(Duration.ofMillis(50));
    s.cancel("r", "b", "x"); // b's client gave up

    assertTrue(b.isDone(), "b's request was not cancelled");
    ForwardCodec.Message mb = ServingHarness.decode(b);
    assertInstanceOf(ForwardCodec.Failed.class, mb, "b's request was not cancelled");
    assertFalse(((ForwardCodec.Failed) mb).retryable());
    assertFalse(a.isDone(), "a's request was cancelled instead");
    s.advance(Duration.ofSeconds(10));
    assertTrue(a.isDone(), "a's request unanswered");
    ForwardCodec.Message ma = ServingHarness.decode(a);
    assertInstanceOf(ForwardCodec.Result.class, ma, String.valueOf(ma));
    assertArrayEquals(expected(fromA), ((ForwardCodec.Result) ma).result().outputTokens());
    assertEquals(0, s.node.stats().inFlight());
  }

  @Test
  void eachOriginsRequestOfOneIdGetsDuplicateDetection() {
    ServingHarness s = new ServingHarness(RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).hopLimit(2).build(), UnaryOperator.identity());
    InferenceRequest fromA = generating("x", 1, 100);
    InferenceRequest fromB = generating("x", 2, 100);
    CompletableFuture<byte[]> a = s.relayed("r", "a", fromA);
    CompletableFuture<byte[]> b = s.relayed("r", "b", fromB);
    s.advance(Duration.ofMillis(50));
    CompletableFuture<byte[]> again = s.relayed("r", "b", fromB); // delivered twice
    s.advance(Duration.ofSeconds(10));
    assertEquals(1, s.runsOf(fromA).size());
    assertEquals(1, s.runsOf(fromB).size(), "the second origin's duplicate ran again");
    for (CompletableFuture<byte[]> f : java.util.List.of(a, b, again)) {
      assertTrue(f.isDone(), "unanswered");
      assertInstanceOf(ForwardCodec.Result.class, ServingHarness.decode(f));
    }
    assertArrayEquals(expected(fromB),
        ((ForwardCodec.Result) ServingHarness.decode(again)).result().outputTokens());
  }

  @Test
  void aCancelNamingItsSenderStillReachesTheSendersOwnRequest() {
    // what a node sends for a request its client submitted, as nodes always did
    ServingHarness s = new ServingHarness(RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).hopLimit(2).build(), UnaryOperator.identity());
    InferenceRequest own = generating("x", 1, 200);
    InferenceRequest relayed = generating("x", 2, 200);
    CompletableFuture<byte[]> r = s.relayed("p", "a", relayed);
    CompletableFuture<byte[]> o = s.forward("p", own);
    s.advance(Duration.ofMillis(50));
    s.cancel("p", "x");
    assertTrue(o.isDone(), "the sender's own request was not cancelled");
    assertInstanceOf(ForwardCodec.Failed.class, ServingHarness.decode(o));
    assertFalse(r.isDone(), "the relayed request of another origin was cancelled");
    s.advance(Duration.ofSeconds(10));
    assertTrue(r.isDone(), "the relayed request unanswered");
    assertInstanceOf(ForwardCodec.Result.class, ServingHarness.decode(r));
  }

  // ------------------------------------------------------------ origin -> relay -> server

  /**
   * Three nodes, hop limit 2: n0 takes n1 for warm (it is not), so it forwards there; n1 sees
   * n2 warm for the prompt's prefix and relays the request to it (never back to n0).
   */
  private static OracleCluster relayPath() {
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).hopLimit(2).build();
    OracleCluster c = new OracleCluster(3, cfg, 1).rtt(Duration.ofMillis(1));
    c.warm("n2", concat(PREFIX, prompt(1, 40)));
    c.believesWarm("n0", "n1");
    return c.start();
  }

  private static void aClientsCancelTravelsTheRelayPath(boolean streamed) {
    OracleCluster c = relayPath();
    long warmed = c.engine("n2").stats().requests();
    InferenceRequest r = generating("r1", 2, 200); // n2 works on it for about a second
    StreamRecorder rec = new StreamRecorder(expected(r), c.sim::nanoTime);
    CompletableFuture<InferenceResponse> f =
        streamed ? c.node("n0").submit(r, rec) : c.node("n0").submit(r);
    c.sim.advanceBy(Duration.ofMillis(100).toNanos());
    assertEquals(warmed + 1, c.engine("n2").stats().requests(), "the request did not reach n2");
    assertEquals(0, c.engine("n1").stats().requests(), "the relay ran it");
    if (streamed) {
      assertTrue(rec.tokens().length > 0, "nothing streamed along the path yet: " + rec);
    }

    assertTrue(f.cancel(true));
    c.sim.runUntilIdle(1_000_000);
    assertEquals(1, c.engine("n2").stats().cancelled(), "n2 still generates for nobody");
    assertEquals(0, c.engine("n0").stats().requests());
    assertEquals(0, c.engine("n1").stats().requests(), "the relay ran the cancelled request");
    assertEquals(0, c.node("n2").stats().servedForPeers(), "n2 served the cancelled request");
    for (String n : c.nodes.keySet()) {
      assertEquals(0, c.node(n).stats().inFlight(), n + " still holds the request");
    }
    assertTrue(rec.clean(), rec.toString());
  }

  @Test
  void aClientsCancelAtTheOriginStopsTheRunTwoHopsAway() {
    aClientsCancelTravelsTheRelayPath(false);
  }

  @Test
  void aClientsCancelOfAStreamedRequestStopsTheRunTwoHopsAway() {
    aClientsCancelTravelsTheRelayPath(true);
  }

  @Test
  void aRelayPassesOnTheCancelOfOneOriginOnlyWhenItRelaysOneIdForTwo() {
    // n0 and n3 both submit "r1" (ids are unique per origin only); both take n1 for warm, and
    // n1 relays both to n2; n0's client then cancels
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).hopLimit(2).build();
    OracleCluster c = new OracleCluster(4, cfg, 1).rtt(Duration.ofMillis(1));
    c.warm("n2", concat(PREFIX, prompt(1, 40)));
    c.believesWarm("n0", "n1").believesWarm("n3", "n1");
    c.start();
    InferenceRequest of3 = generating("r1", 3, 100);
    InferenceRequest of0 = generating("r1", 2, 100);
    CompletableFuture<InferenceResponse> f3 = c.node("n3").submit(of3);
    c.sim.advanceBy(Duration.ofMillis(10).toNanos());
    CompletableFuture<InferenceResponse> f0 = c.node("n0").submit(of0);
    c.sim.advanceBy(Duration.ofMillis(10).toNanos());
    assertEquals(2, c.node("n2").stats().inFlight(), "n1 did not relay both to n2");

    assertTrue(f0.cancel(true));
    InferenceResponse a3 = c.runUntilDone(f3).join();
    assertEquals("n2", a3.servedBy(), "n3's request was cancelled at n2 and run elsewhere");
    assertArrayEquals(expected(of3), a3.result().outputTokens());
    assertEquals(0, c.engine("n1").stats().requests(), "the relay ran a request itself");
    c.sim.runUntilIdle(1_000_000);
    for (String n : c.nodes.keySet()) {
      assertEquals(0, c.node(n).stats().inFlight(), n + " still holds a request");
    }
  }
}
