package io.github.prefixrouter.engine.reference;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.internal.GuardedClock;
import io.github.prefixrouter.internal.PromptArrays;
import io.github.prefixrouter.internal.engine.RunsById;
import io.github.prefixrouter.internal.stop.StopMatcher;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.InvalidRequestException;
import java.util.List;
import java.util.Objects;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A real but tiny in-process inference engine, <strong>for tests and demos only</strong>: it runs
 * a small decoder-only transformer with fixed-seed random weights (its answers are deterministic
 * but meaningless) and keeps a prefix KV cache, so a request whose prompt starts with a cached
 * prefix really skips that part of the prefill computation, as vLLM or SGLang would.
 *
 * <ul>
 *   <li><b>Model</b>: by default 2 layers, model width 64, 4 heads, feed-forward width 256 and
 *       1,024 embedding buckets; any token id is accepted (ids are hashed into buckets). The
 *       weights come from {@link Builder#seed}, so engines with the same settings give
 *       bit-identical outputs in any process.
 *   <li><b>Prefix cache</b>: full blocks of {@link Builder#blockSize} tokens, at most
 *       {@link Builder#cacheCapacityTokens} tokens, LRU eviction of leaf blocks. When a whole
 *       prompt is cached, the last token is still evaluated (its logits start decoding), as in
 *       vLLM. Blocks are published as vLLM-shaped cache events ({@link #publishesCacheEvents()}
 *       is true), so a node can run its local tree in engine-driven mode. A cache event
 *       listener that throws (an exception or an {@link Error}) is logged and still called for
 *       later events; the request whose change it was told of runs on and completes.
 *   <li><b>Decoding</b>: greedy when {@code temperature} is 0; otherwise nucleus sampling drawn
 *       from the request's seed, so it is deterministic too. Generated tokens are ids in
 *       {@code [0, vocabBuckets)}; the text is empty (there is no tokenizer). Decoding ends
 *       after the first token that is one of the request's
 *       {@link GenerationParams#stopTokenIds}; stop strings need text, which it reads only
 *       when given the text of each token ({@link Builder#stopText}), else the node cuts them.
 *   <li><b>Streaming</b>: {@link #execute(InferenceRequest, OutputListener)} gives the listener
 *       each token as soon as it is decoded, one call per token (its text empty, as the
 *       result's), on the thread that runs the request, so the pieces are the whole output and
 *       all arrive before the future completes. A listener that throws is not called again;
 *       the request runs on and completes as it would have.
 *   <li><b>Work counters</b>: {@link #stats()} counts evaluated positions and multiply-adds, so
 *       tests and demos can show the saving of prefix reuse without timing anything.
 *   <li><b>Threads</b>: requests run on the executor given to {@link Builder#executor}; without
 *       one, the engine creates {@link Builder#threads} daemon threads named
 *       {@code reference-engine-N} and stops them on {@link #close()}. The engine is
 *       thread-safe, as {@link InferenceEngine} requires; arguments must not be null.
 * </ul>
 */
public final class ReferenceEngine implements InferenceEngine, AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(ReferenceEngine.class);

  private final TinyTransformer model;
  private final PrefixKvCache cache;
  private final Executor executor;
  private final ExecutorService ownedExecutor;
  /** The host's clock, read through its guard: a reading never throws. */
  private final Clock clock;
  /** The text of one output token, for stop strings; null: none. */
  private final java.util.function.IntFunction<String> stopText;
  private final int maxPromptTokens;
  private final int maxOutputTokens;
  private final AtomicInteger queued = new AtomicInteger();
  private final AtomicInteger running = new AtomicInteger();
  /** The requests queued or running by id: ids are unique per origin only, so a few may share one. */
  private final RunsById<Job> jobs = new RunsById<>();
  private final AtomicBoolean closed = new AtomicBoolean();
  private final AtomicLong requests = new AtomicLong();
  private final AtomicLong promptTokens = new AtomicLong();
  private final AtomicLong cachedPromptTokens = new AtomicLong();
  private final AtomicLong evaluatedPositions = new AtomicLong();
  private final AtomicLong generatedTokens = new AtomicLong();
  private final AtomicLong multiplyAdds = new AtomicLong();
  private final AtomicBoolean listenerSet = new AtomicBoolean();
  /** Runs in {@link #execute} after the closed check, before the job is registered; tests only. */
  Runnable beforeRegister = () -> {};

  private ReferenceEngine(Builder b) {
    this.clock = GuardedClock.of("reference engine", b.clock);
    this.model = new TinyTransformer(b.seed, b.layers, b.modelDim, b.heads, b.ffnDim, b.vocabBuckets);
    this.cache = new PrefixKvCache(b.blockSize, Math.max(1, b.cacheCapacityTokens / b.blockSize));
    this.stopText = b.stopText;
    this.maxPromptTokens = b.maxPromptTokens;
    this.maxOutputTokens = b.maxOutputTokens;
    if (b.executor != null) {
      this.executor = b.executor;
      this.ownedExecutor = null;
    } else {
      AtomicInteger n = new AtomicInteger();
      this.ownedExecutor =
          Executors.newFixedThreadPool(
              b.threads,
              r -> {
                Thread t = new Thread(r, "reference-engine-" + n.incrementAndGet());
                t.setDaemon(true);
                return t;
              });
      this.executor = ownedExecutor;
    }
  }

  /**
   * A builder with the default (tiny) model.
   *
   * @return a new builder
   */
  public static Builder builder() {
    return new Builder();
  }

  @Override
  public CompletableFuture<EngineResult> execute(InferenceRequest request) {
    return execute(request, OutputListener.IGNORE);
  }

  /**
   * Runs one request and gives {@code listener} each generated token as it is decoded.
   *
   * @param request the request; never null
   * @param listener where to give each token; never null
   * @return a future completed once with the result, or exceptionally with an
   *     {@link EngineException}
   */
  @Override
  public CompletableFuture<EngineResult> execute(InferenceRequest request, OutputListener listener) {
    Objects.requireNonNull(request, "request");
    Objects.requireNonNull(listener, "listener");
    CompletableFuture<EngineResult> f = new CompletableFuture<>();
    if (closed.get()) {
      f.completeExceptionally(new EngineException("engine closed", true));
      return f;
    }
    if (request.length() > maxPromptTokens) {
      f.completeExceptionally(new InvalidRequestException(
          "request " + request.id() + ": prompt of " + request.length() + " tokens exceeds maxPromptTokens "
              + maxPromptTokens));
      return f;
    }
    if (request.params().maxTokens() > maxOutputTokens) {
      f.completeExceptionally(new InvalidRequestException(
          "request " + request.id() + ": maxTokens " + request.params().maxTokens()
              + " exceeds maxOutputTokens " + maxOutputTokens));
      return f;
    }
    beforeRegister.run();
    Job job = new Job(request, f, listener);
    jobs.add(request.id(), job);
    f.whenComplete((r, e) -> jobs.remove(request.id(), job));
    // close() sets closed before it marks the registered jobs closing: a close that began since
    // the check above missed this job, but is seen here (else the job was registered in time)
    if (closed.get()) {
      job.closing = true;
    }
    queued.incrementAndGet();
    try {
      executor.execute(job);
    } catch (Throwable e) { // a host executor may fail in any way, not only by rejecting
      if (job.started.compareAndSet(false, true)) { // else it ran (or runs) and answers itself
        queued.decrementAndGet();
        if (job.closing) { // the engine's own threads stopped: a close, not a broken executor
          f.completeExceptionally(job.stopped());
        } else {
          String why = e instanceof RejectedExecutionException ? e.getMessage() : e.toString();
          f.completeExceptionally(new EngineException("engine cannot accept work: " + why, true, e));
        }
      }
    }
    return f;
  }

  private final class Job implements Runnable {
    final InferenceRequest request;
    final CompletableFuture<EngineResult> future;
    /** Where the tokens go as they are decoded; IGNORE once it threw. Only the job's thread. */
    OutputListener listener;
    volatile boolean cancelled;
    /** The engine closed while the request was queued or running. */
    volatile boolean closing;
    /** Set once, by the run or by an executor's failure to take the job: one of them answers. */
    final AtomicBoolean started = new AtomicBoolean();

    Job(InferenceRequest request, CompletableFuture<EngineResult> future, OutputListener listener) {
      this.request = request;
      this.future = future;
      this.listener = listener;
    }

    /**
     * Why the request stops before its end: cancelled (not retryable), else the engine closed
     * (retryable: another engine may run it).
     */
    EngineException stopped() {
      return cancelled
          ? new EngineException("request " + request.id() + " cancelled", false)
          : new EngineException("request " + request.id() + ": engine closed", true);
    }

    /** Gives the listener one decoded token; a listener that throws is not called again. */
    void stream(int token) {
      if (listener == OutputListener.IGNORE || future.isDone()) {
        return;
      }
      try {
        listener.onOutput(new int[] {token}, "");
      } catch (Throwable e) { // an Error, or a checked exception undeclared, left it open
        listener = OutputListener.IGNORE;
        log.warn("request {}: output listener failed, no more output streamed to it: {}",
            request.id(), e.toString());
      }
    }

    @Override
    public void run() {
      if (!started.compareAndSet(false, true)) {
        return; // the executor failed after all, and the request was answered then
      }
      queued.decrementAndGet();
      if (cancelled || closing || future.isDone()) {
        future.completeExceptionally(stopped());
        return;
      }
      running.incrementAndGet();
      EngineResult result = null;
      EngineException failure = null;
      try {
        result = compute(this);
      } catch (EngineException e) {
        failure = e;
      } catch (Throwable e) { // any other Error, or a checked exception undeclared, left it open
        failure = new EngineException("request " + request.id() + " failed in the engine: " + e, true, e);
      } finally {
        // no longer running when the future completes: its callbacks (the node's) read load()
        running.decrementAndGet();
      }
      if (failure != null) {
        future.completeExceptionally(failure);
      } else {
        future.complete(result);
      }
    }
  }

  private EngineResult compute(Job job) {
    InferenceRequest req = job.request;
    int[] tokens = PromptArrays.shared(req);
    int n = tokens.length;
    int bs = cache.blockSize();
    long t0 = clock.nanoTime();
    List<PrefixKvCache.Block> hit = cache.match(req.scope(), tokens);
    // the last prompt position is always evaluated: its logits start decoding
    int reused = Math.min(hit.size() * bs, n - 1);
    GenerationParams p = req.params();
    TinyTransformer.Sequence seq = model.new Sequence(n + p.maxTokens());
    for (int b = 0; b * bs < reused; b++) {
      PrefixKvCache.Block blk = hit.get(b);
      seq.load(b * bs, Math.min(bs, reused - b * bs), blk.keys, blk.values, 0);
    }
    float[] logits = new float[model.vocab];
    long macs = 0;
    for (int pos = reused; pos < n; pos++) {
      if (job.cancelled || job.closing) {
        throw job.stopped();
      }
      boolean last = pos == n - 1;
      seq.step(tokens[pos], last ? logits : null);
      macs += model.macsForPosition(pos) + (last ? model.macsForLogits() : 0);
    }
    // cache the prompt's full blocks that were not cached yet
    int fullBlocks = n / bs;
    if (fullBlocks > hit.size()) {
      int first = hit.size();
      int layers = model.layers;
      float[][] k = new float[layers][];
      float[][] v = new float[layers][];
      int from = first * bs * model.dim;
      int to = fullBlocks * bs * model.dim;
      for (int l = 0; l < layers; l++) {
        k[l] = java.util.Arrays.copyOfRange(seq.keys[l], from, to);
        v[l] = java.util.Arrays.copyOfRange(seq.values[l], from, to);
      }
      long parent = first == 0 ? CacheEventListener.NO_PARENT : hit.get(first - 1).hash;
      cache.store(req.scope(), tokens, first, fullBlocks - first, parent, k, v, model.dim);
    }
    long t1 = clock.nanoTime();
    int[] out = new int[p.maxTokens()];
    // reads stop strings in the output's text, when there are any and the text is known
    StopMatcher stops = p.stop().isEmpty() || stopText == null ? null : new StopMatcher(p.stop());
    SplittableRandom sampler = p.temperature() > 0 ? new SplittableRandom(p.seed()) : null;
    for (int i = 0; i < out.length; i++) {
      int next = sampler == null ? argmax(logits) : sample(logits, p, sampler);
      out[i] = next;
      job.stream(next);
      if (p.isStopToken(next) || (stops != null && completesStop(stops, next))) {
        out = java.util.Arrays.copyOf(out, i + 1); // the token that ended it is the last
        break;
      }
      if (i + 1 < out.length) {
        if (job.cancelled || job.closing) {
          throw job.stopped();
        }
        macs += model.macsForPosition(seq.length) + model.macsForLogits();
        seq.step(next, logits);
      }
    }
    long t2 = clock.nanoTime();
    requests.incrementAndGet();
    promptTokens.addAndGet(n);
    cachedPromptTokens.addAndGet(reused);
    evaluatedPositions.addAndGet((n - reused) + (out.length - 1));
    generatedTokens.addAndGet(out.length);
    multiplyAdds.addAndGet(macs);
    return new EngineResult(out, "", n, reused, Math.max(0, t1 - t0), Math.max(0, t2 - t1));
  }

  /**
   * Adds the text of {@code token} to the output's and says whether the text now contains a stop
   * string (the earlier text had none).
   */
  private boolean completesStop(StopMatcher stops, int token) {
    String t = stopText.apply(token);
    stops.push(t == null ? "" : t);
    return stops.stopped();
  }

  private static int argmax(float[] logits) {
    int best = 0;
    for (int i = 1; i < logits.length; i++) {
      if (logits[i] > logits[best]) {
        best = i;
      }
    }
    return best;
  }

  private static int sample(float[] logits, GenerationParams p, SplittableRandom rnd) {
    int v = logits.length;
    double[] prob = new double[v];
    double max = Double.NEGATIVE_INFINITY;
    for (float l : logits) {
      max = Math.max(max, l);
    }
    double sum = 0;
    for (int i = 0; i < v; i++) {
      prob[i] = TinyTransformer.expNonPositive((float) ((logits[i] - max) / p.temperature()));
      sum += prob[i];
    }
    Integer[] order = new Integer[v];
    for (int i = 0; i < v; i++) {
      order[i] = i;
    }
    java.util.Arrays.sort(order, (a, b) -> prob[a] != prob[b] ? Double.compare(prob[b], prob[a]) : Integer.compare(a, b));
    double mass = 0;
    int keep = 0;
    while (keep < v && (keep == 0 || mass < p.topP() * sum)) {
      mass += prob[order[keep]];
      keep++;
    }
    double u = rnd.nextDouble() * mass;
    double acc = 0;
    for (int i = 0; i < keep; i++) {
      acc += prob[order[i]];
      if (u < acc) {
        return order[i];
      }
    }
    return order[keep - 1];
  }

  @Override
  public EngineLoad load() {
    return new EngineLoad(Math.max(0, queued.get()), Math.max(0, running.get()));
  }

  /**
   * Stops the queued or running requests of that id (ids are unique per origin only, so there
   * may be several); their futures fail with a non-retryable error.
   */
  @Override
  public void cancel(String requestId) {
    for (Job j : jobs.of(requestId)) {
      j.cancelled = true;
    }
  }

  @Override
  public boolean publishesCacheEvents() {
    return true;
  }

  /**
   * Reports every later change of the cache to {@code listener}, after telling it of the blocks
   * cached now (one store each, every block after its parent): replaying its events gives the
   * cached blocks also when it is set after requests ran.
   *
   * @param listener where to report the cache's blocks and their changes
   * @throws IllegalStateException if a listener was set before ("the cache event listener is
   *     already set")
   */
  @Override
  public void setCacheEventListener(CacheEventListener listener) {
    Objects.requireNonNull(listener, "listener");
    if (!listenerSet.compareAndSet(false, true)) { // one step: of two callers at once, one sets it
      throw new IllegalStateException("the cache event listener is already set");
    }
    cache.setListener(listener);
  }

  /**
   * The cache's block size in tokens.
   *
   * @return tokens per cache block
   */
  public int blockSize() {
    return cache.blockSize();
  }

  /** Drops the whole prefix cache (reported as an all-cleared event). */
  public void clearCache() {
    cache.clear();
  }

  /**
   * Work done since the engine was built.
   *
   * @return a snapshot of the counters
   */
  public Stats stats() {
    return new Stats(
        requests.get(),
        promptTokens.get(),
        cachedPromptTokens.get(),
        evaluatedPositions.get(),
        generatedTokens.get(),
        multiplyAdds.get(),
        cache.size() * (long) cache.blockSize(),
        cache.storedCount(),
        cache.evictedCount());
  }

  /** Checks the cache's structural invariants; returns a description of the problem or null. */
  String checkCacheInvariants() {
    return cache.checkInvariants();
  }

  /**
   * Stops accepting requests and, if the engine created its own threads, stops them; requests
   * still queued or running fail with a retryable error (on the host's executor, when it runs
   * them or at their next token), but those cancelled before, which fail as cancelled.
   */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    // before the interrupt of shutdownNow: a running request that it wakes (from a listener
    // that waits, say) must find the engine closing at its next token, not decode on to its end
    jobs.forEach(j -> j.closing = true);
    if (ownedExecutor != null) {
      for (Runnable r : ownedExecutor.shutdownNow()) {
        if (r instanceof Job j) {
          queued.decrementAndGet();
          // retryable, unless cancelled before: that request stays cancelled
          j.future.completeExceptionally(j.stopped());
        }
      }
    }
  }

  /**
   * Work counters.
   *
   * @param requests requests completed
   * @param promptTokens prompt tokens of those requests
   * @param cachedPromptTokens prompt tokens whose keys and values came from the prefix cache
   * @param evaluatedPositions positions run through the model (prompt and decode)
   * @param generatedTokens tokens generated
   * @param multiplyAdds multiply-add operations of the forward passes
   * @param cachedTokens tokens held in the prefix cache now
   * @param blocksStored blocks stored since start
   * @param blocksEvicted blocks evicted since start
   */
  public record Stats(
      long requests,
      long promptTokens,
      long cachedPromptTokens,
      long evaluatedPositions,
      long generatedTokens,
      long multiplyAdds,
      long cachedTokens,
      long blocksStored,
      long blocksEvicted) {}

  /** Configures a {@link ReferenceEngine}; {@link #build()} validates. */
  public static final class Builder {
    private long seed = 42L;
    private int layers = 2;
    private int modelDim = 64;
    private int heads = 4;
    private int ffnDim = 256;
    private int vocabBuckets = 1024;
    private int blockSize = 16;
    private int cacheCapacityTokens = 1 << 16;
    private int maxPromptTokens = 16384;
    private int maxOutputTokens = 1024;
    private int threads = 1;
    private Executor executor;
    private Clock clock = Clock.system();
    private java.util.function.IntFunction<String> stopText;

    private Builder() {}

    /**
     * Seed of the weights: engines that should give the same answers need the same seed.
     * Default 42.
     *
     * @param seed the weights' seed
     * @return this builder
     */
    public Builder seed(long seed) {
      this.seed = seed;
      return this;
    }

    /**
     * Transformer layers (1 to 64). Default 2.
     *
     * @param n the number of layers
     * @return this builder
     */
    public Builder layers(int n) {
      this.layers = n;
      return this;
    }

    /**
     * Model width, a multiple of {@link #heads} (4 to 4096). Default 64.
     *
     * @param n the width
     * @return this builder
     */
    public Builder modelDim(int n) {
      this.modelDim = n;
      return this;
    }

    /**
     * Attention heads. Default 4.
     *
     * @param n the number of heads
     * @return this builder
     */
    public Builder heads(int n) {
      this.heads = n;
      return this;
    }

    /**
     * Feed-forward width (1 to 16384). Default 256.
     *
     * @param n the width
     * @return this builder
     */
    public Builder ffnDim(int n) {
      this.ffnDim = n;
      return this;
    }

    /**
     * Embedding buckets token ids are hashed into; also the range of generated ids. Default 1,024.
     *
     * @param n the number of buckets
     * @return this builder
     */
    public Builder vocabBuckets(int n) {
      this.vocabBuckets = n;
      return this;
    }

    /**
     * Cache block size in tokens; match the node's block size. Default 16.
     *
     * @param n tokens per block
     * @return this builder
     */
    public Builder blockSize(int n) {
      this.blockSize = n;
      return this;
    }

    /**
     * Prefix cache capacity in tokens (rounded down to whole blocks). Default 65,536.
     *
     * @param n the capacity in tokens
     * @return this builder
     */
    public Builder cacheCapacityTokens(int n) {
      this.cacheCapacityTokens = n;
      return this;
    }

    /**
     * Longest prompt accepted; longer ones fail with an {@link InvalidRequestException} (the
     * request's fault, not retryable: the client API answers 400). Default 16,384.
     *
     * @param n the limit in tokens
     * @return this builder
     */
    public Builder maxPromptTokens(int n) {
      this.maxPromptTokens = n;
      return this;
    }

    /**
     * Largest {@code maxTokens} accepted; larger ones fail with an
     * {@link InvalidRequestException} (the request's fault, not retryable: the client API answers
     * 400). Default 1,024.
     *
     * @param n the limit in tokens
     * @return this builder
     */
    public Builder maxOutputTokens(int n) {
      this.maxOutputTokens = n;
      return this;
    }

    /**
     * Threads the engine creates when no executor is given. Default 1.
     *
     * @param n the number of threads
     * @return this builder
     */
    public Builder threads(int n) {
      this.threads = n;
      return this;
    }

    /**
     * Run requests on the host's executor (the engine then creates no thread). An executor that
     * refuses a request, or fails to take it in any other way, fails that request with a
     * retryable {@link EngineException} ("engine cannot accept work"); nothing stays queued.
     *
     * @param executor the executor, owned by the caller
     * @return this builder
     */
    public Builder executor(Executor executor) {
      this.executor = executor;
      return this;
    }

    /**
     * How the engine reads stop strings: the text of one output token id, as the node's
     * tokenizer gives it (token by token). With it, decoding also ends at the first token after
     * which the output's text contains one of the request's stop strings (that token is the
     * last of the output; the result's text stays empty: the text is the node's). Without it
     * (the default) the engine has no text and leaves stop strings to the node.
     *
     * @param tokenText the text of an output token id, or null for none
     * @return this builder
     */
    public Builder stopText(java.util.function.IntFunction<String> tokenText) {
      this.stopText = tokenText;
      return this;
    }

    /**
     * Clock for the reported prefill and decode times. Default {@link Clock#system()}. The
     * engine reads it through a guard, as a node reads its own: a reading that throws gives the
     * latest good reading instead (the first failure logged at ERROR, later ones at WARN as
     * their count reaches a power of two), so the request runs on and is answered with its
     * output; only its reported times are short. The engine reads the clock once as it is
     * built: a clock that throws then fails {@link #build()}.
     *
     * @param clock the clock
     * @return this builder
     */
    public Builder clock(Clock clock) {
      this.clock = clock;
      return this;
    }

    /**
     * Validates and builds.
     *
     * @return the engine
     * @throws IllegalArgumentException naming the first invalid setting
     * @throws IllegalStateException if the clock throws when read as the engine is built (its
     *     cause is what the clock threw)
     */
    public ReferenceEngine build() {
      range("layers", layers, 1, 64);
      range("modelDim", modelDim, 4, 4096);
      range("heads", heads, 1, modelDim);
      if (modelDim % heads != 0 || modelDim % 2 != 0) {
        throw new IllegalArgumentException(
            "modelDim must be even and divisible by heads, was modelDim=" + modelDim + " heads=" + heads);
      }
      range("ffnDim", ffnDim, 1, 16384);
      range("vocabBuckets", vocabBuckets, 2, 1 << 20);
      range("blockSize", blockSize, 1, 4096);
      range("cacheCapacityTokens", cacheCapacityTokens, blockSize, Integer.MAX_VALUE);
      range("maxPromptTokens", maxPromptTokens, 1, InferenceRequest.MAX_PROMPT_TOKENS);
      range("maxOutputTokens", maxOutputTokens, 1, GenerationParams.MAX_TOKENS_LIMIT);
      range("threads", threads, 1, 256);
      Objects.requireNonNull(clock, "clock");
      return new ReferenceEngine(this);
    }

    private static void range(String name, int v, int lo, int hi) {
      if (v < lo || v > hi) {
        throw new IllegalArgumentException(name + " must be between " + lo + " and " + hi + ", was " + v);
      }
    }
  }
}
