package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.gossip.GossipConfig;
import io.github.prefixrouter.internal.gossip.GossipProbe;
import io.github.prefixrouter.internal.wire.WireTypes;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * {@link RouterConfig#gossipMessageBytes()} is the node's gossip {@code messageByteCap}: every
 * gossip message the node sends stays within it, and a node whose transport carries less is
 * refused at build, not left to lose its larger gossip messages.
 */
class GossipMessageBytesTest {

  final SimulatedScheduler sim = new SimulatedScheduler();
  final InMemoryNetwork net = new InMemoryNetwork(sim, 1);

  /** The largest gossip message each transport was given to send. */
  static final class LargestGossip extends ForwardingTransport {
    final AtomicInteger largest = new AtomicInteger();

    LargestGossip(Transport delegate) {
      super(delegate);
    }

    @Override
    public void send(PeerAddress to, byte[] payload) {
      if (payload.length > 0 && WireTypes.isGossip(payload[0])) {
        largest.accumulateAndGet(payload.length, Math::max);
      }
      super.send(to, payload);
    }
  }

  PrefixRouterNode node(String id, Transport t, SimulatedEngine engine, RouterConfig config,
      List<String> seeds) {
    return PrefixRouterNode.builder().nodeId(id).transport(t).engine(engine).config(config)
        .clock(sim).scheduler(sim).random(new SplittableRandom(id.hashCode()))
        .seeds(seeds.stream().map(InMemoryNetwork::addressOf).toList()).build();
  }

  SimulatedEngine engine() {
    return SimulatedEngine.builder().scheduler(sim).publishesCacheEvents(true)
        .vocabularySize(1_000).capacityTokens(1 << 16).build();
  }

  @Test
  void theNodesGossipConfigTakesTheSetting() {
    GossipConfig d = GossipPeerView.gossipConfig(RouterConfig.defaults());
    assertEquals(65_536, d.messageByteCap(), "the default");
    assertEquals(1 << 20, d.snapshotBytesPerExchange());
    GossipConfig small = GossipPeerView.gossipConfig(
        RouterConfig.builder().gossipMessageBytes(1_024).build());
    assertEquals(1_024, small.messageByteCap());
    assertEquals(1 << 20, small.snapshotBytesPerExchange(), "the snapshot cache holds 4 times it");
    // and at most 48 chunks an exchange, within the HTTP transport's window of 64 to a peer
    assertEquals(48, small.snapshotChunksPerExchange());
    assertEquals(48, d.snapshotChunksPerExchange());
    // above 1 MiB, an exchange sends one chunk
    GossipConfig big = GossipPeerView.gossipConfig(
        RouterConfig.builder().gossipMessageBytes(16 << 20).build());
    assertEquals(16 << 20, big.messageByteCap());
    assertEquals(16 << 20, big.snapshotBytesPerExchange());
  }

  @Test
  void everyGossipMessageOfTheNodeStaysWithinItsGossipMessageBytes() {
    RouterConfig config = RouterConfig.builder().gossipMessageBytes(1_024).build();
    LargestGossip ta = new LargestGossip(net.transport("a"));
    LargestGossip tb = new LargestGossip(net.transport("b"));
    SimulatedEngine ea = engine();
    PrefixRouterNode a = node("a", ta, ea, config, List.of());
    PrefixRouterNode b = node("b", tb, engine(), config, List.of("a"));
    a.start();
    b.start();
    int[] tokens = new int[8_192]; // 512 blocks: 2 KB of fingerprints, more than one message
    Arrays.setAll(tokens, i -> (i * 7 + 3) % 1_000);
    var done = a.submit(InferenceRequest.of("long", tokens));
    sim.advanceBy(20_000_000_000L); // a hundred gossip rounds
    done.join();

    long[] held = GossipProbe.fingerprintsOf(NodeProbe.treeOf(a).blockHashes());
    Arrays.sort(held);
    assertEquals(512, held.length, "a's engine cached the prompt's blocks");
    assertArrayEquals(held, NodeProbe.gossipOf(b).replicaOf("a"), "b's replica of a");
    assertTrue(ta.largest.get() <= 1_024 && tb.largest.get() <= 1_024,
        "gossip messages of up to " + Math.max(ta.largest.get(), tb.largest.get())
            + " bytes were sent with gossipMessageBytes 1024");
    a.stop();
    b.stop();
    sim.runUntilIdle(100_000);
  }

  @Test
  void aNodeWhoseTransportCarriesLessThanItsGossipMessagesIsRefusedAtBuild() {
    Transport small = new ForwardingTransport(net.transport("c")) {
      @Override
      public int maxMessageBytes() {
        return 32_768;
      }
    };
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> node("c", small, engine(), RouterConfig.defaults(), List.of()));
    assertEquals("gossipMessageBytes (65536) exceeds the transport's maxMessageBytes (32768): "
        + "the transport would drop the larger gossip messages; lower gossipMessageBytes or "
        + "raise the transport's limit", e.getMessage());
    // at the transport's limit, it builds
    node("c", small, engine(), RouterConfig.builder().gossipMessageBytes(32_768).build(),
        List.of()).stop();
  }

  @Test
  void aTransportWhoseMaxMessageBytesThrowsOrIsNotPositiveIsRefusedAtBuildWithATypedError() {
    RuntimeException boom = new UnsupportedOperationException("no limit known");
    Transport throwing = new ForwardingTransport(net.transport("t")) {
      @Override
      public int maxMessageBytes() {
        throw boom;
      }
    };
    IllegalStateException thrown = assertThrows(IllegalStateException.class,
        () -> node("t", throwing, engine(), RouterConfig.defaults(), List.of()));
    assertTrue(thrown.getMessage().startsWith("the transport's maxMessageBytes() threw "
        + "java.lang.UnsupportedOperationException: no limit known"), thrown.getMessage());
    assertSame(boom, thrown.getCause(), "what the transport threw is the cause");
    for (int bad : new int[] {0, -1, Integer.MIN_VALUE}) {
      Transport nonsense = new ForwardingTransport(net.transport("n" + bad)) {
        @Override
        public int maxMessageBytes() {
          return bad;
        }
      };
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> node("n" + bad, nonsense, engine(), RouterConfig.defaults(), List.of()));
      assertEquals("the transport's maxMessageBytes() must be positive, was " + bad,
          e.getMessage());
    }
  }

  @Test
  void theHttpTransportDeclaresItsMaxMessageBytes() {
    byte[] key = "gossip-message-bytes-cluster-key".getBytes();
    try (HttpTransport t = HttpTransport.builder().nodeId("h").listen("127.0.0.1", 0)
        .clusterKey(key).maxMessageBytes(100_000).build()) {
      assertEquals(100_000, t.maxMessageBytes());
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> node("h", t, engine(), RouterConfig.builder().gossipMessageBytes(100_001)
              .build(), List.of()));
      assertTrue(e.getMessage().startsWith("gossipMessageBytes (100001) exceeds the "
          + "transport's maxMessageBytes (100000)"), e.getMessage());
    }
    try (HttpTransport t = HttpTransport.builder().nodeId("h").listen("127.0.0.1", 0)
        .clusterKey(key).build()) {
      assertEquals(HttpTransport.DEFAULT_MAX_MESSAGE_BYTES, t.maxMessageBytes());
    }
  }
}
