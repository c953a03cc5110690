package io.github.prefixrouter.internal.route;

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
 *       that entered at this node, exponentially decayed with the current residency as time
 *       constant: at steady state, the number of requests for that prefix seen during one
 *       residency, which predicts how many the next residency will see.
 *   <li>Bounded: an open-addressed table of {@link #SLOTS} keys; a new key takes its slot, or the
 *       slot of the two probed with the smaller decayed count. Forgetting a key only makes the
 *       policy forward more (as if the prefix had no local demand), never wrong.
 *   <li>Reservation: a bought miss is a long prefill that the engine's queue depth does not
 *       show (it counts requests, priced at the mean service time), so the planner records
 *       until when the miss occupies the engine and adds what is left of it to the local cost of
 *       the requests that follow; they go to a peer when that is cheaper than waiting.
 *   <li>Only routing attempts record (never {@code explain}); methods synchronize (one short
 *       critical section per decision, no allocation).
 * </ul>
 */
final class LocalDemand {

  /** Keys remembered (a power of two). */
  static final int SLOTS = 4096;

  /** Time constant of the insertion rate. */
  static final long RATE_WINDOW_NANOS = 60_000_000_000L;

  /** Upper bound of the residency estimate (and its value before anything was inserted). */
  static final long MAX_RESIDENCY_NANOS = 600_000_000_000L;

  private final long capacityTokens;
  private final long[] keys = new long[SLOTS];
  private final double[] counts = new double[SLOTS];
  private final long[] stamps = new long[SLOTS];
  private final boolean[] used = new boolean[SLOTS];

  private double inserted;
  private long insertedAt;
  private boolean any;

  private long reservedUntil;
  private boolean reserved;

  LocalDemand(long capacityTokens) {
    this.capacityTokens = Math.max(1, capacityTokens);
  }

  /** Records a request for {@code key} that entered at this node. */
  synchronized void requested(long key, long nowNanos) {
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
   * Requests for {@code key} expected while a prefix cached now would stay cached: the decayed
   * count of past requests, the current one excluded.
   */
  synchronized double expectedRequests(long key, long nowNanos) {
    int i = slot(key);
    if (!(used[i] && keys[i] == key)) {
      i = (i + 1) & (SLOTS - 1);
      if (!(used[i] && keys[i] == key)) {
        return 0;
      }
    }
    double c = decay(counts[i], nowNanos - stamps[i], residencyNanos(nowNanos));
    return Math.max(0, c - 1.0);
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

  /**
   * Records that a miss bought here occupies the local engine until {@code untilNanos} (a later
   * reservation extends an earlier one, never shortens it).
   */
  synchronized void reserve(long untilNanos) {
    if (!reserved || untilNanos - reservedUntil > 0) {
      reservedUntil = untilNanos;
      reserved = true;
    }
  }

  /**
   * Nanoseconds of a bought miss still ahead of a request queued here now (0 if none): the
   * engine's queue depth says how many requests wait, not that one of them is a long prefill.
   */
  synchronized long reservedNanos(long nowNanos) {
    if (!reserved) {
      return 0;
    }
    long left = reservedUntil - nowNanos;
    return left > 0 ? left : 0;
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
