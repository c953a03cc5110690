package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.LoggedLines;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * A host's transport that completes a forward's future with null, against the Transport
 * contract, costs the request nothing (it falls back and runs here), and the node's log line
 * says that its transport answered null, not that the peer sent a malformed answer with the
 * text of a NullPointerException.
 */
class NullForwardAnswerTest {

  @Test
  void aForwardAnsweredNullByTheTransportIsLoggedAsTheTransportsFault() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(1)));
    RouterConfig config = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .coldPlacement(false).build();
    List<PrefixRouterNode> nodes = new ArrayList<>();
    for (String id : List.of("a", "b")) {
      ForwardingTransport t = new ForwardingTransport(net.transport(id)) {
        @Override
        public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
            Duration timeout) {
          return CompletableFuture.completedFuture(null);
        }
      };
      nodes.add(PrefixRouterNode.builder().nodeId(id).transport(t).config(config)
          .engine(SimulatedEngine.builder().scheduler(sim).clock(sim).build())
          .clock(sim).scheduler(sim).random(new SplittableRandom(id.hashCode()))
          .seeds(List.of(InMemoryNetwork.addressOf("a"))).build());
    }
    nodes.forEach(PrefixRouterNode::start);
    int[] prompt = new int[200];
    for (int i = 0; i < prompt.length; i++) {
      prompt[i] = 500 + i;
    }
    nodes.get(1).submit(new InferenceRequest("warm", prompt, GenerationParams.greedy(2)));
    sim.advanceBy(Duration.ofSeconds(3).toNanos());
    CompletableFuture<InferenceResponse>[] f = new CompletableFuture[1];
    List<String> lines = LoggedLines.logged("answer", () -> {
      f[0] = nodes.get(0).submit(new InferenceRequest("q", prompt, GenerationParams.greedy(2)));
      sim.advanceBy(Duration.ofSeconds(1).toNanos());
    });
    InferenceResponse r = f[0].join();
    assertEquals("a", r.servedBy());
    assertEquals(FallbackCause.PROTOCOL_ERROR, r.fallbackCause(), "it was forwarded to b first");
    assertEquals(1, lines.size(), "lines: " + lines);
    assertTrue(lines.get(0).contains("its transport completed the forward to b@")
        && lines.get(0).contains("with null"), lines.get(0));
    assertFalse(lines.get(0).contains("Cannot read"), lines.get(0));
    nodes.forEach(n -> n.stop(Duration.ZERO));
    sim.runUntilIdle(100_000);
  }
}
