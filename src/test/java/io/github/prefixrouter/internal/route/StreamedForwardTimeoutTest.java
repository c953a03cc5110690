package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.concat;
import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.ForwardingTransport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The forwarding timeout of a streamed forward, on simulated time: once its first piece has
 * arrived it counts from the latest piece, so a peer slower than predicted but still generating
 * is not given up on mid-stream; a peer that goes silent is, one timeout after its last piece;
 * and every streamed forward ends within {@code engineTimeout} plus twice the round trip.
 *
 * <p>The setting: two nodes, 1 ms one way. n0's engine decodes at 5 ms/token and n0 learns that
 * from two runs of its own, so a 200-token generation is expected to take about 1 s and its
 * forwarding timeout is about 4 s. n1 holds the prompt's prefix, and its engine decodes at
 * 80 ms/token: 16 s for 200 tokens, four times that timeout.
 */
class StreamedForwardTimeoutTest {

  static final int[] PREFIX = prompt(42, 480);
  static final long MS = 1_000_000L;
  static final long SLOW_DECODE = 80 * MS;

  /** The cluster, with the time of every CANCEL n0 sends. */
  static final class Setup {
    OracleCluster c;
    final List<Long> cancels = new CopyOnWriteArrayList<>();
    /** The futures n0's transport returned for its forwards, in order. */
    final List<CompletableFuture<byte[]>> forwards = new CopyOnWriteArrayList<>();
    /** n1's engine (as its node sees it), when wrapped. */
    Silent silent;
  }

  /** n1's engine, which stops giving output after {@code after} tokens when that is set. */
  static final class Silent extends ForwardingEngine {
    volatile int after = Integer.MAX_VALUE;
    final List<String> cancelled = new CopyOnWriteArrayList<>();

    Silent(InferenceEngine e) {
      super(e);
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r, OutputListener listener) {
      int limit = after;
      if (limit == Integer.MAX_VALUE) {
        return delegate.execute(r, listener);
      }
      AtomicInteger given = new AtomicInteger();
      delegate.execute(r, (tokens, text) -> {
        if (given.get() + tokens.length <= limit) {
          given.addAndGet(tokens.length);
          listener.onOutput(tokens, text);
        } else {
          given.set(Integer.MAX_VALUE / 2); // silent from here on
        }
      });
      return new CompletableFuture<>(); // and no answer either
    }

    @Override
    public void cancel(String requestId) {
      cancelled.add(requestId);
      super.cancel(requestId);
    }
  }

