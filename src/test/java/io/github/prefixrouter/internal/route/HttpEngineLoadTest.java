package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.engine.openai.FakeOpenAiServer;
import io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A node in front of an OpenAI-compatible server (a fake, slow one on loopback): the server's
 * queue reaches push-back and the routing cost, and its answers are checked.
 */
class HttpEngineLoadTest {

  static final int[] PROMPT = OracleCluster.prompt(3, 64);

  private static RouterNode node(SimulatedScheduler sim, InMemoryNetwork net,
      OpenAiCompatibleEngine engine) {
    RouterConfig cfg = RouterConfig.builder().watermarks(1, 2).build();
    RouterNode n = new RouterNode("n1", cfg, net.transport("n1"), engine, sim, sim,
        new SplittableRandom(1), List.of(), new RouterNode.Components(
            RequestLifecycleTest.NO_CACHE, (t, l, o) -> 0, PeerView.NONE));
    n.start();
    return n;
  }

  @Test
  void requestsWaitingAtTheServerArePushedBackAndPricedInTheRoutingCost() throws Exception {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO);
         OpenAiCompatibleEngine engine = OpenAiCompatibleEngine.builder()
             .baseUrl(server.baseUrl()).slots(1).maxInFlight(8).build()) {
      RouterNode n1 = node(sim, net, engine);
      long idleCost = n1.explain(InferenceRequest.of("x", PROMPT)).candidates().get(0).costNanos();

      // the server runs one request at once; three are outstanding: two wait in its queue
      server.hold();
      List<CompletableFuture<EngineResult>> held = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        held.add(engine.execute(InferenceRequest.of("busy-" + i, PROMPT)));
      }
      assertTrue(server.awaitArrived(3, Duration.ofSeconds(10)));
      assertEquals(new EngineLoad(2, 1), engine.load());

      // the planner prices the wait
      long queuedCost = n1.explain(InferenceRequest.of("x", PROMPT)).candidates().get(0).costNanos();
      assertTrue(queuedCost > idleCost, "queue not priced: " + queuedCost + " vs idle " + idleCost);

      // a peer's forward is refused at the high watermark (2): push-back, nothing sent
      Transport peer = net.transport("n0");
      peer.start(new Transport.InboundHandler() {
        @Override
        public void onMessage(PeerAddress from, byte[] payload) {}

        @Override
        public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
          return CompletableFuture.failedFuture(new IllegalStateException("unused"));
        }
      });
      CompletableFuture<byte[]> answer = peer.request(InMemoryNetwork.addressOf("n1"),
          ForwardCodec.forward(InferenceRequest.of("fwd", PROMPT), "n0", 1), Duration.ofSeconds(5));
      sim.runUntilIdle(1_000_000);
      assertTrue(answer.isDone(), "no answer to the forward");
      ForwardCodec.Message m = ForwardCodec.decode(answer.join());
      ForwardCodec.Busy busy = assertInstanceOf(ForwardCodec.Busy.class, m);
      assertEquals(2, busy.queueDepth());
      assertEquals(1, n1.stats().refusedForPeers());
      assertEquals(3, server.arrived(), "the refused forward reached the server");

      server.release();
      for (CompletableFuture<EngineResult> f : held) {
        f.get(10, TimeUnit.SECONDS);
      }
      assertEquals(EngineLoad.IDLE, engine.load());
      n1.close();
    }
  }

  @Test
  void anEngineWithoutTimingsTeachesTheServiceTimeByTheLatencyOfRunsThatStartedAtOnce() {
    // like an HTTP server: results carry no prefill or decode time
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.engineWrap = e -> new io.github.prefixrouter.spi.InferenceEngine() {
      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest r) {
        return e.execute(r).thenApply(res -> new EngineResult(res.outputTokens(), res.text(),
            res.promptTokens(), res.cachedPromptTokens(), -1, -1));
      }

      @Override
      public EngineLoad load() {
        return e.load();
      }
    };
    RouterConfig cfg = RouterConfig.builder().initialPrefillNanosPerToken(200_000).build();
    OracleCluster c = new OracleCluster(1, cfg, 3, h).start();
    RouterNode n0 = c.node("n0");
    double initial = n0.learnedServiceNanos(); // 256 tokens of initial prefill: 51.2 ms
    // the simulated engine takes 2 ms + 64 x 200 us prefill + 5 ms decode = 19.8 ms, one at a time
    for (int i = 0; i < 100; i++) {
      c.submitAndWait("n0", InferenceRequest.of("q" + i, OracleCluster.prompt(100 + i, 64)));
    }
    double learned = n0.learnedServiceNanos();
    assertTrue(Math.abs(learned - 19_800_000) < 0.05 * 19_800_000,
        "service time " + learned + " ns, initially " + initial);

    // requests that queued (and so took longer than their service) teach nothing
    List<CompletableFuture<InferenceResponse>> burst = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      burst.add(n0.submit(InferenceRequest.of("b" + i, OracleCluster.prompt(500 + i, 64))));
    }
    c.sim.runUntilIdle(1_000_000);
    burst.forEach(CompletableFuture::join);
    assertTrue(n0.learnedServiceNanos() < 1.1 * learned,
        "queued runs inflated the service time: " + n0.learnedServiceNanos());
  }

  @Test
  void anImpossibleAnswerOfTheServerFailsTheRequestAndABosTokenDoesNot() throws Exception {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO);
         OpenAiCompatibleEngine engine = OpenAiCompatibleEngine.builder()
             .baseUrl(server.baseUrl()).build()) {
      RouterNode n1 = node(sim, net, engine);
      InferenceRequest r = new InferenceRequest("q", PROMPT, GenerationParams.greedy(3));
      // 50 tokens for max_tokens 3, a negative token id (both refused by the adapter already);
      // then fewer prompt tokens than the request's
      List<String> bad = List.of(
          FakeOpenAiServer.answer(PROMPT.length, java.util.Collections.nCopies(50, 7).toString()),
          FakeOpenAiServer.answer(PROMPT.length, "[5,-4,6]"),
          FakeOpenAiServer.answer(PROMPT.length - 1, "[5,4,6]"));
      List<String> why = List.of("more than max_tokens 3", "negative token id -4",
          "cannot be for the request");
      for (int i = 0; i < bad.size(); i++) {
        String body = bad.get(i);
        server.answer((p, max) -> body);
        ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(
            ExecutionException.class, () -> n1.submit(r).get(10, TimeUnit.SECONDS), body);
        RequestFailedException rf = assertInstanceOf(RequestFailedException.class, e.getCause());
        EngineException ee = assertInstanceOf(EngineException.class, rf.getCause());
        assertTrue(ee.getMessage().contains(why.get(i)), ee.getMessage());
      }
      // a server that counts a BOS token it added
      server.answer((p, max) -> FakeOpenAiServer.answer(p.length + 1, "[5,4,6]"));
      InferenceResponse ok = n1.submit(r).get(10, TimeUnit.SECONDS);
      assertArrayEquals(new int[] {5, 4, 6}, ok.result().outputTokens());
      assertEquals(PROMPT.length + 1, ok.result().promptTokens());
      n1.close();
    }
  }
}
