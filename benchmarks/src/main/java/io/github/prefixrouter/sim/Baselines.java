package io.github.prefixrouter.sim;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.internal.PromptArrays;
import io.github.prefixrouter.sim.DispatchCluster.Dispatcher;
import io.github.prefixrouter.sim.DispatchCluster.View;
import io.github.prefixrouter.testing.SimulatedEngine;
import java.util.Arrays;
import java.util.random.RandomGenerator;

/** The simulator-level baselines: they live here, not in the library. */
final class Baselines {

  private Baselines() {}

  /** Every request runs where it entered. */
  static Dispatcher local() {
    return (entry, request, view) -> entry;
  }

  /** A uniformly random node. */
  static Dispatcher random(RandomGenerator rnd) {
    return (entry, request, view) -> rnd.nextInt(view.nodes());
  }

  /** The node with the fewest outstanding requests; ties: the entry node, else random. */
  static Dispatcher leastLoaded(RandomGenerator rnd) {
    return (entry, request, view) -> {
      int lowest = Integer.MAX_VALUE;
      for (int i = 0; i < view.nodes(); i++) {
        lowest = Math.min(lowest, view.outstanding(i));
      }
      int min = lowest;
      if (view.outstanding(entry) == min) {
        return entry;
      }
      return pickAmong(rnd, view, i -> view.outstanding(i) == min);
    };
  }

  private interface NodePredicate {
    boolean test(int node);
  }

  private static int pickAmong(RandomGenerator rnd, View view, NodePredicate p) {
    int count = 0;
    int chosen = -1;
    for (int i = 0; i < view.nodes(); i++) {
      if (p.test(i)) {
        count++;
        if (rnd.nextInt(count) == 0) { // reservoir sampling: uniform among matches
          chosen = i;
        }
      }
    }
    return chosen;
  }

  /**
   * Consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam; the load factor
   * of KubeAI's PrefixHash): the key is a hash of the prompt's first {@code keyTokens} tokens;
   * walk the ring from the key to the first node whose outstanding requests, counting this one,
   * stay within {@code ceil(loadFactor × (total + 1) / nodes)}. Unlike KubeAI's bound, which has
   * no ceiling and falls back to the key's home node when no node is within it, some node always
   * is.
   */
  static Dispatcher chwbl(int nodes, int virtualNodes, double loadFactor, int keyTokens) {
    long[] points = new long[nodes * virtualNodes];
    int[] owners = new int[nodes * virtualNodes];
    long[][] pairs = new long[nodes * virtualNodes][];
    int k = 0;
    for (int n = 0; n < nodes; n++) {
      for (int v = 0; v < virtualNodes; v++) {
        pairs[k++] = new long[] {mix(mix(n + 1) ^ (v + 0x51ED270B)), n};
      }
    }
    Arrays.sort(pairs, (a, b) -> Long.compare(a[0], b[0]));
    for (int i = 0; i < pairs.length; i++) {
      points[i] = pairs[i][0];
      owners[i] = (int) pairs[i][1];
    }
    return (entry, request, view) -> {
      long h = 0x2545F4914F6CDD1DL;
      int n = Math.min(keyTokens, request.length());
      for (int i = 0; i < n; i++) {
        h = mix(h ^ request.tokenAt(i));
      }
      int total = 0;
      for (int i = 0; i < view.nodes(); i++) {
        total += view.outstanding(i);
      }
      long cap = (long) Math.ceil(loadFactor * (total + 1) / view.nodes());
      int pos = Arrays.binarySearch(points, h);
      if (pos < 0) {
        pos = -pos - 1;
      }
      for (int step = 0; step < points.length; step++) {
        int owner = owners[(pos + step) % points.length];
        if (view.outstanding(owner) + 1 <= cap) {
          return owner;
        }
      }
      return owners[pos % points.length]; // unreachable: some node is always below the cap
    };
  }

