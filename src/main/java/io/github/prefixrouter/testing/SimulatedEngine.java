package io.github.prefixrouter.testing;

import com.google.common.math.LongMath;
import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.internal.GuardedClock;
import io.github.prefixrouter.internal.PromptArrays;
import io.github.prefixrouter.internal.engine.ParentsFirst;
import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.Scheduler;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.random.RandomGenerator;

/**
 * An {@link InferenceEngine} in simulated time, with a prefix (KV) cache shaped like vLLM's, for
 * tests and the cluster simulator.
 *
 * <h2>Model</h2>
 *
 * <ul>
 *   <li><b>KV cache.</b> Holds at most {@code capacityTokens / blockSize} full blocks of
 *       {@code blockSize} tokens. A block is identified by a chained 64-bit hash of its parent's
 *       id and its own tokens (seeded by {@link Builder#blockIdSeed}), so a block can only be hit
 *       together with the whole prefix before it. A prompt's trailing partial block is never
 *       cached, as in vLLM. The first block's id also covers the request's {@link CacheScope}
 *       (LoRA adapter, cache salt), as vLLM's extra keys do, so a prefix cached in one scope is
 *       never a hit in another; a stored chain's first blocks are reported with their scope.
 *   <li><b>Hits.</b> A request's cached prefix is its longest run of leading blocks held in the
 *       cache when it starts, capped so that at least one prompt token is computed (vLLM
 *       recomputes the last token of a fully cached prompt).
 *   <li><b>LRU at block granularity.</b> Only leaf blocks (no cached block continues them) that no
 *       running request pins can be evicted, least recently used first; evicting a leaf may turn
 *       its parent into a leaf. Blocks are "used" when a request that holds them starts and when
 *       it finishes.
 *   <li><b>Pinning.</b> A running request pins the blocks of its prompt (the cached ones from its
 *       start, the new ones from the end of its prefill) until it completes, fails or is
 *       cancelled; pinned blocks are never evicted. Space for the new blocks is reserved at start
 *       by evicting unpinned leaves; if not enough can be freed, only the blocks that fit are
 *       cached (the request still runs).
 *   <li><b>Queue and slots.</b> A FIFO queue feeds {@code slots} independent execution slots; a
 *       request in a slot takes {@code prefillOverhead + prefillPerToken × uncachedTokens} for its
 *       prefill, then {@code decodePerToken} per output token (times that would pass
 *       {@link Long#MAX_VALUE} ns are that). New blocks are stored (and announced) when the
 *       prefill ends. {@link #pendingWorkNanos()} sums the work queued and left in the slots.
 *   <li><b>Answers.</b> The output is {@code params.maxTokens()} token ids, a pure function of the
 *       prompt tokens and the {@link GenerationParams} (a hash), so the same request gives the same
 *       answer on every engine, whatever its cache or the routing. It ends early, after its first
 *       token that is one of the request's {@link GenerationParams#stopTokenIds} (the stops are
 *       not hashed: the output with stops is a prefix of the one without); stop strings need
 *       text, which this engine does not give, and are left to the node.
 *   <li><b>Streaming.</b> {@link #execute(InferenceRequest, OutputListener)} gives the output
 *       while it is decoded: a piece of {@link Builder#streamChunkTokens} tokens (default 4)
 *       each time that many have been decoded, the rest just before the result. The pieces
 *       concatenated are the result's tokens (the text is empty). Nothing extra is scheduled
 *       for a request nobody listens to.
 *   <li><b>Events.</b> With {@link #publishesCacheEvents()} (true unless disabled) the engine
 *       reports vLLM-shaped events to its {@link CacheEventListener}: stored runs of blocks with
 *       their parent and tokens, removed blocks (leaves, so each removal is a suffix of a cached
 *       chain), and clears. Replaying them yields exactly the engine's cached block set, also
 *       for a listener set after requests ran: it is first told of the blocks cached then (one
 *       store each, every block after its parent). A
 *       listener that throws (an exception or an {@link Error}) is called for later events all
 *       the same, and the request whose change it was told of runs on and completes.
 *   <li><b>Faults.</b> {@link #failNext(int)} and a failure probability make requests fail with a
 *       retryable {@link EngineException} once they reach a slot; {@link #stallNext(int)} and a
 *       stall probability make requests hold their slot and never complete until
 *       {@link #cancel(String) cancelled}.
 * </ul>
 *
 * <p>All time comes from the injected {@link Scheduler}; every future completes from a scheduled
 * task, never on the caller's thread, and outside the engine's lock, as the streamed pieces are
 * given, so that the host's callbacks and listeners never hold up the engine's other callers. A
 * request's pieces come one at a time, in order and before its result, also on a scheduler with
 * several threads. Methods are synchronized so a multi-threaded host may call
 * them, but a simulation normally drives everything from one {@link SimulatedScheduler} thread.
 * Arguments must not be null.
 */
public final class SimulatedEngine implements InferenceEngine {

  /** The most requests one engine runs at once ({@link Builder#slots}). */
  public static final int MAX_SLOTS = 4096;

