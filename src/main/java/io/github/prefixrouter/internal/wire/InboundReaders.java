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
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;

/**
 * The threads that read inbound HTTP requests for a JDK {@code HttpServer}, bounded in two ways
 * so that connections that stall cost only their own slots.
 *
 * <p>The JDK server reads a request (line, headers, then the body in the handler) with blocking
 * reads on a thread of its executor. With a fixed pool and a queue, a few connections that stall
 * (anyone's, before any authentication) hold every thread until their I/O deadline, and every
 * other request waits behind them. Here each connection that starts a request gets a thread of
 * its own at once, up to {@code maxThreads} reading at the same time; a connection beyond that
 * is never queued behind the others: it is closed at once by the server (its executor refuses
 * the task), or, with {@link #executor(IoDeadline, int, IoDeadline, ThreadFactory)}, given to a
 * refuser thread to be answered with a refusal. A read counts from the task being taken until
 * it ends, counted here rather than by the pool, which counts a thread as busy until it is back
 * waiting for the next task. Once a request's headers have arrived its
 * sender's address is known:
 * {@link #tryAcquire} caps the requests from one address whose body is still being read, so one
 * address cannot take every thread with bodies it never finishes. A connection that stalls
 * before its headers are complete counts against {@code maxThreads} only, for at most the I/O
 * deadline that the tasks run under ({@link IoDeadline}).
 *
 * <p>A request beyond its address's cap waits for one of that address's reads to finish, and is
 * refused only once none of them has finished for {@code maxWait}. A peer that sends a burst of
 * requests at once (a node may have 64 in flight to another, each on its own connection) has
 * more bodies than the cap being read at the same moment whenever the machine is busy or the
 * bodies are large; refusing at once turned that into failed requests, and so did a fixed wait
 * once a deep burst queued behind reads of a megabyte each. While the address's reads keep
 * finishing, its queue moves and its requests wait their turn; bodies that stall hold their
 * slots until their deadline with no read finishing, so what queues behind them is refused after
 * {@code maxWait}. Each waiting request holds a reader thread, as one stalling before its headers
 * does (for the whole deadline): the cap bounds what one address's stalled bodies hold, not
 * what a stranger holds.
 *
 * <p>The pool starts a thread beyond {@code maxThreads} only when one whose task has ended is
 * still on its way back to it. Idle threads end after 30 seconds. Thread-safe.
 */
public final class InboundReaders {

  private final ThreadPoolExecutor threads;
  private final int maxThreads;
  /**
   * The connections' tasks taken and not yet ended: counted here, not by the pool, whose
   * threads still count as busy for a moment after their task has ended.
   */
  private final AtomicInteger reading = new AtomicInteger();
  private final int maxPerAddress;
  private final long maxWaitNanos;
  private final Runnable onRefused;
  private final ReentrantLock lock = new ReentrantLock();
  /** True on a refuser thread while it runs a task ({@link #refusing}). */
  private final ThreadLocal<Boolean> refusingTask = new ThreadLocal<>();
  /** The refuser threads of {@link #executor(IoDeadline, int, IoDeadline, ThreadFactory)}. */
  private volatile ThreadPoolExecutor refusers;
  /** Signalled whenever a slot is given back. */
  private final Condition released = lock.newCondition();
  /** Per remote address with an unfinished read, its reads; none: no entry. Under lock. */
  private final Map<Object, Reads> unfinished = new HashMap<>();

  /** One address's unfinished reads. */
  private static final class Reads {
    int count;
    /**
     * When one of the address's reads last finished ({@link System#nanoTime}), or the entry was
     * made (none was unfinished then).
     */
    long lastFinished;
  }

