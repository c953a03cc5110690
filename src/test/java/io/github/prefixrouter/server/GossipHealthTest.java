package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GossipStats;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.gossip.GossipFrames;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.server.PrometheusTextParser.Family;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The gossip layer's health, driven through a real node's gossip in simulated time (two nodes
 * on an in-memory network, and a forger on it sending gossip in the name of nobody it knows),
 * shows in the node's {@link NodeStats#gossip()}, in {@code /metrics} with the same values, and,
 * for a node id in use by another process, in {@code /health}.
 */
class GossipHealthTest {

  private static final Duration ROUND = RouterConfig.defaults().gossipInterval();

  private final SimulatedScheduler sim = new SimulatedScheduler();
  private final InMemoryNetwork net = new InMemoryNetwork(sim, 5);
  private final HttpClient http =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private ClientEndpoint endpoint;

  @AfterEach
  void stop() {
    if (endpoint != null) {
      endpoint.stop();
    }
  }

  private PrefixRouterNode node(String id) {
    SimulatedEngine e = SimulatedEngine.builder().scheduler(sim).clock(sim).slots(2)
        .capacityTokens(32_768).prefillNanosPerToken(100_000).decodeNanosPerToken(1_000_000)
        .vocabularySize(1000).build();
    return PrefixRouterNode.builder().nodeId(id)
        .config(RouterConfig.builder().gossipGeneration(1_000_000_000L).build())
        .transport(net.transport(id)).engine(e).clock(sim).scheduler(sim)
        .random(new SplittableRandom(id.hashCode())).seeds(List.of(InMemoryNetwork.addressOf("n0")))
        .build();
  }

