package io.github.prefixrouter;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.github.prefixrouter.spi.Schedulers;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * The public value types, and the scheduler factory, refuse a null where their Javadoc allows
 * none with a {@link NullPointerException} naming the argument, rather than keeping it to fail
 * later (or never) far from the caller.
 */
class PublicValueNullsTest {

  private static void refused(String name, Executable e) {
    NullPointerException x = assertThrows(NullPointerException.class, e);
    assertEquals(name, x.getMessage());
  }

  private static final GossipStats GOSSIP =
      new GossipStats(0, false, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);

  private static NodeStats stats(Map<FallbackCause, Long> fallbacks) {
    return stats(fallbacks, GOSSIP);
  }

  private static NodeStats stats(Map<FallbackCause, Long> fallbacks, GossipStats gossip) {
    return new NodeStats("n", PrefixRouterNode.State.RUNNING, 0, 0, 0, 0, 0, 0, 0, 0, fallbacks,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, gossip);
  }

  @Test
  void nodeStatsNamesANullFallbacksMapOrCount() {
    refused("fallbacks", () -> stats(null));
    refused("gossip", () -> stats(Map.of(), null));
    Map<FallbackCause, Long> withNull = new HashMap<>();
    withNull.put(FallbackCause.TIMEOUT, null);
    // kept, it made totalFallbacks() throw on every later call
    refused("fallbacks[TIMEOUT]", () -> stats(withNull));
    assertEquals(0, stats(Map.of()).totalFallbacks());
  }

  private static RouteDecision decision(String[] ids, int[] matched, int[] effective, int[] load,
      long[] rtt, long[] cost, RouteDecision.SkipReason[] skipped) {
    return new RouteDecision(RoutingPolicy.LOCAL_ONLY, 10, ids, matched, effective, load, rtt,
        cost, skipped, 0, RouteDecision.Reason.LOCAL_ONLY_POLICY);
  }

  @Test
  void routeDecisionNamesANullArrayOrElement() {
    String[] ids = {"a", "b"};
    int[] ints = {0, 0};
    long[] longs = {0, 0};
    RouteDecision.SkipReason[] skipped = {RouteDecision.SkipReason.NONE,
        RouteDecision.SkipReason.NONE};
    refused("ids", () -> decision(null, ints, ints, ints, longs, longs, skipped));
    refused("matched", () -> decision(ids, null, ints, ints, longs, longs, skipped));
    refused("effective", () -> decision(ids, ints, null, ints, longs, longs, skipped));
    refused("load", () -> decision(ids, ints, ints, null, longs, longs, skipped));
    refused("rtt", () -> decision(ids, ints, ints, ints, null, longs, skipped));
    refused("cost", () -> decision(ids, ints, ints, ints, longs, null, skipped));
    refused("skipped", () -> decision(ids, ints, ints, ints, longs, longs, null));
    // kept, they made candidates() hold a null id or skip reason, which no accessor returns
    refused("ids[1]", () -> decision(new String[] {"a", null}, ints, ints, ints, longs, longs,
        skipped));
    refused("skipped[1]", () -> decision(ids, ints, ints, ints, longs, longs,
        new RouteDecision.SkipReason[] {RouteDecision.SkipReason.NONE, null}));
    assertEquals("b", decision(ids, ints, ints, ints, longs, longs, skipped).candidates().get(1)
        .nodeId());
  }

  @Test
  void aCandidateNamesANullIdOrSkipReason() {
    refused("nodeId", () -> new RouteDecision.Candidate(null, true, 0, 0, 0, 0, 0,
        RouteDecision.SkipReason.NONE));
    refused("skipped", () -> new RouteDecision.Candidate("a", true, 0, 0, 0, 0, 0, null));
  }

  @Test
  void aSingleThreadSchedulerNamesANullName() {
    // it used to start threads named "null-1"
    refused("name", () -> Schedulers.newSingleThread(null).close());
  }
}
