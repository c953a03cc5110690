package io.github.prefixrouter.testing;

import com.google.common.math.LongMath;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.Scheduler;
import java.util.PriorityQueue;

/**
 * A {@link Clock} and {@link Scheduler} in simulated time, for deterministic tests and
 * simulations: nothing runs until the test calls {@link #runNext()}, {@link #advanceBy},
 * {@link #advanceTo} or {@link #runUntilIdle}, and tasks due at the same instant run in the order
 * they were scheduled. A whole cluster can share one instance, so a run replays exactly from its
 * seed.
 *
 * <p>Not thread-safe by design: drive it from one thread. Tasks it runs may schedule more tasks.
 * A null task is rejected with {@link NullPointerException}.
 *
 * <p>A cancelled task leaves the queue when it falls due, or earlier: once cancelled tasks are
 * more than half of a queue of over {@value #PURGE_MIN} tasks, they are all removed at once (the
 * order of the rest is unchanged). So a simulation whose guard timers are almost all cancelled
 * (a node's forwarding and engine timeouts) holds memory for the live timers only, not for every
 * timer set within the longest timeout.
 *
 * <p>Tasks that keep rescheduling themselves at one instant never let time pass, so a loop over
 * them never ends by itself. An interrupt of the driving thread (as a test framework's timeout
 * sends) ends it: while the thread is interrupted, {@link #runNext()}, and so every loop that
 * calls it ({@link #advanceTo}, {@link #advanceBy}, {@link #runUntilIdle} or a test's own),
 * throws {@link IllegalStateException} instead of running a task, leaving the interrupt status
 * set. With no task to run, they return as usual.
 *
 * <p>A blocking wait on the driving thread for something that only its tasks bring about never
 * ends, and nothing reports it. The common case: {@code PrefixRouterNode.close()} (or a
 * {@code join()} of its {@code stop()}) while a request whose answer needs simulated time is
 * in flight. Call {@code stop()}, run tasks until its future completes, then close (see
 * {@link io.github.prefixrouter.PrefixRouterNode#close()}).
 */
public final class SimulatedScheduler implements Clock, Scheduler {

  /** Queues at most this long are never purged of cancelled tasks. */
  static final int PURGE_MIN = 1024;

  private final PriorityQueue<Task> queue = new PriorityQueue<>();
  /** Cancelled tasks still in {@link #queue}. */
  private int cancelledQueued;
  private long now;
  private long sequence;
  private long executed;

  /** Starts at time 0. */
  public SimulatedScheduler() {
    this(0L);
  }

  /**
   * Starts at {@code startNanos}.
   *
   * @param startNanos the clock's first reading, in nanoseconds
   */
  public SimulatedScheduler(long startNanos) {
    this.now = startNanos;
  }

  @Override
  public long nanoTime() {
    return now;
  }

  @Override
  public Cancellable schedule(long delayNanos, Runnable task) {
    if (delayNanos < 0) {
      throw new IllegalArgumentException("delayNanos must be >= 0, was " + delayNanos);
    }
    if (task == null) {
      throw new NullPointerException("task");
    }
    Task t = new Task(this, after(delayNanos), sequence++, task);
    queue.add(t);
    return t;
  }

  /**
   * Runs the next due task, advancing time to it.
   *
   * @return true if a task ran, false if none is pending
   * @throws IllegalStateException instead of running a task while the running thread is
   *     interrupted (the interrupt status is kept)
   */
  public boolean runNext() {
    Task t = peekLive();
    if (t == null) {
      return false;
    }
    if (Thread.currentThread().isInterrupted()) {
      throw new IllegalStateException("interrupted at simulated time " + now + " ns, after "
          + executed + " tasks, with " + pendingTasks() + " pending; no more tasks run");
    }
    queue.poll();
    now = Math.max(now, t.due);
    t.done = true;
    executed++;
    t.task.run();
    return true;
  }

