package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.Transport;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A request with stops forwarded between two real nodes: the version-4 FORWARD carries the stops
 * to the peer's engine; a peer from before stops (which speaks FORWARD versions 1 to 3) rejects
 * it with its protocol error, and the sender never sends it again in a version that peer
 * speaks (the peer would run it without its stops): the request runs locally, with its stops,
 * and from then on requests with stops skip that peer ({@code NO_STOPS}) while requests without
 * stops still reach it.
 */
class StopsForwardTest extends TwoNodeForwardHarness {

  static final GenerationParams STOPS = new GenerationParams(8, 0.0, 1.0, 7L,
      List.of("\n", "Observation:"), List.of(2, 99));

  /** While true, n1 rejects FORWARDs of a version above 3 as a node from before stops does. */
  volatile boolean peerBeforeStops = true;
  /** FORWARDs n1 rejected. */
  int rejected;

  /** n1's transport: a node that speaks FORWARD versions 1 to 3 while {@link #peerBeforeStops}. */
  Transport beforeStops(Transport t) {
    return BeforeScopesTransport.wrap(t, ForwardCodec.STREAMING_FORWARD_VERSION,
        () -> peerBeforeStops, new BeforeScopesTransport.Observer() {
          @Override
          public void rejected() {
            rejected++;
          }
        });
  }

  void start(boolean peerKnowsStops) {
    peerBeforeStops = !peerKnowsStops;
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    startNodes(cfg, cfg, this::beforeStops);
  }

  static InferenceRequest withStops(String id, int[] t) {
    return new InferenceRequest(id, t, STOPS);
  }

  @Test
  void theForwardCarriesTheStopsToThePeersEngine() {
    start(true);
    int[] t = OracleCluster.prompt(3, 320);
    view.holds(CacheScope.DEFAULT, t);
    InferenceResponse r = submit(withStops("s1", t), null);
    assertEquals("n1", r.servedBy(), r.toString());
    assertTrue(r.forwarded());
    assertEquals(List.of(ForwardCodec.STOPS_FORWARD_VERSION), forwardVersions);
    assertEquals(STOPS, e1.ran.get(0).params());
    // streamed too: the same version, the stream asked for within it
    InferenceResponse s = submit(withStops("s2", t), (tokens, text) -> { });
    assertEquals("n1", s.servedBy(), s.toString());
    assertEquals(List.of(4, 4), forwardVersions);
    assertEquals(STOPS, e1.ran.get(1).params());
  }

  @Test
  void aPeerFromBeforeStopsNeverGetsTheRequestWithoutItsStops() {
    start(false);
    int[] t = OracleCluster.prompt(4, 320);
    view.holds(CacheScope.DEFAULT, t);
    InferenceResponse r = submit(withStops("s1", t), null);
    assertEquals("n0", r.servedBy(), r.toString());
    assertFalse(r.forwarded());
    assertEquals(FallbackCause.PROTOCOL_ERROR, r.fallbackCause());
    assertEquals(2, r.attempts());
    assertEquals(List.of(4), forwardVersions, "sent once, never again in an older version");
    assertTrue(e1.ran.isEmpty());
    assertEquals(STOPS, e0.ran.get(0).params(), "it ran here, with its stops");
  }

  @Test
  void aStreamedRequestIsNotSentAgainWithoutStreamingAndWithoutItsStops() {
    // the rejection of a streaming FORWARD by a node from before streaming makes the sender send
    // it again without streaming; a request with stops must not be sent again in any version
    start(false);
    int[] t = OracleCluster.prompt(5, 320);
    view.holds(CacheScope.DEFAULT, t);
    List<int[]> pieces = new ArrayList<>();
    InferenceResponse r = submit(withStops("s1", t), (tokens, text) -> pieces.add(tokens));
    assertEquals("n0", r.servedBy(), r.toString());
    assertEquals(FallbackCause.PROTOCOL_ERROR, r.fallbackCause());
    assertEquals(List.of(4), forwardVersions);
    assertEquals(1, rejected);
    assertTrue(e1.ran.isEmpty());
    assertEquals(STOPS, e0.ran.get(0).params());
  }

  @Test
  void requestsWithStopsSkipAPeerFromBeforeStopsWhileOthersKeepGoingThere() {
    view.generation = 41;
    start(false);
    // a fresh prompt per request, held by the peer only, so the local tree never ties
    int[][] t = new int[6][];
    int[][] plain = new int[6][];
    for (int k = 0; k < t.length; k++) {
      t[k] = OracleCluster.prompt(200 + k, 320);
      plain[k] = OracleCluster.prompt(300 + k, 320);
      view.holds(CacheScope.DEFAULT, t[k]);
      view.holds(CacheScope.DEFAULT, plain[k]);
    }
    submit(withStops("s0", t[0]), null);
    int sent = forwardVersions.size();
    for (int k = 1; k < 3; k++) {
      InferenceResponse s = submit(withStops("s" + k, t[k]), null);
      assertEquals("n0", s.servedBy(), s.toString());
      assertEquals(1, s.attempts());
      assertEquals(RouteDecision.SkipReason.NO_STOPS,
          s.decision().candidates().get(1).skipped(), s.decision().toString());
      InferenceResponse p = submit(InferenceRequest.of("p" + k, plain[k]), null);
      assertEquals("n1", p.servedBy(), p.toString());
      assertEquals(RouteDecision.SkipReason.NONE, p.decision().candidates().get(1).skipped());
    }
    assertEquals(sent + 2, forwardVersions.size(), "only the requests without stops went out");
    assertEquals(List.of(1, 1), forwardVersions.subList(sent, sent + 2));
    // the peer restarts, upgraded: requests with stops reach it again
    peerBeforeStops = false;
    view.generation = 42;
    InferenceResponse upgraded = submit(withStops("s5", t[5]), null);
    assertEquals("n1", upgraded.servedBy(), upgraded.toString());
    assertEquals(STOPS, e1.ran.get(e1.ran.size() - 1).params());
  }
}
