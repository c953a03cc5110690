package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.OracleCluster.request;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.ArgumentMatchers.argThat;
import static org.mockito.ArgumentMatchers.eq;
import static org.mockito.Mockito.inOrder;
import static org.mockito.AdditionalAnswers.delegatesTo;
import static org.mockito.Mockito.mock;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeNotRunningException;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.mockito.InOrder;

class RouterNodeTest {

  static final int[] PREFIX = prompt(42, 480);

  static RouterConfig.Builder config(RoutingPolicy policy) {
    return RouterConfig.builder().policy(policy).initialPrefillNanosPerToken(200_000)
        .coldPlacement(false);
  }

  @ParameterizedTest
  @EnumSource(value = RoutingPolicy.class, names = {"COST_AWARE", "LONGEST_PREFIX"})
  void routesToThePeerWithTheLongestMatch(RoutingPolicy policy) {
    OracleCluster c = new OracleCluster(3, config(policy).build(), 1)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    c.warm("n2", concat(PREFIX, prompt(2, 40)).clone());
    c.engine("n2").clearCache();
    c.warm("n2", concat(java.util.Arrays.copyOf(PREFIX, 160), prompt(3, 40)));

    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));
    InferenceResponse resp = c.submitAndWait("n0", r);

    assertEquals("n1", resp.servedBy(), resp.decision().toString());
    assertTrue(resp.forwarded());
    assertEquals(1, resp.attempts());
    assertTrue(resp.cachedPromptTokens() >= 480, "cached " + resp.cachedPromptTokens());
    assertArrayEquals(expected(r), resp.result().outputTokens(), "routing changed the answer");
    RouteDecision d = resp.decision();
    assertEquals(480, d.candidates().get(1).matchedTokens());
    assertEquals(160, d.candidates().get(2).matchedTokens());
    assertEquals(0, d.candidates().get(0).matchedTokens());
    assertEquals(policy == RoutingPolicy.COST_AWARE
        ? RouteDecision.Reason.PEER_CHEAPER : RouteDecision.Reason.PEER_LONGEST, d.reason());
    NodeStats s = c.node("n0").stats();
    assertEquals(1, s.forwarded());
    assertEquals(0, s.servedLocally());
    assertEquals(1, c.node("n1").stats().servedForPeers());
    assertEquals(480, s.estimatedCachedTokens());
    assertTrue(s.actualCachedTokens() >= 480);
  }

  /**
   * A peer's engine that adds a special token to the prompt (as a server may, within
   * {@code PROMPT_TOKENS_SLACK}) and counts it as cached: the actual cached tokens counted for
   * the forward are at most the prompt's, as the cached prompt tokens are, so that neither
   * counter reports more cached tokens than the prompts had.
   */
  @Test
  void cachedTokensCountedForAForwardAreAtMostThePrompts() {
    List<InferenceEngine> wrappers = new ArrayList<>();
    OracleCluster c = OracleCluster.withWrappedEngines(2,
        config(RoutingPolicy.LONGEST_PREFIX).build(), 1, b -> b, e -> new ForwardingEngine(e) {
          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest q) {
            // a BOS token before the prompt, cached with it
            return super.execute(q).thenApply(res -> new EngineResult(res.outputTokens(),
                res.text(), q.length() + 1, q.length() + 1, res.prefillNanos(),
                res.decodeNanos()));
          }

          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest q,
              OutputListener listener) {
            return execute(q);
          }
        }, wrappers);
    c.believesWarm("n0", "n1");
    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));
    InferenceResponse resp = c.submitAndWait("n0", r);

    assertTrue(resp.forwarded(), resp.decision().toString());
    assertEquals(r.length() + 1, resp.cachedPromptTokens(), "the engine's own report");
    NodeStats s = c.node("n0").stats();
    assertEquals(r.length(), s.promptTokens());
    assertEquals(r.length(), s.cachedPromptTokens());
    assertEquals(r.length(), s.actualCachedTokens(), s.toString());
  }

  @Test
  void costAwareStaysLocalWhenTheRoundTripOutweighsTheSaving() {
    Map<RoutingPolicy, InferenceResponse> got = new HashMap<>();
    Map<RoutingPolicy, Long> latency = new HashMap<>();
    for (RoutingPolicy p : List.of(RoutingPolicy.COST_AWARE, RoutingPolicy.LONGEST_PREFIX)) {
      OracleCluster c = new OracleCluster(2, config(p).build(), 1)
          .rtt(Duration.ofMillis(500)).start();
      c.warm("n1", concat(PREFIX, prompt(1, 40)));
      long t0 = c.sim.nanoTime();
      got.put(p, c.submitAndWait("n0", request("q", concat(PREFIX, prompt(9, 64)))));
      latency.put(p, c.sim.nanoTime() - t0);
    }
    InferenceResponse cost = got.get(RoutingPolicy.COST_AWARE);
    assertEquals("n0", cost.servedBy(), cost.decision().toString());
    assertEquals(RouteDecision.Reason.LOCAL_CHEAPEST, cost.decision().reason());
    InferenceResponse paper = got.get(RoutingPolicy.LONGEST_PREFIX);
    assertEquals("n1", paper.servedBy());
    assertTrue(latency.get(RoutingPolicy.COST_AWARE) < latency.get(RoutingPolicy.LONGEST_PREFIX),
        "cost-aware " + latency + " should beat longest-prefix over a 1 s round trip");
    assertArrayEquals(cost.result().outputTokens(), paper.result().outputTokens());
  }

  @Test
  void costAwareForwardsOnlyWhenTheMarginIsMet() {
    // local 544 x 200 us = 108.8 ms; peer 94 ms round trip + 0.2 ms + 64 x 200 us = 107 ms:
    // cheaper, but not by 5% of the local estimate
    OracleCluster c = new OracleCluster(2, config(RoutingPolicy.COST_AWARE).build(), 1)
        .rtt(Duration.ofMillis(47)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    RouteDecision d = c.node("n0").explain(request("q", concat(PREFIX, prompt(9, 64))));
    assertEquals(RouteDecision.Reason.MARGIN_NOT_MET, d.reason(), d.toString());
    assertTrue(d.isLocal());
  }

  @Test
  void pushBackAndQueueCostSpreadAHotPrefix() {
    RouterConfig cfg = config(RoutingPolicy.COST_AWARE).watermarks(2, 4).build();
    OracleCluster c = new OracleCluster(4, cfg, 7).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 32)));
    Map<String, Long> before = new HashMap<>();
    c.engines.forEach((id, e) -> before.put(id, e.stats().requests()));
    List<CompletableFuture<InferenceResponse>> fs = new ArrayList<>();
    int n = 240;
    for (int i = 0; i < n; i++) {
      String at = "n" + (i % 4);
      fs.add(c.node(at).submit(request("h" + i, concat(PREFIX, prompt(1000 + i, 32)))));
      c.sim.advanceBy(Duration.ofMillis(5).toNanos());
    }
    c.sim.runUntilIdle(10_000_000);
    long max = 0;
    long total = 0;
    for (var e : c.engines.entrySet()) {
      long served = e.getValue().stats().requests() - before.get(e.getKey());
      max = Math.max(max, served);
      total += served;
      assertTrue(served > 0, e.getKey() + " served nothing");
    }
    assertEquals(n, total, "every request runs exactly once");
    assertTrue(max <= n / 2, "one node served " + max + " of " + n);
    for (CompletableFuture<InferenceResponse> f : fs) {
      assertTrue(f.isDone());
      f.join();
    }
  }

  @Test
  void peerAdvertisingOverloadIsSkipped() {
    RouterConfig cfg = config(RoutingPolicy.LONGEST_PREFIX).watermarks(0, 1).build();
    OracleCluster c = new OracleCluster(2, cfg, 3).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 32)));
    SimulatedEngine e1 = c.engine("n1");
    e1.execute(request("bg1", prompt(5, 64)));
    e1.execute(request("bg2", prompt(6, 64)));
    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 32)));
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(r);
    c.sim.runUntilIdle(1_000_000);
    InferenceResponse resp = f.join();
    assertEquals("n0", resp.servedBy());
    RouteDecision.Candidate peer = resp.decision().candidates().get(1);
    assertEquals(RouteDecision.SkipReason.OVERLOADED, peer.skipped());
    assertArrayEquals(expected(r), resp.result().outputTokens());
  }

  @Test
  void busyAnswerFallsBackAndCoolsThePeerDown() {
    RouterConfig cfg = config(RoutingPolicy.LONGEST_PREFIX).watermarks(0, 1).build();
    OracleCluster c = new OracleCluster(2, cfg, 3).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 32)));
    InferenceRequest r1 = request("q1", concat(PREFIX, prompt(9, 32)));
    InferenceRequest r2 = request("q2", concat(PREFIX, prompt(10, 32)));
    CompletableFuture<InferenceResponse> f1 = c.node("n0").submit(r1);
    // n1 gets a local queue while q1 travels: the forward arrives to a full queue
    c.engine("n1").execute(request("bg1", prompt(5, 64)));
    c.engine("n1").execute(request("bg2", prompt(6, 64)));
    c.sim.runUntilIdle(1_000_000);
    InferenceResponse resp = f1.join();
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.BUSY, resp.fallbackCause());
    assertEquals(2, resp.attempts());
    assertEquals(1, c.node("n0").stats().pushedBack());
    assertEquals(1, c.node("n0").stats().fallbacks().get(FallbackCause.BUSY));
    assertEquals(1, c.node("n1").stats().refusedForPeers());
    // within the cool-down the peer is skipped even though it is idle again
    RouteDecision d = c.node("n0").explain(r2);
    assertEquals(RouteDecision.SkipReason.BUSY_COOLDOWN, d.candidates().get(1).skipped());
    c.sim.advanceBy(cfg.busyCooldown().toNanos() + 1);
    assertEquals(RouteDecision.SkipReason.NONE,
        c.node("n0").explain(r2).candidates().get(1).skipped());
  }

  @Test
  void malformedAnswerFallsBackAndCoolsThePeerDown() {
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    var n1 = InMemoryNetwork.addressOf("n1");
    // n0's transport garbles every answer n1 gives to a forward
    hooks.transportWrap = t -> {
      if (!t.localAddress().nodeId().equals("n0")) {
        return t;
      }
      Transport m = mock(Transport.class, delegatesTo(t));
      org.mockito.Mockito.doAnswer(inv -> t.request(inv.getArgument(0), inv.getArgument(1),
              inv.getArgument(2)).thenApply(answer -> new byte[] {ForwardCodec.RESULT, 1, 7}))
          .when(m).request(eq(n1), argThat(b -> b.length > 0 && b[0] == ForwardCodec.FORWARD),
              any());
      return m;
    };
    RouterConfig cfg = config(RoutingPolicy.LONGEST_PREFIX).build();
    OracleCluster c = new OracleCluster(2, cfg, 3, hooks).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 32)));
    InferenceRequest r1 = request("q1", concat(PREFIX, prompt(9, 32)));
    InferenceRequest r2 = request("q2", concat(PREFIX, prompt(10, 32)));
    assertEquals("n1", c.node("n0").explain(r1).target().nodeId());
    InferenceResponse resp = c.submitAndWait("n0", r1);
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.PROTOCOL_ERROR, resp.fallbackCause());
    assertEquals(2, resp.attempts());
    assertArrayEquals(expected(r1), resp.result().outputTokens());
    assertEquals(1, c.node("n0").stats().fallbacks().get(FallbackCause.PROTOCOL_ERROR));
    // within the cool-down the peer is skipped; afterwards it is a candidate again
    RouteDecision d = c.node("n0").explain(r2);
    assertEquals(RouteDecision.SkipReason.FAILED_COOLDOWN, d.candidates().get(1).skipped());
    assertEquals("n0", d.target().nodeId());
    c.sim.advanceBy(cfg.busyCooldown().toNanos() + 1);
    assertEquals(RouteDecision.SkipReason.NONE,
        c.node("n0").explain(r2).candidates().get(1).skipped());
  }

  @Test
  void timeoutCancelsAtThePeerThenRunsLocally() {
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    // delegating mocks, not spies: the network must keep talking to the real objects
    hooks.transportWrap = t -> mock(Transport.class, delegatesTo(t));
    hooks.engineWrap = e -> mock(InferenceEngine.class, delegatesTo(e));
    OracleCluster c = new OracleCluster(2, config(RoutingPolicy.COST_AWARE).build(), 1, hooks)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    c.engine("n1").stallNext(1);
    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));
    InferenceResponse resp = c.submitAndWait("n0", r);

    assertEquals("n0", resp.servedBy());
    assertFalse(resp.forwarded());
    assertEquals(FallbackCause.TIMEOUT, resp.fallbackCause());
    assertEquals(2, resp.attempts());
    assertArrayEquals(expected(r), resp.result().outputTokens());
    assertEquals(1, c.node("n0").stats().fallbacks().get(FallbackCause.TIMEOUT));
    c.sim.runUntilIdle(1_000_000);
    assertEquals(1, c.engine("n1").stats().cancelled(), "the peer was not told to cancel");

    Transport t0 = c.transports.get("n0");
    InferenceEngine e0 = c.engineSpis.get("n0");
    var n1 = InMemoryNetwork.addressOf("n1");
    InOrder order = inOrder(t0, e0);
    order.verify(t0).request(eq(n1), any(), any());
    order.verify(t0).send(eq(n1), argThat(b -> b.length > 0 && b[0] == ForwardCodec.CANCEL));
    order.verify(e0).execute(eq(r), any()); // with a listener: the stall watch sees its progress
  }

  @Test
  void peerCrashingMidRequestFallsBackAndThenDisappears() {
    OracleCluster c = new OracleCluster(2, config(RoutingPolicy.COST_AWARE).build(), 1)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(r);
    c.sim.advanceBy(Duration.ofMillis(3).toNanos());
    assertTrue(c.engine("n1").load().total() > 0, "the request should be running on n1");
    c.crash("n1");
    c.sim.runUntilIdle(1_000_000);
    InferenceResponse resp = f.join();
    assertEquals("n0", resp.servedBy());
    // the peer view dropped n1 while its answer was awaited: the forward ends then, not at its
    // timeout
    assertEquals(FallbackCause.UNREACHABLE, resp.fallbackCause());
    assertArrayEquals(expected(r), resp.result().outputTokens());
    RouteDecision next = c.node("n0").explain(request("q2", concat(PREFIX, prompt(8, 64))));
    assertEquals(RouteDecision.Reason.NO_PEERS, next.reason());
    assertEquals(1, next.candidateCount());
  }

  @Test
  void forwardedRequestIsNotForwardedAgainAtTheHopLimit() {
    for (int limit : new int[] {1, 2}) {
      OracleCluster c = new OracleCluster(3,
          config(RoutingPolicy.LONGEST_PREFIX).hopLimit(limit).build(), 1)
          .rtt(Duration.ofMillis(1)).start();
      c.warm("n2", concat(PREFIX, prompt(1, 40)));
      Transport x = c.net.transport("x");
      x.start((from, p) -> CompletableFuture.completedFuture(new byte[0]));
      InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));
      CompletableFuture<byte[]> f = x.request(InMemoryNetwork.addressOf("n1"),
          ForwardCodec.forward(r, "x", 1), Duration.ofSeconds(30));
      c.sim.runUntilIdle(1_000_000);
      ForwardCodec.Result res = (ForwardCodec.Result) decode(f.join());
      assertEquals(limit == 1 ? "n1" : "n2", res.servedBy(), "hop limit " + limit);
      assertArrayEquals(expected(r), res.result().outputTokens());
    }
  }

  @Test
  void duplicateForwardJoinsTheRunningExecution() {
    OracleCluster c = new OracleCluster(2, config(RoutingPolicy.COST_AWARE).build(), 1).start();
    Transport x = c.net.transport("x");
    x.start((from, p) -> CompletableFuture.completedFuture(new byte[0]));
    InferenceRequest r = request("dup", prompt(3, 100));
    byte[] msg = ForwardCodec.forward(r, "x", 1);
    CompletableFuture<byte[]> a = x.request(InMemoryNetwork.addressOf("n1"), msg,
        Duration.ofSeconds(30));
    CompletableFuture<byte[]> b = x.request(InMemoryNetwork.addressOf("n1"), msg,
        Duration.ofSeconds(30));
    c.sim.runUntilIdle(1_000_000);
    assertArrayEquals(a.join(), b.join());
    assertEquals(1, c.engine("n1").stats().requests());
  }

  @Test
  void peerEngineFailureFallsBackLocally() {
    OracleCluster c = new OracleCluster(2, config(RoutingPolicy.COST_AWARE).build(), 1)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    c.engine("n1").failNext(1);
    InferenceResponse resp = c.submitAndWait("n0", request("q", concat(PREFIX, prompt(9, 64))));
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.PEER_FAILED, resp.fallbackCause());
  }

  @Test
  void localEngineFailureIsATypedError() {
    OracleCluster c = new OracleCluster(1, config(RoutingPolicy.COST_AWARE).build(), 1).start();
    c.engine("n0").failNext(1);
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(request("bad", prompt(1, 50)));
    c.sim.runUntilIdle(1_000_000);
    CompletionException e = assertThrows(CompletionException.class, f::join);
    RequestFailedException rf = assertInstanceOf(RequestFailedException.class, e.getCause());
    assertEquals("bad", rf.requestId());
    assertEquals(1, c.node("n0").stats().failed());
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  @Test
  void lifecycleFollowsTheStateMachine() {
    OracleCluster c = new OracleCluster(2, config(RoutingPolicy.COST_AWARE).build(), 1);
    RouterNode n0 = c.node("n0");
    assertEquals(PrefixRouterNode.State.NEW, n0.state());
    CompletableFuture<InferenceResponse> early = n0.submit(request("e", prompt(1, 20)));
    CompletionException ce = assertThrows(CompletionException.class, early::join);
    assertEquals(PrefixRouterNode.State.NEW,
        assertInstanceOf(NodeNotRunningException.class, ce.getCause()).state());
    c.start();
    assertThrows(IllegalStateException.class, n0::start);
    CompletableFuture<InferenceResponse> inFlight = n0.submit(request("a", prompt(2, 200)));
    CompletableFuture<Void> stopped = n0.stop();
    assertEquals(PrefixRouterNode.State.STOPPING, n0.state());
    assertFalse(stopped.isDone(), "stop must wait for the request in flight");
    assertTrue(n0.submit(request("late", prompt(3, 20))).isCompletedExceptionally());
    c.sim.runUntilIdle(1_000_000);
    assertTrue(inFlight.join().result().outputTokens().length > 0);
    assertTrue(stopped.isDone());
    assertEquals(PrefixRouterNode.State.STOPPED, n0.state());
    assertTrue(n0.stop() == stopped, "stop is idempotent");
    assertThrows(IllegalStateException.class, n0::start);
    RouterNode n1 = c.node("n1");
    n1.stop();
    assertEquals(PrefixRouterNode.State.STOPPED, n1.state());
  }

  @Test
  void stoppingNodeRefusesForwardedWork() {
    OracleCluster c = new OracleCluster(2, config(RoutingPolicy.LONGEST_PREFIX).build(), 1)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    CompletableFuture<InferenceResponse> running = c.node("n1").submit(request("a", prompt(2, 300)));
    c.node("n1").stop();
    InferenceResponse resp = c.submitAndWait("n0", request("q", concat(PREFIX, prompt(9, 64))));
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.BUSY, resp.fallbackCause());
    c.sim.runUntilIdle(1_000_000);
    assertTrue(running.isDone());
    assertEquals(PrefixRouterNode.State.STOPPED, c.node("n1").state());
  }

  @Test
  void explainDecidesWithoutExecuting() {
    OracleCluster c = new OracleCluster(2, config(RoutingPolicy.COST_AWARE).build(), 1)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    RouteDecision d = c.node("n0").explain(request("q", concat(PREFIX, prompt(9, 64))));
    assertEquals("n1", d.targetNodeId());
    assertEquals(0, c.engine("n0").stats().requests());
    assertEquals(1, c.engine("n1").stats().requests());
    assertTrue(d.toString().contains("n1 match=480"), d.toString());
  }

  @Test
  void learnsThePrefillCostFromEngineTimings() {
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LOCAL_ONLY)
        .initialPrefillNanosPerToken(1_000).build();
    OracleCluster c = new OracleCluster(1, cfg, 1).start();
    for (int i = 0; i < 40; i++) {
      c.submitAndWait("n0", request("p" + i, prompt(100 + i, 50 + 10 * i)));
    }
    double learned = c.node("n0").learnedPrefillNanosPerToken();
    assertEquals(200_000, learned, 2_000, "engine prefill is 200 us/token + 2 ms overhead");
  }

  private static ForwardCodec.Message decode(byte[] b) {
    try {
      return ForwardCodec.decode(b);
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }
}
