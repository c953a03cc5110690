package io.github.prefixrouter;

import io.github.prefixrouter.internal.GuardedClock;
import io.github.prefixrouter.internal.route.RouterNode;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.spi.Transport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.random.RandomGenerator;

/**
 * A prefix-cache-aware routing node, embedded next to one LLM engine. For every submitted
 * request it decides, from its exact local prefix tree and its gossiped replicas of its peers'
 * caches, whether to run the request on its own engine or forward it to the peer most likely to
 * hold its prefix; it also serves requests that peers forward to it. Prefixes count only within
 * the request's {@link CacheScope} (LoRA adapter and cache salt), as in the engine's own cache.
 *
 * <h2>Lifecycle</h2>
 * <pre>
 *   NEW --start()--> RUNNING --stop()/close()--> STOPPING --(in-flight work done)--> STOPPED
 * </pre>
 * <ul>
 *   <li>{@link #start()} is legal only in {@code NEW}; it starts the transport and gossip.
 *   <li>{@link #stop()} from {@code RUNNING} stops accepting requests (local or forwarded; a
 *       duplicate of a peer's request still running here joins it, as while running, and gets
 *       its answer), lets every accepted request complete, then stops gossip, closes the
 *       transport and, if the node created its own scheduler, that scheduler. From {@code NEW}
 *       it goes straight to {@code STOPPED}. From {@code STOPPING} or {@code STOPPED} it
 *       returns the same future.
 *       {@link #stop(Duration)} does the same but abandons the requests still unanswered when
 *       its grace period ends.
 *   <li>{@code start()} in any state but {@code NEW} throws {@link IllegalStateException}.
 *   <li>{@link #submit} outside {@code RUNNING} returns a future failed with
 *       {@link NodeNotRunningException}.
 * </ul>
 *
 * <h2>Guarantees</h2>
 * Every request accepted by {@link #submit} completes exactly once: with the answer of the engine
 * that ran it, with {@link RequestFailedException} when it could not be served (the cases are
 * that class's), or with {@link NodeNotRunningException} when a stop's grace period ended
 * before its answer. Forwarding failures (timeout, push-back, unreachable peer) fall back to the
 * next candidate or to local execution and never reach the caller. All methods are thread-safe
 * and never block except {@link #close()}, and {@link #stop()} for as long as the transport's
 * {@link io.github.prefixrouter.spi.Transport#close()} takes when nothing is in flight. No
 * method or builder setter accepts null (a null argument throws {@link NullPointerException});
 * no method returns null.
 */
public interface PrefixRouterNode extends AutoCloseable {

  /** Lifecycle states; see the class documentation. */
  enum State {
    /** Built, not started. */
    NEW,
    /** Accepting and serving requests. */
    RUNNING,
    /** Refusing new requests, completing the accepted ones. */
    STOPPING,
    /** Every accepted request completed; transport and gossip stopped. */
    STOPPED
  }

  /**
   * A new builder.
   *
   * @return a new builder with the defaults below
   */
  static Builder builder() {
    return new Builder();
  }

  /**
   * This node's id, unique in the cluster.
   *
   * @return the node id given to the builder
   */
  String nodeId();

  /**
   * Starts the node: transport, gossip with the seeds, serving. If starting the transport or
   * gossip fails, the node stops at once ({@link State#STOPPED}, transport closed) and the
   * failure is rethrown.
   *
   * @throws IllegalStateException if the node is not {@link State#NEW}, if the transport's
   *     address names another node id, or if the transport's start waited for the node's stop
   *     (see {@link #close()}), as the transport's start throws it
   */
  void start();

  /**
   * Stops gracefully (see the class documentation); the future completes when STOPPED. A stop
   * that comes while {@link #start()} is starting the transport and gossip (on another thread,
   * or from inside the transport's start) completes once they have started and been stopped
   * again, so none runs on after the stop. Waiting for it from inside the transport's start or
   * close, or from inside a call the node makes while it holds the answer to a request it
   * accepted (the engine's {@code execute}, {@code cancel} or {@code load}, the output
   * listener, a function depending on the future {@link #submit} returned), on the thread the
   * node called them on, throws instead of waiting for ever (see {@link #close()}).
   *
   * @return a future completed when the node is {@link State#STOPPED}; the same future on every
   *     call
   */
  CompletableFuture<Void> stop();

