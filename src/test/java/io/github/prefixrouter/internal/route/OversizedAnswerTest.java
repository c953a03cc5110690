package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * An answer that does not fit a RESULT (a text above 1 MiB of UTF-8, or a whole message above
 * 5 MiB: the most output tokens, of large ids, with a long text) is no fault of the peer that
 * generated it: the peer answers with a typed frame instead of failing the request with the
 * encoder's exception, and its sender runs the request itself, without cooling the peer down or
 * sending it to another peer, whose answer would be as long.
 */
class OversizedAnswerTest {

  /** Text just over a RESULT's cap for requests whose id starts with "long". */
  static final String LONG_TEXT = "x".repeat(ForwardCodec.MAX_TEXT_BYTES + 1);

  /**
   * Text of exactly a RESULT's cap for requests whose id starts with "huge": with HUGE_OUTPUT
   * the answer is past the cap of a whole message, though each of its fields is within its own.
   */
  static final String CAP_TEXT = "x".repeat(ForwardCodec.MAX_TEXT_BYTES);

  /** The most output tokens, each of 4 varint bytes (2^21 and above): 4 MiB in a RESULT. */
  static final int[] HUGE_OUTPUT = new int[GenerationParams.MAX_TOKENS_LIMIT];

  static {
    java.util.Arrays.fill(HUGE_OUTPUT, 1 << 22);
  }

  /**
   * Answers every request at once; a request whose id starts with "long" gets LONG_TEXT, one
   * whose id starts with "huge" gets HUGE_OUTPUT and CAP_TEXT.
   */
  static final class TextEngine implements InferenceEngine {
    final List<InferenceRequest> ran = new ArrayList<>();

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      return execute(r, OutputListener.IGNORE);
    }

