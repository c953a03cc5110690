package io.github.prefixrouter.contract;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The {@link InferenceEngine} contract, as a test kit any engine adapter can run.
 *
 * <p>Extend it in your test tree and supply {@link #createEngine()} (a fresh engine with an empty
 * cache). Engines in simulated time override {@link #awaitCondition(BooleanSupplier, Duration)}
 * to advance their clock; engines that can be told to fail override
 * {@link #failNextRequest(InferenceEngine)}. Depend on the {@code tests} classifier of
 * {@code prefix-router}. The kit does not close the engines it asks for ({@link InferenceEngine}
 * has no {@code close}): an engine with threads or connections of its own is closed by the
 * subclass, which keeps the engines {@link #createEngine()} made and closes them in an
 * {@code @AfterEach} of its own. ({@code TransportContractTest} closes its transports itself.)
 *
 * <p>Checked: {@code execute} returns without blocking, within {@link #EXECUTE_BOUND} also while
 * the engine has more requests than it runs at once (one call over it forgiven), and its future
 * completes exactly once, also for identical requests in flight at once, for requests of one
 * id in flight at once and for requests executed from several threads at once (each with its
 * own output);
 * results are well formed (prompt tokens, cached tokens within bounds, 1..maxTokens outputs);
 * for {@code maxTokens} 1, 5 and 37, plain and streamed, no result and no stream has more than
 * {@code maxTokens} token ids, an output cut short without a stop ends at a token found in no
 * output but as its last (the engine's end of sequence), and a stop token id the output never
 * reaches does not shorten it;
 * the same request gives the same output, also when sampled, on two engines; {@code load()} is
 * cheap and sane, reports the requests waiting for a slot as queued (unless the engine's test
 * declares it keeps no queue, {@link #reportsQueuedRequests()}), and is back to no load once
 * every request ended (completed, cancelled or failed); a stop token id ends the output, as its last token, streamed or not; a stop string
 * ends the output of an engine that gives text, its text just before the stop string or with
 * it, streamed or not (skipped for an engine whose results have no text); cancelling an
 * unknown request is harmless, and so is cancelling one that ended (its future keeps its
 * result), whose id a later request may use again; a cancelled request's future still
 * completes and cancelling one request leaves the others alone (each completes normally, with
 * the output a second engine gives its prompt); failures surface as
 * {@link EngineException}; a cache event listener that throws (an exception, an
 * {@link Error} or a checked exception undeclared, {@link ThrowingCacheEventListener}) breaks neither the requests (each completes
 * normally, with the output it has without the listener) nor the cache (a repeated prompt still
 * hits) nor later events (the engine goes on calling it); for an engine whose test declares its
 * cache's capacity ({@link #cacheCapacityTokens()}), filling the cache beyond it makes the
 * engine report removals of blocks it reported stored, so that the blocks its events leave
 * cached fit in that capacity; engines that
 * publish cache events announce the blocks of a prompt they ran, and report a cache hit when the
 * same prompt runs again, and their stores chain (each continues a block still cached or starts
 * a prompt, a hash names one block, blocks are of one size, and every chain spells the start of
 * a prompt and output the engine ran: what the node's tree needs to mirror the cache); a request of another cache scope (by default a cache salt, see
 * {@link #scopeForTests()}) is served, does not hit the prefix the default scope cached, hits
 * its own when repeated, and (for engines whose events name scopes) has its chain's first blocks
 * reported under its scope.
 *
 * <p>Streaming ({@link InferenceEngine#execute(InferenceRequest, OutputListener)}), checked for
 * any engine, whether it streams all of its output, part of it or nothing (the interface's
 * default): no piece is null; the tokens and texts of the pieces, concatenated, are a prefix of
 * the result's output tokens and text (equal to them for an engine that declares so with
 * {@link #streamsWholeOutput()}); calls come one at a time, also when several requests stream
 * at once, and never after the request's future completes, nor after a cancelled request's
 * future completes; {@code execute(request)}, {@code execute(request, OutputListener.IGNORE)}
 * and {@code execute(request, listener)} give the same output, sampled too. A listener that
 * throws (an exception, an {@link Error}, or a checked exception it does not declare) must not
 * break the request: the engine calls it
 * no more (it may log the failure) and the request runs on, its future completing once,
 * normally, with the output it would have had without streaming.
 */
public abstract class InferenceEngineContractTest {

  /** A fresh engine with an empty cache. */
  protected abstract InferenceEngine createEngine();

  /** Longest any request may take in these tests. */
  protected Duration patience() {
    return Duration.ofSeconds(60);
  }

  /** Vocabulary the sample prompts draw from (ids in {@code [0, vocabulary)}). */
  protected int vocabulary() {
    return 1000;
  }

  /** Prompt length of the sample prompts: a few blocks of any usual block size. */
  protected int promptTokens() {
    return 96;
  }

  /**
   * Makes the engine fail its next request, if it can be told to.
   *
   * @return false if the engine has no such hook (the failure test is then skipped)
   */
  protected boolean failNextRequest(InferenceEngine engine) {
    return false;
  }

  /**
   * Waits until {@code condition} holds or {@code max} elapses, returning the condition's final
   * value. The default polls in real time; simulated engines advance their clock instead.
   */
  protected boolean awaitCondition(BooleanSupplier condition, Duration max) {
    return RealTimeWait.await(condition, max);
  }

  /**
   * The cache scope of the scoped-request check: by default a cache salt, which any engine
   * accepts (an adapter must be one the engine serves; override to test one).
   */
  protected CacheScope scopeForTests() {
    return CacheScope.salt("contract-tenant-1");
  }

  /**
   * Whether the engine's cache events name the scope of a chain's first blocks (vLLM's events
   * name the adapter but not the cache salt: override to false for such an engine).
   */
  protected boolean cacheEventsNameTheScope() {
    return true;
  }

  /**
   * Whether the engine streams its whole output: its pieces then make up exactly the result's
   * output tokens and text, not only a prefix of them. Override to true for such an engine.
   */
  protected boolean streamsWholeOutput() {
    return false;
  }

  /**
   * Whether the engine keeps a queue of its own: it runs at most some number of requests at once
   * (fewer than 48), and {@code load()} reports those waiting for a slot as {@code queueDepth}.
   * The node's push-back looks at the queue alone (it refuses its peers' forwards at its high
   * watermark, and its gossip advertises overload from it), so an engine that queues requests
   * but reports them as running, or not at all, is never pushed back for. Override to false for
   * an engine that hands every request on at once and so has no queue to report (an HTTP
   * adapter with no limit of its own), or that runs 48 requests at once: the queue check is then
   * skipped.
   *
   * @return true (the default) if the engine queues requests beyond those it runs at once
   */
  protected boolean reportsQueuedRequests() {
    return true;
  }

  /**
   * The engine's prefix-cache capacity in tokens, if the test knows it: the most tokens of full
   * blocks it holds at once. With it, and when the engine publishes cache events, the kit fills
   * the cache beyond it with {@code capacity / blockSize / (promptTokens() / blockSize) + 3}
   * distinct prompts (and twice as many tokens' worth in the throwing-listener check) and checks
   * the removals the engine reports: declare it for an engine configured with a small cache.
   *
   * @return the capacity in tokens, or -1 (the default) when unknown: the eviction check is then
   *     skipped
   */
  protected long cacheCapacityTokens() {
    return -1;
  }

  /**
   * The longest one {@code execute} call may take while the engine is busy, once the engine has
   * answered a first request (so that the one-time costs of a fresh engine, an HTTP client's
   * start say, are not counted); {@link #executeReturnsAtOnceWhileTheEngineIsBusy} forgives one
   * call over it. A call that does its bookkeeping and hands the request on usually takes well
   * under a millisecond, but the first call of a code path loads classes, and a thread can lose
   * the processor or wait for a garbage collection. Measured on a 2-core machine with the test
   * JVM pinned to one core, the slowest of 48 calls took 0.2 ms on {@code SimulatedEngine} and
   * 20 to 180 ms on {@code ReferenceEngine} and {@code OpenAiCompatibleEngine}; with two busy
   * loops sharing that core (a CI machine running other jobs), up to 650 ms. One second leaves
   * room for that. An {@code execute} that waits for the engine (for a free slot, for room in a
   * queue, for a result) waits longer than that whenever the work ahead of it does, and
   * endlessly on an engine in simulated time, whose clock does not move while the test's thread
   * is in {@code execute}.
   */
  protected static final Duration EXECUTE_BOUND = Duration.ofSeconds(1);

  /**
   * The bound on an {@code execute} call of the other checks, which includes a first call's
   * one-time costs: they guard against a call that never returns.
   */
  private static final Duration FIRST_CALL_BOUND = Duration.ofSeconds(5);

  /** A deterministic sample prompt. */
  protected int[] prompt(long seed) {
    int[] t = new int[promptTokens()];
    long x = seed * 0x9E3779B97F4A7C15L + 1;
    for (int i = 0; i < t.length; i++) {
      x ^= x << 13;
      x ^= x >>> 7;
      x ^= x << 17;
      t[i] = (int) Math.floorMod(x, (long) vocabulary());
    }
    return t;
  }

  private EngineResult run(InferenceEngine e, InferenceRequest r) {
    CompletableFuture<EngineResult> f = assertTimeoutPreemptively(FIRST_CALL_BOUND,
        () -> e.execute(r), "execute blocked the caller");
    assertNotNull(f, "execute returned null");
    assertTrue(awaitCondition(f::isDone, patience()), "request " + r.id() + " never completed");
    return f.join();
  }

  /**
   * Records what an engine streams to one request's listener, and each breach of the listener's
   * rules: a null piece, a call while another is running, a call after the future completed.
   */
  private static final class StreamRecorder implements OutputListener {
    private final AtomicReference<CompletableFuture<EngineResult>> future = new AtomicReference<>();
    private final AtomicInteger inside = new AtomicInteger();
    private final AtomicInteger calls = new AtomicInteger();
    private final AtomicInteger callsAtCompletion = new AtomicInteger(-1);
    private final List<String> breaches = java.util.Collections.synchronizedList(new ArrayList<>());
    private final java.io.ByteArrayOutputStream tokenBytes = new java.io.ByteArrayOutputStream();
    private final StringBuilder text = new StringBuilder();
    private final int lingerCalls;

    /**
     * A recorder.
     *
     * @param lingerCalls how many of the first calls stay up to 100 ms in the listener (or
     *     until a second call comes in), so that an engine calling it from two threads at once
     *     is seen doing so
     */
    StreamRecorder(int lingerCalls) {
      this.lingerCalls = lingerCalls;
    }

    /** Attaches the request's future, as soon as {@code execute} returned it. */
    void attach(CompletableFuture<EngineResult> f) {
      future.set(f);
      f.whenComplete((v, err) -> callsAtCompletion.compareAndSet(-1, calls.get()));
    }

    @Override
    public void onOutput(int[] tokens, String piece) {
      int n = calls.incrementAndGet();
      if (inside.incrementAndGet() > 1) {
        breaches.add("the listener was called while another call was still running");
      }
      try {
        CompletableFuture<EngineResult> f = future.get();
        if (f != null && f.isDone()) {
          breaches.add("piece " + n + " came after the future completed");
        }
        if (tokens == null || piece == null) {
          breaches.add("piece " + n + " is null: tokens " + java.util.Arrays.toString(tokens)
              + ", text " + piece);
          return;
        }
        synchronized (this) {
          for (int t : tokens) {
            tokenBytes.write(t >>> 24);
            tokenBytes.write(t >>> 16);
            tokenBytes.write(t >>> 8);
            tokenBytes.write(t);
          }
          text.append(piece);
        }
        if (n <= lingerCalls) {
          long end = System.nanoTime() + java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(100);
          while (inside.get() == 1 && System.nanoTime() < end) {
            Thread.onSpinWait();
          }
        }
      } finally {
        inside.decrementAndGet();
      }
    }

    /** The streamed tokens, concatenated. */
    synchronized int[] tokens() {
      java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(tokenBytes.toByteArray());
      int[] t = new int[b.remaining() / 4];
      for (int i = 0; i < t.length; i++) {
        t[i] = b.getInt();
      }
      return t;
    }

    /** The streamed text, concatenated. */
    synchronized String text() {
      return text.toString();
    }

    /** The listener's calls so far. */
    int calls() {
      return calls.get();
    }

    /** The breaches of the listener's rules, and calls made after the future completed. */
    List<String> breaches() {
      List<String> b = new ArrayList<>(breaches);
      int atCompletion = callsAtCompletion.get();
      if (atCompletion >= 0 && calls.get() > atCompletion) {
        b.add((calls.get() - atCompletion) + " pieces came after the future completed");
      }
      return b;
    }
  }

  private CompletableFuture<EngineResult> startStreamed(InferenceEngine e, InferenceRequest r,
      StreamRecorder rec) {
    CompletableFuture<EngineResult> f = assertTimeoutPreemptively(FIRST_CALL_BOUND,
        () -> e.execute(r, rec), "execute blocked the caller");
    assertNotNull(f, "execute returned null");
    rec.attach(f);
    return f;
  }

  private EngineResult runStreamed(InferenceEngine e, InferenceRequest r, StreamRecorder rec) {
    CompletableFuture<EngineResult> f = startStreamed(e, r, rec);
    assertTrue(awaitCondition(f::isDone, patience()), "request " + r.id() + " never completed");
    return f.join();
  }

  private static boolean startsWith(int[] all, int[] prefix) {
    return prefix.length <= all.length
        && java.util.Arrays.equals(prefix, java.util.Arrays.copyOf(all, prefix.length));
  }

  @Test
  void resultIsWellFormed() {
    InferenceEngine e = createEngine();
    int[] p = prompt(1);
    EngineResult r = run(e, new InferenceRequest("r1", p, GenerationParams.greedy(4)));
    assertEquals(p.length, r.promptTokens(), "promptTokens");
    assertTrue(r.cachedPromptTokens() >= -1 && r.cachedPromptTokens() <= p.length, "cached");
    int out = r.outputTokens().length;
    assertTrue(out >= 1 && out <= 4, "between 1 and maxTokens outputs, got " + out);
  }

  /**
   * {@code maxTokens} bounds the output, and only a stop or the engine's end of sequence ends it
   * sooner. For {@code maxTokens} 1, 5 and 37, greedy, plain and streamed: the result has at most
   * that many token ids, and the streamed pieces no more than that; an output that ends sooner
   * without a stop ends with the engine's end of sequence, a token that ends every output it is
   * in, so that no output has it but as its last token; and a stop token id the output never
   * reaches leaves the longest output as it is. (An engine that decodes several tokens a step
   * and checks the limit only between steps gives more; the other checks bound outputs of 3 and
   * 4 tokens only.) An output need not be a prefix of a longer one: {@code maxTokens} is one of
   * the parameters the output is a function of.
   */
  @Test
  void maxTokensBoundsTheOutputAndOnlyAStopEndsItSooner() {
    InferenceEngine e = createEngine();
    int[] p = prompt(10);
    List<int[]> outputs = new ArrayList<>();
    java.util.Set<Integer> ends = new java.util.HashSet<>(); // last tokens of outputs cut short
    int[] longest = new int[0];
    for (int max : new int[] {1, 5, 37}) {
      GenerationParams g = GenerationParams.greedy(max);
      int[] plain = run(e, new InferenceRequest("max" + max, p, g)).outputTokens();
      StreamRecorder rec = new StreamRecorder(0);
      int[] streamedResult = runStreamed(e, new InferenceRequest("max" + max + "-streamed", p, g),
          rec).outputTokens();
      int[] streamed = rec.tokens();
      assertTrue(plain.length <= max,
          "maxTokens " + max + " gave " + plain.length + " token ids: "
              + java.util.Arrays.toString(plain));
      assertTrue(streamedResult.length <= max, "maxTokens " + max + " gave "
          + streamedResult.length + " token ids streamed: "
          + java.util.Arrays.toString(streamedResult));
      assertTrue(streamed.length <= max, "maxTokens " + max + " streamed " + streamed.length
          + " token ids: " + java.util.Arrays.toString(streamed));
      for (int[] out : List.of(plain, streamedResult)) {
        outputs.add(out);
        if (out.length > 0 && out.length < max) {
          ends.add(out[out.length - 1]);
        }
      }
      longest = plain;
    }
    for (int[] out : outputs) {
      for (int i = 0; i + 1 < out.length; i++) {
        int t = out[i];
        assertTrue(!ends.contains(t), "an output without stops ended before maxTokens at token "
            + t + ", which is no end of sequence: another output goes on past it, "
            + java.util.Arrays.toString(out));
      }
    }
    int unreached = 0;
    while (contains(longest, unreached)) {
      unreached++;
    }
    GenerationParams withStop = GenerationParams.greedy(37)
        .withStops(List.of(), List.of(unreached));
    assertArrayEquals(longest, run(e, new InferenceRequest("max37-stop", p, withStop))
        .outputTokens(), "the stop token id " + unreached + ", which the output never reaches, "
        + "ended it early");
  }

  private static boolean contains(int[] tokens, int token) {
    for (int t : tokens) {
      if (t == token) {
        return true;
      }
    }
    return false;
  }

  @Test
  void sameRequestGivesTheSameOutput() {
    InferenceEngine e = createEngine();
    int[] p = prompt(2);
    EngineResult a = run(e, new InferenceRequest("a", p, GenerationParams.greedy(3)));
    EngineResult b = run(e, new InferenceRequest("b", p, GenerationParams.greedy(3)));
    assertArrayEquals(a.outputTokens(), b.outputTokens());
    assertEquals(a.text(), b.text());
  }

  /**
   * Every request completes, also among identical ones in flight at once: 20 requests, four of
   * each of five prompts, all executed before any completes. (A CompletableFuture completes
   * once: what can go wrong is a future that never does.) An engine that lets a request join an
   * identical one running and then answers only the first leaves the others open.
   */
  @Test
  void everyFutureCompletesExactlyOnce() {
    InferenceEngine e = createEngine();
    int n = 20;
    List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      CompletableFuture<EngineResult> f = e.execute(
          new InferenceRequest("c" + i, prompt(100 + i % 5), GenerationParams.DEFAULT));
      assertNotNull(f, "execute returned null");
      fs.add(f);
    }
    assertTrue(awaitCondition(() -> fs.stream().allMatch(CompletableFuture::isDone), patience()),
        "of " + n + " requests, four of each of five prompts, in flight at once, "
            + fs.stream().filter(f -> !f.isDone()).count() + " never completed");
    for (int i = 0; i < n; i++) {
      try {
        assertNotNull(fs.get(i).join(), "request c" + i + " completed with null");
      } catch (CompletionException ex) {
        throw new AssertionError("request c" + i + " failed: " + ex.getCause(), ex);
      }
    }
  }

  /**
   * Request ids are unique per origin node only: requests of one id from several origins may be
   * in flight here at once, and each completes, once, with the output of its own prompt. An
   * engine that keeps its requests in a map by id (to find them for {@code cancel}) lets the
   * later one replace the earlier: one gets the other's answer, and the other none.
   */
  @Test
  void requestsOfOneIdInFlightAtOnceEachGetTheirOwnOutput() {
    InferenceEngine e = createEngine();
    InferenceEngine reference = createEngine();
    GenerationParams g = GenerationParams.greedy(4);
    int n = 3;
    List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      InferenceRequest r = new InferenceRequest("same-id", prompt(800 + i), g);
      CompletableFuture<EngineResult> f = assertTimeoutPreemptively(FIRST_CALL_BOUND,
          () -> e.execute(r), "execute blocked the caller");
      assertNotNull(f, "execute returned null");
      fs.add(f);
    }
    assertTrue(awaitCondition(() -> fs.stream().allMatch(CompletableFuture::isDone), patience()),
        "of " + n + " requests of one id in flight at once, "
            + fs.stream().filter(f -> !f.isDone()).count() + " never completed");
    for (int i = 0; i < n; i++) {
      EngineResult own = run(reference, new InferenceRequest("own" + i, prompt(800 + i), g));
      EngineResult got;
      try {
        got = fs.get(i).join();
      } catch (CompletionException ex) {
        throw new AssertionError("request " + i + " of " + n + " of one id in flight at once "
            + "failed: " + ex.getCause(), ex);
      }
      assertArrayEquals(own.outputTokens(), got.outputTokens(),
          "request " + i + " of " + n + " of one id in flight at once got another's output");
      assertEquals(own.text(), got.text());
    }
  }

  /**
   * The node calls the engine from its request, transport and scheduler threads at once: four
   * threads each execute two requests (one plain, one streamed), read {@code load()} and cancel
   * an unknown id, all at once, and every request completes, once, with the output of its own
   * prompt.
   */
  @Test
  void callsFromManyThreadsAtOnceEachGetTheirOwnOutput() throws InterruptedException {
    InferenceEngine e = createEngine();
    int threads = 4;
    int each = 2;
    GenerationParams g = GenerationParams.greedy(3);
    @SuppressWarnings("unchecked")
    CompletableFuture<EngineResult>[][] fs = new CompletableFuture[threads][each];
    List<Throwable> thrown = java.util.Collections.synchronizedList(new ArrayList<>());
    java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
    List<Thread> callers = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      int caller = t;
      Thread th = new Thread(() -> {
        try {
          go.await();
          for (int i = 0; i < each; i++) {
            InferenceRequest r = new InferenceRequest("m" + caller + "-" + i,
                prompt(900 + caller * each + i), g);
            fs[caller][i] = i % 2 == 0 ? e.execute(r) : e.execute(r, (tokens, text) -> { });
            e.load();
            e.cancel("no-such-request-" + caller);
          }
        } catch (InterruptedException ex) {
          Thread.currentThread().interrupt();
        } catch (RuntimeException | Error ex) {
          thrown.add(ex);
        }
      }, "engine-kit-caller-" + t);
      th.setDaemon(true);
      th.start();
      callers.add(th);
    }
    go.countDown();
    for (Thread th : callers) {
      th.join(FIRST_CALL_BOUND.toMillis());
      assertTrue(!th.isAlive(), "a caller's calls did not return");
    }
    assertEquals(List.of(), thrown, "calls from several threads at once threw");
    List<CompletableFuture<EngineResult>> all = java.util.Arrays.stream(fs)
        .flatMap(java.util.Arrays::stream).toList();
    assertTrue(all.stream().allMatch(java.util.Objects::nonNull), "execute returned null");
    assertTrue(awaitCondition(() -> all.stream().allMatch(CompletableFuture::isDone), patience()),
        "of " + all.size() + " requests executed from " + threads + " threads at once, "
            + all.stream().filter(f -> !f.isDone()).count() + " never completed");
    InferenceEngine reference = createEngine();
    for (int t = 0; t < threads; t++) {
      for (int i = 0; i < each; i++) {
        EngineResult own = run(reference,
            new InferenceRequest("own" + t + "-" + i, prompt(900 + t * each + i), g));
        EngineResult got;
        try {
          got = fs[t][i].join();
        } catch (CompletionException ex) {
          throw new AssertionError("request " + i + " of caller " + t + " failed: "
              + ex.getCause(), ex);
        }
        assertArrayEquals(own.outputTokens(), got.outputTokens(),
            "request " + i + " of caller " + t + " got another request's output");
      }
    }
  }

  @Test
  void loadIsSaneAndCheap() {
    InferenceEngine e = createEngine();
    EngineLoad l = assertTimeoutPreemptively(Duration.ofSeconds(1), e::load);
    assertNotNull(l, "load() returned null");
    CompletableFuture<EngineResult> f = e.execute(
        new InferenceRequest("l", prompt(3), GenerationParams.DEFAULT));
    EngineLoad busy = e.load();
    assertNotNull(busy);
    assertTrue(f.isDone() || busy.total() >= 1,
        "a request not yet complete must show in the load, got " + busy);
    assertTrue(awaitCondition(f::isDone, patience()));
  }

  @Test
  void aStopTokenIdEndsTheOutputWithIt() {
    // the library passes a request's stops to whichever engine serves it: only the engine can
    // stop generating at the first stop token id (which stays the last token of the output)
    InferenceEngine e = createEngine();
    int[] p = prompt(8);
    int[] plain = run(e, new InferenceRequest("st1", p, GenerationParams.greedy(8)))
        .outputTokens();
    org.junit.jupiter.api.Assumptions.assumeTrue(plain.length >= 3,
        "the engine gives too few token ids to tell");
    int stop = plain[2];
    int first = 0;
    while (plain[first] != stop) {
      first++;
    }
    GenerationParams withStop = GenerationParams.greedy(8).withStops(List.of(), List.of(stop));
    int[] cut = run(e, new InferenceRequest("st2", p, withStop)).outputTokens();
    assertArrayEquals(java.util.Arrays.copyOf(plain, first + 1), cut,
        "the output must end with the first stop token id " + stop + " of " + withStop);
  }

  /**
   * A stop string ends the output of an engine that gives text (its result's {@code text} is
   * not empty): a greedy request is run, then again with a stop string taken from the first
   * half of its text, whose first occurrence there ends before the text does. The text must
   * end just before that occurrence or with it, and the token ids must be a prefix of the first
   * run's; streamed, the result must be the same, and no text streamed past it. An engine that
   * gives token ids only cannot see stop strings (the node's endpoint cuts its answers): for one
   * whose result has no text the check is skipped.
   */
  @Test
  void aStopStringEndsTheTextOfAnEngineThatGivesText() {
    InferenceEngine e = createEngine();
    int[] p = prompt(11);
    EngineResult plain = run(e, new InferenceRequest("ss1", p, GenerationParams.greedy(8)));
    String text = plain.text();
    Assumptions.assumeFalse(text.isEmpty(),
        "the engine gives no text, only token ids: stop strings need text");
    // a stop string of up to 4 chars ending in the middle of the text, surrogate pairs whole
    int end = Math.max(1, text.length() / 2);
    if (Character.isHighSurrogate(text.charAt(end - 1))) {
      end++;
    }
    Assumptions.assumeTrue(end < text.length(), "the engine gives too little text to tell: ["
        + text + "]");
    int start = Math.max(0, end - 4);
    if (Character.isLowSurrogate(text.charAt(start)) && start > 0) {
      start--;
    }
    String stop = text.substring(start, end);
    int at = text.indexOf(stop);
    GenerationParams withStop = GenerationParams.greedy(8).withStops(List.of(stop), List.of());
    EngineResult cut = run(e, new InferenceRequest("ss2", p, withStop));
    List<String> expected = List.of(text.substring(0, at), text.substring(0, at + stop.length()));
    assertTrue(expected.contains(cut.text()), "the stop string [" + stop + "] first ends at char "
        + (at + stop.length()) + " of the text [" + text + "], which must end just before it or "
        + "with it: " + expected + "; the text with the stop string was [" + cut.text() + "]");
    int[] tokens = cut.outputTokens();
    assertTrue(tokens.length >= 1 && startsWith(plain.outputTokens(), tokens),
        "the token ids with the stop string, " + java.util.Arrays.toString(tokens)
            + ", must be a start of those without it, "
            + java.util.Arrays.toString(plain.outputTokens()));
    StreamRecorder rec = new StreamRecorder(0);
    EngineResult streamed = runStreamed(e, new InferenceRequest("ss3", p, withStop), rec);
    assertArrayEquals(tokens, streamed.outputTokens(),
        "the token ids with the stop string, streamed");
    assertEquals(cut.text(), streamed.text(), "the text with the stop string, streamed");
    assertTrue(streamed.text().startsWith(rec.text()), "the engine streamed [" + rec.text()
        + "], past the text [" + streamed.text() + "] its stop string [" + stop + "] ended");
  }

  @Test
  void cancellingAnUnknownRequestIsHarmless() {
    InferenceEngine e = createEngine();
    e.cancel("no-such-request");
    EngineResult r = run(e, new InferenceRequest("after", prompt(4), GenerationParams.DEFAULT));
    assertNotNull(r);
  }

  /**
   * A request id is the origin's, and comes back: once a request ended, a cancel of its id (one
   * that came too late) is harmless, and a later request of the same id runs as any other. An
   * engine that remembers cancelled ids, to refuse a request whose cancel came before it, must
   * forget them. And the ended request's future, which completed once, keeps its result: an
   * engine whose cancel fails every future it handed out for the id ({@code obtrudeException}),
   * ended ones too, turns an answer the node has given into a failure.
   */
  @Test
  void cancellingAnEndedRequestIsHarmlessAndItsIdCanBeUsedAgain() {
    InferenceEngine e = createEngine();
    int[] p = prompt(9);
    GenerationParams g = GenerationParams.greedy(4);
    InferenceRequest r = new InferenceRequest("again", p, g);
    CompletableFuture<EngineResult> ended = assertTimeoutPreemptively(FIRST_CALL_BOUND,
        () -> e.execute(r), "execute blocked the caller");
    assertNotNull(ended, "execute returned null");
    assertTrue(awaitCondition(ended::isDone, patience()), "request again never completed");
    EngineResult first = ended.join();
    e.cancel("again");
    for (int i = 0; i < 2; i++) {
      EngineResult later;
      try {
        later = run(e, new InferenceRequest("again", p, g));
      } catch (CompletionException ex) {
        throw new AssertionError("a request of an id whose request had ended, and been cancelled"
            + " after it ended, failed: " + ex.getCause(), ex);
      }
      assertArrayEquals(first.outputTokens(), later.outputTokens(),
          "a request of an id used before gave another output");
    }
    // its future completed once: the cancel that came after leaves its outcome as it was
    try {
      assertArrayEquals(first.outputTokens(), ended.join().outputTokens(),
          "a cancel after the request ended changed its output");
    } catch (CompletionException | java.util.concurrent.CancellationException ex) {
      throw new AssertionError("a cancel after the request ended made its future, completed "
          + "with its result, fail: " + ex, ex);
    }
  }

  @Test
  void sampledRequestsGiveTheSameOutputOnEveryEngine() {
    // a forwarded request must get the answer the origin's own engine would give: with
    // sampling, that takes the request's seed, not a per-engine or per-call random source
    GenerationParams sampled = new GenerationParams(4, 0.9, 0.95, 1234L);
    int[] p = prompt(7);
    EngineResult a = run(createEngine(), new InferenceRequest("s1", p, sampled));
    EngineResult b = run(createEngine(), new InferenceRequest("s2", p, sampled));
    assertArrayEquals(a.outputTokens(), b.outputTokens(),
        "two engines sampled different outputs for the same tokens, parameters and seed");
    assertEquals(a.text(), b.text());
  }

  @Test
  void cancelledRequestsStillCompleteAndOthersAreUntouched() {
    // the library cancels a request it has given up on and relies on its future completing;
    // every other request is streamed, and a cancelled one streams nothing once its future
    // completed (the node has told its client the request failed)
    InferenceEngine e = createEngine();
    int n = 6;
    GenerationParams g = GenerationParams.greedy(8);
    List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
    List<StreamRecorder> recs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      InferenceRequest r = new InferenceRequest("k" + i, prompt(200 + i), g);
      if (i % 2 == 1) {
        StreamRecorder rec = new StreamRecorder(0);
        recs.add(rec);
        fs.add(startStreamed(e, r, rec));
      } else {
        fs.add(e.execute(r));
      }
    }
    e.cancel("k" + (n - 1)); // the last one, streamed: most likely still queued
    e.cancel("k0"); // the first one: most likely running
    assertTrue(awaitCondition(() -> fs.stream().allMatch(CompletableFuture::isDone), patience()),
        "a cancelled request's future never completed");
    awaitCondition(() -> false, Duration.ofMillis(100));
    // the others complete normally, each with the output of its own prompt: what an engine that
    // was told no cancel gives the same request, run the same way (plain or streamed)
    String cancelled = "k0 and k" + (n - 1);
    InferenceEngine reference = createEngine();
    for (int i = 1; i < n - 1; i++) {
      String id = "k" + i;
      EngineResult got;
      try {
        got = fs.get(i).join();
      } catch (CompletionException | java.util.concurrent.CancellationException ex) {
        Throwable why = ex instanceof CompletionException && ex.getCause() != null
            ? ex.getCause() : ex;
        throw new AssertionError("cancelling " + cancelled + " failed request " + id
            + ", which was not cancelled: " + why, ex);
      }
      assertNotNull(got, "request " + id + " was not cancelled and completed with null");
      InferenceRequest own = new InferenceRequest("own" + i, prompt(200 + i), g);
      EngineResult expected = i % 2 == 1
          ? runStreamed(reference, own, new StreamRecorder(0)) : run(reference, own);
      assertEquals(promptTokens(), got.promptTokens(), "promptTokens of request " + id
          + ", which was not cancelled, with " + cancelled + " cancelled");
      assertTrue(got.cachedPromptTokens() >= -1 && got.cachedPromptTokens() <= promptTokens(),
          "cachedPromptTokens of request " + id + ", which was not cancelled: "
              + got.cachedPromptTokens());
      assertArrayEquals(expected.outputTokens(), got.outputTokens(), "cancelling " + cancelled
          + " changed the output of request " + id + ", which was not cancelled");
      assertEquals(expected.text(), got.text(), "cancelling " + cancelled
          + " changed the text of request " + id + ", which was not cancelled");
    }
    for (int i : new int[] {0, n - 1}) {
      try {
        fs.get(i).join(); // answering anyway is allowed: cancel is best effort
      } catch (CompletionException ex) {
        assertInstanceOf(EngineException.class, ex.getCause(),
            "a cancelled request must fail with EngineException");
      }
    }
    assertEquals(List.of(), recs.get(recs.size() - 1).breaches(),
        "the cancelled streamed request k" + (n - 1));
  }

  @Test
  void failuresSurfaceAsEngineException() {
    InferenceEngine e = createEngine();
    Assumptions.assumeTrue(failNextRequest(e), "engine cannot be told to fail");
    CompletableFuture<EngineResult> f = e.execute(
        new InferenceRequest("f", prompt(5), GenerationParams.DEFAULT));
    assertTrue(awaitCondition(f::isDone, patience()));
    try {
      f.join();
      fail("the request should have failed");
    } catch (CompletionException ex) {
      assertInstanceOf(EngineException.class, ex.getCause());
    }
  }

  @Test
  void aScopedRequestIsServedAndHitsOnlyItsOwnScopesCache() {
    InferenceEngine e = createEngine();
    CacheScope scope = scopeForTests();
    List<CacheScope> rootScopes = java.util.Collections.synchronizedList(new ArrayList<>());
    boolean events = e.publishesCacheEvents() && cacheEventsNameTheScope();
    if (events) {
      e.setCacheEventListener(new CacheEventListener() {
        @Override
        public void onBlocksStored(CacheScope s, long parent, long[] hashes, int[] tokenIds) {
          if (parent == NO_PARENT) {
            rootScopes.add(s);
          }
        }
      });
    }
    int[] p = prompt(7);
    GenerationParams g = GenerationParams.greedy(3);
    run(e, new InferenceRequest("d1", p, g));
    EngineResult plain = run(e, new InferenceRequest("d2", p, g));
    EngineResult scoped = run(e, new InferenceRequest("s1", p, g, scope));
    assertEquals(p.length, scoped.promptTokens(), "promptTokens of a scoped request");
    int out = scoped.outputTokens().length;
    assertTrue(out >= 1 && out <= 3, "between 1 and maxTokens outputs, got " + out);
    if (scope.adapter().isEmpty()) { // a salt changes what is cached, not what is computed
      assertArrayEquals(plain.outputTokens(), scoped.outputTokens(),
          "a cache salt changed the output");
    }
    if (plain.cachedPromptTokens() > 0 && scoped.cachedPromptTokens() >= 0) {
      assertEquals(0, scoped.cachedPromptTokens(),
          "a request of " + scope + " hit the prefix cached for the default scope");
      EngineResult again = run(e, new InferenceRequest("s2", p, g, scope));
      assertTrue(again.cachedPromptTokens() > 0, "a repeated scoped request must hit its cache");
    }
    if (events) {
      // events may arrive asynchronously, as vLLM's do over ZeroMQ
      awaitCondition(() -> rootScopes.contains(scope), Duration.ofSeconds(10));
      assertTrue(rootScopes.contains(scope),
          "the first blocks of a " + scope + " request were reported under " + rootScopes);
    }
  }

  @Test
  void publishedCacheEventsAnnounceTheBlocksAndRepeatsHitTheCache() {
    InferenceEngine e = createEngine();
    Assumptions.assumeTrue(e.publishesCacheEvents(), "engine publishes no cache events");
    AtomicLong storedBlocks = new AtomicLong();
    AtomicLong storedTokens = new AtomicLong();
    AtomicInteger badEvents = new AtomicInteger();
    // a block stored again (two requests computed it at once) holds no more tokens
    java.util.Set<Long> stored = java.util.concurrent.ConcurrentHashMap.newKeySet();
    e.setCacheEventListener(new CacheEventListener() {
      @Override
      public void onBlocksStored(long parent, long[] hashes, int[] tokenIds) {
        if (hashes.length == 0 || tokenIds.length % hashes.length != 0) {
          badEvents.incrementAndGet();
          return;
        }
        storedBlocks.addAndGet(hashes.length);
        for (long h : hashes) {
          if (stored.add(h)) {
            storedTokens.addAndGet(tokenIds.length / hashes.length);
          }
        }
      }
    });
    int[] p = prompt(6);
    EngineResult first = run(e, new InferenceRequest("e1", p, GenerationParams.DEFAULT));
    // events may arrive asynchronously (vLLM publishes them over ZeroMQ): soon, not at once
    awaitCondition(() -> storedBlocks.get() > 0, Duration.ofSeconds(10));
    assertEquals(0, badEvents.get(), "stored events must carry blockSize tokens per block");
    assertTrue(storedBlocks.get() >= 1, "a " + p.length + "-token prompt stored no block");
    assertTrue(storedTokens.get() <= p.length, "more tokens stored than the prompt has");
    EngineResult second = run(e, new InferenceRequest("e2", p, GenerationParams.DEFAULT));
    if (second.cachedPromptTokens() >= 0) {
      assertTrue(second.cachedPromptTokens() > Math.max(0, first.cachedPromptTokens()),
          "running the same prompt again must hit the cache");
    }
  }

  /**
   * The stores an engine publishes form chains the node's tree can follow: each continues a
   * block reported earlier and not removed since (or starts a prompt), a block hash names one
   * block (its parent and tokens) while it is cached, all blocks hold the same number of
   * tokens, and the tokens along a chain, from its first block on, are the start of a sequence
   * the engine ran (a prompt, then its output). The node's tree drops a store that continues an
   * unknown block or reuses a hash for other tokens (counted in
   * {@link io.github.prefixrouter.CacheEventStats}), so an engine breaking this is mirrored
   * wrongly even when each event looks well formed on its own.
   */
  @Test
  void publishedCacheEventsChainEachBlockToTheOneBefore() {
    InferenceEngine e = createEngine();
    Assumptions.assumeTrue(e.publishesCacheEvents(), "engine publishes no cache events");
    EventChains chains = new EventChains();
    e.setCacheEventListener(chains);
    int[] first = prompt(11);
    int shared = first.length * 2 / 3;
    int[] second = first.clone();
    int[] other = prompt(12);
    System.arraycopy(other, shared, second, shared, second.length - shared);
    GenerationParams g = GenerationParams.greedy(2);
    List<int[]> ran = new ArrayList<>();
    ran.add(concat(first, run(e, new InferenceRequest("c1", first, g)).outputTokens()));
    assertTrue(awaitCondition(() -> chains.blockSize() > 0, Duration.ofSeconds(10)),
        "no block was stored for a " + first.length + "-token prompt");
    int b = chains.blockSize();
    long before = chains.storedBlocks();
    ran.add(concat(second, run(e, new InferenceRequest("c2", second, g)).outputTokens()));
    if (second.length / b > shared / b) { // the second prompt has full blocks of its own
      assertTrue(awaitCondition(() -> chains.storedBlocks() > before, Duration.ofSeconds(10)),
          "no block was stored for a prompt sharing its first " + shared + " tokens with one "
              + "cached before and " + (second.length - shared) + " tokens of its own, in "
              + b + "-token blocks");
    }
    ran.add(concat(first, run(e, new InferenceRequest("c3", first, g)).outputTokens()));
    assertEquals(List.of(), chains.breaches(ran),
        "cache events the node's tree could not mirror");
  }

  private static int[] concat(int[] a, int[] b) {
    int[] c = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, c, a.length, b.length);
    return c;
  }

  /**
   * Records an engine's cache events and replays them into a naive model of the cache: each
   * live block by hash, with its parent, its tokens and the tokens of its whole chain, and the
   * copies of it stored and not removed since (an engine that computed a block for two requests
   * at once stores it twice, and removes it twice: it stays cached until its last copy goes).
   */
  private static final class EventChains implements CacheEventListener {
    private final List<Object[]> events = java.util.Collections.synchronizedList(new ArrayList<>());
    private final AtomicInteger blockSize = new AtomicInteger();
    private final AtomicLong storedBlocks = new AtomicLong();
    /**
     * The hashes stored more often than named by a removal since the last clear, each with the
     * difference: a cheap upper bound.
     */
    private final java.util.Map<Long, Integer> roughlyLive =
        new java.util.concurrent.ConcurrentHashMap<>();

    @Override
    public void onBlocksStored(long parent, long[] hashes, int[] tokenIds) {
      onBlocksStored(CacheScope.DEFAULT, parent, hashes, tokenIds);
    }

    @Override
    public void onBlocksStored(CacheScope scope, long parent, long[] hashes, int[] tokenIds) {
      long[] h = hashes == null ? null : hashes.clone();
      int[] t = tokenIds == null ? null : tokenIds.clone();
      events.add(new Object[] {"stored", parent, h, t});
      if (h != null && t != null && h.length > 0 && t.length % h.length == 0) {
        blockSize.compareAndSet(0, t.length / h.length);
        storedBlocks.addAndGet(h.length);
        for (long x : h) {
          roughlyLive.merge(x, 1, Integer::sum);
        }
      }
    }

    @Override
    public void onBlocksRemoved(long[] hashes) {
      events.add(new Object[] {"removed", hashes == null ? null : hashes.clone()});
      if (hashes != null) {
        for (long x : hashes) {
          roughlyLive.computeIfPresent(x, (k, c) -> c > 1 ? c - 1 : null);
        }
      }
    }

    @Override
    public void onAllCleared() {
      events.add(new Object[] {"cleared"});
      roughlyLive.clear();
    }

    /**
     * The blocks stored more often than named by a removal since: at least as many as the model
     * holds (which also drops the blocks continuing a removed one), cheap to ask often.
     */
    int roughlyLiveBlocks() {
      return roughlyLive.size();
    }

    int blockSize() {
      return blockSize.get();
    }

    long storedBlocks() {
      return storedBlocks.get();
    }

    /** A cached block: its parent's hash, its tokens, and the tokens from its chain's start. */
    private record Block(long parent, int[] tokens, int[] chain) {}

    /** What in the events so far breaks the rules, given the sequences the engine ran. */
    List<String> breaches(List<int[]> ran) {
      return replay(ran).breaches();
    }

    /**
     * The events so far replayed into the model: what breaks the rules, given the sequences the
     * engine ran, and the blocks left cached.
     */
    Replay replay(List<int[]> ran) {
      List<Object[]> seen;
      synchronized (events) {
        seen = new ArrayList<>(events);
      }
      List<String> out = new ArrayList<>();
      java.util.Map<Long, Block> live = new java.util.HashMap<>();
      java.util.Map<Long, Integer> copies = new java.util.HashMap<>();
      java.util.Set<Long> everStored = new java.util.HashSet<>();
      List<String> unknownRemovals = new ArrayList<>();
      long removals = 0;
      int size = 0;
      for (int n = 0; n < seen.size() && out.size() < 10; n++) {
        Object[] ev = seen.get(n);
        String at = "event " + (n + 1) + " (" + ev[0] + "): ";
        switch ((String) ev[0]) {
          case "cleared" -> {
            live.clear();
            copies.clear();
          }
          case "removed" -> {
            long[] hashes = (long[]) ev[1];
            if (hashes == null) {
              out.add(at + "null hashes");
              continue;
            }
            for (long h : hashes) {
              removals++;
              if (!everStored.contains(h) && unknownRemovals.size() < 10) {
                unknownRemovals.add(at + "removes block " + Long.toHexString(h)
                    + ", never reported stored");
              }
              // a block stored twice stays until it is removed twice
              if (copies.merge(h, -1, Integer::sum) <= 0) {
                live.remove(h);
              }
            }
            // the blocks continuing a removed one are gone with it
            boolean dropped = true;
            while (dropped) {
              dropped = live.values().removeIf(
                  x -> x.parent() != NO_PARENT && !live.containsKey(x.parent()));
            }
            copies.keySet().retainAll(live.keySet());
          }
          default -> {
            long parent = (long) ev[1];
            long[] hashes = (long[]) ev[2];
            int[] tokens = (int[]) ev[3];
            if (hashes == null || tokens == null || hashes.length == 0
                || tokens.length % hashes.length != 0 || tokens.length == 0) {
              out.add(at + "malformed: " + (hashes == null ? "null" : hashes.length)
                  + " hashes, " + (tokens == null ? "null" : tokens.length) + " tokens");
              continue;
            }
            int b = tokens.length / hashes.length;
            if (size == 0) {
              size = b;
            } else if (b != size) {
              out.add(at + "blocks of " + b + " tokens, where earlier ones had " + size);
              continue;
            }
            Block up = live.get(parent);
            if (parent != NO_PARENT && up == null) {
              out.add(at + "continues block " + Long.toHexString(parent)
                  + ", which was never stored or was removed since");
              continue;
            }
            long prev = parent;
            int[] chain = up == null ? new int[0] : up.chain();
            java.util.Set<Long> inEvent = new java.util.HashSet<>();
            for (int i = 0; i < hashes.length; i++) {
              long h = hashes[i];
              int[] own = java.util.Arrays.copyOfRange(tokens, i * b, (i + 1) * b);
              chain = concat(chain, own);
              Block old = live.get(h);
              if (h == NO_PARENT) {
                out.add(at + "block " + i + " has the hash NO_PARENT (0)");
              } else if (!inEvent.add(h)) {
                out.add(at + "hash " + Long.toHexString(h) + " appears twice");
              } else if (old != null
                  && (old.parent() != prev || !java.util.Arrays.equals(old.tokens(), own))) {
                out.add(at + "hash " + Long.toHexString(h) + " already names another block "
                    + "(another parent or other tokens)");
              }
              int[] c = chain;
              if (ran.stream().noneMatch(r -> startsWith(r, c))) {
                out.add(at + "block " + i + " (hash " + Long.toHexString(h) + ") ends a chain of "
                    + c.length + " tokens that is not the start of any prompt and output the "
                    + "engine ran");
              }
              live.put(h, new Block(prev, own, chain));
              copies.merge(h, 1, Integer::sum);
              everStored.add(h);
              prev = h;
            }
          }
        }
      }
      return new Replay(out, unknownRemovals, live.size(), removals);
    }
  }

  /**
   * Cache events replayed into the model.
   *
   * @param breaches what breaks the rules of the stores (at most 10)
   * @param unknownRemovals removals of blocks never reported stored (at most 10)
   * @param liveBlocks the blocks the events leave cached
   * @param removedBlocks the hashes the removals named
   */
  private record Replay(List<String> breaches, List<String> unknownRemovals, int liveBlocks,
      long removedBlocks) {}

  @Test
  void streamedOutputIsAPrefixOfTheResult() {
    InferenceEngine e = createEngine();
    int[] p = prompt(20);
    for (GenerationParams g : List.of(GenerationParams.greedy(8),
        new GenerationParams(8, 0.9, 0.95, 4321L))) {
      StreamRecorder rec = new StreamRecorder(0);
      EngineResult r = runStreamed(e, new InferenceRequest("p" + g.temperature(), p, g), rec);
      int[] streamed = rec.tokens();
      assertTrue(startsWith(r.outputTokens(), streamed),
          "streamed tokens " + java.util.Arrays.toString(streamed) + " are no prefix of the output "
              + java.util.Arrays.toString(r.outputTokens()));
      assertTrue(r.text().startsWith(rec.text()),
          "streamed text '" + rec.text() + "' is no prefix of the result's '" + r.text() + "'");
      if (streamsWholeOutput()) {
        assertArrayEquals(r.outputTokens(), streamed, "the engine streams its whole output");
        assertEquals(r.text(), rec.text(), "the engine streams its whole output");
      }
      assertTrue(rec.breaches().stream().noneMatch(b -> b.contains("null")), rec.breaches()::toString);
    }
  }

  @Test
  void streamedPiecesComeOneAtATimeAndBeforeTheFutureCompletes() {
    // several requests streaming at once, each listener lingering in its first calls so that a
    // second call made meanwhile is seen
    InferenceEngine e = createEngine();
    int n = 4;
    List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
    List<StreamRecorder> recs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      StreamRecorder rec = new StreamRecorder(1);
      recs.add(rec);
      fs.add(startStreamed(e, new InferenceRequest("o" + i, prompt(300 + i),
          GenerationParams.greedy(6)), rec));
    }
    assertTrue(awaitCondition(() -> fs.stream().allMatch(CompletableFuture::isDone), patience()),
        "a streamed request never completed");
    awaitCondition(() -> false, Duration.ofMillis(100)); // late pieces would come now
    for (int i = 0; i < n; i++) {
      assertNotNull(fs.get(i).join());
      assertEquals(List.of(), recs.get(i).breaches(), "request o" + i);
    }
  }

  @Test
  void streamingAndPlainExecutionGiveTheSameResult() {
    InferenceEngine e = createEngine();
    int[] p = prompt(21);
    for (GenerationParams g : List.of(GenerationParams.greedy(5),
        new GenerationParams(5, 0.8, 0.9, 99L))) {
      EngineResult plain = run(e, new InferenceRequest("a", p, g));
      EngineResult streamed = runStreamed(e, new InferenceRequest("b", p, g), new StreamRecorder(0));
      CompletableFuture<EngineResult> f = e.execute(new InferenceRequest("c", p, g), OutputListener.IGNORE);
      assertNotNull(f, "execute returned null");
      assertTrue(awaitCondition(f::isDone, patience()), "request c never completed");
      EngineResult withIgnore = f.join();
      for (EngineResult other : List.of(streamed, withIgnore)) {
        assertArrayEquals(plain.outputTokens(), other.outputTokens(),
            "execute(request) and execute(request, listener) gave different outputs for " + g);
        assertEquals(plain.text(), other.text());
        assertEquals(plain.promptTokens(), other.promptTokens());
      }
    }
  }

  @Test
  void aListenerThatThrowsNeitherBreaksTheRequestNorIsCalledAgain() {
    InferenceEngine e = createEngine();
    int[] p = prompt(22);
    GenerationParams g = GenerationParams.greedy(6);
    EngineResult plain = run(e, new InferenceRequest("a", p, g));
    // an exception, an Error (a listener's own bug, a stack overflow) and a checked exception
    // thrown undeclared (as code in a language without checked exceptions throws it): a throw
    // any way
    List<java.util.function.Supplier<Throwable>> throwables = List.of(
        () -> new IllegalStateException("the client went away"),
        () -> new StackOverflowError("the listener overflowed its stack"),
        () -> new java.io.IOException("the client's connection broke"));
    for (int i = 0; i < throwables.size(); i++) {
      java.util.function.Supplier<Throwable> thrown = throwables.get(i);
      String what = thrown.get().getClass().getSimpleName();
      AtomicInteger calls = new AtomicInteger();
      OutputListener throwing = (tokens, text) -> {
        calls.incrementAndGet();
        throw ThrowingCacheEventListener.<RuntimeException>undeclared(thrown.get());
      };
      InferenceRequest r = new InferenceRequest("b" + i, p, g);
      CompletableFuture<EngineResult> f = assertTimeoutPreemptively(FIRST_CALL_BOUND,
          () -> e.execute(r, throwing), "execute blocked the caller");
      assertNotNull(f, "execute returned null");
      assertTrue(awaitCondition(f::isDone, patience()),
          "a request whose listener threw " + what + " never completed");
      awaitCondition(() -> false, Duration.ofMillis(100)); // late calls would come now
      EngineResult result;
      try {
        result = f.join();
      } catch (CompletionException ex) {
        throw new AssertionError("a listener that threw " + what + " failed the request: "
            + ex.getCause(), ex);
      }
      assertArrayEquals(plain.outputTokens(), result.outputTokens(),
          "a listener that threw " + what + " changed the output");
      assertEquals(plain.text(), result.text());
      assertTrue(calls.get() <= 1,
          "the listener threw " + what + " and was called " + calls.get() + " times in all");
    }
  }
  /**
   * {@code execute} hands a request on and returns, also while the engine has more requests
   * than it runs at once: of 48 calls made back to back, half of them streamed, at most one
   * takes longer than {@link #EXECUTE_BOUND} (the node calls it on its request and transport
   * threads). One is forgiven, a hiccup of the machine (a garbage collection, a thread that lost
   * the processor); an engine that waits while it is busy waits in every later call. An engine
   * may refuse a request it has no room for, failing its future with an {@link EngineException}
   * ({@link io.github.prefixrouter.spi.EngineBusyException}), but not make the caller wait for
   * room.
   */
  @Test
  void executeReturnsAtOnceWhileTheEngineIsBusy() {
    InferenceEngine e = createEngine();
    run(e, new InferenceRequest("warm-up", prompt(30), GenerationParams.greedy(2)));
    int n = 48;
    List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
    List<String> slow = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      InferenceRequest r = new InferenceRequest("busy" + i, prompt(400 + i),
          GenerationParams.greedy(16));
      OutputListener l = i % 2 == 0 ? null : new StreamRecorder(0);
      long[] took = new long[1];
      // timed on the calling thread, so the time does not include starting it
      CompletableFuture<EngineResult> f = assertTimeoutPreemptively(FIRST_CALL_BOUND, () -> {
        long start = System.nanoTime();
        try {
          return l == null ? e.execute(r) : e.execute(r, l);
        } finally {
          took[0] = System.nanoTime() - start;
        }
      }, () -> "execute of request " + r.id() + " blocked the caller, with "
          + fs.stream().filter(x -> !x.isDone()).count() + " requests unfinished before it");
      assertNotNull(f, "execute returned null");
      if (took[0] > EXECUTE_BOUND.toNanos()) {
        slow.add(r.id() + " took " + took[0] / 1_000_000 + " ms, with "
            + fs.stream().filter(x -> !x.isDone()).count() + " requests unfinished before it");
        assertTrue(slow.size() < 2, "execute blocked the caller for more than "
            + EXECUTE_BOUND.toMillis() + " ms twice: " + slow);
      }
      fs.add(f);
    }
    assertTrue(awaitCondition(() -> fs.stream().allMatch(CompletableFuture::isDone), patience()),
        "a request never completed");
    for (CompletableFuture<EngineResult> f : fs) {
      try {
        assertNotNull(f.join());
      } catch (CompletionException ex) {
        assertInstanceOf(EngineException.class, ex.getCause(),
            "a request refused for lack of room must fail with EngineException");
      }
    }
  }

  /**
   * {@code load()} reports the requests waiting for a slot as queued: of 48 requests handed on
   * back to back, as in {@link #executeReturnsAtOnceWhileTheEngineIsBusy}, more than the engine
   * runs at once, some wait, and {@code load()}, read after each call and while they run, shows
   * at least one of them in {@code queueDepth}. The node's push-back looks at the queue alone: an
   * engine that counts its waiting requests as running ({@code new EngineLoad(0, outstanding)})
   * or reports no load (the default, {@link EngineLoad#IDLE}) is never pushed back for, its
   * node taking on its peers' forwards however many wait. An engine that refuses the requests it
   * has no room for instead ({@link io.github.prefixrouter.spi.EngineBusyException}), which the
   * node answers as push-back, passes too. Skipped for an engine declared to keep no queue of
   * its own ({@link #reportsQueuedRequests()}).
   */
  @Test
  void loadReportsTheRequestsWaitingForASlotAsQueued() {
    Assumptions.assumeTrue(reportsQueuedRequests(), "the engine keeps no queue of its own");
    InferenceEngine e = createEngine();
    run(e, new InferenceRequest("warm-up", prompt(30), GenerationParams.greedy(2)));
    int n = 48;
    List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
    AtomicReference<EngineLoad> deepest = new AtomicReference<>(EngineLoad.IDLE);
    AtomicReference<EngineLoad> largest = new AtomicReference<>(EngineLoad.IDLE);
    Runnable sample = () -> {
      EngineLoad l = e.load();
      if (l != null && l.queueDepth() > deepest.get().queueDepth()) {
        deepest.set(l);
      }
      if (l != null && l.total() > largest.get().total()) {
        largest.set(l);
      }
    };
    for (int i = 0; i < n; i++) {
      InferenceRequest r = new InferenceRequest("queued" + i, prompt(600 + i),
          GenerationParams.greedy(16));
      fs.add(assertTimeoutPreemptively(FIRST_CALL_BOUND, () -> e.execute(r),
          "execute blocked the caller"));
      sample.run();
    }
    assertTrue(awaitCondition(() -> {
      sample.run();
      return fs.stream().allMatch(CompletableFuture::isDone);
    }, patience()), "a request never completed");
    long refused = fs.stream().filter(f -> f.handle((v, err) -> err != null
        && (err instanceof CompletionException ? err.getCause() : err)
            instanceof io.github.prefixrouter.spi.EngineBusyException).join()).count();
    assertTrue(deepest.get().queueDepth() >= 1 || refused > 0, n + " requests handed on back to"
        + " back, none refused as busy, and load() never reported one waiting (queueDepth 0;"
        + " the largest load it reported: " + largest.get() + "): a node never pushes back for"
        + " an engine whose load() reports no queue");
  }

  /**
   * {@code load()} is back to no load once every request has ended: completed (plain and
   * streamed), cancelled (queued or running) or failed. A request the load kept counting would
   * stay in the load the node advertises, and the node's peers would send it less for ever.
   */
  @Test
  void loadReturnsToIdleOnceEveryRequestHasEnded() {
    InferenceEngine e = createEngine();
    int n = 8;
    List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      InferenceRequest r = new InferenceRequest("i" + i, prompt(500 + i),
          GenerationParams.greedy(8));
      fs.add(i % 2 == 0 ? e.execute(r) : startStreamed(e, r, new StreamRecorder(0)));
    }
    e.cancel("i" + (n - 1)); // most likely queued
    e.cancel("i0"); // most likely running
    assertTrue(awaitCondition(() -> fs.stream().allMatch(CompletableFuture::isDone), patience()),
        "a request never completed");
    if (failNextRequest(e)) {
      CompletableFuture<EngineResult> f = e.execute(
          new InferenceRequest("i-failed", prompt(520), GenerationParams.DEFAULT));
      assertTrue(awaitCondition(f::isDone, patience()), "the failing request never completed");
    }
    assertTrue(awaitCondition(() -> e.load().total() == 0, Duration.ofSeconds(5)),
        "every request ended, and load() still reports " + e.load());
  }

  /**
   * A stop token id ends a streamed output as it ends a plain one, and no more tokens than that
   * output has are streamed: the node has sent the client each piece by the time the result
   * comes.
   */
  @Test
  void aStopTokenIdEndsTheStreamedOutputWithIt() {
    InferenceEngine e = createEngine();
    int[] p = prompt(8);
    int[] plain = run(e, new InferenceRequest("sst1", p, GenerationParams.greedy(8)))
        .outputTokens();
    Assumptions.assumeTrue(plain.length >= 3, "the engine gives too few token ids to tell");
    int stop = plain[2];
    int first = 0;
    while (plain[first] != stop) {
      first++;
    }
    int[] cut = java.util.Arrays.copyOf(plain, first + 1);
    GenerationParams withStop = GenerationParams.greedy(8).withStops(List.of(), List.of(stop));
    StreamRecorder rec = new StreamRecorder(0);
    EngineResult r = runStreamed(e, new InferenceRequest("sst2", p, withStop), rec);
    assertArrayEquals(cut, r.outputTokens(),
        "the streamed output must end with the first stop token id " + stop + " of " + withStop);
    // what is streamed is checked by streamedOutputIsAPrefixOfTheResult: here how much
    int[] streamed = rec.tokens();
    assertTrue(streamed.length <= cut.length, "the engine streamed "
        + java.util.Arrays.toString(streamed) + ", past its stop at " + stop + ": the output is "
        + java.util.Arrays.toString(cut));
  }

  /**
   * An engine whose cache fills up reports the removals that make room: filled with distinct
   * prompts beyond the capacity its test declares ({@link #cacheCapacityTokens()}), the blocks
   * its events leave cached (stores minus removals, a removed block taking the blocks
   * continuing it along) fit in that capacity, and every removal names a block reported stored.
   * An engine that evicts without saying so has the node's tree mirror blocks long gone.
   */
  @Test
  void fillingTheCacheBeyondItsCapacityReportsRemovals() {
    long capacity = cacheCapacityTokens();
    Assumptions.assumeTrue(capacity > 0, "the test does not declare the engine's cache capacity");
    InferenceEngine e = createEngine();
    Assumptions.assumeTrue(e.publishesCacheEvents(), "engine publishes no cache events");
    EventChains chains = new EventChains();
    e.setCacheEventListener(chains);
    GenerationParams g = GenerationParams.greedy(1);
    List<int[]> ran = new ArrayList<>();
    int[] first = prompt(600);
    ran.add(concat(first, run(e, new InferenceRequest("fill0", first, g)).outputTokens()));
    assertTrue(awaitCondition(() -> chains.blockSize() > 0, Duration.ofSeconds(10)),
        "no block was stored for a " + first.length + "-token prompt");
    int b = chains.blockSize();
    int perPrompt = promptTokens() / b;
    Assumptions.assumeTrue(perPrompt > 0, "a prompt holds no full block of " + b + " tokens");
    long capacityBlocks = capacity / b;
    long prompts = capacityBlocks / perPrompt + 3;
    for (long i = 1; i < prompts; i++) {
      int[] p = prompt(600 + i);
      ran.add(concat(p, run(e, new InferenceRequest("fill" + i, p, g)).outputTokens()));
    }
    // removals may arrive asynchronously, as vLLM's do over ZeroMQ
    awaitCondition(() -> chains.roughlyLiveBlocks() <= capacityBlocks, Duration.ofSeconds(10));
    Replay replay = chains.replay(ran);
    assertEquals(List.of(), replay.unknownRemovals(), "removals the node's tree cannot apply");
    assertTrue(replay.liveBlocks() <= capacityBlocks, prompts + " prompts of " + perPrompt
        + " blocks each were run on a cache of " + capacityBlocks + " blocks, and its events "
        + "leave " + replay.liveBlocks() + " blocks cached (" + chains.storedBlocks()
        + " stored, " + replay.removedBlocks() + " removed)");
  }

  /**
   * A cache event listener that throws on every event, in turn an {@link Error}, an exception
   * and a checked exception undeclared ({@link ThrowingCacheEventListener}), breaks nothing: every request completes
   * normally with the output of an engine without the listener, the cache still serves a
   * repeated prompt, the load returns to no load, and the engine goes on calling the listener
   * for later events. The prompts fill the cache twice over when its capacity is declared, so
   * that the listener throws on removals too. (A throw out of a store left a request's future
   * open, or its slot taken, in the engines of this repository, and killed the thread of vLLM's
   * event subscriber.)
   */
  @Test
  void aCacheEventListenerThatThrowsBreaksNeitherTheRequestsNorLaterEvents() {
    InferenceEngine e = createEngine();
    Assumptions.assumeTrue(e.publishesCacheEvents(), "engine publishes no cache events");
    InferenceEngine quiet = createEngine();
    ThrowingCacheEventListener throwing = new ThrowingCacheEventListener();
    e.setCacheEventListener(throwing);
    long capacity = cacheCapacityTokens();
    int prompts = capacity > 0 ? (int) Math.min(10_000, 2 * capacity / promptTokens() + 2) : 3;
    GenerationParams g = GenerationParams.greedy(2);
    for (int i = 0; i < prompts; i++) {
      int[] p = prompt(700 + i);
      // the engine without the listener runs each prompt while the one with it does
      InferenceRequest q = new InferenceRequest("q" + i, p, g);
      CompletableFuture<EngineResult> quietRun = assertTimeoutPreemptively(FIRST_CALL_BOUND,
          () -> quiet.execute(q), "execute blocked the caller");
      assertNotNull(quietRun, "execute returned null");
      EngineResult got;
      try {
        got = run(e, new InferenceRequest("t" + i, p, g));
      } catch (CompletionException ex) {
        throw new AssertionError("a cache event listener that throws failed request t" + i
            + ": " + ex.getCause(), ex);
      }
      assertTrue(awaitCondition(quietRun::isDone, patience()), "request q" + i
          + " never completed");
      EngineResult expected = quietRun.join();
      assertArrayEquals(expected.outputTokens(), got.outputTokens(),
          "a cache event listener that throws changed the output of request t" + i);
      assertEquals(expected.text(), got.text());
    }
    int[] last = prompt(700 + prompts - 1);
    EngineResult again = run(e, new InferenceRequest("t-again", last, g));
    if (again.cachedPromptTokens() >= 0) {
      assertTrue(again.cachedPromptTokens() > 0,
          "with a cache event listener that throws, a repeated prompt no longer hits the cache");
    }
    assertTrue(awaitCondition(() -> e.load().total() == 0, Duration.ofSeconds(5)),
        "every request ended, and load() still reports " + e.load());
    // each distinct prompt starts a chain of its own: one store at least each
    assertTrue(awaitCondition(() -> throwing.calls() >= prompts, Duration.ofSeconds(10)),
        "the engine called the listener " + throwing.calls() + " times for " + prompts
            + " distinct prompts: it stopped calling it after it threw");
  }
}
