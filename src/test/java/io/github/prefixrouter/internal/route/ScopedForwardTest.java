package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A scoped request forwarded between two real nodes: the FORWARD carries the scope to the peer's
 * engine; a peer from before scopes (which speaks only version 1 of FORWARD) rejects it with its
 * protocol error, and the sender falls back to its own engine; from then on scoped requests
 * skip that peer ({@code NO_SCOPES}) until it restarts or the bound passes, while unscoped
 * requests still reach it, with no cool-down.
 */
class ScopedForwardTest extends TwoNodeForwardHarness {

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
    /** n1's gossip generation, as the peer view reports it (0: unknown). */
    volatile long generation;
    /** Where n1 listens, as the peer view reports it. */
    volatile PeerAddress address = InMemoryNetwork.addressOf("n1");
    /**
     * If not null, the snapshot {@link #livePeers} returns: one taken earlier, as a decision on
     * another thread may still be deciding over after the view changed.
     */
    volatile PeerSet snapshot;

    void holds(CacheScope scope, int[] tokens) {
      for (long h : HASHER.chain(BlockHasher.scopeRoot(scope), tokens)) {
        held.add(h);
      }
    }

    @Override
    public PeerSet livePeers() {
      PeerSet fixed = snapshot;
      if (fixed != null) {
        return fixed;
      }
      return new PeerSet(new PeerAddress[] {address}, new int[1],
          new int[1], new int[1], new boolean[1], new boolean[1], new long[] {1_000_000},
          new long[1], new long[] {generation});
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

  /** While true, n1 rejects FORWARDs of version 2 as a node from before scopes does. */
  volatile boolean peerBeforeScopes = true;

  /**
   * n1's transport while {@link #peerBeforeScopes}: a node from before scopes
   * ({@link BeforeScopesTransport}).
   */
  Transport speakingOnlyVersionOne(Transport t) {
    return BeforeScopesTransport.wrap(t, () -> peerBeforeScopes,
        new BeforeScopesTransport.Observer() {});
  }

  /** While true, n1's answers arrive garbled (a protocol failure of another kind). */
  volatile boolean garbleAnswers;

  /** n0's transport, garbling answers on demand. */
  Transport garbling(Transport t) {
    return new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload, Duration timeout) {
        CompletableFuture<byte[]> f = t.request(to, payload, timeout);
        return garbleAnswers ? f.thenApply(b -> new byte[] {(byte) 0xEE, 1}) : f;
      }
    };
  }

  void start(boolean peerKnowsScopes) {
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    startNodes(cfg, cfg, this::garbling,
        t -> peerKnowsScopes ? t : speakingOnlyVersionOne(t));
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
    // an unscoped request is version 1, which that peer decodes and runs: at once, the peer is
    // not cooled down for everyone
    InferenceResponse plain = submit(InferenceRequest.of("p1", t));
    assertEquals("n1", plain.servedBy(), plain.toString());
    assertEquals(1, plain.attempts());
    assertEquals(1, e1.ran.size());
    assertEquals(CacheScope.DEFAULT, e1.ran.get(0).scope());
  }

  @Test
  void scopedRequestsSkipAPeerFromBeforeScopesWhileUnscopedOnesKeepGoingThere() {
    start(false);
    int[] t = OracleCluster.prompt(5, 320);
    view.holds(A, t);
    view.holds(CacheScope.DEFAULT, t);
    CacheScope other = CacheScope.salt("tenant-2");
    view.holds(other, t);
    assertEquals(FallbackCause.PROTOCOL_ERROR,
        submit(InferenceRequest.of("s1", t).withScope(A)).fallbackCause());
    long framesAfterRejection = forwardVersions.size();
    for (int k = 0; k < 3; k++) {
      // any scope, not only the rejected one's: the peer speaks none
      InferenceResponse s = submit(InferenceRequest.of("s" + (k + 2), t)
          .withScope(k % 2 == 0 ? A : other));
      assertEquals("n0", s.servedBy(), s.toString());
      assertEquals(1, s.attempts(), s.toString());
      assertEquals(FallbackCause.NONE, s.fallbackCause());
      assertEquals(RouteDecision.SkipReason.NO_SCOPES, s.decision().candidates().get(1).skipped(),
          s.decision().toString());
      assertEquals(RouteDecision.Reason.ALL_PEERS_SKIPPED, s.decision().reason());
      InferenceResponse p = submit(InferenceRequest.of("p" + k, t));
      assertEquals("n1", p.servedBy(), p.toString());
      assertEquals(RouteDecision.SkipReason.NONE, p.decision().candidates().get(1).skipped());
    }
    assertEquals(framesAfterRejection + 3, forwardVersions.size(),
        "only the unscoped requests went out");
    assertEquals(3, e1.ran.size());
    for (InferenceRequest q : e1.ran) {
      assertEquals(CacheScope.DEFAULT, q.scope());
    }
  }

  @Test
  void thePeerIsAskedAgainWhenItRestartsOrAfterTheBound() {
    view.generation = 41;
    start(false);
    // a fresh prompt per request, held by the peer only, so the local tree never ties
    int[][] t = new int[7][];
    for (int k = 1; k < t.length; k++) {
      t[k] = OracleCluster.prompt(100 + k, 320);
      view.holds(A, t[k]);
    }
    submit(InferenceRequest.of("s1", t[1]).withScope(A));
    assertEquals(RouteDecision.SkipReason.NO_SCOPES,
        submit(InferenceRequest.of("s2", t[2]).withScope(A)).decision().candidates().get(1)
            .skipped());
    // the peer restarts, upgraded: a new gossip generation, and scoped requests reach it again
    peerBeforeScopes = false;
    view.generation = 42;
    InferenceResponse upgraded = submit(InferenceRequest.of("s3", t[3]).withScope(A));
    assertEquals("n1", upgraded.servedBy(), upgraded.toString());
    assertEquals(A, e1.ran.get(0).scope());

    // a view without generations: remembered for the bound, then the peer is tried again
    peerBeforeScopes = true;
    view.generation = 0;
    assertEquals(FallbackCause.PROTOCOL_ERROR,
        submit(InferenceRequest.of("s4", t[4]).withScope(A)).fallbackCause());
    sim.advanceBy(PeerHealth.NO_SCOPES_MEMORY - 1_000_000_000L);
    assertEquals(RouteDecision.SkipReason.NO_SCOPES,
        submit(InferenceRequest.of("s5", t[5]).withScope(A)).decision().candidates().get(1)
            .skipped());
    sim.advanceBy(2_000_000_000L);
    InferenceResponse again = submit(InferenceRequest.of("s6", t[6]).withScope(A));
    assertEquals(RouteDecision.SkipReason.NONE, again.decision().candidates().get(1).skipped());
    assertEquals(FallbackCause.PROTOCOL_ERROR, again.fallbackCause(), again.toString());
    assertEquals(1, e1.ran.size());
  }

  @Test
  void anyOtherProtocolFailureStillCoolsThePeerForEveryRequest() {
    start(true);
    int[] t = OracleCluster.prompt(7, 320);
    view.holds(A, t);
    view.holds(CacheScope.DEFAULT, t);
    garbleAnswers = true;
    InferenceResponse s = submit(InferenceRequest.of("s1", t).withScope(A));
    assertEquals(FallbackCause.PROTOCOL_ERROR, s.fallbackCause(), s.toString());
    garbleAnswers = false;
    InferenceResponse p = submit(InferenceRequest.of("p1", t));
    assertEquals("n0", p.servedBy(), p.toString());
    assertEquals(RouteDecision.SkipReason.FAILED_COOLDOWN,
        p.decision().candidates().get(1).skipped());
  }

  @Test
  void theRejectionOfANodeFromBeforeScopesIsRecognisedAfterTheHttpTransport() throws Exception {
    byte[] key = "0123456789abcdef0123456789abcdef".getBytes(StandardCharsets.US_ASCII);
    try (HttpTransport old = HttpTransport.builder().nodeId("n1").listen("127.0.0.1", 0)
            .clusterKey(key).build();
        HttpTransport sender = HttpTransport.builder().nodeId("n0").listen("127.0.0.1", 0)
            .clusterKey(key).build()) {
      Transport.InboundHandler answersNothing = new Transport.InboundHandler() {
        @Override
        public void onMessage(PeerAddress from, byte[] payload) {}

        @Override
        public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
          return CompletableFuture.failedFuture(payload[1] != 1
              ? BeforeScopesTransport.rejection(payload[1])
              : new TransportException(TransportException.Kind.PROTOCOL,
                  "malformed message: TRUNCATED in field 'tokens'"));
        }
      };
      old.start(answersNothing);
      sender.start(answersNothing);
      int[] t = OracleCluster.prompt(8, 64);
      String scoped = failureOf(sender.request(old.localAddress(),
          ForwardCodec.forward(InferenceRequest.of("s1", t).withScope(A), "n0", 1),
          Duration.ofSeconds(10)));
      assertTrue(RouterNode.rejectsForwardVersion(scoped), scoped);
      String other = failureOf(sender.request(old.localAddress(),
          ForwardCodec.forward(InferenceRequest.of("p1", t), "n0", 1), Duration.ofSeconds(10)));
      assertFalse(RouterNode.rejectsForwardVersion(other), other);
    }
  }

  private static String failureOf(CompletableFuture<byte[]> f) throws Exception {
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> f.get(20, TimeUnit.SECONDS));
    TransportException te = assertInstanceOf(TransportException.class, e.getCause());
    assertEquals(TransportException.Kind.PROTOCOL, te.kind());
    return te.getMessage();
  }
}
