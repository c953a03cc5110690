package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.InMemoryNetwork;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * A duplicate FORWARD (same sender, origin, id and request) joins the execution running here;
 * when it asks for streaming with another tag than the one the execution streams to, the
 * output goes to its tag too, what was already sent being sent again first, so the stream its
 * sender assembles (pieces checked by tag and offsets) is whole. A scripted sender {@code p}
 * delivers the FORWARDs to a real node and reassembles each tag's stream as a sender does.
 */
class StreamedDuplicateTest {

  static final long MS = 1_000_000L;

  /** One node serving a scripted peer p, which records every STREAM it gets, by tag. */
  static final class Served {
    final OracleCluster c;
    final Transport p;
    final Map<Long, List<ForwardCodec.Stream>> byTag = new LinkedHashMap<>();

    Served() {
      this(RouterConfig.builder().policy(RoutingPolicy.LOCAL_ONLY).build());
    }

    Served(RouterConfig config) {
      this(new OracleCluster(1, config, 1).rtt(Duration.ofMillis(1)).start());
    }

    /** {@code c}, started, serves p's FORWARDs at n0. */
    Served(OracleCluster c) {
      this.c = c;
      this.p = c.net.transport("p");
      p.start(new Transport.InboundHandler() {
        @Override
        public void onMessage(PeerAddress from, byte[] payload) {
          if (decode(payload) instanceof ForwardCodec.Stream st) {
            byTag.computeIfAbsent(st.streamTag(), k -> new ArrayList<>()).add(st);
          }
        }

        @Override
        public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
          return CompletableFuture.completedFuture(new byte[0]);
        }
      });
    }

    /** p sends a FORWARD of {@code r}, asking for a stream with {@code tag} if not 0. */
    CompletableFuture<byte[]> forward(InferenceRequest r, long tag) {
      return p.request(InMemoryNetwork.addressOf("n0"),
          ForwardCodec.forward(r, "p", 1, tag != 0, tag), Duration.ofSeconds(60));
    }

    /**
     * The tokens of {@code tag}'s stream as a sender reassembles them (each piece in arrival
     * order must start within what it has: a gap is an error), and the count of pieces.
     */
    int[] assembled(long tag) {
      int[] have = new int[0];
      for (ForwardCodec.Stream st : byTag.getOrDefault(tag, List.of())) {
        assertTrue(st.tokenOffset() <= have.length,
            "tag " + tag + ": a piece at " + st.tokenOffset() + " after " + have.length);
        int end = st.tokenOffset() + st.tokens().length;
        assertArrayEquals(Arrays.copyOfRange(have, st.tokenOffset(), Math.min(end, have.length)),
            Arrays.copyOf(st.tokens(), Math.min(end, have.length) - st.tokenOffset()),
            "tag " + tag + ": a piece contradicts the stream");
        if (end > have.length) {
          int from = have.length;
          have = Arrays.copyOf(have, end);
          System.arraycopy(st.tokens(), from - st.tokenOffset(), have, from, end - from);
        }
      }
      return have;
    }

