package io.github.prefixrouter.internal.wire;

import java.time.Duration;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * Runs the blocking I/O tasks of a JDK {@code HttpServer} (reading a request line, headers and
 * body; writing an answer) under a deadline.
 *
 * <p>The JDK server reads requests and writes answers with blocking socket reads and writes on
 * the threads of its executor. A connection that sends part of a request and stalls, or does not
 * read its answer, holds such a thread for as long as it likes, and as many stalled connections
 * as there are threads stop the server. {@link #run} starts a deadline with each task; past it,
 * the task's thread is interrupted, which closes the connection (socket channels are
 * interruptible) and ends the task. A task that has finished its I/O calls {@link #endPhase}
 * so that the rest of its work (handing a request on) is not interrupted.
 *
 * <p>An interrupt sent by the deadline never reaches later work of the thread: it is sent under
 * the same lock that ends the phase, and cleared when the phase ends.
 */
public final class IoDeadline {

  private final ScheduledExecutorService timer;
  private final long timeoutNanos;
  private final Runnable onExpired;
  private final ThreadLocal<Watch> current = new ThreadLocal<>();

  /**
   * @param timer schedules the deadlines (a shut-down timer runs tasks without one)
   * @param timeout how long one task's I/O may take
   * @param onExpired called once for every task whose deadline passed (counters)
   */
  public IoDeadline(ScheduledExecutorService timer, Duration timeout, Runnable onExpired) {
    this.timer = timer;
    this.timeoutNanos = timeout.toNanos();
    this.onExpired = onExpired;
  }

  /** An executor that runs every task on {@code threads} under a deadline. */
  public Executor wrap(Executor threads) {
    return task -> threads.execute(() -> run(task));
  }

  /** Runs {@code task} on the calling thread under a deadline. */
  public void run(Runnable task) {
    Watch w = new Watch(Thread.currentThread());
    ScheduledFuture<?> expiry;
    try {
      expiry = timer.schedule(w::expire, timeoutNanos, TimeUnit.NANOSECONDS);
    } catch (RuntimeException closing) {
      expiry = null;
    }
    current.set(w);
    try {
      task.run();
    } finally {
      current.remove();
      if (w.end()) {
        onExpired.run();
      }
      if (expiry != null) {
        expiry.cancel(false);
      }
    }
  }

  /**
   * Ends the deadline of the task running on this thread, if any: the rest of the task runs
   * without one.
   *
   * @return false if the deadline had already passed (the connection is being closed)
   */
  public boolean endPhase() {
    Watch w = current.get();
    if (w == null) {
      return true;
    }
    current.remove();
    if (w.end()) {
      onExpired.run();
      return false;
    }
    return true;
  }

  /**
   * Whether the deadline of the task running on this thread has passed (its connection is being
   * closed); false for a thread without one.
   */
  public boolean passed() {
    Watch w = current.get();
    return w != null && w.expired();
  }

  private static final class Watch {
    private static final int RUNNING = 0;
    private static final int ENDED = 1;
    private static final int EXPIRED = 2;
    private final Thread thread;
    private int state = RUNNING;

    Watch(Thread thread) {
      this.thread = thread;
    }

    /** Interrupts the thread if its phase is still running; never after {@link #end}. */
    synchronized void expire() {
      if (state == RUNNING) {
        state = EXPIRED;
        thread.interrupt();
      }
    }

    synchronized boolean expired() {
      return state == EXPIRED;
    }

    /**
     * Called on the watched thread: ends the phase; true (once) if the deadline had passed. The
     * interrupt {@link #expire} sent is cleared here.
     */
    synchronized boolean end() {
      int s = state;
      state = ENDED;
      if (s == EXPIRED) {
        Thread.interrupted();
        return true;
      }
      return false;
    }
  }
}
