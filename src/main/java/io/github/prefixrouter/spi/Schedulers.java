package io.github.prefixrouter.spi;

import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/** Production {@link Scheduler} implementations. Every scheduler returned is thread-safe. */
public final class Schedulers {

  private Schedulers() {}

  /**
   * A scheduler backed by the given executor. The caller owns the executor and shuts it down.
   *
   * @param executor the executor that runs the tasks
   * @return a scheduler that schedules on {@code executor}
   * @throws NullPointerException if {@code executor} is null
   */
  public static Scheduler of(ScheduledExecutorService executor) {
    if (executor == null) {
      throw new NullPointerException("executor");
    }
    return (delayNanos, task) -> {
      if (delayNanos < 0) {
        throw new IllegalArgumentException("delayNanos must be >= 0, was " + delayNanos);
      }
      ScheduledFuture<?> f = executor.schedule(task, delayNanos, TimeUnit.NANOSECONDS);
      return () -> f.cancel(false);
    };
  }

  /**
   * Creates a scheduler with one daemon thread named {@code name-N}. This is the only place in
   * the library that creates a thread, and only when the host calls it; the returned scheduler
   * is {@link AutoCloseable} and stops its thread on {@link ClosableScheduler#close()}.
   *
   * @param name the thread name's prefix
   * @return a new scheduler with its own thread, which the caller closes
   * @throws NullPointerException if {@code name} is null
   */
  public static ClosableScheduler newSingleThread(String name) {
    if (name == null) {
      throw new NullPointerException("name");
    }
    AtomicInteger n = new AtomicInteger();
    ScheduledThreadPoolExecutor ex =
        new ScheduledThreadPoolExecutor(
            1,
            r -> {
              Thread t = new Thread(r, name + "-" + n.incrementAndGet());
              t.setDaemon(true);
              return t;
            });
    ex.setRemoveOnCancelPolicy(true);
    Scheduler delegate = of(ex);
    return new ClosableScheduler() {
      @Override
      public Cancellable schedule(long delayNanos, Runnable task) {
        return delegate.schedule(delayNanos, task);
      }

      @Override
      public void close() {
        ex.shutdownNow();
      }
    };
  }

  /** A scheduler that owns its threads and releases them on {@link #close()}. */
  public interface ClosableScheduler extends Scheduler, AutoCloseable {
    @Override
    void close();
  }
}
