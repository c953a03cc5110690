package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.OracleCluster.request;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.AnswerBudgetException;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.EngineTimeoutException;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.spi.InvalidRequestException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * What the node does when its own engine fails a request or answers one impossibly, and how it
 * checks engines' answers, in simulated time.
 */
class LocalFailureTest {

  static final int[] PREFIX = prompt(42, 480);

  /** How a wrapped engine misbehaves. */
  enum Fault {
    NONE,
    BUSY,
    UNREACHABLE,
    ANSWER_BUDGET,
    BAD_REQUEST,
    INVALID,
    TIMEOUT,
    HANG,
    TOO_MANY_TOKENS,
    NEGATIVE_TOKEN,
    FEWER_PROMPT_TOKENS,
    FAR_MORE_PROMPT_TOKENS,
    ONE_MORE_PROMPT_TOKEN
  }

  /** Wraps a node's engine with a switchable fault; counts the calls that reached it. */
  static final class Faulty extends ForwardingEngine {
    volatile Fault fault = Fault.NONE;
    final AtomicInteger calls = new AtomicInteger();

    Faulty(InferenceEngine inner) {
      super(inner);
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      calls.incrementAndGet();
      switch (fault) {
        case BUSY:
          return CompletableFuture.failedFuture(new EngineBusyException("engine busy: 4 in flight"));
        case UNREACHABLE:
          return CompletableFuture.failedFuture(new EngineException("server unreachable", true));
        case ANSWER_BUDGET:
          return CompletableFuture.failedFuture(new AnswerBudgetException("the answer could not "
              + "get its share of the heap this engine gives the answers (answerBudget)", null));
        case BAD_REQUEST:
          return CompletableFuture.failedFuture(new EngineException("HTTP 400", false));
        case INVALID:
          return CompletableFuture.failedFuture(new InvalidRequestException(
              "server answered HTTP 400: maximum context length is 50 tokens"));
        case TIMEOUT:
          return CompletableFuture.failedFuture(
              new EngineTimeoutException("no answer within 60000 ms (requestTimeout)", null));
        case HANG:
          return new CompletableFuture<>();
        default:
          break;
      }
      Fault f = fault;
      return delegate.execute(r).thenApply(res -> alter(res, f));
    }

    private static EngineResult alter(EngineResult r, Fault f) {
      BiFunction<int[], Integer, EngineResult> with = (out, prompt) -> new EngineResult(out,
          r.text(), prompt, Math.min(r.cachedPromptTokens(), prompt), r.prefillNanos(),
          r.decodeNanos());
      int[] out = r.outputTokens();
      return switch (f) {
        case TOO_MANY_TOKENS -> with.apply(new int[out.length + 47], r.promptTokens());
        case NEGATIVE_TOKEN -> {
          int[] o = out.clone();
          o[0] = -4;
          yield with.apply(o, r.promptTokens());
        }
        case FEWER_PROMPT_TOKENS -> with.apply(out, r.promptTokens() - 1);
        case FAR_MORE_PROMPT_TOKENS -> with.apply(out, r.promptTokens() + 50);
        case ONE_MORE_PROMPT_TOKEN -> with.apply(out, r.promptTokens() + 1); // a BOS token
        default -> r;
      };
    }
  }

  static final class Cluster {
    final OracleCluster c;
    final List<Faulty> engines = new ArrayList<>();

    Cluster(int n, RouterConfig config) {
      c = OracleCluster.withWrappedEngines(n, config, 7, UnaryOperator.identity(), Faulty::new,
          engines);
    }

    Faulty engine(int i) {
      return engines.get(i);
    }

    CompletableFuture<InferenceResponse> submit(String at, InferenceRequest r) {
      CompletableFuture<InferenceResponse> f = c.runUntilDone(c.node(at).submit(r));
      assertTrue(f.isDone(), "the request never completed");
      return f;
    }
  }

  static RouterConfig.Builder config(RoutingPolicy policy) {
    return RouterConfig.builder().policy(policy).initialPrefillNanosPerToken(200_000)
        .coldPlacement(false);
  }

