package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.OracleCluster.request;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.contract.ThrowingCacheEventListener;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.Named;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every accepted request gets an answer and leaves the in-flight count, whatever an SPI throws
 * (a RuntimeException, an Error, or a checked exception thrown undeclared) and wherever:
 * routing, the transport, the engine, the scheduler, the local index.
 */
class AnswerNeverLostTest {

  static final int[] PREFIX = prompt(42, 480);

  /** An Error an SPI may throw (a missing class, an assertion in a host's code). */
  static final class SpiError extends Error {
    private static final long serialVersionUID = 1L;

    SpiError(String m) {
      super(m);
    }
  }

  // A host's SPI may throw a checked exception without declaring it (code in a language without
  // checked exceptions may): it must lose no answer either. Old code caught RuntimeException and
  // Error only: such an exception escaped submit (execute, load, request, schedule) or the
  // claimed attempt (send, cancel, a guard's cancel), and the request was never answered.

  /** A checked exception as an SPI may throw it undeclared. */
  static RuntimeException checked(String m) {
    return ThrowingCacheEventListener.<RuntimeException>undeclared(new java.io.IOException(m));
  }

  /**
   * What an SPI throws, given the message: the thrower either throws it itself or returns it for
   * the caller to throw ({@code throw thrower.apply("load")}).
   */
  static Stream<Named<Function<String, RuntimeException>>> errorOrChecked() {
    return Stream.of(
        Named.of("an Error", m -> ThrowingCacheEventListener.undeclared(new SpiError(m))),
        Named.of("a checked exception thrown undeclared", AnswerNeverLostTest::checked));
  }

  static Stream<Named<Function<String, RuntimeException>>> runtimeOrChecked() {
    return Stream.of(
        Named.of("a RuntimeException", IllegalStateException::new),
        Named.of("a checked exception thrown undeclared", AnswerNeverLostTest::checked));
  }

  static final LocalPrefixIndex THROWING_INDEX = new LocalPrefixIndex() {
    @Override
    public int match(int[] tokens) {
      throw new IllegalStateException("index corrupted");
    }

    @Override
    public void onExecuted(int[] tokens) {}

    @Override
    public long cachedTokens() {
      return 0;
    }
  };

  static RouterNode node(SimulatedScheduler sim, Scheduler scheduler, InferenceEngine engine,
      RouterConfig cfg, LocalPrefixIndex index) {
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    return new RouterNode("n0", cfg, net.transport("n0"), engine, sim, scheduler,
        new SplittableRandom(1), List.of(), new RouterNode.Components(
            index, (t, l, o) -> 0, PeerView.NONE));
  }

  static void assertAnsweredLocally(RouterNode node, CompletableFuture<InferenceResponse> f,
      InferenceRequest r) {
    assertTrue(f.isDone(), "the request was never answered");
    InferenceResponse resp = f.join();
    assertArrayEquals(expected(r), resp.result().outputTokens());
    assertEquals("n0", resp.servedBy());
    assertEquals(0, node.stats().inFlight());
    assertTrue(node.stop().isDone(), "a request left in flight keeps the node from stopping");
    assertEquals(PrefixRouterNode.State.STOPPED, node.state());
  }

  @Test
  void aLocalIndexWhoseMatchThrowsStillAnswersTheRequestLocally() {
    // old code: the fallback ran the request, then building the response with no decision threw
    // inside the engine's callback: done=false, inFlight=0
    SimulatedScheduler sim = new SimulatedScheduler();
    RequestLifecycleTest.CountingEngine engine = new RequestLifecycleTest.CountingEngine();
    RouterNode node = node(sim, sim, engine, RouterConfig.builder().build(), THROWING_INDEX);
    node.start();
    InferenceRequest r = request("q", prompt(1, 64));
    CompletableFuture<InferenceResponse> f = node.submit(r);
    sim.runUntilIdle(1_000);
    assertEquals(1, engine.executions.get());
    assertTrue(f.isDone(), "the request was never answered");
    RouteDecision d = f.join().decision();
    assertEquals(RouteDecision.Reason.ROUTING_FAILED, d.reason());
    assertTrue(d.isLocal());
    assertEquals(1, node.stats().servedLocally());
    assertAnsweredLocally(node, f, r);
  }

