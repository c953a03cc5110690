package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.RoutePlannerTest.HASHER;
import static io.github.prefixrouter.internal.route.RoutePlannerTest.MS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouteDecision.Reason;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.EngineLoad;
import org.junit.jupiter.api.Test;

/**
 * Routing under cache scopes: a peer's replica holds chain hashes, which start from the scope's
 * root, so a prefix cached under one scope attracts only requests of that scope; the local tree
 * matches per scope.
 */
class ScopedRoutingTest {

  static final long A = BlockHasher.scopeRoot(CacheScope.adapter("lora-a"));
  static final long B = BlockHasher.scopeRoot(CacheScope.of("lora-a", "tenant-2"));

  /** The peer holds the scope's chain of the first {@code length} tokens. */
  static RoutePlannerTest.ScriptedView holdsIn(
      RoutePlannerTest.ScriptedView v, String id, long scopeRoot, int[] tokens, int length) {
    long[] c = new long[length / 16];
    int n = HASHER.extend(scopeRoot, tokens, 0, length, c);
    for (int i = 0; i < n; i++) {
      v.blocks.get(id).add(c[i]);
    }
    return v;
  }

  static RoutePlanner planner(RouterConfig cfg, PeerView view, ConcurrentPrefixTree tree) {
    return new RoutePlanner(cfg, "me", new TreeIndex(tree), new BlockChain(HASHER), view,
        new CostModel(cfg.initialPrefillNanosPerToken()), new PeerHealth(), () -> 0L,
        () -> EngineLoad.IDLE, true);
  }

  @Test
  void aPeerHoldingAPrefixUnderOneScopeAttractsOnlyThatScope() {
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    int[] t = RoutePlannerTest.tokens(21, 1024);
    RoutePlannerTest.ScriptedView v = new RoutePlannerTest.ScriptedView().peer("p", MS);
    holdsIn(v, "p", A, t, 1024);
    RoutePlanner planner = planner(cfg, v, ConcurrentPrefixTree.selfManaged(1 << 20));
    for (int round = 0; round < 3; round++) { // later rounds go through the prefix hash cache
      RouteDecision a = planner.decide(A, t);
      assertEquals(Reason.PEER_LONGEST, a.reason(), a.toString());
      assertEquals("p", a.targetNodeId());
      assertEquals(1024, a.candidates().get(1).matchedTokens());
      for (long other : new long[] {B, BlockHasher.ROOT_PARENT}) {
        RouteDecision d = planner.decide(other, t);
        assertTrue(d.isLocal(), d.toString());
        assertEquals(0, d.candidates().get(1).matchedTokens(), d.toString());
      }
      RouteDecision unscoped = planner.decide(t);
      assertTrue(unscoped.isLocal(), unscoped.toString());
    }
  }

  @Test
  void theLocalTreeMatchesPerScope() {
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    int[] t = RoutePlannerTest.tokens(22, 640);
    // the peer holds the whole prompt in every scope; locally only scope A holds half of it
    RoutePlannerTest.ScriptedView v = new RoutePlannerTest.ScriptedView().peer("p", MS);
    for (long s : new long[] {A, B, BlockHasher.ROOT_PARENT}) {
      holdsIn(v, "p", s, t, 640);
    }
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.selfManaged(1 << 20);
    TreeIndex local = new TreeIndex(tree);
    local.onExecuted(A, java.util.Arrays.copyOf(t, 640));
    RoutePlanner planner = planner(cfg, v, tree);
    RouteDecision a = planner.decide(A, t);
    assertEquals(640, a.candidates().get(0).matchedTokens());
    assertEquals(Reason.LOCAL_LONGEST_OR_TIE, a.reason(), a.toString());
    RouteDecision b = planner.decide(B, t);
    assertEquals(0, b.candidates().get(0).matchedTokens());
    assertEquals(Reason.PEER_LONGEST, b.reason(), b.toString());
    RouteDecision plain = planner.decide(t);
    assertEquals(0, plain.candidates().get(0).matchedTokens());
  }
}
