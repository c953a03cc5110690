package io.github.prefixrouter.contract;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/** The real-time default of the contract tests' {@code awaitCondition}. */
final class RealTimeWait {

  private RealTimeWait() {}

  /**
   * Polls {@code condition} every 2 ms until it holds or {@code max} elapses; returns its final
   * value.
   */
  static boolean await(BooleanSupplier condition, Duration max) {
    long deadline = System.nanoTime() + max.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        return false;
      }
      try {
        Thread.sleep(2);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return condition.getAsBoolean();
      }
    }
    return true;
  }
}
