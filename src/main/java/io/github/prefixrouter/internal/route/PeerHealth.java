package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.internal.Durations;
import io.github.prefixrouter.spi.PeerAddress;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;
import java.util.concurrent.atomic.AtomicLongFieldUpdater;

/**
 * What this node learned about each peer from its own forwarding: push-back and failure
 * cool-downs, requests outstanding there, the accuracy of its replica estimates, a round trip
 * measured on forwards (used until gossip has measured one), and what a forward there costs
 * beyond gossip's round trip. All of it is about one incarnation of the peer, whose address it
 * notes: a peer that restarts (its gossip generation grows) starts with a fresh record
 * ({@link #get(String, long)}), which notes where the new process listens.
 */
final class PeerHealth {

  /**
   * A FORWARD version a peer rejected as unknown (it runs a release from before what that
   * version carries), remembered for the peer's incarnation that rejected it, for
   * {@link #NO_SCOPES_MEMORY} or until it restarts, whichever comes first. Read without locks on
   * the routing path.
   */
  static final class UnknownVersion {
    private volatile long until = Durations.NEVER;
    private volatile long generation;

    /** The peer, in incarnation {@code generation}, rejected such a FORWARD at {@code now}. */
    synchronized void rejected(long generation, long now) {
      this.generation = generation;
      until = Durations.deadline(now, NO_SCOPES_MEMORY);
    }

    /** Whether the peer, now in incarnation {@code generation}, is remembered to reject it. */
    boolean remembered(long generation, long now) {
      return Durations.ahead(until, now) && this.generation == generation;
    }
  }

  /** Per-peer state; fields are read without locks on the routing path. */
  static final class PeerState {
    /**
     * The peer's incarnation this state is about (its gossip generation), or 0 while no peer
     * view has told it; set under the map's lock for the peer.
     */
    volatile long generation;
    /**
     * Where the incarnation this state is about listens, as the latest snapshot of the live
     * peers that looked the state up for it, or the latest forward counted on it, gave; null
     * while none has (or the view knows no incarnations). A peer that restarts may listen
     * elsewhere (a process rescheduled on another host under its node id). Set under the map's
     * lock for the peer.
     */
    volatile PeerAddress address;
    /**
     * Set when {@link PeerHealth#prune} forgets the peer: a snapshot of the live peers that
     * cached this state looks the peer up again ({@link PeerHealth#get(PeerSet, int)}).
     */
    volatile boolean discarded;
    /** End of its busy cool-down ({@link Durations#deadline}), or {@link Durations#NEVER}. */
    volatile long busyUntil = Durations.NEVER;
    /** End of its failure cool-down ({@link Durations#deadline}), or {@link Durations#NEVER}. */
    volatile long failedUntil = Durations.NEVER;
    /**
     * The peer does not speak scoped FORWARDs (a node from before cache scopes rejected one as
     * an unknown version): scoped requests skip it, unscoped ones do not.
     */
    final UnknownVersion noScopes = new UnknownVersion();
    /**
     * The peer does not speak streaming FORWARDs (a node from before streaming rejected one as
     * an unknown version): forwards there ask for no streaming.
     */
    final UnknownVersion noStreaming = new UnknownVersion();
    /**
     * The peer does not speak FORWARDs with stops (a node from before stops rejected one as an
     * unknown version): requests with stops skip it, others do not.
     */
    final UnknownVersion noStops = new UnknownVersion();
    /**
     * The peer serves another model (it refused a FORWARD for its model id), or cannot tell
     * (this node has a model id, and the peer, from before model ids, rejected a FORWARD that
     * carries it as an unknown version): no request goes there.
     */
    final UnknownVersion otherModel = new UnknownVersion();
    /** Requests this node has forwarded there and not yet seen answered. */
    volatile int outstanding;
    /**
     * EWMA of min(actual, estimated) / estimated cached tokens, as of {@link #accuracyAt}; 1 =
     * always right. Its shortfall from 1 fades with the time since: see {@link #trust}.
     */
    volatile double accuracy = 1.0;
    /** When {@link #accuracy} was last measured (a clock reading); written before it. */
    volatile long accuracyAt;
    /** Whether {@link #accuracyAt} was set (any long is a reading). */
    private boolean accuracyMeasured;
    /** Round trip measured on forwards (total minus the peer's service time), or -1. */
    volatile long forwardRttNanos = -1;