  /**
   * Stops gracefully, as {@link #stop()}, but waits at most {@code gracePeriod} (on the node's
   * clock and scheduler) for the accepted requests: when it ends, every request still
   * unanswered is abandoned. Its run on the local engine is cancelled
   * ({@link io.github.prefixrouter.spi.InferenceEngine#cancel}), a forward of it in flight is
   * cancelled at the peer, and it completes exactly once, with {@link NodeNotRunningException}
   * (state {@code STOPPING}) for a request submitted here, or with a retryable failure for the
   * peer that forwarded it, which runs it elsewhere. Then the node stops as {@link #stop()}
   * does. A request whose output is still being delivered to an {@link OutputListener} that
   * has not returned (against its contract) is abandoned the same way without waiting for it:
   * it completes with {@link NodeNotRunningException} even if the engine's answer had come
   * (the listener does not have the whole output), and the listener is not called again (the
   * call in progress may still return later); so the stop completes when the grace period ends
   * however its listeners behave. Nor does it wait past its grace period for a function
   * depending on the future of a request already answered that has not returned (against the
   * contract: see {@link #submit(InferenceRequest)}), unless that function blocks the thread
   * that ends the grace period itself. A zero grace period abandons the unanswered requests at once;
   * so does a grace period whose timer the scheduler refuses (a host's executor already shut
   * down: nothing could end the wait), the refusal logged at ERROR.
   * Calling it again while the node is stopping can only bring the deadline forward: the
   * earliest deadline asked for ends the wait, and only that one is timed (one timer however
   * often it is called); calling {@link #stop()} or {@link #close()} sets none.
   *
   * <p>Use it where the process has a deadline of its own, for example an orchestrator that
   * kills it some time after SIGTERM: a grace period shorter than that deadline lets every
   * client get an answer (a retryable one) instead of a reset connection.
   *
   * @param gracePeriod how long to wait for accepted requests, 0 to 365 days
   * @return the same future as {@link #stop()}
   * @throws NullPointerException if {@code gracePeriod} is null
   * @throws IllegalArgumentException if {@code gracePeriod} is negative or above 365 days
   */
  CompletableFuture<Void> stop(Duration gracePeriod);

  /**
   * Routes and runs one request. Never blocks; the future completes exactly once.
   *
   * <p><b>Cancelling.</b> {@code future.cancel(..)} (on the returned future itself, not on one
   * derived from it) abandons the request as a peer's CANCEL abandons one it forwarded: its run
   * on the local engine is cancelled ({@link io.github.prefixrouter.spi.InferenceEngine#cancel},
   * unless another request of the same id runs there), or a forward of it in flight is sent a
   * CANCEL, which the peer passes on along the path (unless another request of the same id
   * submitted here waits on a forward to that peer too); no fallback follows. The future is then
   * cancelled (a {@link java.util.concurrent.CancellationException}), and the request counts in
   * {@link NodeStats#failed()}. A host calls it when its client goes away. Completing the
   * returned future from outside in any other way, as {@code orTimeout} and
   * {@code completeOnTimeout} do (or {@code complete}, {@code completeExceptionally},
   * {@code completeAsync}, {@code obtrudeValue}, {@code obtrudeException}), abandons the
   * request the same way (the future keeps the host's completion). Once the node has begun to give the answer, the answer wins: a cancel
   * (or other completion) that comes then returns {@code false} and the future completes with
   * the response, counted as answered, never first counted and then taken back.
   *
   * <p><b>Functions depending on the future</b> ({@code thenApply}, {@code whenComplete} and
   * the like, not their {@code Async} variants) run on the thread that completes it: the
   * engine's or the transport's, the node's scheduler (an engine timeout, the end of a stop's
   * grace period), or the caller of {@code cancel}. Like an {@link OutputListener}, they must
   * not block; give work that may block to an executor of the host's ({@code thenApplyAsync}).
   * One that blocks holds that thread, and whatever the node would do on it next (the answers
   * of other requests among them), and a {@link #stop()} until it returns (a
   * {@link #stop(Duration)} until its grace period ends, unless it blocks the thread ending it).
   *
   * @param request the request
   * @return a future completed exactly once with the response, or exceptionally with {@link
   *     NodeNotRunningException} (not running, or abandoned when a stop's grace period ended; see
   *     {@link #stop(Duration)}) or {@link RequestFailedException}
   * @throws NullPointerException if {@code request} is null
   */
  CompletableFuture<InferenceResponse> submit(InferenceRequest request);