  /**
   * Runs every task due up to {@code timeNanos}, then sets the clock to it; if a task it ran
   * advanced the clock beyond (by calling this method or {@link #advanceBy}), the clock stays
   * there, as it never goes back.
   *
   * @param timeNanos the time to reach, in nanoseconds
   * @throws IllegalArgumentException if {@code timeNanos} is before the current time
   * @throws IllegalStateException instead of running a task while the running thread is
   *     interrupted (see {@link #runNext()})
   */
  public void advanceTo(long timeNanos) {
    if (timeNanos < now) {
      throw new IllegalArgumentException("cannot go back in time: " + timeNanos + " < " + now);
    }
    while (true) {
      Task head = peekLive();
      if (head == null || head.due > timeNanos) {
        break;
      }
      runNext();
    }
    // a task may have advanced the clock past timeNanos: readings never decrease
    now = Math.max(now, timeNanos);
  }

  /**
   * Runs every task due within the next {@code nanos} nanoseconds, then advances the clock by
   * {@code nanos}; past {@code Long.MAX_VALUE} the clock stops there, as {@link #schedule}'s due
   * times do.
   *
   * @param nanos how far to advance, {@code >= 0}
   * @throws IllegalArgumentException if {@code nanos} is negative
   * @throws IllegalStateException instead of running a task while the running thread is
   *     interrupted (see {@link #runNext()})
   */
  public void advanceBy(long nanos) {
    if (nanos < 0) {
      throw new IllegalArgumentException("nanos must be >= 0, was " + nanos);
    }
    advanceTo(after(nanos));
  }

  /** The time {@code nanos} (at least 0) from now, saturated at {@code Long.MAX_VALUE}. */
  private long after(long nanos) {
    return LongMath.saturatedAdd(now, nanos);
  }

  /**
   * Runs tasks until none is pending or {@code maxTasks} ran, advancing time to each.
   *
   * @param maxTasks the most tasks to run (a bound for tasks that keep rescheduling themselves)
   * @return the number of tasks run
   * @throws IllegalStateException instead of running a task while the running thread is
   *     interrupted (see {@link #runNext()})
   */
  public long runUntilIdle(long maxTasks) {
    long n = 0;
    while (n < maxTasks && runNext()) {
      n++;
    }
    return n;
  }

  /**
   * Number of live tasks waiting.
   *
   * @return the number of scheduled tasks neither run nor cancelled
   */
  public int pendingTasks() {
    return queue.size() - cancelledQueued;
  }

  /** Tasks held in the queue, cancelled ones included (for tests of the purge). */
  int queuedTasks() {
    return queue.size();
  }

  /**
   * Total number of tasks run so far.
   *
   * @return the number of tasks run since construction
   */
  public long executedTasks() {
    return executed;
  }

  private Task peekLive() {
    Task t;
    while ((t = queue.peek()) != null && t.cancelled) {
      queue.poll();
      cancelledQueued--;
    }
    return t;
  }

  private void cancelled() {
    cancelledQueued++;
    int size = queue.size();
    if (size > PURGE_MIN && cancelledQueued > size / 2) {
      queue.removeIf(t -> t.cancelled);
      cancelledQueued = 0;
    }
  }

  private static final class Task implements Comparable<Task>, Cancellable {
    final SimulatedScheduler owner;
    final long due;
    final long seq;
    final Runnable task;
    boolean cancelled;
    boolean done;

    Task(SimulatedScheduler owner, long due, long seq, Runnable task) {
      this.owner = owner;
      this.due = due;
      this.seq = seq;
      this.task = task;
    }

    @Override
    public boolean cancel() {
      if (done || cancelled) {
        return false;
      }
      cancelled = true;
      owner.cancelled();
      return true;
    }

    @Override
    public int compareTo(Task o) {
      int c = Long.compare(due, o.due);
      return c != 0 ? c : Long.compare(seq, o.seq);
    }
  }
}