  /**
   * @param maxThreads requests read at the same time at most (one thread each)
   * @param maxPerAddress requests from one address whose body is being read at most
   * @param maxWait how long a request beyond {@code maxPerAddress} waits with none of its
   *     address's reads finishing before it is refused (zero: refused at once)
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
    // reading bounds the tasks, not the pool: a thread whose task has ended counts in the pool
    // until it is back waiting for the next, and a pool of maxThreads refused a connection
    // then, with fewer than maxThreads being read; the pool starts a thread beyond maxThreads
    // only when such a one has not reached the pool yet
    this.threads = new ThreadPoolExecutor(0, Integer.MAX_VALUE, 30, TimeUnit.SECONDS, new SynchronousQueue<>(), factory);
    this.maxThreads = maxThreads;
    this.maxPerAddress = maxPerAddress;
    this.maxWaitNanos = maxWait.toNanos();
    this.onRefused = onRefused;
  }

  /**
   * How long a request beyond its address's cap waits with none of the address's reads
   * finishing: 1 s, or the I/O timeout if shorter.
   */
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
        read(task, deadline);
      } catch (RejectedExecutionException e) {
        onRefused.run();
        throw e;
      }
    };
  }

  /**
   * Runs {@code task} under {@code deadline} on a reader thread of its own, counted in
   * {@link #reading} until it ends.
   *
   * @throws RejectedExecutionException if {@code maxThreads} tasks are running, or the
   *     readers are shut down
   */
  private void read(Runnable task, IoDeadline deadline) {
    for (int n = reading.get(); ; n = reading.get()) {
      if (n >= maxThreads) {
        throw new RejectedExecutionException(maxThreads + " requests being read");
      }
      if (reading.compareAndSet(n, n + 1)) {
        break;
      }
    }
    startCounted(task, deadline);
  }

  /**
   * Runs {@code task}, already counted in {@link #reading}, under {@code deadline} on a reader
   * thread, and counts it out when it ends.
   *
   * @throws RejectedExecutionException if the readers are shut down (counted out at once)
   */
  private void startCounted(Runnable task, IoDeadline deadline) {
    try {
      threads.execute(() -> {
        try {
          deadline.run(task);
        } finally {
          endRead();
        }
      });
    } catch (Throwable e) { // shut down, or no thread could be started: the task never runs
      endRead();
      throw e;
    }
  }

  /** Counts a task out of {@link #reading}. */
  private void endRead() {
    reading.decrementAndGet();
  }

  /**
   * As {@link #executor(IoDeadline)}, but a connection beyond {@code maxThreads} is given to one
   * of at most {@code refusers} more threads, under {@code refusalDeadline}, on which
   * {@link #refusing} is true: the handler answers it with a refusal without reading its body,
   * so that its sender learns that this server is busy rather than seeing its connection
   * closed. A connection beyond those too is closed at once, as by the other executor. Either
   * is counted as refused, once. The refusers are started on demand, end after 30 seconds idle,
   * and are stopped by {@link #shutdownNow}. Call it once.
   *
   * @param deadline the I/O deadline every task within {@code maxThreads} runs under
   * @param refusers the threads answering refusals at most, at least 1
   * @param refusalDeadline the I/O deadline of a refusal (its request line and headers, its
   *     answer): short, as a refuser is taken by anyone who connects while the readers are busy
   * @param factory makes the (daemon) refuser threads
   * @return the executor
   */
  public Executor executor(IoDeadline deadline, int refusers, IoDeadline refusalDeadline,
      ThreadFactory factory) {
    if (refusers < 1) {
      throw new IllegalArgumentException("refusers must be positive, was " + refusers);
    }
    ThreadPoolExecutor pool = new ThreadPoolExecutor(0, refusers, 30, TimeUnit.SECONDS,
        new SynchronousQueue<>(), factory);
    this.refusers = pool;
    if (threads.isShutdown()) {
      pool.shutdownNow();
    }
    return task -> {
      try {
        read(task, deadline);
      } catch (RejectedExecutionException e) {
        onRefused.run();
        // throws in turn when every refuser is busy too: the server closes the connection
        pool.execute(() -> {
          refusingTask.set(Boolean.TRUE);
          try {
            refusalDeadline.run(task);
          } finally {
            refusingTask.remove();
          }
        });
      }
    };
  }

  /**
   * Whether the calling thread runs a connection beyond {@code maxThreads}, given to a refuser
   * ({@link #executor(IoDeadline, int, IoDeadline, ThreadFactory)}): its request is to be
   * answered with a refusal at once, its body not read.
   *
   * @return true on a refuser thread running a task
   */
  public boolean refusing() {
    return refusingTask.get() != null;
  }

  /**
   * Takes one of {@code remote}'s slots for reading a body. If the address has
   * {@code maxPerAddress} unfinished already, waits for one to finish; false (and counted as
   * refused) once none of the address's reads has finished for {@code maxWait} (counted from
   * the later of this call and the last one to finish), or if the thread was interrupted while
   * waiting (its I/O deadline passed; the interrupt stays set). Every true must be followed by
   * one {@link #release}.
   *
   * @param remote the connection's remote address (null counts as one unknown address)
   * @return whether the body may be read
   */
  public boolean tryAcquire(InetSocketAddress remote) {
    Object k = key(remote);
    boolean taken;
    lock.lock();
    try {
      taken = awaitWhileReleasing(released, () -> {
        Reads r = unfinished.get(k);
        if (r == null) {
          // none unfinished: the first read, or the last ones have just finished
          r = new Reads();
          r.lastFinished = System.nanoTime();
          unfinished.put(k, r);
        }
        if (r.count < maxPerAddress) {
          r.count++;
          return true;
        }
        return false;
      }, () -> unfinished.get(k).lastFinished, maxWaitNanos);
    } finally {
      lock.unlock();
    }
    if (!taken) {
      onRefused.run();
    }
    return taken;
  }

  /**
   * The wait of {@link #tryAcquire}, for other limits that wait the same way: with the lock of
   * {@code released} held, calls {@code take} until it succeeds, waiting on {@code released}
   * between calls; gives up once nothing was released for {@code maxWaitNanos} (counted from
   * the later of this call and {@code lastRelease}), or if the thread is interrupted while
   * waiting (the interrupt stays set).
   *
   * @param released signalled whenever something is given back; its lock is held by the caller
   * @param take takes what is waited for if it can (called with the lock held)
   * @param lastRelease when something was last given back ({@link System#nanoTime}), read
   *     after a failed {@code take}
   * @param maxWaitNanos how long to wait with nothing given back
   * @return whether {@code take} succeeded
   */
  public static boolean awaitWhileReleasing(Condition released, BooleanSupplier take,
      LongSupplier lastRelease, long maxWaitNanos) {
    long start = System.nanoTime();
    try {
      while (!take.getAsBoolean()) {
        long last = lastRelease.getAsLong();
        long since = last - start > 0 ? last : start;
        long left = since + maxWaitNanos - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        released.awaitNanos(left);
      }
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
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
      Reads r = unfinished.get(k);
      if (r != null) {
        if (--r.count <= 0) {
          unfinished.remove(k);
        } else {
          r.lastFinished = System.nanoTime();
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

  /**
   * The reads of {@code remote}'s address unfinished now: slots taken by {@link #tryAcquire}
   * and not yet given back (for tests: to wait until stalled bodies hold their slots).
   *
   * @param remote any address of the host (its port is not looked at)
   * @return the number of unfinished reads
   */
  public int unfinishedReads(InetSocketAddress remote) {
    Object k = key(remote);
    lock.lock();
    try {
      Reads r = unfinished.get(k);
      return r == null ? 0 : r.count;
    } finally {
      lock.unlock();
    }
  }

  /**
   * The connections' tasks taken by the readers and not yet ended, refusers not counted (for
   * tests: to wait until stalled connections hold their threads).
   *
   * @return the number of tasks, at most {@code maxThreads}
   */
  public int readersInUse() {
    return reading.get();
  }

  /** Interrupts the readers (and refusers) and lets no new ones start. */
  public void shutdownNow() {
    threads.shutdownNow();
    ThreadPoolExecutor r = refusers;
    if (r != null) {
      r.shutdownNow();
    }
  }

  private static final Object UNKNOWN = new Object();

  private static Object key(InetSocketAddress remote) {
    InetAddress a = remote == null ? null : remote.getAddress();
    return a == null ? UNKNOWN : a;
  }
}
