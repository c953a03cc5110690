package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.CacheEventStats;
import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeNotRunningException;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.OutputDivergedException;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.PeerMessageStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.AnswerBudgetException;
import io.github.prefixrouter.internal.CountedFailureLog;
import io.github.prefixrouter.internal.DoublingLog;
import io.github.prefixrouter.internal.EngineInFlightLimitException;
import io.github.prefixrouter.internal.GuardedClock;
import io.github.prefixrouter.internal.InFlightLimitException;
import io.github.prefixrouter.internal.PromptArrays;
import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.EngineTimeoutException;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.spi.Schedulers;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import java.time.Duration;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import java.util.random.RandomGenerator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The routing node.
 *
 * <p>Design notes:
 * <ul>
 *   <li><b>Executions.</b> Every request this node takes on (submitted locally, or forwarded to
 *       it by a peer) is an {@code Execution}: a sequence of attempts (forward to a peer, or run
 *       on the local engine), each numbered. A callback acts only if it claims the current
 *       attempt number under the execution's lock, so late answers, duplicate answers, a guard
 *       timer racing a transport timeout, or a misbehaving SPI that completes twice are ignored.
 *       The final answer goes through a compare-and-set once-only flag: every execution
 *       completes exactly once.
 *   <li><b>Fallback.</b> A forward that times out (a best-effort CANCEL is sent), is refused
 *       as busy, cannot reach the peer, fails at the peer or returns garbage counts a fallback
 *       under its cause, excludes that peer for this request, and routes again: the next best
 *       peer or local. A BUSY this node's own transport raised (its limit of requests in flight
 *       to the peer reached: {@link InFlightLimitException}) is no push-back and does not cool
 *       the peer down ({@link FallbackCause#IN_FLIGHT_LIMIT}); nothing left this node, so it
 *       does not use up one of the request's forwards (up to {@link #MAX_UNSENT_FORWARDS}
 *       such refusals a request; the refused peer stays excluded for it, so the next candidate
 *       gets it). After {@link #MAX_FORWARDS} forwards, when the transport is closed, or when the request is too large for the link
 *       (not a fault of the peer: it is not cooled down), the request runs locally. A peer's failure that is not retryable (its engine
 *       refused the request as invalid, or timed out on it) is not tried on another peer: the
 *       request runs locally once, or fails with that failure if the local engine already
 *       failed it or then fails it retryably.
 *   <li><b>Local failures.</b> A retryable failure of the local engine (busy, unreachable, an
 *       answer that cannot be for the request, or a failure that is not an
 *       {@link EngineException}: the engine breaking its contract, which a peer's engine does
 *       not share; logged, {@link #engineBroke}) on a request this node's client submitted is
 *       tried on the cheapest eligible peer ({@link FallbackCause#LOCAL_FAILED}), and from then
 *       on the request is routed to peers only; when none is eligible or none serves it
 *       within {@link #MAX_FORWARDS} forwards, it fails (at most one local run per request)
 *       ({@link RequestFailedException} with the local engine's failure as its cause). A
 *       request a peer forwarded is not sent on after a local failure: a busy engine answers
 *       it BUSY (push-back), any other failure FAILED, retryable as the engine said, and the
 *       peer tries elsewhere (see Fallback). An {@link EngineException} that is not retryable
 *       ({@code InvalidRequestException}, {@code EngineTimeoutException}, the node's own
 *       {@code engineTimeout}) is final. Any engine's answer is checked as a forwarded one is
 *       (see {@link #couldAnswer}).
 *   <li><b>Timeouts.</b> The forwarding timeout is about
 *       {@code 4 × (queue + prefill + maxTokens × decode per token) × slowness × backoff + 2 × rtt}
 *       (see {@link #forwardTimeout}): generous, because a false timeout runs the request
 *       twice, and dead peers are also caught by the failure detector. The decode time is
 *       learned from every engine (timed by the node when the engine reports no timings);
 *       the slowness of each peer from its answers. A prompt longer than any sampled waits at
 *       least {@code forwardTimeoutMax}, and a timeout of such a guess does not cool the peer
 *       down. A guard timer 25% later protects against a transport that never answers (and
 *       cancels its future, as for any forward the node gives up).
 *       A streamed forward, once its first piece has arrived, times out only after a whole
 *       timeout without a piece ({@link #checkStreamIdle}), or past {@code engineTimeout} plus
 *       twice the round trip ({@link #streamLimit}).
 *   <li><b>A stalled engine.</b> When the local engine has requests outstanding and has given
 *       no output, no answer and (engine-driven) stored no blocks for
 *       {@code engineStallTimeout} ({@link EngineWatch}), the node's own requests go to the
 *       eligible peer the policy ranks first, peers' forwards are refused with BUSY and the
 *       gossip advertises overload, until the engine makes progress again.
 *   <li><b>A failing engine.</b> After {@code engineFailureLimit} retryable failures of the
 *       local engine in a row with no success between them, it is avoided alike, except that
 *       once no run is outstanding and {@code failureCooldown} has passed since its last
 *       failure the next request that would run here is its probe; the first success ends
 *       it. Engine exceptions that are not retryable, failures of runs the node abandoned,
 *       answers the node had no heap to read ({@link AnswerBudgetException}: the adapter's
 *       answer budget held by other answers, the node's shortage and not its engine's
 *       failure), and runs the
 *       adapter refused at its own limit of requests in flight
 *       ({@link EngineInFlightLimitException}: nothing reached the engine; still busy to the
 *       node) do not count.
 *   <li><b>Serving peers.</b> A forwarded request is refused with BUSY when this node is not
 *       running (but for a duplicate of one running here, which joins it below), its engine
 *       queue is at the high watermark, or its engine is stalled or
 *       failing, and answered BUSY when its engine turns it away at capacity or this node has
 *       no heap to read its engine's answer ({@link #pushesBack}); a duplicate of a request already running here (same sender, origin, id,
 *       prompt and parameters) joins the running execution instead of running twice; one that asks for
 *       a stream gets the output so far, then the rest, under its tag ({@link #streamAlsoTo}).
 *       Below the hop limit it may be routed again (never back to its sender or its origin);
 *       at the limit it runs here. A CANCEL from the sender ends the execution here at once:
 *       its engine run is cancelled, or its forward in flight gets a CANCEL of its own (a CANCEL
 *       names the request's origin, as the FORWARD does, and matches the request of that
 *       sender, origin and id). A
 *       CANCEL that arrives before its FORWARD is remembered for a bounded time
 *       ({@link EarlyCancels}), and the FORWARD is then answered as cancelled without running.
 *   <li><b>Threads.</b> None of its own: work runs on the callers' threads, the transport's
 *       and engine's completion threads, and the injected scheduler.
 *   <li><b>The clock.</b> The host's clock is read through a guard ({@link GuardedClock}): a
 *       reading that throws gives the latest good one, so that no request's bookkeeping (its
 *       run's start, its answer's timing) is cut short with the request taken on and left
 *       unanswered.
 * </ul>
 */
public final class RouterNode implements PrefixRouterNode {

  private static final Logger LOG = LoggerFactory.getLogger(RouterNode.class);

  /**
   * Forwarding attempts per request before it runs locally; but for those this node's own
   * transport refused to send (see {@link #MAX_UNSENT_FORWARDS}).
   */
  static final int MAX_FORWARDS = 3;
  /**
   * Forwards per request that this node's own transport refused to send
   * ({@link FallbackCause#IN_FLIGHT_LIMIT}) and that do not count in {@link #MAX_FORWARDS};
   * past them, such refusals count as forwards. Each refused peer is excluded for the request,
   * so the number of peers bounds them too; this bounds the routing decisions a request takes
   * and how deep forwards nest (a refusal completes on the caller's thread, inside
   * {@code request()}, so the next forward starts from within the last one's completion).
   */
  static final int MAX_UNSENT_FORWARDS = 16;
  /**
   * Runs computing a block or more of their prompt that an engine-driven node's engine answers
   * before the node checks, once, that the engine has reported a stored block (see
   * {@link #checkCacheEventsArrive}).
   */
  static final int EVENTLESS_RUNS = 16;
  /**
   * Yields a stop's end of its grace period gives a thread that has answered a request and is
   * leaving the node's code, before it takes that thread for one running a function that
   * blocks (see {@link #stillAnswering}): a moment, not a wait.
   */
  private static final int ANSWER_SETTLE_YIELDS = 10_000;
  /** What {@link #schedule} returns when the scheduler refused the timer. */
  private static final Scheduler.Cancellable TIMER_REFUSED = () -> false;
  /** The longest grace period {@link #stop(Duration)} takes, as for the config's durations. */
  private static final Duration MAX_GRACE = Duration.ofDays(365);

  /**
   * How many more prompt tokens than the request has an engine may report having processed:
   * a server may add a BOS or another special token to a prompt of token ids.
   */
  static final int PROMPT_TOKENS_SLACK = 4;

  /** The parts the node is assembled from; tests substitute their own. */
  public record Components(LocalPrefixIndex local, ChainHasher hasher, PeerView peers) {
    public Components {
      Objects.requireNonNull(local, "local");
      Objects.requireNonNull(hasher, "hasher");
      Objects.requireNonNull(peers, "peers");
    }
  }

  private final String nodeId;
  private final RouterConfig config;
  private final Transport transport;
  private final InferenceEngine engine;
  /** The host's clock, read through its guard: a reading never throws. */
  private final GuardedClock clock;
  private final Scheduler scheduler;
  private final Schedulers.ClosableScheduler ownedScheduler;
  private final RandomGenerator random;
  private final List<PeerAddress> seeds;
  private final LocalPrefixIndex local;
  private final PeerView peers;
  private final CostModel cost;
  private final PeerHealth health = new PeerHealth();
  private final RoutePlanner planner;
  /** Whether the local engine is stalled (see {@link EngineWatch}). */
  private final EngineWatch engineWatch;
  /** The engine's load as the node reads it, a failing reading estimated and counted. */
  private final EngineLoadGuard engineLoad;
  /**
   * Runs of the local engine that failed with something that is not an {@link EngineException}
   * (a contract violation: {@link #engineBroke}).
   */
  private final DoublingLog engineContractFailures = new DoublingLog();
  /** The engine's {@code cancel} calls that threw, logged at each doubling of their count. */
  private final DoublingLog engineCancelFailures = new DoublingLog();
  /** Guard timers the scheduler refused, logged at each doubling of their count. */
  private final DoublingLog refusedTimers = new DoublingLog();
  /** Runs counted towards {@link #EVENTLESS_RUNS}, which stop counting there. */
  private final AtomicInteger eventCheckRuns = new AtomicInteger();

  private final AtomicReference<State> state = new AtomicReference<>(State.NEW);
  private final CompletableFuture<Void> stopped = new StopFuture<>();
  private final AtomicBoolean stopFinished = new AtomicBoolean();
  /**
   * Guards {@code partsStarting} and {@code partsStopLeft}: a stop that finishes while
   * {@link #start} is starting the transport and gossip leaves stopping them to the start, once
   * they have started (stopped before, they would start after the node stopped, and run on).
   */
  private final Object partsLock = new Object();
  /** Whether {@link #start} is starting the transport and gossip. */
  private boolean partsStarting;
  /** Whether a stop finished while they were starting, and left stopping them to the start. */
  private boolean partsStopLeft;
  /**
   * The thread starting the transport and gossip ({@link #start}) or stopping them
   * ({@link #stopParts}), while it does, else null: the stop completes only once that thread is
   * done with them, so a wait for it there would never end ({@link StopFuture}).
   */
  private volatile Thread partsThread;
  /** What {@link #partsThread} is doing, for the failure of a wait there. */
  private volatile String partsCall;
  private final AtomicInteger inFlight = new AtomicInteger();
  private final ConcurrentHashMap<String, Execution> servingForPeers = new ConcurrentHashMap<>();
  /**
   * Peers' CANCELs, remembered so that a FORWARD they overtook does not run, and the forwards
   * answered lately; its lock also covers looking up and registering executions in
   * {@code servingForPeers}.
   */
  private final EarlyCancels earlyCancels;
  /** Every execution taken on and not yet answered (what a stop's grace period ends). */
  private final Set<Execution> live = ConcurrentHashMap.newKeySet();
  /** Set once a stop's grace period has ended: executions still taken on are abandoned. */
  private volatile boolean abandoning;
  /**
   * Guards {@code graceTimer} and {@code graceDeadline}: of all the grace periods stops asked
   * for, only the one that ends first is timed (one timer, however often stop is called).
   */
  private final Object graceLock = new Object();
  /** The timer ending the earliest grace period asked for, or null (cancelled on stopping). */
  private Scheduler.Cancellable graceTimer;
  /** When {@code graceTimer} ends, on the node's clock (meaningful while it is not null). */
  private long graceDeadline;
  /** Engine runs in progress by request id (unique per origin only: several may share one). */
  private final ConcurrentHashMap<String, Integer> onEngine = new ConcurrentHashMap<>();

  private final LongAdder requests = new LongAdder();
  private final LongAdder servedLocally = new LongAdder();
  private final LongAdder forwarded = new LongAdder();
  private final LongAdder failed = new LongAdder();
  private final LongAdder coldPlacements = new LongAdder();
  private final LongAdder servedForPeers = new LongAdder();
  private final LongAdder refusedForPeers = new LongAdder();
  private final LongAdder pushedBack = new LongAdder();
  private final EnumMap<FallbackCause, LongAdder> fallbacks = new EnumMap<>(FallbackCause.class);
  private final LongAdder estimatedCached = new LongAdder();
  private final LongAdder actualCached = new LongAdder();
  private final LongAdder promptTokens = new LongAdder();
  private final LongAdder cachedPromptTokens = new LongAdder();
  private final LongAdder malformedInbound = new LongAdder();
  private final LongAdder strayStreams = new LongAdder();
  private final LongAdder divergences = new LongAdder();
  private final LongAdder cancelledBeforeArrival = new LongAdder();
  private final LongAdder otherModelRefused = new LongAdder();
  /**
   * Runs in {@code answer} once a submitted request's answer is counted, before its future is
   * completed (for tests: a cancel and a {@code stats()} call between the two).
   */
  volatile Runnable beforeAnswerGiven = () -> { };
  /** "sender model-id" of each warning of a peer's request of another model id (bounded). */
  private final Set<String> otherModelSenders = ConcurrentHashMap.newKeySet();
  /** Executions with a streaming forward in flight, by the attempt's stream tag. */
  private final ConcurrentHashMap<Long, Execution> streams = new ConcurrentHashMap<>();
  /**
   * Source of stream tags, seeded from the node's random at the first streaming forward (so a
   * node that never streams draws nothing more from it than before streaming existed).
   */
  private java.util.SplittableRandom tagSource;
  private final AtomicLong decisions = new AtomicLong();

  /** Builds a node with the default components (used by {@link PrefixRouterNode.Builder}). */
  public RouterNode(
      String nodeId,
      RouterConfig config,
      Transport transport,
      InferenceEngine engine,
      Clock clock,
      Scheduler scheduler,
      RandomGenerator random,
      List<PeerAddress> seeds) {
    this(nodeId, config, transport, engine, clock, scheduler, random, seeds, null);
  }

  /**
   * Builds a node from explicit components; {@code components == null} means the defaults. The
   * node reads {@code clock} through its guard ({@link GuardedClock}), which reads it once here.
   *
   * @throws IllegalStateException if the clock throws when read here
   */
  public RouterNode(
      String nodeId,
      RouterConfig config,
      Transport transport,
      InferenceEngine engine,
      Clock clock,
      Scheduler scheduler,
      RandomGenerator random,
      List<PeerAddress> seeds,
      Components components) {
    this.nodeId = PeerAddress.checkNodeId(nodeId);
    this.config = Objects.requireNonNull(config, "config").validate();
    this.transport = Objects.requireNonNull(transport, "transport");
    this.engine = Objects.requireNonNull(engine, "engine");
    this.clock = GuardedClock.of("node " + this.nodeId, Objects.requireNonNull(clock, "clock"));
    this.random = Objects.requireNonNull(random, "random");
    this.seeds = List.copyOf(seeds);
    if (scheduler == null) {
      this.ownedScheduler = Schedulers.newSingleThread("prefix-router-" + nodeId);
      this.scheduler = ownedScheduler;
    } else {
      this.ownedScheduler = null;
      this.scheduler = scheduler;
    }
    for (FallbackCause c : FallbackCause.values()) {
      if (c != FallbackCause.NONE) {
        fallbacks.put(c, new LongAdder());
      }
    }
    this.engineWatch = new EngineWatch(this.nodeId, config.engineStallTimeout().toNanos(),
        config.engineFailureLimit(), config.failureCooldown().toNanos());
    this.engineLoad = new EngineLoadGuard(this.nodeId, this.engine, engineWatch::outstandingNow);
    Components parts = components != null ? components : DefaultComponents.create(this);
    this.local = parts.local();
    this.peers = parts.peers();
    this.cost = new CostModel(config.initialPrefillNanosPerToken());
    this.earlyCancels = EarlyCancels.forTimeoutBound(config.forwardTimeoutMax().toNanos());
    this.planner = new RoutePlanner(config, nodeId, local, parts.hasher(), peers, cost, health,
        this.clock, this::engineLoad);
    planner.avoidLocalWhen(engineWatch::avoidance);
  }

  // ---------------------------------------------------------------- accessors for wiring

  RouterConfig config() {
    return config;
  }

  Transport transport() {
    return transport;
  }

  InferenceEngine engine() {
    return engine;
  }

  Clock clock() {
    return clock;
  }

  /** How many readings of the host's clock threw (each read as the latest good one instead). */
  long clockFailures() {
    return clock.failures();
  }

  Scheduler scheduler() {
    return scheduler;
  }

  RandomGenerator random() {
    return random;
  }

  List<PeerAddress> seeds() {
    return seeds;
  }

  /**
   * Whether the local engine is avoided now, stalled with a request outstanding or failing: the
   * node then advertises overload in its gossip (see {@link EngineWatch}).
   */
  boolean engineAvoided() {
    return engineWatch.avoid(clock.nanoTime());
  }

  /**
   * The engine's whole cache is gone ({@link InferenceEngine#setCacheLossListener}, given by the
   * default components to an engine next to a self-managed tree): its server's process went
   * away, as {@code why} says. The local index forgets its estimate of that cache (a
   * self-managed tree is cleared, and the gossip tells the peers so), and the engine watch
   * counts and logs the loss.
   */
  void engineCacheLost(String why) {
    long tokens = local.cachedTokens();
    local.engineCacheLost();
    engineWatch.cacheLost(why, tokens);
  }

  /**
   * {@code events}, which also count every store of new blocks as progress of the engine: an
   * engine that caches blocks is computing (a long prefill whose request streams nothing).
   */
  CacheEventListener countingProgress(CacheEventListener events) {
    return new CacheEventListener() {
      @Override
      public void onBlocksStored(long parentBlockHash, long[] blockHashes, int[] tokenIds) {
        engineWatch.progressed(clock.nanoTime());
        events.onBlocksStored(parentBlockHash, blockHashes, tokenIds);
      }

      @Override
      public void onBlocksStored(CacheScope scope, long parentBlockHash,
          long[] blockHashes, int[] tokenIds) {
        engineWatch.progressed(clock.nanoTime());
        events.onBlocksStored(scope, parentBlockHash, blockHashes, tokenIds);
      }

      @Override
      public void onBlocksRemoved(long[] blockHashes) {
        events.onBlocksRemoved(blockHashes);
      }

      @Override
      public void onAllCleared() {
        events.onAllCleared();
      }
    };
  }

  /**
   * The engine's load, as the refusal of forwarded work, the planner and the gossip all read it:
   * a reading that throws or is null is read as the last good one, its queue raised to the runs
   * outstanding on the engine beyond those it had running ({@link EngineLoadGuard}).
   */
  EngineLoad engineLoad() {
    return engineLoad.read();
  }

  // ---------------------------------------------------------------- lifecycle

  @Override
  public String nodeId() {
    return nodeId;
  }

  @Override
  public State state() {
    return state.get();
  }

  @Override
  public void start() {
    synchronized (partsLock) {
      if (!state.compareAndSet(State.NEW, State.RUNNING)) {
        throw new IllegalStateException(
            "node " + nodeId + " can only start from NEW, it is " + state.get());
      }
      partsStarting = true;
      partsCall = "starting its transport and gossip (inside Transport.start)";
      partsThread = Thread.currentThread();
    }
    try {
      transport.start(new Inbound());
      peers.start();
    } catch (Throwable e) {
      // a node that failed to start must not look RUNNING and take requests it cannot serve
      // as configured: it stops (at once, unless a request slipped in meanwhile)
      // the caller gets the exception: one line here, its stack trace at debug only
      LOG.warn("node {} failed to start ({}); stopping it", nodeId, e.toString());
      LOG.debug("node {}: the start's failure", nodeId, e);
      state.compareAndSet(State.RUNNING, State.STOPPING); // or a stop came meanwhile
      if (partsStarted() && inFlight.get() == 0) {
        finishStop(true);
      }
      throw e;
    }
    if (partsStarted()) {
      LOG.info("node {} started: {}", nodeId, config);
    }
  }

  /**
   * The transport and gossip have started (or failed to). A stop that finished meanwhile left
   * stopping them to here: they are stopped now, and the stop completes.
   *
   * @return false if they were stopped so
   */
  private boolean partsStarted() {
    synchronized (partsLock) {
      partsStarting = false;
      if (!partsStopLeft) {
        partsThread = null;
        return true;
      }
    }
    stopParts(true);
    return false;
  }

  @Override
  public CompletableFuture<Void> stop() {
    while (true) {
      State s = state.get();
      if (s == State.NEW) {
        if (state.compareAndSet(State.NEW, State.STOPPING)) {
          finishStop(false);
          return stopped;
        }
      } else if (s == State.RUNNING) {
        if (state.compareAndSet(State.RUNNING, State.STOPPING)) {
          if (inFlight.get() == 0) {
            finishStop(true);
          }
          return stopped;
        }
      } else {
        return stopped;
      }
    }
  }

  @Override
  public CompletableFuture<Void> stop(Duration gracePeriod) {
    Objects.requireNonNull(gracePeriod, "gracePeriod");
    if (gracePeriod.isNegative() || gracePeriod.compareTo(MAX_GRACE) > 0) {
      throw new IllegalArgumentException(
          "gracePeriod must be in [0, 365 days], was " + gracePeriod);
    }
    CompletableFuture<Void> f = stop();
    if (!f.isDone()) {
      if (gracePeriod.isZero()) {
        abandonAll();
      } else {
        Scheduler.Cancellable t = graceTimer(gracePeriod.toNanos());
        if (t == TIMER_REFUSED) {
          // nothing can end the grace period: waited for without a bound, a request no timer
          // ends either (its engine's timeout refused too) would hold the stop for ever
          abandonAll();
        } else if (t != null && f.isDone()) { // stopped meanwhile: the timer is not needed
          cancelGuard(t);
        }
      }
    }
    return f;
  }

  /**
   * Times a grace period of {@code nanos} from now, unless one already timed ends no later: the
   * earliest deadline is the only one that matters, so at most one timer is kept (a host calling
   * {@code stop(gracePeriod)} in a loop schedules nothing more). A timer it replaces is
   * cancelled.
   *
   * @return the new timer, null if an earlier one stands or the stop is finishing, or
   *     {@link #TIMER_REFUSED} if the scheduler refused the timer
   */
  private Scheduler.Cancellable graceTimer(long nanos) {
    Scheduler.Cancellable t;
    Scheduler.Cancellable replaced;
    synchronized (graceLock) {
      if (stopFinished.get()) {
        // the stop is finishing (on another thread: its last request just ended), and it has
        // taken or will take the timer to cancel under this lock: one set now would outlive
        // the node
        return null;
      }
      long now = clock.nanoTime();
      if (graceTimer != null && graceDeadline - now <= nanos) {
        return null; // as a difference of readings: a nanoTime may be any long
      }
      t = schedule(nanos, this::abandonAll);
      if (t == TIMER_REFUSED) {
        LOG.error("node {}: with no timer for the stop's grace period, the unanswered requests "
            + "are abandoned now", nodeId);
        return t; // a timer set before, ending later, stays: it finds nothing left
      }
      replaced = graceTimer;
      graceTimer = t;
      graceDeadline = now + nanos;
    }
    cancelGuard(replaced);
    return t;
  }

  /**
   * Ends a stop's grace period: every execution still taken on is abandoned as a CANCEL from
   * its sender would end it (engine run cancelled, forward in flight sent a CANCEL), and
   * answered with {@link NodeNotRunningException} (a peer that sent it gets a retryable FAILED
   * and runs it elsewhere). An execution taken on while this runs sees {@code abandoning} after
   * adding itself to {@code live}, so none escapes. A completion queued behind an output
   * listener's call that has not returned runs at once instead of after it ({@link #settle}):
   * an answer waiting there becomes a {@link NodeNotRunningException}, since the listener has
   * not had the whole output.
   */
  private void abandonAll() {
    if (state.get() != State.STOPPING) {
      return;
    }
    abandoning = true;
    List<Execution> unanswered = new java.util.ArrayList<>();
    for (Execution ex : live) {
      if (!ex.done.get()) {
        unanswered.add(ex);
      }
    }
    if (!unanswered.isEmpty()) {
      LOG.warn("node {}: the stop's grace period ended; abandoning {} unanswered requests",
          nodeId, unanswered.size());
    }
    for (Execution ex : unanswered) {
      abandon(ex, new NodeNotRunningException(nodeId, State.STOPPING));
    }
    // completions queued behind a sink call that has not returned (a listener that blocks,
    // against its contract), this stop's or earlier: the stop does not wait for it
    for (Execution ex : live) {
      ExecutionOutput out = ex.out;
      if (out != null) {
        cutShort(ex, out);
      }
    }
    // answered requests whose future is complete while another thread still runs what depends
    // on it (a function that blocks, against the contract): the answer is given, so the stop
    // does not wait for it; that thread's own ending of the request then finds it ended
    for (Execution ex : live) {
      if (!ex.done.get() || !ex.future.isDone()) {
        continue;
      }
      // read after isDone: the answering thread wrote it before completing the future, so a
      // future seen complete shows it (or null, once that thread's functions have returned)
      Thread answering = ex.answeringOn;
      if (answering != null && answering != Thread.currentThread()
          && stillAnswering(ex, answering)) {
        LOG.warn("node {}: the stop's grace period ended while a function depending on the "
            + "answered future of request {} was still running; the stop does not wait for it",
            nodeId, ex.request.id());
        ended(ex);
      }
    }
  }

  /**
   * Whether {@code answering}, which has completed {@code ex}'s future, is still running what
   * depends on it after yielding to it a moment: the thread that completes a future wakes its
   * waiters ({@code get()}, {@code join()}) before it returns from the completion, so a host
   * that stops the node as soon as its last answer came may find that thread on its way out,
   * with no function of the host's running. Only one still there after
   * {@link #ANSWER_SETTLE_YIELDS} yields is taken for a function that blocks.
   */
  private static boolean stillAnswering(Execution ex, Thread answering) {
    for (int i = 0; i < ANSWER_SETTLE_YIELDS && ex.answeringOn == answering; i++) {
      Thread.yield();
    }
    return ex.answeringOn == answering;
  }

  /** Registers a new execution; abandons it at once if a grace period has already ended. */
  private void taken(Execution ex) {
    live.add(ex);
    abandonIfStopping(ex);
  }

  /** Abandons {@code ex}, taken on, if a stop's grace period has already ended. */
  private void abandonIfStopping(Execution ex) {
    if (abandoning) {
      abandon(ex, new NodeNotRunningException(nodeId, State.STOPPING));
    }
  }

  @Override
  public void close() {
    stop().join();
  }

  private void finishStop(boolean started) {
    if (!stopFinished.compareAndSet(false, true)) {
      return;
    }
    Scheduler.Cancellable grace;
    synchronized (graceLock) {
      grace = graceTimer;
      graceTimer = null;
    }
    cancelGuard(grace);
    synchronized (partsLock) {
      if (partsStarting) {
        // start() is starting them on another thread (or is calling this): stopped before,
        // they would start afterwards and run on; the start stops them once they have started
        partsStopLeft = true;
        return;
      }
    }
    stopParts(started);
  }

  /**
   * Stops gossip (if {@code started}), closes the transport and the node's own scheduler, and
   * completes the stop.
   */
  private void stopParts(boolean started) {
    partsCall = "stopping its gossip and transport (inside Transport.close)";
    partsThread = Thread.currentThread();
    // each part is stopped whatever the other throws: a gossip that fails to stop (a host's
    // scheduler whose timers fail to cancel) must not leave the transport open
    if (started) {
      try {
        peers.stop();
      } catch (Throwable e) {
        LOG.warn("node {}: error while stopping gossip", nodeId, e);
      }
    }
    try {
      transport.close();
    } catch (Throwable e) {
      LOG.warn("node {}: error while closing the transport", nodeId, e);
    } finally {
      state.set(State.STOPPED);
      if (ownedScheduler != null) {
        ownedScheduler.close();
      }
      partsThread = null;
      stopped.complete(null);
      LOG.info("node {} stopped", nodeId);
    }
  }

  /**
   * The stop's future, and every future that depends on it. A wait for one of them
   * ({@code join()}, {@code get()}; {@link #close} is such a wait) on the thread that is
   * starting or stopping the transport and gossip, from inside them (a transport's
   * {@code start()} or {@code close()} that closes the node), would never end: the stop
   * completes only once that thread is done with them, after the call returns. So would one
   * on a thread inside host code the node called while holding the answer to a request it
   * accepted ({@link #heldCall}), which the stop waits for: the engine's {@code load},
   * {@code execute} or {@code cancel}, the client's output listener, what depends on the future
   * {@code submit} returned (a peer's request: the transport's handling of the answer), the
   * transport's send of a CANCEL or a STREAM. It throws an {@link IllegalStateException}
   * naming the problem instead, and the stop goes on: a stop asked for inside the start is
   * done when the start returns (or fails), as one asked for on another thread; one inside the
   * close completes once the close returns (or throws); one inside a call holding an answer
   * once the request is answered, after the call returns.
   */
  private final class StopFuture<T> extends CompletableFuture<T> {
    @Override
    public <U> CompletableFuture<U> newIncompleteFuture() {
      return new StopFuture<>();
    }

    @Override
    public T join() {
      checkWaitCanEnd();
      return super.join();
    }

    @Override
    public T get() throws InterruptedException, ExecutionException {
      checkWaitCanEnd();
      return super.get();
    }

    private void checkWaitCanEnd() {
      if (isDone()) {
        return;
      }
      Thread me = Thread.currentThread();
      String call = me == partsThread ? partsCall : heldCall(me);
      if (call != null) {
        throw new IllegalStateException("node " + nodeId + ": a wait for its stop (close(), or"
            + " join() or get() of stop()'s future) on the thread " + call
            + " would never end: the stop completes only after that call returns; call stop()"
            + " there without waiting");
      }
    }
  }

  /**
   * What {@code thread} is doing inside host code while it holds the answer to a request taken
   * on and not yet answered, for the failure of a wait for the stop there; null if it holds
   * none. Looked up only when such a wait begins, among the requests taken on.
   */
  private String heldCall(Thread thread) {
    for (Execution ex : live) {
      String id = ex.request.id();
      if (ex.answeringOn == thread) {
        return ex.fromPeer
            ? "answering request " + id + " of peer " + ex.tried[0] + " (inside the transport's"
                + " handling of the answer)"
            : "completing the future submit returned for request " + id + " (inside a function"
                + " depending on it)";
      }
      if (ex.cancellingOn == thread) {
        return "ending request " + id + " (inside InferenceEngine.cancel)";
      }
      if (ex.cancelSendingOn == thread) {
        return "ending an attempt of request " + id + " (inside Transport.send of its CANCEL)";
      }
      ExecutionOutput out = ex.out;
      if (out != null && out.deliveringOn() == thread) {
        return out.sink() instanceof StreamSender
            ? "streaming the output of request " + id + " to peer " + ex.tried[0]
                + " (inside Transport.send)"
            : "delivering the output of request " + id + " (inside OutputListener.onOutput)";
      }
      if (ex.executingOn == thread) {
        return "running request " + id + " (inside InferenceEngine.execute)";
      }
      if (ex.loadingOn == thread) {
        return "routing request " + id + " (inside InferenceEngine.load)";
      }
    }
    return null;
  }

  private void executionEnded() {
    if (inFlight.decrementAndGet() == 0 && state.get() == State.STOPPING) {
      finishStop(true);
    }
  }

  // ---------------------------------------------------------------- submit and routing

  @Override
  public CompletableFuture<InferenceResponse> submit(InferenceRequest request) {
    Objects.requireNonNull(request, "request");
    return submitWith(request, null);
  }

  @Override
  public CompletableFuture<InferenceResponse> submit(InferenceRequest request,
      OutputListener listener) {
    Objects.requireNonNull(request, "request");
    Objects.requireNonNull(listener, "listener");
    return submitWith(request, listener);
  }

  /**
   * Submits {@code request}; {@code listener} (null or {@link OutputListener#IGNORE}: nobody
   * listens, and streaming costs nothing) gets its output as it is generated.
   */
  private CompletableFuture<InferenceResponse> submitWith(InferenceRequest request,
      OutputListener listener) {
    inFlight.incrementAndGet();
    State s = state.get();
    if (s != State.RUNNING) {
      executionEnded();
      return CompletableFuture.failedFuture(new NodeNotRunningException(nodeId, s));
    }
    requests.increment();
    Execution ex = new Execution(request, 0, null, nodeId);
    ClientFuture cf = (ClientFuture) ex.future;
    if (listener != null && listener != OutputListener.IGNORE) {
      ex.out = new ExecutionOutput(listener, request.params().maxTokens(), ex.future,
          e -> listenerFailed(ex, e));
    }
    cf.onCancel = () -> abandon(ex, new CancelledByClient());
    taken(ex);
    if (!ex.done.get()) {
      routeOrRunLocal(ex);
    }
    return ex.future;
  }

  /**
   * The client's output listener threw: it is not called again, and the request is abandoned
   * as if its future had been cancelled, failing with the listener's exception as cause.
   */
  private void listenerFailed(Execution ex, Throwable e) {
    LOG.warn("node {}: the output listener of request {} threw; abandoning the request", nodeId,
        ex.request.id(), e);
    abandon(ex, new ListenerFailed(e));
  }

  @Override
  public RouteDecision explain(InferenceRequest request) {
    Objects.requireNonNull(request, "request");
    return planner.decide(BlockHasher.scopeRoot(request.scope()), request.params().hasStops(),
        PromptArrays.shared(request), 0, null, 0, null);
  }

  private void route(Execution ex) {
    if (ex.done.get()) {
      return; // cancelled by the peer that sent it while the last attempt was ending
    }
    PeerSet[] ps = new PeerSet[1];
    String[] tried;
    int triedCount;
    synchronized (ex) {
      tried = ex.tried;
      triedCount = ex.triedCount;
    }
    // the request's first decision counts it in local-caching demand; those after it do not
    boolean entered = ex.firstDecision == null;
    RouteDecision d = decide(ex, tried, triedCount, ps, entered);
    if ((decisions.incrementAndGet() & 1023) == 0) {
      pruneHealth(ps[0]);
    }
    Throwable localFailure = ex.localFailure;
    int probe = EngineWatch.NO_PROBE;
    if (d.isLocal() && localFailure == null) {
      // a stalled or failing engine gets one probe at a time: a decision that crossed the
      // probe's, seeing no run outstanding either, is made again with the engine avoided
      // (still local with no eligible peer)
      probe = engineWatch.takeProbe();
      if (probe == EngineWatch.PROBE_TAKEN) {
        d = decide(ex, tried, triedCount, ps, false);
      }
    }
    if (d.reason() == RouteDecision.Reason.LOCAL_ENGINE_STALLED
        || d.reason() == RouteDecision.Reason.LOCAL_ENGINE_FAILING) {
      engineWatch.rerouted(d.reason());
    }
    if (ex.firstDecision == null) {
      ex.firstDecision = d;
      if (d.reason() == RouteDecision.Reason.COLD_PLACEMENT) {
        coldPlacements.increment();
      }
    }
    if (LOG.isDebugEnabled()) {
      LOG.debug("node {} request {}: {}", nodeId, ex.request.id(), d);
    }
    if (localFailure != null) {
      // the local engine failed it retryably: the cheapest eligible peer, if any, else give up
      RouteDecision.Candidate c = d.isLocal() ? cheapestEligiblePeer(d) : d.target();
      if (c == null) {
        complete(ex, null, nodeId, false, localFailure);
        return;
      }
      if (!ex.localFailureCounted) {
        ex.localFailureCounted = true;
        ex.lastCause = FallbackCause.LOCAL_FAILED;
        fallbacks.get(FallbackCause.LOCAL_FAILED).increment();
      }
      forward(ex, c, ps[0], ps[0].indexOf(c.nodeId()));
    } else if (d.isLocal()) {
      runLocal(ex, probe == EngineWatch.PROBE, d);
    } else {
      int i = ps[0].indexOf(d.targetNodeId());
      forward(ex, d.target(), ps[0], i);
    }
  }

  /**
   * The planner's decision for {@code ex}, marked for {@link StopFuture} while it reads the
   * engine's load (this thread holds {@code ex}'s answer).
   */
  private RouteDecision decide(Execution ex, String[] tried, int triedCount, PeerSet[] ps,
      boolean entered) {
    ex.loadingOn = Thread.currentThread();
    try {
      return planner.decide(ex.scopeRoot, ex.request.params().hasStops(),
          PromptArrays.shared(ex.request), ex.hops, tried, triedCount, ps, entered);
    } finally {
      ex.loadingOn = null;
    }
  }

  /**
   * {@link #engineLoad}, read as {@code ex} starts running here, marked for {@link StopFuture}
   * (this thread holds {@code ex}'s answer).
   */
  private EngineLoad loadFor(Execution ex) {
    ex.loadingOn = Thread.currentThread();
    try {
      return engineLoad();
    } finally {
      ex.loadingOn = null;
    }
  }

  /** The eligible peer of least estimated cost in {@code d}, or null. */
  private static RouteDecision.Candidate cheapestEligiblePeer(RouteDecision d) {
    List<RouteDecision.Candidate> cs = d.candidates();
    RouteDecision.Candidate best = null;
    for (int k = 1; k < cs.size(); k++) {
      RouteDecision.Candidate c = cs.get(k);
      if (c.skipped() == RouteDecision.SkipReason.NONE
          && (best == null || c.costNanos() < best.costNanos())) {
        best = c;
      }
    }
    return best;
  }

  /**
   * The local engine failed {@code ex} with {@code t}. A retryable failure of a request this
   * node's client submitted is tried on a peer (routed to peers only from then on) while
   * forwards are left and the policy and hop limit allow forwarding, unless it runs here because
   * its last forward found the transport closed or the request too large for the link;
   * otherwise the request fails. A failure that is not an {@link EngineException} (the engine's
   * {@code execute} threw, or its future failed with anything else) breaks the engine's
   * contract and is retryable: a peer's engine does not share this one's bug.
   */
  private void localFailed(Execution ex, Throwable t) {
    // after a closed transport no peer can be reached; after a forward too large for the link,
    // the other peers' links have the same limit
    boolean retry = !ex.fromPeer
        && (!(t instanceof EngineException ee) || ee.retryable())
        && config.policy() != RoutingPolicy.LOCAL_ONLY && ex.hops < config.hopLimit()
        && ex.lastCause != FallbackCause.TRANSPORT_CLOSED
        && ex.lastCause != FallbackCause.TOO_LARGE;
    if (retry) {
      synchronized (ex) {
        retry = ex.forwards < MAX_FORWARDS;
      }
    }
    if (!retry) {
      complete(ex, null, nodeId, false, t);
      return;
    }
    if (ex.peerRefusal != null) {
      // a peer's engine already refused it not retryably: another would fail it alike
      complete(ex, null, nodeId, false, ex.peerRefusal);
      return;
    }
    ex.localFailure = t;
    LOG.debug("node {} request {}: the local engine failed ({}); trying a peer", nodeId,
        ex.request.id(), t.getMessage());
    routeOrRunLocal(ex);
  }

  /**
   * A run of request {@code id} on the local engine failed with {@code thrown}, which is not an
   * {@link EngineException}: the engine breaks its contract (a bug of the host's engine, or an
   * adapter that lets its HTTP client's {@code IOException} through). Counted; the first is
   * logged with what was thrown (at ERROR for an {@link Error}, else at WARN), later ones at
   * WARN when their count reaches a power of two ({@link DoublingLog}, as {@link EngineLoadGuard}
   * logs a failing load), so an engine that fails so at every run does not fill the log.
   */
  private void engineBroke(String id, Throwable thrown) {
    long n = engineContractFailures.failed(); // 0 unless logged
    if (n == 1) {
      CountedFailureLog.log(LOG, thrown, "node {}: its engine"
          + " failed request {} with {}, which is not an EngineException as InferenceEngine's"
          + " contract requires; the node takes it for a retryable failure of its engine (tried"
          + " on a peer, counted toward engineFailureLimit)", nodeId, id,
          thrown.getClass().getName());
    } else if (n > 1) {
      LOG.warn("node {}: its engine has failed {} runs with an exception that is not an"
          + " EngineException, the latest: {}", nodeId, n, String.valueOf(thrown));
    }
  }

  /**
   * Routes {@code ex}. If routing throws before an attempt starts (a failing local index, peer
   * view or engine load, an Error of an SPI), the request runs here, under a local-only decision
   * if it had none yet, rather than going unanswered; an attempt that did start ends on its own
   * (every SPI call within one is guarded), so it is not started twice.
   */
  private void routeOrRunLocal(Execution ex) {
    int before;
    synchronized (ex) {
      before = ex.attempts;
    }
    try {
      route(ex);
    } catch (Throwable e) {
      LOG.error("node {}: routing failed for {}; running it here", nodeId, ex.request.id(), e);
      if (ex.firstDecision == null) {
        ex.firstDecision = routingFailedDecision(ex.request);
      }
      int after;
      synchronized (ex) {
        after = ex.attempts;
      }
      if (after == before) {
        runLocalOnce(ex);
      }
    }
  }

  /**
   * Runs {@code ex} on the local engine, unless that engine already failed it: then the request
   * fails with that failure (a request runs here at most once).
   */
  private void runLocalOnce(Execution ex) {
    Throwable localFailure = ex.localFailure;
    if (localFailure != null) {
      complete(ex, null, nodeId, false, localFailure);
    } else {
      runLocal(ex);
    }
  }

  /** The decision recorded for a request whose routing threw: run here. */
  private RouteDecision routingFailedDecision(InferenceRequest request) {
    return new RouteDecision(config.policy(), request.length(), new String[] {nodeId},
        new int[1], new int[1], new int[1], new long[1], new long[1],
        new RouteDecision.SkipReason[] {RouteDecision.SkipReason.NONE}, 0,
        RouteDecision.Reason.ROUTING_FAILED);
  }

  private void pruneHealth(PeerSet ps) {
    Set<String> live = new HashSet<>();
    for (int i = 0; i < ps.size; i++) {
      live.add(ps.ids[i]);
    }
    health.prune(live, clock.nanoTime());
  }

  private void forward(Execution ex, RouteDecision.Candidate target, PeerSet ps, int i) {
    PeerAddress to = ps.address(i);
    PeerHealth.PeerState st = health.get(ps, i);
    long rtt = Math.max(0, target.rttNanos());
    // the peer's queue wait and prefill as the model estimates them: the cost less the trip
    long overhead = st.overheadNanos(config.forwardOverhead().toNanos());
    double base = Math.max(0, (double) target.costNanos() - rtt - overhead);
    int uncached = Math.max(0, ex.request.length() - target.effectiveMatchedTokens());
    long timeout = forwardTimeout(st, base, uncached, ex.request.params().maxTokens(), rtt);
    boolean guessed = !cost.hasObservedService() || !cost.covers(uncached);
    startForward(ex, to, st, timeout, rtt, target.matchedTokens(), base, ps.generation[i],
        guessed, ps.rttNanos[i], false);
  }

  /**
   * Sends {@code ex} to {@code to} (where the peer's new process listens instead if it restarted
   * since the decision's snapshot showed it in incarnation {@code generation}: see
   * {@link PeerHealth#forwarded}) as a new attempt and handles its answer. A {@code resend}
   * (the same forward again, without streaming, to a peer that did not speak the streaming
   * FORWARD) is not counted as another attempt or forward.
   *
   * <p>A forward without streaming waits {@code timeout} for the answer (the transport's
   * timeout, and a guard timer 25% later). A streamed one waits {@code timeout} for its first
   * piece, then {@code timeout} from the latest piece received ({@link #checkStreamIdle}),
   * within an overall bound ({@link #streamLimit}): the transport's timeout is that bound, and
   * the guard is 25% past it.
   */
  private void startForward(Execution ex, PeerAddress to, PeerHealth.PeerState st, long timeout,
      long rtt, int matched, double base, long generation, boolean guessed, long gossipRtt,
      boolean resend) {
    // a resend is the FORWARD again without streaming, whatever is remembered of the peer: asked
    // to stream again, the peer would refuse again, and the request would go back and forth
    boolean stream = !resend && ex.out != null
        && !st.noStreaming.remembered(generation, clock.nanoTime());
    long tag = stream ? nextStreamTag(ex) : 0L;
    byte[] payload =
        ForwardCodec.forward(ex.request, ex.origin, ex.hops + 1, stream, tag, config.modelId());
    Attempt a;
    synchronized (ex) {
      if (ex.ending || ex.done.get()) { // abandoned while it was being routed: nothing to send
        if (stream) {
          streams.remove(tag, ex);
        }
        return;
      }
      long sentAt = clock.nanoTime();
      // counted before the attempt is published, so that an abandon ending it at once (whose
      // release counts the answer) never takes the peer's outstanding count below zero; on the
      // record lookups find, which the attempt then keeps (st may have been pruned meanwhile);
      // that record's incarnation is the one the request goes to, a later one than the
      // decision's snapshot showed if the peer restarted since, and its end reports it (a
      // snapshot that knows no incarnation, 0, still reports none); a restarted peer may
      // listen elsewhere, so the request goes where the record notes the new process listens
      // (the decision's address if it notes none)
      PeerHealth.PeerState peer = health.forwarded(to, generation);
      long incarnation = generation == 0 ? 0 : peer.generation;
      PeerAddress at = peer.address;
      PeerAddress dest = incarnation > generation && at != null ? at : to;
      a = new Attempt(++ex.attemptSeq, dest, peer, sentAt, matched, base, incarnation, guessed);
      a.gossipRtt = gossipRtt;
      a.timeout = timeout;
      a.rtt = rtt;
      a.limit = stream ? streamLimit(timeout, rtt) : timeout;
      a.lastPieceAt = a.sentAt;
      if (stream) {
        a.streamTag = tag;
        a.output = new ExecutionOutput.Attempt();
      }
      ex.forwarding = a;
      if (!resend) {
        ex.attempts++;
        ex.forwards++;
        ex.tried[ex.triedCount++] = to.nodeId();
      }
    }
    long limit = a.limit;
    // a transport that ignored its timeout still holds the request: it is let go of
    Scheduler.Cancellable guard = schedule(limit + limit / 4 + 1_000_000L, () -> endForward(ex,
        a, new TransportException(TransportException.Kind.TIMEOUT,
            "no answer from " + a.to + " within the forwarding timeout (transport guard)")));
    if (stream) {
      a.idle = schedule(timeout, () -> checkStreamIdle(ex, a));
    }
    long every = Math.max(1_000_000L, config.peerSuspectAfter().toNanos() / 2);
    if (limit > every) {
      a.watch = schedule(every, () -> watchPeer(ex, a, every));
    }
    CompletableFuture<byte[]> f;
    try {
      f = transport.request(a.to, payload, Duration.ofNanos(limit));
      if (f == null) {
        f = CompletableFuture.failedFuture(new TransportException(
            TransportException.Kind.PROTOCOL, "transport returned no future"));
      }
    } catch (Throwable e) {
      // thrown on, an Error (or a checked exception thrown undeclared) would leave the attempt
      // to the guard timer and the answer to a future the caller never gets
      f = CompletableFuture.failedFuture(e);
    }
    a.request = f;
    if (!f.isDone() && (a.endedWith != null || ex.endingAfter(a.seq))) {
      // abandoned, or ended by the node (its guard timer, its stream's silence, its peer
      // suspected: endForward), while the FORWARD was being sent: its CANCEL may have gone
      // first and found nothing at the peer, so one more follows the FORWARD; and the abandon
      // or endForward found no future to let go of, so the transport is let go of here (else
      // it awaits the answer, holding what it holds for the request, until its timeout). Let go
      // of first: until then the request holds one of the peer's in-flight slots, and a
      // transport at its limit for the peer drops a message sent meanwhile
      letGo(a);
      sendCancel(ex, a.to);
    }
    f.whenComplete((bytes, err) -> {
      cancelGuard(guard);
      cancelGuard(a.watch);
      cancelGuard(a.idle);
      onForwardDone(ex, a, bytes, err);
      // a liveness or inactivity check running meanwhile may have set its next timer after
      // the cancels above; the attempt is over now, so that check sees it is over once it has
      // set the timer (and cancels it), or its timer is cancelled here
      cancelGuard(a.watch);
      cancelGuard(a.idle);
    });
  }

  /**
   * Stops awaiting the transport's answer to an attempt the node has ended itself (for silence,
   * a suspected peer, the request abandoned, or the guard timer after a transport that did not
   * keep its own timeout): the transport would otherwise wait until its timeout (or for ever),
   * which for a streamed forward is the overall bound, and over HTTP hold a request and one of
   * the peer's in-flight slots meanwhile. Its completion then finds the attempt over.
   */
  private static void letGo(Attempt a) {
    CompletableFuture<byte[]> r = a.request;
    if (r != null) {
      r.cancel(false);
    }
  }

  /**
   * Ends attempt {@code a} of {@code ex} as failed with {@code why} (the guard timer or the
   * stream's silence: a timeout; the peer suspected), as if the transport had answered so. The
   * transport is let go of first ({@link #letGo}), so the CANCEL the failure sends goes once the
   * forward no longer holds one of the peer's in-flight slots: a transport at its limit for the
   * peer (HTTP's {@code maxInFlightPerPeer}) drops a message sent meanwhile. The failure is
   * recorded on the attempt before, so that the cancelled future's completion, which may get
   * there first, ends the attempt with it rather than as cancelled. Ended while the transport's
   * {@code request} has not returned yet, it has no future to let go of: {@link #startForward}
   * lets go of it once returned, and sends one more CANCEL then.
   */
  private void endForward(Execution ex, Attempt a, TransportException why) {
    a.endedWith = why;
    letGo(a);
    onForwardDone(ex, a, null, why);
  }

  /**
   * The overall bound of a streamed forward whose forwarding timeout is {@code timeout}:
   * {@code engineTimeout} plus twice the round trip {@code rtt}, after which the peer has failed
   * the request itself, and never less than {@code timeout}.
   */
  long streamLimit(long timeout, long rtt) {
    double bound = (double) config.engineTimeout().toNanos() + 2.0 * Math.max(0, rtt);
    return (long) Math.min(Long.MAX_VALUE / 4, Math.max((double) timeout, bound));
  }

  /**
   * The inactivity timer of a streamed forward: the attempt times out (as a transport
   * {@code TIMEOUT} does: the peer's counters, a CANCEL, a fallback) once a whole forwarding
   * timeout has passed without a piece of its output (counted from the send until the first
   * piece), or once its overall bound has passed; otherwise the timer is set again for the
   * rest.
   */
  private void checkStreamIdle(Execution ex, Attempt a) {
    long last;
    synchronized (ex) {
      if (ex.done.get() || ex.attemptSeq != a.seq) {
        return;
      }
      last = a.lastPieceAt;
    }
    long now = clock.nanoTime();
    // what is left of each, as differences of readings (a nanoTime may be any long)
    long idleIn = a.timeout - (now - last);
    long endIn = a.limit - (now - a.sentAt);
    long wait = Math.min(idleIn, endIn);
    if (wait <= 0) {
      String why = endIn <= 0
          ? "no answer from " + a.to + " within the overall bound of a streamed forward"
          : "no output from " + a.to + " within the forwarding timeout";
      endForward(ex, a, new TransportException(TransportException.Kind.TIMEOUT, why));
    } else {
      a.idle = schedule(wait, () -> checkStreamIdle(ex, a));
      cancelIfOver(ex, a, a.idle);
    }
  }

  /**
   * Cancels {@code timer}, just set for attempt {@code a} of {@code ex} (in {@code a.idle} or
   * {@code a.watch}), if the attempt has ended meanwhile: its answer may have come on another
   * thread after this check looked and before the timer was set, and the answer's thread cancels
   * only the timers it finds set.
   */
  private void cancelIfOver(Execution ex, Attempt a, Scheduler.Cancellable timer) {
    boolean over;
    synchronized (ex) {
      over = ex.done.get() || ex.attemptSeq != a.seq;
    }
    if (over) {
      cancelGuard(timer);
    }
  }

  /**
   * A fresh stream tag for a forward of {@code ex}, registered so that STREAM messages find the
   * execution (a tag in use is never handed out twice).
   */
  private long nextStreamTag(Execution ex) {
    while (true) {
      long tag;
      synchronized (streams) {
        if (tagSource == null) {
          tagSource = new java.util.SplittableRandom(random.nextLong());
        }
        tag = tagSource.nextLong();
      }
      if (streams.putIfAbsent(tag, ex) == null) {
        return tag;
      }
    }
  }

  /**
   * While a forward's answer is awaited, checks every half {@code peerSuspectAfter} that the
   * failure detector still holds the peer live and unsuspected; if not, the forward ends at once
   * as {@code UNREACHABLE} and falls back, instead of waiting out a timeout sized for a long
   * generation.
   */
  private void watchPeer(Execution ex, Attempt a, long every) {
    synchronized (ex) {
      if (ex.done.get() || ex.attemptSeq != a.seq) {
        return;
      }
    }
    boolean gone;
    try {
      PeerSet ps = peers.livePeers();
      int i = ps.indexOf(a.to.nodeId());
      gone = i < 0 || ps.suspect[i];
    } catch (Throwable e) {
      LOG.debug("node {}: peer view failed while watching {}", nodeId, a.to, e);
      gone = false;
    }
    if (gone) {
      a.endedAsSuspected = true;
      endForward(ex, a, new TransportException(TransportException.Kind.UNREACHABLE,
          a.to + " was suspected by the failure detector while its answer was awaited"));
    } else {
      a.watch = schedule(every, () -> watchPeer(ex, a, every));
      cancelIfOver(ex, a, a.watch);
    }
  }

  /**
   * How long to wait for {@code peer}'s answer to a forward: {@code 4 × expected × backoff +
   * 2 × rtt}, where {@code expected} is the peer's queue wait and prefill ({@code base}) plus
   * {@code maxTokens} at the learned decode time per token, scaled by how much slower than that
   * the peer has answered ({@link PeerHealth.PeerState#slowness}), and {@code backoff} doubles
   * with each timeout there since its last answer. At least {@code forwardTimeoutMin}. At most
   * {@code forwardTimeoutMax}, unless twice the expected time exceeds it: then twice the
   * expected time (but no more than {@code engineTimeout}, after which the peer fails the
   * request itself) plus the round trip, so a long generation is not cut off by the cap and run
   * a second time here; timeouts alone never lengthen it past the cap. While nothing is known of
   * any engine's speed (no result seen yet, of this node's engine or a peer's) and the peer has
   * never answered, it waits {@code forwardTimeoutMax}: the prior is a guess, and a false
   * timeout runs the request twice.
   *
   * <p>The prefill of the {@code uncached} tokens the peer is expected to compute is priced in
   * {@code base} by the routing slope, which may still be the prior. For the timeout it is
   * taken at least at the bound the samples give ({@link CostModel#prefillBoundNanosPerToken}),
   * which can lengthen the timeout up to the cap but not past it; and a prompt longer than any
   * sample ({@link CostModel#covers}) waits at least {@code forwardTimeoutMax}: nothing
   * observed bounds its prefill.
   */
  long forwardTimeout(PeerHealth.PeerState peer, double base, int uncached, int maxTokens,
      long rtt) {
    long max = config.forwardTimeoutMax().toNanos();
    double slowness = peer.slowness;
    if (slowness < 0 && !cost.hasObservedService()) {
      return max;
    }
    double expected = (base + maxTokens * cost.decodeNanosPerToken()) * Math.max(1.0, slowness);
    double upper = Math.max(max,
        Math.min(2 * expected, (double) config.engineTimeout().toNanos()) + 2.0 * rtt);
    if (!cost.covers(uncached)) {
      return (long) Math.min(Long.MAX_VALUE / 4, upper);
    }
    double bounded = Math.max(0,
        cost.prefillBoundNanosPerToken() - cost.prefillNanosPerToken()) * uncached;
    double t = Math.min(upper,
        4 * (expected + bounded * Math.max(1.0, slowness)) * peer.backoff + 2.0 * rtt);
    return (long) Math.min(Long.MAX_VALUE / 4,
        Math.max(config.forwardTimeoutMin().toNanos(), t));
  }

  private void onForwardDone(Execution ex, Attempt a, byte[] bytes, Throwable err) {
    Throwable endedWith = a.endedWith;
    if (endedWith != null && err != null && unwrap(err) instanceof CancellationException) {
      err = endedWith; // let go of by the node as it ended the attempt (endForward)
    }
    if (a.released.compareAndSet(false, true)) {
      a.peer.answered();
    }
    if (a.output != null) {
      streams.remove(a.streamTag, ex);
    }
    if (!ex.claim(a.seq)) {
      return;
    }
    if (a.endedAsSuspected) {
      // suspected is not dead (lost gossip, a delay spike, a one-way partition): a peer still
      // running the request would generate its whole answer for nobody
      sendCancelHolding(ex, a.to);
    }
    long now = clock.nanoTime();
    FallbackCause cause;
    String detail;
    boolean finalAtPeer = false; // the peer's engine says no other engine would serve it
    if (err != null) {
      Throwable t = unwrap(err);
      // a host's TransportException subclass may answer no kind: read as unreachable too, as
      // any other failure is (a switch over null would throw with the request claimed, lost)
      TransportException.Kind kind = t instanceof TransportException te && te.kind() != null
          ? te.kind() : TransportException.Kind.UNREACHABLE;
      detail = String.valueOf(t.getMessage());
      switch (kind) {
        case TIMEOUT -> {
          cause = FallbackCause.TIMEOUT;
          // a timeout set without samples covering the prompt says nothing of the peer's
          // health: it is not cooled down (only its backoff doubles)
          if (!a.guessed) {
            health.coolDownFailed(a.to.nodeId(), a.generation, now,
                config.failureCooldown().toNanos());
          }
          a.peer.timedOut();
          sendCancelHolding(ex, a.to);
        }
        case BUSY -> {
          if (t instanceof InFlightLimitException) {
            // this node's transport already has its limit of requests in flight to the peer:
            // nothing was sent and the peer said nothing, so it is neither cooled down nor
            // counted as pushing back; the next candidate or the local engine takes it
            cause = FallbackCause.IN_FLIGHT_LIMIT;
          } else {
            cause = FallbackCause.BUSY;
            pushedBack.increment();
            health.coolDownBusy(a.to.nodeId(), a.generation, now, config.busyCooldown().toNanos());
          }
        }
        case PROTOCOL -> {
          cause = FallbackCause.PROTOCOL_ERROR;
          boolean oldVersion = rejectsForwardVersion(detail);
          if (refusesModel(detail) || (oldVersion && !config.modelId().isEmpty())) {
            // another model, or a node from before model ids that might serve another: never
            // asked again in a version without the model id; skipped by every request until it
            // restarts (or 5 minutes pass), without cooling it down
            if (!a.peer.otherModel.remembered(a.generation, now)) {
              LOG.warn("node {}: {} {}; it is sent no request until it restarts", nodeId, a.to,
                  oldVersion ? "does not read a FORWARD's model id (a version from before model"
                      + " ids), so it might serve another model" : "serves another model: "
                      + detail);
            }
            a.peer.otherModel.rejected(a.generation, now);
          } else if (oldVersion && ex.request.params().hasStops()) {
            // a node from before stops: asked again in a version it speaks, it would run the
            // request without its stops and answer text beyond them, so it is never asked
            // again; requests with stops skip it until it restarts, others still go there
            if (!a.peer.noStops.remembered(a.generation, now)) {
              LOG.warn("node {}: {} does not speak FORWARDs with stops (a version from before"
                  + " stops); requests with stop strings or stop token ids skip it until it"
                  + " restarts", nodeId, a.to);
            }
            a.peer.noStops.rejected(a.generation, now);
          } else if (a.output != null && oldVersion) {
            // a node from before streaming: it serves the request, without streaming, when
            // asked again in a version it speaks; until it restarts it is not asked to stream
            if (!a.peer.noStreaming.remembered(a.generation, now)) {
              LOG.warn("node {}: {} does not speak streaming FORWARDs (a version from before"
                  + " streaming); its answers are not streamed until it restarts", nodeId,
                  a.to);
            }
            a.peer.noStreaming.rejected(a.generation, now);
            if (!ex.done.get()) {
              startForward(ex, a.to, a.peer, a.timeout, a.rtt, a.estimatedMatched, a.base,
                  a.generation, a.guessed, a.gossipRtt, true);
              return;
            }
          }
          if (a.peer.otherModel.remembered(a.generation, now)) {
            // skipped by every request (above), not cooled down
          } else if (oldVersion && ex.request.params().hasStops()) {
            // skipped by requests with stops only (above), not cooled down for everyone
          } else if (!ex.request.scope().isDefault() && oldVersion) {
            // a node from before cache scopes: it serves unscoped requests, so it is skipped by
            // scoped ones only, not cooled down for everyone
            if (!a.peer.noScopes.remembered(a.generation, now)) {
              LOG.warn("node {}: {} does not speak scoped FORWARDs (a version from before cache"
                  + " scopes); requests with a LoRA adapter or cache salt skip it until it"
                  + " restarts", nodeId, a.to);
            }
            a.peer.noScopes.rejected(a.generation, now);
          } else {
            coolDownAfterGarbage(a, now);
          }
        }
        case CLOSED -> cause = FallbackCause.TRANSPORT_CLOSED;
        // too large for the link (the transport's limit, or the peer's): nothing is wrong with
        // the peer, so it is not cooled down; the request runs here (below)
        case TOO_LARGE -> cause = FallbackCause.TOO_LARGE;
        default -> {
          cause = FallbackCause.UNREACHABLE;
          health.coolDownFailed(a.to.nodeId(), a.generation, now,
              config.failureCooldown().toNanos());
        }
      }
    } else {
      ForwardCodec.Message m;
      if (bytes == null) { // the host's transport breaks its contract: taken as a malformed answer
        m = null;
        malformedInbound.increment();
        LOG.warn("node {}: its transport completed the forward to {} with null, not the peer's"
            + " answer: Transport.request must complete with the answer's bytes or fail with a"
            + " TransportException; taken for a malformed answer", nodeId, a.to);
      } else {
        try {
          m = ForwardCodec.decode(bytes);
        } catch (MalformedMessageException | RuntimeException e) {
          m = null;
          malformedInbound.increment();
          LOG.warn("node {}: malformed answer from {}: {}", nodeId, a.to, e.getMessage());
        }
      }
      if (m != null && !m.requestId().equals(ex.request.id())) {
        LOG.warn("node {}: answer from {} names request {} instead of {}", nodeId, a.to,
            m.requestId(), ex.request.id());
        m = null;
      }
      if (m instanceof ForwardCodec.Result r && !couldAnswer(r.result(), ex.request)) {
        LOG.warn("node {}: answer from {} cannot be for request {}: {}", nodeId, a.to,
            ex.request.id(), r.result());
        m = null;
      }
      if (m instanceof ForwardCodec.Result r) {
        EngineResult res = r.result();
        // the peer's own time on the request cannot exceed the whole forward's, which this node
        // timed: a larger figure (a peer's bug, up to 2^63 - 1 on the wire) would be learned
        // as the service time of every engine and price every queued request at it
        long elapsed = Math.max(0, now - a.sentAt);
        long serverNanos = Math.min(r.serverNanos(), elapsed);
        // so are its engine's prefill and decode: timings the forward cannot contain are not
        // learned from (the peer's own time stands in for them, as for an engine without any)
        EngineResult learned = timingsWithin(res, elapsed);
        // timed by the peer (receipt to answer) when its engine reports no timings
        cost.observe(learned, serverNanos, a.estimatedMatched);
        a.peer.observeService(serverNanos,
            a.base + res.outputTokens().length * cost.decodeNanosPerToken());
        int actual = r.result().cachedPromptTokens();
        if (actual >= 0) {
          // counted once it answers
          a.peer.observeAccuracy(a.estimatedMatched, actual, now,
              config.distrustHalfLife().toNanos());
        }
        a.peer.observeRtt(elapsed - serverNanos);
        if (a.gossipRtt >= 0 && serverNanos >= 0 && cost.learnsForwardOverhead()) {
          a.peer.observeOverhead(elapsed - serverNanos - a.gossipRtt,
              config.forwardOverhead().toNanos());
        }
        complete(ex, r.result(), r.servedBy(), true, null);
        return;
      } else if (m instanceof ForwardCodec.Busy) {
        cause = FallbackCause.BUSY;
        detail = "busy";
        pushedBack.increment();
        health.coolDownBusy(a.to.nodeId(), a.generation, now, config.busyCooldown().toNanos());
      } else if (m instanceof ForwardCodec.Failed fm) {
        cause = FallbackCause.PEER_FAILED;
        detail = fm.message();
        finalAtPeer = !fm.retryable();
        if (fm.retryable()) {
          // the peer's engine is failing (down, overloaded, timing out): one that fails fast
          // looks idle and keeps its advertised cache, so without a cool-down it would draw
          // every request for its prefixes and cost each of them a round trip
          health.coolDownFailed(a.to.nodeId(), a.generation, now,
              config.failureCooldown().toNanos());
        }
      } else {
        cause = FallbackCause.PROTOCOL_ERROR;
        detail = "unexpected or malformed answer";
        coolDownAfterGarbage(a, now);
      }
    }
    fallbacks.get(cause).increment();
    ex.lastCause = cause;
    LOG.debug("node {} request {}: forward to {} fell back ({}: {})", nodeId, ex.request.id(),
        a.to, cause, detail);
    int forwards;
    synchronized (ex) {
      if (cause == FallbackCause.IN_FLIGHT_LIMIT && ex.unsentForwards < MAX_UNSENT_FORWARDS) {
        // nothing left this node: the forward does not use up one of the request's forwards
        // (the peer stays excluded for the request, so the next decision takes another)
        ex.unsentForwards++;
        ex.forwards--;
      }
      forwards = ex.forwards;
    }
    if (finalAtPeer) {
      // not retryable: the request is invalid, or its generation outlasted the peer's time
      // limit, so another peer would fail it alike. The local engine judges it once (an
      // invalid request fails here too, as the client's own engine's failure); if it already
      // failed it, the peer's answer is final.
      PeerEngineFailure refusal = new PeerEngineFailure(a.to.nodeId(), detail);
      // an engine the node avoids (failing or stalled) does not judge it: it would fail it, or
      // hold it until engineTimeout, beside the probe; unless the probe is due, and this is it
      int probe = ex.localFailure != null || engineWatch.avoid(clock.nanoTime())
          ? EngineWatch.PROBE_TAKEN : engineWatch.takeProbe();
      if (probe == EngineWatch.PROBE_TAKEN) {
        complete(ex, null, nodeId, false, refusal);
      } else {
        ex.peerRefusal = refusal; // if the local engine fails it retryably, this is final
        runLocal(ex, probe == EngineWatch.PROBE);
      }
    } else if (forwards >= MAX_FORWARDS || cause == FallbackCause.TRANSPORT_CLOSED
        || cause == FallbackCause.TOO_LARGE) {
      // a closed transport fails every forward: no other peer can be reached either; a request
      // too large for the link is too large for the other peers' too (the limit is this
      // transport's, or the cluster's when a peer's is lower than ours)
      runLocalOnce(ex);
    } else {
      routeOrRunLocal(ex);
    }
  }

  /**
   * {@code res} to learn from: as it is, or without its prefill and decode times (-1, as an
   * engine that reports none) when together they exceed {@code elapsed}, the time the run took
   * as this node measured it, which they cannot.
   */
  private static EngineResult timingsWithin(EngineResult res, long elapsed) {
    if ((double) Math.max(0, res.prefillNanos()) + Math.max(0, res.decodeNanos()) <= elapsed) {
      return res;
    }
    return new EngineResult(res.outputTokens(), res.text(), res.promptTokens(),
        res.cachedPromptTokens(), -1, -1);
  }

  /**
   * Whether a forward's protocol failure says the peer rejected the FORWARD's version: the
   * decoder's {@code UNKNOWN_VERSION} error on the version byte, which a node from before stops
   * raises for a FORWARD with stops (version 4), one from before streaming for a streaming
   * (version 3) FORWARD, and one from before cache scopes for a scoped (version 2) one, and
   * passes back as the failure's message (over HTTP, in the error header the sender quotes).
   */
  static boolean rejectsForwardVersion(String failure) {
    return failure != null && failure.contains(UNKNOWN_FORWARD_VERSION);
  }

  /**
   * Whether a forward's protocol failure says the peer refused it for its model id: its
   * {@link #MODEL_MISMATCH} answer, passed back as the failure's message.
   */
  static boolean refusesModel(String failure) {
    return failure != null && failure.contains(MODEL_MISMATCH);
  }

  /** What a node answers a FORWARD of another model id with (a protocol failure's message). */
  static final String MODEL_MISMATCH = "MODEL_MISMATCH";

  /**
   * How the FAILED answer of a forward whose answer does not fit a RESULT (its text is above
   * 1 MiB of UTF-8, or the whole RESULT above 5 MiB) begins: not retryable, so its sender runs
   * the request itself.
   */
  static final String ANSWER_TOO_LARGE = "ANSWER_TOO_LARGE";

  /** What the forwarding decoder's message says of a version it does not speak. */
  private static final String UNKNOWN_FORWARD_VERSION =
      MalformedMessageException.Reason.UNKNOWN_VERSION + " in field 'version'";

  /**
   * A peer that answered a forward with a malformed, mismatched or unexpected frame is skipped
   * for {@code busyCooldown} (as a failure: {@code FAILED_COOLDOWN}), so the origin does not
   * try it first again while it misbehaves.
   */
  private void coolDownAfterGarbage(Attempt a, long now) {
    health.coolDownFailed(a.to.nodeId(), a.generation, now, config.busyCooldown().toNanos());
  }

  private void runLocal(Execution ex) {
    runLocal(ex, false);
  }

  private void runLocal(Execution ex, boolean probe) {
    runLocal(ex, probe, null);
  }

  /**
   * Runs {@code ex} on the local engine; {@code probe}: the run holds the stalled or failing
   * engine's probe ({@link EngineWatch#takeProbe}), given back when it ends, or at once if it
   * does not start; {@code decision}: the routing decision to run it here, or null (a forward
   * that fell back here, a peer's final failure judged here, routing that threw). Local caching
   * records the run ({@link RoutePlanner#runsHere}) once the engine has taken it, with or
   * without a decision: a run with none counts the tokens the local index's match leaves
   * uncached, and reserves nothing. A request abandoned before its run, or whose run the engine
   * refuses at once, records no run; a bought miss's reservation ends with its run.
   */
  private void runLocal(Execution ex, boolean probe, RouteDecision decision) {
    if (ex.done.get()) {
      if (probe) {
        engineWatch.probeEnded();
      }
      return; // cancelled by the peer that sent it while the last attempt was ending
    }
    int seq;
    ExecutionOutput out;
    ExecutionOutput.Attempt run = new ExecutionOutput.Attempt();
    boolean held;
    synchronized (ex) {
      if (ex.ending) {
        if (probe) {
          engineWatch.probeEnded();
        }
        return; // abandoned while it was being routed: no run
      }
      seq = ++ex.attemptSeq;
      ex.attempts++;
      ex.engineRuns++;
      out = ex.out;
      // a peer's request nobody streams, given a listener anyway (the engine watch): its output
      // so far is kept, for a duplicate that joins it asking for a stream (streamAlsoTo)
      held = out == null && ex.joinable && engineWatch.watching();
      if (held) {
        ex.held = new HeldOutput(seq, run, ex.request.params().maxTokens());
      }
    }
    String id = ex.request.id();
    onEngine.merge(id, 1, Integer::sum);
    // a self-managed tree keeps the prompt's cached prefix while the engine uses it, as the
    // engine does; released when the run ends, however it ends
    LocalPrefixIndex.Pin pin = pinLocal(ex);
    // the reservation of a bought miss, made once the engine has taken the run (below)
    AtomicReference<LocalDemand.Reservation> reservation = new AtomicReference<>();
    AtomicBoolean runEnded = new AtomicBoolean();
    Runnable endRun = () -> {
      if (runEnded.compareAndSet(false, true)) {
        engineWatch.ended();
        // a bought miss occupies the engine no longer than its run
        planner.runEnded(reservation.get());
        if (probe) {
          engineWatch.probeEnded();
        }
        synchronized (ex) {
          ex.engineRuns--;
        }
        onEngine.computeIfPresent(id, (k, v) -> v == 1 ? null : v - 1);
        try {
          pin.release();
        } catch (Throwable e) {
          LOG.warn("node {}: releasing the local index's pin failed", nodeId, e);
        }
      }
    };
    CompletableFuture<EngineResult> f;
    boolean idle = loadFor(ex).total() == 0;
    // for an engine that reports no cached count, and the cache turnover of a run with no
    // decision (below)
    int cachedHere = localMatch(ex);
    long started = clock.nanoTime();
    engineWatch.started(started);
    ex.executingOn = Thread.currentThread();
    try {
      if (out == null && !held && !engineWatch.watching()) {
        f = engine.execute(ex.request);
      } else if (out == null && !held) {
        // nobody streams this run, but the engine's pieces still show it is making progress:
        // a long answer not streamed to its client would otherwise look like a stalled engine
        f = engine.execute(ex.request, (tokens, text) -> engineWatch.progressed(clock.nanoTime()));
      } else {
        f = engine.execute(ex.request, (tokens, text) -> {
          engineWatch.progressed(clock.nanoTime());
          onEnginePiece(ex, seq, run, tokens, text);
        });
      }
      if (f == null) {
        f = CompletableFuture.failedFuture(
            new EngineException("engine returned no future", true));
      }
    } catch (Throwable e) { // thrown on, an Error or a checked exception left the request open
      f = CompletableFuture.failedFuture(e);
    } finally {
      ex.executingOn = null;
    }
    if (!f.isCompletedExceptionally()) {
      // the engine took the run: local caching counts its tokens into the cache turnover, and
      // reserves the engine for a bought miss (before the run can end: endRun releases it); a
      // run with no decision here counts the tokens the local index did not hold. A run
      // refused at once inserted nothing and occupies nothing
      try {
        if (decision != null) {
          reservation.set(planner.runsHere(decision));
        } else {
          planner.runsHere(ex.request.length(), cachedHere);
        }
      } catch (Throwable e) { // the run goes on and is answered all the same
        LOG.warn("node {}: recording the run of {} for local caching failed", nodeId, id, e);
      }
    }
    if (!f.isDone() && ex.endingAfter(seq)) {
      // abandoned while the run was being started: its cancel reached the engine before the
      // run did
      cancelOnEngine(ex);
    }
    // a run that got a slot at once (the engine was idle, or nothing waits after it was
    // submitted) times the engine's service, for engines that report no timings
    boolean atOnce = !f.isDone() && (idle || loadFor(ex).queueDepth() == 0);
    long limit = config.engineTimeout().toNanos();
    Scheduler.Cancellable guard = schedule(limit, () -> {
      if (!ex.claim(seq)) {
        // abandoned meanwhile (its cancel sent), and the engine has still not ended the run:
        // it is given up as an unabandoned one is, its pin released and no longer counted
        endRun.run();
        return;
      }
      cancelHolding(ex);
      endRun.run(); // abandoned: whatever the engine still does for it is not this execution's
      complete(ex, null, nodeId, false, new EngineTimeoutException(
          "no answer within engineTimeout " + config.engineTimeout(), null));
    });
    f.whenComplete((res, err) -> {
      if (err == null && res != null) {
        engineWatch.progressed(clock.nanoTime()); // before the run ends: no gap without either
      }
      Throwable thrown = err == null ? null : unwrap(err);
      // a failure that is no EngineException breaks the engine's contract: a failure of this
      // engine, retryable (a peer's engine does not share its bug)
      boolean broke = thrown != null && !(thrown instanceof EngineException);
      // before the run ends, so that a failing engine's probe is not seen ended before it failed
      if (err == null && res != null && couldAnswer(res, ex.request)) {
        engineWatch.succeeded();
        checkCacheEventsArrive(res);
      } else if (ex.current(seq) && (err == null || broke
          || thrown instanceof EngineException ee && ee.retryable()
              && !(ee instanceof AnswerBudgetException)
              && !(ee instanceof EngineInFlightLimitException))) {
        // a failure of a run that was abandoned (its cancel) is no sign of a failing engine, nor
        // is an answer this node had no heap to read (its own shortage: the engine answered), nor
        // a run its adapter refused at its own in-flight limit (nothing reached the engine)
        if (broke) {
          engineBroke(id, thrown);
        }
        engineWatch.failed(clock.nanoTime(), err == null
            ? res == null ? "no result" : "an answer that cannot be the request's"
            : broke ? String.valueOf(thrown) : String.valueOf(thrown.getMessage()));
      }
      endRun.run();
      cancelGuard(guard);
      if (!ex.claim(seq)) {
        return;
      }
      if (err != null || res == null) {
        Throwable t = err != null ? thrown
            : new EngineException("engine completed with no result", true);
        localFailed(ex, t);
      } else if (!couldAnswer(res, ex.request)) {
        LOG.warn("node {}: the engine's answer cannot be for request {}: {}", nodeId,
            ex.request.id(), res);
        localFailed(ex, new EngineException("the engine's answer cannot be for the request ("
            + ex.request.length() + " prompt tokens, at most " + ex.request.params().maxTokens()
            + " output tokens): " + res, true));
      } else {
        // timed here when the engine reports no timings (the OpenAI-compatible servers); only
        // a run that got a slot at once times the service: a queued one's wait is priced apart
        long elapsed = Math.max(0, clock.nanoTime() - started);
        // the engine's prefill and decode cannot exceed the run, which this node timed: a
        // larger figure (an engine's bug) would be learned as the service time and price every
        // local run at it; such timings are not learned from, as for an engine without any
        EngineResult learned = timingsWithin(res, elapsed);
        cost.observe(learned, atOnce ? elapsed : -1, cachedHere);
        try {
          local.onExecuted(ex.scopeRoot, PromptArrays.shared(ex.request));
        } catch (Throwable e) {
          LOG.warn("node {}: local index update failed", nodeId, e);
        }
        complete(ex, res, nodeId, false, null);
      }
    });
  }

  /**
   * A piece of the local engine's output for attempt {@code seq} of {@code ex}: accepted while
   * that run is the execution's current attempt (not after its result, nor from a run that was
   * abandoned). While nobody streams the run (a peer's request whose output is only held for a
   * duplicate that may join it), the piece is held.
   */
  private void onEnginePiece(Execution ex, int seq, ExecutionOutput.Attempt run, int[] tokens,
      String text) {
    if (tokens == null || text == null) {
      return; // a contract violation: the result still carries the output
    }
    ExecutionOutput out;
    ExecutionOutput.Verdict v;
    synchronized (ex) {
      if (ex.done.get() || ex.attemptSeq != seq) {
        return;
      }
      out = ex.out;
      if (out == null) {
        HeldOutput h = ex.held;
        if (h != null && h.seq == seq) {
          h.add(tokens, text);
        }
        return;
      }
      v = out.offerNext(run, tokens.clone(), text);
    }
    out.drain();
    if (v == ExecutionOutput.Verdict.DIVERGED) {
      diverged(ex, out);
    }
  }

  /** A piece of a forwarded attempt's output, from a peer's STREAM message. */
  private void onStream(PeerAddress from, ForwardCodec.Stream m) {
    Execution ex = streams.get(m.streamTag());
    if (ex == null || !ex.request.id().equals(m.requestId())) {
      strayStreams.increment();
      return;
    }
    ExecutionOutput out = ex.out;
    ExecutionOutput.Verdict v;
    synchronized (ex) {
      Attempt a = ex.forwarding;
      if (ex.done.get() || a == null || a.output == null || ex.attemptSeq != a.seq
          || a.streamTag != m.streamTag() || !a.to.nodeId().equals(from.nodeId())) {
        strayStreams.increment();
        return;
      }
      v = out.offer(a.output, m.tokenOffset(), m.tokens(), m.charOffset(), m.text());
      // the peer is generating: its forwarding timeout counts from here (checkStreamIdle)
      a.lastPieceAt = clock.nanoTime();
    }
    out.drain();
    if (v == ExecutionOutput.Verdict.DIVERGED) {
      diverged(ex, out);
    }
  }

  /**
   * An attempt's output contradicts what {@code ex} already streamed: the stream cannot be
   * repaired, so the execution is abandoned (its run cancelled, its forward sent a CANCEL) and
   * fails with {@link OutputDivergedException}.
   */
  private void diverged(Execution ex, ExecutionOutput out) {
    String why;
    synchronized (ex) {
      why = out.divergence();
    }
    LOG.warn("node {}: the output of request {} diverged from what was already streamed: {}",
        nodeId, ex.request.id(), why);
    abandon(ex, new Diverged(why));
  }

  /** The local index's pin on {@code ex}'s cached prefix; none if the index fails. */
  private LocalPrefixIndex.Pin pinLocal(Execution ex) {
    try {
      LocalPrefixIndex.Pin p = local.pin(ex.scopeRoot, PromptArrays.shared(ex.request));
      return p != null ? p : LocalPrefixIndex.Pin.NONE;
    } catch (Throwable e) {
      LOG.debug("node {}: local index pin failed", nodeId, e);
      return LocalPrefixIndex.Pin.NONE;
    }
  }

  /** The local index's match of {@code ex}'s prompt, or -1 if the index fails. */
  private int localMatch(Execution ex) {
    try {
      int matched = local.match(ex.scopeRoot, PromptArrays.shared(ex.request));
      return Math.min(matched, ex.request.length());
    } catch (Throwable e) {
      LOG.debug("node {}: local index match failed", nodeId, e);
      return -1;
    }
  }

  /**
   * Cancels {@code ex}'s run on the engine, which cancels by request id. Ids are unique per
   * origin only, so another execution here (this node's own client, or another peer) may run
   * under the same id: then nothing is cancelled, rather than failing a bystander. (A run of
   * the same id starting between the check and the cancel is not excluded.)
   */
  private void cancelOnEngine(Execution ex) {
    String id = ex.request.id();
    int mine;
    synchronized (ex) {
      mine = ex.engineRuns;
    }
    Integer all = onEngine.get(id);
    if (mine == 0 || all == null || all != mine) {
      LOG.debug("node {}: not cancelling {} on the engine ({} of {} runs of that id are its)",
          nodeId, id, mine, all);
      return;
    }
    try {
      engine.cancel(id);
    } catch (Throwable e) {
      cancelBroke(id, e);
    }
  }

  /**
   * Counts a run the engine answered that computed a block or more of its prompt (not served
   * from its cache, so it must have stored a block); at the
   * {@link #EVENTLESS_RUNS}-th, if the engine feeds the tree (engine-driven) and has reported no
   * stored block yet, says once that its integration reports no cache events: the tree then
   * mirrors nothing and the peers never route to this node's cache, which nothing else shows
   * but {@code storedEvents} staying 0. Later runs cost a read of the count.
   */
  private void checkCacheEventsArrive(EngineResult res) {
    if (res.promptTokens() - Math.max(0, res.cachedPromptTokens()) < config.blockSize()
        || eventCheckRuns.get() >= EVENTLESS_RUNS
        || eventCheckRuns.incrementAndGet() != EVENTLESS_RUNS) {
      return;
    }
    cacheEventStats().ifPresent(s -> {
      if (s.storedEvents() == 0) {
        LOG.warn("node {}: its engine publishes cache events (publishesCacheEvents() is true)"
            + " but has reported no stored block after {} runs that computed a block or more:"
            + " the node's tree mirrors nothing, so its peers never route to its cache; report"
            + " each block the engine caches to the CacheEventListener (onBlocksStored), or"
            + " return false from publishesCacheEvents() for a tree of the prompts the engine ran",
            nodeId, EVENTLESS_RUNS);
      }
    });
  }

  /**
   * The engine's {@code cancel} of request {@code id} threw {@code thrown}: the engine breaks its
   * contract (a bug of the host's engine), and its run of the request may go on, holding a slot.
   * The request ends all the same. Logged as runs that break the contract are: the first with
   * what was thrown (at ERROR for an {@link Error}, else at WARN), later ones at WARN when their
   * count reaches a power of two ({@link DoublingLog}).
   */
  private void cancelBroke(String id, Throwable thrown) {
    long n = engineCancelFailures.failed(); // 0 unless logged
    if (n == 1) {
      CountedFailureLog.log(LOG, thrown, "node {}: its engine's cancel of request {} threw {};"
          + " InferenceEngine.cancel must not throw: the request ends all the same, but the"
          + " engine may go on running it", nodeId, id, String.valueOf(thrown));
    } else if (n > 1) {
      LOG.warn("node {}: its engine's cancel has thrown {} times, the latest: {}", nodeId, n,
          String.valueOf(thrown));
    }
  }

  /**
   * The peer that sent {@code ex} gave up on it (its CANCEL): whatever this node does for it
   * stops. The current attempt is claimed, so its answer, failure or guard timer is ignored and
   * no fallback follows (a relay would otherwise run the request itself when the next hop
   * fails it); a run on the local engine is cancelled (unless another execution here shares its
   * id), a forward in flight gets a CANCEL of its own, so the cancellation travels along the
   * whole path; the execution ends with a failure, which the sender no longer waits for.
   */
  private void cancelForPeer(Execution ex, PeerAddress from) {
    abandon(ex, new CancelledByPeer(from.nodeId()));
  }

  /**
   * Ends {@code ex} at once with {@code why}: the current attempt is claimed (its answer,
   * failure or guard timer is then ignored and no fallback follows), a run on the local engine
   * is cancelled (unless another execution here shares its id), a forward in flight gets a
   * CANCEL.
   */
  private void abandon(Execution ex, Throwable why) {
    int seq;
    Attempt fwd;
    while (true) {
      synchronized (ex) {
        seq = ex.attemptSeq;
        fwd = ex.forwarding;
      }
      if (ex.done.get()) {
        return;
      }
      if (ex.claimToEnd(seq)) {
        break; // between attempts, the next one sees the execution ending and does not start
      }
      // another attempt started meanwhile: cancel that one
    }
    if (fwd != null && fwd.seq == seq) {
      if (fwd.released.compareAndSet(false, true)) {
        fwd.peer.answered();
      }
      // the transport lets go of the request (and of its in-flight slot for the peer) before
      // the CANCEL is sent: a transport at its limit for the peer would drop the CANCEL, and
      // the peer would generate the whole answer for nobody
      letGo(fwd);
      sendCancelHolding(ex, fwd.to);
    } else {
      cancelHolding(ex);
    }
    complete(ex, null, nodeId, false, why);
  }

  /**
   * Sends a CANCEL of {@code ex} to {@code to}, best effort. It names the request's origin, as
   * the FORWARD did, so that the peer finds the request of that origin when this node relays
   * requests of one id for several origins (for a request submitted here, this node). Ids are
   * unique per origin only as long as its host makes them so, and the peer matches a CANCEL by
   * sender, origin and id: while another execution here of the same origin and id is forwarded
   * to that peer (its host submitted the request twice, or two requests under one id), none is
   * sent, rather than ending that one's run there, as {@link #cancelOnEngine} cancels no run
   * that another execution shares. (One forwarded there between the check and the send is not
   * excluded.)
   */
  private void sendCancel(Execution ex, PeerAddress to) {
    if (sharesForwardTo(ex, to)) {
      LOG.debug("node {}: no CANCEL of {} to {}: another request of that id is forwarded there",
          nodeId, ex.request.id(), to);
      return;
    }
    try {
      transport.send(to, ForwardCodec.cancel(ex.request.id(), ex.origin));
    } catch (Throwable e) {
      LOG.debug("node {}: cancel to {} failed", nodeId, to, e);
    }
  }

  /**
   * Whether another execution here, of {@code ex}'s origin and request id, has its current
   * attempt forwarded to the node {@code to}.
   */
  private boolean sharesForwardTo(Execution ex, PeerAddress to) {
    String id = ex.request.id();
    for (Execution other : live) {
      if (other == ex || other.done.get() || !other.request.id().equals(id)
          || !other.origin.equals(ex.origin)) {
        continue;
      }
      synchronized (other) {
        Attempt f = other.forwarding;
        if (f != null && f.seq == other.attemptSeq && f.to.nodeId().equals(to.nodeId())) {
          return true;
        }
      }
    }
    return false;
  }

  /**
   * {@link #sendCancel}, by a thread that holds {@code ex}'s answer (it claimed the attempt or
   * the execution's end): marked for {@link StopFuture} while the transport sends.
   */
  private void sendCancelHolding(Execution ex, PeerAddress to) {
    ex.cancelSendingOn = Thread.currentThread();
    try {
      sendCancel(ex, to);
    } finally {
      ex.cancelSendingOn = null;
    }
  }

  /**
   * {@link #cancelOnEngine}, by a thread that holds {@code ex}'s answer (it claimed the
   * execution's end): marked for {@link StopFuture} while the engine cancels.
   */
  private void cancelHolding(Execution ex) {
    ex.cancellingOn = Thread.currentThread();
    try {
      cancelOnEngine(ex);
    } finally {
      ex.cancellingOn = null;
    }
  }

  /**
   * A peer's engine failed a request not retryably after the local engine had failed it
   * retryably: the request fails with the peer's failure.
   */
  private static final class PeerEngineFailure extends EngineException {
    private static final long serialVersionUID = 1L;

    PeerEngineFailure(String peer, String message) {
      super("the engine of peer " + peer + " failed: " + message, false);
    }
  }

  /** The failure of an execution whose client cancelled its future. */
  private static final class CancelledByClient extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CancelledByClient() {
      super("cancelled by the client", null, false, false);
    }
  }

  /** The failure of an execution whose output listener threw (the cause). */
  private static final class ListenerFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    ListenerFailed(Throwable cause) {
      super("the output listener threw " + cause, cause, false, false);
    }
  }

  /** The failure of an execution whose attempts' outputs disagree. */
  private static final class Diverged extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Diverged(String why) {
      super(why, null, false, false);
    }
  }

  /** The failure of an execution whose sender cancelled it. */
  private static final class CancelledByPeer extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CancelledByPeer(String peer) {
      super("cancelled by " + peer + ", which sent the request", null, false, false);
    }
  }

  private void complete(Execution ex, EngineResult result, String servedBy, boolean wasForwarded,
      Throwable error) {
    if (!ex.done.compareAndSet(false, true)) {
      return;
    }
    ExecutionOutput out;
    Attempt fwd;
    synchronized (ex) {
      // read under the lock: a duplicate that asks for a stream attaches one under it, unless
      // the execution is done (streamAlsoTo)
      out = ex.out;
      ex.held = null;
      fwd = ex.forwarding;
      if (out != null) {
        // the rest of the answer follows what was streamed, unless it contradicts it
        if (error == null && !out.finish(result)) {
          error = new Diverged(out.divergence());
          LOG.warn("node {}: the answer to request {} diverged from what was already streamed:"
              + " {}", nodeId, ex.request.id(), out.divergence());
        }
        out.close();
      }
    }
    if (fwd != null && fwd.output != null) {
      streams.remove(fwd.streamTag, ex);
    }
    if (out != null && out.sink() instanceof StreamSender sender) {
      sender.close(); // a peer's request: the answer carries what was not streamed yet
    }
    // the execution ends (leaves the in-flight count, which a stop waits on) once its future is
    // completed: with a listener, that completion is queued behind the pieces being delivered,
    // maybe by another thread, and runs there (settle)
    boolean endsLater = false;
    try {
      if (error != null) {
        if (!ex.fromPeer) {
          failed.increment();
        }
        Throwable failure;
        if (error instanceof NodeNotRunningException stopped) {
          failure = stopped; // abandoned at the end of a grace period
        } else if (error instanceof Diverged) {
          divergences.increment();
          failure = new OutputDivergedException(ex.request.id(), error.getMessage());
        } else if (error instanceof ListenerFailed lf) {
          failure = listenerFailure(ex, lf.getCause());
        } else {
          failure = new RequestFailedException(ex.request.id(),
              error instanceof CancelledByPeer || error instanceof PeerEngineFailure
                  || error instanceof CancelledByClient
                  ? error.getMessage() : "the local engine failed: " + error.getMessage(), error);
        }
        Runnable fail = () -> ex.future.completeExceptionally(failure);
        endsLater = settle(ex, out, fail, fail);
        return;
      }
      InferenceResponse resp;
      try {
        RouteDecision first = ex.firstDecision;
        if (first == null) { // routing threw before it took a decision
          first = routingFailedDecision(ex.request);
        }
        resp = new InferenceResponse(ex.request.id(), result, servedBy, wasForwarded,
            Math.max(1, ex.attempts), ex.lastCause, first);
      } catch (RuntimeException e) { // never leave the caller without an answer
        // counted as what the client gets: a failure, not an answer
        if (!ex.fromPeer) {
          failed.increment();
        }
        Runnable fail = () -> ex.future.completeExceptionally(
            new RequestFailedException(ex.request.id(), "cannot build the response: "
                + e.getMessage(), e));
        endsLater = settle(ex, out, fail, fail);
        return;
      }
      if (out == null) {
        ex.answeringOn = Thread.currentThread(); // as answerOn, without a lambda per answer
        try {
          answer(ex, result, wasForwarded, resp);
        } finally {
          ex.answeringOn = null;
        }
        return;
      }
      // the answer's last pieces go to the sink first: a listener that throws on them fails
      // the request, as it does on any earlier piece
      endsLater = settle(ex, out, () -> {
        Throwable lf = out.sinkFailure();
        if (lf == null) {
          answer(ex, result, wasForwarded, resp);
        } else {
          if (!ex.fromPeer) {
            failed.increment();
          }
          ex.future.completeExceptionally(listenerFailure(ex, lf));
        }
      }, () -> {
        // the grace period ended with the listener still short of the answer's last pieces:
        // the request is abandoned, not answered (an answer means the listener has it all)
        if (!ex.fromPeer) {
          failed.increment();
        }
        ex.future.completeExceptionally(new NodeNotRunningException(nodeId, State.STOPPING));
      });
    } finally {
      if (!endsLater) {
        ended(ex);
      }
    }
  }

  /**
   * {@code ex}, completed, is no longer taken on: a stop waiting for it may finish. Once only:
   * the end of a grace period may end it ahead of the thread still completing it
   * ({@link #abandonAll}).
   */
  private void ended(Execution ex) {
    if (live.remove(ex)) {
      executionEnded();
    }
  }

  /** The failure of {@code ex}, abandoned because its output listener threw {@code cause}. */
  private static RequestFailedException listenerFailure(Execution ex, Throwable cause) {
    return new RequestFailedException(ex.request.id(),
        "the output listener threw; the request was abandoned", cause);
  }

  /**
   * Counts {@code ex} answered with {@code result} and completes its future with {@code resp}
   * (counted first: whoever sees the answer sees it counted). A future its client cancelled
   * first (a listener that cancels on the answer's last pieces, or another thread) gets no
   * answer: the request counts as failed, as the client sees it, and never as answered. The
   * answer claims the future before it is counted, so that a cancel cannot come between the
   * count and the completion: a counted answer was never taken back, which a concurrent
   * {@code stats()} saw as its counters going down.
   */
  private void answer(Execution ex, EngineResult result, boolean wasForwarded,
      InferenceResponse resp) {
    if (!(ex.future instanceof ClientFuture cf)) {
      // a peer's request: onForwardRequest counts servedForPeers once the answer is encoded in
      // a RESULT (an answer too large for one reaches the peer as a failure)
      ex.future.complete(resp);
      return;
    }
    if (!cf.claimAnswer()) {
      failed.increment();
      return;
    }
    countAnswered(ex, result, wasForwarded);
    beforeAnswerGiven.run();
    cf.answer(resp);
  }

  /** Counts {@code ex}, a request submitted here, answered with {@code result}. */
  private void countAnswered(Execution ex, EngineResult result, boolean wasForwarded) {
    // at most the prompt: an engine that added a special token may count it as cached
    int cached = Math.min(result.cachedPromptTokens(), ex.request.length());
    if (wasForwarded) {
      forwarded.increment();
      Attempt fwd;
      synchronized (ex) {
        fwd = ex.forwarding; // the attempt that answered
      }
      if (cached >= 0 && fwd != null) {
        estimatedCached.add(fwd.estimatedMatched);
        actualCached.add(cached);
      }
    } else {
      servedLocally.increment();
    }
    promptTokens.add(ex.request.length());
    if (cached >= 0) {
      cachedPromptTokens.add(cached);
    }
  }

  /**
   * Completes {@code ex}'s future: at once when nobody listens to its output, else after every
   * piece queued for its sink (the sink is never called after the future completes), on
   * whichever thread is delivering them, this one or another. Then (in the second case) the
   * execution ends ({@link #ended}): not before its future is completed, so that a stop never
   * finishes with an accepted request unanswered or uncounted.
   *
   * <p>Once a stop's grace period has ended, the completion does not wait for a sink call in
   * progress on another thread, which may never return (a listener that blocks):
   * {@code instead} completes the future at once, here or in {@link #abandonAll}, whichever
   * comes later, and the execution ends ({@link #cutShort}).
   *
   * @param completion completes the future after the queued pieces
   * @param instead completes it when that wait is cut short (the completion then never runs)
   * @return whether the execution ends with the queued completion (else the caller ends it)
   */
  private boolean settle(Execution ex, ExecutionOutput out, Runnable completion,
      Runnable instead) {
    if (out == null) {
      answerOn(ex, completion);
      return false;
    }
    out.complete(() -> {
      try {
        answerOn(ex, completion);
      } finally {
        ended(ex);
      }
    }, () -> {
      try {
        answerOn(ex, instead);
      } finally {
        ended(ex);
      }
    });
    out.drain();
    // read after the completion was queued, as abandonAll sets it before it looks for queued
    // completions: one of the two finds the other, so none is left behind a blocked sink
    if (abandoning) {
      cutShort(ex, out);
    }
    return true;
  }

  /**
   * Completes {@code ex}, whose completion waits behind its sink, without waiting for the sink
   * (see {@link #settle}); nothing if the completion has run, is running, or is not queued, nor
   * when this thread is the one inside the sink (a listener that stops the node): the
   * completion runs as soon as that call returns.
   */
  private void cutShort(Execution ex, ExecutionOutput out) {
    if (out.deliveringOn() != Thread.currentThread() && out.cutShort()) {
      LOG.warn("node {}: the stop's grace period ended while the output of request {} was still"
          + " being delivered (an output listener or stream that does not return); the request"
          + " was answered without waiting for it", nodeId, ex.request.id());
    }
  }

  /**
   * Runs {@code completion}, which completes {@code ex}'s future, marked for
   * {@link StopFuture}: what depends on the future runs here, before the execution ends.
   */
  private static void answerOn(Execution ex, Runnable completion) {
    ex.answeringOn = Thread.currentThread();
    try {
      completion.run();
    } finally {
      ex.answeringOn = null;
    }
  }

  // ---------------------------------------------------------------- serving peers

  private CompletableFuture<byte[]> onForwardRequest(PeerAddress from, byte[] payload) {
    ForwardCodec.Message m;
    try {
      m = ForwardCodec.decode(payload);
    } catch (MalformedMessageException e) {
      malformedInbound.increment();
      LOG.warn("node {}: malformed request from {}: {}", nodeId, from, e.getMessage());
      return CompletableFuture.failedFuture(
          new TransportException(TransportException.Kind.PROTOCOL, e.getMessage()));
    }
    if (!(m instanceof ForwardCodec.Forward fw)) {
      malformedInbound.increment();
      return CompletableFuture.failedFuture(new TransportException(
          TransportException.Kind.PROTOCOL, "expected a FORWARD request"));
    }
    if (!fw.modelId().equals(config.modelId())) {
      // another model would answer: refused, and the sender skips this node from now on
      otherModelRefused.increment();
      String why = MODEL_MISMATCH + ": node " + nodeId + " serves model id '" + config.modelId()
          + "', the request is for '" + fw.modelId() + "'";
      if (otherModelSenders.size() < 1024 && otherModelSenders.add(from.nodeId() + "\n" + fw.modelId())) {
        LOG.warn("node {}: refused a request of {}, whose model id '{}' is not this node's '{}';"
            + " requests between nodes of different model ids are never served", nodeId, from,
            fw.modelId(), config.modelId());
      }
      return CompletableFuture.failedFuture(
          new TransportException(TransportException.Kind.PROTOCOL, why));
    }
    long receivedAt = clock.nanoTime();
    String id = fw.requestId();
    String key = peerKey(from, fw.origin(), id);
    Execution existing = servingForPeers.get(key);
    Execution created = null; // the execution this FORWARD starts, if it joins none
    // Only a replay of the same request joins it. Ids are unique per origin only, so the key
    // has the origin: a peer relaying for several origins (hop limit above 1) sends requests of
    // one id under keys of their own, each found by its duplicates and its CANCEL. Another
    // request under a taken key (an origin that reused an id) runs on its own, without duplicate
    // detection, and a CANCEL of that key reaches the first only.
    boolean keyed = true;
    if (existing != null && !existing.request.equals(fw.request())) {
      existing = null;
      keyed = false;
    }
    // a stopping node takes no new work; a duplicate of a request it still runs is no new work:
    // it joins it below, as while running, and gets the answer the stop waits for (refused, its
    // sender would run the request again elsewhere while it still runs here)
    if (existing == null && state.get() != State.RUNNING) {
      return refuse(key, fw.request(), 0, null);
    }
    if (existing == null) {
      // its sender's CANCEL came first (the network reordered them): it is not run
      if (earlyCancels.stops(key, fw.request(), receivedAt)) {
        return stoppedBeforeArrival(from, key, fw.request());
      }
      EngineLoad load = engineLoad();
      // an engine that answers nothing pushes back as a full queue does, so the sender goes
      // on; a refusal is the engine watch's too when both hold (a stalled engine's queue fills)
      RouteDecision.Reason avoided = engineWatch.avoidance(receivedAt);
      if (load.queueDepth() >= config.highWatermark() || avoided != null) {
        return refuse(key, fw.request(), load.queueDepth(), avoided);
      }
      // a received forward has travelled at least one hop, whatever the frame claims
      Execution ex = new Execution(fw.request(), Math.max(1, fw.hops()), from.nodeId(),
          fw.origin());
      if (fw.stream()) {
        StreamSender sender = new StreamSender(transport, scheduler, clock, from, id,
            fw.streamTag(), config.streamInterval().toNanos());
        ex.out = new ExecutionOutput(sender, fw.request().params().maxTokens(), ex.future,
            e -> LOG.warn("node {}: streaming {} to {} failed", nodeId, id, from, e));
        ex.future.whenComplete((r, t) -> sender.close());
      }
      synchronized (earlyCancels) {
        // a CANCEL that arrived meanwhile either finds the execution registered, or is found
        if (earlyCancels.stops(key, ex.request, clock.nanoTime())) {
          return stoppedBeforeArrival(from, key, fw.request());
        }
        existing = keyed ? servingForPeers.putIfAbsent(key, ex) : null;
        if (existing == null || !existing.request.equals(ex.request)) {
          // taken on before a CANCEL can find it (it looks under this lock): a CANCEL ending it
          // at once then finds it counted in flight and live, as its ending expects
          inFlight.incrementAndGet();
          live.add(ex);
        }
      }
      if (existing != null && !existing.request.equals(ex.request)) {
        existing = null; // another request of this id took the key meanwhile
        keyed = false;
      }
      if (existing == null) {
        if (state.get() != State.RUNNING) {
          // lost a race with stop(): refuse and release; a duplicate that joined it meanwhile
          // gets a (retryable) failure instead of waiting for an answer that never comes
          if (keyed) {
            servingForPeers.remove(key, ex);
          }
          if (ex.done.compareAndSet(false, true)) {
            live.remove(ex);
            ex.future.completeExceptionally(new NodeNotRunningException(nodeId, state.get()));
            executionEnded();
          }
          return refuse(key, fw.request(), 0, null);
        }
        boolean registered = keyed;
        ex.joinable = keyed; // its duplicates find it
        ex.future.whenComplete((r, t) -> {
          // the engine at capacity, or this node short of heap to read its answer: every
          // delivery of it is answered BUSY (below), the request counted once
          boolean busy = t != null && pushesBack(unwrap(t).getCause());
          boolean again;
          // remembered as answered before it is let go of, so that a CANCEL arriving now finds
          // one or the other and is not kept to stop a later request of this key
          synchronized (earlyCancels) {
            again = earlyCancels.answered(key, ex.request, clock.nanoTime(), busy);
            if (registered) {
              servingForPeers.remove(key, ex);
            }
          }
          if (busy && !again) {
            refusedForPeers.increment();
          }
        });
        abandonIfStopping(ex); // counted and live since it was registered
        if (!ex.done.get()) {
          routeOrRunLocal(ex);
        }
        existing = ex;
        created = ex;
      }
    }
    if (existing != created && fw.stream()) {
      streamAlsoTo(existing, from, fw.streamTag());
    }
    Execution served = existing;
    return existing.future.handle((resp, err) -> {
      if (resp != null) {
        try {
          byte[] result = ForwardCodec.result(id, resp.servedBy(),
              clock.nanoTime() - receivedAt, resp.result());
          // an answer of this node's engine that reaches a peer, counted once however many
          // deliveries joined it (before the RESULT is sent: whoever sees it sees it counted)
          if (!resp.forwarded() && served.resultSent.compareAndSet(false, true)) {
            servedForPeers.increment();
          }
          return result;
        } catch (IllegalArgumentException e) {
          // longer than a RESULT carries: no fault of this node, and another peer's answer
          // would be as long, so the sender runs the request itself (a final refusal)
          LOG.warn("node {}: the answer to {} from {} does not fit a RESULT: {}", nodeId, id,
              from, e.getMessage());
          return ForwardCodec.failed(id, false, ANSWER_TOO_LARGE + ": " + e.getMessage());
        }
      }
      Throwable t = unwrap(err);
      if (pushesBack(t.getCause())) {
        // the engine is at capacity, or this node had no heap to read its answer: push back,
        // so the sender tries elsewhere and cools down (counted once, when the execution
        // ended, however many deliveries joined it)
        return ForwardCodec.busy(id, engineLoad().queueDepth());
      }
      boolean retryable = !(t.getCause() instanceof CancelledByPeer)
          && (!(t.getCause() instanceof EngineException ee) || ee.retryable());
      return ForwardCodec.failed(id, retryable, String.valueOf(t.getMessage()));
    });
  }

  /**
   * Whether a peer's forward that failed here for {@code cause} is answered BUSY (push-back)
   * rather than FAILED: the engine at capacity ({@link EngineBusyException}, the adapter's own
   * in-flight limit included), or this node short of the heap to read its engine's answer
   * ({@link AnswerBudgetException}: the server answered, the node is overloaded). Both say
   * "not now" of this node, not that its engine fails: the sender cools it down for
   * {@code busyCooldown} and counts push-back, as for any overloaded node, instead of taking it
   * for a failing one ({@code failureCooldown}, {@code PEER_FAILED}).
   */
  private static boolean pushesBack(Throwable cause) {
    return cause instanceof EngineBusyException || cause instanceof AnswerBudgetException;
  }

  /**
   * A forward of {@code key} refused as busy at once (push-back): answered BUSY with
   * {@code queueDepth}, remembered as answered, and counted once per request
   * ({@code refusedForPeers}, and the engine watch's refusals when {@code avoided}, why the
   * engine is avoided, is not null): a delivery of a request whose latest answer under its key
   * was such a refusal (a duplicate, a replay) is not counted again.
   */
  private CompletableFuture<byte[]> refuse(String key, InferenceRequest request, int queueDepth,
      RouteDecision.Reason avoided) {
    if (!earlyCancels.answered(key, request, clock.nanoTime(), true)) {
      refusedForPeers.increment();
      if (avoided != null) {
        engineWatch.refusedForPeer(avoided);
      }
    }
    return CompletableFuture.completedFuture(ForwardCodec.busy(request.id(), queueDepth));
  }

  /**
   * The key of a peer's request here: its sender (as the transport authenticated it), its
   * origin and its id, which FORWARD and CANCEL both carry. Ids are unique per origin, so a
   * relay's requests of several origins never share a key. (Origins are printable ASCII: the
   * line breaks cannot be part of a field.)
   */
  private static String peerKey(PeerAddress from, String origin, String id) {
    return from.nodeId() + "\n" + origin + "\n" + id;
  }

  /**
   * A duplicate FORWARD from {@code from} that asks for streaming with {@code tag} joined
   * {@code ex}; the output goes to that tag from now on, what was already generated first, so
   * the stream the duplicate's sender awaits is whole:
   *
   * <ul>
   *   <li>If {@code ex} streams to its sender (its first FORWARD asked for streaming too), the
   *       tag is added to its {@link StreamSender} ({@link StreamSender#addTag}), in the order of
   *       the sink's calls, after every piece emitted so far, with a copy of them.
   *   <li>If nobody streams {@code ex} (its first FORWARD did not ask for it), a stream is
   *       attached to it now, to {@code tag}: if its current attempt is a local run whose output
   *       was held ({@link HeldOutput}, kept while the engine watch gives every run a listener),
   *       that output goes at once, from offset 0, then the run's pieces as they come; every
   *       later attempt (a fallback of a relay) streams as for a streamed FORWARD. A run started
   *       without a listener (the watch off) or a forward sent without streaming gives nothing:
   *       its output reaches the duplicate in the RESULT only.
   * </ul>
   */
  private void streamAlsoTo(Execution ex, PeerAddress from, long tag) {
    ExecutionOutput out;
    StreamSender attached = null;
    synchronized (ex) {
      if (ex.done.get()) {
        return; // answered: its RESULT carries the whole output
      }
      out = ex.out;
      if (out == null) {
        String id = ex.request.id();
        StreamSender sender = new StreamSender(transport, scheduler, clock, from, id, tag,
            config.streamInterval().toNanos());
        out = new ExecutionOutput(sender, ex.request.params().maxTokens(), ex.future,
            e -> LOG.warn("node {}: streaming {} to {} failed", nodeId, id, from, e));
        HeldOutput h = ex.held;
        ex.held = null;
        if (h != null && h.seq == ex.attemptSeq) { // the current attempt is the run it holds
          if (h.broken()) {
            h.run.broken = true; // its output so far is not known: nothing of it is streamed
          } else {
            // the first output of an empty stream, within the request's bounds: accepted
            out.offerNext(h.run, h.tokens(), h.text());
          }
        }
        ex.out = out;
        attached = sender;
      } else if (out.sink() instanceof StreamSender sender) {
        out.afterEmitted((tokens, text) -> sender.addTag(tag, tokens, text));
      } else {
        return;
      }
    }
    if (attached != null) {
      StreamSender sender = attached;
      ex.future.whenComplete((r, t) -> sender.close());
    }
    out.drain();
  }

  /** {@code answer}, given at once to a forward of {@code key}, remembered as answered. */
  private CompletableFuture<byte[]> answerNow(String key, InferenceRequest request,
      byte[] answer) {
    earlyCancels.answered(key, request, clock.nanoTime());
    return CompletableFuture.completedFuture(answer);
  }

  /**
   * A FORWARD whose sender's CANCEL arrived before it is not run: it gets the answer of a
   * request its sender cancelled (a FAILED that is not retryable), which that sender, having
   * given the request up, ignores (a sender still waiting would run it on its own engine, and
   * not cool this node down).
   */
  private CompletableFuture<byte[]> stoppedBeforeArrival(PeerAddress from, String key,
      InferenceRequest request) {
    cancelledBeforeArrival.increment();
    LOG.debug("node {}: not running {} from {}: its CANCEL arrived first", nodeId, request.id(),
        from);
    return answerNow(key, request, ForwardCodec.failed(request.id(), false, "cancelled by "
        + from.nodeId() + ", which sent the request (its CANCEL arrived before this FORWARD)"));
  }

  private void onOneWay(PeerAddress from, byte[] payload) {
    if (ForwardCodec.isForwarding(payload)) {
      try {
        ForwardCodec.Message m = ForwardCodec.decode(payload);
        if (m instanceof ForwardCodec.Cancel c) {
          String key = peerKey(from, c.origin(), c.requestId());
          Execution ex;
          synchronized (earlyCancels) {
            ex = servingForPeers.get(key);
            // remembered: if its FORWARD has not arrived yet (the network reordered them), or
            // arrives again, it does not run
            earlyCancels.onCancel(key, ex != null ? ex.request : null, clock.nanoTime());
          }
          if (ex != null) {
            cancelForPeer(ex, from);
          }
        } else if (m instanceof ForwardCodec.Stream st) {
          onStream(from, st);
        } else {
          malformedInbound.increment();
        }
      } catch (MalformedMessageException | RuntimeException e) {
        malformedInbound.increment();
        LOG.debug("node {}: bad one-way message from {}: {}", nodeId, from, e.getMessage());
      }
      return;
    }
    try {
      if (!peers.onMessage(from, payload)) {
        malformedInbound.increment();
      }
    } catch (Throwable e) {
      malformedInbound.increment();
      LOG.warn("node {}: gossip message from {} failed", nodeId, from, e);
    }
  }

  private final class Inbound implements Transport.InboundHandler {
    @Override
    public void onMessage(PeerAddress from, byte[] payload) {
      if (from == null || payload == null) {
        malformedInbound.increment();
        return;
      }
      onOneWay(from, payload);
    }

    @Override
    public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
      if (from == null || payload == null) {
        malformedInbound.increment();
        return CompletableFuture.failedFuture(
            new TransportException(TransportException.Kind.PROTOCOL, "null sender or payload"));
      }
      try {
        return onForwardRequest(from, payload);
      } catch (Throwable e) {
        LOG.error("node {}: serving a request from {} failed", nodeId, from, e);
        return CompletableFuture.failedFuture(
            new TransportException(TransportException.Kind.PROTOCOL, String.valueOf(e)));
      }
    }
  }

  // ---------------------------------------------------------------- stats

  @Override
  public NodeStats stats() {
    Map<FallbackCause, Long> fb = new EnumMap<>(FallbackCause.class);
    fallbacks.forEach((k, v) -> fb.put(k, v.sum()));
    // the outcomes before the requests: a request is counted before its outcome, so one
    // reading never shows more outcomes than requests (a forwarded share above 1)
    long servedHere = servedLocally.sum();
    long forwardedNow = forwarded.sum();
    long failedNow = failed.sum();
    return new NodeStats(nodeId, state.get(), requests.sum(), servedHere,
        forwardedNow, failedNow, coldPlacements.sum(), servedForPeers.sum(),
        refusedForPeers.sum(), pushedBack.sum(), fb, estimatedCached.sum(), actualCached.sum(),
        promptTokens.sum(), cachedPromptTokens.sum(), peers.bytesIn(), peers.bytesOut(),
        local.cachedTokens(), peers.localBlocks(), peers.replicaBlocks(), peers.livePeers().size(),
        inFlight.get(), peers.gossipStats());
  }

  @Override
  public Optional<EngineStallStats> engineStallStats() {
    return Optional.of(engineWatch.stats(clock.nanoTime(), engineLoad.failures()));
  }

  @Override
  public Optional<PeerMessageStats> peerMessageStats() {
    return Optional.of(new PeerMessageStats(malformedInbound.sum(), strayStreams.sum(),
        divergences.sum(), cancelledBeforeArrival.sum(), otherModelRefused.sum()));
  }

  /**
   * FORWARDs refused because their sender's model id ({@code RouterConfig.modelId()}) is not
   * this node's: each was answered as a protocol failure, after which its sender skips this node.
   */
  public long otherModelRefusals() {
    return otherModelRefused.sum();
  }

  /** Inbound messages that could not be decoded (counted and dropped). */
  public long malformedMessages() {
    return malformedInbound.sum();
  }

  /**
   * STREAM messages ignored because they belong to no current attempt: late, from another
   * peer than the attempt's, with another tag or request id (counted and dropped).
   */
  public long strayStreamMessages() {
    return strayStreams.sum();
  }

  /** The stream tag of a streaming forward of request {@code id} in flight, or 0 (tests). */
  long streamTagOf(String id) {
    for (Map.Entry<Long, Execution> e : streams.entrySet()) {
      if (e.getValue().request.id().equals(id)) {
        return e.getKey();
      }
    }
    return 0;
  }

  /**
   * FORWARDs not run because their sender's CANCEL of that request had arrived first (the
   * network reordered them, or a FORWARD of a request already cancelled came again): each was
   * answered as a request its sender cancelled.
   */
  public long forwardsCancelledBeforeArrival() {
    return cancelledBeforeArrival.sum();
  }

  /** The memory of early CANCELs (tests). */
  EarlyCancels earlyCancels() {
    return earlyCancels;
  }

  /** Requests that failed because an attempt's output contradicted what was streamed. */
  public long outputDivergences() {
    return divergences.sum();
  }

  /**
   * The node's local tree, if it was built with the default components (tests and
   * diagnostics).
   *
   * @return the tree, or null if the host gave the node its own components
   */
  ConcurrentPrefixTree localTree() {
    return local instanceof TreeIndex t ? t.tree() : null;
  }

  /**
   * The node's gossip engine, if it was built with the default components and started (tests
   * and diagnostics).
   *
   * @return the engine, or null
   */
  io.github.prefixrouter.internal.gossip.GossipEngine gossip() {
    return peers instanceof GossipPeerView g ? g.engine() : null;
  }

  @Override
  public Optional<CacheEventStats> cacheEventStats() {
    ConcurrentPrefixTree tree = localTree();
    return tree == null || tree.mode() != ConcurrentPrefixTree.Mode.ENGINE_DRIVEN
        ? Optional.empty() : Optional.of(tree.engineEventStats());
  }

  /** The current learned service time, for tests and diagnostics. */
  double learnedServiceNanos() {
    return cost.serviceNanos();
  }

  /** Prices as before slots were counted and/or overheads learned, for comparisons only. */
  void usePreviousPricing(boolean queue, boolean overhead) {
    cost.usePreviousPricing(queue, overhead);
  }

  /** The current learned prefill cost per token, for tests and diagnostics. */
  double learnedPrefillNanosPerToken() {
    return cost.prefillNanosPerToken();
  }

  // ---------------------------------------------------------------- helpers

  /**
   * Schedules a guard timer. A scheduler that refuses (a host's executor shut down under the
   * node) must not make an attempt that already started throw: its caller would start it again,
   * running the request twice and never completing it. The attempt then goes on without the
   * guard; the transport's own timeout or the engine still ends it. Refusals are logged at ERROR,
   * the first with what was thrown, later ones when their count reaches a power of two
   * ({@link DoublingLog}): a refusing scheduler refuses every request's timers.
   *
   * @return the timer, a no-op for a scheduler's null, or {@link #TIMER_REFUSED} if it refused
   */
  private Scheduler.Cancellable schedule(long delayNanos, Runnable task) {
    try {
      Scheduler.Cancellable c = scheduler.schedule(delayNanos, task);
      return c != null ? c : () -> false;
    } catch (Throwable e) {
      long n = refusedTimers.failed(); // 0 unless logged
      if (n == 1) {
        LOG.error("node {}: the scheduler refused a guard timer ({}); going on without it: its"
            + " scheduler must take its timers until the node has stopped", nodeId,
            String.valueOf(e), e);
      } else if (n > 1) {
        LOG.error("node {}: the scheduler has refused {} guard timers, the latest: {}", nodeId, n,
            String.valueOf(e));
      }
      return TIMER_REFUSED;
    }
  }

  /** Cancels a guard timer; a scheduler that throws there must not lose the answer. */
  private void cancelGuard(Scheduler.Cancellable guard) {
    if (guard == null) {
      return;
    }
    try {
      guard.cancel();
    } catch (Throwable e) {
      LOG.warn("node {}: cancelling a guard timer failed", nodeId, e);
    }
  }

  /**
   * Whether an engine could have produced {@code r} for {@code request} (the engine contract):
   * it processed the request's prompt (reporting its length, or up to
   * {@link #PROMPT_TOKENS_SLACK} more for special tokens a server adds; never fewer, which
   * would be another or a truncated prompt) and generated at most {@code maxTokens} tokens,
   * none of them a negative id. Checked on the local engine's answers and on forwarded ones.
   */
  static boolean couldAnswer(EngineResult r, InferenceRequest request) {
    long extra = (long) r.promptTokens() - request.length();
    if (extra < 0 || extra > PROMPT_TOKENS_SLACK) {
      return false;
    }
    int[] out = r.outputTokens();
    if (out.length > request.params().maxTokens()) {
      return false;
    }
    for (int t : out) {
      if (t < 0) {
        return false;
      }
    }
    return true;
  }

  private static Throwable unwrap(Throwable t) {
    while ((t instanceof java.util.concurrent.CompletionException
        || t instanceof java.util.concurrent.ExecutionException) && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }

  /** One forwarding attempt. */
  private static final class Attempt {
    final int seq;
    final PeerAddress to;
    final PeerHealth.PeerState peer;
    final long sentAt;
    final int estimatedMatched;
    /** The peer's queue wait and prefill as estimated when sent, in nanoseconds. */
    final double base;
    /**
     * The peer's incarnation it was sent to, that of {@code peer} ({@link PeerHealth#forwarded}),
     * or 0 if the decision's snapshot knew none; {@link #to} is where that incarnation listens,
     * as far as this node knows.
     */
    final long generation;
    /** Whether the timeout was a guess: no sample covered the prompt's uncached part. */
    final boolean guessed;
    /** Gossip's smoothed round trip to the peer when sent, or -1 if it had none. */
    long gossipRtt = -1;
    /** The forwarding timeout it was sent with. */
    long timeout;
    /** The round trip to the peer its timeout was computed with, in nanoseconds. */
    long rtt;
    /**
     * How long the transport waits for its answer: {@code timeout}, or for a streamed attempt
     * its overall bound ({@link #streamLimit}).
     */
    long limit;
    /** When its latest piece of output arrived (when sent, until one does); under ex's lock. */
    long lastPieceAt;
    /** The next check of its output's inactivity, when streamed; else null. */
    volatile Scheduler.Cancellable idle;
    /** The transport's future of its answer, once the transport has returned it. */
    volatile CompletableFuture<byte[]> request;
    /** The tag its STREAM messages carry (when {@code output} is set). */
    long streamTag;
    /** Its output received so far, when it was asked to stream; else null. */
    ExecutionOutput.Attempt output;
    /** The next check of the peer's liveness while the answer is awaited, or null. */
    volatile Scheduler.Cancellable watch;
    /**
     * Set by the liveness check that ends the attempt (the peer suspected): the peer may well be
     * alive and running the request, so ending it sends a CANCEL there.
     */
    volatile boolean endedAsSuspected;
    /**
     * The failure the node ended the attempt with itself (a timeout, the peer suspected), set
     * before it lets go of the transport's future: that future's cancellation ends the attempt
     * with this failure.
     */
    volatile Throwable endedWith;
    final AtomicBoolean released = new AtomicBoolean();

    Attempt(int seq, PeerAddress to, PeerHealth.PeerState peer, long sentAt, int est,
        double base, long generation, boolean guessed) {
      this.seq = seq;
      this.to = to;
      this.peer = peer;
      this.sentAt = sentAt;
      this.estimatedMatched = est;
      this.base = base;
      this.generation = generation;
      this.guessed = guessed;
    }
  }

  /**
   * The future of a request submitted here: cancelling it, or completing it from outside in any
   * other way (as {@code orTimeout} and {@code completeOnTimeout} do, and {@code obtrudeValue},
   * {@code obtrudeException} and {@code completeAsync}), abandons the request (its engine run is
   * cancelled, its forward in flight gets a CANCEL). The node's own completion
   * comes after the execution is done, when abandoning it does nothing; its answer claims the
   * future first ({@link #claimAnswer}), and a completion from outside after that gives way.
   */
  private static final class ClientFuture extends CompletableFuture<InferenceResponse> {
    private static final int OPEN = 0;
    /** The node's answer claimed the future ({@link #claimAnswer}): it is being given. */
    private static final int ANSWERING = 1;
    /** Completed, or being completed, otherwise (a cancel, a failure, a timeout). */
    private static final int CLOSED = 2;
    volatile Runnable onCancel;
    /** {@link #OPEN}, then {@link #ANSWERING} or {@link #CLOSED}, whichever came first. */
    private final AtomicInteger state = new AtomicInteger(OPEN);

    /** Claims the future for the node's answer; false if it was completed otherwise first. */
    boolean claimAnswer() {
      return state.compareAndSet(OPEN, ANSWERING);
    }

    /** Gives the answer claimed by {@link #claimAnswer}. */
    void answer(InferenceResponse value) {
      super.complete(value);
    }

    /**
     * Whether another completion must give way: the answer claimed the future first, and a
     * cancel then finds the request answered (returns false), as it would a moment later.
     */
    private boolean barred() {
      return state.compareAndExchange(OPEN, CLOSED) == ANSWERING;
    }

    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
      return !barred() && abandonIf(super.cancel(mayInterruptIfRunning));
    }

    @Override
    public boolean complete(InferenceResponse value) {
      return !barred() && abandonIf(super.complete(value));
    }

    @Override
    public boolean completeExceptionally(Throwable ex) {
      return !barred() && abandonIf(super.completeExceptionally(ex));
    }

    /**
     * Forces the host's value in: if the node had neither answered nor failed the request, it
     * is abandoned as by a cancel (which {@code complete} and {@code completeExceptionally}
     * leave to their overrides, and {@code obtrude} goes around).
     */
    @Override
    public void obtrudeValue(InferenceResponse value) {
      boolean open = state.compareAndSet(OPEN, CLOSED);
      super.obtrudeValue(value);
      abandonIf(open);
    }

    @Override
    public void obtrudeException(Throwable ex) {
      boolean open = state.compareAndSet(OPEN, CLOSED);
      super.obtrudeException(ex);
      abandonIf(open);
    }

    /**
     * Completes through {@link #complete} (and {@link #completeExceptionally} if the supplier
     * throws), so that the request is abandoned as by any completion from outside:
     * {@code CompletableFuture}'s own goes around them. {@code completeAsync(supplier)} comes
     * here with the default executor.
     */
    @Override
    public CompletableFuture<InferenceResponse> completeAsync(
        java.util.function.Supplier<? extends InferenceResponse> supplier,
        java.util.concurrent.Executor executor) {
      Objects.requireNonNull(supplier, "supplier");
      Objects.requireNonNull(executor, "executor");
      executor.execute(() -> {
        if (isDone()) {
          return;
        }
        InferenceResponse value;
        try {
          value = supplier.get();
        } catch (Throwable e) {
          completeExceptionally(e instanceof java.util.concurrent.CompletionException
              ? e : new java.util.concurrent.CompletionException(e));
          return;
        }
        complete(value);
      });
      return this;
    }

    private boolean abandonIf(boolean completed) {
      Runnable r = onCancel;
      if (completed && r != null) {
        r.run();
      }
      return completed;
    }

    @Override
    public <U> CompletableFuture<U> newIncompleteFuture() {
      return new CompletableFuture<>();
    }
  }

  /** One request this node has taken on. */
  private static final class Execution {
    final InferenceRequest request;
    /** The root parent of the request's chain: its cache scope's (computed once). */
    final long scopeRoot;
    final int hops;
    final boolean fromPeer;
    /** A {@link ClientFuture} for a request submitted here. */
    final CompletableFuture<InferenceResponse> future;
    final AtomicBoolean done = new AtomicBoolean();
    /** A peer's request: whether its answer was encoded in a RESULT (counted served) yet. */
    final AtomicBoolean resultSent = new AtomicBoolean();
    /**
     * The streamed output, when someone listens to it (set before routing, or, for a peer's
     * request, under the lock when a duplicate asking for a stream joins it); else null.
     */
    volatile ExecutionOutput out;
    /** Registered under its key: a duplicate FORWARD of it joins it. */
    volatile boolean joinable;
    /**
     * The output so far of its current local run while nobody streams it (a joinable request
     * run with a listener for the engine watch), for a duplicate that asks for a stream; under
     * the lock.
     */
    HeldOutput held;
    /** The sender and the origin (when another node), then every peer tried. */
    final String[] tried = new String[MAX_FORWARDS + MAX_UNSENT_FORWARDS + 2];
    /** The node whose client submitted the request (this node, or as a FORWARD names it). */
    final String origin;
    int triedCount;
    int attemptSeq;
    int attempts;
    int forwards;
    /** Forwards this node's transport refused to send, not counted in {@code forwards}. */
    int unsentForwards;
    /** Runs of this execution on the local engine not yet ended. */
    int engineRuns;
    /** The last forwarding attempt (current while {@code attemptSeq == forwarding.seq}). */
    Attempt forwarding;
    volatile RouteDecision firstDecision;
    volatile FallbackCause lastCause = FallbackCause.NONE;
    /** The local engine's retryable failure, once it failed: then only peers are tried. */
    volatile Throwable localFailure;
    /** Whether the local failure was counted ({@code LOCAL_FAILED}) when a peer was tried. */
    volatile boolean localFailureCounted;
    /** A peer's engine's refusal that is not retryable, once one came: no other peer is tried. */
    volatile PeerEngineFailure peerRefusal;
    /** Set (under the lock) when {@code abandon} claimed an attempt: no attempt starts after. */
    boolean ending;
    /*
     * The thread inside each call of host code that holds this execution's answer, while it
     * runs, else null: the answer, which a stop waits for, comes only once the call returns, so
     * a wait for the stop there would never end ({@link StopFuture}). Plain fields: each is set
     * to the calling thread before the call and cleared by it after, so a thread reading its
     * own marker always sees it right (another's write never names it).
     */
    /** The thread reading the engine's load ({@code InferenceEngine.load}) to route or run it. */
    Thread loadingOn;
    /** The thread running its {@code InferenceEngine.execute}. */
    Thread executingOn;
    /** The thread cancelling its run ({@code InferenceEngine.cancel}) as it ends it. */
    Thread cancellingOn;
    /** The thread sending a CANCEL of it ({@code Transport.send}) as it ends an attempt. */
    Thread cancelSendingOn;
    /**
     * The thread completing its future (and running what depends on it). Volatile: a stop's end
     * of its grace period reads it, on another thread, as that thread clears it.
     */
    volatile Thread answeringOn;

    Execution(InferenceRequest request, int hops, String sender, String origin) {
      this.request = request;
      this.scopeRoot = BlockHasher.scopeRoot(request.scope());
      this.hops = hops;
      this.fromPeer = sender != null;
      this.future = sender != null ? new CompletableFuture<>() : new ClientFuture();
      this.origin = origin;
      if (sender != null) {
        tried[triedCount++] = sender;
        // a relay never sends a request back to where it entered the cluster: the origin
        // chose not to run it, and a round trip there would only come back again
        if (!origin.equals(sender)) {
          tried[triedCount++] = origin;
        }
      }
    }

    /** Claims the current attempt; false if it is stale or the execution is done. */
    synchronized boolean claim(int seq) {
      if (done.get() || attemptSeq != seq) {
        return false;
      }
      attemptSeq++;
      return true;
    }

    /** Whether attempt {@code seq} is still the current one, unclaimed. */
    synchronized boolean current(int seq) {
      return !done.get() && attemptSeq == seq;
    }

    /** Claims the current attempt to end the execution: no attempt starts after it. */
    synchronized boolean claimToEnd(int seq) {
      if (!claim(seq)) {
        return false;
      }
      ending = true;
      return true;
    }

    /** Whether the execution was abandoned once attempt {@code seq} had started. */
    synchronized boolean endingAfter(int seq) {
      return ending && attemptSeq > seq;
    }
  }
}
