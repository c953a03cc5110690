package io.github.prefixrouter.testing;

import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/** Waiting, in tests that run real threads, for a condition another thread makes true. */
public final class Await {

  /** How long {@link #until} waits at most. */
  public static final long TIMEOUT_SECONDS = 20;

  private Await() {}

  /**
   * Polls {@code condition} every 5 ms until it holds; fails the test if it does not within
   * {@value #TIMEOUT_SECONDS} s.
   *
   * @param condition what to wait for
   * @param what the condition in words, for the failure's message
   * @throws AssertionError if the condition does not hold in time
   * @throws InterruptedException if the waiting thread is interrupted
   */
  public static void until(BooleanSupplier condition, String what) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_SECONDS);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting until " + what);
      }
      Thread.sleep(5);
    }
  }
}
