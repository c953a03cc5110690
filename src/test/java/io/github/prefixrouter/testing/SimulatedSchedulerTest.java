package io.github.prefixrouter.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.Scheduler;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

class SimulatedSchedulerTest {

  @Test
  void runsTasksInTimeThenSchedulingOrder() {
    SimulatedScheduler s = new SimulatedScheduler();
    List<String> log = new ArrayList<>();
    s.schedule(20, () -> log.add("b@" + s.nanoTime()));
    s.schedule(10, () -> log.add("a@" + s.nanoTime()));
    s.schedule(20, () -> log.add("c@" + s.nanoTime()));
    s.advanceTo(15);
    assertEquals(List.of("a@10"), log);
    assertEquals(15, s.nanoTime());
    s.runUntilIdle(100);
    assertEquals(List.of("a@10", "b@20", "c@20"), log);
  }

  @Test
  void cancelledTasksNeverRunAndTasksMayScheduleTasks() {
    SimulatedScheduler s = new SimulatedScheduler();
    List<Long> log = new ArrayList<>();
    Scheduler.Cancellable c = s.schedule(5, () -> log.add(-1L));
    s.schedule(1, () -> s.schedule(3, () -> log.add(s.nanoTime())));
    assertTrue(c.cancel());
    assertFalse(c.cancel());
    assertEquals(1, s.pendingTasks());
    s.runUntilIdle(10);
    assertEquals(List.of(4L), log);
    assertEquals(2, s.executedTasks());
  }

  @Test
  void cancelledTimersDoNotAccumulateInTheQueue() {
    SimulatedScheduler s = new SimulatedScheduler();
    List<Long> log = new ArrayList<>();
    long hour = 3_600_000_000_000L;
    for (int i = 0; i < 100_000; i++) {
      Scheduler.Cancellable guard = s.schedule(hour, () -> log.add(-1L));
      long at = i;
      s.schedule(i, () -> log.add(at));
      assertTrue(guard.cancel());
    }
    assertEquals(100_000, s.pendingTasks());
    assertTrue(s.queuedTasks() <= 2 * 100_000, "queued " + s.queuedTasks());
    s.runUntilIdle(Long.MAX_VALUE);
    assertEquals(100_000, log.size());
    assertEquals(99_999L, log.get(log.size() - 1));
    for (int i = 0; i < 100_000; i++) {
      s.schedule(hour, () -> log.add(-1L)).cancel();
    }
    assertEquals(0, s.pendingTasks());
    assertTrue(s.queuedTasks() <= SimulatedScheduler.PURGE_MIN + 1, "queued " + s.queuedTasks());
  }

  @Test
  void runUntilIdleRunsAtMostMaxTasksAndSaysHowManyRan() {
    SimulatedScheduler s = new SimulatedScheduler();
    List<Long> log = new ArrayList<>();
    // a task that keeps rescheduling itself, every 10 ns: never idle (failing, not looping on,
    // past a hundred runs)
    Runnable[] tick = new Runnable[1];
    tick[0] = () -> {
      log.add(s.nanoTime());
      assertTrue(log.size() <= 100, "ran past every bound given");
      s.schedule(10, tick[0]);
    };
    s.schedule(10, tick[0]);
    assertEquals(0, s.runUntilIdle(0), "tasks run with a bound of 0");
    assertEquals(List.of(), log);
    assertEquals(5, s.runUntilIdle(5), "tasks run with a bound of 5");
    assertEquals(List.of(10L, 20L, 30L, 40L, 50L), log, "the tasks run, at their due times");
    assertEquals(50, s.nanoTime(), "the clock at the last task run");
    assertEquals(1, s.pendingTasks(), "the next tick, not run");
    assertEquals(3, s.runUntilIdle(3), "tasks run with a bound of 3");
    assertEquals(8, log.size());
    assertEquals(8, s.executedTasks());

    // fewer tasks than the bound: all of them, and their number; cancelled ones do not count
    SimulatedScheduler t = new SimulatedScheduler();
    t.schedule(30, () -> log.add(-30L));
    t.schedule(10, () -> log.add(-10L));
    Scheduler.Cancellable cancelled = t.schedule(20, () -> log.add(-20L));
    t.schedule(40, () -> log.add(-40L));
    assertTrue(cancelled.cancel());
    assertEquals(3, t.runUntilIdle(100), "tasks run of 3 live ones");
    assertEquals(List.of(-10L, -30L, -40L), log.subList(8, log.size()));
    assertEquals(40, t.nanoTime());
    assertEquals(0, t.runUntilIdle(100), "tasks run when idle");
    assertFalse(t.runNext(), "a task ran when none was pending");
  }

