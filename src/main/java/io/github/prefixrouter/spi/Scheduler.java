package io.github.prefixrouter.spi;

/**
 * Runs delayed tasks for the library: gossip rounds, forwarding timeouts, cool-down expiry.
 *
 * <p>The library never starts a thread: every timer goes through the scheduler its host gives
 * it. Implementations must run each task at most once, never on the caller's thread from inside
 * {@link #schedule}, and may run tasks concurrently with other library calls (the library is
 * thread-safe). A node's scheduler must take its timers until the node has stopped: one that
 * refuses them while the node runs (a host's executor shut down first) loses no request, but
 * ends the node's gossip, so that its peers declare it dead; the node logs that at ERROR and
 * counts it in {@link io.github.prefixrouter.GossipStats#internalErrors()}.
 * {@link io.github.prefixrouter.testing.SimulatedScheduler} runs tasks in simulated
 * time on one thread; {@link Schedulers#newSingleThread(String)} is a production implementation.
 */
public interface Scheduler {

  /**
   * Runs {@code task} once, {@code delayNanos} nanoseconds from now (0 means as soon as possible).
   *
   * @param delayNanos the delay in nanoseconds of the scheduler's clock, {@code >= 0}
   * @param task what to run; never null
   * @return a handle that cancels the task if it has not started yet
   * @throws IllegalArgumentException if {@code delayNanos} is negative
   */
  Cancellable schedule(long delayNanos, Runnable task);

  /** A scheduled task that may still be cancelled. */
  @FunctionalInterface
  interface Cancellable {
    /**
     * Prevents the task from running, if it has not started.
     *
     * @return false if it already ran or started, or was cancelled, true otherwise (the task
     *     will not run)
     */
    boolean cancel();
  }
}
