package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.route.ScopedForwardTest.OnePeer;
import io.github.prefixrouter.internal.route.ScopedForwardTest.RecordingEngine;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * A forward that starts as the periodic prune of the peer records (every 1,024th routing
 * decision) forgets its peer: another thread's decision, over a snapshot of the live peers
 * taken while the peer was missing from it, prunes the record the forward has just looked up.
 * Forced here by n0's clock being read as the forward starts. The forward's counts (a request
 * outstanding there, what its answer teaches) must land on the record the node looks up.
 */
class ForwardDuringPruneTest {

  final SimulatedScheduler sim = new SimulatedScheduler();
  final InMemoryNetwork net = new InMemoryNetwork(sim, 1);
  final RecordingEngine e0 = new RecordingEngine();
  final RecordingEngine e1 = new RecordingEngine();
  final OnePeer n1Holds = new OnePeer();
  /** While true, n0's view has no live peer (n1 missed a few heartbeats). */
  boolean n1Missing;
  /**
   * If not null, the snapshot n0's view returns, as the gossip view does until gossip changes
   * it (each snapshot caches the peer records decisions over it look up).
   */
  PeerSet snapshot;
  /** While true, n0's FORWARDs fail at once, n1 unreachable. */
  boolean n1Unreachable;
  /** Run once, when n0 reads its clock in {@link #hookIn}. */
  final List<Runnable> inForwardStart = new ArrayList<>();
  /**
   * What the checks in {@link #inForwardStart} found wrong: they run inside n0's clock reading,
   * and a reading that throws is logged and taken as the latest good one, so {@link #checkHook}
   * fails the test with them.
   */
  final List<AssertionError> broken = new ArrayList<>();
  /** The method of {@link RouterNode} whose clock reading runs {@link #inForwardStart}. */
  String hookIn = "startForward";
  RouterNode n0;
  RouterNode n1;
  int next;

  final PeerView view = new PeerView() {
    @Override
    public PeerSet livePeers() {
      if (snapshot != null) {
        return snapshot;
      }
      return n1Missing ? PeerSet.EMPTY : n1Holds.livePeers();
    }

    @Override
    public void leadingBlocks(PeerSet peers, long[] chain, int blocks, int[] out) {
      n1Holds.leadingBlocks(peers, chain, blocks, out);
    }
  };

  void start() {
    Clock clock = () -> {
      if (!inForwardStart.isEmpty() && StackWalker.getInstance().walk(st -> st.anyMatch(
          f -> f.getClassName().equals(RouterNode.class.getName())
              && f.getMethodName().equals(hookIn)))) {
        try {
          inForwardStart.remove(0).run();
        } catch (AssertionError e) {
          broken.add(e);
          throw e;
        }
      }
      return sim.nanoTime();
    };
    // longest prefix: every request n1 holds goes there, whatever the trust
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    Transport t0 = new ForwardingTransport(net.transport("n0")) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        if (n1Unreachable && payload.length > 0 && payload[0] == ForwardCodec.FORWARD) {
          return CompletableFuture.failedFuture(new TransportException(
              TransportException.Kind.UNREACHABLE, "n1 is unreachable"));
        }
        return super.request(to, payload, timeout);
      }
    };
    n0 = new RouterNode("n0", cfg, t0, e0, clock, sim,
        new SplittableRandom(1), List.of(), new RouterNode.Components(
            new TreeIndex(ConcurrentPrefixTree.selfManaged(1 << 20)),
            new BlockChain(ScopedForwardTest.HASHER), view));
    n1 = new RouterNode("n1", cfg, net.transport("n1"), e1, sim, sim,
        new SplittableRandom(2), List.of(), new RouterNode.Components(
            RequestLifecycleTest.NO_CACHE, new BlockChain(ScopedForwardTest.HASHER),
            PeerView.NONE));
    n0.start();
    n1.start();
  }

  /** A new 320-token prompt n0's view says n1 holds. */
  int[] heldByN1() {
    int[] t = OracleCluster.prompt(700 + next++, 320);
    n1Holds.holds(CacheScope.DEFAULT, t);
    return t;
  }

  /** Fails with the first thing the checks run in n0's clock reading found wrong, if any. */
  void checkHook() {
    if (!broken.isEmpty()) {
      throw broken.get(0);
    }
  }

  /** n0's decision for a new prompt n1 holds: n1's candidate. */
  RouteDecision.Candidate n1Candidate() {
    return n0.explain(InferenceRequest.of("x" + next, heldByN1())).candidates().get(1);
  }

  @Test
  void aForwardStartedAsThePruneForgetsItsPeerCountsOnTheRecordLookedUp() {
    start();
    // the prune, in a decision while n1 is missing from n0's live peers
    inForwardStart.add(() -> {
      n1Missing = true;
      NodeProbe.decisionsOf(n0).set(1023); // the next decision prunes
      CompletableFuture<InferenceResponse> other = n0.submit(InferenceRequest.of("other",
          OracleCluster.prompt(1, 64)));
      assertTrue(other.isDone(), "run at once by n0's engine");
      n1Missing = false;
    });
    CompletableFuture<InferenceResponse> f =
        n0.submit(InferenceRequest.of("forwarded", heldByN1()));
    assertTrue(inForwardStart.isEmpty(), "n0's clock was not read as the forward started");
    checkHook();
    assertFalse(f.isDone(), "answered before the check");
    RouteDecision.Candidate during = n1Candidate();
    assertEquals(1, during.load(), "the forward outstanding at n1 is not counted: " + during);

    while (!f.isDone() && sim.runNext()) {
      // run the simulation
    }
    assertEquals("n1", f.join().servedBy());
    // n1 had nothing of the prompt cached where n0's view said it held it all
    RouteDecision.Candidate after = n1Candidate();
    assertEquals(0, after.load(), after.toString());
    assertTrue(after.effectiveMatchedTokens() < after.matchedTokens(),
        "the forward's miss is not learned: " + after);
  }

  /**
   * A prune over a snapshot of the live peers older than the view's current one, which lacked
   * n1 (it had missed a few heartbeats), forgets n1's record after a decision over the current
   * snapshot cached it there. The decisions over that snapshot, until gossip changes the view,
   * must still see what the node learns of n1: here a failed forward's cool-down.
   */
  @Test
  void aRecordPrunedWhileANewerSnapshotCachesItIsNotUsedFromThatSnapshot() {
    hookIn = "pruneHealth";
    start();
    PeerSet current = n1Holds.livePeers();
    inForwardStart.add(() -> {
      snapshot = current; // n1 is back as the prune runs over the snapshot without it
      assertEquals(RouteDecision.SkipReason.NONE, n1Candidate().skipped());
    });
    n1Missing = true;
    NodeProbe.decisionsOf(n0).set(1023); // the next decision prunes
    CompletableFuture<InferenceResponse> run = n0.submit(InferenceRequest.of("run",
        OracleCluster.prompt(1, 64)));
    assertTrue(inForwardStart.isEmpty(), "n0's clock was not read in the prune");
    checkHook();
    assertEquals("n0", run.join().servedBy());

    n1Unreachable = true;
    CompletableFuture<InferenceResponse> f =
        n0.submit(InferenceRequest.of("unreachable", heldByN1()));
    while (!f.isDone() && sim.runNext()) {
      // run the simulation
    }
    assertEquals("n0", f.join().servedBy(), "run here after the failed forward");
    RouteDecision.Candidate after = n1Candidate();
    assertEquals(RouteDecision.SkipReason.FAILED_COOLDOWN, after.skipped(),
        "the failed forward's cool-down is not seen: " + after);
  }
}