  private final Scheduler scheduler;
  private final Clock clock;
  private final int blockSize;
  private final int capacityBlocks;
  private final int slots;
  private final long prefillOverheadNanos;
  private final long prefillNanosPerToken;
  private final long decodeNanosPerToken;
  private final boolean publishesEvents;
  private final long blockIdSeed;
  private final int vocabularySize;
  private final RandomGenerator random;
  private final double failureProbability;
  private final double stallProbability;
  private final int streamChunkTokens;
  /** The time between two streamed pieces: {@code streamChunkTokens} tokens' decode. */
  private final long streamStepNanos;

  private CacheEventListener listener = new CacheEventListener() {};
  private boolean listenerSet;

  /** Cached blocks by id. */
  private final Map<Long, Block> blocks = new HashMap<>();
  /** Unpinned leaf blocks, least recently used first. */
  private final TreeSet<Block> evictable = new TreeSet<>(SimulatedEngine::compareLru);
  private int reservedBlocks;
  private long useTick;
  private long blockSeq;

  private final ArrayDeque<Job> queue = new ArrayDeque<>();
  /** Jobs in a slot, in start order (several jobs may share a request id). */
  private final LinkedHashMap<Job, Boolean> running = new LinkedHashMap<>();
  private int failNext;
  private int stallNext;

  private long requests;
  private long completed;
  private long failed;
  private long cancelled;
  private long promptTokens;
  private long cachedPromptTokens;
  private long evictedBlocks;
  private long busyNanos;
  private long queueWaitNanos;

  private SimulatedEngine(Builder b) {
    this.scheduler = b.scheduler;
    this.clock = GuardedClock.of("simulated engine", b.clock);
    this.blockSize = b.blockSize;
    this.capacityBlocks = (int) (b.capacityTokens / b.blockSize);
    this.slots = b.slots;
    this.prefillOverheadNanos = b.prefillOverheadNanos;
    this.prefillNanosPerToken = b.prefillNanosPerToken;
    this.decodeNanosPerToken = b.decodeNanosPerToken;
    this.publishesEvents = b.publishesCacheEvents;
    this.blockIdSeed = b.blockIdSeed;
    this.vocabularySize = b.vocabularySize;
    this.random = b.random;
    this.failureProbability = b.failureProbability;
    this.stallProbability = b.stallProbability;
    this.streamChunkTokens = b.streamChunkTokens;
    this.streamStepNanos = LongMath.saturatedMultiply(decodeNanosPerToken, streamChunkTokens);
  }

  /**
   * A builder; {@link Builder#scheduler} is required.
   *
   * @return a new builder with the defaults below
   */
  public static Builder builder() {
    return new Builder();
  }

  // ---------------------------------------------------------------- InferenceEngine

  @Override
  public CompletableFuture<EngineResult> execute(InferenceRequest request) {
    return execute(request, OutputListener.IGNORE);
  }

  @Override
  public synchronized CompletableFuture<EngineResult> execute(InferenceRequest request,
      OutputListener listener) {
    Objects.requireNonNull(request, "request");
    Objects.requireNonNull(listener, "listener");
    requests++;
    Job job = new Job(request);
    job.listener = listener;
    job.enqueuedAt = clock.nanoTime();
    queue.addLast(job);
    scheduler.schedule(0, this::dispatch);
    return job.future;
  }

  @Override
  public synchronized EngineLoad load() {
    return new EngineLoad(queue.size(), running.size());
  }

  /**
   * The engine's outstanding work now, in simulated nanoseconds summed over its slots: what is
   * left of each running request's prefill and decode, plus each queued request's prefill of the
   * part of its prompt the cache lacks now (with the at-least-one-computed-token cap) and its
   * decode. A queued request is priced against the cache as it is now, so one whose prefix a
   * request ahead of it will cache counts as a miss; a stalled request counts nothing. With one
   * slot this is the time until a request queued now would start, but for that caveat.
   *
   * @return the outstanding work in nanoseconds, {@code >= 0}
   */
  public synchronized long pendingWorkNanos() {
    long now = clock.nanoTime();
    long work = 0;
    for (Job job : running.keySet()) {
      long total = LongMath.saturatedAdd(job.prefillNanos, job.decodeNanos);
      work = LongMath.saturatedAdd(work,
          Math.max(0, LongMath.saturatedSubtract(total,
              LongMath.saturatedSubtract(now, job.startedAt))));
    }
    for (Job job : queue) {
      InferenceRequest r = job.request;
      int[] tokens = PromptArrays.shared(r);
      int cached = Math.min(cachedPrefixTokens(r.scope(), tokens),
          ((tokens.length - 1) / blockSize) * blockSize);
      long prefill = LongMath.saturatedAdd(prefillOverheadNanos,
          LongMath.saturatedMultiply(prefillNanosPerToken, tokens.length - cached));
      work = LongMath.saturatedAdd(work, LongMath.saturatedAdd(prefill,
          LongMath.saturatedMultiply(decodeNanosPerToken, outputTokens(r))));
    }
    return work;
  }

