package io.github.prefixrouter.testing;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/** Test support: runs a {@link SimulatedScheduler} until a condition holds or time runs out. */
final class SimulatedTime {

  private SimulatedTime() {}

  static boolean await(SimulatedScheduler sim, BooleanSupplier condition, Duration max) {
    long deadline = sim.nanoTime() + max.toNanos();
    while (!condition.getAsBoolean()) {
      if (sim.nanoTime() >= deadline) {
        return false;
      }
      // run one task if it is due before the deadline, else jump to the deadline
      long before = sim.executedTasks();
      sim.advanceTo(Math.min(deadline, nextStep(sim, deadline)));
      if (sim.executedTasks() == before && sim.nanoTime() >= deadline) {
        return condition.getAsBoolean();
      }
    }
    return true;
  }

  private static long nextStep(SimulatedScheduler sim, long deadline) {
    // advance in small slices so conditions are checked often
    return Math.min(deadline, sim.nanoTime() + 1_000_000L);
  }
}