  /**
   * Routes and runs one request, as {@link #submit(InferenceRequest)}, and streams its output to
   * {@code listener} while it is generated, wherever it runs (see {@link OutputListener}). When
   * the future completes normally, the listener has received the whole output, and the
   * concatenation of what it received equals the response's tokens and text.
   *
   * <p>Where the request runs decides how its output streams: the local engine streams it if it
   * implements {@link io.github.prefixrouter.spi.InferenceEngine#execute(InferenceRequest,
   * OutputListener)}; a peer it is forwarded to streams it back in STREAM messages (gathered
   * into at most one per {@link RouterConfig#streamInterval()}; a peer of a version from before
   * streaming answers without streaming), also across relays. Whatever did not stream arrives
   * in one piece with the answer. STREAM messages are best effort: after a lost one the output
   * waits for the answer (which carries all of it), it is never lost or reordered.
   *
   * <p><b>Fallbacks stay seamless.</b> Pieces are placed by their offsets in the output, and
   * only the part beyond what the listener already has is passed on. When a forward fails
   * mid-stream and the request runs again elsewhere (another peer, or here), the new attempt's
   * output repeats what the listener has (engines are deterministic: the engine contract) and
   * only what follows it is passed on: the listener sees one stream, without repeats or gaps.
   * If the new attempt's output contradicts what the listener already has (an engine that is
   * not deterministic), the stream cannot be repaired: the request is abandoned and fails with
   * {@link OutputDivergedException}.
   *
   * <p><b>The listener</b> is called one piece of this request at a time, in order, never
   * after the future completes (a listener given to several requests may be called for them at
   * once, on different threads; a call in progress on another thread when
   * {@code future.cancel(..)} is called, or when a stop's grace period ends, may still finish;
   * see {@link #stop(Duration)}). If it
   * throws, it is not called again and the request is abandoned as if cancelled: the future
   * fails with a {@link RequestFailedException} whose cause is the listener's exception.
   * {@link OutputListener#IGNORE} costs nothing: the request runs as
   * {@link #submit(InferenceRequest)} runs it.
   *
   * @param request the request
   * @param listener where the output goes as it is generated; called one piece of this
   *     request at a time, never after the future completes; must not block
   * @return a future completed exactly once, as {@link #submit(InferenceRequest)}'s (or with
   *     {@link OutputDivergedException}); cancelling it abandons the request
   * @throws NullPointerException if an argument is null
   */
  CompletableFuture<InferenceResponse> submit(InferenceRequest request, OutputListener listener);

  /**
   * The decision {@link #submit} would take for {@code request} now, without running it and
   * without changing any state a decision depends on. One difference follows: {@code explain}
   * neither counts the request toward the local-caching demand nor reserves the engine for a
   * bought miss, so it never returns {@link RouteDecision.Reason#LOCAL_CACHING}; where
   * {@code submit} would buy the prefix locally, it shows the peer the request would otherwise go
   * to. It counts nothing in {@link #stats()}. (Like any decision, it offers the prompt's block
   * hashes to the cache that spares later decisions hashing them again, which changes no
   * decision; and it may find that the local engine has been silent past
   * {@link RouterConfig#engineStallTimeout()}: the stall is then counted from that moment, as it
   * would be at the next decision, forward or gossip round.)
   *
   * @param request the request
   * @return the decision, with every candidate's estimate
   */
  RouteDecision explain(InferenceRequest request);

  /**
   * A snapshot of the node's counters and gauges.
   *
   * @return a new snapshot
   */
  NodeStats stats();

  /**
   * The counters of the cache events the node's local tree has received from its engine, for
   * an engine that publishes them ({@link InferenceEngine#publishesCacheEvents()}): events it
   * could not apply and blocks it dropped over its mirror limit, the figures that show whether
   * the engine's integration reports its cache correctly (see {@link CacheEventStats}).
   *
   * @return a new snapshot of the counters, or empty if the engine publishes no cache events
   *     (the tree is self-managed); empty by default, for implementations other than the
   *     library's
   */
  default Optional<CacheEventStats> cacheEventStats() {
    return Optional.empty();
  }