    /**
     * How much longer than the cost model predicts the peer takes to answer a forward: an
     * average of observed / predicted service time, at least 1; -1 before its first answer. It
     * scales the expected time of a forward there.
     */
    volatile double slowness = -1;
    /**
     * Doubled by every forward there that timed out (up to {@link #MAX_BACKOFF}), back to 1 at
     * its next answer: it lengthens the forwarding timeout, within the cap.
     */
    volatile double backoff = 1;
    private int slownessSamples;
    /**
     * What a forward there costs beyond gossip's smoothed round trip (a FORWARD and its answer
     * carry bodies, gossip's bodiless exchanges do not), learned from answered forwards; -1
     * until the first ({@link #overheadNanos} then gives the configured prior).
     */
    volatile long overheadNanos = -1;
    /** The unclamped estimate behind {@link #overheadNanos} (may dip below the prior). */
    private double overheadEstimate;
    private int overheadSamples;

    /** Whether its busy cool-down runs at {@code now}. */
    boolean busy(long now) {
      return Durations.ahead(busyUntil, now);
    }

    /** Whether its failure cool-down runs at {@code now}. */
    boolean failed(long now) {
      return Durations.ahead(failedUntil, now);
    }

    /**
     * Starts a busy cool-down of {@code nanos} at {@code now} (a longer one running is kept:
     * see {@link #extend}).
     */
    void coolDownBusy(long now, long nanos) {
      extend(BUSY_UNTIL, this, Durations.deadline(now, nanos));
    }

    /**
     * Starts a failure cool-down of {@code nanos} at {@code now} (a longer one running is kept:
     * see {@link #extend}).
     */
    void coolDownFailed(long now, long nanos) {
      extend(FAILED_UNTIL, this, Durations.deadline(now, nanos));
    }

    /** Counts a request forwarded there. */
    void forwarded() {
      OUTSTANDING.incrementAndGet(this);
    }

    /** Counts the end of a request forwarded there. */
    void answered() {
      OUTSTANDING.decrementAndGet(this);
    }

    /**
     * The accuracy the peer's estimates are discounted by at {@code now}: {@link #accuracy},
     * its shortfall from 1 halved every {@code halfLifeNanos} since it was measured. Only an
     * answered forward measures it, and a peer trusted too little to be forwarded to is not
     * measured again: without the fading, a spell of misses there (an engine that lost its
     * cache, a replica that overstated it for a while) would stop forwards to the peer for good,
     * however accurate its replica became. Exactly 1, without a {@code pow}, while every forward
     * there found what was estimated.
     */
    double trust(long now, double halfLifeNanos) {
      double a = accuracy; // read before its time, which is written first
      if (a >= 1.0) {
        return 1.0;
      }
      long since = now - accuracyAt;
      // never below the accuracy measured: 1 - (1 - a) need not round back to a
      return since <= 0 ? a : Math.max(a, 1.0 - (1.0 - a) * Math.pow(0.5, since / halfLifeNanos));
    }

    /**
     * A forward there was answered at {@code now} with {@code actual} cached prompt tokens where
     * {@code estimated} were expected: the sample {@code min(1, actual / estimated)} weighs 0.2
     * against the trust it had at {@code now} ({@link #trust}, faded by {@code halfLifeNanos}).
     */
    synchronized void observeAccuracy(int estimated, int actual, long now,
        double halfLifeNanos) {
      if (estimated <= 0 || actual < 0) {
        return;
      }
      double sample = Math.min(1.0, (double) actual / estimated);
      double prev = trust(now, halfLifeNanos);
      // the later reading: threads ending forwards there read the clock before they get here,
      // and an earlier reading would fade the new accuracy from before it was measured; set
      // before the accuracy, so a reader that sees the new accuracy sees its time
      if (!accuracyMeasured || now - accuracyAt > 0) {
        accuracyAt = now;
        accuracyMeasured = true;
      }
      accuracy = 0.8 * prev + 0.2 * sample;
    }

