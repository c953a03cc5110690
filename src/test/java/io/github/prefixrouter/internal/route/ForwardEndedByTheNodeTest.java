package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.ForwardingTransport;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * A forward the node ends itself (its guard timer, its stream's silence, its peer suspected) is
 * let go of at the transport before its CANCEL is sent: until then it holds one of the peer's
 * in-flight slots, and a transport at its limit for the peer (HTTP's {@code maxInFlightPerPeer})
 * drops a message sent meanwhile, so the CANCEL was lost and the peer generated the whole answer
 * for nobody. Letting go first must not change how the forward ends: a timeout still falls back
 * (and is counted) as a timeout, a suspected peer as unreachable.
 */
class ForwardEndedByTheNodeTest {

  static final int[] PREFIX = prompt(42, 480);

  /** n0's transport: its forwards are never answered; each CANCEL notes whether it was let go. */
  static final class Recorder {
    final AtomicReference<CompletableFuture<byte[]>> sent = new AtomicReference<>();
    /** For each CANCEL n0 sends: whether the forward's future was done (let go of) then. */
    final List<Boolean> cancels = new CopyOnWriteArrayList<>();
    /** Run by {@code request} before it returns (once), with the forward's timeout. */
    final AtomicReference<java.util.function.Consumer<Duration>> whileSending =
        new AtomicReference<>(t -> { });

    OracleCluster.Hooks hooks() {
      OracleCluster.Hooks h = new OracleCluster.Hooks();
      h.transportWrap = t -> !t.localAddress().nodeId().equals("n0") ? t
          : new ForwardingTransport(t) {
            @Override
            public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
                Duration timeout) {
              CompletableFuture<byte[]> f = new CompletableFuture<>(); // no answer, no timeout
              sent.set(f);
              whileSending.getAndSet(d -> { }).accept(timeout);
              return f;
            }

            @Override
            public void send(PeerAddress to, byte[] payload) {
              if (payload.length > 0 && payload[0] == ForwardCodec.CANCEL) {
                CompletableFuture<byte[]> f = sent.get();
                cancels.add(f != null && f.isDone());
              }
              super.send(to, payload);
            }
          };
      return h;
    }

    void assertCancelSentOnceLetGo() {
      assertFalse(cancels.isEmpty(), "no CANCEL was sent");
      assertTrue(sent.get().isCancelled(), "the forward is still awaited at the transport");
      assertEquals(List.of(true), cancels,
          "the CANCEL was sent while the forward still held its slot at the transport");
    }
  }

  private static OracleCluster cluster(Recorder rec, RouterConfig.Builder cfg) {
    OracleCluster c = new OracleCluster(2, cfg.policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).build(), 1, rec.hooks())
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    return c;
  }

  private static void assertFellBack(OracleCluster c, CompletableFuture<InferenceResponse> f,
      FallbackCause cause) {
    assertTrue(f.isDone(), "the request was never answered");
    InferenceResponse resp = f.join();
    assertEquals("n0", resp.servedBy());
    assertEquals(cause, resp.fallbackCause());
    NodeStats s = c.node("n0").stats();
    for (FallbackCause k : FallbackCause.values()) {
      assertEquals(k == cause ? 1L : 0L, (long) s.fallbacks().getOrDefault(k, 0L),
          "fallbacks " + k);
    }
    assertEquals(0, s.inFlight());
  }

  @Test
  void theGuardTimersCancelIsSentOnceTheForwardsSlotIsFree() {
    Recorder rec = new Recorder();
    OracleCluster c = cluster(rec, RouterConfig.builder()
        .forwardTimeout(Duration.ofMillis(50), Duration.ofMillis(50)));
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(
        new InferenceRequest("q", concat(PREFIX, prompt(9, 64)), GenerationParams.greedy(8)));
    c.sim.runUntilIdle(1_000_000);
    assertFellBack(c, f, FallbackCause.TIMEOUT);
    rec.assertCancelSentOnceLetGo();
  }

  /**
   * The guard timer fires while the transport is still sending the FORWARD (its {@code request}
   * has not returned): the node found no future to let go of then, and sent the CANCEL at once;
   * the forward was then left awaited at the transport, holding its slot, so that CANCEL could
   * be dropped and none followed. Once {@code request} returns, the forward is let go of and a
   * CANCEL follows, as for a forward abandoned while it is sent.
   */
  @Test
  void theGuardTimersCancelIsSentOnceTheForwardsSlotIsFreeWhenItFiresWhileSending() {
    Recorder rec = new Recorder();
    OracleCluster c = cluster(rec, RouterConfig.builder()
        .forwardTimeout(Duration.ofMillis(50), Duration.ofMillis(50)));
    boolean[] fired = new boolean[1];
    rec.whileSending.set(timeout -> {
      // past the transport's timeout and the guard's 25% and 1 ms after it
      c.sim.advanceBy(timeout.toNanos() * 2 + Duration.ofMillis(2).toNanos());
      fired[0] = !rec.cancels.isEmpty();
    });
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(
        new InferenceRequest("q", concat(PREFIX, prompt(9, 64)), GenerationParams.greedy(8)));
    c.sim.runUntilIdle(1_000_000);
    assertTrue(fired[0], "the guard timer did not fire while the FORWARD was sent");
    assertFellBack(c, f, FallbackCause.TIMEOUT);
    assertTrue(rec.sent.get().isCancelled(),
        "the forward is still awaited at the transport; CANCELs sent: " + rec.cancels);
    assertEquals(true, rec.cancels.get(rec.cancels.size() - 1),
        "no CANCEL was sent once the forward's slot was free: " + rec.cancels);
  }

  @Test
  void aSilentStreamsCancelIsSentOnceTheForwardsSlotIsFree() {
    Recorder rec = new Recorder();
    OracleCluster c = cluster(rec, RouterConfig.builder()
        .forwardTimeout(Duration.ofMillis(50), Duration.ofMillis(50)));
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(
        new InferenceRequest("q", concat(PREFIX, prompt(9, 64)), GenerationParams.greedy(8)),
        (tokens, text) -> { });
    c.sim.runUntilIdle(1_000_000);
    assertFellBack(c, f, FallbackCause.TIMEOUT);
    rec.assertCancelSentOnceLetGo();
  }

  @Test
  void aSuspectedPeersCancelIsSentOnceTheForwardsSlotIsFree() {
    Recorder rec = new Recorder();
    OracleCluster c = cluster(rec, RouterConfig.builder()
        .peerTimeouts(Duration.ofMillis(400), Duration.ofSeconds(2)));
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(
        new InferenceRequest("q", concat(PREFIX, prompt(9, 64)), GenerationParams.greedy(8)));
    c.sim.advanceBy(Duration.ofMillis(100).toNanos());
    assertTrue(rec.sent.get() != null && !rec.sent.get().isDone(), "the FORWARD is awaited");
    c.dead.add("n1");
    c.runUntilDone(f);
    assertFellBack(c, f, FallbackCause.UNREACHABLE);
    rec.assertCancelSentOnceLetGo();
  }
}