  @Override
  public synchronized void cancel(String requestId) {
    Objects.requireNonNull(requestId, "requestId");
    boolean freed = false;
    for (Iterator<Job> it = queue.iterator(); it.hasNext(); ) {
      Job j = it.next();
      if (j.request.id().equals(requestId)) {
        it.remove();
        cancelled++;
        completeLater(j, null, cancelledException(requestId));
      }
    }
    for (Job j : new ArrayList<>(running.keySet())) {
      if (j.request.id().equals(requestId)) {
        if (j.timer != null) {
          j.timer.cancel();
        }
        finish(j);
        cancelled++;
        completeLater(j, null, cancelledException(requestId));
        freed = true;
      }
    }
    if (freed) {
      scheduler.schedule(0, this::dispatch);
    }
  }

  @Override
  public boolean publishesCacheEvents() {
    return publishesEvents;
  }

  @Override
  public synchronized void setCacheEventListener(CacheEventListener listener) {
    Objects.requireNonNull(listener, "listener");
    if (listenerSet) {
      throw new IllegalStateException("the cache event listener is already set");
    }
    this.listener = listener;
    this.listenerSet = true;
    if (!publishesEvents) {
      return;
    }
    // blocks cached before: one store each, every block after its parent
    for (Block b : ParentsFirst.order(blocks.values(), b -> b.parent)) {
      try {
        listener.onBlocksStored(b.scope, b.parent == null ? CacheEventListener.NO_PARENT
            : b.parent.id, new long[] {b.id}, b.tokens.clone());
      } catch (Throwable e) { // a checked exception undeclared too
        // a listener that throws is the host's bug; it is told of the later events all the same
      }
    }
  }

  // ---------------------------------------------------------------- fault injection

  /**
   * The next {@code n} requests to reach a slot fail with a retryable {@link EngineException}.
   *
   * @param n how many requests, {@code >= 0}; replaces any earlier count
   */
  public synchronized void failNext(int n) {
    if (n < 0) {
      throw new IllegalArgumentException("failNext count must be >= 0, was " + n);
    }
    failNext = n;
  }

  /**
   * The next {@code n} requests to reach a slot stall: they hold the slot and never complete
   * until cancelled.
   *
   * @param n how many requests, {@code >= 0}; replaces any earlier count
   */
  public synchronized void stallNext(int n) {
    if (n < 0) {
      throw new IllegalArgumentException("stallNext count must be >= 0, was " + n);
    }
    stallNext = n;
  }

  /**
   * Drops every cached block and reports {@link CacheEventListener#onAllCleared()}, as an engine
   * restart or a prefix-cache reset does.
   *
   * @throws IllegalStateException if a request is running (its blocks are pinned)
   */
  public synchronized void clearCache() {
    if (!running.isEmpty()) {
      throw new IllegalStateException(
          "cannot clear the cache while " + running.size() + " request(s) are running");
    }
    blocks.clear();
    evictable.clear();
    if (publishesEvents) {
      try {
        listener.onAllCleared();
      } catch (Throwable e) { // a checked exception undeclared too
        // a listener that throws is the host's bug; the cache is cleared all the same
      }
    }
  }

  // ---------------------------------------------------------------- introspection

  /**
   * The block size in tokens.
   *
   * @return tokens per block
   */
  public int blockSize() {
    return blockSize;
  }

  /**
   * The cache capacity in full blocks.
   *
   * @return how many full blocks the cache holds at most
   */
  public int capacityBlocks() {
    return capacityBlocks;
  }

  /**
   * The ids of the blocks cached now, sorted.
   *
   * @return a new sorted array of the cached blocks' ids
   */
  public synchronized long[] cachedBlockIds() {
    return blocks.keySet().stream().mapToLong(Long::longValue).sorted().toArray();
  }

  /**
   * Number of blocks cached now.
   *
   * @return the number of cached blocks
   */
  public synchronized int cachedBlocks() {
    return blocks.size();
  }

  /**
   * How many leading tokens of {@code tokens} the cache holds now (whole blocks, without the
   * at-least-one-computed-token cap that execution applies).
   *
   * @param tokens a prompt
   * @return the number of leading tokens of {@code tokens} in whole cached blocks
   */
  public synchronized int cachedPrefixTokens(int[] tokens) {
    return cachedPrefixTokens(CacheScope.DEFAULT, tokens);
  }

  /**
   * How many leading tokens of {@code tokens} the cache holds now for a request of
   * {@code scope}: the engine keys blocks by scope (LoRA adapter, cache salt) as vLLM does, so
   * blocks cached in another scope do not count.
   *
   * @param scope the request's cache scope
   * @param tokens a prompt
   * @return the number of leading tokens of {@code tokens} in whole cached blocks of the scope
   */
  public synchronized int cachedPrefixTokens(CacheScope scope, int[] tokens) {
    long parent = scopeSeed(scope);
    int n = tokens.length / blockSize;
    int matched = 0;
    for (int i = 0; i < n; i++) {
      long id = blockId(parent, tokens, i * blockSize);
      if (!blocks.containsKey(id)) {
        break;
      }
      parent = id;
      matched++;
    }
    return matched * blockSize;
  }

