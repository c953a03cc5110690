package io.github.prefixrouter.internal.route;

import java.util.ArrayList;
import java.util.List;

/**
 * What caching a prefix locally is worth: how many more requests for it this node expects while
 * the prefix would stay in its cache.
 *
 * <p>Design: forwarding a request to the peer that holds its prefix is "renting" that peer's
 * cache (each request pays the round trip and the peer's queue); running it here as a miss is
 * "buying" (one slower request, after which the prefix is cached here and the next requests for
 * it are local hits). Buying pays off when the requests expected for the prefix before the local
 * cache evicts it, times the premium each would pay by being forwarded, exceed the extra cost of
 * the miss now (see {@link RoutePlanner}).
 *
 * <ul>
 *   <li>Residency: how long a newly cached prefix stays, estimated as capacity / the rate at which
 *       this node inserts tokens into its cache (the uncached tokens of the requests it runs;
 *       exponentially decayed over {@link #RATE_WINDOW_NANOS}), at most
 *       {@link #MAX_RESIDENCY_NANOS}. An LRU cache keeps an item roughly as long as it is used more
 *       often than that (Che's approximation); before the cache fills, the cap applies.
 *   <li>Demand: per prefix key (the hash of the prompt's first blocks), a count of the requests
 *       that entered at this node, exponentially decayed with the current residency {@code T} as
 *       time constant: at steady state, {@code λT}, the requests for that prefix seen during one
 *       residency.
 *   <li>Expected requests while cached: an LRU cache keeps an item until a gap between two of
 *       its requests exceeds {@code T} (Che's approximation); with Poisson requests at rate
 *       {@code λ} that gap comes after {@code e^(λT) − 1} hits on average, far more than
 *       {@code λT} for a prefix requested several times per residency. Capped at
 *       {@code horizon / T} times the count, the requests of a {@link #PLANNING_HORIZON_NANOS}
 *       horizon at the rate seen: demand drifts, and a buy must repay within the hour.
 *   <li>Learning: until the node has observed for about one residency, the count covers only
 *       the time since its first request, {@code λT(1 − e^(−age/T))}; in the exponent it is
 *       divided by that coverage (as a bias-corrected moving average is, at most
 *       {@code 1 / }{@link #MIN_COVERAGE}-fold), so a node that has just started does not take
 *       a prefix it has seen twice in a minute for a rare one. The horizon cap multiplies the
 *       uncorrected count: a young node expects several times what it saw, never an hour of a
 *       rate extrapolated from a few requests.
 *   <li>Arrival rate: all requests entering at this node, decayed over
 *       {@link #RATE_WINDOW_NANOS} (bias-corrected the same way): how many requests a bought
 *       miss holds up while it occupies the engine (see {@link RoutePlanner}).
 *   <li>Bounded: an open-addressed table of {@link #SLOTS} keys; a new key takes its slot, or the
 *       slot of the two probed with the smaller decayed count. Forgetting a key only makes the
 *       policy forward more (as if the prefix had no local demand), never wrong.
 *   <li>Reservation: a bought miss is a long prefill that the engine's queue depth does not
 *       show (it counts requests, priced at the mean service time), so the planner records
 *       until when the miss occupies the engine and adds what is left of it to the local cost of
 *       the requests that follow; they go to a peer when that is cheaper than waiting. A
 *       reservation lasts until the miss is expected to end or until its run ends, whichever is
 *       first ({@link #release}): a run that ends early (answered, failed, cancelled or given up)
 *       no longer holds up the requests that follow.
 *   <li>Only routing attempts and runs here record (never {@code explain}); methods
 *       synchronize (short critical sections, two to four per cost-aware decision; no
 *       allocation but a bought miss's reservation).
 * </ul>
 */
final class LocalDemand {

  /** Keys remembered (a power of two). */
  static final int SLOTS = 4096;

  /** Time constant of the insertion rate. */
  static final long RATE_WINDOW_NANOS = 60_000_000_000L;

  /** Upper bound of the residency estimate (and its value before anything was inserted). */
  static final long MAX_RESIDENCY_NANOS = 600_000_000_000L;

