package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.spi.EngineResult;

/**
 * Online estimates of the engine's costs, learned from the timings engines report.
 *
 * <p>An engine that reports no timings teaches the service time through the latency of its
 * runs that started at once ({@link #observeLatency}).
 *
 * <p>Design: prefill time is modelled as {@code a + b × uncachedTokens}. Only the slope {@code b}
 * matters for routing (the intercept is the same wherever a request runs), so it is fitted by
 * exponentially weighted least squares over (uncached tokens, prefill nanos) samples, which
 * stays unbiased when engines have a fixed per-request overhead, unlike a plain ratio. Until the
 * samples have enough spread in x, the configured initial slope is used. Service time (for queue
 * wait) and decode time per output token are EWMAs. Results from every node feed the model (the
 * fleet is assumed homogeneous; a forwarded result carries the peer's timings).
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

  private volatile double prefillPerToken;
  private volatile double serviceNanos;
  private volatile double decodePerToken;

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
   * Learns from the latency of a local run that started at once (no queue) on an engine that
   * reports no timings (an HTTP server: the completions API has none): the latency is the
   * service time, and spread over the output tokens an upper bound of decode per token (which
   * only sizes forwarding timeouts, where erring long is the safe side).
   *
   * @param latencyNanos from submission to the answer
   * @param outputTokens tokens generated
   */
  synchronized void observeLatency(long latencyNanos, int outputTokens) {
    if (latencyNanos <= 0) {
      return;
    }
    serviceNanos = (1 - ALPHA) * serviceNanos + ALPHA * latencyNanos;
    if (outputTokens > 0) {
      decodePerToken = (1 - ALPHA) * decodePerToken + ALPHA * ((double) latencyNanos / outputTokens);
    }
  }

  /** Learns from one engine result; ignores figures the engine did not report. */
  synchronized void observe(EngineResult r) {
    long prefill = r.prefillNanos();
    long decode = r.decodeNanos();
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
    if (prefill >= 0 || decode >= 0) {
      double service = Math.max(0, prefill) + Math.max(0, decode);
      serviceNanos = (1 - ALPHA) * serviceNanos + ALPHA * service;
    }
    int out = r.outputTokens().length;
    if (decode >= 0 && out > 0) {
      decodePerToken = (1 - ALPHA) * decodePerToken + ALPHA * ((double) decode / out);
    }
  }
}