  /**
   * The engine's id of the {@code index}-th block of {@code tokens} (0-based).
   *
   * @param tokens a prompt
   * @param index the block's index, 0-based; the block must be full
   * @return the id the engine gives that block
   * @throws IllegalArgumentException as {@link #blockIdOf(CacheScope, int[], int)}
   */
  public long blockIdOf(int[] tokens, int index) {
    return blockIdOf(CacheScope.DEFAULT, tokens, index);
  }

  /**
   * The engine's id of the {@code index}-th block of {@code tokens} in a request of
   * {@code scope}.
   *
   * @param scope the request's cache scope
   * @param tokens a prompt
   * @param index the block's index, 0-based; the block must be full
   * @return the id the engine gives that block
   * @throws IllegalArgumentException if {@code index} is negative or the block is not a full
   *     block of {@code tokens}
   */
  public long blockIdOf(CacheScope scope, int[] tokens, int index) {
    if (index < 0 || (index + 1L) * blockSize > tokens.length) {
      throw new IllegalArgumentException(
          "block " + index + " is not a full block of a " + tokens.length + "-token prompt");
    }
    long parent = scopeSeed(scope);
    for (int i = 0; i <= index; i++) {
      parent = blockId(parent, tokens, i * blockSize);
    }
    return parent;
  }

  /**
   * Counters since creation.
   *
   * @return a snapshot of the counters
   */
  public synchronized Stats stats() {
    return new Stats(
        requests, completed, failed, cancelled, promptTokens, cachedPromptTokens, evictedBlocks,
        busyNanos, queueWaitNanos);
  }

  /**
   * Engine counters.
   *
   * @param requests requests accepted by {@link #execute}
   * @param completed requests that completed with a result
   * @param failed requests failed by fault injection
   * @param cancelled requests cancelled while queued or running
   * @param promptTokens prompt tokens of the requests that started
   * @param cachedPromptTokens of those, tokens served from the cache
   * @param evictedBlocks blocks evicted by LRU (not counting clears)
   * @param busyNanos slot time spent on prefill and decode of completed requests,
   *     {@code Long.MAX_VALUE} if larger
   * @param queueWaitNanos total time requests waited in the queue before reaching a slot,
   *     {@code Long.MAX_VALUE} if larger
   */
  public record Stats(
      long requests,
      long completed,
      long failed,
      long cancelled,
      long promptTokens,
      long cachedPromptTokens,
      long evictedBlocks,
      long busyNanos,
      long queueWaitNanos) {}

  /**
   * The deterministic answer this engine (and every other one) gives: {@code params.maxTokens()}
   * token ids derived from a hash of the prompt and the parameters (but for the stops), cut after
   * the first one that is a stop token id.
   *
   * @param promptTokens the prompt
   * @param params the generation parameters
   * @param vocabulary the output vocabulary size, as {@link Builder#vocabularySize}
   * @return the output token ids: {@code params.maxTokens()} of them, fewer if a stop token id
   *     ends them
   */
  public static int[] expectedOutput(int[] promptTokens, GenerationParams params, int vocabulary) {
    long h = 0x9E3779B97F4A7C15L;
    for (int t : promptTokens) {
      h = mix(h ^ t);
    }
    h = mix(h ^ params.maxTokens());
    h = mix(h ^ Double.doubleToLongBits(params.temperature()));
    h = mix(h ^ Double.doubleToLongBits(params.topP()));
    h = mix(h ^ params.seed());
    int[] out = new int[params.maxTokens()];
    for (int i = 0; i < out.length; i++) {
      h = mix(h + 0x9E3779B97F4A7C15L);
      out[i] = (int) Long.remainderUnsigned(h, vocabulary);
      if (params.isStopToken(out[i])) {
        return Arrays.copyOf(out, i + 1);
      }
    }
    return out;
  }

  // ---------------------------------------------------------------- execution

  private synchronized void dispatch() {
    while (running.size() < slots && !queue.isEmpty()) {
      start(queue.pollFirst());
    }
  }