    /**
     * The peer answered a forward after {@code observedNanos} of its own time where the cost
     * model predicts {@code predictedNanos}. The first answers weigh most (a plain mean of the
     * first four, then an EWMA of weight 1/4), so a timeout learned from one slow answer, or
     * doubled by a timeout, comes back down within a few answers.
     */
    synchronized void observeService(long observedNanos, double predictedNanos) {
      if (observedNanos < 0 || !(predictedNanos > 0)) {
        return;
      }
      double ratio = Math.min(MAX_SLOWNESS, Math.max(1.0, observedNanos / predictedNanos));
      slownessSamples = Math.min(slownessSamples + 1, 1 << 20);
      double w = Math.max(0.25, 1.0 / slownessSamples);
      double prev = slowness;
      slowness = prev < 0 ? ratio : (1 - w) * prev + w * ratio;
      backoff = 1;
    }

    /** A forward to the peer timed out: the next one waits twice as long. */
    synchronized void timedOut() {
      backoff = Math.min(MAX_BACKOFF, 2 * backoff);
    }

    /**
     * The per-forward overhead to price a forward there with: the learned one, or {@code
     * priorNanos} (the configured {@code forwardOverhead}) before any forward was answered.
     */
    long overheadNanos(long priorNanos) {
      long o = overheadNanos;
      return o < 0 ? priorNanos : o;
    }

    /**
     * A forward there was answered: {@code sampleNanos} is its elapsed time less the peer's own
     * time on it ({@code serverNanos}) less gossip's smoothed round trip to the peer. The prior
     * counts as one sample, then a plain mean up to eight samples, then an EWMA of weight 1/8;
     * a sample counts at most {@link #MAX_OVERHEAD_NANOS} (or the prior, if larger) either way.
     * The overhead used is that estimate within [prior, bound]: never above the bound, so one
     * stalled answer cannot keep the peer from being forwarded to (and so from being measured
     * again), and never below the configured overhead, so the noise of round trips that jitter
     * (or a gossip round trip inflated by load) cannot price a forward below what the host
     * configured; learning only raises it to what forwards there cost.
     */
    synchronized void observeOverhead(long sampleNanos, long priorNanos) {
      long bound = Math.max(MAX_OVERHEAD_NANOS, priorNanos);
      double sample = Math.max(-bound, Math.min(bound, sampleNanos));
      double prev = overheadSamples == 0 ? priorNanos : overheadEstimate;
      overheadSamples = Math.min(overheadSamples + 1, 1 << 20);
      double w = Math.max(OVERHEAD_WEIGHT, 1.0 / (overheadSamples + 1));
      overheadEstimate = (1 - w) * prev + w * sample;
      overheadNanos = (long) Math.max(priorNanos, Math.min(bound, overheadEstimate));
    }

    synchronized void observeRtt(long nanos) {
      if (nanos < 0) {
        return;
      }
      long prev = forwardRttNanos;
      forwardRttNanos = prev < 0 ? nanos : (long) (0.875 * prev + 0.125 * nanos);
    }
  }

  /**
   * How long a peer that rejected a scoped FORWARD as an unknown version is skipped by scoped
   * requests, unless it restarts first (its gossip generation changes). A node from before
   * scopes stays one until it is upgraded, which restarts it, so the bound matters only where the
   * peer view knows no generations; after it the next scoped request tries the peer again, at
   * the price of one round trip and a fallback if the peer is still from before scopes.
   */
  static final long NO_SCOPES_MEMORY = 5L * 60 * 1_000_000_000L;

  /** Bound of {@link PeerState#slowness}. */
  static final double MAX_SLOWNESS = 1_000;
  /** Bound of {@link PeerState#backoff}. */
  static final double MAX_BACKOFF = 16;
  /** Bound of a learned per-forward overhead (unless the configured prior is larger). */
  static final long MAX_OVERHEAD_NANOS = 50_000_000L;
  /** Weight of a new overhead sample once eight have been seen. */
  static final double OVERHEAD_WEIGHT = 0.125;

  /** A field updater rather than an AtomicInteger: the routing loop reads one object per peer. */
  private static final AtomicIntegerFieldUpdater<PeerState> OUTSTANDING =
      AtomicIntegerFieldUpdater.newUpdater(PeerState.class, "outstanding");

  private static final AtomicLongFieldUpdater<PeerState> BUSY_UNTIL =
      AtomicLongFieldUpdater.newUpdater(PeerState.class, "busyUntil");
  private static final AtomicLongFieldUpdater<PeerState> FAILED_UNTIL =
      AtomicLongFieldUpdater.newUpdater(PeerState.class, "failedUntil");

