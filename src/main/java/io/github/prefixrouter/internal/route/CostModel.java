package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.spi.EngineResult;

/**
 * Online estimates of the engine's costs, learned from the timings engines report.
 *
 * <p>Design: prefill time is modelled as {@code a + b × uncachedTokens}. Only the slope {@code b}
 * matters for routing (the intercept is the same wherever a request runs), so it is fitted by
 * exponentially weighted least squares over (uncached tokens, prefill nanos) samples, which
 * stays unbiased when engines have a fixed per-request overhead, unlike a plain ratio. Until the
 * samples have enough spread in x, the configured initial slope is used. Service time (for queue
 * wait) and decode time per output token are EWMAs whose first samples are plain means (weight
 * {@code max(ALPHA, 1/n)} for the n-th sample), so the first observation replaces the prior at
 * once instead of moving it by 5%. Results from every node feed the model (the fleet is assumed
 * homogeneous; a forwarded result carries the peer's timings).
 *
 * <p><b>Engines that report no timings</b> (the OpenAI-compatible adapter: the completions API
 * has none) are timed by the node: {@link #observe(EngineResult, long)} takes the time from
 * submitting the request to its result, measured with the node's clock, by the local node
 * only for runs that got an engine slot at once (a queued run's wait is priced apart, by the
 * queue term), and for a forwarded answer the serving peer's own time from receipt to answer. That whole time is a service
 * sample; the part not explained by the prefill estimate, divided by the output tokens, is a
 * decode sample (an upper bound: it includes any wait in the engine's queue). The prefill slope
 * is learned only from reported prefill times.
 *
 * <p><b>Queue wait.</b> An engine runs several requests at once (continuous batching: vLLM's
 * {@code --max-num-seqs}, the OpenAI-compatible adapter's {@code slots}). A request that finds
 * {@code q} others waiting on an engine whose {@code S} slots are all busy waits for those
 * {@code q} to start, and slots free up at a rate of {@code S / service}: about
 * {@code q × service / S}, not {@code q × service} ({@link #drainingSlots}). An engine reports
 * waiting requests only when every slot is busy, so while {@code q > 0} the requests it reports
 * running are its slots. (The wait for the request's own slot, about {@code service / S} more,
 * is left out as it always was for one slot: an engine with an empty queue may have free slots,
 * which its load does not tell.)
 *
 * <p>Writers synchronize; readers read volatile fields, so the routing hot path takes no lock.
 */
final class CostModel {

  private static final double ALPHA = 0.05;
  private static final int MIN_SAMPLES = 8;

  private double sw;
  private double sx;
  private double sy;
  private double sxx;
  private double sxy;
  private int samples;

  private int serviceSamples;
  private int decodeSamples;

  private volatile double prefillPerToken;
  private volatile double serviceNanos;
  private volatile double decodePerToken;
  private volatile boolean observedService;
  /** False only for side-by-side comparisons ({@link #usePreviousPricing}). */
  private volatile boolean perSlot = true;
  /** False only for side-by-side comparisons ({@link #usePreviousPricing}). */
  private volatile boolean learnOverhead = true;

  CostModel(long initialPrefillNanosPerToken) {
    this.prefillPerToken = initialPrefillNanosPerToken;
    // Before any sample: a 256-token prefill, and decode 10x slower per token than prefill.
    this.serviceNanos = 256.0 * initialPrefillNanosPerToken;
    this.decodePerToken = 10.0 * initialPrefillNanosPerToken;
  }

  /** Nanoseconds of prefill per uncached prompt token. */
  double prefillNanosPerToken() {
    return prefillPerToken;
  }

  /** Mean time one request occupies an engine (prefill + decode). */
  double serviceNanos() {
    return serviceNanos;
  }

  /** Nanoseconds per generated token. */
  double decodeNanosPerToken() {
    return decodePerToken;
  }

  /**
   * The slots that drain an engine's queue while it runs {@code running} requests: {@code
   * max(1, running)}, so the wait behind {@code q} waiting requests is {@code q × service /
   * drainingSlots(running)} (see the class notes; with one slot {@code q × service}, as before
   * slots were counted); 1 when this model charges a full service time per waiting request.
   */
  int drainingSlots(int running) {
    return perSlot ? Math.max(1, running) : 1;
  }

  /**
   * Whether the node learns each peer's per-forward overhead from answered forwards ({@link
   * PeerHealth.PeerState#observeOverhead}); if not, every forward is priced at the configured
   * {@code forwardOverhead}.
   */
  boolean learnsForwardOverhead() {
    return learnOverhead;
  }

  /**
   * The pricing before slots were counted ({@code queue}: a full service time per waiting
   * request whatever the engine runs at once) and before forward overheads were learned
   * ({@code overhead}: the configured overhead for every forward). For side-by-side comparisons
   * in the simulator only.
   */
  void usePreviousPricing(boolean queue, boolean overhead) {
    perSlot &= !queue;
    learnOverhead &= !overhead;
  }

  /** Whether any service time was observed (reported by an engine or timed by a node). */
  boolean hasObservedService() {
    return observedService;
  }

  /** Learns from one engine result; ignores figures the engine did not report. */
  void observe(EngineResult r) {
    observe(r, -1);
  }

  /**
   * Learns from one engine result that took {@code elapsedNanos} from submission to result
   * ({@code -1} if unknown); the elapsed time is used only when the engine reported no timing.
   */
  synchronized void observe(EngineResult r, long elapsedNanos) {
    long prefill = r.prefillNanos();
    long decode = r.decodeNanos();
    int out = r.outputTokens().length;
    if (prefill < 0 && decode < 0) {
      if (elapsedNanos >= 0) {
        double uncached = r.promptTokens() - Math.max(0, r.cachedPromptTokens());
        serviceSample(elapsedNanos);
        if (out > 0) {
          decodeSample(Math.max(0, elapsedNanos - prefillPerToken * uncached) / out);
        }
      }
      return;
    }
    if (prefill >= 0 && r.cachedPromptTokens() >= 0) {
      double x = r.promptTokens() - r.cachedPromptTokens();
      double y = prefill;
      sw = (1 - ALPHA) * sw + ALPHA;
      sx = (1 - ALPHA) * sx + ALPHA * x;
      sy = (1 - ALPHA) * sy + ALPHA * y;
      sxx = (1 - ALPHA) * sxx + ALPHA * x * x;
      sxy = (1 - ALPHA) * sxy + ALPHA * x * y;
      samples++;
      double varX = sxx / sw - (sx / sw) * (sx / sw);
      double meanX = sx / sw;
      if (samples >= MIN_SAMPLES && varX > 1.0 && varX > 0.01 * meanX * meanX) {
        double slope = (sxy / sw - meanX * (sy / sw)) / varX;
        if (slope > 0 && Double.isFinite(slope)) {
          prefillPerToken = slope;
        }
      }
    }
    serviceSample(Math.max(0, prefill) + Math.max(0, decode));
    if (decode >= 0 && out > 0) {
      decodeSample((double) decode / out);
    }
  }

  private void serviceSample(double service) {
    serviceSamples = Math.min(serviceSamples + 1, 1 << 20);
    double w = Math.max(ALPHA, 1.0 / serviceSamples);
    serviceNanos = (1 - w) * serviceNanos + w * service;
    observedService = true;
  }

  private void decodeSample(double perToken) {
    decodeSamples = Math.min(decodeSamples + 1, 1 << 20);
    double w = Math.max(ALPHA, 1.0 / decodeSamples);
    decodePerToken = (1 - w) * decodePerToken + w * perToken;
  }
}
