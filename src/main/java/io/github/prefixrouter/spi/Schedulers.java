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
   * A task's {@link Scheduler.Cancellable#cancel()} returns true only if the task had not
   * started, and a task so cancelled never runs, even on an executor that runs it anyway.
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
      OnceTask once = new OnceTask(task);
      ScheduledFuture<?> f = executor.schedule(once, delayNanos, TimeUnit.NANOSECONDS);
      return () -> {
        if (!once.cancel()) {
          return false; // it started (and may still run) or was cancelled before
        }
        f.cancel(false); // off the executor's queue, where it would only be skipped
        return true;
      };
    };
  }

  /**
   * A task that runs at most once, and not at all once cancelled before it started: the
   * future's own {@code cancel(false)} also succeeds on a task that is running, which {@link
   * Scheduler.Cancellable#cancel()} promises to report as false.
   */
  private static final class OnceTask implements Runnable {
    private static final int PENDING = 0;
    private static final int STARTED = 1;
    private static final int CANCELLED = 2;
    private final AtomicInteger state = new AtomicInteger(PENDING);
    private final Runnable task;

    OnceTask(Runnable task) {
      this.task = task;
    }

    @Override
    public void run() {
      if (state.compareAndSet(PENDING, STARTED)) {
        task.run();
      }
    }

    boolean cancel() {
      return state.compareAndSet(PENDING, CANCELLED);
    }
  }

  /**
   * Creates a scheduler with one daemon thread named {@code name-N}. This is the only thread of
   * the node's core, and only when the host calls it (or leaves a node's builder without a
   * scheduler); the adapters a host chooses start threads of their own, each documented there
   * ({@code HttpTransport}'s server, readers and writers, {@code ReferenceEngine}'s workers,
   * {@code OpenAiCompatibleEngine}'s HTTP client, {@code VllmKvEventSubscriber}'s reader). The
   * returned scheduler is {@link AutoCloseable} and stops its thread on
   * {@link ClosableScheduler#close()}.
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
