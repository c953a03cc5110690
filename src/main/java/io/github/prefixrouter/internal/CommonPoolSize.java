package io.github.prefixrouter.internal;

/**
 * The size of the JVM's common fork-join pool, for the mains that send with the JDK's HTTP
 * client: {@code NodeMain}, and the {@code benchmarks} module's load generator and transport
 * benchmarks.
 *
 * <p>The JDK's HTTP client completes every {@code sendAsync} on {@code CompletableFuture}'s
 * default executor, which up to JDK 24 is the common pool only if the pool has 2 threads or
 * more, else a new thread for every task (from JDK 25, the common pool whatever its size); and
 * the pool's default size, the processors less one, is 1 on a host of 1 or 2 processors (a
 * container limited to 2 CPUs counts 2). A client's own executor
 * ({@code HttpClient.Builder.executor}) does not change it: the future {@code sendAsync}
 * returns is still completed on the default executor. Every exchange such a process sent then
 * started and ended a thread of its own (docs/deployment.md, "JVM settings on 1 or 2
 * processors: the common pool"). A JMH benchmark that sends so puts {@link #PARALLELISM} on its
 * forks' command line instead: JMH's own code runs in a fork before the benchmark's.
 */
public final class CommonPoolSize {

  /** The system property that sizes the JVM's common fork-join pool. */
  public static final String PARALLELISM = "java.util.concurrent.ForkJoinPool.common.parallelism";

  private CommonPoolSize() {}

  /**
   * Gives the common pool 2 threads on a host of 1 or 2 processors, unless the command line
   * sizes it ({@link #PARALLELISM}; a value given there is left as it is). It takes effect only
   * before anything in the JVM has used the pool or {@code CompletableFuture}, which fix their
   * size and executor once: a main calls it first thing. Library code never calls it.
   */
  public static void twoAtLeast() {
    if (System.getProperty(PARALLELISM) == null
        && Runtime.getRuntime().availableProcessors() <= 2) {
      System.setProperty(PARALLELISM, "2");
    }
  }
}
