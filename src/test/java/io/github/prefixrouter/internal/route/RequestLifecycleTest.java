package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.OracleCluster.request;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The request lifecycle under misbehaving surroundings: every accepted request runs at most once
 * per attempt and completes exactly once, whatever the scheduler, the engine or a peer does.
 */
class RequestLifecycleTest {

  static final int[] PREFIX = prompt(42, 480);

  /** An engine that answers every request at once, counting executions. */
  static final class CountingEngine implements InferenceEngine {
    final AtomicInteger executions = new AtomicInteger();

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      executions.incrementAndGet();
      return CompletableFuture.completedFuture(
          new EngineResult(expected(r), "", r.length(), 0, 1_000, 1_000));
    }
  }

  /** A local index that holds nothing: every prompt matches 0 tokens. */
  static final LocalPrefixIndex NO_CACHE = RoutePlannerTest.matching(0);

  @Test
  void aSchedulerThatRefusesTheEngineGuardNeitherRunsTheRequestTwiceNorLosesIt() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    // a host scheduler shut down under the node: every timer is refused
    Scheduler refusing = (delay, task) -> {
      throw new RejectedExecutionException("scheduler shut down");
    };
    CountingEngine engine = new CountingEngine();
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LOCAL_ONLY).build();
    RouterNode node = new RouterNode("n0", cfg, net.transport("n0"), engine, sim, refusing,
        new SplittableRandom(1), List.of(), new RouterNode.Components(
            NO_CACHE, (t, l, o) -> 0, PeerView.NONE));
    node.start();

    InferenceRequest r = request("q", prompt(1, 64));
    CompletableFuture<InferenceResponse> f = node.submit(r);

    assertEquals(1, engine.executions.get(), "the engine ran the request more than once");
    assertTrue(f.isDone(), "the engine answered but the request never completed");
    assertArrayEquals(expected(r), f.join().result().outputTokens());
    NodeStats s = node.stats();
    assertEquals(1, s.requests());
    assertEquals(1, s.servedLocally());
    assertEquals(0, s.inFlight());
    assertTrue(node.stop().isDone(), "stop must not wait for a request already answered");
    assertEquals(PrefixRouterNode.State.STOPPED, node.state());
  }

  @Test
  void anEngineThatThrowsAnErrorFailsTheRequestAndLetsTheNodeStop() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    // an adapter missing an optional dependency throws an Error, not a RuntimeException
    InferenceEngine throwing = r -> {
      throw new NoClassDefFoundError("org/example/EngineClient");
    };
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LOCAL_ONLY).build();
    RouterNode node = new RouterNode("n0", cfg, net.transport("n0"), throwing, sim, sim,
        new SplittableRandom(1), List.of(), new RouterNode.Components(
            NO_CACHE, (t, l, o) -> 0, PeerView.NONE));
    node.start();

    CompletableFuture<InferenceResponse> f = node.submit(request("q", prompt(1, 64)));

    assertTrue(f.isCompletedExceptionally(), "the request must fail, not throw or hang");
    Throwable cause = f.handle((r, t) -> t).join();
    assertTrue(cause instanceof RequestFailedException, String.valueOf(cause));
    assertEquals(0, node.stats().inFlight());
    assertTrue(node.stop().isDone(), "a request that failed must not keep the node from stopping");
    assertEquals(PrefixRouterNode.State.STOPPED, node.state());
  }

  @Test
  void anEngineTimeoutBeyondTheNanosecondRangeIsRejected() {
    // Duration.toNanos() overflows past about 292 years: the node would throw on every request
    for (Duration huge : List.of(Duration.ofDays(200_000), Duration.ofSeconds(Long.MAX_VALUE))) {
      IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(
          IllegalArgumentException.class,
          () -> RouterConfig.builder().engineTimeout(huge).build());
      assertTrue(e.getMessage().contains("engineTimeout"), e.getMessage());
    }
  }

  @Test
  void aPeersCancelDoesNotCancelThisNodesOwnRequestOfTheSameId() {
    // request ids are unique per origin only: n0's client and n1's client both use "r1"
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false)
        .forwardTimeout(Duration.ofMillis(50), Duration.ofMillis(50)).build();
    OracleCluster c = new OracleCluster(2, cfg, 1).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));

    // n1's own r1 runs for a while on n1's engine (100 tokens of 5 ms decode)
    InferenceRequest mine = new InferenceRequest("r1", concat(PREFIX, prompt(2, 40)),
        io.github.prefixrouter.GenerationParams.greedy(100));
    CompletableFuture<InferenceResponse> local = c.node("n1").submit(mine);
    c.sim.advanceBy(Duration.ofMillis(5).toNanos());
    // n0's r1 is forwarded to n1, queues behind it, times out at n0, which sends CANCEL r1
    InferenceRequest theirs = request("r1", concat(PREFIX, prompt(9, 64)));
    InferenceResponse other = c.submitAndWait("n0", theirs);
    assertArrayEquals(expected(theirs), other.result().outputTokens());
    c.sim.runUntilIdle(1_000_000);

    assertTrue(local.isDone());
    assertTrue(!local.isCompletedExceptionally(),
        "n0's cancel of its own r1 failed n1's client request r1: " + describe(local));
    assertArrayEquals(expected(mine), local.join().result().outputTokens());
    assertEquals(0, c.node("n1").stats().failed());
  }

  @Test
  void aClosedTransportRunsTheRequestLocallyWithoutTryingMorePeers() {
    // n0's transport was closed under it (by the host): every forward fails with CLOSED
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    AtomicInteger forwards = new AtomicInteger();
    hooks.transportWrap = t -> {
      if (!t.localAddress().nodeId().equals("n0")) {
        return t;
      }
      return new ForwardingTransport(t) {
        @Override
        public void send(PeerAddress to, byte[] payload) {}

        @Override
        public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
          forwards.incrementAndGet();
          return CompletableFuture.failedFuture(new TransportException(
              TransportException.Kind.CLOSED, "transport closed"));
        }
      };
    };
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).build();
    OracleCluster c = new OracleCluster(4, cfg, 1, hooks).rtt(Duration.ofMillis(1)).start();
    for (String id : List.of("n1", "n2", "n3")) {
      c.warm(id, concat(PREFIX, prompt(1, 40)));
    }
    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));
    InferenceResponse resp = c.submitAndWait("n0", r);
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.TRANSPORT_CLOSED, resp.fallbackCause());
    assertEquals(1, forwards.get(), "a closed transport fails every forward: go local at once");
    assertEquals(2, resp.attempts());
    assertEquals(1, c.node("n0").stats().fallbacks().get(FallbackCause.TRANSPORT_CLOSED));
  }

  @Test
  void aTransportFailureWithoutAKindFallsBackLikeAnUnreachablePeer() {
    // a host transport's own TransportException subclass whose kind() answers null: the node
    // must still fall back and answer, not fail on the missing kind with the request claimed
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    AtomicInteger forwards = new AtomicInteger();
    hooks.transportWrap = t -> !t.localAddress().nodeId().equals("n0") ? t
        : new ForwardingTransport(t) {
          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            forwards.incrementAndGet();
            return CompletableFuture.failedFuture(new TransportException(
                TransportException.Kind.UNREACHABLE, "no kind") {
              @Override
              public Kind kind() {
                return null;
              }
            });
          }
        };
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).build();
    OracleCluster c = new OracleCluster(2, cfg, 1, hooks).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));
    CompletableFuture<InferenceResponse> f = c.runUntilDone(c.node("n0").submit(r));
    assertTrue(f.isDone(), "the request was never answered");
    InferenceResponse resp = f.join();
    assertEquals(1, forwards.get());
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.UNREACHABLE, resp.fallbackCause());
    assertArrayEquals(expected(r), resp.result().outputTokens());
  }

  @Test
  void aPeerWhoseEngineFailsFastDoesNotAttractEveryRequest() {
    // n1 holds the prefix but its engine fails every request at once: it looks idle and cached,
    // so without a cool-down every request pays a round trip there before running elsewhere
    OracleCluster c = new OracleCluster(3, RouterConfig.builder()
        .policy(RoutingPolicy.LONGEST_PREFIX).initialPrefillNanosPerToken(200_000)
        .coldPlacement(false).build(), 1).rtt(Duration.ofMillis(1)).start();
    int n = 5;
    for (int i = 0; i < n; i++) { // one prefix per request: n0 never holds the next one
      c.warm("n1", concat(prompt(50 + i, 480), prompt(1, 40)));
    }
    c.engine("n1").failNext(1_000);
    for (int i = 0; i < n; i++) {
      InferenceRequest r = request("q" + i, concat(prompt(50 + i, 480), prompt(100 + i, 64)));
      InferenceResponse resp = c.submitAndWait("n0", r);
      assertArrayEquals(expected(r), resp.result().outputTokens());
      c.sim.advanceBy(Duration.ofMillis(10).toNanos());
    }
    assertEquals(1, c.node("n0").stats().fallbacks().get(FallbackCause.PEER_FAILED),
        "after a retryable failure the peer is cooled down like an unreachable one");
    RouteDecision d = c.node("n0").explain(request("x", concat(prompt(50, 480), prompt(7, 64))));
    assertEquals(RouteDecision.SkipReason.FAILED_COOLDOWN, d.candidates().get(1).skipped());
  }

  @Test
  void aStartThatFailsLeavesTheNodeStoppedAndItsTransportClosed() {
    // the transport answers for another node id: gossip refuses to start
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    PrefixRouterNode node = PrefixRouterNode.builder().nodeId("a").transport(net.transport("b"))
        .engine(new CountingEngine()).clock(sim).scheduler(sim).random(new SplittableRandom(1))
        .build();
    org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class, node::start);
    assertEquals(PrefixRouterNode.State.STOPPED, node.state(),
        "a node whose start failed must not look RUNNING and accept requests");
    assertTrue(node.stop().isDone());
    assertTrue(node.submit(request("q", prompt(1, 20))).isCompletedExceptionally());
    // the transport was closed: its address is free for a new node
    Transport again = net.transport("b");
    again.start((from, p) -> CompletableFuture.completedFuture(p));
  }

  @Test
  void aStopWhoseGossipFailsToStopStillClosesTheTransport() {
    // a host's scheduler whose timers fail to cancel: stopping gossip (which cancels its next
    // round) throws
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    Scheduler badCancel = (delay, task) -> {
      sim.schedule(delay, task);
      return () -> {
        throw new IllegalStateException("cancel of a timer");
      };
    };
    PrefixRouterNode node = PrefixRouterNode.builder().nodeId("a").transport(net.transport("a"))
        .engine(new CountingEngine()).clock(sim).scheduler(badCancel)
        .random(new SplittableRandom(1)).build();
    node.start();
    CompletableFuture<Void> stopped = node.stop();
    assertTrue(stopped.isDone() && !stopped.isCompletedExceptionally(), stopped.toString());
    assertEquals(PrefixRouterNode.State.STOPPED, node.state());
    // the transport was closed: its address is free for a new node
    Transport again = net.transport("a");
    again.start((from, p) -> CompletableFuture.completedFuture(p));
  }

  @Test
  void aStopWhosePeerViewThrowsAnErrorStillClosesTheTransport() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    AtomicInteger closes = new AtomicInteger();
    Transport t = new ForwardingTransport(net.transport("a")) {
      @Override
      public void close() {
        closes.incrementAndGet();
        super.close();
      }
    };
    PeerView failingStop = new PeerView() {
      @Override
      public PeerSet livePeers() {
        return PeerSet.EMPTY;
      }

      @Override
      public void leadingBlocks(PeerSet peers, long[] chain, int count, int[] out) {}

      @Override
      public void stop() {
        throw new AnswerNeverLostTest.SpiError("stop");
      }
    };
    RouterNode node = new RouterNode("a", RouterConfig.defaults(), t, new CountingEngine(), sim,
        sim, new SplittableRandom(1), List.of(), new RouterNode.Components(NO_CACHE,
            (tokens, l, o) -> 0, failingStop));
    node.start();
    CompletableFuture<Void> stopped = node.stop();
    assertTrue(stopped.isDone() && !stopped.isCompletedExceptionally(), stopped.toString());
    assertEquals(PrefixRouterNode.State.STOPPED, node.state());
    assertEquals(1, closes.get());
  }

  @Test
  void concurrentSubmitsAndStopAnswerEveryAcceptedRequestExactlyOnce() throws Exception {
    // real threads: submitters, an engine completing on its own pool, the node's own timer
    // thread, and a stop() in the middle of it all
    java.util.concurrent.ExecutorService enginePool =
        java.util.concurrent.Executors.newFixedThreadPool(3);
    java.util.concurrent.ExecutorService clients =
        java.util.concurrent.Executors.newFixedThreadPool(4);
    try {
      for (int round = 0; round < 20; round++) {
        AtomicInteger executions = new AtomicInteger();
        InferenceEngine engine = r -> {
          executions.incrementAndGet();
          CompletableFuture<EngineResult> f = new CompletableFuture<>();
          enginePool.execute(() -> {
            if (r.id().hashCode() % 7 == 0) {
              f.completeExceptionally(new io.github.prefixrouter.spi.EngineException("x", true));
            } else {
              f.complete(new EngineResult(new int[] {1}, "", r.length(), 0, 10, 10));
            }
            f.complete(null); // a second completion must change nothing
          });
          return f;
        };
        SimulatedScheduler unusedTime = new SimulatedScheduler();
        InMemoryNetwork net = new InMemoryNetwork(unusedTime, round);
        RouterNode node = new RouterNode("n0", RouterConfig.builder()
            .policy(RoutingPolicy.LOCAL_ONLY).build(), net.transport("n0"), engine,
            io.github.prefixrouter.spi.Clock.system(), null, new SplittableRandom(round),
            List.of(), new RouterNode.Components(NO_CACHE, (t, l, o) -> 0, PeerView.NONE));
        node.start();
        int perClient = 50;
        java.util.concurrent.ConcurrentLinkedQueue<CompletableFuture<InferenceResponse>> all =
            new java.util.concurrent.ConcurrentLinkedQueue<>();
        AtomicInteger completions = new AtomicInteger();
        java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
        List<java.util.concurrent.Future<?>> done = new java.util.ArrayList<>();
        for (int c = 0; c < 4; c++) {
          int client = c;
          done.add(clients.submit(() -> {
            go.await();
            for (int i = 0; i < perClient; i++) {
              CompletableFuture<InferenceResponse> f =
                  node.submit(request("c" + client + "-" + i, prompt(i, 8)));
              f.whenComplete((v, e) -> completions.incrementAndGet());
              all.add(f);
            }
            return null;
          }));
        }
        go.countDown();
        Thread.sleep(1);
        CompletableFuture<Void> stopped = node.stop();
        for (var d : done) {
          d.get(30, java.util.concurrent.TimeUnit.SECONDS);
        }
        stopped.get(30, java.util.concurrent.TimeUnit.SECONDS);
        assertEquals(PrefixRouterNode.State.STOPPED, node.state());
        int accepted = 0;
        for (CompletableFuture<InferenceResponse> f : all) {
          assertTrue(f.isDone(), "an accepted request was not answered before STOPPED");
          try {
            f.join();
            accepted++;
          } catch (java.util.concurrent.CompletionException e) {
            if (e.getCause() instanceof io.github.prefixrouter.RequestFailedException) {
              accepted++;
            } else {
              assertTrue(e.getCause() instanceof io.github.prefixrouter.NodeNotRunningException,
                  String.valueOf(e.getCause()));
            }
          }
        }
        assertEquals(4 * perClient, completions.get());
        NodeStats s = node.stats();
        assertEquals(accepted, s.requests());
        assertEquals(s.requests(), s.servedLocally() + s.failed());
        assertEquals(accepted, executions.get(), "each accepted request runs once");
        assertEquals(0, s.inFlight());
      }
    } finally {
      enginePool.shutdownNow();
      clients.shutdownNow();
    }
  }

  @Test
  void anAnswerThatCannotBelongToTheRequestIsFallenBackFrom() {
    // n1 answers q with well-formed results that no engine can give for q: more output tokens
    // than maxTokens, or another prompt length
    for (int variant = 0; variant < 2; variant++) {
      int v = variant;
      OracleCluster.Hooks hooks = new OracleCluster.Hooks();
      hooks.transportWrap = t -> {
        if (!t.localAddress().nodeId().equals("n0")) {
          return t;
        }
        Transport m = org.mockito.Mockito.mock(Transport.class,
            org.mockito.AdditionalAnswers.delegatesTo(t));
        org.mockito.Mockito.doAnswer(inv -> {
          byte[] frame = inv.getArgument(1);
          InferenceRequest asked = ((ForwardCodec.Forward) ForwardCodec.decode(frame)).request();
          EngineResult bad = v == 0
              ? new EngineResult(new int[asked.params().maxTokens() + 3], "", asked.length(), 0,
                  1, 1)
              : new EngineResult(expected(asked), "", asked.length() + 7, 0, 1, 1);
          return CompletableFuture.completedFuture(
              ForwardCodec.result(asked.id(), "n1", 0, bad));
        }).when(m).request(org.mockito.ArgumentMatchers.any(),
            org.mockito.ArgumentMatchers.argThat(b -> b.length > 0 && b[0] == ForwardCodec.FORWARD),
            org.mockito.ArgumentMatchers.any());
        return m;
      };
      RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
          .initialPrefillNanosPerToken(200_000).coldPlacement(false).build();
      OracleCluster c = new OracleCluster(2, cfg, 1, hooks).rtt(Duration.ofMillis(1)).start();
      c.warm("n1", concat(PREFIX, prompt(1, 40)));
      InferenceRequest r = new InferenceRequest("q", concat(PREFIX, prompt(9, 64)),
          io.github.prefixrouter.GenerationParams.greedy(2));
      InferenceResponse resp = c.submitAndWait("n0", r);
      assertEquals("n0", resp.servedBy(), "variant " + v + ": an impossible answer was believed");
      assertEquals(FallbackCause.PROTOCOL_ERROR, resp.fallbackCause());
      assertArrayEquals(expected(r), resp.result().outputTokens());
      assertEquals(0, c.node("n0").stats().forwarded());
    }
  }

  @Test
  void twoRequestsOfOneIdRelayedByOnePeerEachGetTheirOwnAnswer() {
    // with a hop limit above 1 a peer relays requests of several origins, whose ids are unique
    // per origin only: x relays origin A's r1 and origin D's r1, two different prompts
    OracleCluster c = new OracleCluster(2, RouterConfig.builder()
        .policy(RoutingPolicy.COST_AWARE).hopLimit(2).build(), 1).start();
    Transport x = c.net.transport("x");
    x.start((from, p) -> CompletableFuture.completedFuture(new byte[0]));
    InferenceRequest fromA = request("r1", prompt(3, 100));
    InferenceRequest fromD = request("r1", prompt(4, 120));
    CompletableFuture<byte[]> a = x.request(InMemoryNetwork.addressOf("n1"),
        ForwardCodec.forward(fromA, "x", 2), Duration.ofSeconds(30));
    CompletableFuture<byte[]> d = x.request(InMemoryNetwork.addressOf("n1"),
        ForwardCodec.forward(fromD, "x", 2), Duration.ofSeconds(30));
    c.sim.runUntilIdle(1_000_000);
    assertArrayEquals(expected(fromA), result(a).result().outputTokens());
    assertArrayEquals(expected(fromD), result(d).result().outputTokens(),
        "the second r1 was joined to the first and got its answer");
    assertEquals(2, c.engine("n1").stats().requests());
    assertEquals(2, c.node("n1").stats().servedForPeers());
  }

  @Test
  void aCancelReachesTheNodeARelayForwardedTheRequestTo() {
    // hop limit 2: origin x forwards r1 to n0, which relays it to n1 (warm for its prefix);
    // x gives up and sends CANCEL r1 to n0, which must pass it on and not run r1 itself
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).hopLimit(2).build();
    OracleCluster c = new OracleCluster(2, cfg, 1).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    long warmed = c.engine("n1").stats().requests();
    Transport x = c.net.transport("x");
    x.start((from, p) -> CompletableFuture.completedFuture(new byte[0]));
    // 100 tokens of 5 ms decode: n1 works on it for about half a second
    InferenceRequest r = new InferenceRequest("r1", concat(PREFIX, prompt(2, 40)),
        io.github.prefixrouter.GenerationParams.greedy(100));
    CompletableFuture<byte[]> answer = x.request(InMemoryNetwork.addressOf("n0"),
        ForwardCodec.forward(r, "x", 1), Duration.ofSeconds(30));
    c.sim.advanceBy(Duration.ofMillis(20).toNanos());
    assertEquals(warmed + 1, c.engine("n1").stats().requests(), "n0 relayed r1 to n1");
    x.send(InMemoryNetwork.addressOf("n0"), ForwardCodec.cancel("r1", "x"));
    c.sim.runUntilIdle(1_000_000);

    assertEquals(1, c.engine("n1").stats().cancelled(), "the CANCEL stopped at the relay");
    assertEquals(0, c.engine("n0").stats().requests(), "the relay ran a cancelled request");
    assertTrue(answer.isDone());
    ForwardCodec.Message m;
    try {
      m = ForwardCodec.decode(answer.join());
    } catch (Exception e) {
      throw new AssertionError(e);
    }
    assertTrue(m instanceof ForwardCodec.Failed f && !f.retryable(), String.valueOf(m));
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  @Test
  void aRelayNeverSendsARequestBackToItsOrigin() {
    // hop limit 3: x relays n1's request r1 to n0 (the frame names n1 as its origin); n1 is
    // warm for the prefix, so n0 alone would forward there, back where the request came from
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).hopLimit(3).build();
    OracleCluster c = new OracleCluster(2, cfg, 1).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    long warmed = c.engine("n1").stats().requests();
    InferenceRequest r = request("r1", concat(PREFIX, prompt(2, 40)));
    assertEquals("n1", c.node("n0").explain(r).targetNodeId(), "n0 would pick n1 on its own");
    Transport x = c.net.transport("x");
    x.start((from, p) -> CompletableFuture.completedFuture(new byte[0]));
    CompletableFuture<byte[]> answer = x.request(InMemoryNetwork.addressOf("n0"),
        ForwardCodec.forward(r, "n1", 2), Duration.ofSeconds(30));
    c.sim.runUntilIdle(1_000_000);

    assertArrayEquals(expected(r), result(answer).result().outputTokens());
    assertEquals(warmed, c.engine("n1").stats().requests(), "the request went back to its origin");
    assertEquals(1, c.engine("n0").stats().requests());
  }

  private static ForwardCodec.Result result(CompletableFuture<byte[]> f) {
    try {
      return (ForwardCodec.Result) ForwardCodec.decode(f.join());
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }

  private static String describe(CompletableFuture<?> f) {
    try {
      return String.valueOf(f.join());
    } catch (RuntimeException e) {
      return String.valueOf(e.getCause());
    }
  }
}
