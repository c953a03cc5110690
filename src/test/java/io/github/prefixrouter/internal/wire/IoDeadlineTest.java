package io.github.prefixrouter.internal.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import static org.mockito.ArgumentMatchers.any;
import static org.mockito.ArgumentMatchers.anyLong;
import static org.mockito.Mockito.doReturn;
import static org.mockito.Mockito.mock;

import java.time.Duration;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.mockito.ArgumentCaptor;

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
    // the deadline fires (by hand) after the task ended its phase: no interrupt, not counted.
    // With a real 50 ms timer, a thread descheduled for 50 ms before its endPhase (a loaded
    // machine) found its phase expired, and the test failed without a defect
    ScheduledExecutorService manual = mock(ScheduledExecutorService.class);
    ArgumentCaptor<Runnable> fire = ArgumentCaptor.forClass(Runnable.class);
    doReturn(mock(ScheduledFuture.class)).when(manual)
        .schedule(fire.capture(), anyLong(), any(TimeUnit.class));
    IoDeadline byHand = new IoDeadline(manual, Duration.ofMillis(50), expired::incrementAndGet);
    byHand.run(() -> {
      assertTrue(byHand.endPhase());
      fire.getValue().run();
      assertFalse(Thread.currentThread().isInterrupted(), "interrupted after its phase ended");
    });
    assertFalse(Thread.interrupted());
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
