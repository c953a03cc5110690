package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.OutputDivergedException;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.contract.ThrowingCacheEventListener;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Streamed output: {@code submit(request, listener)} gives the output while it is generated,
 * on the local engine and across peers (relays included), seamlessly across fallbacks, and
 * fails with {@link OutputDivergedException} when attempts disagree.
 */
class StreamingTest {

  static final int[] PREFIX = prompt(42, 480);
  static final long MS = 1_000_000L;

  static InferenceRequest generating(String id, long seed, int maxTokens) {
    return new InferenceRequest(id, concat(PREFIX, prompt(seed, 40)),
        GenerationParams.greedy(maxTokens));
  }

  /** Forwards to the peer holding the prefix (n1), which streams every piece at once. */
  static RouterConfig forwarding(Duration streamInterval) {
    return RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false)
        .streamInterval(streamInterval).build();
  }

  static StreamRecorder recorder(OracleCluster c, InferenceRequest r) {
    return new StreamRecorder(expected(r), c.sim::nanoTime);
  }

  static CompletableFuture<InferenceResponse> submit(OracleCluster c, String at,
      InferenceRequest r, StreamRecorder rec) {
    CompletableFuture<InferenceResponse> f = c.node(at).submit(r, rec);
    rec.future = f;
    return f;
  }

  static void runUntilDone(OracleCluster c, CompletableFuture<?> f) {
    c.runUntilDone(f);
  }

  /** Counts the STREAM messages a node sends. */
  static OracleCluster.Hooks countingStreams(AtomicInteger streams) {
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.transportWrap = t -> new io.github.prefixrouter.testing.ForwardingTransport(t) {
      @Override
      public void send(PeerAddress to, byte[] payload) {
        if (payload.length > 0 && payload[0] == ForwardCodec.STREAM) {
          streams.incrementAndGet();
        }
        super.send(to, payload);
      }
    };
    return h;
  }

  @Test
  void aLocalRequestStreamsWhileItDecodes() {
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1).start();
    InferenceRequest r = generating("r1", 1, 40); // 10 pieces of 4 tokens, 5 ms per token
    StreamRecorder rec = recorder(c, r);
    CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
    runUntilDone(c, f);
    long doneAt = c.sim.nanoTime();
    InferenceResponse resp = f.join();
    assertArrayEquals(resp.result().outputTokens(), rec.tokens());
    assertTrue(rec.clean(), rec.toString());
    assertEquals(10, rec.pieces.size(), rec.toString());
    // the first piece came after 4 decoded tokens, long before the answer
    assertTrue(rec.times.get(0) <= doneAt - 35 * 5 * MS, rec.times + " vs " + doneAt);
  }

  @Test
  void aForwardedRequestStreamsFromThePeer() {
    AtomicInteger streams = new AtomicInteger();
    OracleCluster c = new OracleCluster(2, forwarding(Duration.ZERO), 1,
        countingStreams(streams)).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    InferenceRequest r = generating("r1", 1, 40);
    StreamRecorder rec = recorder(c, r);
    CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
    runUntilDone(c, f);
    long doneAt = c.sim.nanoTime();
    InferenceResponse resp = f.join();
    assertTrue(resp.forwarded());
    assertEquals("n1", resp.servedBy());
    assertArrayEquals(expected(r), rec.tokens());
    assertTrue(rec.clean(), rec.toString());
    assertEquals(10, streams.get(), "with no interval, one STREAM per engine piece");
    assertEquals(10, rec.pieces.size(), rec.toString());
    assertTrue(rec.times.get(0) <= doneAt - 35 * 5 * MS, rec.times + " vs " + doneAt);
    assertEquals(0, c.node("n0").strayStreamMessages());
  }

  @Test
  void aServingPeerSendsAtMostOneStreamMessagePerInterval() {
    AtomicInteger streams = new AtomicInteger();
    // 4 tokens per 20 ms at the engine, an interval of 50 ms: pieces are gathered
    OracleCluster c = new OracleCluster(2, forwarding(Duration.ofMillis(50)), 1,
        countingStreams(streams)).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    InferenceRequest r = generating("r1", 1, 80); // 400 ms of decode
    StreamRecorder rec = recorder(c, r);
    CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
    runUntilDone(c, f);
    assertArrayEquals(expected(r), rec.tokens());
    assertTrue(rec.clean(), rec.toString());
    // 19 engine pieces before the answer; the first at once, then one per 50 ms
    assertTrue(streams.get() >= 6 && streams.get() <= 9, "STREAM messages: " + streams.get());
    for (int i = 2; i < rec.times.size() - 1; i++) {
      assertTrue(rec.times.get(i) - rec.times.get(i - 1) >= 50 * MS - 1,
          "pieces closer than the interval: " + rec.times);
    }
  }

  /**
   * The output a serving peer has when its answer is ready goes in the answer only: an engine
   * that does not stream gives it all with its result, and no STREAM repeats it before the
   * RESULT, with or without an interval.
   */
  @Test
  void aServingPeerDoesNotStreamWhatItsAnswerCarries() {
    for (Duration interval : new Duration[] {Duration.ZERO, Duration.ofMillis(20)}) {
      AtomicInteger streams = new AtomicInteger();
      OracleCluster.Hooks h = countingStreams(streams);
      AtomicInteger built = new AtomicInteger();
      // n1's engine does not stream: the output comes with its result
      h.engineWrap = e -> built.getAndIncrement() == 1 ? new ForwardingEngine(e) : e;
      OracleCluster c = new OracleCluster(2, forwarding(interval), 1, h)
          .rtt(Duration.ofMillis(1)).start();
      c.warm("n1", concat(PREFIX, prompt(9, 40)));
      InferenceRequest r = generating("r1", 1, 40);
      StreamRecorder rec = recorder(c, r);
      CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
      runUntilDone(c, f);
      assertTrue(f.join().forwarded());
      assertArrayEquals(expected(r), rec.tokens());
      assertTrue(rec.clean(), rec.toString());
      assertEquals(0, streams.get(), "STREAM messages repeating the answer, interval " + interval);
    }
  }

  /**
   * Longest-prefix routing with every piece streamed at once and short peer timeouts, so that a
   * forward failing mid-stream falls back within the test's simulated time.
   */
  private static RouterConfig fallbackConfig() {
    return RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).streamInterval(Duration.ZERO)
        .peerTimeouts(Duration.ofMillis(400), Duration.ofSeconds(4)).build();
  }

  @Test
  void aForwardThatFailsMidStreamFallsBackAndTheStreamStaysSeamless() {
    RouterConfig cfg = fallbackConfig();
    // n0's engine streams pieces of 5 tokens, n1's of 4: the fallback's pieces straddle what
    // the client already has
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    AtomicInteger engines = new AtomicInteger(5);
    h.engineTweak = b -> b.streamChunkTokens(engines.getAndDecrement());
    OracleCluster c = new OracleCluster(2, cfg, 1, h).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    InferenceRequest r = generating("r1", 1, 60); // 300 ms of decode at n1
    StreamRecorder rec = recorder(c, r);
    CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
    c.sim.advanceBy(150 * MS);
    int before = rec.tokens().length;
    assertTrue(before >= 12 && before % 5 != 0, "n1 streamed " + rec);
    c.crash("n1"); // mid-stream: n0 notices, and runs the request itself
    runUntilDone(c, f);
    InferenceResponse resp = f.join();
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.UNREACHABLE, resp.fallbackCause());
    assertArrayEquals(expected(r), rec.tokens(), "repeats or gaps in " + rec);
    assertTrue(rec.clean(), rec.toString());
  }

  /**
   * A streamed forward's tag leads STREAM messages to the execution only while that attempt is
   * awaited: an attempt that fell back to another peer, one abandoned by the client's cancel,
   * and the one that answered leave nothing registered behind them.
   */
  @Test
  void noStreamTagOutlivesItsAttempt() {
    RouterConfig cfg = fallbackConfig();
    OracleCluster c = new OracleCluster(3, cfg, 1).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    c.warm("n2", concat(PREFIX, prompt(9, 40)));
    long n1Before = c.engine("n1").stats().requests();
    InferenceRequest r = generating("r1", 1, 60);
    StreamRecorder rec = recorder(c, r);
    CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
    c.sim.advanceBy(100 * MS);
    assertTrue(rec.tokens().length >= 8, "streamed " + rec);
    String first = c.engine("n1").stats().requests() > n1Before ? "n1" : "n2";
    String second = first.equals("n1") ? "n2" : "n1";
    c.crash(first); // mid-stream: the other peer serves it, streaming from offset 0 again
    runUntilDone(c, f);
    InferenceResponse resp = f.join();
    assertEquals(second, resp.servedBy());
    assertArrayEquals(expected(r), rec.tokens(), "repeats or gaps in " + rec);
    assertTrue(rec.clean(), rec.toString());
    assertEquals(0, c.node("n0").streamTagOf("r1"), "a tag left registered after the answer");

    // abandoned by its client mid-stream
    InferenceRequest r2 = generating("r2", 2, 60);
    StreamRecorder rec2 = recorder(c, r2);
    CompletableFuture<InferenceResponse> f2 = submit(c, "n0", r2, rec2);
    c.sim.advanceBy(100 * MS);
    assertTrue(rec2.tokens().length >= 8, "streamed " + rec2);
    assertTrue(c.node("n0").streamTagOf("r2") != 0);
    f2.cancel(false);
    c.sim.runUntilIdle(1_000_000);
    assertEquals(0, c.node("n0").streamTagOf("r2"), "a tag left registered after the cancel");
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  @Test
  void aRequestWithStopsFallsBackMidStreamToTheSameCutOutput() {
    RouterConfig cfg = fallbackConfig();
    OracleCluster c = new OracleCluster(2, cfg, 1).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    InferenceRequest plain = generating("r1", 1, 60);
    int[] whole = expected(plain);
    // the 41st token is a stop token id (the first of its kind): the output ends with it
    int stop = whole[40];
    int first = 0;
    while (whole[first] != stop) {
      first++;
    }
    InferenceRequest r = new InferenceRequest("r1", plain.tokens(),
        plain.params().withStops(java.util.List.of("no text"), java.util.List.of(stop)));
    StreamRecorder rec = recorder(c, r);
    CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
    c.sim.advanceBy(100 * MS);
    assertTrue(rec.tokens().length >= 8, "n1 streamed " + rec);
    c.crash("n1"); // mid-stream: n0 runs the request itself, with its stops
    runUntilDone(c, f);
    InferenceResponse resp = f.join();
    assertEquals("n0", resp.servedBy());
    assertEquals(FallbackCause.UNREACHABLE, resp.fallbackCause());
    assertArrayEquals(java.util.Arrays.copyOf(whole, first + 1), resp.result().outputTokens());
    assertArrayEquals(resp.result().outputTokens(), rec.tokens(), "repeats or gaps in " + rec);
    assertTrue(rec.clean(), rec.toString());
  }

  /** An engine that answers differently on each node: it breaks the determinism contract. */
  static InferenceEngine skewed(InferenceEngine e, int salt) {
    return new ForwardingEngine(e) {
      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest request) {
        return execute(request, OutputListener.IGNORE);
      }

      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest request,
          OutputListener listener) {
        return e.execute(request, (t, s) -> listener.onOutput(skew(t, salt), s))
            .thenApply(res -> new EngineResult(skew(res.outputTokens(), salt), res.text(),
                res.promptTokens(), res.cachedPromptTokens(), res.prefillNanos(),
                res.decodeNanos()));
      }
    };
  }

  static int[] skew(int[] t, int salt) {
    int[] o = t.clone();
    for (int i = 0; i < o.length; i++) {
      o[i] ^= salt;
    }
    return o;
  }

  @Test
  void attemptsThatDisagreeFailTheRequestWithATypedError() {
    RouterConfig cfg = fallbackConfig();
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    AtomicInteger salts = new AtomicInteger();
    h.engineWrap = e -> skewed(e, salts.incrementAndGet());
    OracleCluster c = new OracleCluster(2, cfg, 1, h).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    InferenceRequest r = generating("r1", 1, 60);
    StreamRecorder rec = new StreamRecorder(null, c.sim::nanoTime);
    CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
    c.sim.advanceBy(150 * MS);
    assertTrue(rec.tokens().length >= 12, rec.toString());
    c.crash("n1"); // n0's own engine takes over, and answers differently
    runUntilDone(c, f);
    CompletionException e = assertThrows(CompletionException.class, f::join);
    OutputDivergedException d = assertInstanceOf(OutputDivergedException.class, e.getCause());
    assertEquals("r1", d.requestId());
    assertTrue(d.getMessage().contains("token 0"), d.getMessage());
    assertEquals(1, c.node("n0").outputDivergences());
    assertEquals(1, c.node("n0").stats().failed());
    assertEquals(1, c.engine("n0").stats().cancelled(), "the diverging run went on");
    assertTrue(rec.clean(), rec.toString());
    c.sim.runUntilIdle(1_000_000);
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  @Test
  void aFinalAnswerThatContradictsTheStreamFailsTheRequest() {
    OracleCluster c = answeringOtherThanItStreams();
    InferenceRequest r = generating("r1", 1, 20);
    StreamRecorder rec = recorder(c, r);
    CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
    runUntilDone(c, f);
    CompletionException e = assertThrows(CompletionException.class, f::join);
    assertInstanceOf(OutputDivergedException.class, e.getCause());
    assertEquals(1, c.node("n0").outputDivergences());
    assertTrue(rec.clean(), rec.toString());
    // without a listener nothing is compared: the answer is the engine's
    assertFalse(c.node("n0").submit(generating("r2", 2, 20)).isCompletedExceptionally());
  }

  /**
   * A started one-node cluster, local only, whose engine streams one output and answers another
   * (its answer's tokens skewed by one).
   */
  static OracleCluster answeringOtherThanItStreams() {
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.engineWrap = e -> new InferenceEngine() {
      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest request) {
        return e.execute(request);
      }

      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest request,
          OutputListener listener) {
        return e.execute(request, listener).thenApply(res -> new EngineResult(
            skew(res.outputTokens(), 1), "", res.promptTokens(), res.cachedPromptTokens(),
            res.prefillNanos(), res.decodeNanos()));
      }
    };
    return new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1, h).start();
  }

  /** A peer (not a node) that sends FORWARDs by hand and records what comes back. */
  static final class FakePeer {
    final Transport t;
    final List<ForwardCodec.Stream> streams = new ArrayList<>();

    FakePeer(OracleCluster c, String id) {
      t = c.net.transport(id);
      t.start(new Transport.InboundHandler() {
        @Override
        public void onMessage(PeerAddress from, byte[] payload) {
          try {
            if (ForwardCodec.decode(payload) instanceof ForwardCodec.Stream s) {
              streams.add(s);
            }
          } catch (Exception e) {
            throw new AssertionError(e);
          }
        }

        @Override
        public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
          return CompletableFuture.completedFuture(new byte[0]);
        }
      });
    }

    int[] streamedTokens(long tag) {
      List<Integer> out = new ArrayList<>();
      for (ForwardCodec.Stream s : streams) {
        assertEquals(tag, s.streamTag());
        assertEquals(out.size(), s.tokenOffset(), "a gap or an overlap");
        for (int x : s.tokens()) {
          out.add(x);
        }
      }
      return out.stream().mapToInt(Integer::intValue).toArray();
    }
  }

  static ForwardCodec.Result result(CompletableFuture<byte[]> f) {
    try {
      return (ForwardCodec.Result) ForwardCodec.decode(f.join());
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }

  @Test
  void aRelayPassesThePiecesOnToItsSender() {
    // hop limit 2: x forwards r1 (streaming) to n0, which relays it to n1 (warm for its prefix)
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).hopLimit(2)
        .streamInterval(Duration.ZERO).build();
    OracleCluster c = new OracleCluster(2, cfg, 1).rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(1, 40)));
    FakePeer x = new FakePeer(c, "x");
    InferenceRequest r = generating("r1", 2, 40);
    long tag = 0x1234_5678_9ABCL;
    CompletableFuture<byte[]> answer = x.t.request(InMemoryNetwork.addressOf("n0"),
        ForwardCodec.forward(r, "x", 1, true, tag), Duration.ofSeconds(30));
    c.sim.runUntilIdle(1_000_000);
    ForwardCodec.Result res = result(answer);
    assertEquals("n1", res.servedBy());
    assertArrayEquals(expected(r), res.result().outputTokens());
    int[] streamed = x.streamedTokens(tag);
    assertArrayEquals(expected(r), streamed, "10 pieces of 4, the last just before the answer");
    assertEquals(1, c.node("n0").stats().servedForPeers() + c.node("n1").stats().servedForPeers());
  }

  /**
   * Makes node {@code nodeId} of the cluster a node from before streaming (and scopes), which
   * rejects every FORWARD above version 1, counting its rejections in {@code rejected}.
   */
  static void beforeStreaming(OracleCluster.Hooks h, String nodeId, AtomicInteger rejected) {
    h.transportWrap = t -> t.localAddress().nodeId().equals(nodeId)
        ? BeforeScopesTransport.wrap(t, () -> true, new BeforeScopesTransport.Observer() {
          @Override
          public void rejected() {
            rejected.incrementAndGet();
          }
        })
        : t;
  }

  @Test
  void aPeerFromBeforeStreamingServesTheRequestWithoutStreaming() {
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    AtomicInteger rejected = new AtomicInteger();
    beforeStreaming(h, "n1", rejected);
    OracleCluster c = new OracleCluster(2, forwarding(Duration.ZERO), 1, h)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    for (int i = 1; i <= 2; i++) {
      InferenceRequest r = generating("r" + i, i, 20);
      StreamRecorder rec = recorder(c, r);
      CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
      runUntilDone(c, f);
      InferenceResponse resp = f.join();
      assertEquals("n1", resp.servedBy(), "served by the old peer all the same");
      assertEquals(FallbackCause.NONE, resp.fallbackCause());
      assertEquals(1, resp.attempts());
      assertArrayEquals(expected(r), rec.tokens());
      assertEquals(1, rec.pieces.size(), "the whole output at the answer");
      assertTrue(rec.clean(), rec.toString());
    }
    assertEquals(1, rejected.get(), "asked to stream once, then remembered");
  }

  @Test
  void cancellingTheFutureCancelsTheRunOnTheEngine() {
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1).start();
    InferenceRequest r = generating("r1", 1, 100);
    StreamRecorder rec = recorder(c, r);
    CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
    c.sim.advanceBy(100 * MS);
    assertTrue(f.cancel(true));
    assertThrows(CancellationException.class, f::join);
    c.sim.runUntilIdle(1_000_000);
    assertEquals(1, c.engine("n0").stats().cancelled());
    assertEquals(0, c.engine("n0").stats().completed());
    assertEquals(1, c.node("n0").stats().failed());
    assertEquals(0, c.node("n0").stats().inFlight());
    assertEquals(0, rec.afterCompletion, rec.toString());
    // without a listener too
    CompletableFuture<InferenceResponse> g = c.node("n0").submit(generating("r2", 2, 100));
    c.sim.advanceBy(100 * MS);
    g.cancel(false);
    c.sim.runUntilIdle(1_000_000);
    assertEquals(2, c.engine("n0").stats().cancelled());
    assertTrue(g.isCancelled());
  }

  /**
   * A client that gives up by completing the future itself ({@code orTimeout} completes it
   * exceptionally with a {@code TimeoutException}; {@code completeOnTimeout} with a value)
   * abandons the request as a cancel does: its run on the engine does not go on to its end.
   */
  @Test
  void completingTheFutureFromOutsideAbandonsTheRequest() {
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1).start();
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(generating("r1", 1, 100));
    c.sim.advanceBy(100 * MS);
    // what orTimeout does when its time is up
    assertTrue(f.completeExceptionally(new java.util.concurrent.TimeoutException()));
    CompletableFuture<InferenceResponse> g = c.node("n0").submit(generating("r2", 2, 100));
    c.sim.advanceBy(100 * MS);
    // what completeOnTimeout does
    assertTrue(g.complete(null));
    c.sim.runUntilIdle(1_000_000);
    assertEquals(2, c.engine("n0").stats().cancelled());
    assertEquals(0, c.engine("n0").stats().completed());
    assertEquals(2, c.node("n0").stats().failed());
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  /**
   * The other ways {@code CompletableFuture} offers to complete a future from outside, which do
   * not go through {@code complete} or {@code completeExceptionally}: {@code obtrudeValue},
   * {@code obtrudeException} and {@code completeAsync}. Each abandons the request as a cancel
   * does (the future keeps the host's completion), and the request counts as failed, not as
   * answered by the engine's later result.
   */
  @Test
  void obtrudingOrCompletingTheFutureAsynchronouslyAbandonsTheRequest() {
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1).start();
    RouterNode n0 = c.node("n0");
    CompletableFuture<InferenceResponse> f = n0.submit(generating("r1", 1, 100));
    CompletableFuture<InferenceResponse> g = n0.submit(generating("r2", 2, 100));
    CompletableFuture<InferenceResponse> h = n0.submit(generating("r3", 3, 100));
    c.sim.advanceBy(100 * MS);
    f.obtrudeValue(null);
    IllegalStateException mine = new IllegalStateException("the host's own failure");
    g.obtrudeException(mine);
    h.completeAsync(() -> null, Runnable::run);
    c.sim.runUntilIdle(1_000_000);

    assertEquals(3, c.engine("n0").stats().cancelled(), "a run went on for an ended request");
    assertEquals(0, c.engine("n0").stats().completed());
    assertNull(f.join(), "the host's value was replaced");
    assertSame(mine, assertThrows(CompletionException.class, g::join).getCause());
    assertNull(h.join(), "the host's value was replaced");
    NodeStats s = n0.stats();
    assertEquals(0, s.servedLocally(), s.toString());
    assertEquals(3, s.failed(), s.toString());
    assertEquals(0, s.inFlight(), s.toString());
  }

  @Test
  void cancellingTheFutureOfAForwardedRequestCancelsItAtThePeer() {
    OracleCluster c = new OracleCluster(2, forwarding(Duration.ZERO), 1)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    InferenceRequest r = generating("r1", 1, 100);
    StreamRecorder rec = recorder(c, r);
    CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
    c.sim.advanceBy(100 * MS);
    assertTrue(rec.tokens().length > 0);
    f.cancel(true);
    c.sim.runUntilIdle(1_000_000);
    assertEquals(1, c.engine("n1").stats().cancelled(), "the CANCEL did not reach n1's engine");
    assertEquals(0, c.engine("n0").stats().requests(), "ran locally after the cancel");
    assertEquals(0, c.node("n0").stats().inFlight());
    assertEquals(0, c.node("n1").stats().inFlight());
    assertEquals(0, rec.afterCompletion, rec.toString());
  }

  @Test
  void aListenerThatThrowsAbandonsTheRequest() {
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1).start();
    AtomicInteger calls = new AtomicInteger();
    IllegalStateException boom = new IllegalStateException("client gone");
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(generating("r1", 1, 100),
        (t, s) -> {
          calls.incrementAndGet();
          throw boom;
        });
    runUntilDone(c, f);
    CompletionException e = assertThrows(CompletionException.class, f::join);
    RequestFailedException rf = assertInstanceOf(RequestFailedException.class, e.getCause());
    assertSame(boom, rf.getCause());
    c.sim.runUntilIdle(1_000_000);
    assertEquals(1, calls.get());
    assertEquals(1, c.engine("n0").stats().cancelled());
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  /**
   * An engine that does not stream gives the whole output with its result: the listener's only
   * call carries the answer. A listener that throws there fails the request as it would on an
   * earlier piece, and the request counts as failed, not served.
   */
  @Test
  void aListenerThatThrowsOnTheAnswersPieceFailsTheRequest() {
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.engineWrap = ForwardingEngine::new; // streams nothing: the output comes with the result
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1, h).start();
    AtomicInteger calls = new AtomicInteger();
    IllegalStateException boom = new IllegalStateException("client gone");
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(generating("r1", 1, 20),
        (t, s) -> {
          calls.incrementAndGet();
          throw boom;
        });
    runUntilDone(c, f);
    CompletionException e = assertThrows(CompletionException.class, f::join);
    RequestFailedException rf = assertInstanceOf(RequestFailedException.class, e.getCause());
    assertSame(boom, rf.getCause());
    c.sim.runUntilIdle(1_000_000);
    assertEquals(1, calls.get());
    assertEquals(1, c.node("n0").stats().failed());
    assertEquals(0, c.node("n0").stats().servedLocally());
    assertEquals(0, c.node("n0").stats().promptTokens());
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  /**
   * A response that cannot be built (its constructor throws): the client gets a
   * {@link RequestFailedException}, so the request is counted as failed, not as served, with or
   * without a listener.
   */
  @Test
  void aResponseThatCannotBeBuiltIsCountedAsFailed() {
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1).start();
    CompletableFuture<InferenceResponse> plain;
    CompletableFuture<InferenceResponse> streamed;
    try (org.mockito.MockedConstruction<InferenceResponse> m = org.mockito.Mockito
        .mockConstruction(InferenceResponse.class, (mock, context) -> {
          throw new IllegalStateException("no response");
        })) {
      plain = c.node("n0").submit(generating("r1", 1, 20));
      streamed = c.node("n0").submit(generating("r2", 2, 20), (t, s) -> { });
      runUntilDone(c, plain);
      runUntilDone(c, streamed);
      c.sim.runUntilIdle(1_000_000);
    }
    for (CompletableFuture<InferenceResponse> f : List.of(plain, streamed)) {
      CompletionException e = assertThrows(CompletionException.class, f::join);
      assertInstanceOf(RequestFailedException.class, e.getCause());
    }
    assertEquals(2, c.node("n0").stats().failed(), c.node("n0").stats().toString());
    assertEquals(0, c.node("n0").stats().servedLocally());
    assertEquals(0, c.node("n0").stats().promptTokens());
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  /**
   * A client that cancels its future on the answer's own piece (an engine that does not
   * stream): the client gets the cancellation, so the request is counted as failed (abandoned by
   * its caller), not as served, and its prompt is not counted as answered.
   */
  @Test
  void aClientThatCancelsOnTheAnswersPieceIsCountedAsFailed() {
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.engineWrap = ForwardingEngine::new; // streams nothing: the output comes with the result
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1, h).start();
    List<CompletableFuture<InferenceResponse>> mine = new ArrayList<>();
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(generating("r1", 1, 20),
        (t, s) -> mine.get(0).cancel(true));
    mine.add(f);
    runUntilDone(c, f);
    c.sim.runUntilIdle(1_000_000);
    assertTrue(f.isCancelled());
    assertEquals(1, c.node("n0").stats().failed(), c.node("n0").stats().toString());
    assertEquals(0, c.node("n0").stats().servedLocally());
    assertEquals(0, c.node("n0").stats().promptTokens());
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  /**
   * A listener that throws a checked exception without declaring it (as code in a language
   * without checked exceptions can): it escaped the delivery of the output, which then stayed
   * taken for ever, so the answer queued behind the piece was never given and the request never
   * ended. It is handled as any listener that throws: the request fails with it as cause.
   */
  @Test
  void aListenerThatThrowsACheckedExceptionAbandonsTheRequest() {
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1).start();
    assertEquals(1, failsWithTheListenersCheckedException(c, generating("r1", 1, 100)));
    assertEquals(1, c.engine("n0").stats().cancelled());
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  /**
   * The same on the answer's own piece (an engine that does not stream): the queued answer
   * behind it was never given; now the request fails, counted as failed, and ends.
   */
  @Test
  void aListenerThatThrowsACheckedExceptionOnTheAnswersPieceFailsTheRequest() {
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.engineWrap = ForwardingEngine::new; // streams nothing: the output comes with the result
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1, h).start();
    assertEquals(1, failsWithTheListenersCheckedException(c, generating("r1", 1, 20)));
    assertEquals(1, c.node("n0").stats().failed());
    assertEquals(0, c.node("n0").stats().inFlight());
  }

  /**
   * Submits {@code r} at n0 with a listener that throws an {@link java.io.IOException}
   * undeclared, checks that the request fails with it as cause, runs the cluster idle and
   * returns how often the listener was called.
   */
  private static int failsWithTheListenersCheckedException(OracleCluster c, InferenceRequest r) {
    AtomicInteger calls = new AtomicInteger();
    java.io.IOException boom = new java.io.IOException("client gone");
    CompletableFuture<InferenceResponse> f = c.node("n0").submit(r, (t, s) -> {
      calls.incrementAndGet();
      throw ThrowingCacheEventListener.<RuntimeException>undeclared(boom);
    });
    runUntilDone(c, f);
    assertTrue(f.isDone(), "the request was never answered");
    CompletionException e = assertThrows(CompletionException.class, f::join);
    RequestFailedException rf = assertInstanceOf(RequestFailedException.class, e.getCause());
    assertSame(boom, rf.getCause());
    c.sim.runUntilIdle(1_000_000);
    return calls.get();
  }

  /**
   * The serving peer's transport throws a checked exception undeclared on every STREAM it
   * sends: STREAM messages are best effort, so the request is answered by that peer all the
   * same. It used to get out of the peer's stream sender as if the output's sink had failed:
   * the peer abandoned the request and the entry node ran it again.
   */
  @Test
  void aServingPeerWhoseTransportThrowsACheckedExceptionOnStreamsStillAnswers() {
    AtomicInteger streams = new AtomicInteger();
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.transportWrap = t -> !t.localAddress().nodeId().equals("n1") ? t
        : new io.github.prefixrouter.testing.ForwardingTransport(t) {
          @Override
          public void send(PeerAddress to, byte[] payload) {
            if (payload.length > 0 && payload[0] == ForwardCodec.STREAM) {
              streams.incrementAndGet();
              throw ThrowingCacheEventListener.<RuntimeException>undeclared(
                  new java.io.IOException("connection reset"));
            }
            super.send(to, payload);
          }
        };
    OracleCluster c = new OracleCluster(2, forwarding(Duration.ZERO), 1, h)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    long warmed = c.engine("n0").stats().requests();
    InferenceRequest r = generating("r1", 1, 40);
    StreamRecorder rec = recorder(c, r);
    CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
    runUntilDone(c, f);
    InferenceResponse resp = f.join();
    assertEquals("n1", resp.servedBy());
    assertEquals(FallbackCause.NONE, resp.fallbackCause());
    assertArrayEquals(expected(r), resp.result().outputTokens());
    assertArrayEquals(expected(r), rec.tokens());
    assertTrue(rec.clean(), rec.toString());
    assertTrue(streams.get() > 1, "STREAM sends tried: " + streams.get());
    assertEquals(warmed, c.engine("n0").stats().requests(), "the request ran again on n0");
    c.sim.runUntilIdle(1_000_000);
    assertEquals(0, c.node("n1").stats().inFlight());
    assertEquals(0, c.node("n1").stats().failed());
  }

  @Test
  void streamMessagesOfNoCurrentAttemptAreIgnoredAndCounted() {
    OracleCluster c = new OracleCluster(2, forwarding(Duration.ZERO), 1)
        .rtt(Duration.ofMillis(1)).start();
    c.warm("n1", concat(PREFIX, prompt(9, 40)));
    FakePeer x = new FakePeer(c, "x");
    InferenceRequest r = generating("r1", 1, 40);
    StreamRecorder rec = recorder(c, r);
    CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
    c.sim.advanceBy(60 * MS);
    long tag = c.node("n0").streamTagOf("r1");
    int[] forged = {1, 2, 3};
    PeerAddress n0 = InMemoryNetwork.addressOf("n0");
    // the right tag from the wrong sender; another tag; another request id
    x.t.send(n0, ForwardCodec.stream("r1", tag, 0, forged, 0, ""));
    c.net.transport("n1-imposter").send(n0, ForwardCodec.stream("r1", tag ^ 1, 0, forged, 0, ""));
    x.t.send(n0, ForwardCodec.stream("r9", tag, 0, forged, 0, ""));
    // garbage in the forwarding range
    x.t.send(n0, new byte[] {ForwardCodec.STREAM, 1, 2, 'r'});
    runUntilDone(c, f);
    assertArrayEquals(expected(r), rec.tokens());
    assertTrue(rec.clean(), rec.toString());
    assertEquals(3, c.node("n0").strayStreamMessages());
    assertEquals(1, c.node("n0").malformedMessages());
    // a STREAM after the answer: no current attempt
    c.net.transport("n1-late").send(n0, ForwardCodec.stream("r1", tag, 0, forged, 0, ""));
    c.sim.runUntilIdle(1_000_000);
    assertEquals(4, c.node("n0").strayStreamMessages());
  }

  @Test
  void engineCallsAfterTheResultAreIgnored() {
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.engineWrap = e -> new InferenceEngine() {
      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest request) {
        return e.execute(request);
      }

      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest request,
          OutputListener listener) {
        CompletableFuture<EngineResult> f = e.execute(request, listener);
        // a contract violation: more output after the result
        return f.whenComplete((res, err) -> listener.onOutput(new int[] {7, 7}, "late"));
      }
    };
    OracleCluster c = new OracleCluster(1, RouterConfig.builder()
        .policy(RoutingPolicy.LOCAL_ONLY).build(), 1, h).start();
    InferenceRequest r = generating("r1", 1, 20);
    StreamRecorder rec = recorder(c, r);
    CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
    runUntilDone(c, f);
    c.sim.runUntilIdle(1_000_000);
    assertArrayEquals(expected(r), f.join().result().outputTokens());
    assertArrayEquals(expected(r), rec.tokens());
    assertTrue(rec.clean(), rec.toString());
    assertEquals("", rec.text.toString());
  }

  /**
   * An engine may end a piece's text with the first half of a UTF-16 surrogate pair (the
   * listener's contract allows it; the second half comes with the next piece): the STREAM
   * messages of a serving peer carry UTF-8, which cannot encode half a pair, so the half waits
   * for the next message there. The client gets the text itself, whole, and no divergence.
   */
  @Test
  void aPieceEndingInHalfASurrogatePairStreamsWholeFromThePeer() {
    for (Duration interval : new Duration[] {Duration.ZERO, Duration.ofMillis(7)}) {
      OracleCluster.Hooks h = new OracleCluster.Hooks();
      h.engineWrap = SplitPairs::new;
      OracleCluster c = new OracleCluster(2, forwarding(interval), 1, h)
          .rtt(Duration.ofMillis(1)).start();
      c.warm("n1", concat(PREFIX, prompt(9, 40)));
      InferenceRequest r = generating("r1", 1, 40);
      StreamRecorder rec = recorder(c, r);
      CompletableFuture<InferenceResponse> f = submit(c, "n0", r, rec);
      runUntilDone(c, f);
      InferenceResponse resp = f.join();
      assertTrue(resp.forwarded(), "interval " + interval);
      assertEquals(SplitPairs.text(40), resp.result().text(), "interval " + interval);
      assertEquals(SplitPairs.text(40), rec.text.toString(), "interval " + interval);
      assertTrue(rec.clean(), rec.toString());
      assertTrue(rec.pieces.size() > 1, rec.toString());
      assertEquals(0, c.node("n0").outputDivergences());
    }
  }

  /**
   * An engine whose text is one emoji (two UTF-16 chars) per token and whose pieces each end
   * in the middle of one: a piece of tokens {@code s..e} carries the text's chars up to
   * {@code 2e - 1}, and the result the whole text.
   */
  static final class SplitPairs extends ForwardingEngine {
    private final InferenceEngine engine;

    SplitPairs(InferenceEngine e) {
      super(e);
      this.engine = e;
    }

    static String text(int tokens) {
      return "\uD83D\uDE00".repeat(tokens);
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r, OutputListener l) {
      int[] given = new int[1];
      int[] chars = new int[1];
      return engine.execute(r, (tokens, text) -> {
        given[0] += tokens.length;
        int end = Math.max(chars[0], 2 * given[0] - 1);
        String piece = text(given[0]).substring(chars[0], end);
        chars[0] = end;
        l.onOutput(tokens, piece);
      }).thenApply(res -> new EngineResult(res.outputTokens(), text(res.outputTokens().length),
          res.promptTokens(), res.cachedPromptTokens(), res.prefillNanos(), res.decodeNanos()));
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      return execute(r, OutputListener.IGNORE);
    }
  }
}