  static Setup setup(RouterConfig.Builder cfg, java.util.function.UnaryOperator<Transport> n1) {
    Setup s = new Setup();
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    AtomicInteger built = new AtomicInteger();
    hooks.engineTweak = b -> b.decodeNanosPerToken(
        built.getAndIncrement() == 1 ? SLOW_DECODE : 5 * MS);
    AtomicInteger wrapped = new AtomicInteger();
    hooks.engineWrap = e -> {
      if (wrapped.getAndIncrement() != 1) {
        return e;
      }
      s.silent = new Silent(e);
      return s.silent;
    };
    hooks.transportWrap = t -> {
      if (t.localAddress().nodeId().equals("n1")) {
        return n1.apply(t);
      }
      return new ForwardingTransport(t) {
        @Override
        public void send(PeerAddress to, byte[] payload) {
          if (payload.length > 0 && payload[0] == ForwardCodec.CANCEL) {
            s.cancels.add(s.c.sim.nanoTime());
          }
          super.send(to, payload);
        }

        @Override
        public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
            Duration timeout) {
          CompletableFuture<byte[]> f = super.request(to, payload, timeout);
          s.forwards.add(f);
          return f;
        }
      };
    };
    s.c = new OracleCluster(2, cfg.policy(RoutingPolicy.LONGEST_PREFIX).coldPlacement(false)
        .build(), 1, hooks).rtt(Duration.ofMillis(1)).start();
    s.c.warm("n1", concat(PREFIX, prompt(1, 40)));
    ForwardTimeoutTest.runLocally(s.c, 2, 200);
    return s;
  }

  static Setup setup() {
    return setup(RouterConfig.builder(), t -> t);
  }

  static InferenceRequest request(int maxTokens) {
    return new InferenceRequest("q", concat(PREFIX, prompt(9, 64)),
        GenerationParams.greedy(maxTokens));
  }

  static StreamRecorder recorder(Setup s, InferenceRequest r) {
    return new StreamRecorder(expected(r), s.c.sim::nanoTime);
  }

  static InferenceResponse streamAndWait(Setup s, InferenceRequest r, StreamRecorder rec) {
    CompletableFuture<InferenceResponse> f = s.c.node("n0").submit(r, rec);
    rec.future = f;
    StreamingTest.runUntilDone(s.c, f);
    return f.join();
  }

  /** The tokens the client had received before {@code time}, and when the last came. */
  static long[] receivedBefore(StreamRecorder rec, long time) {
    long tokens = 0;
    long last = -1;
    for (int i = 0; i < rec.times.size(); i++) {
      if (rec.times.get(i) < time) {
        tokens += rec.pieces.get(i).length;
        last = rec.times.get(i);
      }
    }
    return new long[] {tokens, last};
  }

  @Test
  void aPeerStreamingSlowlyButSteadilyIsNotTimedOut() {
    // old code: the forward timed out about 4 s after it was sent, with 48 of the 200 tokens
    // streamed; n0 sent a CANCEL and ran the request again from the start (prefill and all)
    Setup s = setup();
    long runs0 = s.c.engine("n0").stats().requests();
    InferenceRequest q = request(200);
    StreamRecorder rec = recorder(s, q);
    long t0 = s.c.sim.nanoTime();
    InferenceResponse resp = streamAndWait(s, q, rec);
    double seconds = (s.c.sim.nanoTime() - t0) / 1e9;
    assertEquals(FallbackCause.NONE, resp.fallbackCause(), "fell back after " + seconds + " s");
    assertEquals("n1", resp.servedBy());
    assertEquals(1, resp.attempts());
    assertArrayEquals(expected(q), resp.result().outputTokens());
    assertArrayEquals(expected(q), rec.tokens());
    assertTrue(rec.clean(), rec.toString());
    assertTrue(rec.pieces.size() >= 40, "the output flowed: " + rec);
    // 200 tokens at 80 ms: 16 s, four times the forwarding timeout
    assertTrue(seconds >= 16 && seconds < 16.5, "took " + seconds + " s");
    assertEquals(runs0, s.c.engine("n0").stats().requests(), "the request ran at n0 too");
    assertEquals(List.of(), s.cancels, "CANCELs sent");
    assertEquals(List.of(), s.silent.cancelled, "cancelled at n1");
    assertEquals(0, s.c.node("n0").stats().fallbacks().get(FallbackCause.TIMEOUT));
  }

  @Test
  void aPeerThatFallsSilentMidStreamTimesOutOneTimeoutAfterItsLastPiece() {
    // n1 streams 120 tokens (about 9.6 s), then neither streams nor answers. Old code: the
    // forward timed out about 4 s after it was sent, with 48 tokens streamed
    Setup s = setup();
    s.silent.after = 120;
    InferenceRequest q = request(200);
    StreamRecorder rec = recorder(s, q);
    long t0 = s.c.sim.nanoTime();
    InferenceResponse resp = streamAndWait(s, q, rec);
    assertEquals(FallbackCause.TIMEOUT, resp.fallbackCause());
    assertEquals("n0", resp.servedBy());
    assertEquals(2, resp.attempts());
    assertEquals(1, s.c.node("n0").stats().fallbacks().get(FallbackCause.TIMEOUT));
    // the client's stream went on from where n1 stopped: no repeat, no gap
    assertArrayEquals(expected(q), resp.result().outputTokens());
    assertArrayEquals(expected(q), rec.tokens());
    assertTrue(rec.clean(), rec.toString());
    // given up one forwarding timeout (about 4 s) after n1's last piece, not after the send
    assertEquals(1, s.cancels.size(), "CANCELs sent: " + s.cancels);
    long cancelAt = s.cancels.get(0);
    long[] before = receivedBefore(rec, cancelAt);
    assertEquals(120, before[0], "tokens streamed by n1 before the timeout");
    double silence = (cancelAt - before[1]) / 1e9;
    assertTrue(silence >= 4.0 && silence < 4.3, "timed out after " + silence + " s of silence"
        + " (" + (cancelAt - t0) / 1e9 + " s after the send)");
    // the CANCEL reached n1, whose node cancelled the run on its engine
    assertEquals(List.of("q"), s.silent.cancelled);
  }

  @Test
  void aForwardGivenUpForSilenceIsNoLongerAwaitedFromAPeerThatNeverAnswers() {
    // n1 streams 120 tokens and hangs: it neither streams, nor answers, nor hears the CANCEL.
    // The transport waits a streamed forward's overall bound (engineTimeout, 10 min), so the
    // forward the node gave up for silence must be let go of too: over HTTP it holds a request
    // and one of the peer's in-flight slots
    Setup s = setup(RouterConfig.builder(), t -> new ForwardingTransport(t) {
      @Override
      public void start(InboundHandler handler) {
        super.start(new InboundHandler() {
          @Override
          public void onMessage(PeerAddress from, byte[] payload) {
            if (payload.length == 0 || payload[0] != ForwardCodec.CANCEL) {
              handler.onMessage(from, payload);
            }
          }

          @Override
          public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
            return handler.onRequest(from, payload);
          }
        });
      }
    });
    s.silent.after = 120;
    InferenceRequest q = request(200);
    StreamRecorder rec = recorder(s, q);
    InferenceResponse resp = streamAndWait(s, q, rec);
    assertEquals(FallbackCause.TIMEOUT, resp.fallbackCause());
    assertEquals("n0", resp.servedBy());
    assertArrayEquals(expected(q), rec.tokens());
    assertEquals(List.of(), s.silent.cancelled, "n1 heard the CANCEL");
    assertEquals(1, s.forwards.size());
    assertTrue(s.forwards.get(0).isDone(), "the given-up forward is still awaited");
  }

  @Test
  void aForwardWithoutStreamingStillTimesOutAtItsComputedTimeout() {
    // unchanged: without a listener nothing is streamed, and the timeout counts from the send
    Setup s = setup();
    InferenceRequest q = request(200);
    long t0 = s.c.sim.nanoTime();
    InferenceResponse resp = s.c.submitAndWait("n0", q);
    assertEquals(FallbackCause.TIMEOUT, resp.fallbackCause());
    assertEquals("n0", resp.servedBy());
    assertEquals(2, resp.attempts());
    assertArrayEquals(expected(q), resp.result().outputTokens());
    assertEquals(1, s.cancels.size(), "CANCELs sent: " + s.cancels);
    double after = (s.cancels.get(0) - t0) / 1e9;
    assertTrue(after >= 4.0 && after < 4.3, "timed out after " + after + " s");
    s.c.sim.runUntilIdle(1_000_000);
    assertEquals(List.of("q"), s.silent.cancelled);
  }

  @Test
  void aPeerThatStreamsForeverIsGivenUpAtTheEngineTimeoutPlusTwoRoundTrips() {
    // n1 is replaced by a peer that streams one token every 100 ms of a 2,000-token output
    // (200 s) and never answers; the engine timeout is 60 s, the forwarding timeout of 2,000
    // tokens about 40 s. Old code: given up 40 s after the send, while it was streaming
    List<Long> streamed = new ArrayList<>();
    List<Long> cancelledAt = new ArrayList<>();
    Setup[] box = new Setup[1];
    Setup s = setup(RouterConfig.builder().engineTimeout(Duration.ofSeconds(60)),
        t -> new ForwardingTransport(t) {
          @Override
          public void start(InboundHandler handler) {
            super.start(new InboundHandler() {
              @Override
              public void onMessage(PeerAddress from, byte[] payload) {
                if (payload.length > 0 && payload[0] == ForwardCodec.CANCEL) {
                  cancelledAt.add(box[0].c.sim.nanoTime());
                }
                handler.onMessage(from, payload);
              }

              @Override
              public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
                ForwardCodec.Message m;
                try {
                  m = ForwardCodec.decode(payload);
                } catch (Exception e) {
                  throw new AssertionError(e);
                }
                if (!(m instanceof ForwardCodec.Forward fw) || !fw.stream()) {
                  return handler.onRequest(from, payload);
                }
                int[] out = expected(fw.request());
                streamForever(box[0], from, fw, out, 0, streamed, cancelledAt);
                return new CompletableFuture<>();
              }
            });
          }
        });
    box[0] = s;
    InferenceRequest q = request(2_000);
    StreamRecorder rec = recorder(s, q);
    long t0 = s.c.sim.nanoTime();
    InferenceResponse resp = streamAndWait(s, q, rec);
    assertEquals(FallbackCause.TIMEOUT, resp.fallbackCause());
    assertEquals("n0", resp.servedBy());
    assertEquals(2, resp.attempts());
    assertArrayEquals(expected(q), rec.tokens());
    assertTrue(rec.clean(), rec.toString());
    assertEquals(1, s.cancels.size(), "CANCELs sent: " + s.cancels);
    double after = (s.cancels.get(0) - t0) / 1e9;
    // 60 s + 2 x 2 ms, the round trip the routing used
    assertTrue(after >= 60.004 && after < 60.01, "given up after " + after + " s");
    assertTrue(streamed.size() >= 595, "it was streaming all along: " + streamed.size());
    assertEquals(1, cancelledAt.size(), "the CANCEL reached the peer");
  }

  /** Sends token {@code i} of {@code out} to {@code to}, and the next 100 ms later. */
  static void streamForever(Setup s, PeerAddress to, ForwardCodec.Forward fw, int[] out, int i,
      List<Long> streamed, List<Long> cancelledAt) {
    if (i >= out.length || !cancelledAt.isEmpty()) {
      return;
    }
    s.c.transports.get("n1").send(to, ForwardCodec.stream(fw.requestId(), fw.streamTag(), i,
        new int[] {out[i]}, 0, ""));
    streamed.add(s.c.sim.nanoTime());
    s.c.sim.schedule(100 * MS, () -> streamForever(s, to, fw, out, i + 1, streamed,
        cancelledAt));
  }
}
