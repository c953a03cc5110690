package io.github.prefixrouter.spi;

/**
 * An engine's current load, reported by {@link InferenceEngine#load()} and advertised to peers.
 *
 * @param queueDepth requests waiting to start
 * @param inFlight requests running now
 */
public record EngineLoad(int queueDepth, int inFlight) {

  /** No queue, nothing running. */
  public static final EngineLoad IDLE = new EngineLoad(0, 0);

  public EngineLoad {
    if (queueDepth < 0 || inFlight < 0) {
      throw new IllegalArgumentException(
          "load figures must be >= 0, were queueDepth=" + queueDepth + " inFlight=" + inFlight);
    }
  }

  /** Queue depth plus requests in flight. */
  public int total() {
    return queueDepth + inFlight;
  }
}
