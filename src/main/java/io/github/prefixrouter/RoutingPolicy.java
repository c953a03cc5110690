package io.github.prefixrouter;

/** How a node chooses where a request runs. Selected with {@link RouterConfig.Builder#policy}. */
public enum RoutingPolicy {

  /**
   * The default. Estimates each candidate's latency as round trip + queue wait + prefill of the
   * tokens it does not hold + forwarding overhead, and forwards only when the best peer beats
   * local execution by the configured margin. On slow links it therefore stays local by itself.
   */
  COST_AWARE,

  /**
   * The source design's policy: forward to the peer with the longest estimated prefix match;
   * run locally when no peer holds a strictly longer prefix than the local tree. Ignores the
   * network and (apart from push-back) load. Kept so simulations can compare the two.
   */
  LONGEST_PREFIX,

  /** No routing: every request submitted to a node runs on that node's engine. */
  LOCAL_ONLY
}
