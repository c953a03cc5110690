package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Schedulers;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Streaming over the HTTP transport on loopback, in real time: STREAM messages travel as the
 * transport's one-way messages, and the client gets the pieces of a forwarded request before
 * its answer.
 */
class HttpStreamingTest {

  /** A view of one peer that holds every block of every prompt. */
  static PeerView onePeerHoldingEverything(HttpTransport peer) {
    return new PeerView() {
      @Override
      public PeerSet livePeers() {
        return new PeerSet(new PeerAddress[] {peer.localAddress()}, new int[1], new int[1],
            new int[1], new boolean[1], new boolean[1], new long[] {200_000}, new long[1]);
      }

      @Override
      public void leadingBlocks(PeerSet peers, long[] chain, int blocks, int[] out) {
        out[0] = blocks;
      }
    };
  }

  @Test
  void aForwardedRequestStreamsOverHttp() throws Exception {
    byte[] key = "stream-test-cluster-key-32-bytes".getBytes();
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .coldPlacement(false).streamInterval(Duration.ofMillis(10)).build();
    try (Schedulers.ClosableScheduler s0 = Schedulers.newSingleThread("http-stream-n0");
         Schedulers.ClosableScheduler s1 = Schedulers.newSingleThread("http-stream-n1");
         HttpTransport t0 = HttpTransport.builder().nodeId("n0").listen("127.0.0.1", 0)
             .clusterKey(key).build();
         HttpTransport t1 = HttpTransport.builder().nodeId("n1").listen("127.0.0.1", 0)
             .clusterKey(key).build()) {
      SimulatedEngine e0 = SimulatedEngine.builder().scheduler(s0).clock(Clock.system())
          .prefillOverheadNanos(1_000_000).prefillNanosPerToken(10_000)
          .decodeNanosPerToken(5_000_000).build();
      SimulatedEngine e1 = SimulatedEngine.builder().scheduler(s1).clock(Clock.system())
          .prefillOverheadNanos(1_000_000).prefillNanosPerToken(10_000)
          .decodeNanosPerToken(5_000_000).build();
      RouterNode n1 = new RouterNode("n1", cfg, t1, e1, Clock.system(), s1,
          new SplittableRandom(2), List.of(), new RouterNode.Components(
              RequestLifecycleTest.NO_CACHE, (t, l, o) -> 0, PeerView.NONE));
      n1.start();
      RouterNode n0 = new RouterNode("n0", cfg, t0, e0, Clock.system(), s0,
          new SplittableRandom(1), List.of(), new RouterNode.Components(
              RequestLifecycleTest.NO_CACHE, (t, l, o) -> l / cfg.blockSize(),
              onePeerHoldingEverything(t1)));
      n0.start();
      try {
        // 80 tokens of 5 ms: n1 decodes for 400 ms, in pieces of 4 tokens
        InferenceRequest r = new InferenceRequest("r1", OracleCluster.prompt(5, 64),
            GenerationParams.greedy(80));
        StreamRecorder rec = new StreamRecorder(
            SimulatedEngine.expectedOutput(r.tokens(), r.params(), 151_936),
            System::nanoTime);
        CompletableFuture<InferenceResponse> f = n0.submit(r, rec);
        rec.future = f;
        InferenceResponse resp = f.get(30, TimeUnit.SECONDS);
        long doneAt = System.nanoTime();
        assertEquals("n1", resp.servedBy());
        assertTrue(resp.forwarded());
        assertArrayEquals(resp.result().outputTokens(), rec.tokens());
        assertTrue(rec.clean(), rec.toString());
        assertTrue(rec.pieces.size() >= 3, "not streamed: " + rec);
        long early = doneAt - rec.times.get(0);
        // n1 decodes for 400 ms; the first connection and a loaded machine may delay the
        // first STREAM messages, so only ask that pieces came well before the answer
        assertTrue(early >= 30_000_000L, "the first piece came " + early / 1_000_000
            + " ms before the answer: " + rec);
        assertEquals(0, e0.stats().requests(), "ran at the origin");
      } finally {
        n0.stop().get(10, TimeUnit.SECONDS);
        n1.stop().get(10, TimeUnit.SECONDS);
      }
    }
  }
}