  /**
   * A centralized router with instant, exact knowledge of every engine's cache, following SGLang's
   * published cache-aware policy: if the load is imbalanced ({@code max - min > absThreshold} and
   * {@code max > relThreshold × min}) send to the least loaded node; else if the best exact match
   * covers more than {@code cacheThreshold} of the prompt send to the best-matching node (ties:
   * lower load, then random); else send to the node with the smallest cache (most free room; ties:
   * lower load, then random). Load is the router's count of outstanding requests.
   */
  static Dispatcher sglangOracle(
      RandomGenerator rnd, int absThreshold, double relThreshold, double cacheThreshold) {
    return (entry, request, view) -> {
      int n = view.nodes();
      int max = Integer.MIN_VALUE;
      int min = Integer.MAX_VALUE;
      for (int i = 0; i < n; i++) {
        max = Math.max(max, view.outstanding(i));
        min = Math.min(min, view.outstanding(i));
      }
      if (max - min > absThreshold && max > relThreshold * min) {
        int m = min;
        return pickAmong(rnd, view, i -> view.outstanding(i) == m);
      }
      int[] tokens = PromptArrays.shared(request);
      int[] match = new int[n];
      int best = 0;
      for (int i = 0; i < n; i++) {
        match[i] = view.engine(i).cachedPrefixTokens(tokens);
        best = Math.max(best, match[i]);
      }
      if ((double) best / tokens.length > cacheThreshold) {
        int b = best;
        int minLoad = Integer.MAX_VALUE;
        for (int i = 0; i < n; i++) {
          if (match[i] == b) {
            minLoad = Math.min(minLoad, view.outstanding(i));
          }
        }
        int ml = minLoad;
        return pickAmong(rnd, view, i -> match[i] == b && view.outstanding(i) == ml);
      }
      int smallest = Integer.MAX_VALUE;
      for (int i = 0; i < n; i++) {
        smallest = Math.min(smallest, view.engine(i).cachedBlocks());
      }
      int s = smallest;
      int minLoad = Integer.MAX_VALUE;
      for (int i = 0; i < n; i++) {
        if (view.engine(i).cachedBlocks() == s) {
          minLoad = Math.min(minLoad, view.outstanding(i));
        }
      }
      int ml = minLoad;
      return pickAmong(
          rnd, view, i -> view.engine(i).cachedBlocks() == s && view.outstanding(i) == ml);
    };
  }

  /**
   * A centralized, delay-aware router with instant, exact knowledge of every engine: each request
   * goes to the node where it is expected to finish first, i.e. the smallest sum of the engine's
   * outstanding work ({@link SimulatedEngine#pendingWorkNanos()}, divided by its slots), the
   * prefill of the part of the prompt that engine's cache lacks now ({@code prefillOverhead +
   * prefillPerToken x uncached tokens}, with the engine's at-least-one-computed-token cap) and,
   * for a node other than the entry node, a round trip of {@code 2 x oneWayDelayNanos}. Decode
   * is the same everywhere and left out. Ties: the entry node, else random. A stronger reference
   * than {@link #sglangOracle}, not a bound: it is greedy per request, prices queued requests on
   * the cache as it is now, and does not see requests still on their way to a node.
   */
  static Dispatcher earliestCompletion(
      RandomGenerator rnd, long oneWayDelayNanos, EngineProfile profile) {
    long roundTrip = 2 * oneWayDelayNanos;
    int block = profile.blockSize();
    return (entry, request, view) -> {
      int n = view.nodes();
      int[] tokens = PromptArrays.shared(request);
      int cap = ((tokens.length - 1) / block) * block;
      long[] cost = new long[n];
      long best = Long.MAX_VALUE;
      for (int i = 0; i < n; i++) {
        SimulatedEngine e = view.engine(i);
        int cached = Math.min(e.cachedPrefixTokens(request.scope(), tokens), cap);
        long prefill =
            profile.prefillOverheadNanos()
                + profile.prefillNanosPerToken() * (long) (tokens.length - cached);
        cost[i] = e.pendingWorkNanos() / profile.slots() + prefill + (i == entry ? 0 : roundTrip);
        best = Math.min(best, cost[i]);
      }
      if (cost[entry] == best) {
        return entry;
      }
      long b = best;
      return pickAmong(rnd, view, i -> cost[i] == b);
    };
  }

  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