  /**
   * What the node's watch of its own engine has seen: whether the engine is stalled or failing
   * and avoided now, how long it has been silent, its stalls, its failures in a row and failing
   * spells, and the requests routed around it (see {@link RouterConfig#engineStallTimeout()},
   * {@link RouterConfig#engineFailureLimit()} and {@link EngineStallStats}).
   *
   * @return a new snapshot; empty by default, for implementations other than the library's
   */
  default Optional<EngineStallStats> engineStallStats() {
    return Optional.empty();
  }

  /**
   * The counters of the node's forwarding and streaming paths: peer messages it could not
   * decode, streamed output that belongs to no forward of its own, streamed requests failed
   * because their output diverged, peers' requests not run because their CANCEL came first,
   * and peers' requests refused for another model id (see {@link PeerMessageStats}).
   *
   * @return a new snapshot; empty by default, for implementations other than the library's
   */
  default Optional<PeerMessageStats> peerMessageStats() {
    return Optional.empty();
  }

  /**
   * The current lifecycle state.
   *
   * @return the current state
   */
  State state();

  /**
   * Stops the node and waits until it is {@link State#STOPPED}.
   *
   * <p>The stop completes only after the transport's {@code start()} (if the node is starting)
   * or {@code close()} (if it is stopping) has returned, so a wait for it inside them, on the
   * thread the node called them on, would never end: there this method throws, as do
   * {@code join()} and {@code get()} of the future {@link #stop()} returns (and of the futures
   * that depend on it), and the stop goes on without the wait. A transport that gives up in
   * its start calls {@link #stop()} without waiting, and the node stops once the start returns.
   *
   * <p>The same holds inside the calls the node makes while it holds the answer to a request it
   * accepted, which the stop waits for and which comes only once the call returns: the engine's
   * {@link io.github.prefixrouter.spi.InferenceEngine#load load} as the node routes the request,
   * its {@link io.github.prefixrouter.spi.InferenceEngine#execute execute} of the request, its
   * {@link io.github.prefixrouter.spi.InferenceEngine#cancel cancel} as the node ends it, the
   * request's {@link OutputListener}, a function depending on the future {@link #submit}
   * returned that runs as the node completes it (or, for a peer's request, the transport's
   * handling of the answer), and the transport's {@code send} of a CANCEL of the request or a
   * piece of its output. There this method throws too, naming the call; the request is answered
   * once the call returns (one that lets the exception through fails as it would with any
   * exception: the engine's execute fails the request, the listener's abandons it), and the
   * node stops then. Call {@link #stop()} there, without waiting.
   *
   * <p><b>On a {@link io.github.prefixrouter.testing.SimulatedScheduler}, this method waits for
   * ever, without an error, when called on the thread driving the scheduler while a request
   * whose answer needs simulated time is in flight</b> (one run by a
   * {@link io.github.prefixrouter.testing.SimulatedEngine} or forwarded over an
   * {@link io.github.prefixrouter.testing.InMemoryNetwork} on that scheduler, or one that ends
   * at a timeout): the stop waits for the request, which is answered only when that thread
   * advances the scheduler, and the thread is waiting for the stop. So do {@code join()} and
   * {@code get()} of {@link #stop()}'s future there. Stop, advance the scheduler until the stop
   * completes, then close:
   * <pre>{@code
   * CompletableFuture<Void> stopped = node.stop();
   * while (!stopped.isDone() && sim.runNext()) {
   *   // each task run may answer a request, and the last answer completes the stop
   * }
   * node.close();
   * }</pre>
   * or call {@code stop(Duration.ZERO)} first, which abandons the requests in flight at once
   * (see {@link #stop(Duration)}). The node does not detect this wait: it cannot tell a request
   * that waits for simulated time from one that another thread answers (an engine or transport
   * with threads of its own next to a simulated scheduler, as some tests combine them), for
   * which the same wait ends, and failing that wait would break it.
   *
   * @throws IllegalStateException if called from inside the transport's {@code start()} or
   *     {@code close()}, or from inside one of the calls above while the request is unanswered,
   *     on the thread the node called it on
   */
  @Override
  void close();

