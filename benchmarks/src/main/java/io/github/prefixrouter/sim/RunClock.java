package io.github.prefixrouter.sim;

import com.google.common.math.LongMath;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.Iterator;
import java.util.function.Function;

/**
 * A run's clock and scheduler: its {@link SimulatedScheduler}, which also runs the trace's
 * arrivals, each scheduled only shortly before it is due, so that a run holds a bounded number of
 * arrivals in its queue instead of all of them.
 *
 * <p>The order of tasks is the same as if every arrival had been scheduled when the arrivals
 * started (after the cluster was built), before any other task of the run: tasks due at the same
 * instant run in the order they were scheduled, so an arrival must be in the queue before any
 * task due at its instant joins it. It is: scheduling a task through this scheduler first
 * schedules every arrival due no later than that task, and while arrivals remain one of them is
 * always queued, so the clock never passes an arrival not yet scheduled. An arrival is thus
 * queued before its time only when a task is scheduled that far ahead: the queue holds the
 * arrivals up to the farthest task scheduled, and at least the next one.
 *
 * <p>Every component of the run (engines, network, nodes, baselines) must schedule through this
 * scheduler, never on the {@link SimulatedScheduler} directly. Single-threaded, as the simulated
 * scheduler.
 */
final class RunClock implements Clock, Scheduler {

  private final SimulatedScheduler sim;
  private Iterator<Trace.Arrival> arrivals;
  private Function<Trace.Arrival, Runnable> onArrival;
  /** The first arrival not scheduled yet, or null. */
  private Trace.Arrival next;
  private int queuedArrivals;
  private int mostQueuedArrivals;

  RunClock(SimulatedScheduler sim) {
    this.sim = sim;
  }

  @Override
  public long nanoTime() {
    return sim.nanoTime();
  }

  @Override
  public Cancellable schedule(long delayNanos, Runnable task) {
    if (delayNanos >= 0 && next != null) {
      long due = LongMath.saturatedAdd(sim.nanoTime(), delayNanos);
      while (next != null && next.atNanos() <= due) {
        scheduleNextArrival();
      }
    }
    return sim.schedule(delayNanos, task);
  }

  /**
   * Starts the arrivals: each one, at its time, runs what {@code onArrival} makes of it. Call
   * once, after the run's cluster is built, with the arrivals in order of time.
   */
  void startArrivals(Iterator<Trace.Arrival> arrivals, Function<Trace.Arrival, Runnable> onArrival) {
    if (this.arrivals != null) {
      throw new IllegalStateException("arrivals already started");
    }
    this.arrivals = arrivals;
    this.onArrival = onArrival;
    next = arrivals.hasNext() ? arrivals.next() : null;
    if (next != null) {
      scheduleNextArrival();
    }
  }

  private void scheduleNextArrival() {
    Trace.Arrival a = next;
    next = arrivals.hasNext() ? arrivals.next() : null;
    if (a.atNanos() < sim.nanoTime()) {
      throw new IllegalStateException("arrival " + a.index() + " at " + a.atNanos()
          + " ns is before the clock's " + sim.nanoTime() + " ns");
    }
    Runnable r = onArrival.apply(a);
    queuedArrivals++;
    mostQueuedArrivals = Math.max(mostQueuedArrivals, queuedArrivals);
    sim.schedule(
        a.atNanos() - sim.nanoTime(),
        () -> {
          queuedArrivals--;
          if (queuedArrivals == 0 && next != null) {
            scheduleNextArrival();
          }
          r.run();
        });
  }

  /** The most arrivals that were in the queue at once. */
  int mostQueuedArrivals() {
    return mostQueuedArrivals;
  }

  /** Tasks waiting in the queue, neither run nor cancelled (arrivals included). */
  int pendingTasks() {
    return sim.pendingTasks();
  }

  /** Runs the next due task; false if none is left (see {@link SimulatedScheduler#runNext()}). */
  boolean runNext() {
    return sim.runNext();
  }
}
