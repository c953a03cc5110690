package io.github.prefixrouter.faults;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeNotRunningException;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.route.ForwardFrames;
import io.github.prefixrouter.internal.route.RouterNode;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.function.BiFunction;
import org.junit.jupiter.api.Test;

/**
 * Forged, replayed and malformed messages sent to real nodes, and invalid requests and
 * configuration at the API boundary. A node must drop and count what it cannot decode, never
 * let a stranger cancel someone else's work or make it forward beyond the hop limit, and still
 * give every accepted request one correct answer.
 */
class HostileInputTest {

  private static final RouterConfig LONGEST = RouterConfig.builder()
      .policy(RoutingPolicy.LONGEST_PREFIX).coldPlacement(false).hopLimit(1).build();

  /** A raw transport on the cluster's network, answering requests with {@code answer}. */
  private static Transport attacker(ScriptedCluster c, String id,
      BiFunction<PeerAddress, byte[], byte[]> answer) {
    Transport t = c.net.transport(id);
    t.start(new Transport.InboundHandler() {
      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(answer.apply(from, payload));
      }
    });
    return t;
  }

  private static InferenceRequest request(String id, int[] tokens) {
    return new InferenceRequest(id, tokens, GenerationParams.greedy(2));
  }

  private static byte[] awaitBytes(ScriptedCluster c, CompletableFuture<byte[]> f) {
    c.clock.runUntil(f::isDone, c.sim.nanoTime() + 60_000_000_000L, 1_000_000L);
    return f.join();
  }

  // ---------------------------------------------------------------- forged forwarding frames

  @Test
  void aForwardClaimingZeroHopsIsNotForwardedAgain() {
    ScriptedCluster c = new ScriptedCluster(LONGEST, 1, List.of("b", "c")).start();
    int[] p = ScriptedCluster.prompt(7, 256);
    c.warm("c", p);
    c.sees.get("b").add("c");
    Transport evil = attacker(c, "evil", (f, b) -> new byte[0]);
    InferenceRequest r = request("q1", p);
    byte[] answer = awaitBytes(c, evil.request(InMemoryNetwork.addressOf("b"),
        ForwardFrames.forward(r, "evil", 0), Duration.ofSeconds(30)));
    assertTrue(c.forwardsSent.isEmpty(), "b forwarded a request it received from a peer: "
        + c.forwardsSent);
    assertNotNullResult(answer, r);
  }

  @Test
  void aReceivedForwardAtTheHopLimitRunsWhereItLands() throws Exception {
    ScriptedCluster c = new ScriptedCluster(LONGEST, 2, List.of("b", "c")).start();
    int[] p = ScriptedCluster.prompt(8, 256);
    c.warm("c", p);
    c.sees.get("b").add("c");
    Transport evil = attacker(c, "evil", (f, b) -> new byte[0]);
    InferenceRequest r = request("q2", p);
    byte[] answer = awaitBytes(c, evil.request(InMemoryNetwork.addressOf("b"),
        ForwardFrames.forward(r, "evil", 1), Duration.ofSeconds(30)));
    assertTrue(c.forwardsSent.isEmpty(), c.forwardsSent::toString);
    assertNotNullResult(answer, r);
    assertEquals(1, c.nodes.get("b").stats().servedForPeers());
  }

  @Test
  void aStrangerCannotCancelAnotherOriginsRequest() {
    RouterConfig patient = LONGEST.toBuilder()
        .forwardTimeout(Duration.ofSeconds(5), Duration.ofSeconds(60)).build();
    ScriptedCluster c = new ScriptedCluster(patient, 3, List.of("a", "b"),
        e -> e.prefillOverheadNanos(500_000_000L)).start();
    int[] p = ScriptedCluster.prompt(9, 256);
    c.warm("b", p);
    c.sees.get("a").add("b");
    Transport evil = attacker(c, "evil", (f, b) -> new byte[0]);
    InferenceRequest r = request("victim", p);
    CompletableFuture<InferenceResponse> f = c.nodes.get("a").submit(r);
    c.clock.advanceTo(c.sim.nanoTime() + 50_000_000L); // b is running it now
    evil.send(InMemoryNetwork.addressOf("b"), ForwardFrames.cancel("victim", "a"));
    InferenceResponse resp = c.await(f);
    assertEquals("b", resp.servedBy());
    assertTrue(resp.forwarded());
    assertArrayEquals(ScriptedCluster.expected(r), resp.result().outputTokens());
    assertEquals(0, c.engines.get("b").stats().cancelled());
  }

  @Test
  void garbageAndUnsolicitedAnswersAreDroppedAndCounted() {
    ScriptedCluster c = new ScriptedCluster(LONGEST, 4, List.of("a")).start();
    RouterNode a = c.nodes.get("a");
    Transport evil = attacker(c, "evil", (f, b) -> new byte[0]);
    PeerAddress to = InMemoryNetwork.addressOf("a");
    EngineResult bogus = new EngineResult(new int[] {1}, "", 3, 0, 1, 1);
    List<byte[]> oneWay = List.of(
        new byte[0],
        new byte[] {(byte) 0x21},
        new byte[] {(byte) 0x22, 1, 0},
        ForwardFrames.result("nobody-asked", "evil", 0, bogus),
        ForwardFrames.busy("nobody-asked", 3),
        ForwardFrames.failed("nobody-asked", true, "x"),
        ForwardFrames.forward(InferenceRequest.of("sent-one-way", new int[] {1}), "evil", 1),
        new byte[] {(byte) 0x10, 9, 9, 9},
        new byte[] {(byte) 0x7F, 1, 2, 3});
    for (byte[] m : oneWay) {
      evil.send(to, m);
    }
    List<CompletableFuture<byte[]>> answers = new ArrayList<>();
    for (byte[] m : List.of(new byte[] {(byte) 0x21, 1, 5}, ForwardFrames.busy("x", 1),
        ForwardFrames.result("x", "evil", 0, bogus), new byte[] {0, 0, 0})) {
      answers.add(evil.request(to, m, Duration.ofSeconds(5)));
    }
    c.clock.advanceTo(c.sim.nanoTime() + 10_000_000_000L);
    for (CompletableFuture<byte[]> f : answers) {
      ExecutionException e = assertThrows(ExecutionException.class, f::get);
      assertInstanceOf(io.github.prefixrouter.spi.TransportException.class, e.getCause());
    }
    assertEquals(oneWay.size() + answers.size(), a.malformedMessages(),
        "every undecodable or unexpected message is counted once");
    NodeStats st = a.stats();
    assertEquals(0, st.requests());
    assertEquals(0, st.servedForPeers());
    assertEquals(0, st.inFlight());
    assertEquals(0, c.engines.get("a").stats().requests(), "nothing reached the engine");
    // and the node still serves
    InferenceRequest r = request("after", ScriptedCluster.prompt(1, 40));
    assertArrayEquals(ScriptedCluster.expected(r), c.await(a.submit(r)).result().outputTokens());
    assertTrue(c.clock.escaped().isEmpty(), c.clock.escaped()::toString);
  }

  @Test
  void aReplayedForwardJoinsTheRunningExecution() {
    ScriptedCluster c = new ScriptedCluster(LONGEST, 5, List.of("b"),
        e -> e.prefillOverheadNanos(200_000_000L)).start();
    Transport evil = attacker(c, "evil", (f, b) -> new byte[0]);
    InferenceRequest r = request("twice", ScriptedCluster.prompt(3, 100));
    byte[] frame = ForwardFrames.forward(r, "evil", 1);
    PeerAddress b = InMemoryNetwork.addressOf("b");
    CompletableFuture<byte[]> first = evil.request(b, frame, Duration.ofSeconds(30));
    c.clock.advanceTo(c.sim.nanoTime() + 10_000_000L);
    CompletableFuture<byte[]> replay = evil.request(b, frame, Duration.ofSeconds(30));
    byte[] x = awaitBytes(c, first);
    byte[] y = awaitBytes(c, replay);
    assertEquals(1, c.engines.get("b").stats().requests(), "the replay must not run twice");
    assertNotNullResult(x, r);
    assertNotNullResult(y, r);
    // a replay after completion runs again (duplicate compute is allowed) with the same answer
    byte[] late = awaitBytes(c, evil.request(b, frame, Duration.ofSeconds(30)));
    assertNotNullResult(late, r);
  }

  @Test
  void aPeerAnsweringForAnotherRequestOrWithAbsurdCountsIsFallenBackFrom() {
    ScriptedCluster c = new ScriptedCluster(LONGEST, 6, List.of("a", "b")).start();
    int[] p = ScriptedCluster.prompt(11, 256);
    c.warm("b", p);
    EngineResult bogus = new EngineResult(new int[] {42, 42}, "", 256, 0, 1, 1);
    attacker(c, "liar", (from, payload) ->
        ForwardFrames.result("some-other-request", "liar", 0, bogus));
    byte[] absurd = ForwardFrames.result("q-absurd", "liar2", 0,
        new EngineResult(new int[] {1}, "", 2, 2, 1, 1));
    absurd[absurd.length - 4] = 1; // promptTokens 1 < cached 2
    attacker(c, "liar2", (from, payload) -> absurd);
    c.pretendsToHold.put("liar", "b");
    c.pretendsToHold.put("liar2", "b");
    c.sees.get("a").addAll(List.of("liar", "liar2"));
    RouterNode a = c.nodes.get("a");
    int[] p2 = ScriptedCluster.prompt(13, 256);
    c.warm("b", p2);
    for (String id : List.of("q-other", "q-absurd")) {
      InferenceRequest r = request(id, id.equals("q-other") ? p : p2);
      InferenceResponse resp = c.await(a.submit(r));
      assertArrayEquals(ScriptedCluster.expected(r), resp.result().outputTokens());
      assertEquals("a", resp.servedBy(), resp::toString);
      assertEquals(3, resp.attempts(), resp::toString);
      assertEquals(FallbackCause.PROTOCOL_ERROR, resp.fallbackCause());
      // both liars answered garbage: they are skipped for the busy cool-down, then tried again
      RouteDecision now = a.explain(r);
      for (int k = 1; k < now.candidates().size(); k++) {
        assertEquals(RouteDecision.SkipReason.FAILED_COOLDOWN, now.candidates().get(k).skipped(),
            now::toString);
      }
      c.clock.advanceTo(c.sim.nanoTime() + LONGEST.busyCooldown().toNanos() + 1);
    }
    assertEquals(4, a.stats().fallbacks().get(FallbackCause.PROTOCOL_ERROR));
    assertTrue(c.clock.escaped().isEmpty(), c.clock.escaped()::toString);
  }

  @Test
  void anAddressNobodyAnnouncedIsNeverContacted() {
    // the scripted view lists only "b"; a stranger's frames must not add it to the candidates
    ScriptedCluster c = new ScriptedCluster(LONGEST, 7, List.of("a", "b")).start();
    int[] p = ScriptedCluster.prompt(12, 256);
    c.warm("b", p);
    c.sees.get("a").add("b");
    Transport evil = attacker(c, "evil", (f, b) -> new byte[0]);
    evil.send(InMemoryNetwork.addressOf("a"),
        ForwardFrames.forward(request("bait", p), "evil", 1));
    InferenceRequest r = request("real", p);
    InferenceResponse resp = c.await(c.nodes.get("a").submit(r));
    assertEquals("b", resp.servedBy());
    for (String f : c.forwardsSent) {
      assertFalse(f.contains(">evil:"), "forwarded to an address nobody announced: " + f);
    }
  }

  private static void assertNotNullResult(byte[] answer, InferenceRequest r) {
    try {
      EngineResult res = ForwardFrames.resultOf(ForwardFrames.decode(answer));
      assertTrue(res != null, "expected a RESULT frame");
      assertArrayEquals(ScriptedCluster.expected(r), res.outputTokens());
    } catch (io.github.prefixrouter.internal.wire.MalformedMessageException e) {
      throw new AssertionError(e);
    }
  }

  // ---------------------------------------------------------------- API boundary

  @Test
  void invalidRequestsAreRejectedWithMessagesNamingTheProblem() {
    assertMessage(() -> InferenceRequest.of("x", new int[0]), "at least one token");
    assertMessage(() -> InferenceRequest.of("x", new int[] {1, -1}), "token id -1 at index 1");
    assertMessage(() -> InferenceRequest.of("x", new int[] {InferenceRequest.MAX_TOKEN_ID}),
        "outside");
    assertMessage(() -> InferenceRequest.of("", new int[] {1}), "request id");
    assertMessage(() -> InferenceRequest.of("x".repeat(129), new int[] {1}), "request id");
    assertMessage(() -> InferenceRequest.of("a\uD800b", new int[] {1}), "lone surrogate at index 1");
    assertMessage(() -> InferenceRequest.of("\uDC00", new int[] {1}), "lone surrogate at index 0");
    assertEquals("\uD83D\uDE00", InferenceRequest.of("\uD83D\uDE00", new int[] {1}).id());
    assertMessage(() -> InferenceRequest.of("x", new int[InferenceRequest.MAX_PROMPT_TOKENS + 1]),
        "limit");
    assertMessage(() -> new GenerationParams(0, 0, 1, 0), "maxTokens");
    assertMessage(() -> new GenerationParams(GenerationParams.MAX_TOKENS_LIMIT + 1, 0, 1, 0),
        "maxTokens");
    assertMessage(() -> new GenerationParams(1, Double.NaN, 1, 0), "temperature");
    assertMessage(() -> new GenerationParams(1, -1, 1, 0), "temperature");
    assertMessage(() -> new GenerationParams(1, 0, 0, 0), "topP");
    assertMessage(() -> new GenerationParams(1, 0, Double.POSITIVE_INFINITY, 0), "topP");
    assertThrows(NullPointerException.class, () -> InferenceRequest.of("x", null));
  }

  @Test
  void invalidConfigurationListsEveryProblem() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () ->
        RouterConfig.builder().blockSize(0).hopLimit(99).watermarks(10, 5)
            .gossip(Duration.ofSeconds(5), 0).forwardTimeout(Duration.ofSeconds(9),
                Duration.ofSeconds(1)).engineTimeout(Duration.ZERO).build());
    for (String s : List.of("blockSize", "hopLimit", "lowWatermark", "gossipFanout",
        "forwardTimeoutMin", "peerSuspectAfter", "engineTimeout")) {
      assertTrue(e.getMessage().contains(s), () -> "missing " + s + " in: " + e.getMessage());
    }
    IllegalStateException missing = assertThrows(IllegalStateException.class,
        () -> PrefixRouterNode.builder().nodeId("a").build());
    assertTrue(missing.getMessage().contains("transport(Transport)"));
    assertTrue(missing.getMessage().contains("engine(InferenceEngine)"));
    assertMessage(() -> PrefixRouterNode.builder().nodeId("has space"), "nodeId");
    assertMessage(() -> PrefixRouterNode.builder().nodeId("x".repeat(65)), "nodeId");
  }

  @Test
  void theNodeRefusesWorkOutsideRunningWithATypedError() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    PrefixRouterNode node = PrefixRouterNode.builder().nodeId("a").transport(net.transport("a"))
        .engine(SimulatedEngine.builder().scheduler(sim).build()).clock(sim).scheduler(sim)
        .build();
    CompletableFuture<InferenceResponse> early = node.submit(InferenceRequest.of("r",
        new int[] {1}));
    ExecutionException e = assertThrows(ExecutionException.class, early::get);
    assertInstanceOf(NodeNotRunningException.class, e.getCause());
    assertThrows(NullPointerException.class, () -> node.submit(null));
    node.start();
    assertThrows(IllegalStateException.class, node::start);
    node.stop();
    sim.runUntilIdle(1000);
    CompletableFuture<InferenceResponse> late = node.submit(InferenceRequest.of("r",
        new int[] {1}));
    assertInstanceOf(NodeNotRunningException.class,
        assertThrows(ExecutionException.class, late::get).getCause());
  }

  private static void assertMessage(org.junit.jupiter.api.function.Executable x, String part) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, x);
    assertTrue(e.getMessage().contains(part), () -> "expected '" + part + "' in: "
        + e.getMessage());
  }
}