  /**
   * Builds a {@link PrefixRouterNode}. Required: {@link #nodeId}, {@link #transport} and
   * {@link #engine}. Defaults:
   * <ul>
   *   <li>{@code config}: {@link RouterConfig#defaults()};
   *   <li>{@code clock}: the scheduler, if one is given that is also a {@link Clock} (as
   *       {@link io.github.prefixrouter.testing.SimulatedScheduler} is), so that the node's
   *       readings and its timers keep the same time; else {@link Clock#system()};
   *   <li>{@code scheduler}: if none is given, {@code build()} creates
   *       {@link io.github.prefixrouter.spi.Schedulers#newSingleThread} named
   *       {@code prefix-router-<nodeId>}, owned by the node and closed when it stops (the only
   *       thread the node itself creates, and only on this explicit default; the adapters a
   *       host chooses run threads of their own: {@code HttpTransport}'s server, readers and
   *       writers, {@code ReferenceEngine}'s workers, {@code OpenAiCompatibleEngine}'s HTTP
   *       client, {@code VllmKvEventSubscriber}'s reader, each documented there). Pass a scheduler
   *       whenever the host has one, and always in tests
   *       ({@link io.github.prefixrouter.testing.SimulatedScheduler});
   *   <li>{@code random}: a {@link SplittableRandom} seeded from the node id's hash mixed with the
   *       clock's reading at {@code build()}: deterministic for a given clock (a simulated clock
   *       replays exactly), different across restarts on the system clock. That suits tests and
   *       simulation, not production: the gossip draws from it the secret keying its tables
   *       against hash flooding (docs/gossip.md, "Hostile fingerprints"), and the system
   *       clock's nanoseconds since boot are no secret, so a production node should be given a
   *       securely seeded generator, such as
   *       {@code new SplittableRandom(new SecureRandom().nextLong())};
   *   <li>{@code seeds}: none (a node without seeds waits for peers to contact it).
   * </ul>
   * The node takes ownership of the transport: it starts it on {@link #start()} and closes it on
   * stop. It does not own the engine, nor close it. An engine that publishes cache events serves
   * one node, though: the node built engine-driven sets the engine's one
   * {@link InferenceEngine#setCacheEventListener cache event listener}, and the engines of this
   * library refuse a second, so a second node built on it (alongside the first, or after it
   * stopped) fails in {@code build()} with their {@link IllegalStateException}; build a node
   * after another on a new engine, or configure it {@code SELF_MANAGED}.
   */
  final class Builder {
    private String nodeId;
    private RouterConfig config = RouterConfig.defaults();
    private Transport transport;
    private InferenceEngine engine;
    private Clock clock;
    private Scheduler scheduler;
    private RandomGenerator random;
    private final List<PeerAddress> seeds = new ArrayList<>();

    private Builder() {}

    /**
     * This node's id: 1 to 64 printable ASCII characters, no spaces. Required.
     *
     * @param nodeId the node id
     * @return this builder
     */
    public Builder nodeId(String nodeId) {
      this.nodeId = PeerAddress.checkNodeId(nodeId);
      return this;
    }

    /**
     * The configuration (default {@link RouterConfig#defaults()}).
     *
     * @param config the configuration
     * @return this builder
     */
    public Builder config(RouterConfig config) {
      this.config = Objects.requireNonNull(config, "config");
      return this;
    }

    /**
     * The transport to peers. Required; owned by the node afterwards.
     *
     * @param transport the transport
     * @return this builder
     */
    public Builder transport(Transport transport) {
      this.transport = Objects.requireNonNull(transport, "transport");
      return this;
    }

    /**
     * The local engine. Required.
     *
     * @param engine the engine
     * @return this builder
     */
    public Builder engine(InferenceEngine engine) {
      this.engine = Objects.requireNonNull(engine, "engine");
      return this;
    }

    /**
     * The time source (default: the scheduler if it is also a {@link Clock}, as
     * {@link io.github.prefixrouter.testing.SimulatedScheduler} is, else {@link Clock#system()}).
     * A reading that throws is taken as the
     * latest one that did not, and one that throws in {@link #build()} fails the build (see
     * {@link Clock}).
     *
     * <p>The node sets its timers on the scheduler and measures time on this clock, so the two
     * must keep the same time, but for a constant offset; the build does not check it. A
     * {@link io.github.prefixrouter.testing.SimulatedScheduler} given with
     * {@link Clock#system()}, say, is accepted, and its timers then run in simulated time
     * while the node measures real time: give such a scheduler no clock, or itself.
     *
     * @param clock the clock
     * @return this builder
     */
    public Builder clock(Clock clock) {
      this.clock = Objects.requireNonNull(clock, "clock");
      return this;
    }

