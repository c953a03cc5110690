package io.github.prefixrouter.spi;

/**
 * A monotonic time source in nanoseconds, injected into every component that needs time.
 *
 * <p>The library never reads the system clock itself: a node takes its clock from its builder,
 * so a whole cluster can run on a simulated clock (see
 * {@link io.github.prefixrouter.testing.SimulatedScheduler}) and every run replays from its seed.
 * Values are only meaningful as differences, like {@link System#nanoTime()}.
 *
 * <p>Implementations must be thread-safe: the library reads the clock from request threads,
 * transport threads and scheduler tasks at once.
 *
 * <p>A reading should not throw. One that does (a RuntimeException, an Error, or a checked
 * exception thrown undeclared: a host's bug, a simulated clock shut down) loses no request: the
 * node takes the latest reading that did not throw instead and goes on, logging the first
 * failure at ERROR and later ones at WARN as their count reaches a power of two. While every
 * reading throws, time stands still for the node: its timers still run on its scheduler, but
 * the durations it measures (service times, cool-downs, silences) do not grow until the clock
 * reads again. A node reads its clock once as it is built: a clock that throws then fails the
 * build ({@link io.github.prefixrouter.PrefixRouterNode.Builder#build()}), before any request
 * is accepted. The library's engines given a clock of their own
 * ({@link io.github.prefixrouter.engine.reference.ReferenceEngine.Builder#clock},
 * {@link io.github.prefixrouter.testing.SimulatedEngine.Builder#clock}) read it alike, and an
 * {@link io.github.prefixrouter.testing.InMemoryNetwork} reads the clock it is given only to
 * bound its warnings of another node at an address, a reading that throws counting as the
 * latest good one.
 */
@FunctionalInterface
public interface Clock {

  /**
   * Returns the current time; never decreases between two calls. The library measures
   * time only by differences of readings, so the origin may be anything, and a reading may pass
   * {@link Long#MAX_VALUE} and go on from {@link Long#MIN_VALUE}, as {@link System#nanoTime()}'s
   * may (readings less than 2^63 ns, about 292 years, apart). One value is read as such: a
   * node's default gossip generation (see
   * {@link io.github.prefixrouter.RouterConfig.Builder#gossipGeneration(long)}).
   *
   * @return the current time in nanoseconds, from an arbitrary origin
   */
  long nanoTime();

  /**
   * The production clock.
   *
   * @return a clock backed by {@link System#nanoTime()}
   */
  static Clock system() {
    return System::nanoTime;
  }
}
