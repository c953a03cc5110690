package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.RouteDecision.Reason;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether the node's own engine is <b>stalled</b>: it has runs outstanding and has shown no
 * progress for {@code stallNanos}. Progress is a piece of streamed output or a successful answer
 * of any run, or, for an engine that publishes its cache events, a store of new blocks (a
 * prefill computing them); a failure (a timeout, a 5xx, a refused connection) is none. A hung
 * engine server (a wedged GPU, a deadlocked worker) keeps accepting requests and answers none
 * of them, and its load shows only the requests the node sent it, so without this check the
 * node would go on giving it its clients' requests, each held until the adapter's or the node's
 * timeout.
 *
 * <p>While the engine is stalled <i>and</i> a run is outstanding, the node avoids it: its own
 * clients' requests go to the eligible peer the policy ranks first, peers' forwards are refused
 * as busy, and the node advertises overload in its gossip (push-back). Once every outstanding
 * run has ended (answered, failed or given up at the engine timeout) the engine is tried again
 * with the next request that would run here anyway: that run is the probe, and the engine is
 * avoided again until it ends. The first progress ends the stall. So a hung engine costs one
 * request per probe instead of every request, and a slow one that answers is never avoided for
 * long. The probe is one run also when decisions cross each other ({@link #takeProbe}, below).
 *
 * <p>A <b>failing</b> engine is avoided alike. A hung engine answers nothing; one whose server is
 * down (a refused connection), misconfigured (every call a 404 or a 5xx) or out of capacity
 * ends every run at once with a retryable failure, so it never has runs outstanding for long
 * and is never stalled, and without this check every request of the node's clients would try
 * it before going to a peer, and every peer's forward would be taken on and failed. After
 * {@code failureLimit} retryable failures in a row ({@link #failed}) with no success between
 * them ({@link #succeeded}), the engine is failing: it is avoided as a stalled one is, except
 * that, as a failure is quick, the probe is let through only once no run is outstanding and
 * {@code probeNanos} have passed since the last failure. The first success ends it. A failure
 * that is not retryable (an invalid request, a timeout: a hung engine is the stall check's) is
 * neither a failure nor a success here, nor is an answer the node had no heap to read (the
 * adapter's answer budget held by other answers: the node's shortage, the engine answered), nor
 * a run the adapter refused at its own limit of requests in flight (nothing reached the
 * engine).
 * The probe is one run at a time also when decisions cross
 * each other: a decision to run here while the engine is stalled or failing takes the probe
 * ({@link #takeProbe}) before its run starts, and one that finds it taken is decided again,
 * with the engine avoided; the run gives it back when it ends ({@link #probeEnded}).
 *
 * <p>Timing. While no stall is in progress, the stall clock starts at the latest progress or at
 * the start of a run when none was outstanding, so a run that waits behind others counts from
 * the last progress, not from its own start. While the watch is on, the node asks the engine to
 * stream every run, also those nobody streams, only to see their progress ({@link #watching}).
 * A single run that gives no streamed output for longer than {@code stallNanos} (a long prompt,
 * or a long answer from an engine that streams nothing) looks stalled until it answers: the
 * stall timeout must exceed the longest silent run expected when nothing else runs.
 *
 * <p>The start of a stall or of a failing spell is logged at WARN, its end at INFO: once each,
 * whatever the number of requests routed around the engine meanwhile.
 *
 * <p>It also counts the losses of the engine's whole cache its engine reports (its server's
 * process went away: the OpenAI-compatible adapter sees its connection refused after the server
 * had answered), for which the node clears its self-managed tree ({@link #cacheLost}), each
 * logged at WARN.
 *
 * <p>Lazy and deterministic: no timer, no thread. The state changes when it is asked (every
 * routing decision, every forward received, every gossip round) on the node's injected clock.
 * Thread-safe: progress is one volatile write (two when it ends a stall); the transitions take
 * this object's lock, written so that a piece and a check crossing each other never leave a
 * stall standing after progress (each side writes its flag before it reads the other's), and a
 * run that finds the engine idle restarts the stall clock before it is counted outstanding.
 */
final class EngineWatch {

  private static final Logger LOG = LoggerFactory.getLogger(EngineWatch.class);

  /** The node whose engine is watched, for the log. */
  private final String nodeId;
  /** Stall timeout in nanoseconds; 0 turns the watch off. */
  private final long stallNanos;
  private final AtomicInteger outstanding = new AtomicInteger();
  private volatile long lastProgress;
  private volatile boolean stalled;
  private long stalls;
  private long recoveries;
  private final LongAdder reroutes = new LongAdder();
  private final LongAdder refusals = new LongAdder();
  /** Of {@link #reroutes} and {@link #refusals}, those while the engine was failing. */
  private final LongAdder failingReroutes = new LongAdder();
  private final LongAdder failingRefusals = new LongAdder();
  /** Retryable failures in a row after which the engine is failing; 0 turns that check off. */
  private final int failureLimit;
  /** While failing, how long after the last failure the next probe may run. */
  private final long probeNanos;
  private volatile int failedInARow;
  private volatile boolean failing;
  private volatile long lastFailure;
  private long failingSpells;
  /** Times the engine reported its whole cache lost ({@link #cacheLost}). */
  private long cacheLosses;
  /**
   * Taken by the run that probes the stalled or failing engine, from its routing decision to its
   * end.
   */
  private final AtomicBoolean probing = new AtomicBoolean();

  /**
   * A watch of stalls only.
   *
   * @param stallNanos how long an engine with runs outstanding may show no progress before it is
   *     avoided; 0 never avoids it
   */
  EngineWatch(long stallNanos) {
    this(stallNanos, 0, 0);
  }

  /**
   * @param stallNanos how long an engine with runs outstanding may show no progress before it is
   *     avoided; 0 never avoids it
   * @param failureLimit retryable failures in a row after which the engine is avoided as
   *     failing; 0 never avoids it for its failures
   * @param probeNanos while the engine is failing, how long after its last failure it is tried
   *     again
   */
  EngineWatch(long stallNanos, int failureLimit, long probeNanos) {
    this("local", stallNanos, failureLimit, probeNanos);
  }

  /**
   * @param nodeId the node whose engine is watched, for the log
   * @param stallNanos as above
   * @param failureLimit as above
   * @param probeNanos as above
   */
  EngineWatch(String nodeId, long stallNanos, int failureLimit, long probeNanos) {
    if (stallNanos < 0) {
      throw new IllegalArgumentException("stallNanos must be >= 0, was " + stallNanos);
    }
    if (failureLimit < 0) {
      throw new IllegalArgumentException("failureLimit must be >= 0, was " + failureLimit);
    }
    if (probeNanos < 0) {
      throw new IllegalArgumentException("probeNanos must be >= 0, was " + probeNanos);
    }
    this.nodeId = nodeId;
    this.stallNanos = stallNanos;
    this.failureLimit = failureLimit;
    this.probeNanos = probeNanos;
  }

  /**
   * Whether the watch is on ({@code stallNanos} above 0): only then is a run that nobody streams
   * given a listener, so that its output, as the engine streams it, counts as progress.
   */
  boolean watching() {
    return stallNanos > 0;
  }

  /** A run was handed to the engine at {@code now}. */
  void started(long now) {
    while (true) {
      int runs = outstanding.get();
      if (runs == 0 && !stalled) {
        // the engine was idle: nothing was owed before this run. Written before the run is
        // counted, so that a check on another thread never sees it outstanding with the clock
        // of the idle period before it (and takes it for a stalled one as it starts)
        lastProgress = now;
      }
      if (outstanding.compareAndSet(runs, runs + 1)) {
        return;
      }
    }
  }

  /** A run ended, however (answered, failed, given up). Called once per {@link #started}. */
  void ended() {
    outstanding.decrementAndGet();
  }

  /**
   * The engine made progress at {@code now}: a piece of output, a successful answer, or a store
   * of new blocks.
   */
  void progressed(long now) {
    lastProgress = now;
    if (stalled) {
      boolean ended = false;
      synchronized (this) {
        if (stalled) {
          stalled = false;
          recoveries++;
          ended = true;
        }
      }
      if (ended) {
        LOG.info("node {}: its engine made progress again; the stall is over and it gets "
            + "requests again", nodeId);
      }
    }
  }

  /**
   * A run ended at {@code now} with a retryable failure of the engine (unreachable, an error
   * status, at capacity, an answer that cannot be the request's, a failure that is not an
   * {@code EngineException}, which breaks the engine's contract). Called before the run's
   * {@link #ended}, so that a failing engine's probe is never seen ended before its failure.
   * Counted also with the check off ({@code failureLimit} 0), which only never makes the engine
   * failing.
   */
  void failed(long now) {
    failed(now, null);
  }

  /**
   * {@link #failed(long)}, with what the failure was, for the log line of a failing spell's
   * start (null: not known).
   */
  void failed(long now, String why) {
    int inARow;
    synchronized (this) {
      lastFailure = now;
      failedInARow = failedInARow == Integer.MAX_VALUE ? failedInARow : failedInARow + 1;
      if (failing || failureLimit == 0 || failedInARow < failureLimit) {
        return;
      }
      failing = true;
      failingSpells++;
      inARow = failedInARow;
    }
    LOG.warn("node {}: its engine is failing: {} retryable failures in a row{}; the node routes "
        + "around it, trying it once per {} ms until a run succeeds", nodeId, inARow,
        why == null ? "" : " (the last: " + why + ")", probeNanos / 1_000_000L);
  }

  /** {@link #takeProbe}: the engine is neither stalled nor failing; the run holds no probe. */
  static final int NO_PROBE = 0;
  /** {@link #takeProbe}: the run is the probe; it calls {@link #probeEnded} when it ends. */
  static final int PROBE = 1;
  /** {@link #takeProbe}: another run holds the probe; the request is to be decided again. */
  static final int PROBE_TAKEN = 2;

  /**
   * A routing decision is to run a request here: while the engine is stalled or failing, it
   * takes the probe, so that a decision crossing it, which saw no run outstanding either, avoids
   * the engine ({@link #avoid} says so from now on).
   *
   * @return {@link #NO_PROBE}, {@link #PROBE} (the run must call {@link #probeEnded} once it
   *     ends, or at once if it does not start) or {@link #PROBE_TAKEN}
   */
  int takeProbe() {
    if (!failing && !stalled) {
      return NO_PROBE;
    }
    return probing.compareAndSet(false, true) ? PROBE : PROBE_TAKEN;
  }

  /** The run that took the probe ({@link #takeProbe}) ended, or did not start. */
  void probeEnded() {
    probing.set(false);
  }

  /** A run ended with a successful answer: the engine is not failing. */
  void succeeded() {
    if (failedInARow == 0 && !failing) {
      return;
    }
    boolean ended;
    synchronized (this) {
      ended = failing;
      failedInARow = 0;
      failing = false;
    }
    if (ended) {
      LOG.info("node {}: its engine succeeded again; it is no longer failing and gets requests "
          + "again", nodeId);
    }
  }

  /**
   * Whether the engine is to be avoided at {@code now}: stalled, with a run outstanding or the
   * probe taken; or failing, with a run outstanding, the probe taken or its last failure less than
   * {@code probeNanos} ago.
   * Detects the stall when its time has come.
   */
  boolean avoid(long now) {
    return avoidance(now) != null;
  }

  /**
   * Why the engine is to be avoided at {@code now}, as {@link #avoid} decides it: {@link
   * Reason#LOCAL_ENGINE_FAILING} when it is failing (whether or not it is also stalled), {@link
   * Reason#LOCAL_ENGINE_STALLED} when it is stalled only, null when it is not avoided.
   */
  Reason avoidance(long now) {
    if (failing
        && (probing.get() || outstanding.get() > 0 || now - lastFailure < probeNanos)) {
      return Reason.LOCAL_ENGINE_FAILING;
    }
    if (stalled && probing.get()) {
      return Reason.LOCAL_ENGINE_STALLED; // its probe is starting
    }
    return stalledNow(now) ? Reason.LOCAL_ENGINE_STALLED : null;
  }

  /** Whether the engine is stalled with a run outstanding at {@code now}; detects the stall. */
  private boolean stalledNow(long now) {
    if (stallNanos == 0 || outstanding.get() == 0) {
      return false;
    }
    if (stalled) {
      return true;
    }
    if (now - lastProgress < stallNanos) {
      return false;
    }
    long silent;
    synchronized (this) {
      if (stalled) {
        return true;
      }
      stalled = true;
      // a piece that wrote its progress before this write would not see it: look again
      if (now - lastProgress < stallNanos) {
        stalled = false;
        return false;
      }
      stalls++;
      silent = now - lastProgress;
    }
    LOG.warn("node {}: its engine is stalled: runs outstanding and no output, answer or stored "
        + "block for {} ms; the node routes around it until it makes progress", nodeId,
        silent / 1_000_000L);
    return true;
  }

  /**
   * The engine's whole cache is gone (its server's process went away, as {@code why} says) and
   * the node forgot the {@code tokens} it estimated there: counted, and logged at WARN (once per
   * loss: the engine reports each once).
   */
  void cacheLost(String why, long tokens) {
    synchronized (this) {
      cacheLosses++;
    }
    LOG.warn("node {}: its engine's cache is lost: {}; the node cleared its self-managed tree "
        + "({} tokens), which its peers are told", nodeId, why, tokens);
  }

  /** A request forwarded by a peer was refused because the engine is avoided, for {@code why}. */
  void refusedForPeer(Reason why) {
    refusals.increment();
    if (why == Reason.LOCAL_ENGINE_FAILING) {
      failingRefusals.increment();
    }
  }

  /**
   * A routing decision sent a request to a peer because the engine is avoided; {@code why} is
   * the decision's reason.
   */
  void rerouted(Reason why) {
    reroutes.increment();
    if (why == Reason.LOCAL_ENGINE_FAILING) {
      failingReroutes.increment();
    }
  }

  /** Of the reroutes, those because the engine was failing. */
  long failingReroutes() {
    return failingReroutes.sum();
  }

  /** Of the refusals of peers' forwards, those because the engine was failing. */
  long failingRefusals() {
    return failingRefusals.sum();
  }

  /**
   * Runs the watch counts outstanding now (handed to the engine and not ended), read without
   * detecting anything: for tests, and for the estimate of a load the engine fails to report
   * ({@link EngineLoadGuard}).
   */
  int outstandingNow() {
    return outstanding.get();
  }

  /** Whether the engine is failing now, read without detecting anything (for tests). */
  boolean isFailing() {
    return failing;
  }

  /** What the watch has seen, at {@code now}, with no failure of the engine's load. */
  EngineStallStats stats(long now) {
    return stats(now, 0);
  }

  /**
   * What the watch has seen, at {@code now}, with the failures of the engine's load counted by
   * the node ({@link EngineLoadGuard#failures}).
   */
  synchronized EngineStallStats stats(long now, long loadFailures) {
    boolean avoided = avoid(now);
    int runs = outstanding.get();
    long silent = runs == 0 ? 0 : Math.max(0, now - lastProgress);
    return new EngineStallStats(avoided ? 1 : 0, stalled ? 1 : 0, runs,
        silent / 1_000_000_000L, stalls, recoveries, reroutes.sum(), refusals.sum(),
        failing ? 1 : 0, failedInARow, failingSpells, cacheLosses, loadFailures);
  }
}
