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
 * An answer whose text is longer than a RESULT carries (1 MiB of UTF-8) is no fault of the peer
 * that generated it: the peer answers with a typed frame instead of failing the request with the
 * encoder's exception, and its sender runs the request itself, without cooling the peer down or
 * sending it to another peer, whose answer would be as long.
 */
class OversizedAnswerTest {

  /** Text just over a RESULT's cap for requests whose id starts with "long". */
  static final String LONG_TEXT = "x".repeat(ForwardCodec.MAX_TEXT_BYTES + 1);

  /** Answers every request at once; a request whose id starts with "long" gets LONG_TEXT. */
  static final class TextEngine implements InferenceEngine {
    final List<InferenceRequest> ran = new ArrayList<>();

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      ran.add(r);
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
    CompletableFuture<InferenceResponse> f = n0.submit(r);
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

    // the peer is sound: the next request of a prefix it holds goes there
    int[] u = OracleCluster.prompt(6, 320);
    view.holds(CacheScope.DEFAULT, u);
    InferenceResponse s = submit(new InferenceRequest("q-2", u, GenerationParams.greedy(4)));
    assertEquals("n1", s.servedBy(), s.toString());
    assertTrue(s.forwarded());
    assertEquals(RouteDecision.SkipReason.NONE, s.decision().candidates().get(1).skipped());
  }
}
