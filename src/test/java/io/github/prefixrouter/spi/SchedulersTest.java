package io.github.prefixrouter.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.ArgumentMatchers.anyLong;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * {@link Schedulers#of}: a task's cancel reports true only if the task had not started, and a
 * task so cancelled never runs ({@link Scheduler.Cancellable#cancel()}'s contract).
 */
class SchedulersTest {

  /**
   * Cancelling a task that is running reports false: it was not prevented from running. The
   * executor's own {@code cancel(false)} succeeds on a running task, and was returned as it was.
   */
  @Test
  void cancellingARunningTaskReportsFalse() throws Exception {
    try (Schedulers.ClosableScheduler s = Schedulers.newSingleThread("schedulers-test")) {
      CountDownLatch release = new CountDownLatch(1);
      Scheduler.Cancellable c = holdTheThread(s, release);
      try {
        assertFalse(c.cancel(), "a running task was reported cancelled");
      } finally {
        release.countDown();
      }
    }
  }

  /**
   * Schedules a task that holds the scheduler's thread until {@code release} opens, and waits
   * until it has started.
   */
  private static Scheduler.Cancellable holdTheThread(Scheduler s, CountDownLatch release)
      throws InterruptedException {
    CountDownLatch running = new CountDownLatch(1);
    Scheduler.Cancellable c = s.schedule(0, () -> {
      running.countDown();
      try {
        release.await(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    assertTrue(running.await(30, TimeUnit.SECONDS), "the holding task never started");
    return c;
  }

  @Test
  void aTaskCancelledBeforeItsTimeNeverRunsAndACancelIsReportedOnce() throws Exception {
    try (Schedulers.ClosableScheduler s = Schedulers.newSingleThread("schedulers-test")) {
      // the one thread is held while the task is scheduled and cancelled, so it cannot have
      // started however late this thread gets to the cancel (a loaded machine once took longer
      // than the task's 50 ms between the two)
      CountDownLatch release = new CountDownLatch(1);
      holdTheThread(s, release);
      AtomicInteger runs = new AtomicInteger();
      Scheduler.Cancellable c = s.schedule(TimeUnit.MILLISECONDS.toNanos(50), runs::incrementAndGet);
      try {
        assertTrue(c.cancel(), "a task not yet started was not cancelled");
        assertFalse(c.cancel(), "a second cancel reported true");
      } finally {
        release.countDown();
      }
      CountDownLatch later = new CountDownLatch(1);
      s.schedule(TimeUnit.MILLISECONDS.toNanos(100), later::countDown);
      assertTrue(later.await(30, TimeUnit.SECONDS));
      assertEquals(0, runs.get(), "a cancelled task ran");
      CountDownLatch ran = new CountDownLatch(1);
      Scheduler.Cancellable done = s.schedule(0, ran::countDown);
      assertTrue(ran.await(30, TimeUnit.SECONDS));
      assertFalse(done.cancel(), "a task that ran was reported cancelled");
    }
  }

  /**
   * A host's executor may run a task its future could not take back (it ignores cancel, or had
   * already taken the task off its queue): a task whose cancel reported true still does not run.
   */
  @Test
  void aCancelledTaskDoesNotRunOnAnExecutorThatRunsItAnyway() {
    ScheduledExecutorService executor = mock(ScheduledExecutorService.class);
    ScheduledFuture<?> future = mock(ScheduledFuture.class);
    when(future.cancel(false)).thenReturn(false); // too late for the executor
    AtomicReference<Runnable> queued = new AtomicReference<>();
    when(executor.schedule(any(Runnable.class), anyLong(), any(TimeUnit.class)))
        .thenAnswer(i -> {
          queued.set(i.getArgument(0));
          return future;
        });
    AtomicInteger runs = new AtomicInteger();
    Scheduler.Cancellable c = Schedulers.of(executor).schedule(10, runs::incrementAndGet);
    assertTrue(c.cancel(), "the task had not started");
    queued.get().run(); // the executor runs it all the same
    assertEquals(0, runs.get(), "a task reported cancelled ran");
    assertFalse(c.cancel());
  }

  @Test
  void aNegativeDelayIsRefused() {
    Scheduler s = Schedulers.of(mock(ScheduledExecutorService.class));
    assertThrows(IllegalArgumentException.class, () -> s.schedule(-1, () -> { }));
  }
}