    /**
     * The timer source (default: a node-owned single thread; see the class documentation).
     *
     * @param scheduler the scheduler, owned by the host
     * @return this builder
     */
    public Builder scheduler(Scheduler scheduler) {
      this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
      return this;
    }

    /**
     * The random source (default: seeded from node id and clock; see the class documentation).
     * The default suits tests and simulation; a production node should pass a securely seeded
     * generator, such as {@code new SplittableRandom(new SecureRandom().nextLong())}, since the
     * gossip draws from it the secret keying its defences against hash flooding.
     *
     * @param random the random source; seed it for reproducible runs
     * @return this builder
     */
    public Builder random(RandomGenerator random) {
      this.random = Objects.requireNonNull(random, "random");
      return this;
    }

    /**
     * Addresses of peers to join through. Replaces any seeds given before.
     *
     * @param seeds the seeds' addresses
     * @return this builder
     */
    public Builder seeds(Collection<PeerAddress> seeds) {
      Objects.requireNonNull(seeds, "seeds");
      this.seeds.clear();
      for (PeerAddress s : seeds) {
        this.seeds.add(Objects.requireNonNull(s, "seed"));
      }
      return this;
    }

    /**
     * Builds the node in state {@link State#NEW}. An engine-driven node hands the engine its
     * cache event listener here; what the engine's {@link InferenceEngine#setCacheEventListener}
     * throws goes on as it is.
     *
     * @return the node, in state {@link State#NEW}
     * @throws IllegalStateException if a required setting is missing, or if the clock or the
     *     transport's {@link Transport#maxMessageBytes()} throws when read here (the
     *     exception's cause is what it threw); or, thrown by the engine's
     *     {@link InferenceEngine#setCacheEventListener}, if the engine publishes cache events and
     *     already has a listener: another node was built on it (see the class documentation;
     *     the library's engines: "the cache event listener is already set")
     * @throws IllegalArgumentException if the configuration is invalid, if the transport's
     *     {@link Transport#maxMessageBytes()} is not positive, if the configuration's
     *     {@link RouterConfig#gossipMessageBytes()} exceeds it, or if its
     *     {@link RouterConfig#treeMode()} is {@code ENGINE_DRIVEN} and the engine publishes no
     *     cache events
     */
    public PrefixRouterNode build() {
      List<String> missing = new ArrayList<>();
      if (nodeId == null) {
        missing.add("nodeId(String)");
      }
      if (transport == null) {
        missing.add("transport(Transport)");
      }
      if (engine == null) {
        missing.add("engine(InferenceEngine)");
      }
      if (!missing.isEmpty()) {
        throw new IllegalStateException(
            "PrefixRouterNode.Builder is missing required settings: " + String.join(", ", missing));
      }
      config.validate();
      int carried;
      try {
        carried = transport.maxMessageBytes();
      } catch (RuntimeException | Error e) {
        throw new IllegalStateException("the transport's maxMessageBytes() threw " + e, e);
      }
      if (carried <= 0) {
        throw new IllegalArgumentException(
            "the transport's maxMessageBytes() must be positive, was " + carried);
      }
      if (config.gossipMessageBytes() > carried) {
        // the transport would lose every gossip message above its limit, snapshots among them
        throw new IllegalArgumentException("gossipMessageBytes (" + config.gossipMessageBytes()
            + ") exceeds the transport's maxMessageBytes (" + carried + "): the transport "
            + "would drop the larger gossip messages; lower gossipMessageBytes or raise the "
            + "transport's limit");
      }
      Clock c = GuardedClock.of("node " + nodeId, clock != null ? clock
          : scheduler instanceof Clock schedulerClock ? schedulerClock : Clock.system());
      RandomGenerator r = random;
      if (r == null) {
        long seed = nodeId.hashCode() * 0x9E3779B97F4A7C15L ^ c.nanoTime();
        r = new SplittableRandom(seed);
      }
      return new RouterNode(nodeId, config, transport, engine, c, scheduler, r, List.copyOf(seeds));
    }
  }
}
