package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.spi.EngineResult;

/**
 * Online estimates of the engine's costs, learned from the timings engines report.
 *
 * <p>Design: prefill time is modelled as {@code a + b × uncachedTokens}. Only the slope {@code b}
 * matters for routing (the intercept is the same wherever a request runs), so it is fitted by
 * exponentially weighted least squares over (uncached tokens, prefill nanos) samples, which
 * stays unbiased when engines have a fixed per-request overhead, unlike a plain ratio. Until 8
 * samples ({@link #MIN_SAMPLES}) were seen and have enough spread in x, the configured initial
 * slope is used. Service time (for queue
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
 * decode sample (an upper bound: it includes any wait in the engine's queue). Until an engine
 * reports a prefill time, the prefill slope is also learned from these timed runs: the time is
 * modelled as {@code a + b × uncachedTokens + c × outputTokens}, fitted by the same
 * exponentially weighted least squares with two variables (the intercept takes the fixed
 * overheads, the HTTP exchange's included; {@code c} takes the decode, which would otherwise
 * pass for prefill wherever longer prompts have longer answers), and {@code b} is the slope once
 * 8 such runs were timed and their uncached counts have spread and are not tied to their output
 * lengths (with every
 * output of one length the output term is part of the intercept, and {@code b} is the plain
 * slope). A timed run's cached count is the engine's, else the node's estimate; without either
 * it teaches no slope. Reported prefill times, once seen, are the only source, as before.
 * Reported prefill and decode times that together
 * exceed the run's time as the node measured it (submission to result for a local run, the
 * whole forward for a peer's) are not believed: the node passes such a result on without them.
 *
 * <p><b>What the samples cover</b> (for the forwarding timeout, not for routing): the model keeps
 * the longest uncached part of a prompt in any service sample, {@code U}, and the longest time
 * taken by a sample of that length, {@code T}: the reported prefill time, or for an engine that
 * reports none the whole timed service (which includes the prefill). A prompt of {@code u ≤ U}
 * uncached tokens is <i>covered</i>, and {@code u × T / U} bounds its prefill from above
 * whenever the prefill time per uncached token does not fall with the length (attention makes
 * it grow), whatever the slope prior says and whether or not the slope was learned. Past
 * {@code U} nothing observed bounds the prefill: the prior is a guess there. A timed sample of
 * an engine that reports no cached count either (vLLM without
 * {@code --enable-prompt-tokens-details}) takes the node's estimate of it: the local tree's
 * match before the run, or the replica's estimate of a forward's; without one it covers
 * nothing.
 *
 * <p><b>Queue wait.</b> An engine runs several requests at once (continuous batching: vLLM's
 * {@code --max-num-seqs}, the OpenAI-compatible adapter's {@code slots}). A request that finds
 * {@code q} others waiting on an engine whose {@code S} slots are all busy waits for those
 * {@code q} to start, and slots free up at a rate of {@code S / service}: about
 * {@code q × service / S}, not {@code q × service} ({@link #drainingSlots}). An engine reports
 * waiting requests only when every slot is busy, so while {@code q > 0} the requests it reports
 * running are its slots. (The wait for the request's own slot, about {@code service / S} more,
 * is left out as it always was for one slot: an engine with an empty queue may have free slots,
 * which its load does not tell.) The running count is the engine's word (a peer's comes by
 * gossip, up to 2^31 − 1 on the wire), so it counts for at most {@link #MAX_SLOTS} slots: a
 * figure no engine runs at once (a bug, a stale or forged load) would otherwise make a real
 * queue look free and draw every request to it. An engine with more slots than that has its
 * queue priced a little high.
 *
 * <p>Writers synchronize; readers read volatile fields, so the routing hot path takes no lock.
 */
final class CostModel {

  /**
   * The most slots an engine's queue is taken to drain through, whatever it reports running:
   * well above what serving engines are set to run at once (a few hundred is common for vLLM's
   * {@code --max-num-seqs}).
   */
  static final int MAX_SLOTS = 4096;

  private static final double ALPHA = 0.05;
  private static final int MIN_SAMPLES = 8;

  private double sw;
  private double sx;
  private double sy;
  private double sxx;
  private double sxy;
  /** Results with a prefill time seen, up to {@link #MIN_SAMPLES}. */
  private int samples;

  /** Timed runs' weighted sums: x = uncached tokens, z = output tokens, y = nanos. */
  private double tw;
  private double tx;
  private double tz;
  private double ty;
  private double txx;
  private double txz;
  private double tzz;
  private double txy;
  private double tzy;
  /** Timed runs that could teach the slope, up to {@link #MIN_SAMPLES}. */
  private int timedSamples;

  private int serviceSamples;
  private int decodeSamples;

  private volatile double prefillPerToken;
  private volatile double serviceNanos;
  private volatile double decodePerToken;
  private volatile boolean observedService;
  /** The longest uncached prompt part of a service sample, and the longest time for it. */
  private volatile Coverage coverage = new Coverage(0, 0);

