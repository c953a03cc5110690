package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.InFlightLimitException;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.ForwardingTransport;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * {@link NodeStats#coldPlacements()} counts requests whose first routing decision placed a cold
 * prompt, as its Javadoc says: not every decision a request takes (a fallback's decision for
 * the same cold prompt is a cold placement again), nor {@code explain}.
 */
class ColdPlacementCountTest {

  @Test
  void aRequestCountsOnceHoweverManyOfItsDecisionsPlaceItCold() {
    String[] refused = new String[1];
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.transportWrap = t -> new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        if (to.nodeId().equals(refused[0])) {
          return CompletableFuture.failedFuture(new InFlightLimitException(
              "60 requests and messages already in flight to " + to));
        }
        return super.request(to, payload, timeout);
      }
    };
    OracleCluster c = new OracleCluster(4, RouterConfig.defaults(), 1, h)
        .rtt(Duration.ofMillis(1)).start();
    // a cold prompt (nobody holds a block of it) whose rendezvous placement is a peer
    InferenceRequest r = null;
    RouteDecision first = null;
    for (int seed = 1; first == null || first.isLocal(); seed++) {
      r = new InferenceRequest("q1", prompt(seed, 256), GenerationParams.greedy(4));
      first = c.node("n0").explain(r);
      assertEquals(RouteDecision.Reason.COLD_PLACEMENT, first.reason(), first.toString());
    }
    c.node("n0").explain(r);
    assertEquals(0, c.node("n0").stats().coldPlacements(), "explain counts nothing");

    // n0's transport refuses the placement's peer: the request is placed again among the rest
    // (a cold prompt goes to a peer, or stays here, only by placement), so two decisions
    refused[0] = first.targetNodeId();
    InferenceResponse resp = c.submitAndWait("n0", r);
    assertEquals(2, resp.attempts(), resp.toString());
    assertEquals(FallbackCause.IN_FLIGHT_LIMIT, resp.fallbackCause());
    assertEquals(RouteDecision.Reason.COLD_PLACEMENT, resp.decision().reason());
    assertFalse(resp.servedBy().equals(refused[0]), resp.toString());
    assertArrayEquals(OracleCluster.expected(r), resp.result().outputTokens());
    NodeStats s = c.node("n0").stats();
    assertEquals(1, s.coldPlacements(), s.toString());
    assertEquals(1, s.requests(), s.toString());
  }
}