  /**
   * Moves the cool-down deadline in {@code field} of {@code st} to {@code until}, unless it is
   * already later: the threads ending forwards to one peer set its cool-downs at once, each with
   * its own reading of the clock, and the one that lasts longest wins whatever the interleaving.
   * A plain read and write let a thread that read (the cool-down running, or the clock) before
   * another wrote a longer one overwrite it with its shorter one.
   */
  private static void extend(AtomicLongFieldUpdater<PeerState> field, PeerState st, long until) {
    while (true) {
      long cur = field.get(st);
      if (Durations.ahead(cur, until) || field.compareAndSet(st, cur, until)) {
        return;
      }
    }
  }

  private final ConcurrentHashMap<String, PeerState> states = new ConcurrentHashMap<>();

  PeerState get(String nodeId) {
    return states.computeIfAbsent(nodeId, k -> new PeerState());
  }

  /**
   * The state of peer {@code i} of {@code peers}, cached in the snapshot. A state {@link #prune}
   * has forgotten since is looked up again: a prune runs over the snapshot of the decision that
   * ran it, which may be older than one that cached the state and lack the peer (it had just
   * joined or come back), and the cool-downs and forwards that followed landed on a new state
   * that decisions over this snapshot did not see until gossip changed the view.
   */
  PeerState get(PeerSet peers, int i) {
    PeerState s = peers.states[i];
    if (s == null || s.discarded) {
      s = get(peers.ids[i], peers.generation[i], peers.addresses[i]);
      peers.states[i] = s;
    }
    return s;
  }

  /**
   * The state of peer {@code nodeId} in its incarnation {@code generation} (0: unknown): a
   * fresh one if the state held is about an earlier incarnation. A restarted peer runs a new
   * engine, with an empty cache, so its old engine's hits and misses say nothing of its replica
   * estimates now; its cool-downs, timeout backoff and learned service and overhead were its old
   * process's too. Forwards still outstanding at the old incarnation end on the state they were
   * sent with. A lower generation (a snapshot older than the one that showed the restart) gets
   * the current state.
   */
  PeerState get(String nodeId, long generation) {
    return get(nodeId, generation, null);
  }

  /**
   * As {@link #get(String, long)}, for a snapshot that shows the peer in incarnation {@code
   * generation} at {@code address} (null: not told), which the state notes for that incarnation.
   */
  private PeerState get(String nodeId, long generation, PeerAddress address) {
    PeerState s = states.get(nodeId);
    if (s != null && (generation < s.generation
        || (generation == s.generation && !newAddress(s, generation, address)))) {
      return s;
    }
    return states.compute(nodeId, (k, st) -> about(st, generation, address));
  }

  /**
   * The state lookups for incarnation {@code generation} (0: unknown) find, given the state
   * held, {@code st} (null if none): a new one if none is held or {@code st} is about an earlier
   * incarnation, else {@code st}, made about {@code generation} if no view had told it one; at
   * {@code address} (null: not told), if it is about {@code generation}. Run under the map's
   * lock for the peer.
   */
  private static PeerState about(PeerState st, long generation, PeerAddress address) {
    if (st == null || (st.generation != 0 && generation > st.generation)) {
      st = new PeerState();
    }
    if (generation > st.generation) {
      st.generation = generation;
    }
    if (newAddress(st, generation, address)) {
      st.address = address;
    }
    return st;
  }

  /**
   * Whether {@code address}, where a snapshot shows the peer in incarnation {@code generation},
   * is news to {@code s}: it is about that incarnation (a known one) and notes another address.
   */
  private static boolean newAddress(PeerState s, long generation, PeerAddress address) {
    return address != null && generation != 0 && generation == s.generation
        && !address.equals(s.address);
  }

  /**
   * Starts a busy cool-down of peer {@code nodeId}, in its incarnation {@code generation}, of
   * {@code nanos} at {@code now} (a longer one running is kept), on the state lookups find: see
   * {@link #coolDownFailed(String, long, long, long)}.
   */
  void coolDownBusy(String nodeId, long generation, long now, long nanos) {
    states.compute(nodeId, (k, st) -> {
      PeerState s = stateOf(st, generation);
      if (sameIncarnation(s, generation)) {
        s.coolDownBusy(now, nanos);
      }
      return s;
    });
  }

