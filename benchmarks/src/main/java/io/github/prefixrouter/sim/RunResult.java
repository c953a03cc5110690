package io.github.prefixrouter.sim;

import java.util.List;

/**
 * The measured outcome of one scenario (warm-up requests excluded unless stated).
 *
 * @param scenario what ran
 * @param measuredRequests requests measured (after the warm-up)
 * @param failedRequests measured requests that completed exceptionally or never completed
 * @param meanLatencySeconds mean latency from arrival to answer at the entry node
 * @param p50LatencySeconds median latency
 * @param p99LatencySeconds 99th-percentile latency
 * @param hitRate prompt tokens served from cache / prompt tokens, of the measured requests
 * @param forwardedShare share of measured requests served by another node than their entry
 * @param maxNodeShare largest share of measured requests served by a single node
 * @param nodeShares share of measured requests served by each node
 * @param gossipBytesPerNodePerSecond routing metadata sent, per node per simulated second of
 *     the whole run (warm-up included)
 * @param simulatedSeconds simulated time of the whole run
 * @param timeline per-window series over the whole run, warm-up included
 * @param topSubject name of the most popular subject (the timeline's topic series)
 */
public record RunResult(
    Scenario scenario,
    int measuredRequests,
    int failedRequests,
    double meanLatencySeconds,
    double p50LatencySeconds,
    double p99LatencySeconds,
    double hitRate,
    double forwardedShare,
    double maxNodeShare,
    double[] nodeShares,
    double gossipBytesPerNodePerSecond,
    double simulatedSeconds,
    List<Window> timeline,
    String topSubject) {

  /**
   * One window of the over-time series.
   *
   * @param startSeconds window start in simulated seconds
   * @param requests requests that arrived in the window and that an engine completed (one that
   *     failed before any engine completed it is left out, as from the other figures)
   * @param hitRate cached / prompt tokens of those requests
   * @param nodeShares share of those requests served by each node
   * @param topSubjectNodeShares share of the window's requests of the top subject served by each
   *     node (all zero if none arrived)
   */
  public record Window(
      double startSeconds,
      int requests,
      double hitRate,
      double[] nodeShares,
      double[] topSubjectNodeShares) {}
}
