package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.engine.openai.FakeOpenAiServer;
import io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.Schedulers;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * A forward to a peer whose server reports its cached tokens as vLLM does with
 * {@code --enable-prompt-tokens-details}: {@code prompt_tokens_details} only when the count is
 * not 0. n0 takes n1 for holding a 3,000-token prompt that n1's server does not hold; the
 * forward's answer is a complete miss, which n0 must count against its estimate (the peer's
 * accuracy, and the estimated and actual cached-token counters, are there for exactly that
 * case). Two nodes over the HTTP transport on loopback, in real time; n1's engine is the
 * OpenAI-compatible adapter in front of a fake server.
 */
class ForwardedMissCountTest {

  @Test
  void aForwardAnsweredWithoutCachedTokensByAServerThatReportsThemCountsAMiss()
      throws Exception {
    byte[] key = "forwarded-miss-cluster-key-32-by".getBytes();
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .coldPlacement(false).build();
    // a vLLM that reports the cached tokens: 16 for the first request (its own client's), then
    // none, left out of the answer as vLLM leaves out a count of 0
    AtomicBoolean reportHit = new AtomicBoolean(true);
    try (FakeOpenAiServer server = FakeOpenAiServer.start((prompt, maxTokens) ->
            "{\"choices\":[{\"index\":0,\"text\":\"\",\"token_ids\":"
                + java.util.Collections.nCopies(maxTokens, 5) + "}],\"usage\":{\"prompt_tokens\":"
                + prompt.length + (reportHit.getAndSet(false)
                    ? ",\"prompt_tokens_details\":{\"cached_tokens\":16}" : "") + "}}");
         OpenAiCompatibleEngine engine1 = OpenAiCompatibleEngine.builder()
             .baseUrl(server.baseUrl()).build();
         Schedulers.ClosableScheduler s0 = Schedulers.newSingleThread("forwarded-miss-n0");
         Schedulers.ClosableScheduler s1 = Schedulers.newSingleThread("forwarded-miss-n1");
         HttpTransport t0 = HttpTransport.builder().nodeId("n0").listen("127.0.0.1", 0)
             .clusterKey(key).build();
         HttpTransport t1 = HttpTransport.builder().nodeId("n1").listen("127.0.0.1", 0)
             .clusterKey(key).build()) {
      SimulatedEngine e0 = SimulatedEngine.builder().scheduler(s0).clock(Clock.system())
          .build();
      RouterNode n1 = new RouterNode("n1", cfg, t1, engine1, Clock.system(), s1,
          new SplittableRandom(2), List.of(), new RouterNode.Components(
              RequestLifecycleTest.NO_CACHE, (t, l, o) -> 0, PeerView.NONE));
      n1.start();
      // n0 takes n1 for holding every full block of every prompt
      RouterNode n0 = new RouterNode("n0", cfg, t0, e0, Clock.system(), s0,
          new SplittableRandom(1), List.of(), new RouterNode.Components(
              RequestLifecycleTest.NO_CACHE, (t, l, o) -> l / cfg.blockSize(),
              HttpStreamingTest.onePeerHoldingEverything(t1)));
      n0.start();
      try {
        // n1's own client's request: its server reports 16 cached tokens
        InferenceResponse own = n1.submit(new InferenceRequest("own",
            OracleCluster.prompt(1, 64), GenerationParams.greedy(2))).get(30, TimeUnit.SECONDS);
        assertEquals(16, own.result().cachedPromptTokens());

        int[] prompt = OracleCluster.prompt(2, 3_000);
        InferenceResponse r = n0.submit(new InferenceRequest("q", prompt,
            GenerationParams.greedy(2))).get(30, TimeUnit.SECONDS);
        assertEquals("n1", r.servedBy());
        assertTrue(r.forwarded());
        int estimate = prompt.length / cfg.blockSize() * cfg.blockSize(); // 2,992
        NodeStats s = n0.stats();
        assertEquals(estimate, s.estimatedCachedTokens(),
            "the forward's miss was not counted: estimated " + s.estimatedCachedTokens()
                + ", actual " + s.actualCachedTokens());
        assertEquals(0, s.actualCachedTokens());
        assertEquals(0, r.result().cachedPromptTokens(),
            "n1's server left cached_tokens out, as vLLM does for 0, after reporting them: "
                + "the answer's count should be a miss, 0");
      } finally {
        n0.stop().get(10, TimeUnit.SECONDS);
        n1.stop().get(10, TimeUnit.SECONDS);
      }
    }
  }
}
