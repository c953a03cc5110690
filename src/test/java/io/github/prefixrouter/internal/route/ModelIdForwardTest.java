package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Two real nodes with model ids ({@link RouterConfig#modelId()}): nodes of one model id forward
 * to each other in version-5 FORWARDs; a node of another model id (or none) refuses every
 * request, which then runs at its origin, and the origin sends that node nothing more until it
 * restarts ({@code OTHER_MODEL}); a node from before model ids is never sent a request in a
 * version that would hide the model id. No request is ever served by another model.
 */
class ModelIdForwardTest extends TwoNodeForwardHarness {

  /** While true, n1 rejects FORWARDs above version 4, as a node from before model ids does. */
  volatile boolean peerBeforeModelIds;

  void start(String model0, String model1) {
    RouterConfig.Builder b = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX);
    startNodes(b.modelId(model0).build(), b.modelId(model1).build(),
        t -> BeforeScopesTransport.wrap(t, ForwardCodec.STOPS_FORWARD_VERSION,
            () -> peerBeforeModelIds, new BeforeScopesTransport.Observer() { }));
  }

  /** A request whose prefix only n1 holds. */
  InferenceRequest heldByPeer(String id, int seed) {
    int[] t = OracleCluster.prompt(seed, 320);
    view.holds(CacheScope.DEFAULT, t);
    return InferenceRequest.of(id, t);
  }

  @Test
  void nodesOfOneModelIdForwardInVersionFiveWithEverythingTheRequestCarries() {
    start("llama-3-8b@awq", "llama-3-8b@awq");
    InferenceResponse r = submit(heldByPeer("r1", 1), null);
    assertEquals("n1", r.servedBy(), r.toString());
    // streamed, with stops and a scope: all in the one version
    int[] t = OracleCluster.prompt(2, 320);
    CacheScope scope = CacheScope.of("sql-lora", "tenant-1");
    view.holds(scope, t);
    InferenceRequest full = new InferenceRequest("r2", t, StopsForwardTest.STOPS, scope);
    List<int[]> pieces = new ArrayList<>();
    InferenceResponse s = submit(full, (tokens, text) -> pieces.add(tokens));
    assertEquals("n1", s.servedBy(), s.toString());
    assertEquals(List.of(5, 5), forwardVersions);
    assertEquals(full.params(), e1.ran.get(1).params());
    assertEquals(scope, e1.ran.get(1).scope());
    assertFalse(pieces.isEmpty(), "streamed");
    assertEquals(0, n1.otherModelRefusals());
  }

  @Test
  void aNodeOfAnotherModelIdServesNoRequestAndIsSkippedUntilItRestarts() {
    view.generation = 41;
    start("llama-3-8b", "llama-3-70b");
    InferenceResponse r = submit(heldByPeer("r1", 3), null);
    assertEquals("n0", r.servedBy(), r.toString());
    assertFalse(r.forwarded());
    assertEquals(FallbackCause.PROTOCOL_ERROR, r.fallbackCause());
    assertEquals(2, r.attempts());
    assertEquals(1, n1.otherModelRefusals());
    for (int k = 0; k < 3; k++) {
      InferenceResponse next = submit(heldByPeer("s" + k, 10 + k), null);
      assertEquals("n0", next.servedBy(), next.toString());
      assertEquals(1, next.attempts(), "not tried");
      assertEquals(RouteDecision.SkipReason.OTHER_MODEL,
          next.decision().candidates().get(1).skipped(), next.decision().toString());
    }
    assertEquals(List.of(5), forwardVersions, "only the first request went out");
    assertTrue(e1.ran.isEmpty(), "the other model served nothing");
    // restarted (a new generation), still another model: tried once more, refused again
    view.generation = 42;
    assertEquals("n0", submit(heldByPeer("t", 20), null).servedBy());
    assertEquals(2, n1.otherModelRefusals());
    assertTrue(e1.ran.isEmpty());
  }

  @Test
  void aNodeWithoutAModelIdAndOneWithOneDoNotServeEachOther() {
    start("", "llama-3-8b");
    InferenceResponse r = submit(heldByPeer("r1", 4), null);
    assertEquals("n0", r.servedBy(), r.toString());
    assertEquals(List.of(1), forwardVersions, "a node without a model id sends what it always sent");
    assertEquals(1, n1.otherModelRefusals());
    InferenceResponse next = submit(heldByPeer("r2", 5), null);
    assertEquals(RouteDecision.SkipReason.OTHER_MODEL,
        next.decision().candidates().get(1).skipped(), next.decision().toString());
    assertTrue(e1.ran.isEmpty());
  }

  @Test
  void aNodeFromBeforeModelIdsIsNeverSentARequestThatHidesTheModelId() {
    peerBeforeModelIds = true;
    start("llama-3-8b", "llama-3-8b");
    List<int[]> pieces = new ArrayList<>();
    InferenceResponse r = submit(heldByPeer("r1", 6), (tokens, text) -> pieces.add(tokens));
    assertEquals("n0", r.servedBy(), r.toString());
    assertEquals(FallbackCause.PROTOCOL_ERROR, r.fallbackCause());
    assertEquals(List.of(5), forwardVersions, "not sent again without streaming or the model id");
    InferenceResponse next = submit(heldByPeer("r2", 7), null);
    assertEquals(RouteDecision.SkipReason.OTHER_MODEL,
        next.decision().candidates().get(1).skipped(), next.decision().toString());
    assertEquals(List.of(5), forwardVersions);
    assertTrue(e1.ran.isEmpty());
    assertEquals(0, n1.otherModelRefusals(), "its decoder refused it, not its model id");
  }

  @Test
  void nodesWithoutModelIdsBehaveAsBefore() {
    start("", "");
    assertEquals("n1", submit(heldByPeer("r1", 8), null).servedBy());
    assertEquals(List.of(1), forwardVersions);
  }
}
