package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * A scoped request forwarded between two real nodes: the FORWARD carries the scope to the peer's
 * engine; a peer from before scopes (which speaks only version 1 of FORWARD) rejects it with its
 * protocol error, and the sender falls back to its own engine, while unscoped requests still
 * reach that peer.
 */
class ScopedForwardTest {

  static final BlockHasher HASHER = new BlockHasher(16, 0);
  static final CacheScope A = CacheScope.of("lora-a", "tenant-1");

  /** An engine that answers at once and records the requests it ran. */
  static final class RecordingEngine implements InferenceEngine {
    final List<InferenceRequest> ran = new ArrayList<>();

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      ran.add(r);
      return CompletableFuture.completedFuture(
          new EngineResult(OracleCluster.expected(r), "", r.length(), 0, 1_000, 1_000));
    }
  }

  /** A peer view of one peer, n1, holding the given chain hashes. */
  static final class OnePeer implements PeerView {
    final Set<Long> held = new HashSet<>();

    void holds(CacheScope scope, int[] tokens) {
      for (long h : HASHER.chain(BlockHasher.scopeRoot(scope), tokens)) {
        held.add(h);
      }
    }

    @Override
    public PeerSet livePeers() {
      return new PeerSet(new PeerAddress[] {InMemoryNetwork.addressOf("n1")}, new int[1],
          new int[1], new int[1], new boolean[1], new boolean[1], new long[] {1_000_000},
          new long[1]);
    }

    @Override
    public void leadingBlocks(PeerSet peers, long[] chain, int count, int[] out) {
      int k = 0;
      while (k < count && held.contains(chain[k])) {
        k++;
      }
      out[0] = k;
    }
  }

  /**
   * What a node from before scopes does with a FORWARD of another version: its decoder throws
   * UNKNOWN_VERSION and it answers with a protocol failure (RouterNode.onForwardRequest).
   */
  static Transport speakingOnlyVersionOne(Transport t) {
    return new ForwardingTransport(t) {
      @Override
      public void start(InboundHandler h) {
        t.start(new InboundHandler() {
          @Override
          public void onMessage(PeerAddress from, byte[] payload) {
            h.onMessage(from, payload);
          }

          @Override
          public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
            if (payload.length > 1 && payload[0] == ForwardCodec.FORWARD && payload[1] != 1) {
              return CompletableFuture.failedFuture(new TransportException(
                  TransportException.Kind.PROTOCOL, "UNKNOWN_VERSION at byte 1: version "
                      + payload[1] + " (forwarding messages speak version 1)"));
            }
            return h.onRequest(from, payload);
          }
        });
      }
    };
  }

  final SimulatedScheduler sim = new SimulatedScheduler();
  final InMemoryNetwork net = new InMemoryNetwork(sim, 1);
  final RecordingEngine e0 = new RecordingEngine();
  final RecordingEngine e1 = new RecordingEngine();
  final OnePeer view = new OnePeer();
  RouterNode n0;

  void start(boolean peerKnowsScopes) {
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    n0 = new RouterNode("n0", cfg, net.transport("n0"), e0, sim, sim, new SplittableRandom(1),
        List.of(), new RouterNode.Components(
            new TreeIndex(ConcurrentPrefixTree.selfManaged(1 << 20)), new BlockChain(HASHER),
            view));
    Transport t1 = net.transport("n1");
    RouterNode n1 = new RouterNode("n1", cfg, peerKnowsScopes ? t1 : speakingOnlyVersionOne(t1),
        e1, sim, sim, new SplittableRandom(2), List.of(), new RouterNode.Components(
            RequestLifecycleTest.NO_CACHE, new BlockChain(HASHER), PeerView.NONE));
    n0.start();
    n1.start();
  }

  InferenceResponse submit(InferenceRequest r) {
    CompletableFuture<InferenceResponse> f = n0.submit(r);
    while (!f.isDone() && sim.runNext()) {
      // run the simulation
    }
    return f.join();
  }

  @Test
  void theForwardCarriesTheScopeToThePeersEngine() {
    start(true);
    int[] t = OracleCluster.prompt(3, 320);
    view.holds(A, t);
    InferenceResponse r = submit(InferenceRequest.of("s1", t).withScope(A));
    assertEquals("n1", r.servedBy());
    assertTrue(r.forwarded());
    assertEquals(1, e1.ran.size());
    assertEquals(A, e1.ran.get(0).scope());
    // the same tokens under another scope are not drawn to the holder
    InferenceResponse other = submit(InferenceRequest.of("s2", t).withScope(CacheScope.adapter("b")));
    assertEquals("n0", other.servedBy());
    assertFalse(other.forwarded());
    assertEquals(CacheScope.adapter("b"), e0.ran.get(0).scope());
  }

  @Test
  void aPeerFromBeforeScopesRejectsAScopedForwardAndTheSenderFallsBack() {
    start(false);
    int[] t = OracleCluster.prompt(4, 320);
    view.holds(A, t);
    view.holds(CacheScope.DEFAULT, t);
    InferenceResponse r = submit(InferenceRequest.of("s1", t).withScope(A));
    assertEquals("n0", r.servedBy(), r.toString());
    assertFalse(r.forwarded());
    assertEquals(FallbackCause.PROTOCOL_ERROR, r.fallbackCause());
    assertEquals(2, r.attempts());
    assertEquals(A, e0.ran.get(0).scope());
    assertTrue(e1.ran.isEmpty());
    // an unscoped request is version 1, which that peer decodes and runs (once its cooldown
    // after the protocol error is over)
    sim.advanceBy(Duration.ofMinutes(1).toNanos());
    InferenceResponse plain = submit(InferenceRequest.of("p1", t));
    assertEquals("n1", plain.servedBy(), plain.toString());
    assertEquals(1, e1.ran.size());
    assertEquals(CacheScope.DEFAULT, e1.ran.get(0).scope());
  }
}
