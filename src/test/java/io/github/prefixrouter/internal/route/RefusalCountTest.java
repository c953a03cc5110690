package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.OracleCluster.request;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.InMemoryNetwork;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * {@code NodeStats.refusedForPeers} (and the engine watch's refusals) count forwarded requests
 * refused as busy, once per request: a FORWARD delivered again (a duplicate, a replay) whose
 * request was refused last under its key is answered BUSY again but not counted again, nor is a
 * duplicate that joined a run the engine refused.
 */
class RefusalCountTest {

  private static InferenceRequest generating(String id, long seed, int maxTokens) {
    return new InferenceRequest(id, prompt(seed, 64), GenerationParams.greedy(maxTokens));
  }

  @Test
  void aDuplicateOfAForwardRefusedForAFullQueueIsCountedOnce() {
    // high watermark 1 with one slot: a second request waiting fills the queue
    ServingHarness s = new ServingHarness(RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).watermarks(0, 1).build(), b -> b.slots(1));
    s.forward("q", generating("q1", 1, 200));
    s.advance(Duration.ofMillis(1)); // q1 starts: the queue is empty again
    s.forward("q", generating("q2", 2, 200));
    s.advance(Duration.ofMillis(10));
    InferenceRequest r = generating("r", 3, 10);

    assertEquals(1, s.engine.load().queueDepth(), "the queue is not full");
    CompletableFuture<byte[]> first = s.forward("p", r);
    CompletableFuture<byte[]> again = s.forward("p", r); // a duplicate delivery
    assertTrue(first.isDone() && again.isDone(), "not refused at once");
    assertInstanceOf(ForwardCodec.Busy.class, ServingHarness.decode(first));
    assertInstanceOf(ForwardCodec.Busy.class, ServingHarness.decode(again));
    assertEquals(1, s.node.stats().refusedForPeers(), "a duplicate counted as another refusal");

    // another request of that sender, and the same request from another sender, count apart
    assertInstanceOf(ForwardCodec.Busy.class,
        ServingHarness.decode(s.forward("p", generating("r2", 4, 10))));
    assertInstanceOf(ForwardCodec.Busy.class, ServingHarness.decode(s.forward("o", r)));
    assertEquals(3, s.node.stats().refusedForPeers());
  }

  @Test
  void aDuplicateOfAForwardRefusedForAStalledEngineIsCountedOnce() {
    EngineStallTest.Cluster k = new EngineStallTest.Cluster(1, EngineStallTest.config().build());
    k.engine(0).hang = true;
    CompletableFuture<InferenceResponse> stuck = k.node(0).submit(request("stuck", prompt(7, 99)));
    k.advanceTo(6);
    assertEquals(1, k.watch(0).avoided());
    Transport x = k.c.net.transport("x");
    x.start((from, p) -> CompletableFuture.completedFuture(new byte[0]));
    byte[] forward = ForwardCodec.forward(request("r", prompt(8, 64)), "x", 1);
    CompletableFuture<byte[]> first =
        x.request(InMemoryNetwork.addressOf("n0"), forward, Duration.ofSeconds(5));
    CompletableFuture<byte[]> again =
        x.request(InMemoryNetwork.addressOf("n0"), forward, Duration.ofSeconds(5));
    k.c.runUntilDone(again);
    k.c.runUntilDone(first);
    assertInstanceOf(ForwardCodec.Busy.class, ServingHarness.decode(first));
    assertInstanceOf(ForwardCodec.Busy.class, ServingHarness.decode(again));
    assertEquals(1, k.watch(0).refusedForPeers(), "the engine watch counted a duplicate");
    assertEquals(1, k.node(0).stats().refusedForPeers(), "the node counted a duplicate");
    k.engine(0).release();
    k.await(stuck);
  }

  @Test
  void aDuplicateThatJoinedARunTheEngineRefusedIsCountedOnce() {
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    OracleCluster[] cluster = new OracleCluster[1];
    // an engine at capacity that says so 50 ms after it was given the request
    hooks.engineWrap = e -> new ForwardingEngine(e) {
      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest r) {
        CompletableFuture<EngineResult> f = new CompletableFuture<>();
        cluster[0].sim.schedule(50_000_000L,
            () -> f.completeExceptionally(new EngineBusyException("full")));
        return f;
      }
    };
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1, hooks).rtt(Duration.ofMillis(1));
    cluster[0] = c;
    c.start();
    Transport x = c.net.transport("x");
    x.start((from, p) -> CompletableFuture.completedFuture(new byte[0]));
    byte[] forward = ForwardCodec.forward(generating("r", 1, 10), "x", 1);
    CompletableFuture<byte[]> first =
        x.request(InMemoryNetwork.addressOf("n0"), forward, Duration.ofSeconds(5));
    c.sim.advanceBy(10_000_000L);
    CompletableFuture<byte[]> joined =
        x.request(InMemoryNetwork.addressOf("n0"), forward, Duration.ofSeconds(5));
    c.runUntilDone(joined);
    c.runUntilDone(first);
    assertInstanceOf(ForwardCodec.Busy.class, ServingHarness.decode(first));
    assertInstanceOf(ForwardCodec.Busy.class, ServingHarness.decode(joined));
    assertEquals(1, c.node("n0").stats().refusedForPeers(), "the joined duplicate was counted");
    assertEquals(0, c.node("n0").stats().inFlight());
  }
}
