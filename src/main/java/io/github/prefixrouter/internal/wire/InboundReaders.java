package io.github.prefixrouter.internal.wire;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * The threads that read inbound HTTP requests for a JDK {@code HttpServer}, bounded in two ways
 * so that connections that stall cost only their own slots.
 *
 * <p>The JDK server reads a request (line, headers, then the body in the handler) with blocking
 * reads on a thread of its executor. With a fixed pool and a queue, a few connections that stall
 * (anyone's, before any authentication) hold every thread until their I/O deadline, and every
 * other request waits behind them. Here each connection that starts a request gets a thread of
 * its own at once, up to {@code maxThreads} reading at the same time; a connection beyond that
 * is closed at once by the server (its executor refuses the task), never queued behind the
 * others. Once a request's headers have arrived its sender's address is known:
 * {@link #tryAcquire} caps the requests from one address whose body is still being read, so one
 * address cannot take every thread with bodies it never finishes. A connection that stalls
 * before its headers are complete counts against {@code maxThreads} only, for at most the I/O
 * deadline that the tasks run under ({@link IoDeadline}).
 *
 * <p>Idle threads end after 30 seconds. Thread-safe.
 */
public final class InboundReaders {

  private final ThreadPoolExecutor threads;
  private final int maxPerAddress;
  private final Runnable onRefused;
  /** Unfinished reads per remote address; an address with none has no entry. */
  private final Map<Object, Integer> unfinished = new ConcurrentHashMap<>();

  /**
   * @param maxThreads requests read at the same time at most (one thread each)
   * @param maxPerAddress requests from one address whose body is being read at most
   * @param factory makes the (daemon) reader threads
   * @param onRefused called for every connection or request refused for lack of a slot
   */
  public InboundReaders(int maxThreads, int maxPerAddress, ThreadFactory factory, Runnable onRefused) {
    if (maxThreads < 1 || maxPerAddress < 1) {
      throw new IllegalArgumentException(
          "maxThreads and maxPerAddress must be positive, were " + maxThreads + ", " + maxPerAddress);
    }
    this.threads = new ThreadPoolExecutor(0, maxThreads, 30, TimeUnit.SECONDS, new SynchronousQueue<>(), factory);
    this.maxPerAddress = maxPerAddress;
    this.onRefused = onRefused;
  }

  /**
   * The executor to give the server: runs every task on a thread of its own under
   * {@code deadline}, and refuses (throws {@link RejectedExecutionException}, upon which the JDK
   * server closes the connection) when {@code maxThreads} are busy.
   *
   * @param deadline the I/O deadline every task runs under
   * @return the executor
   */
  public Executor executor(IoDeadline deadline) {
    return task -> {
      try {
        threads.execute(() -> deadline.run(task));
      } catch (RejectedExecutionException e) {
        onRefused.run();
        throw e;
      }
    };
  }

  /**
   * Takes one of {@code remote}'s slots for reading a body; false (and counted as refused) if the
   * address has {@code maxPerAddress} unfinished already. Every true must be followed by one
   * {@link #release}.
   *
   * @param remote the connection's remote address (null counts as one unknown address)
   * @return whether the body may be read
   */
  public boolean tryAcquire(InetSocketAddress remote) {
    boolean[] taken = new boolean[1];
    unfinished.compute(key(remote), (k, n) -> {
      int c = n == null ? 0 : n;
      if (c >= maxPerAddress) {
        return n;
      }
      taken[0] = true;
      return c + 1;
    });
    if (!taken[0]) {
      onRefused.run();
    }
    return taken[0];
  }

  /**
   * Gives back a slot taken by {@link #tryAcquire}.
   *
   * @param remote the same address
   */
  public void release(InetSocketAddress remote) {
    unfinished.computeIfPresent(key(remote), (k, n) -> n <= 1 ? null : n - 1);
  }

  /**
   * Addresses with an unfinished read now (for tests: entries never outlive their reads).
   *
   * @return the number of addresses
   */
  public int addressesReading() {
    return unfinished.size();
  }

  /** Interrupts the readers and lets no new ones start. */
  public void shutdownNow() {
    threads.shutdownNow();
  }

  private static final Object UNKNOWN = new Object();

  private static Object key(InetSocketAddress remote) {
    InetAddress a = remote == null ? null : remote.getAddress();
    return a == null ? UNKNOWN : a;
  }
}