  @Test
  void aForwardedRequestWhoseRoutingThrowsIsAnsweredToItsSender() throws Exception {
    // old code: the peer's execution never completed, so its sender waited for its timeout
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    RequestLifecycleTest.CountingEngine engine = new RequestLifecycleTest.CountingEngine();
    RouterNode n1 = new RouterNode("n1", RouterConfig.builder().build(), net.transport("n1"),
        engine, sim, sim, new SplittableRandom(1), List.of(),
        new RouterNode.Components(THROWING_INDEX, (t, l, o) -> 0, PeerView.NONE));
    n1.start();
    Transport x = net.transport("x");
    x.start((from, p) -> CompletableFuture.completedFuture(new byte[0]));
    InferenceRequest r = request("q", prompt(3, 100));
    CompletableFuture<byte[]> answer = x.request(InMemoryNetwork.addressOf("n1"),
        ForwardCodec.forward(r, "x", 1), Duration.ofSeconds(30));
    sim.runUntilIdle(1_000);
    assertTrue(answer.isDone());
    assertTrue(!answer.isCompletedExceptionally(),
        "no answer: " + answer.handle((b, t) -> t).join());
    ForwardCodec.Message m = ForwardCodec.decode(answer.join());
    assertTrue(m instanceof ForwardCodec.Result, String.valueOf(m));
    assertArrayEquals(expected(r), ((ForwardCodec.Result) m).result().outputTokens());
    assertEquals(0, n1.stats().inFlight());
    assertEquals(1, engine.executions.get());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("errorOrChecked")
  void anEngineWhoseLoadThrowsDoesNotThrowOutOfSubmit(Function<String, RuntimeException> thrower) {
    // old code: the Error escaped submit, the caller never got the request's future; so did the
    // checked exception
    SimulatedScheduler sim = new SimulatedScheduler();
    RequestLifecycleTest.CountingEngine counting = new RequestLifecycleTest.CountingEngine();
    InferenceEngine engine = new InferenceEngine() {
      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest request) {
        return counting.execute(request);
      }

      @Override
      public EngineLoad load() {
        throw thrower.apply("load");
      }
    };
    RouterNode node = node(sim, sim, engine, RouterConfig.builder().build(),
        RequestLifecycleTest.NO_CACHE);
    node.start();
    InferenceRequest r = request("q", prompt(1, 64));
    CompletableFuture<InferenceResponse> f = node.submit(r);
    sim.runUntilIdle(1_000);
    assertEquals(1, counting.executions.get());
    assertAnsweredLocally(node, f, r);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("errorOrChecked")
  void aTransportWhoseRequestThrowsFallsBackAndAnswersTheCaller(
      Function<String, RuntimeException> thrower) {
    // old code: the Error escaped submit; the guard timer later ran the request locally and
    // completed a future nobody held; a checked exception escaped submit too
    AtomicInteger forwards = new AtomicInteger();
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    hooks.transportWrap = t -> !t.localAddress().nodeId().equals("n0") ? t
        : new ForwardingTransport(t) {
          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            forwards.incrementAndGet();
            throw thrower.apply("transport request");
          }
        };
    OracleCluster c = cluster(hooks, RouterConfig.builder());
    long warmed = c.engine("n1").stats().requests();
    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(r);
    c.sim.runUntilIdle(1_000_000);
    assertTrue(f.isDone(), "the caller's future was never answered");
    InferenceResponse resp = f.join();
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.UNREACHABLE, resp.fallbackCause());
    assertArrayEquals(expected(r), resp.result().outputTokens());
    assertEquals(1, forwards.get());
    assertEquals(1, c.engine("n0").stats().requests(), "the request ran more than once");
    assertEquals(warmed, c.engine("n1").stats().requests());
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  @Test
  void aTransportThatNeverAnswersIsLetGoOfWhenTheGuardTimerEndsTheForward() {
    // old code: the guard ended the attempt and the request ran locally, but the transport's
    // future was left pending: a transport that ignores its timeout kept every such request
    // (and whatever it holds for it) for ever, where it is let go of as any forward the node
    // gives up is
    List<CompletableFuture<byte[]>> sent = new java.util.ArrayList<>();
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    hooks.transportWrap = t -> !t.localAddress().nodeId().equals("n0") ? t
        : new ForwardingTransport(t) {
          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            CompletableFuture<byte[]> f = new CompletableFuture<>(); // no answer, no timeout
            sent.add(f);
            return f;
          }
        };
    OracleCluster c = cluster(hooks, RouterConfig.builder()
        .forwardTimeout(Duration.ofMillis(50), Duration.ofMillis(50)));
    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(r);
    c.sim.runUntilIdle(1_000_000);
    assertTrue(f.isDone(), "the request was never answered");
    InferenceResponse resp = f.join();
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.TIMEOUT, resp.fallbackCause());
    assertEquals(1, sent.size());
    assertTrue(sent.get(0).isCancelled(),
        "the forward the guard timer ended is still awaited at the transport");
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("errorOrChecked")
  void aTransportWhoseSendThrowsAfterATimeoutStillRunsTheRequestLocally(
      Function<String, RuntimeException> thrower) {
    // old code: the CANCEL after the timeout threw out of the claimed attempt: never answered
    // (an Error or a checked exception alike)
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    hooks.transportWrap = t -> !t.localAddress().nodeId().equals("n0") ? t
        : new ForwardingTransport(t) {
          @Override
          public void send(PeerAddress to, byte[] payload) {
            throw thrower.apply("transport send");
          }
        };
    OracleCluster c = cluster(hooks, RouterConfig.builder()
        .forwardTimeout(Duration.ofMillis(50), Duration.ofMillis(50)));
    // n1 needs 100 x 5 ms to answer: the 50 ms forward times out
    InferenceRequest r = new InferenceRequest("q", concat(PREFIX, prompt(9, 64)),
        GenerationParams.greedy(100));
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(r);
    c.sim.runUntilIdle(1_000_000);
    assertTrue(f.isDone(), "the request was never answered");
    InferenceResponse resp = f.join();
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.TIMEOUT, resp.fallbackCause());
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("errorOrChecked")
  void anEngineWhoseCancelThrowsStillFailsTheTimedOutRequest(
      Function<String, RuntimeException> thrower) {
    // old code: the engine guard claimed the attempt, then cancel threw: never answered (an
    // Error or a checked exception alike)
    SimulatedScheduler sim = new SimulatedScheduler();
    InferenceEngine stalled = new InferenceEngine() {
      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest request) {
        return new CompletableFuture<>();
      }

      @Override
      public void cancel(String requestId) {
        throw thrower.apply("cancel");
      }
    };
    RouterNode node = node(sim, sim, stalled, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).engineTimeout(Duration.ofSeconds(1)).build(),
        RequestLifecycleTest.NO_CACHE);
    node.start();
    CompletableFuture<InferenceResponse> f = node.submit(request("q", prompt(1, 64)));
    sim.runUntilIdle(1_000);
    assertTrue(f.isDone(), "the timed-out request was never answered");
    Throwable t = f.handle((v, e) -> e).join();
    assertTrue(t instanceof RequestFailedException, String.valueOf(t));
    assertEquals(0, node.stats().inFlight());
    assertTrue(node.stop().isDone());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("errorOrChecked")
  void aSchedulerThatThrowsNeitherLosesTheRequestNorRunsItTwice(
      Function<String, RuntimeException> thrower) {
    // old code: the Error escaped submit after the engine had started the request; so did the
    // checked exception
    SimulatedScheduler sim = new SimulatedScheduler();
    Scheduler throwing = (delay, task) -> {
      throw thrower.apply("schedule");
    };
    RequestLifecycleTest.CountingEngine engine = new RequestLifecycleTest.CountingEngine();
    RouterNode node = node(sim, throwing, engine, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), RequestLifecycleTest.NO_CACHE);
    node.start();
    InferenceRequest r = request("q", prompt(1, 64));
    CompletableFuture<InferenceResponse> f = node.submit(r);
    assertEquals(1, engine.executions.get());
    assertAnsweredLocally(node, f, r);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("runtimeOrChecked")
  void aGuardTimerWhoseCancelThrowsDoesNotLoseTheAnswer(
      Function<String, RuntimeException> thrower) {
    // old code: cancelling the guard threw in the engine's callback before the answer was taken
    // (a RuntimeException or a checked exception alike)
    SimulatedScheduler sim = new SimulatedScheduler();
    Scheduler badCancel = (delay, task) -> () -> {
      throw thrower.apply("cancel of a timer");
    };
    RequestLifecycleTest.CountingEngine engine = new RequestLifecycleTest.CountingEngine();
    RouterNode node = node(sim, badCancel, engine, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), RequestLifecycleTest.NO_CACHE);
    node.start();
    InferenceRequest r = request("q", prompt(1, 64));
    CompletableFuture<InferenceResponse> f = node.submit(r);
    assertAnsweredLocally(node, f, r);
  }

  @Test
  void aLocalIndexWhoseUpdateThrowsAnErrorDoesNotLoseTheAnswer() {
    // old code: the Error thrown after the engine's answer was claimed: never answered
    SimulatedScheduler sim = new SimulatedScheduler();
    LocalPrefixIndex failingUpdate = new LocalPrefixIndex() {
      @Override
      public int match(int[] tokens) {
        return 0;
      }

      @Override
      public void onExecuted(int[] tokens) {
        throw new SpiError("update");
      }

      @Override
      public long cachedTokens() {
        return 0;
      }
    };
    RequestLifecycleTest.CountingEngine engine = new RequestLifecycleTest.CountingEngine();
    RouterNode node = node(sim, sim, engine, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), failingUpdate);
    node.start();
    InferenceRequest r = request("q", prompt(1, 64));
    CompletableFuture<InferenceResponse> f = node.submit(r);
    sim.runUntilIdle(1_000);
    assertAnsweredLocally(node, f, r);
  }

  // an engine whose execute throws an Error: RequestLifecycleTest
  @Test
  void anEngineWhoseExecuteThrowsACheckedExceptionFailsTheRequest() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InferenceEngine engine = r -> {
      throw checked("execute");
    };
    RouterNode node = node(sim, sim, engine, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), RequestLifecycleTest.NO_CACHE);
    node.start();
    CompletableFuture<InferenceResponse> f = node.submit(request("q", prompt(1, 64)));
    sim.runUntilIdle(1_000);
    assertTrue(f.isDone(), "the request was never answered");
    Throwable t = f.handle((v, e) -> e).join();
    assertTrue(t instanceof RequestFailedException, String.valueOf(t));
    assertEquals(0, node.stats().inFlight());
    assertTrue(node.stop().isDone(), "a request left in flight keeps the node from stopping");
  }

  private static OracleCluster cluster(OracleCluster.Hooks hooks, RouterConfig.Builder cfg) {
    OracleCluster c = new OracleCluster(2, cfg.policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).build(), 1, hooks)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    return c;
  }
}