  private void start(Job job) {
    running.put(job, Boolean.TRUE);
    job.startedAt = clock.nanoTime();
    // saturated as the other times: requests that waited near the end of time overflowed it
    queueWaitNanos = LongMath.saturatedAdd(queueWaitNanos,
        LongMath.saturatedSubtract(clock.nanoTime(), job.enqueuedAt));
    InferenceRequest r = job.request;
    if (failNext > 0 || (failureProbability > 0 && random.nextDouble() < failureProbability)) {
      if (failNext > 0) {
        failNext--;
      }
      running.remove(job);
      failed++;
      completeLater(
          job,
          null,
          new EngineException("injected failure of request " + r.id(), true));
      scheduler.schedule(0, this::dispatch);
      return;
    }
    boolean stall =
        stallNext > 0 || (stallProbability > 0 && random.nextDouble() < stallProbability);
    if (stallNext > 0) {
      stallNext--;
    }
    int[] tokens = PromptArrays.shared(r);
    int fullBlocks = tokens.length / blockSize;
    // longest cached run of leading blocks, pinned for the request's lifetime
    long tick = ++useTick;
    long parent = scopeSeed(r.scope()); // what the first block's id continues
    int matched = 0;
    while (matched < fullBlocks) {
      long id = blockId(parent, tokens, matched * blockSize);
      Block b = blocks.get(id);
      if (b == null) {
        break;
      }
      pin(b, tick);
      job.pinned.add(b);
      parent = id;
      matched++;
    }
    job.matchedBlocks = matched;
    int cached = Math.min(matched * blockSize, ((tokens.length - 1) / blockSize) * blockSize);
    job.cachedTokens = cached;
    promptTokens += tokens.length;
    cachedPromptTokens += cached;
    // reserve room for the new full blocks, evicting unpinned LRU leaves (summed in a long: near
    // 2^31 blocks an int sum overflowed to a negative one, and the evictions were skipped)
    int need = fullBlocks - matched;
    while ((long) blocks.size() + reservedBlocks + need > capacityBlocks && !evictable.isEmpty()) {
      evictOne();
    }
    job.reserved = Math.max(0, Math.min(need, capacityBlocks - blocks.size() - reservedBlocks));
    reservedBlocks += job.reserved;
    if (stall) {
      return; // holds its slot, pins and reservation until cancelled
    }
    // saturated: an overflow gave a negative delay, which the scheduler refused, leaving the
    // request in its slot for ever
    long prefill = LongMath.saturatedAdd(prefillOverheadNanos,
        LongMath.saturatedMultiply(prefillNanosPerToken, tokens.length - cached));
    long decode = LongMath.saturatedMultiply(decodeNanosPerToken, outputTokens(r));
    job.prefillNanos = prefill;
    job.decodeNanos = decode;
    job.timer = scheduler.schedule(prefill, () -> prefillDone(job));
  }

  /** The tokens the request will generate: up to its first stop token id, else maxTokens. */
  private int outputTokens(InferenceRequest r) {
    return r.params().stopTokenIds().isEmpty() ? r.params().maxTokens()
        : expectedOutput(PromptArrays.shared(r), r.params(), vocabularySize).length;
  }

  private synchronized void prefillDone(Job job) {
    if (!running.containsKey(job)) {
      return;
    }
    storeNewBlocks(job);
    job.timer = scheduler.schedule(job.decodeNanos, () -> decodeDone(job));
    if (job.listener != OutputListener.IGNORE) {
      InferenceRequest r = job.request;
      job.output = expectedOutput(PromptArrays.shared(r), r.params(), vocabularySize);
      scheduler.schedule(streamStepNanos, () -> streamStep(job));
    }
  }

  /** Gives the next {@code streamChunkTokens} decoded tokens, unless they end the output. */
  private void streamStep(Job job) {
    synchronized (this) {
      if (!running.containsKey(job)) {
        return;
      }
      int next = job.streamed + streamChunkTokens;
      if (next >= job.output.length) {
        return; // the last piece goes with the result
      }
      give(job, next);
    }
    handOver(job);
    synchronized (this) {
      // set after the listener returned, even if it ended the request (the step then does
      // nothing), as it always was: a simulation's tasks keep their order and count
      scheduler.schedule(streamStepNanos, () -> streamStep(job));
    }
  }

  /** Queues the output up to {@code end} for the listener, to be handed over by handOver. */
  private void give(Job job, int end) {
    if (end <= job.streamed) {
      return;
    }
    int[] piece = Arrays.copyOfRange(job.output, job.streamed, end);
    job.streamed = end;
    job.outbox.add(() -> {
      if (job.listenerFailed) {
        return;
      }
      try {
        job.listener.onOutput(piece, "");
      } catch (Throwable e) { // an Error, or a checked exception undeclared, left it unfinished
        job.listenerFailed = true; // a listener must not throw: it gets no more
      }
    });
  }

  /**
   * Runs what the job has queued for its host (pieces, then its result), outside the engine's
   * lock: the listener and the future's callbacks are the host's code, and the engine's other
   * callers (load() first) must not wait for them. One thread at a time per job, in the order
   * queued: a thread that finds another at it leaves its items to it, so the pieces of a request
   * come in order and before its result even on a multi-threaded scheduler. An item that throws
   * (the scheduler refusing the next request's task) does not keep the items after it, which
   * another thread may have left to this one, from being handed over: they all are, and the
   * first failure is thrown on afterwards.
   */
  private static void handOver(Job job) {
    Throwable failure = null;
    while (!job.outbox.isEmpty() && job.handingOver.compareAndSet(false, true)) {
      try {
        Runnable r;
        while ((r = job.outbox.poll()) != null) {
          try {
            r.run();
          } catch (RuntimeException | Error e) {
            if (failure == null) {
              failure = e;
            }
          }
        }
      } finally {
        job.handingOver.set(false);
      }
    }
    if (failure instanceof RuntimeException e) {
      throw e;
    }
    if (failure != null) {
      throw (Error) failure;
    }
  }