    void runUntilIdle() {
      c.sim.runUntilIdle(1_000_000);
    }
  }

  static ForwardCodec.Message decode(byte[] b) {
    try {
      return ForwardCodec.decode(b);
    } catch (MalformedMessageException e) {
      return null;
    }
  }

  static int[] answer(CompletableFuture<byte[]> f) {
    assertTrue(f.isDone(), "unanswered");
    ForwardCodec.Message m = decode(f.join());
    return assertInstanceOf(ForwardCodec.Result.class, m, String.valueOf(m)).result()
        .outputTokens();
  }

  static InferenceRequest generating(String id, long seed, int maxTokens) {
    return new InferenceRequest(id, prompt(seed, 64), GenerationParams.greedy(maxTokens));
  }

  @Test
  void aDuplicateWithAnotherTagGetsTheWholeStreamUnderItsTag() {
    Served s = new Served();
    InferenceRequest r = generating("r", 1, 200); // 5 ms a token: a second
    CompletableFuture<byte[]> first = s.forward(r, 11);
    s.c.sim.advanceBy(300 * MS);
    int before = s.assembled(11).length;
    assertTrue(before > 0, "nothing streamed before the duplicate");
    CompletableFuture<byte[]> again = s.forward(r, 22); // the sender sent it again
    s.c.sim.advanceBy(20 * MS);
    assertTrue(s.assembled(22).length >= before,
        "what was streamed before the duplicate was not sent again under its tag");
    s.runUntilIdle();

    int[] out = expected(r);
    assertArrayEquals(out, answer(first));
    assertArrayEquals(out, answer(again));
    assertEquals(1, s.c.engine("n0").stats().requests(), "the duplicate ran again");
    int[] second = s.assembled(22);
    assertTrue(second.length > before, "nothing generated after the duplicate was streamed");
    assertArrayEquals(Arrays.copyOf(out, second.length), second);
    int[] firstStream = s.assembled(11); // and the first tag's stream goes on, whole
    assertTrue(firstStream.length >= second.length, firstStream.length + " < " + second.length);
    assertArrayEquals(Arrays.copyOf(out, firstStream.length), firstStream);
  }

  @Test
  void twoStreamedSubmissionsOfOneRequestAreBothServedByThePeerThatRunsItOnce() {
    // a host submits the same request twice at n0 (same id and prompt), each with a listener;
    // both go to n1, warm for it, where the second joins the first. A forwarding timeout far
    // shorter than the generation: a streamed forward that gets no pieces times out for silence
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false)
        .forwardTimeout(Duration.ofMillis(100), Duration.ofMillis(300)).build();
    OracleCluster c = new OracleCluster(2, cfg, 1).rtt(Duration.ofMillis(1));
    int[] prefix = prompt(42, 480);
    c.warm("n1", OracleCluster.concat(prefix, prompt(1, 40)));
    c.start();
    InferenceRequest r = new InferenceRequest("r", OracleCluster.concat(prefix, prompt(2, 40)),
        GenerationParams.greedy(200)); // a second of decoding
    StreamRecorder l1 = new StreamRecorder(expected(r), c.sim::nanoTime);
    StreamRecorder l2 = new StreamRecorder(expected(r), c.sim::nanoTime);
    CompletableFuture<io.github.prefixrouter.InferenceResponse> f1 = c.node("n0").submit(r, l1);
    c.sim.advanceBy(200 * MS);
    CompletableFuture<io.github.prefixrouter.InferenceResponse> f2 = c.node("n0").submit(r, l2);
    l1.future = f1;
    l2.future = f2;
    c.runUntilDone(f1);
    c.runUntilDone(f2);
    assertEquals("n1", f1.join().servedBy(), f1.join().toString());
    assertEquals("n1", f2.join().servedBy(), f2.join().toString());
    assertArrayEquals(expected(r), l1.tokens());
    assertArrayEquals(expected(r), l2.tokens());
    assertTrue(l1.clean() && l2.clean(), l1 + " / " + l2);
    assertEquals(0, c.engine("n0").stats().requests(), "n0 ran it itself");
    assertEquals(2, c.engine("n1").stats().requests(), "n1 ran it twice"); // the warm-up and r
  }

  @Test
  void theStreamGoesToTheFourNewestTagsAtMost() {
    Served s = new Served();
    InferenceRequest r = generating("r", 2, 200);
    List<CompletableFuture<byte[]>> answers = new ArrayList<>();
    answers.add(s.forward(r, 1));
    s.c.sim.advanceBy(100 * MS);
    for (long tag = 2; tag <= 6; tag++) {
      answers.add(s.forward(r, tag));
      s.c.sim.advanceBy(20 * MS);
    }
    Map<Long, Integer> atLastJoin = new LinkedHashMap<>();
    for (long tag = 1; tag <= 6; tag++) {
      atLastJoin.put(tag, s.byTag.getOrDefault(tag, List.of()).size());
    }
    s.runUntilIdle();
    int[] out = expected(r);
    for (CompletableFuture<byte[]> a : answers) {
      assertArrayEquals(out, answer(a));
    }
    assertEquals(1, s.c.engine("n0").stats().requests());
    for (long tag = 1; tag <= 2; tag++) {
      assertEquals(atLastJoin.get(tag), s.byTag.getOrDefault(tag, List.of()).size(),
          "tag " + tag + " dropped for newer ones still got pieces");
    }
    for (long tag = 3; tag <= 6; tag++) {
      int[] got = s.assembled(tag);
      assertTrue(got.length > 0, "tag " + tag + " got nothing");
      assertArrayEquals(Arrays.copyOf(out, got.length), got);
    }
  }

  @Test
  void aDuplicateWithTheSameTagIsNotSentTheStreamAgain() {
    Served s = new Served();
    InferenceRequest r = generating("r", 3, 100);
    CompletableFuture<byte[]> first = s.forward(r, 7);
    s.c.sim.advanceBy(200 * MS);
    CompletableFuture<byte[]> again = s.forward(r, 7); // the same FORWARD delivered twice
    s.runUntilIdle();
    assertArrayEquals(expected(r), answer(first));
    assertArrayEquals(expected(r), answer(again));
    int offset = -1;
    for (ForwardCodec.Stream st : s.byTag.get(7L)) {
      assertTrue(st.tokenOffset() > offset, "a piece sent twice: " + s.byTag.get(7L));
      offset = st.tokenOffset();
    }
  }

  @Test
  void aDuplicateWithoutStreamingJoinsAStreamedRunAndGetsTheAnswer() {
    Served s = new Served();
    InferenceRequest r = generating("r", 4, 100);
    CompletableFuture<byte[]> streamed = s.forward(r, 5);
    s.c.sim.advanceBy(200 * MS);
    CompletableFuture<byte[]> plain = s.forward(r, 0);
    s.runUntilIdle();
    int[] out = expected(r);
    assertArrayEquals(out, answer(streamed));
    assertArrayEquals(out, answer(plain));
    assertEquals(1, s.c.engine("n0").stats().requests());
    assertEquals(List.of(5L), List.copyOf(s.byTag.keySet()));
    int[] got = s.assembled(5);
    assertArrayEquals(Arrays.copyOf(out, got.length), got);
  }

  // ------------------------------------------------- a streamed duplicate of a run not streamed

  @Test
  void aStreamedDuplicateOfARunWithoutStreamingGetsItsOutputSoFarThenTheRest() {
    // the first FORWARD asked for no stream; the engine watch (on by default) gives the run a
    // listener anyway, and the output so far is held for a duplicate that asks for one
    Served s = new Served();
    InferenceRequest r = generating("r", 5, 200); // 5 ms a token: a second
    CompletableFuture<byte[]> plain = s.forward(r, 0);
    s.c.sim.advanceBy(300 * MS); // about 55 tokens generated
    assertTrue(s.byTag.isEmpty(), "pieces streamed before anyone asked: " + s.byTag.keySet());
    CompletableFuture<byte[]> streamed = s.forward(r, 9);
    s.c.sim.advanceBy(5 * MS); // the trip, and less than a token more
    int atJoin = s.assembled(9).length;
    assertTrue(atJoin >= 40, "the output so far was not sent at once: " + atJoin + " tokens");
    assertEquals(0, s.byTag.get(9L).get(0).tokenOffset(), "the stream does not start at 0");
    s.runUntilIdle();

    int[] out = expected(r);
    assertArrayEquals(out, answer(plain));
    assertArrayEquals(out, answer(streamed));
    assertEquals(1, s.c.engine("n0").stats().requests(), "the streamed duplicate ran again");
    assertEquals(List.of(9L), List.copyOf(s.byTag.keySet()));
    int[] got = s.assembled(9); // whole from 0, no gap (assembled checks)
    assertTrue(got.length > atJoin + 100, "the pieces generated after the join were not streamed:"
        + " " + atJoin + " then " + got.length + " of " + out.length + " tokens");
    assertArrayEquals(Arrays.copyOf(out, got.length), got);
    assertEquals(0, s.c.node("n0").stats().inFlight());
  }

  @Test
  void twoStreamedDuplicatesOfARunWithoutStreamingEachGetTheWholeStream() {
    // the first streamed duplicate attaches a stream; the second joins it as a tag
    Served s = new Served();
    InferenceRequest r = generating("r", 6, 200);
    CompletableFuture<byte[]> plain = s.forward(r, 0);
    s.c.sim.advanceBy(200 * MS);
    CompletableFuture<byte[]> a = s.forward(r, 31);
    s.c.sim.advanceBy(200 * MS);
    CompletableFuture<byte[]> b = s.forward(r, 32);
    s.c.sim.advanceBy(5 * MS);
    int bAtJoin = s.assembled(32).length;
    assertTrue(bAtJoin >= s.assembled(31).length - 8,
        "the second duplicate did not get the stream so far: " + bAtJoin);
    s.runUntilIdle();
    int[] out = expected(r);
    for (CompletableFuture<byte[]> f : List.of(plain, a, b)) {
      assertArrayEquals(out, answer(f));
    }
    assertEquals(1, s.c.engine("n0").stats().requests());
    for (long tag : new long[] {31, 32}) {
      int[] got = s.assembled(tag);
      assertTrue(got.length > bAtJoin, "tag " + tag + ": " + got.length + " tokens");
      assertArrayEquals(Arrays.copyOf(out, got.length), got);
    }
  }

  @Test
  void withTheEngineWatchOffAStreamedDuplicateOfARunWithoutStreamingGetsTheAnswerOnly() {
    // nobody streams the first run and nothing watches the engine: it runs as execute(request),
    // as before streaming existed, and gives no pieces; the duplicate gets the RESULT, once
    List<Boolean> listened = new ArrayList<>();
    OracleCluster.Hooks h = new OracleCluster.Hooks();
    h.engineWrap = e -> new ForwardingEngine(e) {
      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest request) {
        listened.add(false);
        return delegate.execute(request);
      }

      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest request,
          OutputListener listener) {
        listened.add(true);
        return delegate.execute(request, listener);
      }
    };
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LOCAL_ONLY)
        .engineStallTimeout(Duration.ZERO).build();
    Served s = new Served(new OracleCluster(1, cfg, 1, h).rtt(Duration.ofMillis(1)).start());
    InferenceRequest r = generating("r", 5, 100);
    CompletableFuture<byte[]> plain = s.forward(r, 0);
    s.c.sim.advanceBy(200 * MS);
    CompletableFuture<byte[]> streamed = s.forward(r, 9);
    s.runUntilIdle();
    int[] out = expected(r);
    assertArrayEquals(out, answer(plain));
    assertArrayEquals(out, answer(streamed));
    assertEquals(List.of(false), listened, "the run was not execute(request) alone");
    assertTrue(s.byTag.isEmpty(), "pieces of a run that streams nothing: " + s.byTag.keySet());
  }

  @Test
  void aStreamedDuplicateOfARelayedForwardWithoutStreamingIsStreamedByTheFallback() {
    // n0 relays p's request (hop limit 2) to n1, warm for it, without streaming; a streamed
    // duplicate joins; n1 crashes, the forward times out and n0 runs the request itself: that
    // run streams to the duplicate's tag, from the start
    int[] prefix = prompt(42, 480);
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).hopLimit(2)
        .forwardTimeout(Duration.ofMillis(100), Duration.ofMillis(300)).build();
    OracleCluster c = new OracleCluster(2, cfg, 1).rtt(Duration.ofMillis(1));
    c.warm("n1", OracleCluster.concat(prefix, prompt(1, 40)));
    Served s = new Served(c.start());
    InferenceRequest r = new InferenceRequest("r", OracleCluster.concat(prefix, prompt(2, 40)),
        GenerationParams.greedy(100));
    CompletableFuture<byte[]> plain = s.forward(r, 0);
    s.c.sim.advanceBy(50 * MS);
    CompletableFuture<byte[]> streamed = s.forward(r, 9);
    s.c.sim.advanceBy(5 * MS);
    assertTrue(s.byTag.isEmpty(), "pieces of a forward not streamed: " + s.byTag.keySet());
    s.c.crash("n1");
    s.runUntilIdle();
    int[] out = expected(r);
    assertArrayEquals(out, answer(plain));
    assertArrayEquals(out, answer(streamed));
    assertEquals(2, s.c.engine("n1").stats().requests(), "not relayed to n1"); // and the warm-up
    assertEquals(1, s.c.engine("n0").stats().requests(), "n0 did not run it once");
    int[] got = s.assembled(9);
    assertTrue(got.length > 0, "the fallback run streamed nothing to the duplicate");
    assertArrayEquals(Arrays.copyOf(out, got.length), got);
  }
}