  static Throwable failure(CompletableFuture<InferenceResponse> f) {
    Throwable t = f.handle((r, e) -> e).join();
    if (t instanceof CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    assertInstanceOf(RequestFailedException.class, t);
    return t;
  }

  static void assertCounters(NodeStats s) {
    assertEquals(s.requests(), s.servedLocally() + s.forwarded() + s.failed(), s.toString());
    assertEquals(s.pushedBack(), s.fallbacks().get(FallbackCause.BUSY), s.toString());
    assertEquals(0, s.inFlight(), s.toString());
  }

  @ParameterizedTest
  @EnumSource(value = Fault.class, names = {"BUSY", "UNREACHABLE"})
  void aRetryableLocalFailureIsTriedOnAPeer(Fault fault) {
    Cluster k = new Cluster(2, config(RoutingPolicy.COST_AWARE).build());
    k.engine(0).fault = fault;
    InferenceRequest r = request("q", prompt(5, 200));

    InferenceResponse resp = k.submit("n0", r).join();

    assertEquals("n1", resp.servedBy(), "the local engine failed " + fault + ": " + resp.decision());
    assertTrue(resp.forwarded());
    assertEquals(2, resp.attempts());
    assertEquals(FallbackCause.LOCAL_FAILED, resp.fallbackCause());
    assertArrayEquals(expected(r), resp.result().outputTokens());
    assertTrue(resp.decision().isLocal(), "the first choice was local: " + resp.decision());
    NodeStats s = k.c.node("n0").stats();
    assertEquals(1, s.fallbacks().get(FallbackCause.LOCAL_FAILED));
    assertEquals(0, s.totalFallbacks(), "a local failure is not a forward that fell back");
    assertEquals(1, s.forwarded());
    assertEquals(0, s.failed());
    assertCounters(s);

    // a failure that says the request itself is bad is final: no peer sees it
    k.engine(0).fault = Fault.BAD_REQUEST;
    int before = k.engine(1).calls.get();
    Throwable t = failure(k.submit("n0", request("bad", prompt(6, 200))));
    assertInstanceOf(EngineException.class, t.getCause());
    assertEquals(before, k.engine(1).calls.get(), "a bad request was sent to a peer");
    assertCounters(k.c.node("n0").stats());
  }

  @Test
  void busyEverywhereFailsWithTheBusyCauseAndTheBusyPeerPushesBack() {
    Cluster k = new Cluster(3, config(RoutingPolicy.COST_AWARE).build());
    for (int i = 0; i < 3; i++) {
      k.engine(i).fault = Fault.BUSY;
    }

    Throwable t = failure(k.submit("n0", request("q", prompt(5, 200))));

    assertInstanceOf(EngineBusyException.class, t.getCause(), "busy everywhere: " + t);
    NodeStats s = k.c.node("n0").stats();
    assertEquals(1, s.failed());
    assertEquals(1, s.fallbacks().get(FallbackCause.LOCAL_FAILED));
    // each peer's busy engine answered the forward BUSY: push-back, not a peer failure
    assertEquals(2, s.fallbacks().get(FallbackCause.BUSY), s.fallbacks().toString());
    assertEquals(0, s.fallbacks().get(FallbackCause.PEER_FAILED), s.fallbacks().toString());
    assertEquals(2, s.pushedBack());
    assertEquals(1, k.c.node("n1").stats().refusedForPeers());
    assertEquals(1, k.c.node("n2").stats().refusedForPeers());
    assertEquals(1, k.engine(0).calls.get(), "the busy local engine was asked again");
    assertCounters(s);

    // the local-only policy never forwards, busy or not
    Cluster solo = new Cluster(2, config(RoutingPolicy.LOCAL_ONLY).build());
    solo.engine(0).fault = Fault.BUSY;
    Throwable u = failure(solo.submit("n0", request("q", prompt(5, 200))));
    assertInstanceOf(EngineBusyException.class, u.getCause());
    assertEquals(0, solo.engine(1).calls.get());
    assertEquals(0, solo.c.node("n0").stats().fallbacks().get(FallbackCause.LOCAL_FAILED));
  }

  @Test
  void aRequestItsLocalEngineFailedIsNotRunThereAgainOnceItsForwardsAreUsedUp() {
    // three peers, all busy: the local engine's failure sends the request to each in turn, and
    // the third forward's push-back uses up its forwards; the local engine, which failed it
    // already, is not asked again (a request runs here at most once): the request fails with
    // the local engine's failure
    Cluster k = new Cluster(4, config(RoutingPolicy.COST_AWARE).build());
    for (int i = 0; i < 4; i++) {
      k.engine(i).fault = Fault.BUSY;
    }

    Throwable t = failure(k.submit("n0", request("q", prompt(5, 200))));

    assertInstanceOf(EngineBusyException.class, t.getCause(), "busy everywhere: " + t);
    NodeStats s = k.c.node("n0").stats();
    assertEquals(3, s.fallbacks().get(FallbackCause.BUSY), s.fallbacks().toString());
    for (int i = 1; i < 4; i++) {
      assertEquals(1, k.engine(i).calls.get(), "n" + i + "'s engine");
    }
    assertEquals(1, k.engine(0).calls.get(), "the local engine ran the request again");
    assertEquals(1, s.failed());
    assertCounters(s);
  }

  @ParameterizedTest
  @EnumSource(value = Fault.class,
      names = {"TOO_MANY_TOKENS", "NEGATIVE_TOKEN", "FEWER_PROMPT_TOKENS", "FAR_MORE_PROMPT_TOKENS"})
  void anImpossibleLocalAnswerIsAnEngineFailureAndIsTriedOnAPeer(Fault fault) {
    // alone, the request fails with a typed engine error instead of passing the answer on
    Cluster solo = new Cluster(1, config(RoutingPolicy.COST_AWARE).build());
    solo.engine(0).fault = fault;
    Throwable t = failure(solo.submit("n0", request("q", prompt(5, 200))));
    EngineException e = assertInstanceOf(EngineException.class, t.getCause());
    assertTrue(e.retryable());
    assertTrue(e.getMessage().contains("cannot be for the request"), e.getMessage());
    assertEquals(0, solo.c.node("n0").stats().cachedPromptTokens());
    assertEquals(0, solo.c.node("n0").stats().fallbacks().get(FallbackCause.LOCAL_FAILED),
        "no peer was tried");
    assertCounters(solo.c.node("n0").stats());

    // with a peer, the peer serves it
    Cluster k = new Cluster(2, config(RoutingPolicy.COST_AWARE).build());
    k.engine(0).fault = fault;
    InferenceRequest r = request("q", prompt(5, 200));
    InferenceResponse resp = k.submit("n0", r).join();
    assertEquals("n1", resp.servedBy());
    assertArrayEquals(expected(r), resp.result().outputTokens());
    assertEquals(FallbackCause.LOCAL_FAILED, resp.fallbackCause());
    assertCounters(k.c.node("n0").stats());
  }

  @Test
  void anEngineThatCountsABosTokenIsBelievedLocallyAndWhenForwarded() {
    Cluster k = new Cluster(2, config(RoutingPolicy.COST_AWARE).build());
    k.engine(0).fault = Fault.ONE_MORE_PROMPT_TOKEN;
    k.engine(1).fault = Fault.ONE_MORE_PROMPT_TOKEN;
    k.c.warm("n1", concat(PREFIX, prompt(1, 40)));
    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));

