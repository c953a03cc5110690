package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.ForwardingTransport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * A peer that restarts (its gossip generation grows) runs a new engine, with an empty cache:
 * what this node learned of the old one's replica estimates says nothing of the new one's, so
 * its record starts afresh. n1 answers every forward with nothing cached where n0's view says it
 * holds the whole prompt.
 */
class PeerRestartTest extends TwoNodeForwardHarness {

  int next;
  /** The FORWARD requests n0 sent, unanswered until the test ends them. */
  final List<CompletableFuture<byte[]>> held = new ArrayList<>();

  /** n0's decision for a new prompt the view says n1 holds: n1's candidate. */
  RouteDecision.Candidate n1Candidate() {
    int[] t = OracleCluster.prompt(500 + next++, 320);
    view.holds(CacheScope.DEFAULT, t);
    return n0.explain(InferenceRequest.of("x" + next, t)).candidates().get(1);
  }

  /** A request for a new prompt the view says n1 holds, forwarded there and answered a miss. */
  void miss() {
    int[] t = OracleCluster.prompt(100 + next++, 320);
    view.holds(CacheScope.DEFAULT, t);
    assertEquals("n1", submit(InferenceRequest.of("m" + next, t)).servedBy());
  }

  /** Starts n0 and n1 with {@code cfg}, n1 at generation 41, n0's forwards in {@link #held}. */
  void startHoldingForwards(RouterConfig cfg) {
    view.generation = 41;
    startNodes(cfg, cfg, t -> new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        if (payload.length > 0 && payload[0] == ForwardCodec.FORWARD) {
          CompletableFuture<byte[]> f = new CompletableFuture<>();
          held.add(f); // answered by the test
          return f;
        }
        return t.request(to, payload, timeout);
      }
    }, UnaryOperator.identity());
  }

  /**
   * Submits to n0 a request {@code id} for a new prompt the view says n1 holds, decided over the
   * older {@code snapshot} of the live peers, as another thread's decision may still be.
   */
  CompletableFuture<InferenceResponse> submitOver(PeerSet snapshot, String id, long seed) {
    int[] t = OracleCluster.prompt(seed, 320);
    view.holds(CacheScope.DEFAULT, t);
    view.snapshot = snapshot; // another thread's decision, over the older snapshot
    CompletableFuture<InferenceResponse> f = n0.submit(InferenceRequest.of(id, t));
    view.snapshot = null;
    return f;
  }

  /** Fails n0's held forward with {@code failure} and runs the simulation to {@code f}'s answer. */
  InferenceResponse failHeldForward(TransportException failure,
      CompletableFuture<InferenceResponse> f) {
    held.get(0).completeExceptionally(failure);
    while (!f.isDone() && sim.runNext()) {
      // run the simulation
    }
    return f.join();
  }

  @Test
  void aRestartedPeerIsTrustedAfresh() {
    // longest prefix: every request goes to n1 whatever the trust, and is measured there
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    view.generation = 41;
    startNodes(cfg, cfg, UnaryOperator.identity());
    for (int k = 0; k < 3; k++) {
      miss();
    }
    RouteDecision.Candidate distrusted = n1Candidate();
    assertTrue(distrusted.effectiveMatchedTokens() < 0.6 * distrusted.matchedTokens(),
        "three misses in a row: " + distrusted);

    view.generation = 42; // n1 restarted
    RouteDecision.Candidate restarted = n1Candidate();
    assertEquals(restarted.matchedTokens(), restarted.effectiveMatchedTokens(),
        "the restarted peer is still distrusted for its old engine's misses: " + restarted);

    // and measured afresh from then on: its own misses count
    miss();
    RouteDecision.Candidate measured = n1Candidate();
    assertTrue(measured.effectiveMatchedTokens() < 0.9 * measured.matchedTokens(),
        "a miss of the new engine: " + measured);
  }

  /**
   * A forward sent to n1 before it restarted that fails after the restart says nothing of the
   * new process: the failure cool-down lands on the incarnation the forward went to, not on the
   * restarted peer's fresh record that decisions made meanwhile looked up.
   */
  @Test
  void aForwardToTheOldIncarnationFailingAfterARestartDoesNotCoolTheNewOneDown() {
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    startHoldingForwards(cfg);
    int[] t = OracleCluster.prompt(900, 320);
    view.holds(CacheScope.DEFAULT, t);
    CompletableFuture<InferenceResponse> f = n0.submit(InferenceRequest.of("old", t));
    assertEquals(1, held.size(), "forwarded to n1");

    view.generation = 42; // n1 restarted; n0 decides over the new incarnation meanwhile
    assertEquals(RouteDecision.SkipReason.NONE, n1Candidate().skipped());
    InferenceResponse r = failHeldForward(new TransportException(
        TransportException.Kind.UNREACHABLE, "the old process is gone"), f);
    assertEquals("n0", r.servedBy(), "run here after the failed forward");

    RouteDecision.Candidate restarted = n1Candidate();
    assertEquals(RouteDecision.SkipReason.NONE, restarted.skipped(),
        "the old incarnation's failure cooled the restarted peer down: " + restarted);
  }

  /**
   * A forward decided over a snapshot of the live peers taken before n1 restarted, and sent
   * once the view had shown the restart, goes to the new process: it counts as outstanding on
   * the restarted peer's record, and what its end teaches, here a push-back, is about the new
   * process too. The push-back, taken for the old incarnation's, was dropped, and decisions kept
   * sending the restarted peer work it had just refused.
   */
  @Test
  void aForwardDecidedBeforeARestartAndSentAfterItIsAboutTheNewIncarnation() {
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    startHoldingForwards(cfg);
    PeerSet beforeRestart = view.livePeers();
    view.generation = 42; // n1 restarted; n0 decides over the new incarnation
    assertEquals(RouteDecision.SkipReason.NONE, n1Candidate().skipped());

    CompletableFuture<InferenceResponse> f = submitOver(beforeRestart, "late", 901);
    assertEquals(1, held.size(), "forwarded to n1");
    RouteDecision.Candidate during = n1Candidate();
    assertEquals(1, during.load(),
        "the forward sent to the restarted peer is not counted there: " + during);

    InferenceResponse r = failHeldForward(new TransportException(
        TransportException.Kind.BUSY, "the restarted process is busy"), f);
    assertEquals("n0", r.servedBy(), "run here after the push-back");
    RouteDecision.Candidate after = n1Candidate();
    assertEquals(0, after.load(), after.toString());
    assertEquals(RouteDecision.SkipReason.BUSY_COOLDOWN, after.skipped(),
        "the restarted peer pushed back a forward sent to it and is not cooled down: " + after);
  }

  /**
   * The same, where n1 comes back at another address under its node id (a pod rescheduled with
   * a new IP address): the forward goes to the address the new process listens at, as the
   * snapshot that showed the restart gave it. It went to the address of the decision's older
   * snapshot, where nobody listens any more: refused as unreachable, it ran here, and the
   * failure cooled the new process down, so n0 stopped forwarding to a healthy peer for
   * {@code failureCooldown}.
   */
  @Test
  void aForwardDecidedBeforeARestartGoesWhereTheNewIncarnationListens() {
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    view.generation = 41;
    startNodes(cfg, cfg, UnaryOperator.identity());
    PeerSet beforeRestart = view.livePeers();

    // n1 restarts under its node id at another address; n0 decides over the new incarnation
    PeerAddress moved = new PeerAddress("n1", "mem:n1-restarted");
    CompletableFuture<Void> stopped = n1.stop();
    while (!stopped.isDone() && sim.runNext()) {
      // run the simulation
    }
    n1 = new RouterNode("n1", cfg, net.transport(moved), new ScopedForwardTest.RecordingEngine(),
        sim, sim, new SplittableRandom(3), List.of(), new RouterNode.Components(
            RequestLifecycleTest.NO_CACHE, new BlockChain(ScopedForwardTest.HASHER),
            PeerView.NONE));
    n1.start();
    view.address = moved;
    view.generation = 42;
    assertEquals(RouteDecision.SkipReason.NONE, n1Candidate().skipped());

    CompletableFuture<InferenceResponse> f = submitOver(beforeRestart, "moved", 902);
    while (!f.isDone() && sim.runNext()) {
      // run the simulation
    }
    InferenceResponse r = f.join();
    assertEquals("n1", r.servedBy(), "the forward went to n1's old address (fallback "
        + r.fallbackCause() + ") rather than to " + moved);
    RouteDecision.Candidate after = n1Candidate();
    assertEquals(RouteDecision.SkipReason.NONE, after.skipped(),
        "the restarted peer, healthy at " + moved + ", is cooled down: " + after);
  }
}
