package io.github.prefixrouter.internal.wire;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

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
 * <p>A request beyond its address's cap waits up to {@code maxWait} for one of that address's
 * reads to finish before it is refused. A peer that sends a burst of requests at once (a node
 * may have 64 in flight to another, each on its own connection) has more bodies than the cap
 * being read at the same moment only briefly, for as long as the threads take to be scheduled;
 * refusing at once would turn that into failed requests whenever the machine is busy. Bodies
 * that stall hold their slots until their deadline, so the requests queued behind them are
 * refused after {@code maxWait}, which keeps the cap's point: each holds a thread for
 * {@code maxWait}, far less than the deadline a connection stalling before its headers holds
 * one for.
 *
 * <p>Idle threads end after 30 seconds. Thread-safe.
 */
public final class InboundReaders {

  private final ThreadPoolExecutor threads;
  private final int maxPerAddress;
  private final long maxWaitNanos;
  private final Runnable onRefused;
  private final ReentrantLock lock = new ReentrantLock();
  /** Signalled whenever a slot is given back. */
  private final Condition released = lock.newCondition();
  /** Unfinished reads per remote address; an address with none has no entry. Under lock. */
  private final Map<Object, Integer> unfinished = new HashMap<>();

  /**
   * @param maxThreads requests read at the same time at most (one thread each)
   * @param maxPerAddress requests from one address whose body is being read at most
   * @param maxWait how long a request beyond {@code maxPerAddress} waits for a slot before it is
   *     refused (zero: refused at once)
   * @param factory makes the (daemon) reader threads
   * @param onRefused called for every connection or request refused for lack of a slot
   */
  public InboundReaders(int maxThreads, int maxPerAddress, Duration maxWait, ThreadFactory factory,
      Runnable onRefused) {
    if (maxThreads < 1 || maxPerAddress < 1) {
      throw new IllegalArgumentException(
          "maxThreads and maxPerAddress must be positive, were " + maxThreads + ", " + maxPerAddress);
    }
    if (maxWait.isNegative()) {
      throw new IllegalArgumentException("maxWait must not be negative, was " + maxWait);
    }
    this.threads = new ThreadPoolExecutor(0, maxThreads, 30, TimeUnit.SECONDS, new SynchronousQueue<>(), factory);
    this.maxPerAddress = maxPerAddress;
    this.maxWaitNanos = maxWait.toNanos();
    this.onRefused = onRefused;
  }

  /** How long a request beyond its address's cap waits at most: 1 s, or the I/O timeout if shorter. */
  public static Duration waitFor(Duration ioTimeout) {
    Duration cap = Duration.ofSeconds(1);
    return ioTimeout.compareTo(cap) < 0 ? ioTimeout : cap;
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
   * Takes one of {@code remote}'s slots for reading a body, waiting up to {@code maxWait} if the
   * address has {@code maxPerAddress} unfinished already; false (and counted as refused) if none
   * came free in that time, or the thread was interrupted while waiting (its I/O deadline passed;
   * the interrupt stays set). Every true must be followed by one {@link #release}.
   *
   * @param remote the connection's remote address (null counts as one unknown address)
   * @return whether the body may be read
   */
  public boolean tryAcquire(InetSocketAddress remote) {
    Object k = key(remote);
    boolean taken = false;
    lock.lock();
    try {
      long left = maxWaitNanos;
      while (true) {
        int c = unfinished.getOrDefault(k, 0);
        if (c < maxPerAddress) {
          unfinished.put(k, c + 1);
          taken = true;
          break;
        }
        if (left <= 0) {
          break;
        }
        left = released.awaitNanos(left);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      lock.unlock();
    }
    if (!taken) {
      onRefused.run();
    }
    return taken;
  }

  /**
   * Gives back a slot taken by {@link #tryAcquire}.
   *
   * @param remote the same address
   */
  public void release(InetSocketAddress remote) {
    Object k = key(remote);
    lock.lock();
    try {
      Integer n = unfinished.get(k);
      if (n != null) {
        if (n <= 1) {
          unfinished.remove(k);
        } else {
          unfinished.put(k, n - 1);
        }
        released.signalAll();
      }
    } finally {
      lock.unlock();
    }
  }

  /**
   * Addresses with an unfinished read now (for tests: entries never outlive their reads).
   *
   * @return the number of addresses
   */
  public int addressesReading() {
    lock.lock();
    try {
      return unfinished.size();
    } finally {
      lock.unlock();
    }
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