    /** Streams the whole output in one piece, then answers. */
    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r, OutputListener listener) {
      ran.add(r);
      if (r.id().startsWith("huge")) {
        listener.onOutput(HUGE_OUTPUT.clone(), CAP_TEXT);
        return CompletableFuture.completedFuture(
            new EngineResult(HUGE_OUTPUT, CAP_TEXT, r.length(), 0, 1_000, 1_000));
      }
      String text = r.id().startsWith("long") ? LONG_TEXT : "short";
      return CompletableFuture.completedFuture(
          new EngineResult(OracleCluster.expected(r), text, r.length(), 0, 1_000, 1_000));
    }
  }

  final SimulatedScheduler sim = new SimulatedScheduler();
  final InMemoryNetwork net = new InMemoryNetwork(sim, 1);
  final TextEngine e0 = new TextEngine();
  final TextEngine e1 = new TextEngine();
  final ScopedForwardTest.OnePeer view = new ScopedForwardTest.OnePeer();
  /** The answers n0 received to its FORWARDs, in order. */
  final List<CompletableFuture<byte[]>> answers = new ArrayList<>();
  RouterNode n0;
  RouterNode n1;

  void start() {
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    n0 = new RouterNode("n0", cfg, recording(net.transport("n0")), e0, sim, sim,
        new SplittableRandom(1), List.of(), new RouterNode.Components(
            new TreeIndex(ConcurrentPrefixTree.selfManaged(1 << 20)),
            new BlockChain(ScopedForwardTest.HASHER), view));
    n1 = new RouterNode("n1", cfg, net.transport("n1"), e1, sim, sim, new SplittableRandom(2),
        List.of(), new RouterNode.Components(RequestLifecycleTest.NO_CACHE,
            new BlockChain(ScopedForwardTest.HASHER), PeerView.NONE));
    n0.start();
    n1.start();
  }

  /** {@code t}, keeping the future of every answer to a FORWARD sent through it. */
  Transport recording(Transport t) {
    return new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload, Duration timeout) {
        CompletableFuture<byte[]> f = t.request(to, payload, timeout);
        answers.add(f);
        return f;
      }
    };
  }

  InferenceResponse submit(InferenceRequest r) {
    return submit(r, null);
  }

  /** {@code r} submitted to n0, streamed to {@code listener} unless it is null. */
  InferenceResponse submit(InferenceRequest r, OutputListener listener) {
    CompletableFuture<InferenceResponse> f =
        listener == null ? n0.submit(r) : n0.submit(r, listener);
    while (!f.isDone() && sim.runNext()) {
      // run the simulation
    }
    return f.join();
  }

  @Test
  void theSenderRunsItItselfWithoutCoolingThePeerDown() {
    start();
    int[] t = OracleCluster.prompt(5, 320);
    view.holds(CacheScope.DEFAULT, t);
    InferenceRequest big = new InferenceRequest("long-1", t, GenerationParams.greedy(4));

    InferenceResponse r = submit(big);
    assertEquals("n0", r.servedBy(), r.toString());
    assertFalse(r.forwarded());
    assertEquals(LONG_TEXT, r.result().text());
    assertEquals(1, e1.ran.size(), "the peer generated it once");
    assertEquals(1, e0.ran.size(), "then the sender ran it itself");
    assertEquals(FallbackCause.PEER_FAILED, r.fallbackCause(), r.toString());
    assertEquals(0, n0.malformedMessages());
    // the peer answered a frame, not a failure of the request carrying the encoder's exception
    assertEquals(1, answers.size());
    assertFalse(answers.get(0).isCompletedExceptionally(), answers.get(0).toString());
    ForwardCodec.Message m = ServingHarness.decode(answers.get(0));
    ForwardCodec.Failed failed = assertInstanceOf(ForwardCodec.Failed.class, m);
    assertFalse(failed.retryable(), failed.toString());
    // the peer answered no request: what it generated reached the sender as a failure
    assertEquals(0, n1.stats().servedForPeers(), "served for peers");

    // the peer is sound: the next request of a prefix it holds goes there
    int[] u = OracleCluster.prompt(6, 320);
    view.holds(CacheScope.DEFAULT, u);
    InferenceResponse s = submit(new InferenceRequest("q-2", u, GenerationParams.greedy(4)));
    assertEquals("n1", s.servedBy(), s.toString());
    assertTrue(s.forwarded());
    assertEquals(RouteDecision.SkipReason.NONE, s.decision().candidates().get(1).skipped());
    assertEquals(1, n1.stats().servedForPeers(), "served for peers");
  }

  @Test
  void anAnswerPastTheMessageCapIsRefusedAsTooLargeToo() {
    start();
    int[] t = OracleCluster.prompt(7, 320);
    view.holds(CacheScope.DEFAULT, t);
    InferenceRequest big = new InferenceRequest("huge-1", t,
        GenerationParams.greedy(GenerationParams.MAX_TOKENS_LIMIT));

    InferenceResponse r = submit(big);
    assertEquals("n0", r.servedBy(), brief(r));
    assertFalse(r.forwarded());
    assertEquals(GenerationParams.MAX_TOKENS_LIMIT, r.result().outputTokens().length);
    assertEquals(CAP_TEXT, r.result().text());
    assertEquals(1, e1.ran.size(), "the peer generated it once");
    assertEquals(1, e0.ran.size(), "then the sender ran it itself");
    assertEquals(FallbackCause.PEER_FAILED, r.fallbackCause(), brief(r));
    assertEquals(0, n0.malformedMessages());
    assertEquals(1, answers.size());
    assertFalse(answers.get(0).isCompletedExceptionally(), answers.get(0).toString());
    ForwardCodec.Failed failed =
        assertInstanceOf(ForwardCodec.Failed.class, ServingHarness.decode(answers.get(0)));
    assertFalse(failed.retryable(), failed.toString());
    assertTrue(failed.message().startsWith(RouterNode.ANSWER_TOO_LARGE), failed.message());
    assertEquals(0, n1.stats().servedForPeers(), "served for peers");

    // the peer is sound: the next request of a prefix it holds goes there
    int[] u = OracleCluster.prompt(8, 320);
    view.holds(CacheScope.DEFAULT, u);
    InferenceResponse s = submit(new InferenceRequest("q-3", u, GenerationParams.greedy(4)));
    assertEquals("n1", s.servedBy(), s.toString());
    assertTrue(s.forwarded());
    assertEquals(RouteDecision.SkipReason.NONE, s.decision().candidates().get(1).skipped());
  }

  /** {@code r} without its result, which may be millions of tokens long. */
  static String brief(InferenceResponse r) {
    return r.servedBy() + " forwarded=" + r.forwarded() + " cause=" + r.fallbackCause() + " "
        + r.decision();
  }

  @Test
  void aStreamedAnswerPastTheMessageCapIsRefusedAndItsStreamStaysWhole() {
    start();
    int[] t = OracleCluster.prompt(9, 320);
    view.holds(CacheScope.DEFAULT, t);
    InferenceRequest big = new InferenceRequest("huge-2", t,
        GenerationParams.greedy(GenerationParams.MAX_TOKENS_LIMIT));
    int[] tokens = {0};
    StringBuilder text = new StringBuilder();
    boolean[] wrong = {false};
    InferenceResponse r = submit(big, (piece, pieceText) -> {
      for (int x : piece) {
        wrong[0] |= x != HUGE_OUTPUT[0];
      }
      tokens[0] += piece.length;
      text.append(pieceText);
    });

    assertEquals("n0", r.servedBy(), brief(r));
    assertEquals(FallbackCause.PEER_FAILED, r.fallbackCause(), brief(r));
    assertEquals(GenerationParams.MAX_TOKENS_LIMIT, r.result().outputTokens().length);
    assertEquals(1, e1.ran.size(), "the peer generated it once");
    assertEquals(1, e0.ran.size(), "then the sender ran it itself");
    // the peer's STREAM pieces and the local run's output make one output, not two
    assertFalse(wrong[0]);
    assertEquals(GenerationParams.MAX_TOKENS_LIMIT, tokens[0]);
    assertEquals(CAP_TEXT, text.toString());
    assertEquals(0, n0.malformedMessages());
    ForwardCodec.Failed failed =
        assertInstanceOf(ForwardCodec.Failed.class, ServingHarness.decode(answers.get(0)));
    assertTrue(failed.message().startsWith(RouterNode.ANSWER_TOO_LARGE), failed.message());

    int[] u = OracleCluster.prompt(10, 320);
    view.holds(CacheScope.DEFAULT, u);
    InferenceResponse s = submit(new InferenceRequest("q-4", u, GenerationParams.greedy(4)));
    assertEquals("n1", s.servedBy(), s.toString());
  }
}
