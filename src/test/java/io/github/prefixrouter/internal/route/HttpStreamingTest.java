package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.time.Duration;
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
    try (HttpNodePair p = new HttpNodePair("http-stream", cfg, key, b -> b, b -> b,
        e -> e.prefillNanosPerToken(10_000).decodeNanosPerToken(5_000_000))) {
      RouterNode n0 = p.n0;
      SimulatedEngine e0 = p.e0;
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
    }
  }
}
