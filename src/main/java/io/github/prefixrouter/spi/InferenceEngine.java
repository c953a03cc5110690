package io.github.prefixrouter.spi;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * The LLM engine next to which a node runs: vLLM, SGLang, llama.cpp or any server the host
 * wires in. The library calls {@link #execute} for every request this node serves, whether it
 * came from a local client or was forwarded by a peer.
 *
 * <p>Contract (checked by {@code io.github.prefixrouter.contract.InferenceEngineContractTest}):
 * <ul>
 *   <li>{@link #execute} never blocks the caller's thread and returns a future that completes
 *       exactly once: with an {@link EngineResult} or exceptionally with an
 *       {@link EngineException}: a retryable one ({@link EngineException#retryable()}) for a
 *       failure another engine could avoid (a connection refused, a 5xx), which the node tries
 *       on a peer and counts toward
 *       {@link io.github.prefixrouter.RouterConfig#engineFailureLimit()}; one that is not
 *       retryable (such as {@link InvalidRequestException} or {@link EngineTimeoutException})
 *       for a failure every engine would share, which fails the request without trying a
 *       peer. Anything else ({@code execute} throwing, or its future failed with any other
 *       exception, such as an {@code IOException} of the host's HTTP client or a
 *       {@code NullPointerException} of its bug; {@code execute} returning null, or its future
 *       completing with null) breaks this contract: the node takes it for
 *       a retryable failure of this engine (tried on a peer, counted toward
 *       {@code engineFailureLimit}), logs it naming what was thrown (the first such failure,
 *       then one each time their count reaches a power of two), and fails the request with a
 *       {@code RequestFailedException} carrying it when no peer is left.
 *   <li>The same tokens and parameters give the same output on any node (deterministic
 *       decoding; a sampled request draws from its {@code seed}, not from a source of the
 *       engine's own), so routing never changes an answer.
 *   <li>A request runs under its {@link io.github.prefixrouter.CacheScope}: with its LoRA
 *       adapter, and with a prefix cache keyed by adapter and cache salt, so that a prefix
 *       cached in one scope is no hit in another (an engine that publishes cache events reports
 *       a chain's scope with its first blocks).
 *   <li>The output ends at the request's first stop
 *       ({@link io.github.prefixrouter.GenerationParams#stopTokenIds}: after the first stop
 *       token, whose text an engine that has text leaves out;
 *       {@link io.github.prefixrouter.GenerationParams#stop}: at the token that completes a stop
 *       string, for an engine that has text, which then ends before the stop string or with
 *       it). An engine that ignores them still gives a client of {@code NodeMain}'s
 *       endpoint the right token ids, and the right text where the text is the node
 *       tokenizer's (the endpoint cuts them; an engine's own text is cut at stop strings
 *       only: docs/engines.md, "Stops"), only after generating to {@code maxTokens}.
 *   <li>{@link #load()} is cheap and never blocks: the library calls it on its hot path. It
 *       reports the requests waiting for a slot as its queue, which push-back looks at.
 *   <li>Implementations are thread-safe: the library calls every method from request threads,
 *       transport threads and scheduler tasks at once. Arguments are never null.
 *   <li>{@link #execute}, {@link #cancel} and {@link #load} never wait for the node's stop
 *       ({@code close()}, or {@code join()} or {@code get()} of {@code stop()}'s future): the
 *       node calls them holding the answer to a request (it runs the request, ends it, or routes
 *       it), which the stop waits for and which comes only after they return. Such a wait,
 *       on the thread the node called them on, throws an {@link IllegalStateException} naming
 *       the call instead of waiting for ever (let through by {@code execute}, it is a failure
 *       of the run that is not an {@code EngineException}, as above); an engine that gives up
 *       calls {@code stop()} without waiting.
 *   <li>The node neither owns nor closes its engine, and this interface has no {@code close()}.
 *       An engine the host closes should fail the runs it still holds, and every later one at
 *       once, with a retryable {@link EngineException} (as {@code ReferenceEngine} and
 *       {@code OpenAiCompatibleEngine} do), so that the node tries them on a peer; close the
 *       engine after the node's stop has completed, which waits for every request it accepted.
 *       The node does not rely on it, and the contract test kit does not check it: a run whose
 *       future is never completed is given up at
 *       {@link io.github.prefixrouter.RouterConfig#engineTimeout()} (cancelled, and failed,
 *       an {@link EngineTimeoutException} its cause, without trying a peer) or, once a stop's
 *       grace period ({@code stop(Duration)}) has ended, answered with a
 *       {@code NodeNotRunningException}; a stop waits for it until then. So an engine closed
 *       with runs open costs their clients up to {@code engineTimeout}, never their answer.
 * </ul>
 */
public interface InferenceEngine {

  /**
   * Runs one request.
   *
   * @param request the request (prompt tokens and generation parameters); never null
   * @return a future completed once with the result, or exceptionally with an
   *     {@link EngineException}; never null
   */
  CompletableFuture<EngineResult> execute(InferenceRequest request);

  /**
   * Runs one request, as {@link #execute(InferenceRequest)}, and streams its output to
   * {@code listener} while it is generated (see {@link OutputListener}). The request's pieces
   * are given one at a time, in order, all before the future completes (the pieces of different
   * requests may be given at once, on different threads, to a listener they share); their
   * tokens and texts
   * concatenated are a prefix of the result's {@code outputTokens} and {@code text} (the node
   * sends the rest when the future completes, so an engine may stream only part of its output,
   * or nothing). A listener that throws (an exception or an {@link Error}) is not called
   * again, and the request runs on and completes as it would have. The default streams nothing
   * and calls
   * {@link #execute(InferenceRequest)}.
   * An engine that streams implements this method and lets {@code execute(request)} call it
   * with {@link OutputListener#IGNORE}.
   *
   * @param request the request; never null
   * @param listener where to give the output as it is generated; never null
   * @return a future completed once with the result, or exceptionally with an
   *     {@link EngineException}; never null
   */
  default CompletableFuture<EngineResult> execute(InferenceRequest request,
      OutputListener listener) {
    return execute(request);
  }

  /**
   * The engine's current load. Cheap and non-blocking.
   *
   * <p>Requests waiting for a slot must be reported as {@link EngineLoad#queueDepth()}, those
   * running as {@link EngineLoad#inFlight()}: the node's push-back looks at the queue alone. It
   * refuses its peers' forwarded work once the queue reaches its high watermark
   * ({@link io.github.prefixrouter.RouterConfig#highWatermark()}), and its gossip advertises
   * overload from the queue too; an engine that reports its waiting requests as running is never
   * pushed back for. The default, {@link EngineLoad#IDLE} whatever runs, turns push-back for
   * the queue off: the node takes on every forward, and routes as if its engine were idle
   * (only an engine that refuses work as busy, {@link EngineBusyException}, is then pushed back
   * for); an engine that runs several requests at once and queues the rest implements this.
   * An engine that keeps no queue of its own (it hands every request on at once) reports its
   * requests as running. A call that throws or returns null is counted and read as the last
   * good reading followed by the node's own requests on the engine since: its queue less those
   * that ended, or raised to those outstanding beyond the ones that reading had running
   * (docs/routing.md, "An engine whose load fails").
   *
   * @return the current load; never null ({@link EngineLoad#IDLE} by default)
   */
  default EngineLoad load() {
    return EngineLoad.IDLE;
  }

  /**
   * Best-effort cancellation of a running or queued request; may do nothing, but the request's
   * future still completes (exceptionally with an {@link EngineException}, or with its result).
   * Request ids are unique per origin node only, so requests of the same id may be in flight
   * here; the node calls {@code cancel} only while a single one of them is. It must not throw:
   * a call that does is a bug of the engine, whose run of the request may then go on; the node
   * ends the request all the same, and logs the failure naming what was thrown (the first, then
   * one each time their count reaches a power of two).
   *
   * @param requestId the {@link InferenceRequest#id()} of the request to cancel
   */
  default void cancel(String requestId) {}

  /**
   * Whether this engine publishes cache events through {@link #setCacheEventListener}. When it
   * does, the node runs its local tree in engine-driven mode (unless its
   * {@link io.github.prefixrouter.RouterConfig#treeMode()} is {@code SELF_MANAGED}); otherwise in
   * self-managed mode. An engine that says so but reports no stored block leaves the node's tree
   * empty, and its peers never route to its cache: the node logs that once at WARN after 16 of
   * its runs that computed a block or more of their prompt.
   *
   * @return true if the engine reports its cache events (false by default)
   */
  default boolean publishesCacheEvents() {
    return false;
  }

  /**
   * Called once by the node when it is built (before its {@code start()} and any request), when
   * it runs its tree in engine-driven mode: {@link #publishesCacheEvents()} is true and the
   * node's {@link io.github.prefixrouter.RouterConfig#treeMode()} is not {@code SELF_MANAGED}.
   * Otherwise never called.
   *
   * <p>An engine feeds one listener, so it may refuse a second: it then throws an
   * {@link IllegalStateException} and keeps the listener it has. The library's engines that
   * publish cache events ({@code ReferenceEngine}, {@code OpenAiCompatibleEngine} with
   * {@code kvEvents}, {@code SimulatedEngine}) do, with the message "the cache event listener is
   * already set". The node calls this from its builder's {@code build()} and lets what it throws
   * go on as it is: a second engine-driven node built on an engine that refuses fails to build,
   * and the first node goes on as before.
   *
   * @param listener where to report every later change of the engine's cache
   * @throws IllegalStateException if the engine already has a listener and takes only one
   */
  default void setCacheEventListener(CacheEventListener listener) {}

  /**
   * Called once by the node when it is built (before its {@code start()} and any request), when
   * it runs its tree in self-managed mode, an estimate of the engine's cache from the requests it
   * ran: {@link #publishesCacheEvents()} is false, or the node's
   * {@link io.github.prefixrouter.RouterConfig#treeMode()} is {@code SELF_MANAGED}. Otherwise
   * never called. An engine that can tell that its whole cache is gone (its server's process
   * went away, and a new one starts empty) calls {@code listener} then, once per loss, with a
   * short account of what it saw; the node then clears its tree, so that it no longer advertises
   * those prefixes to its peers, and counts and logs the loss. It may call it from any thread,
   * also from within {@link #execute}, and must not call it while holding a lock the node's
   * calls could wait for. The default never calls it: the estimate of a cache lost unseen ages
   * out as the tree evicts.
   *
   * @param listener what to call, with what the engine saw, when its cache was lost
   */
  default void setCacheLossListener(Consumer<String> listener) {}
}