  /** Longest time over which the requests expected for a bought prefix are counted. */
  static final long PLANNING_HORIZON_NANOS = 3_600_000_000_000L;

  /** Smallest share of a time constant the counts are extrapolated from (at most 10-fold). */
  static final double MIN_COVERAGE = 0.1;

  /** {@code e^x} is finite (and any cap smaller) for x below this. */
  private static final double MAX_EXPONENT = 700;

  private final long capacityTokens;
  private final long[] keys = new long[SLOTS];
  private final double[] counts = new double[SLOTS];
  private final long[] stamps = new long[SLOTS];
  private final boolean[] used = new boolean[SLOTS];

  private double inserted;
  private long insertedAt;
  private boolean any;

  private boolean observing;
  private long observingSince;
  private double arrivals;
  private long arrivalsAt;

  /**
   * The reservations of the bought misses running here that have not ended (see {@link
   * #reserve}); one is dropped when it is released, or by the next reservation once it is past
   * its end. A miss is bought only while none is still ahead, so there is one at a time but for
   * buys decided at the same time.
   */
  private final List<Reservation> reservations = new ArrayList<>(2);

  LocalDemand(long capacityTokens) {
    this.capacityTokens = Math.max(1, capacityTokens);
  }

  /** Records a request for {@code key} that entered at this node. */
  synchronized void requested(long key, long nowNanos) {
    if (!observing) {
      observing = true;
      observingSince = nowNanos;
      arrivalsAt = nowNanos;
    }
    arrivals = decay(arrivals, nowNanos - arrivalsAt, RATE_WINDOW_NANOS) + 1.0;
    arrivalsAt = nowNanos;
    double tau = residencyNanos(nowNanos);
    int i = slot(key);
    if (used[i] && keys[i] == key) {
      counts[i] = decay(counts[i], nowNanos - stamps[i], tau) + 1.0;
    } else {
      int j = (i + 1) & (SLOTS - 1);
      if (used[j] && keys[j] == key) {
        counts[j] = decay(counts[j], nowNanos - stamps[j], tau) + 1.0;
        i = j;
      } else {
        // replace the emptier of the two probed slots
        if (used[i] && (!used[j] || decay(counts[j], nowNanos - stamps[j], tau)
            < decay(counts[i], nowNanos - stamps[i], tau))) {
          i = j;
        }
        used[i] = true;
        keys[i] = key;
        counts[i] = 1.0;
      }
    }
    stamps[i] = nowNanos;
  }

  /**
   * Requests for {@code key} expected while a prefix cached now would stay cached: with {@code c}
   * the decayed count of past requests (the current one excluded) and {@code x ≈ λT} that count
   * corrected for the time observed so far, the expected hits before an LRU gap,
   * {@code e^x − 1}, at most {@code c × horizon / T}.
   */
  synchronized double expectedRequests(long key, long nowNanos) {
    int i = find(key);
    if (i < 0) {
      return 0;
    }
    long tau = residencyNanos(nowNanos);
    double past = past(i, nowNanos, tau);
    double perResidency = past / coverage(nowNanos - observingSince, tau);
    // the horizon multiplies what was seen, not what was extrapolated from a short start
    double perHorizon = past * ((double) PLANNING_HORIZON_NANOS / tau);
    return Math.min(Math.expm1(Math.min(perResidency, MAX_EXPONENT)), perHorizon);
  }

  /**
   * {@code x ≈ λT} of {@link #expectedRequests}: the decayed count of past requests for
   * {@code key} (the current one excluded), corrected for the time observed so far; 0 for a key
   * never seen. The {@code E} requests expected take {@code E / λ} at the rate seen, so a prefix
   * for {@code key} cached now is expected to stay cached {@code E / x} residencies, while its
   * tokens take cache space that other content would have used (see {@link RoutePlanner}).
   */
  synchronized double requestsPerResidency(long key, long nowNanos) {
    int i = find(key);
    if (i < 0) {
      return 0;
    }
    long tau = residencyNanos(nowNanos);
    return past(i, nowNanos, tau) / coverage(nowNanos - observingSince, tau);
  }