  /** A transport on the network that sends what the test gives it, and takes anything. */
  private Transport forger() {
    Transport t = net.transport("forger");
    t.start(new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {}

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return new CompletableFuture<>();
      }
    });
    return t;
  }

  private void advance(Duration d) {
    sim.advanceBy(d.toNanos());
  }

  private static Map<String, Family> metrics(ClientEndpoint e) {
    return PrometheusTextParser.parse(e.metricsText());
  }

  /** Each figure of {@code g} is the sample of its family in {@code m}. */
  private static void sameInMetrics(GossipStats g, Map<String, Family> m) {
    String p = "prefix_router_gossip_";
    assertEquals(g.generation(), m.get(p + "generation").value());
    assertEquals(g.nodeIdInUse() ? 1.0 : 0.0, m.get(p + "node_id_in_use").value());
    assertEquals(g.peersSuspect(), m.get("prefix_router_peers_suspect").value());
    assertEquals(g.malformedDropped(), m.get(p + "malformed_messages_total").value());
    assertEquals(g.rejected(), m.get(p + "rejected_total").value());
    assertEquals(g.generationsRefuted(), m.get(p + "generations_refuted_total").value());
    assertEquals(g.snapshotsSent(), m.get(p + "snapshots_sent_total").value());
    assertEquals(g.membersSuspected(), m.get(p + "members_suspected_total").value());
    assertEquals(g.membersDead(), m.get(p + "members_dead_total").value());
  }

  private Map<?, ?> health(InetSocketAddress at) throws Exception {
    HttpResponse<String> r = http.send(HttpRequest.newBuilder(
        URI.create("http://127.0.0.1:" + at.getPort() + "/health")).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(200, r.statusCode(), r.body());
    return (Map<?, ?>) Json.parse(r.body());
  }

  @Test
  void malformedAndForgedGossipAndPeersLostShowInStatsAndMetrics() throws Exception {
    PrefixRouterNode n0 = node("n0");
    PrefixRouterNode n1 = node("n1");
    n0.start();
    n1.start();
    advance(Duration.ofSeconds(3));
    n1.submit(InferenceRequest.of("r", new int[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
        15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33}));
    advance(Duration.ofSeconds(2)); // n1 holds blocks, and n0 their replica
    endpoint = new ClientEndpoint(n1, List::of, 16, Duration.ofSeconds(10));
    GossipStats before = n1.stats().gossip();
    assertEquals(1_000_000_000L, before.generation());
    assertTrue(before.rounds() >= 20, "rounds " + before.rounds());
    assertEquals(0, before.malformedDropped());
    assertEquals(0, before.generationsRefuted());
    sameInMetrics(before, metrics(endpoint));

    Transport forger = forger();
    PeerAddress to = InMemoryNetwork.addressOf("n1");
    forger.send(to, GossipFrames.malformed());
    // a generation of n1 too far above its own to follow: rejected
    forger.send(to, GossipFrames.synClaiming("n1", 1_000_000_000L + (1L << 41)));
    advance(Duration.ofMillis(50));
    GossipStats g = n1.stats().gossip();
    assertEquals(1, g.malformedDropped());
    assertEquals(before.rejected() + 1, g.rejected());
    assertEquals(1_000_000_000L, g.generation());

    // a generation of n1 above its own, within reach: refuted, and n0 gets n1's set anew
    forger.send(to, GossipFrames.synClaiming("n1", 1_000_000_010L));
    advance(Duration.ofSeconds(2));
    g = n1.stats().gossip();
    assertEquals(1, g.generationsRefuted());
    assertTrue(g.generation() > 1_000_000_010L, "generation " + g.generation());
    assertTrue(g.snapshotsSent() >= 1, "snapshots sent " + g.snapshotsSent());
    assertTrue(n0.stats().gossip().snapshotsInstalled() >= 1);
    assertEquals(1, n0.stats().gossip().generationsReplaced());
    assertFalse(g.nodeIdInUse());
    sameInMetrics(g, metrics(endpoint));

    // n0 goes: suspect, then dead
    net.crash("n0");
    advance(RouterConfig.defaults().peerSuspectAfter().plus(ROUND.multipliedBy(2)));
    g = n1.stats().gossip();
    assertEquals(1, g.peersSuspect());
    assertEquals(1, n1.stats().peersLive());
    assertEquals(1, g.membersSuspected());
    sameInMetrics(g, metrics(endpoint));
    advance(RouterConfig.defaults().peerDeadAfter());
    g = n1.stats().gossip();
    assertEquals(0, g.peersSuspect());
    assertEquals(0, n1.stats().peersLive());
    assertEquals(1, g.membersDead());
    assertEquals(0, g.internalErrors());
    sameInMetrics(g, metrics(endpoint));
  }

  /**
   * A node told of higher generations of itself four times within 128 rounds (three at once,
   * the fourth after the 32 rounds it waits before following another) takes its id to be in
   * use by another process: its stats, {@code /metrics} and {@code /health} (still 200) say so,
   * with the id and the generation, until 128 rounds pass without such a claim.
   */
  @Test
  void aNodeIdInUseByAnotherProcessShowsInStatsMetricsAndHealth() throws Exception {
    PrefixRouterNode n0 = node("n0");
    PrefixRouterNode n1 = node("n1");
    n0.start();
    n1.start();
    advance(Duration.ofSeconds(3));
    endpoint = new ClientEndpoint(n1, List::of, 16, Duration.ofSeconds(10));
    InetSocketAddress at = endpoint.start("127.0.0.1", 0);
    assertEquals(false, health(at).get("node_id_in_use"));
    assertFalse(health(at).containsKey("node_id_in_use_reason"));

    Transport forger = forger();
    PeerAddress to = InMemoryNetwork.addressOf("n1");
    for (int i = 0; i < 3; i++) {
      forger.send(to, GossipFrames.synClaiming("n1", n1.stats().gossip().generation() + 10));
      advance(Duration.ofMillis(50));
    }
    assertEquals(3, n1.stats().gossip().generationsRefuted());
    assertFalse(n1.stats().gossip().nodeIdInUse(), "three refutations: a restart may need them");
    assertEquals(false, health(at).get("node_id_in_use"));

    advance(ROUND.multipliedBy(33));
    forger.send(to, GossipFrames.synClaiming("n1", n1.stats().gossip().generation() + 10));
    advance(Duration.ofMillis(50));
    GossipStats g = n1.stats().gossip();
    assertEquals(4, g.generationsRefuted());
    assertTrue(g.nodeIdInUse());
    sameInMetrics(g, metrics(endpoint));
    Map<?, ?> h = health(at);
    assertEquals("RUNNING", h.get("state"));
    assertEquals(true, h.get("node_id_in_use"));
    String reason = (String) h.get("node_id_in_use_reason");
    assertTrue(reason.contains("n1") && reason.contains(String.valueOf(g.generation()))
        && reason.contains("4 times"), reason);

    advance(ROUND.multipliedBy(130));
    g = n1.stats().gossip();
    assertFalse(g.nodeIdInUse());
    assertEquals(4, g.generationsRefuted());
    assertEquals(0.0, metrics(endpoint).get("prefix_router_gossip_node_id_in_use").value());
    assertEquals(false, health(at).get("node_id_in_use"));
    n0.close();
    n1.close();
  }
}
