package io.github.prefixrouter.internal.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class IoDeadlineTest {

  private final ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1);
  private final AtomicInteger expired = new AtomicInteger();
  private final IoDeadline deadline = new IoDeadline(timer, Duration.ofMillis(50), expired::incrementAndGet);

  @AfterEach
  void stop() {
    timer.shutdownNow();
  }

  @Test
  void aTaskStillInItsPhaseIsInterruptedAndCountedOnce() {
    AtomicBoolean interrupted = new AtomicBoolean();
    deadline.run(() -> {
      try {
        Thread.sleep(10_000);
      } catch (InterruptedException e) {
        interrupted.set(true);
      }
      assertFalse(deadline.endPhase(), "the phase had expired");
    });
    assertTrue(interrupted.get());
    assertEquals(1, expired.get());
    assertFalse(Thread.currentThread().isInterrupted(), "the interrupt does not outlive the task");
  }

  @Test
  void afterItsPhaseEndsATaskIsNeverInterrupted() throws Exception {
    AtomicBoolean interrupted = new AtomicBoolean();
    deadline.run(() -> {
      assertTrue(deadline.endPhase());
      try {
        Thread.sleep(300);
      } catch (InterruptedException e) {
        interrupted.set(true);
      }
    });
    assertFalse(interrupted.get());
    assertEquals(0, expired.get());
    // a task whose phase expired without blocking leaves no interrupt behind either
    deadline.run(() -> {
      long end = System.nanoTime() + 10_000_000_000L;
      while (!Thread.currentThread().isInterrupted() && System.nanoTime() < end) {
        Thread.onSpinWait();
      }
    });
    assertEquals(1, expired.get());
    assertFalse(Thread.currentThread().isInterrupted());
  }
}