  private void decodeDone(Job job) {
    EngineResult result;
    synchronized (this) {
      if (!running.containsKey(job)) {
        return;
      }
      finish(job);
      completed++;
      busyNanos = LongMath.saturatedAdd(busyNanos,
          LongMath.saturatedAdd(job.prefillNanos, job.decodeNanos));
      InferenceRequest r = job.request;
      if (job.output != null) {
        give(job, job.output.length);
      }
      result =
          new EngineResult(
              job.output != null
                  ? job.output.clone()
                  : expectedOutput(PromptArrays.shared(r), r.params(), vocabularySize),
              "",
              r.length(),
              job.cachedTokens,
              job.prefillNanos,
              job.decodeNanos);
    }
    // after the last piece, outside the lock, as every other completion; the next queued
    // request starts after the future's callbacks ran
    job.outbox.add(() -> {
      job.future.complete(result);
      dispatch();
    });
    handOver(job);
  }

  /** Inserts the reserved new blocks after the prefill and announces them. */
  private void storeNewBlocks(Job job) {
    int[] tokens = PromptArrays.shared(job.request);
    int end = job.matchedBlocks + job.reserved;
    long parent =
        job.matchedBlocks == 0
            ? CacheEventListener.NO_PARENT
            : job.pinned.get(job.matchedBlocks - 1).id;
    long tick = ++useTick;
    long runParent = parent;
    int runStart = -1;
    List<Long> newIds = new ArrayList<>();
    for (int i = job.matchedBlocks; i < end; i++) {
      long id = blockId(i == 0 ? scopeSeed(job.request.scope()) : parent, tokens, i * blockSize);
      Block b = blocks.get(id);
      if (b == null) {
        Block p = parent == CacheEventListener.NO_PARENT ? null : blocks.get(parent);
        b = new Block(id, p, blockSeq++, job.request.scope(),
            Arrays.copyOfRange(tokens, i * blockSize, (i + 1) * blockSize));
        blocks.put(id, b);
        if (p != null) {
          p.children++;
          evictable.remove(p);
        }
        if (runStart < 0) {
          runStart = i;
          runParent = parent;
        }
        newIds.add(id);
      }
      pin(b, tick);
      job.pinned.add(b);
      parent = id;
    }
    reservedBlocks -= job.reserved;
    job.reserved = 0;
    if (!newIds.isEmpty() && publishesEvents) {
      long[] ids = newIds.stream().mapToLong(Long::longValue).toArray();
      int[] blockTokens =
          Arrays.copyOfRange(tokens, runStart * blockSize, (runStart + ids.length) * blockSize);
      try {
        listener.onBlocksStored(job.request.scope(), runParent, ids, blockTokens);
      } catch (Throwable e) { // a checked exception undeclared too
        // thrown on, it left the request in its slot, never completed, and the slot taken
      }
    }
  }

  /** Releases a job's slot, pins and reservation (blocks stay cached). */
  private void finish(Job job) {
    running.remove(job);
    long tick = ++useTick;
    for (int i = job.pinned.size() - 1; i >= 0; i--) {
      Block b = job.pinned.get(i);
      evictable.remove(b);
      b.lastUsed = tick;
      b.pins--;
      if (b.pins == 0 && b.children == 0 && blocks.get(b.id) == b) {
        evictable.add(b);
      }
    }
    job.pinned.clear();
    reservedBlocks -= job.reserved;
    job.reserved = 0;
  }

  private void pin(Block b, long tick) {
    if (b.pins == 0) {
      evictable.remove(b);
    }
    b.pins++;
    b.lastUsed = tick;
  }

  private void evictOne() {
    Block victim = evictable.pollFirst();
    blocks.remove(victim.id);
    evictedBlocks++;
    Block p = victim.parent;
    if (p != null) {
      p.children--;
      if (p.children == 0 && p.pins == 0) {
        evictable.add(p);
      }
    }
    if (publishesEvents) {
      try {
        listener.onBlocksRemoved(new long[] {victim.id});
      } catch (Throwable e) { // a checked exception undeclared too
        // thrown on, it left the request starting in its slot, never completed
      }
    }
  }

  private void completeLater(Job job, EngineResult result, Throwable error) {
    scheduler.schedule(
        0,
        () -> {
          // after any piece still being handed over
          job.outbox.add(() -> {
            if (error != null) {
              job.future.completeExceptionally(error);
            } else {
              job.future.complete(result);
            }
          });
          handOver(job);
        });
  }

  private static EngineException cancelledException(String id) {
    return new EngineException("request " + id + " was cancelled", false);
  }

  /**
   * What the id of a chain's first block continues: {@link CacheEventListener#NO_PARENT} in the
   * default scope (the ids of before scopes), else the scope's root.
   */
  private static long scopeSeed(CacheScope scope) {
    return scope.isDefault() ? CacheEventListener.NO_PARENT : BlockHasher.scopeRoot(scope);
  }

