package io.github.prefixrouter;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.route.ForwardFrames;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** Whole nodes built through the public API: real tree, real gossip, in-memory network. */
class ClusterTest {

  final SimulatedScheduler sim = new SimulatedScheduler();
  final InMemoryNetwork net = new InMemoryNetwork(sim, 11);
  final Map<String, PrefixRouterNode> nodes = new LinkedHashMap<>();
  final Map<String, SimulatedEngine> engines = new LinkedHashMap<>();
  final Map<String, Transport> transports = new LinkedHashMap<>();

  void cluster(int n, RouterConfig cfg) {
    net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(1)));
    List<PeerAddress> seeds = List.of(InMemoryNetwork.addressOf("n0"));
    for (int i = 0; i < n; i++) {
      String id = "n" + i;
      SimulatedEngine e = engine();
      engines.put(id, e);
      transports.put(id, net.transport(id));
      nodes.put(id, PrefixRouterNode.builder().nodeId(id).config(cfg)
          .transport(transports.get(id)).engine(e).clock(sim).scheduler(sim)
          .random(new SplittableRandom(i)).seeds(seeds).build());
    }
    nodes.values().forEach(PrefixRouterNode::start);
    sim.advanceBy(Duration.ofSeconds(3).toNanos()); // membership converges
  }

  SimulatedEngine engine() {
    return SimulatedEngine.builder().scheduler(sim).slots(2).capacityTokens(32_768)
        .prefillOverheadNanos(2_000_000).prefillNanosPerToken(200_000)
        .decodeNanosPerToken(5_000_000).vocabularySize(1000).build();
  }

  /** Crashes node {@code id} and starts a new one in its place, with an empty cache. */
  void restart(String id, RouterConfig cfg) {
    net.crash(id);
    nodes.get(id).close();
    SimulatedEngine e = engine();
    engines.put(id, e);
    nodes.put(id, PrefixRouterNode.builder().nodeId(id).config(cfg)
        .transport(net.transport(id)).engine(e).clock(sim).scheduler(sim)
        .random(new SplittableRandom(7)).seeds(List.of(InMemoryNetwork.addressOf("n0")))
        .build());
    nodes.get(id).start();
  }

  static int[] prompt(long seed, int n) {
    SplittableRandom r = new SplittableRandom(seed);
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = r.nextInt(1000);
    }
    return t;
  }

  static int[] concat(int[] a, int[] b) {
    int[] r = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, r, a.length, b.length);
    return r;
  }

  InferenceResponse run(String at, InferenceRequest r) {
    CompletableFuture<InferenceResponse> f = nodes.get(at).submit(r);
    long deadline = sim.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (!f.isDone() && sim.nanoTime() < deadline) {
      sim.advanceBy(1_000_000);
    }
    return f.join();
  }

  /**
   * A peer whose transport closes while it runs a forwarded request (its process stopping), and
   * which is back at its address before it answered: over HTTP the close answers the forward 503
   * and the origin falls back at once, the peer having pushed back (BUSY); in memory too, a
   * link's delay after the close, not at the forwarding timeout.
   */
  @Test
  void aForwardToAPeerStoppedAndRestartedAtItsAddressFallsBackAtOnce() {
    RouterConfig cfg = RouterConfig.defaults();
    cluster(3, cfg);
    int[] prefix = prompt(21, 480);
    String holder = run("n0", InferenceRequest.of("first", concat(prefix, prompt(22, 32))))
        .servedBy();
    sim.advanceBy(Duration.ofSeconds(2).toNanos()); // the holder's summary spreads
    String origin = holder.equals("n0") ? "n1" : "n0";
    InferenceRequest r = new InferenceRequest("long", concat(prefix, prompt(23, 32)),
        new GenerationParams(400, 0.0, 1.0, 5L)); // 2 s of decoding
    CompletableFuture<InferenceResponse> f = nodes.get(origin).submit(r);
    long until = sim.nanoTime() + Duration.ofSeconds(1).toNanos();
    while (engines.get(holder).stats().requests() < 2 && sim.nanoTime() < until) {
      sim.advanceBy(1_000_000);
    }
    assertEquals(2, engines.get(holder).stats().requests(), "the request was forwarded");
    assertFalse(f.isDone());
    // the holder's transport closes (its process stopping) and it starts again at its address
    transports.get(holder).close();
    nodes.get(holder).stop();
    SimulatedEngine fresh = engine();
    engines.put(holder, fresh);
    transports.put(holder, net.transport(holder));
    nodes.put(holder, PrefixRouterNode.builder().nodeId(holder).config(cfg)
        .transport(transports.get(holder)).engine(fresh).clock(sim).scheduler(sim)
        .random(new SplittableRandom(7)).seeds(List.of(InMemoryNetwork.addressOf("n0")))
        .build());
    nodes.get(holder).start();
    long closedAt = sim.nanoTime();
    until = closedAt + Duration.ofSeconds(60).toNanos();
    while (nodes.get(origin).stats().fallbacks().values().stream().mapToLong(Long::longValue)
        .sum() == 0 && sim.nanoTime() < until) {
      sim.advanceBy(1_000_000);
    }
    long took = sim.nanoTime() - closedAt;
    assertTrue(took <= 10_000_000, "the origin fell back " + took / 1_000_000 + " ms after its "
        + "peer's transport closed: " + nodes.get(origin).stats().fallbacks());
    assertEquals(1, nodes.get(origin).stats().fallbacks().get(FallbackCause.BUSY),
        nodes.get(origin).stats().fallbacks().toString());
    until = sim.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (!f.isDone() && sim.nanoTime() < until) {
      sim.advanceBy(1_000_000);
    }
    InferenceResponse resp = f.join();
    assertEquals(2, resp.attempts(), resp.toString());
    assertArrayEquals(SimulatedEngine.expectedOutput(r.tokens(), r.params(), 1000),
        resp.result().outputTokens());
  }

  @Test
  void gossipedReplicasRouteRequestsToTheNodeHoldingTheirPrefix() {
    cluster(4, RouterConfig.defaults());
    for (PrefixRouterNode n : nodes.values()) {
      assertEquals(3, n.stats().peersLive(), n.nodeId() + " sees " + n.stats());
    }
    int[] prefix = prompt(1, 480);
    InferenceResponse first = run("n0", InferenceRequest.of("first", concat(prefix, prompt(2, 32))));
    String holder = first.servedBy();
    assertEquals(1, first.attempts());
    assertEquals(1, engines.values().stream().mapToLong(e -> e.stats().requests()).sum());
    assertEquals(RouteDecision.Reason.COLD_PLACEMENT, first.decision().reason());
    sim.advanceBy(Duration.ofSeconds(2).toNanos()); // the holder's summary spreads

    List<String> others = new ArrayList<>(nodes.keySet());
    others.remove(holder);
    for (String at : others) {
      InferenceRequest r = InferenceRequest.of("q-" + at, concat(prefix, prompt(at.hashCode(), 32)));
      InferenceResponse resp = run(at, r);
      assertEquals(holder, resp.servedBy(), resp.decision().toString());
      assertTrue(resp.cachedPromptTokens() >= 480, "cached " + resp.cachedPromptTokens());
      assertArrayEquals(SimulatedEngine.expectedOutput(r.tokens(), r.params(), 1000),
          resp.result().outputTokens());
      NodeStats s = nodes.get(at).stats();
      assertTrue(s.gossipBytesIn() > 0 && s.gossipBytesOut() > 0, s.toString());
      assertTrue(s.replicaBlocks() >= 30, s.toString());
    }
    // the first request came from n0 by cold placement unless n0 itself is the holder
    assertEquals(holder.equals("n0") ? 3 : 4, nodes.get(holder).stats().servedForPeers());
  }

  @Test
  void aPrefixCachedUnderOneScopeAttractsOnlyRequestsOfThatScope() {
    cluster(4, RouterConfig.defaults());
    CacheScope a = CacheScope.of("lora-a", "tenant-1");
    CacheScope b = CacheScope.of("lora-a", "tenant-2");
    int[] prefix = prompt(11, 480);
    InferenceResponse first = run("n0",
        InferenceRequest.of("first", concat(prefix, prompt(12, 32))).withScope(a));
    String holder = first.servedBy();
    sim.advanceBy(Duration.ofSeconds(2).toNanos()); // the holder's summary spreads
    List<String> others = new ArrayList<>(nodes.keySet());
    others.remove(holder);
    for (String at : others) {
      InferenceResponse same = run(at, InferenceRequest.of("a-" + at,
          concat(prefix, prompt(at.hashCode(), 32))).withScope(a));
      assertEquals(holder, same.servedBy(), same.decision().toString());
      assertTrue(same.cachedPromptTokens() >= 480, "cached " + same.cachedPromptTokens());
      // drawn by the holder's gossiped prefix, not by where cold placement happens to send it
      assertTrue(same.decision().candidates().stream()
          .anyMatch(c -> c.nodeId().equals(holder) && c.matchedTokens() >= 480),
          same.decision().toString());
      for (CacheScope other : List.of(b, CacheScope.DEFAULT)) {
        InferenceRequest r = InferenceRequest.of("o-" + at + other.salt(),
            concat(prefix, prompt(at.hashCode() + 1, 32))).withScope(other);
        RouteDecision d = nodes.get(at).explain(r);
        assertTrue(d.candidates().stream().allMatch(c -> c.matchedTokens() == 0), d.toString());
      }
    }
    // run in another scope, the same tokens hit nothing, wherever they run
    InferenceResponse other = run(holder,
        InferenceRequest.of("b-1", concat(prefix, prompt(13, 32))).withScope(b));
    assertEquals(0, other.cachedPromptTokens());
  }

  @Test
  void aRollingUpgradeSkipsTheOldNodeForScopedRequestsOnlyUntilItRestarts() {
    // n1 runs a version from before scopes; no cold placement, so a request with no cached
    // prefix anywhere runs where it is submitted
    RouterConfig cfg = RouterConfig.builder().coldPlacement(false).build();
    net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(1)));
    List<PeerAddress> seeds = List.of(InMemoryNetwork.addressOf("n0"));
    for (int i = 0; i < 2; i++) {
      String id = "n" + i;
      SimulatedEngine e = engine();
      engines.put(id, e);
      Transport t = net.transport(id);
      nodes.put(id, PrefixRouterNode.builder().nodeId(id).config(cfg)
          .transport(i == 1 ? io.github.prefixrouter.internal.route.BeforeScopesTransport.wrap(t) : t).engine(e).clock(sim).scheduler(sim)
          .random(new SplittableRandom(i)).seeds(seeds).build());
    }
    nodes.values().forEach(PrefixRouterNode::start);
    sim.advanceBy(Duration.ofSeconds(3).toNanos());
    CacheScope a = CacheScope.adapter("lora-a");
    int[] scoped = prompt(21, 480);
    int[] plain = prompt(22, 480);
    assertEquals("n1", run("n1", InferenceRequest.of("w1", concat(scoped, prompt(23, 16)))
        .withScope(a)).servedBy());
    assertEquals("n1", run("n1", InferenceRequest.of("w2", concat(plain, prompt(24, 16))))
        .servedBy());
    sim.advanceBy(Duration.ofSeconds(2).toNanos()); // n1's summary spreads

    InferenceResponse rejected = run("n0",
        InferenceRequest.of("s1", concat(scoped, prompt(25, 16))).withScope(a));
    assertEquals("n0", rejected.servedBy(), rejected.toString());
    assertEquals(FallbackCause.PROTOCOL_ERROR, rejected.fallbackCause());
    // unscoped requests go to n1 at once, with no cool-down
    InferenceResponse p = run("n0", InferenceRequest.of("p1", concat(plain, prompt(26, 16))));
    assertEquals("n1", p.servedBy(), p.decision().toString());
    assertEquals(1, p.attempts());
    // a scoped request of a prefix only n1 holds skips it
    int[] scoped2 = prompt(27, 480);
    run("n1", InferenceRequest.of("w3", concat(scoped2, prompt(28, 16))).withScope(a));
    sim.advanceBy(Duration.ofSeconds(2).toNanos());
    RouteDecision d = nodes.get("n0").explain(
        InferenceRequest.of("s2", concat(scoped2, prompt(29, 16))).withScope(a));
    RouteDecision.Candidate n1 = d.candidates().get(1);
    assertEquals("n1", n1.nodeId());
    assertTrue(n1.matchedTokens() >= 480, d.toString());
    assertEquals(RouteDecision.SkipReason.NO_SCOPES, n1.skipped(), d.toString());

    // n1 restarts, upgraded, before n0's failure detector would drop it: its new gossip
    // generation ends the memory
    restart("n1", cfg);
    int[] scoped3 = prompt(30, 480);
    run("n1", InferenceRequest.of("w4", concat(scoped3, prompt(31, 16))).withScope(a));
    sim.advanceBy(Duration.ofSeconds(2).toNanos());
    assertEquals(1, nodes.get("n0").stats().peersLive());
    InferenceResponse upgraded = run("n0",
        InferenceRequest.of("s3", concat(scoped3, prompt(32, 16))).withScope(a));
    assertEquals("n1", upgraded.servedBy(), upgraded.decision().toString());
    assertEquals(1, upgraded.attempts());
  }

  /**
   * A node restarted with a gossip generation below its last one (its clock was ahead at the
   * earlier start) draws forwards to its cache within seconds. Its peers ignored it until they
   * had declared the old generation dead and forgotten it: here, the first request sent to it
   * for its prefix came 51 s after the restart.
   */
  @Test
  void aNodeRestartedWithItsClockSteppedBackDrawsForwardsWithinSeconds() {
    RouterConfig cfg = RouterConfig.builder().gossipGeneration(1_000_000_000L).build();
    cluster(3, cfg);
    restart("n1", cfg.toBuilder().gossipGeneration(400_000_000L).build());
    int[] prefix = prompt(40, 480);
    run("n1", InferenceRequest.of("w", concat(prefix, prompt(41, 16))));
    sim.advanceBy(Duration.ofSeconds(2).toNanos());
    InferenceResponse r = run("n0", InferenceRequest.of("q", concat(prefix, prompt(42, 16))));
    assertEquals("n1", r.servedBy(), r.decision().toString());
    assertTrue(r.cachedPromptTokens() >= 480, "cached " + r.cachedPromptTokens());
    // sent for the prefix n0 knows n1 holds, not placed there by chance as a prefix nobody holds
    RouteDecision.Candidate n1 = r.decision().candidates().stream()
        .filter(c -> c.nodeId().equals("n1")).findFirst().orElseThrow();
    assertTrue(n1.matchedTokens() >= 480, r.decision().toString());
    assertEquals(2, nodes.get("n0").stats().peersLive());
    // one refutation, above the generation its peers knew: a restart, not another process
    // with its id, which would keep refuting (reported after 4 refutations within 128 rounds)
    sim.advanceBy(Duration.ofSeconds(60).toNanos());
    GossipStats g = nodes.get("n1").stats().gossip();
    assertEquals(1, g.generationsRefuted());
    assertTrue(g.generation() > 1_000_000_000L, "generation " + g.generation());
    assertFalse(g.nodeIdInUse());
    for (String peer : List.of("n0", "n2")) {
      assertEquals(1, nodes.get(peer).stats().gossip().generationsReplaced(), peer);
    }
  }

  @Test
  void deadPeerDisappearsAndRequestsStillGetAnswers() {
    cluster(3, RouterConfig.defaults());
    int[] prefix = prompt(5, 480);
    String holder = run("n0", InferenceRequest.of("w", concat(prefix, prompt(6, 16)))).servedBy();
    sim.advanceBy(Duration.ofSeconds(2).toNanos());
    String asker = holder.equals("n1") ? "n2" : "n1";
    net.crash(holder);
    // in the window before the failure detector notices, the forward waits (the asker knows no
    // engine's speed yet, so its timeout is the 60 s cap); once the detector suspects the
    // holder, the forward ends and falls back
    InferenceRequest r = InferenceRequest.of("q", concat(prefix, prompt(7, 16)));
    long t0 = sim.nanoTime();
    InferenceResponse resp = run(asker, r);
    assertFalse(resp.servedBy().equals(holder));
    assertEquals(FallbackCause.UNREACHABLE, resp.fallbackCause());
    assertTrue(sim.nanoTime() - t0 < RouterConfig.defaults().peerSuspectAfter().toNanos() * 3,
        "fell back after " + (sim.nanoTime() - t0) / 1e9 + " s");
    sim.advanceBy(RouterConfig.defaults().peerDeadAfter().plusSeconds(2).toNanos());
    assertEquals(1, nodes.get(asker).stats().peersLive());
    RouteDecision d = nodes.get(asker).explain(r);
    assertTrue(d.candidates().stream().noneMatch(c -> c.nodeId().equals(holder)), d.toString());
  }

  @Test
  void stopDrainsAndClosesTheNode() {
    cluster(2, RouterConfig.defaults());
    CompletableFuture<InferenceResponse> f =
        nodes.get("n1").submit(InferenceRequest.of("x", prompt(9, 100)));
    CompletableFuture<Void> stop = nodes.get("n1").stop();
    sim.advanceBy(Duration.ofSeconds(2).toNanos());
    assertTrue(f.isDone() && !f.isCompletedExceptionally());
    assertTrue(stop.isDone());
    assertEquals(PrefixRouterNode.State.STOPPED, nodes.get("n1").state());
  }
}