  /** The slot holding {@code key}, or -1. */
  private int find(long key) {
    int i = slot(key);
    if (used[i] && keys[i] == key) {
      return i;
    }
    i = (i + 1) & (SLOTS - 1);
    return used[i] && keys[i] == key ? i : -1;
  }

  /** Slot {@code i}'s decayed count of past requests, the current one excluded. */
  private double past(int i, long nowNanos, long tau) {
    return Math.max(0, decay(counts[i], nowNanos - stamps[i], tau) - 1.0);
  }

  /**
   * Requests per second entering at this node (recorded by {@link #requested}), decayed over
   * {@link #RATE_WINDOW_NANOS}; 0 before the first.
   */
  synchronized double arrivalsPerSecond(long nowNanos) {
    if (!observing) {
      return 0;
    }
    double a = decay(arrivals, nowNanos - arrivalsAt, RATE_WINDOW_NANOS);
    return a / coverage(nowNanos - observingSince, RATE_WINDOW_NANOS) / (RATE_WINDOW_NANOS / 1e9);
  }

  /** Share of a decayed count's steady state reached after observing for {@code age}. */
  private static double coverage(long ageNanos, double tauNanos) {
    double f = ageNanos <= 0 ? 0 : -Math.expm1(-ageNanos / tauNanos);
    return Math.max(f, MIN_COVERAGE);
  }

  /** Records that this node runs a request and so inserts {@code tokens} into its cache. */
  synchronized void inserted(long tokens, long nowNanos) {
    if (tokens <= 0) {
      return;
    }
    if (any) {
      inserted = decay(inserted, nowNanos - insertedAt, RATE_WINDOW_NANOS);
    }
    inserted += tokens;
    insertedAt = nowNanos;
    any = true;
  }

  /** A bought miss's hold on the local engine: until {@link #untilNanos}, or its release. */
  static final class Reservation {
    /** When the miss is expected to end. */
    final long untilNanos;

    Reservation(long untilNanos) {
      this.untilNanos = untilNanos;
    }
  }

  /**
   * Records, at {@code nowNanos}, that a miss bought here occupies the local engine until
   * {@code untilNanos}, or until its run ends ({@link #release}) if that is sooner. While several
   * are held, the latest end counts: a later reservation extends an earlier one, never shortens
   * it.
   *
   * @return the reservation, to release when the miss's run ends
   */
  synchronized Reservation reserve(long nowNanos, long untilNanos) {
    // those past their end count no more: dropped here, whether their runs ended or not
    reservations.removeIf(r -> r.untilNanos - nowNanos <= 0);
    Reservation r = new Reservation(untilNanos);
    reservations.add(r);
    return r;
  }

  /**
   * Ends reservation {@code r}: its miss's run ended (answered, failed, cancelled or given up),
   * so the miss occupies the engine no more, however long it was expected to. Nothing if it
   * ended already.
   */
  synchronized void release(Reservation r) {
    reservations.remove(r);
  }

  /**
   * Nanoseconds of a bought miss still ahead of a request queued here now (0 if none): the
   * engine's queue depth says how many requests wait, not that one of them is a long prefill.
   */
  synchronized long reservedNanos(long nowNanos) {
    long left = 0;
    for (int i = 0; i < reservations.size(); i++) {
      left = Math.max(left, reservations.get(i).untilNanos - nowNanos);
    }
    return left;
  }

  /** Estimated time a newly cached prefix stays in the local cache. */
  synchronized long residencyNanos(long nowNanos) {
    if (!any) {
      return MAX_RESIDENCY_NANOS;
    }
    double perNano = decay(inserted, nowNanos - insertedAt, RATE_WINDOW_NANOS) / RATE_WINDOW_NANOS;
    if (!(perNano > 0)) {
      return MAX_RESIDENCY_NANOS;
    }
    double tau = capacityTokens / perNano;
    return tau >= MAX_RESIDENCY_NANOS ? MAX_RESIDENCY_NANOS : (long) tau;
  }

  private static double decay(double value, long elapsedNanos, double tauNanos) {
    if (elapsedNanos <= 0) {
      return value;
    }
    return value * Math.exp(-elapsedNanos / tauNanos);
  }

  private static int slot(long key) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h >>> 52) & (SLOTS - 1);
  }
}
