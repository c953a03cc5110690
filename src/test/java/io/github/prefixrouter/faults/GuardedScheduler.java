package io.github.prefixrouter.faults;

import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;

/**
 * A {@link SimulatedScheduler} seen through a wrapper that catches anything a scheduled task
 * throws. Every component of a simulated cluster (nodes, network, engines) schedules through
 * it, so an exception escaping library code on a timer or a delivery is recorded (and fails the
 * run) instead of unwinding the simulation loop or vanishing.
 */
final class GuardedScheduler implements Clock, Scheduler {

  private final SimulatedScheduler sim;
  private final List<String> escaped = new ArrayList<>();

  GuardedScheduler(SimulatedScheduler sim) {
    this.sim = sim;
  }

  @Override
  public long nanoTime() {
    return sim.nanoTime();
  }

  @Override
  public Cancellable schedule(long delayNanos, Runnable task) {
    return sim.schedule(delayNanos, () -> {
      try {
        task.run();
      } catch (Throwable t) {
        recordEscape("scheduled task", t);
      }
    });
  }

  /** Records a throwable that escaped library code. */
  void recordEscape(String where, Throwable t) {
    StringWriter w = new StringWriter();
    t.printStackTrace(new PrintWriter(w));
    escaped.add("at t=" + sim.nanoTime() / 1_000_000 + " ms, " + where + ": " + w);
  }

  /** Throwables that escaped, with where and when. */
  List<String> escaped() {
    return escaped;
  }

  /** Runs every task due up to {@code timeNanos}. */
  void advanceTo(long timeNanos) {
    sim.advanceTo(timeNanos);
  }

  /**
   * Runs until {@code done} holds or {@code deadlineNanos} is reached, checking every
   * {@code sliceNanos} of simulated time.
   */
  boolean runUntil(BooleanSupplier done, long deadlineNanos, long sliceNanos) {
    while (!done.getAsBoolean()) {
      if (sim.nanoTime() >= deadlineNanos) {
        return false;
      }
      sim.advanceTo(Math.min(deadlineNanos, sim.nanoTime() + sliceNanos));
    }
    return true;
  }

  SimulatedScheduler sim() {
    return sim;
  }
}
