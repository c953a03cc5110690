package io.github.prefixrouter.spi;

/**
 * An engine's current load, reported by {@link InferenceEngine#load()} and advertised to peers.
 * Immutable.
 *
 * @param queueDepth requests waiting to start
 * @param inFlight requests running now
 */
public record EngineLoad(int queueDepth, int inFlight) {

  /** No queue, nothing running. */
  public static final EngineLoad IDLE = new EngineLoad(0, 0);

  /**
   * Checks the figures.
   *
   * @param queueDepth requests waiting to start
   * @param inFlight requests running now
   * @throws IllegalArgumentException if either figure is negative
   */
  public EngineLoad {
    if (queueDepth < 0 || inFlight < 0) {
      throw new IllegalArgumentException(
          "load figures must be >= 0, were queueDepth=" + queueDepth + " inFlight=" + inFlight);
    }
  }

  /**
   * The total load.
   *
   * @return queue depth plus requests in flight, {@link Integer#MAX_VALUE} if the sum is larger
   */
  public int total() {
    return (int) Math.min(Integer.MAX_VALUE, (long) queueDepth + inFlight);
  }
}
