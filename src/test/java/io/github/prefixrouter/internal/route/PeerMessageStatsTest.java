package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.StreamingTest.MS;
import static io.github.prefixrouter.internal.route.StreamingTest.PREFIX;
import static io.github.prefixrouter.internal.route.StreamingTest.generating;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PeerMessageStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.InMemoryNetwork;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * {@link PrefixRouterNode#peerMessageStats()} counts what a node dropped or refused on its
 * forwarding and streaming paths, each counter driven here by what increments it, read through
 * the public interface alone.
 */
class PeerMessageStatsTest {

  private static PeerMessageStats of(PrefixRouterNode node) {
    return node.peerMessageStats().orElseThrow();
  }

  @Test
  void malformedAndStrayStreamMessagesAreCounted() {
    OracleCluster c = new OracleCluster(2, StreamingTest.forwarding(Duration.ZERO), 1)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    assertEquals(new PeerMessageStats(0, 0, 0, 0, 0), of(c.node("n0")));
    StreamingTest.FakePeer x = new StreamingTest.FakePeer(c, "x");
    InferenceRequest r = generating("r1", 1, 40);
    StreamRecorder rec = StreamingTest.recorder(c, r);
    CompletableFuture<InferenceResponse> f = StreamingTest.submit(c, "n0", r, rec);
    c.sim.advanceBy(60 * MS);
    long tag = c.node("n0").streamTagOf("r1");
    PeerAddress n0 = InMemoryNetwork.addressOf("n0");
    int[] forged = {1, 2, 3};
    // the right tag from the wrong sender, another request id, then garbage
    x.t.send(n0, ForwardCodec.stream("r1", tag, 0, forged, 0, ""));
    x.t.send(n0, ForwardCodec.stream("r9", tag, 0, forged, 0, ""));
    x.t.send(n0, new byte[] {ForwardCodec.STREAM, 1, 2, 'r'});
    c.runUntilDone(f);
    assertEquals("n1", f.join().servedBy());
    assertEquals(new PeerMessageStats(1, 2, 0, 0, 0), of(c.node("n0")));
  }

  @Test
  void aStreamThatDivergesIsCounted() {
    OracleCluster c = StreamingTest.answeringOtherThanItStreams();
    InferenceRequest r = generating("r1", 1, 20);
    CompletableFuture<InferenceResponse> f =
        StreamingTest.submit(c, "n0", r, StreamingTest.recorder(c, r));
    c.runUntilDone(f);
    assertThrows(CompletionException.class, f::join);
    assertEquals(new PeerMessageStats(0, 0, 1, 0, 0), of(c.node("n0")));
  }

  @Test
  void aForwardWhoseCancelCameFirstIsCounted() {
    EarlyCancelTest.Reordering r = new EarlyCancelTest.Reordering(
        EarlyCancelTest.forwarding().build(), Duration.ofMillis(30));
    CompletableFuture<InferenceResponse> f =
        r.c.node("n0").submit(EarlyCancelTest.generating("r1", 7, 50));
    r.c.sim.advanceBy(Duration.ofMillis(2).toNanos());
    assertTrue(f.cancel(true)); // the CANCEL goes at once, the FORWARD reaches n1 28 ms later
    r.c.sim.runUntilIdle(1_000_000);
    assertEquals(new PeerMessageStats(0, 0, 0, 1, 0), of(r.c.node("n1")));
    assertEquals(new PeerMessageStats(0, 0, 0, 0, 0), of(r.c.node("n0")));
  }

  @Test
  void aForwardOfAnotherModelIdIsCounted() {
    TwoNodeForwardHarness h = new TwoNodeForwardHarness() { };
    RouterConfig.Builder b = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX);
    h.startNodes(b.modelId("llama-3-8b").build(), b.modelId("llama-3-70b").build(),
        UnaryOperator.identity());
    int[] t = prompt(3, 320);
    h.view.holds(CacheScope.DEFAULT, t); // only n1 holds it: n0 forwards it there
    InferenceResponse resp = h.submit(InferenceRequest.of("r1", t));
    assertEquals("n0", resp.servedBy(), resp.toString());
    assertEquals(new PeerMessageStats(0, 0, 0, 0, 1), of(h.n1));
    assertEquals(new PeerMessageStats(0, 0, 0, 0, 0), of(h.n0));
  }
}
