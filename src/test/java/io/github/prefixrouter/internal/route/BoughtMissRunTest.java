package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.OracleCluster.request;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeNotRunningException;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouteDecision.Reason;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A miss bought for local caching ({@link Reason#LOCAL_CACHING}) reserves the local engine while
 * its run goes on, and no longer; it counts in the cache turnover, and reserves anything, only
 * once the engine has taken its run. n1 holds a 2,048-token prefix across a 200 ms round trip;
 * n0 rents it once and buys it on the next request. In simulated time.
 */
class BoughtMissRunTest {

  static final long MS = 1_000_000L;

  /**
   * Wraps an engine that can be made to hold its runs: while {@link #hold} is set it takes a run
   * and answers nothing until the test fails it ({@link #fail}) or answers it ({@link #answer});
   * a cancel fails a held run, as an engine ends a cancelled run. A held run shows in the load as
   * running. While {@link #refusal} is set it takes no run.
   */
  static final class Holding extends CountingEngine {
    boolean hold;
    /** While set, every run is refused at once with it: a failed future, or thrown. */
    EngineException refusal;
    boolean throwsRefusal;
    private final Map<String, CompletableFuture<EngineResult>> held = new LinkedHashMap<>();

    Holding(InferenceEngine delegate) {
      super(delegate);
    }

    @Override
    CompletableFuture<EngineResult> run(InferenceRequest r, OutputListener l) {
      if (refusal != null) {
        if (throwsRefusal) {
          throw refusal;
        }
        return CompletableFuture.failedFuture(refusal);
      }
      if (!hold) {
        return delegate.execute(r, l);
      }
      CompletableFuture<EngineResult> f = new CompletableFuture<>();
      held.put(r.id(), f);
      return f;
    }

    /** Fails the held run of {@code id} with {@code e}. */
    void fail(String id, EngineException e) {
      CompletableFuture<EngineResult> f = held.remove(id);
      assertTrue(f != null, "no run of " + id + " is held");
      f.completeExceptionally(e);
    }

    /** Answers the held run of {@code r}, as an engine that had all of its prompt cached. */
    void answer(InferenceRequest r) {
      CompletableFuture<EngineResult> f = held.remove(r.id());
      assertTrue(f != null, "no run of " + r.id() + " is held");
      f.complete(new EngineResult(expected(r), "", r.length(), r.length(), -1, -1));
    }

    @Override
    public EngineLoad load() {
      EngineLoad l = delegate.load();
      return new EngineLoad(l.queueDepth(), l.inFlight() + held.size());
    }

    @Override
    public void cancel(String requestId) {
      CompletableFuture<EngineResult> f = held.remove(requestId);
      if (f != null) {
        f.completeExceptionally(new EngineException("request " + requestId + " was cancelled",
            false));
      } else {
        delegate.cancel(requestId);
      }
    }
  }

  /** Two nodes, 100 ms apart, n1 holding {@link #PREFIX}. */
  static final class Pair extends WrappedEngineCluster<Holding> {
    Pair(RouterConfig config) {
      this(config, new OracleCluster.Hooks());
    }

    Pair(RouterConfig config, OracleCluster.Hooks hooks) {
      super(2, config, UnaryOperator.identity(), Holding::new, hooks);
      c.rtt(Duration.ofMillis(100));
      c.warm("n1", PREFIX);
    }

    long now() {
      return c.sim.nanoTime();
    }

    /** What is left of a bought miss at n0 now, as its decisions add it to the local cost. */
    long reserved() {
      return NodeProbe.demandOf(node(0)).reservedNanos(now());
    }

    /**
     * How long n0 expects a prefix it caches now to stay, from the tokens its runs inserted into
     * its cache (its turnover): 10 minutes, the cap, while none did.
     */
    long residency() {
      return NodeProbe.demandOf(node(0)).residencyNanos(now());
    }
  }

  static final int[] PREFIX = prompt(42, 2048);

  /** A request for n1's prefix, with a question of its own. */
  static InferenceRequest forPrefix(String id, long seed) {
    return request(id, concat(PREFIX, prompt(seed, 32)));
  }

  static RouterConfig.Builder config() {
    return RouterConfig.builder().policy(RoutingPolicy.COST_AWARE)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false);
  }

  /** n0 rents the prefix once: the request goes to n1. */
  static void rent(Pair k) {
    InferenceResponse rented = k.await(k.node(0).submit(forPrefix("rented", 1)));
    assertEquals(Reason.PEER_CHEAPER, rented.decision().reason(), rented.toString());
  }

  /**
   * Then it buys the prefix with request {@code r}, whose run its engine holds: returns the
   * answer to come, once the run has started.
   */
  static CompletableFuture<InferenceResponse> buy(Pair k, InferenceRequest r) {
    k.engine(0).hold = true;
    int calls = k.engine(0).calls;
    CompletableFuture<InferenceResponse> answer = k.node(0).submit(r);
    assertEquals(calls + 1, k.engine(0).calls, "the request was not bought: not run here");
    assertTrue(k.reserved() > 0, "the bought miss reserves the engine");
    k.engine(0).hold = false;
    return answer;
  }

  /** How a bought miss's run ends early. */
  enum End {
    /** Its engine answers 10 ms in (it had the prompt cached, though the index did not know). */
    ANSWERED,
    /** Its engine fails it 10 ms in (a retryable error: the request goes to the peer). */
    FAILED,
    /** Its client cancels it 10 ms in. */
    CANCELLED,
    /** It is given up at {@code engineTimeout}, 300 ms in. */
    TIMED_OUT
  }

  /**
   * A bought miss whose run ends before the miss was expected to end no longer reserves the
   * engine: the next request for the head is not charged the rest of a miss nobody runs, and is
   * bought in turn rather than sent to the peer.
   */
  @ParameterizedTest
  @EnumSource(End.class)
  void aBoughtMissWhoseRunEndsEarlyNoLongerReservesTheEngine(End end) {
    RouterConfig.Builder b = config();
    if (end == End.TIMED_OUT) {
      b.engineTimeout(Duration.ofMillis(300));
    }
    Pair k = new Pair(b.build());
    rent(k);
    InferenceRequest bought = forPrefix("bought", 2);
    CompletableFuture<InferenceResponse> answer = buy(k, bought);
    assertTrue(k.reserved() > 400 * MS, "a miss of 2,080 tokens at 0.2 ms: " + k.reserved() / MS
        + " ms");
    switch (end) {
      case ANSWERED -> {
        k.advanceBy(10 * MS);
        k.engine(0).answer(bought);
      }
      case FAILED -> {
        k.advanceBy(10 * MS);
        k.engine(0).fail(bought.id(), new EngineException("engine error", true));
      }
      case CANCELLED -> {
        k.advanceBy(10 * MS);
        answer.cancel(false);
      }
      case TIMED_OUT -> k.advanceBy(300 * MS);
    }
    k.advanceBy(1 * MS);
    assertEquals(0, k.engine(0).load().total(), "the bought miss's run still holds the engine");
    assertEquals(0, k.reserved(), "the bought miss's run ended (" + end + "), yet a request "
        + "here is still charged " + k.reserved() / MS + " ms of it");
    // the next request for the head is bought in turn (its run held as the first was)
    k.engine(0).hold = true;
    k.node(0).submit(forPrefix("next", 3));
    assertEquals(2, k.engine(0).calls, "the engine is idle and no miss is running, yet the next "
        + "request was not bought");
  }

  /**
   * A cache small enough that a bought miss's 2,080 tokens show in the turnover: inserted once,
   * they make the residency about 2 minutes (4,096 tokens at 2,080 a minute), below its cap.
   */
  static RouterConfig smallCache() {
    return config().treeCapacityTokens(4096).build();
  }

  /**
   * A bought request abandoned between the decision to buy it and the start of its run (the
   * node stopping, on another thread, forced here into that gap by the node's clock being read
   * as the decision prunes its peer records, every 1,024th decision) never runs here: nothing
   * stays reserved, and the cache turnover counts none of its tokens.
   */
  @Test
  void aBoughtMissAbandonedBeforeItsRunStartsIsNoRunHere() {
    List<Runnable> inPrune = new ArrayList<>();
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    hooks.clockWrap = clock -> () -> {
      if (!inPrune.isEmpty() && StackWalker.getInstance().walk(st -> st.anyMatch(
          f -> f.getClassName().equals(RouterNode.class.getName())
              && f.getMethodName().equals("pruneHealth")))) {
        inPrune.remove(0).run();
      }
      return clock.nanoTime();
    };
    Pair k = new Pair(smallCache(), hooks);
    rent(k);
    inPrune.add(() -> k.node(0).stop(Duration.ZERO));
    NodeProbe.decisionsOf(k.node(0)).set(1023); // the next decision prunes
    CompletableFuture<InferenceResponse> bought = k.node(0).submit(forPrefix("bought", 2));
    assertTrue(inPrune.isEmpty(), "the node did not stop between the decision and the run");
    Throwable t = k.c.runUntilDone(bought.handle((r, e) -> e)).join();
    assertInstanceOf(NodeNotRunningException.class,
        t instanceof CompletionException ? t.getCause() : t);
    assertEquals(0, k.engine(0).calls, "the abandoned request ran on the engine");
    assertEquals(0, k.reserved(), "the bought request never ran, yet the engine is reserved for "
        + k.reserved() / MS + " ms of its miss");
    assertEquals(LocalDemand.MAX_RESIDENCY_NANOS, k.residency(), "the bought request never ran, "
        + "yet the cache turnover counts its tokens: a residency of " + k.residency() / MS
        + " ms");
  }

  /**
   * A bought request whose run the engine refuses at once ({@code execute} returns a failed
   * future, or throws) never ran here: nothing stays reserved, and the cache turnover counts
   * none of its tokens. The request goes to the peer.
   */
  @ParameterizedTest(name = "refusal thrown: {0}")
  @ValueSource(booleans = {false, true})
  void aBoughtMissTheEngineRefusesAtOnceIsNoRunHere(boolean thrown) {
    Pair k = new Pair(smallCache());
    rent(k);
    k.engine(0).refusal = new EngineException("connection refused", true);
    k.engine(0).throwsRefusal = thrown;
    InferenceResponse a = k.await(k.node(0).submit(forPrefix("bought", 2)));
    assertEquals(Reason.LOCAL_CACHING, a.decision().reason(), a.toString());
    assertEquals(1, k.engine(0).calls, "the bought request was not given to the engine");
    assertEquals("n1", a.servedBy(), a.toString());
    assertEquals(FallbackCause.LOCAL_FAILED, a.fallbackCause(), a.toString());
    assertEquals(0, k.reserved(), "the engine refused the bought request, yet it is reserved for "
        + k.reserved() / MS + " ms of its miss");
    assertEquals(LocalDemand.MAX_RESIDENCY_NANOS, k.residency(), "the engine refused the bought "
        + "request, yet the cache turnover counts its tokens: a residency of "
        + k.residency() / MS + " ms");
  }

  /** The same request run here counts in the turnover: the residency drops below its cap. */
  @Test
  void aBoughtMissThatRunsCountsInTheCacheTurnover() {
    Pair k = new Pair(smallCache());
    rent(k);
    InferenceResponse a = k.await(k.node(0).submit(forPrefix("bought", 2)));
    assertEquals(Reason.LOCAL_CACHING, a.decision().reason(), a.toString());
    assertEquals("n0", a.servedBy(), a.toString());
    assertTrue(k.residency() < 150_000 * MS, "2,080 tokens inserted into a cache of 4,096: "
        + k.residency() / MS + " ms");
  }
}