  /**
   * Starts a failure cool-down of peer {@code nodeId}, in its incarnation {@code generation} (0:
   * unknown), of {@code nanos} at {@code now} (a longer one running is kept), on the state
   * lookups find, created if {@link #prune} has forgotten the peer. A forward's end sets its
   * cool-down after the forward stopped counting as outstanding, and a failing peer may be
   * missing from the live set by then (the failure detector dropped it): set on the state the
   * forward captured, a cool-down set as {@link #prune} removed that state landed on one nothing
   * looked up any more, and the peer was tried again at once when it came back. Set here, under
   * the map's lock for the peer, it is set before {@link #prune} looks (which then keeps the
   * state) or on the state that follows the one it removed. A state about a later incarnation
   * than {@code generation} (the peer restarted while the forward was out) is not cooled down:
   * the old process's failure says nothing of the new one.
   */
  void coolDownFailed(String nodeId, long generation, long now, long nanos) {
    states.compute(nodeId, (k, st) -> {
      PeerState s = stateOf(st, generation);
      if (sameIncarnation(s, generation)) {
        s.coolDownFailed(now, nanos);
      }
      return s;
    });
  }

  /** {@code st}, or a new state about incarnation {@code generation} if it is null. */
  private static PeerState stateOf(PeerState st, long generation) {
    if (st != null) {
      return st;
    }
    PeerState s = new PeerState();
    s.generation = generation;
    return s;
  }

  /**
   * Whether what a forward to incarnation {@code generation} (0: unknown) learned is about
   * {@code s}: not if {@code s} is about a later incarnation.
   */
  private static boolean sameIncarnation(PeerState s, long generation) {
    return generation == 0 || s.generation <= generation;
  }

  /**
   * Counts a request forwarded to peer {@code to.nodeId()}, decided over a snapshot that showed
   * it in incarnation {@code generation} (0: unknown) at {@code to}, on the state a lookup for
   * that incarnation finds ({@link #get(String, long)}: made afresh if {@link #prune} has
   * forgotten the peer or the state held is about an earlier incarnation), and returns that
   * state, for the forward to count its end on and learn from its answer. Its
   * {@link PeerState#generation} is the incarnation the forward goes to, the one its end reports
   * to {@link #coolDownFailed(String, long, long, long)} and
   * {@link #coolDownBusy(String, long, long, long)} (unless {@code generation} is 0: a snapshot
   * that knows no incarnation reports none): later than {@code generation} if the peer restarted
   * after the snapshot was taken. The request is sent now, to the new process, so it counts
   * there, its failure or push-back cools that process down, and it goes to the address the
   * state notes for that process ({@link PeerState#address}), not to {@code to}, where the old
   * one listened. (It counted on the restarted peer's state while its cool-downs, reported for
   * the snapshot's incarnation, skipped that state; counted on a state about an earlier
   * incarnation, made again by a forward to the old process that ended after a prune, it was on
   * a state the next lookup replaced; and sent to the old process's address, where a restarted
   * peer may no longer listen, its failure to get there cooled the new process down.)
   *
   * <p>A forward that looked its peer's state up as a prune, over a snapshot of the live peers
   * that lacked the peer, removed that state (nothing outstanding there yet) counted itself on a
   * state nothing looked up any more: the decisions that followed did not see it outstanding,
   * and what its answer taught (the accuracy of the peer's estimates, that it does not speak a
   * FORWARD version) was lost. Counted here, under the map's lock for the peer, it is counted
   * before {@link #prune} looks (which then keeps the state) or on the state that follows the
   * one it removed.
   */
  PeerState forwarded(PeerAddress to, long generation) {
    return states.compute(to.nodeId(), (k, st) -> {
      PeerState s = about(st, generation, to);
      s.forwarded();
      return s;
    });
  }

  /**
   * Forgets peers that are not live, have nothing outstanding and no running cool-down: each is
   * looked at and removed under the map's lock for it, so a cool-down set meanwhile through
   * {@link #coolDownFailed(String, long, long, long)} or
   * {@link #coolDownBusy(String, long, long, long)} is
   * either seen (and the state kept) or set on a new state.
   */
  void prune(Set<String> live, long now) {
    for (String id : states.keySet()) {
      if (!live.contains(id)) {
        states.computeIfPresent(id, (k, st) -> {
          if (st.outstanding == 0 && !st.busy(now) && !st.failed(now)) {
            st.discarded = true;
            return null;
          }
          return st;
        });
      }
    }
  }

  int size() {
    return states.size();
  }
}