  @Test
  void runNextRunsOneLiveTaskAndSaysWhetherOneRan() {
    SimulatedScheduler s = new SimulatedScheduler();
    assertFalse(s.runNext(), "a task ran on an empty queue");
    List<Long> log = new ArrayList<>();
    s.schedule(5, () -> log.add(5L)).cancel();
    assertFalse(s.runNext(), "a task ran when the only one was cancelled");
    s.schedule(7, () -> log.add(7L));
    s.schedule(9, () -> log.add(9L));
    assertTrue(s.runNext());
    assertEquals(List.of(7L), log, "one task, the first due");
    assertEquals(7, s.nanoTime());
    assertTrue(s.runNext());
    assertFalse(s.runNext());
    assertEquals(List.of(7L, 9L), log);
  }

  @Test
  void rejectsNegativeDelayAndTimeTravel() {
    SimulatedScheduler s = new SimulatedScheduler(100);
    assertThrows(IllegalArgumentException.class, () -> s.schedule(-1, () -> {}));
    assertThrows(IllegalArgumentException.class, () -> s.advanceTo(99));
  }

  @Test
  void aTaskThatAdvancesTheClockFurtherNeverSendsItBack() {
    // advanceTo set the clock to its target when its tasks were run: a task that had advanced
    // it beyond (a fake that "takes" simulated time) sent it back, and its readings decreased
    SimulatedScheduler s = new SimulatedScheduler();
    List<Long> readings = new ArrayList<>();
    s.schedule(5, () -> {
      readings.add(s.nanoTime());
      s.advanceBy(100);
      readings.add(s.nanoTime());
    });
    s.schedule(50, () -> readings.add(s.nanoTime()));
    s.advanceTo(10);
    readings.add(s.nanoTime());
    assertEquals(List.of(5L, 50L, 105L, 105L), readings,
        "the clock's readings, the last one after advanceTo(10) returned");
    s.schedule(1, () -> readings.add(s.nanoTime()));
    s.runUntilIdle(10);
    assertEquals(106L, readings.get(readings.size() - 1), "a task scheduled 1 ns after 105");
  }

  @Test
  void advanceBySaturatesAsScheduleDoes() {
    SimulatedScheduler sim = new SimulatedScheduler(Long.MAX_VALUE - 10);
    int[] ran = {0};
    sim.schedule(100, () -> ran[0]++); // due past the end of time: at Long.MAX_VALUE
    sim.advanceBy(100);
    assertEquals(1, ran[0]);
    assertEquals(Long.MAX_VALUE, sim.nanoTime());
  }

  @Test
  void anInterruptedThreadStopsEveryRunLoopAndKeepsItsInterrupt() {
    // a task that reschedules itself at the same instant never lets time pass: a loop over it
    // ends only when the thread is interrupted (as a test method's timeout does), and then it
    // must end, not hold the whole test run
    List<Consumer<SimulatedScheduler>> loops = List.of(
        s -> {
          while (s.runNext()) {
            // until idle
          }
        },
        s -> s.advanceTo(5),
        s -> s.advanceBy(5),
        s -> s.runUntilIdle(Long.MAX_VALUE));
    for (Consumer<SimulatedScheduler> loop : loops) {
      SimulatedScheduler s = new SimulatedScheduler();
      long[] runs = {0};
      Runnable[] spin = new Runnable[1];
      spin[0] = () -> {
        if (++runs[0] == 1_000) {
          Thread.currentThread().interrupt();
        }
        assertTrue(runs[0] <= 1_000, "a task ran after the thread was interrupted");
        s.schedule(0, spin[0]);
      };
      s.schedule(0, spin[0]);
      IllegalStateException e;
      boolean interrupted;
      try {
        e = assertThrows(IllegalStateException.class, () -> loop.accept(s));
      } finally {
        interrupted = Thread.interrupted(); // never left set for the next test
      }
      assertTrue(interrupted, "the interrupt status was cleared");
      assertTrue(e.getMessage().contains("interrupted"), e.getMessage());
      assertEquals(1_000, runs[0], "tasks run");
      assertEquals(0, s.nanoTime(), "the clock left the instant the tasks were stuck at");
      assertEquals(1, s.pendingTasks(), "the task the last run scheduled");
    }

    // interrupted before a run: no task runs; with none due, time passes as usual; once the
    // interrupt is cleared, the task runs
    SimulatedScheduler s = new SimulatedScheduler();
    List<Long> log = new ArrayList<>();
    s.schedule(10, () -> log.add(s.nanoTime()));
    Thread.currentThread().interrupt();
    try {
      s.advanceTo(5);
      assertEquals(5, s.nanoTime());
      assertThrows(IllegalStateException.class, s::runNext);
      assertThrows(IllegalStateException.class, () -> s.advanceBy(5));
      assertTrue(Thread.currentThread().isInterrupted(), "the interrupt status was cleared");
    } finally {
      Thread.interrupted();
    }
    assertEquals(List.of(), log);
    assertEquals(1, s.runUntilIdle(10));
    assertEquals(List.of(10L), log);
    Thread.currentThread().interrupt();
    try {
      assertFalse(s.runNext(), "a task ran on an empty queue");
    } finally {
      Thread.interrupted();
    }
  }
}