    InferenceResponse resp = k.submit("n0", r).join();

    assertEquals("n1", resp.servedBy(), "the peer's answer was rejected: " + resp);
    assertEquals(FallbackCause.NONE, resp.fallbackCause());
    assertEquals(r.length() + 1, resp.result().promptTokens());
    assertEquals(0, k.c.node("n0").stats().fallbacks().get(FallbackCause.PROTOCOL_ERROR));

    InferenceRequest cold = request("c", prompt(11, 100));
    InferenceResponse local = k.submit("n0", cold).join();
    assertEquals("n0", local.servedBy());
    assertFalse(local.forwarded());
    NodeStats s = k.c.node("n0").stats();
    assertTrue(s.cachedPromptTokens() <= s.promptTokens(), s.toString());
    assertCounters(s);
  }

  @ParameterizedTest
  @EnumSource(value = Fault.class, names = {"INVALID", "TIMEOUT"})
  void anInvalidRequestOrATimeoutOfTheLocalEngineIsNotTriedOnAPeer(Fault fault) {
    // an invalid request fails on every engine, and a generation that outlasted the time limit
    // here would outlast it there: neither is worth a peer's engine time
    Cluster k = new Cluster(3, config(RoutingPolicy.COST_AWARE).build());
    k.engine(0).fault = fault;

    Throwable t = failure(k.submit("n0", request("q", prompt(5, 200))));

    EngineException e = assertInstanceOf(EngineException.class, t.getCause());
    Class<? extends EngineException> type = fault == Fault.INVALID
        ? InvalidRequestException.class : EngineTimeoutException.class;
    assertInstanceOf(type, e);
    assertFalse(e.retryable());
    assertEquals(1, k.engine(0).calls.get());
    assertEquals(0, k.engine(1).calls.get() + k.engine(2).calls.get(), "a peer was tried");
    NodeStats s = k.c.node("n0").stats();
    assertEquals(0, s.fallbacks().get(FallbackCause.LOCAL_FAILED));
    assertEquals(1, s.failed());
    assertCounters(s);
  }

  @Test
  void aLocalFailureAfterTheLastForwardIsNotSentOnToAnotherPeer() {
    // n1 to n3 hold the prefix and push back; after the third forward the request runs here,
    // and the local engine fails it too: its forwards are used up, so it fails, though n4
    // (which holds nothing and was never tried) would serve it
    Cluster k = new Cluster(5, config(RoutingPolicy.COST_AWARE).build());
    for (int i = 1; i <= 3; i++) {
      k.c.warm("n" + i, concat(PREFIX, prompt(1, 40)));
      k.engine(i).fault = Fault.BUSY;
    }
    k.engine(0).fault = Fault.BUSY;
    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));

    Throwable t = failure(k.submit("n0", r));

    assertInstanceOf(EngineBusyException.class, t.getCause(), t.toString());
    for (int i = 1; i <= 3; i++) {
      assertEquals(1, k.engine(i).calls.get(), "n" + i + "'s engine");
    }
    assertEquals(1, k.engine(0).calls.get(), "the local engine, after the third forward");
    assertEquals(0, k.engine(4).calls.get(), "a fourth forward");
    NodeStats s = k.c.node("n0").stats();
    assertEquals(3, s.fallbacks().get(FallbackCause.BUSY), s.fallbacks().toString());
    assertEquals(1, s.failed());
    assertCounters(s);
  }

  @ParameterizedTest
  @EnumSource(value = Fault.class, names = {"INVALID", "TIMEOUT", "BAD_REQUEST"})
  void aPeersFailureThatIsNotRetryableIsNotTriedOnAnotherPeer(Fault fault) {
    // n1 and n2 hold the prefix, n0 does not: the origin forwards to one of them, and before
    // this was fixed tried the other after its non-retryable failure (then ran it here)
    Cluster k = new Cluster(3, config(RoutingPolicy.COST_AWARE).build());
    k.c.warm("n1", concat(PREFIX, prompt(1, 40)));
    k.c.warm("n2", concat(PREFIX, prompt(1, 40)));
    k.engine(1).fault = fault;
    k.engine(2).fault = fault;
    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));

    InferenceResponse resp = k.submit("n0", r).join();

    // the local engine judges it once; this one serves it (an engine that refuses it as
    // invalid would fail it here too: see below)
    assertEquals("n0", resp.servedBy());
    assertArrayEquals(expected(r), resp.result().outputTokens());
    assertEquals(FallbackCause.PEER_FAILED, resp.fallbackCause());
    assertEquals(2, resp.attempts());
    assertEquals(1, k.engine(1).calls.get() + k.engine(2).calls.get(),
        "another peer was tried after a non-retryable failure");
    assertEquals(1, k.engine(0).calls.get());
    NodeStats s = k.c.node("n0").stats();
    assertEquals(1, s.fallbacks().get(FallbackCause.PEER_FAILED));
    assertCounters(s);
    RouteDecision d = k.c.node("n0").explain(request("x", concat(PREFIX, prompt(7, 64))));
    for (int i = 1; i < d.candidates().size(); i++) {
      assertEquals(RouteDecision.SkipReason.NONE, d.candidates().get(i).skipped(),
          "a peer that refused a request is not cooled down: " + d);
    }

    if (fault == Fault.INVALID) {
      // every engine refuses it: one peer and the local engine saw it, and the client learns
      // that the request is invalid
      // (another prefix: n0 holds the first one now)
      int[] other = prompt(43, 480);
      k.c.warm("n1", concat(other, prompt(1, 40)));
      k.c.warm("n2", concat(other, prompt(1, 40)));
      k.engine(0).fault = Fault.INVALID;
      int peerCalls = k.engine(1).calls.get() + k.engine(2).calls.get();
      Throwable t = failure(k.submit("n0", request("q2", concat(other, prompt(10, 64)))));
      assertInstanceOf(InvalidRequestException.class, t.getCause());
      assertEquals(peerCalls + 1, k.engine(1).calls.get() + k.engine(2).calls.get());
      assertEquals(2, k.engine(0).calls.get());
      assertCounters(k.c.node("n0").stats());
    }
  }

  @Test
  void aForwardItsPeerHadNoHeapToReadIsPushedBackAndTriedElsewhere() {
    // n1 and n2 hold the prefix, n0 does not; both are short of heap to read their engines'
    // answers: each pushes the forward back (BUSY, as an engine at capacity: the node is
    // overloaded, its engine is not failing), so the origin cools each down for busyCooldown,
    // not failureCooldown, tries the other, then runs it here
    Cluster k = new Cluster(3, config(RoutingPolicy.COST_AWARE).build());
    k.c.warm("n1", concat(PREFIX, prompt(1, 40)));
    k.c.warm("n2", concat(PREFIX, prompt(1, 40)));
    k.engine(1).fault = Fault.ANSWER_BUDGET;
    k.engine(2).fault = Fault.ANSWER_BUDGET;
    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));

    InferenceResponse resp = k.submit("n0", r).join();

    assertEquals("n0", resp.servedBy());
    assertArrayEquals(expected(r), resp.result().outputTokens());
    assertEquals(FallbackCause.BUSY, resp.fallbackCause());
    assertEquals(1, k.engine(1).calls.get(), "n1's engine");
    assertEquals(1, k.engine(2).calls.get(), "a peer short of heap: the other was not tried");
    NodeStats s = k.c.node("n0").stats();
    assertEquals(2, s.fallbacks().get(FallbackCause.BUSY), s.fallbacks().toString());
    assertEquals(0, s.fallbacks().get(FallbackCause.PEER_FAILED),
        "a peer short of heap answered FAILED, as a failing engine: " + s.fallbacks());
    assertEquals(2, s.pushedBack(), s.toString());
    assertEquals(1, k.c.node("n1").stats().refusedForPeers());
    assertEquals(1, k.c.node("n2").stats().refusedForPeers());
    assertCounters(s);
  }

  @Test
  void aPeersEngineTimeoutIsNotTriedOnAnotherPeer() {
    // the peers' engines never answer; each node gives up after engineTimeout, well before the
    // origin's forwarding timeout, and answers FAILED, not retryable
    Cluster k = new Cluster(3, config(RoutingPolicy.COST_AWARE)
        .engineTimeout(Duration.ofSeconds(5)).build());
    k.c.warm("n1", concat(PREFIX, prompt(1, 40)));
    k.c.warm("n2", concat(PREFIX, prompt(1, 40)));
    k.engine(1).fault = Fault.HANG;
    k.engine(2).fault = Fault.HANG;
    InferenceRequest r = request("q", concat(PREFIX, prompt(9, 64)));

    InferenceResponse resp = k.submit("n0", r).join();

    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.PEER_FAILED, resp.fallbackCause());
    assertEquals(1, k.engine(1).calls.get() + k.engine(2).calls.get(),
        "a peer's engine timeout was tried on another peer");
    assertEquals(0, k.c.node("n0").stats().fallbacks().get(FallbackCause.TIMEOUT),
        "the origin's forwarding timeout fired first: the test does not test the peer's");

    // alone, the node's own engineTimeout is a timeout failure
    k.engine(0).fault = Fault.HANG;
    Throwable t = failure(k.submit("n0", request("q2", prompt(12, 100))));
    EngineTimeoutException e = assertInstanceOf(EngineTimeoutException.class, t.getCause());
    assertTrue(e.getMessage().contains("engineTimeout"), e.getMessage());
    assertCounters(k.c.node("n0").stats());
  }

  @ParameterizedTest
  @EnumSource(value = Fault.class, names = {"INVALID", "TIMEOUT"})
  void aRetryableLocalFailureAfterAPeersRefusalIsFinal(Fault fault) {
    // n1 and n2 hold the prefix, n0 does not: the origin forwards to one of them, whose engine
    // refuses it (not retryably); the local engine then judges it, but is busy. Another peer
    // would fail it alike: it is not asked, and the failure names the peer's refusal
    Cluster k = new Cluster(3, config(RoutingPolicy.COST_AWARE).build());
    k.c.warm("n1", concat(PREFIX, prompt(1, 40)));
    k.c.warm("n2", concat(PREFIX, prompt(1, 40)));
    k.engine(1).fault = fault;
    k.engine(2).fault = fault;
    k.engine(0).fault = Fault.BUSY;

    Throwable t = failure(k.submit("n0", request("q", concat(PREFIX, prompt(9, 64)))));

    assertEquals(1, k.engine(1).calls.get() + k.engine(2).calls.get(),
        "another peer was tried after a non-retryable failure");
    assertEquals(1, k.engine(0).calls.get());
    EngineException e = assertInstanceOf(EngineException.class, t.getCause());
    assertFalse(e.retryable());
    assertTrue(t.getMessage().contains("peer n1") || t.getMessage().contains("peer n2"),
        t.getMessage());
    NodeStats s = k.c.node("n0").stats();
    assertEquals(1, s.fallbacks().get(FallbackCause.PEER_FAILED));
    assertEquals(0, s.fallbacks().get(FallbackCause.LOCAL_FAILED));
    assertCounters(s);
  }

  @Test
  void aPeersRefusalAfterTheLocalEngineFailedIsFinal() {
    // n0 holds the prefix, n1 half of it, n2 nothing: the local engine is busy, so the request
    // goes to n1, whose engine refuses it as invalid: n2 is not asked, and the failure names
    // the peer's refusal
    Cluster k = new Cluster(3, config(RoutingPolicy.COST_AWARE).build());
    k.c.warm("n0", concat(PREFIX, prompt(1, 40)));
    k.c.warm("n1", concat(java.util.Arrays.copyOf(PREFIX, 240), prompt(2, 40)));
    k.engine(0).fault = Fault.BUSY;
    k.engine(1).fault = Fault.INVALID;

    Throwable t = failure(k.submit("n0", request("q", concat(PREFIX, prompt(9, 64)))));

    EngineException e = assertInstanceOf(EngineException.class, t.getCause());
    assertFalse(e.retryable());
    assertTrue(t.getMessage().contains("peer n1") && t.getMessage().contains("context length"),
        t.getMessage());
    assertEquals(1, k.engine(1).calls.get());
    assertEquals(0, k.engine(2).calls.get(), "another peer was tried");
    assertEquals(1, k.engine(0).calls.get(), "the local engine ran it twice");
    assertCounters(k.c.node("n0").stats());
  }
}