  /** {@code uncached} tokens took up to {@code nanos} (prefill, or whole service if unknown). */
  private record Coverage(int uncached, double nanos) {}

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
   * max(1, min(running, MAX_SLOTS))}, so the wait behind {@code q} waiting requests is {@code
   * q × service / drainingSlots(running)} (see the class notes; with one slot {@code q ×
   * service}, as before slots were counted); 1 when this model charges a full service time per
   * waiting request.
   */
  int drainingSlots(int running) {
    return perSlot ? Math.max(1, Math.min(running, MAX_SLOTS)) : 1;
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

  /**
   * Whether a service sample had at least {@code uncached} uncached prompt tokens, so that
   * {@link #prefillBoundNanosPerToken} bounds the prefill of a prompt of that many.
   */
  boolean covers(int uncached) {
    return uncached <= coverage.uncached();
  }

  /**
   * An upper bound of the prefill time per uncached token of a covered prompt (see the class
   * notes): the longest sample's time over its uncached tokens; 0 before any sample.
   */
  double prefillBoundNanosPerToken() {
    Coverage c = coverage;
    return c.uncached() > 0 ? c.nanos() / c.uncached() : 0;
  }

  /** Learns from one engine result; ignores figures the engine did not report. */
  void observe(EngineResult r) {
    observe(r, -1);
  }

  /**
   * Learns from one engine result that took {@code elapsedNanos} from submission to result
   * ({@code -1} if unknown); the elapsed time is used only when the engine reported no timing.
   */
  void observe(EngineResult r, long elapsedNanos) {
    observe(r, elapsedNanos, -1);
  }

  /**
   * As {@link #observe(EngineResult, long)}; {@code cachedEstimate} is the node's estimate of
   * the prompt tokens the engine had cached ({@code -1} if none), which stands in for an
   * engine's unreported count when the samples' coverage is extended.
   */
  synchronized void observe(EngineResult r, long elapsedNanos, int cachedEstimate) {
    long prefill = r.prefillNanos();
    long decode = r.decodeNanos();
    int out = r.outputTokens().length;
    if (prefill < 0 && decode < 0) {
      if (elapsedNanos >= 0) {
        serviceSample(elapsedNanos);
        int cached = r.cachedPromptTokens() >= 0 ? r.cachedPromptTokens() : cachedEstimate;
        double uncached = r.promptTokens() - Math.max(0, cached);
        if (cached >= 0) {
          cover(r.promptTokens() - cached, elapsedNanos);
          if (samples == 0) {
            timedSample(Math.max(0, r.promptTokens() - cached), out, elapsedNanos);
          }
        }
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
      // counted up to MIN_SAMPLES only: counted on, it would wrap to a negative number after
      // 2^31 results and stop the slope from being learned for the next 2^31
      if (samples < MIN_SAMPLES) {
        samples++;
      }
      cover(x, y);
      double varX = sxx / sw - (sx / sw) * (sx / sw);
      double meanX = sx / sw;
      if (samples >= MIN_SAMPLES && varX > 1.0 && varX > 0.01 * meanX * meanX) {
        double slope = (sxy / sw - meanX * (sy / sw)) / varX;
        if (slope > 0 && Double.isFinite(slope)) {
          prefillPerToken = slope;
        }
      }
    }
    // summed as doubles: two timings each within the contract may add up past Long.MAX_VALUE,
    // which as longs wraps to a negative service time that prices every waiting request below 0
    serviceSample((double) Math.max(0, prefill) + Math.max(0, decode));
    if (decode >= 0 && out > 0) {
      decodeSample((double) decode / out);
    }
  }

  /**
   * Learns the prefill slope from a run the node timed, {@code nanos} for {@code x} uncached
   * prompt tokens and {@code z} output tokens (see the class notes).
   */
  private void timedSample(double x, double z, double nanos) {
    if (!(nanos >= 0) || !Double.isFinite(nanos)) {
      return;
    }
    tw = (1 - ALPHA) * tw + ALPHA;
    tx = (1 - ALPHA) * tx + ALPHA * x;
    tz = (1 - ALPHA) * tz + ALPHA * z;
    ty = (1 - ALPHA) * ty + ALPHA * nanos;
    txx = (1 - ALPHA) * txx + ALPHA * x * x;
    txz = (1 - ALPHA) * txz + ALPHA * x * z;
    tzz = (1 - ALPHA) * tzz + ALPHA * z * z;
    txy = (1 - ALPHA) * txy + ALPHA * x * nanos;
    tzy = (1 - ALPHA) * tzy + ALPHA * z * nanos;
    if (timedSamples < MIN_SAMPLES) {
      timedSamples++;
    }
    double mx = tx / tw;
    double mz = tz / tw;
    double my = ty / tw;
    double vxx = txx / tw - mx * mx;
    double vzz = tzz / tw - mz * mz;
    double vxz = txz / tw - mx * mz;
    double cxy = txy / tw - mx * my;
    double czy = tzy / tw - mz * my;
    if (timedSamples < MIN_SAMPLES || !(vxx > 1.0) || !(vxx > 0.01 * mx * mx)) {
      return;
    }
    double slope;
    if (vzz < 0.5) {
      slope = cxy / vxx; // one output length: the decode is part of the intercept
    } else {
      double det = vxx * vzz - vxz * vxz;
      if (!(det > 0.01 * vxx * vzz)) {
        return; // uncached and output counts move together: neither slope can be told apart
      }
      slope = (cxy * vzz - czy * vxz) / det;
    }
    if (slope > 0 && Double.isFinite(slope)) {
      prefillPerToken = slope;
    }
  }

  private void cover(double uncached, double nanos) {
    Coverage c = coverage;
    if (uncached < 1 || uncached > Integer.MAX_VALUE || !(nanos >= 0)) {
      return;
    }
    if (uncached > c.uncached()) {
      coverage = new Coverage((int) uncached, nanos);
    } else if (uncached == c.uncached() && nanos > c.nanos()) {
      coverage = new Coverage(c.uncached(), nanos);
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