  private long blockId(long parent, int[] tokens, int from) {
    long h = mix(parent ^ blockIdSeed);
    for (int i = from; i < from + blockSize; i++) {
      h = mix(h ^ (tokens[i] & 0xFFFFFFFFL));
    }
    return h == CacheEventListener.NO_PARENT ? 1L : h;
  }

  private static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }

  private static int compareLru(Block a, Block b) {
    int c = Long.compare(a.lastUsed, b.lastUsed);
    return c != 0 ? c : Long.compare(a.seq, b.seq);
  }

  private static final class Block {
    final long id;
    final Block parent;
    final long seq;
    /** The scope of the request that stored it: that of its chain when it starts one. */
    final CacheScope scope;
    final int[] tokens;
    int children;
    int pins;
    long lastUsed;

    Block(long id, Block parent, long seq, CacheScope scope, int[] tokens) {
      this.id = id;
      this.parent = parent;
      this.seq = seq;
      this.scope = scope;
      this.tokens = tokens;
    }

  }

  private static final class Job {
    final InferenceRequest request;
    final CompletableFuture<EngineResult> future = new CompletableFuture<>();
    final List<Block> pinned = new ArrayList<>();
    int matchedBlocks;
    int cachedTokens;
    int reserved;
    long enqueuedAt;
    long startedAt;
    long prefillNanos;
    long decodeNanos;
    Scheduler.Cancellable timer;
    OutputListener listener = OutputListener.IGNORE;
    /** The output, computed at the end of the prefill when someone listens. */
    int[] output;
    /** Output tokens queued for the listener so far. */
    int streamed;
    /** Pieces for the listener, then the completion, to be run outside the engine's lock. */
    final ConcurrentLinkedQueue<Runnable> outbox = new ConcurrentLinkedQueue<>();
    /** Whether a thread is running the outbox (one at a time). */
    final AtomicBoolean handingOver = new AtomicBoolean();
    /** The listener threw: it gets no more pieces. Used by the outbox's runner only. */
    boolean listenerFailed;

    Job(InferenceRequest request) {
      this.request = request;
    }
  }

  // ---------------------------------------------------------------- builder

  /** Configures a {@link SimulatedEngine}; every setter validates its argument. */
  public static final class Builder {
    private Scheduler scheduler;
    private Clock clock;
    private long capacityTokens = 1L << 20;
    private int blockSize = 16;
    private int slots = 1;
    private long prefillOverheadNanos = 20_000_000L;
    private long prefillNanosPerToken = 50_000L;
    private long decodeNanosPerToken = 10_000_000L;
    private boolean publishesCacheEvents = true;
    private long blockIdSeed = 0x5EED_B10C_1D5EL;
    private int vocabularySize = 151_936;
    private RandomGenerator random;
    private double failureProbability;
    private double stallProbability;
    private int streamChunkTokens = 4;

    private Builder() {}

    /**
     * Tokens per streamed piece, 1 to 2^20; default 4: a request given a listener gets a piece
     * each time that many tokens have been decoded.
     *
     * @param tokens the piece size
     * @return this builder
     */
    public Builder streamChunkTokens(int tokens) {
      if (tokens < 1 || tokens > GenerationParams.MAX_TOKENS_LIMIT) {
        throw new IllegalArgumentException(
            "streamChunkTokens must be 1 to " + GenerationParams.MAX_TOKENS_LIMIT + ", was "
                + tokens);
      }
      this.streamChunkTokens = tokens;
      return this;
    }

    /**
     * The scheduler that times prefill and decode (required). If it is also a {@link Clock}
     * (as {@link SimulatedScheduler} is) and no clock is given, it is the clock too.
     *
     * @param scheduler the scheduler
     * @return this builder
     */
    public Builder scheduler(Scheduler scheduler) {
      this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
      return this;
    }

    /**
     * The clock; defaults to the scheduler when it is a {@link Clock}. It only measures how long
     * requests queued ({@link Stats}). The engine reads it through a guard, as a node reads its
     * own: a reading that throws gives the latest good reading instead (the first failure
     * logged at ERROR, later ones at WARN as their count reaches a power of two), and the
     * request is queued, run and answered as with a good clock. The engine reads the clock
     * once as it is built: a clock that throws then fails {@link #build()}.
     *
     * @param clock the clock
     * @return this builder
     */
    public Builder clock(Clock clock) {
      this.clock = Objects.requireNonNull(clock, "clock");
      return this;
    }

    /**
     * KV-cache capacity in tokens (rounded down to whole blocks); default 2^20.
     *
     * @param tokens the capacity, {@code >= 0}
     * @return this builder
     */
    public Builder capacityTokens(long tokens) {
      if (tokens < 0) {
        throw new IllegalArgumentException("capacityTokens must be >= 0, was " + tokens);
      }
      this.capacityTokens = tokens;
      return this;
    }

    /**
     * Tokens per cache block, 1 to 1024; default 16 (vLLM's default).
     *
     * @param tokens the block size
     * @return this builder
     */
    public Builder blockSize(int tokens) {
      if (tokens < 1 || tokens > 1024) {
        throw new IllegalArgumentException("blockSize must be 1 to 1024 tokens, was " + tokens);
      }
      this.blockSize = tokens;
      return this;
    }

    /**
     * Requests that run concurrently, 1 to {@link #MAX_SLOTS} (4096); default 1.
     *
     * @param slots the number of slots
     * @return this builder
     */
    public Builder slots(int slots) {
      if (slots < 1 || slots > MAX_SLOTS) {
        throw new IllegalArgumentException("slots must be 1 to " + MAX_SLOTS + ", was " + slots);
      }
      this.slots = slots;
      return this;
    }

    /**
     * Fixed time of every prefill, in nanoseconds; default 20 ms.
     *
     * @param nanos the overhead, {@code >= 0}
     * @return this builder
     */
    public Builder prefillOverheadNanos(long nanos) {
      this.prefillOverheadNanos = nonNegative("prefillOverheadNanos", nanos);
      return this;
    }

    /**
     * Prefill time per uncached prompt token, in nanoseconds; default 50 µs.
     *
     * @param nanos the time per token, {@code >= 0}
     * @return this builder
     */
    public Builder prefillNanosPerToken(long nanos) {
      this.prefillNanosPerToken = nonNegative("prefillNanosPerToken", nanos);
      return this;
    }

    /**
     * Decode time per output token, in nanoseconds; default 10 ms.
     *
     * @param nanos the time per token, {@code >= 0}
     * @return this builder
     */
    public Builder decodeNanosPerToken(long nanos) {
      this.decodeNanosPerToken = nonNegative("decodeNanosPerToken", nanos);
      return this;
    }

    /**
     * Whether the engine publishes cache events (default true).
     *
     * @param publishes false for an engine that reports nothing
     * @return this builder
     */
    public Builder publishesCacheEvents(boolean publishes) {
      this.publishesCacheEvents = publishes;
      return this;
    }

    /**
     * Seed of the engine's own block ids (engines with different seeds use different ids).
     *
     * @param seed the seed
     * @return this builder
     */
    public Builder blockIdSeed(long seed) {
      this.blockIdSeed = seed;
      return this;
    }

    /**
     * Size of the output vocabulary, at least 2; default 151,936 (Qwen2.5's).
     *
     * @param size the vocabulary size
     * @return this builder
     */
    public Builder vocabularySize(int size) {
      if (size < 2) {
        throw new IllegalArgumentException("vocabularySize must be >= 2, was " + size);
      }
      this.vocabularySize = size;
      return this;
    }

    /**
     * The seeded source for random fault injection; required if a probability is set.
     *
     * @param random the seeded source
     * @return this builder
     */
    public Builder random(RandomGenerator random) {
      this.random = Objects.requireNonNull(random, "random");
      return this;
    }

    /**
     * Probability that a request fails when it reaches a slot; default 0.
     *
     * @param p the probability, in [0, 1]
     * @return this builder
     */
    public Builder failureProbability(double p) {
      this.failureProbability = probability("failureProbability", p);
      return this;
    }

    /**
     * Probability that a request stalls when it reaches a slot; default 0.
     *
     * @param p the probability, in [0, 1]
     * @return this builder
     */
    public Builder stallProbability(double p) {
      this.stallProbability = probability("stallProbability", p);
      return this;
    }

    /**
     * Builds the engine.
     *
     * @return the engine
     * @throws IllegalStateException if the scheduler is missing, no clock is available, the
     *     clock throws when read now (the exception's cause is what it threw), the capacity in
     *     blocks overflows an int, or a fault probability is set without a random source
     */
    public SimulatedEngine build() {
      if (scheduler == null) {
        throw new IllegalStateException("SimulatedEngine needs a scheduler: call scheduler(...)");
      }
      if (clock == null) {
        if (scheduler instanceof Clock c) {
          clock = c;
        } else {
          throw new IllegalStateException(
              "SimulatedEngine needs a clock: call clock(...) or pass a scheduler that is a Clock");
        }
      }
      if (capacityTokens / blockSize > Integer.MAX_VALUE) {
        throw new IllegalStateException(
            "capacityTokens / blockSize must fit in an int, was " + capacityTokens / blockSize);
      }
      if ((failureProbability > 0 || stallProbability > 0) && random == null) {
        throw new IllegalStateException(
            "failureProbability or stallProbability is set: call random(...) with a seeded source");
      }
      if (failureProbability + stallProbability > 1.0) {
        throw new IllegalStateException(
            "failureProbability + stallProbability must be <= 1, was "
                + (failureProbability + stallProbability));
      }
      return new SimulatedEngine(this);
    }

    private static long nonNegative(String what, long v) {
      if (v < 0) {
        throw new IllegalArgumentException(what + " must be >= 0, was " + v);
      }
      return v;
    }

    private static double probability(String what, double p) {
      if (!(p >= 0.0 && p <= 1.0)) {
        throw new IllegalArgumentException(what + " must be in [0, 1], was " + p);
      }
      return p;
    }
  }
}
