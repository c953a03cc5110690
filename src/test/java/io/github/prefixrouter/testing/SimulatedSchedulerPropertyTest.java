package io.github.prefixrouter.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.Scheduler;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;

class SimulatedSchedulerPropertyTest {
  @Property
  boolean advanceByMovesClockExactly(@ForAll @LongRange(min = 0, max = 1_000_000) long d) {
    SimulatedScheduler s = new SimulatedScheduler();
    s.advanceBy(d);
    return s.nanoTime() == d;
  }

  /** The naive model: every task ever scheduled, run in (due, scheduling order). */
  private static final class ModelTask {
    final long due;
    final int id;
    boolean cancelled;
    boolean ran;

    ModelTask(long due, int id) {
      this.due = due;
      this.id = id;
    }
  }

  /**
   * Random schedules, cancellations (mostly of long timers, as a node's guards are) and clock
   * moves run the same tasks in the same order as a naive model, and cancelled tasks never
   * pile up in the queue beyond what the purge allows.
   */
  @Property(tries = 20)
  void runsLikeTheNaiveModelAndPurgesCancelledTasks(@ForAll long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    SimulatedScheduler s = new SimulatedScheduler();
    List<ModelTask> model = new ArrayList<>();
    List<Scheduler.Cancellable> handles = new ArrayList<>();
    List<Integer> ran = new ArrayList<>();
    List<Integer> expected = new ArrayList<>();
    long now = 0;
    int ops = 3_000 + rnd.nextInt(3_000);
    for (int op = 0; op < ops; op++) {
      int kind = rnd.nextInt(100);
      if (kind < 55) {
        long delay = rnd.nextInt(10) == 0 ? rnd.nextLong(1_000) : 1_000_000_000 + rnd.nextLong(1_000);
        int id = model.size();
        model.add(new ModelTask(now + delay, id));
        handles.add(s.schedule(delay, () -> ran.add(id)));
      } else if (kind < 95 && !model.isEmpty()) {
        // mostly a recent timer (a guard cancelled when its answer comes), sometimes any
        int i = rnd.nextInt(4) != 0
            ? Math.max(0, model.size() - 1 - rnd.nextInt(50)) : rnd.nextInt(model.size());
        ModelTask t = model.get(i);
        boolean expectCancel = !t.cancelled && !t.ran;
        assertEquals(expectCancel, handles.get(i).cancel());
        t.cancelled = true;
        // right after a cancellation, cancelled tasks are at most half the queue (or it is short)
        assertTrue(!expectCancel || s.queuedTasks() <= Math.max(SimulatedScheduler.PURGE_MIN, 2 * s.pendingTasks()),
            () -> s.queuedTasks() + " queued for " + s.pendingTasks() + " live tasks");
      } else {
        long by = rnd.nextInt(200) == 0 ? rnd.nextLong(2_000_000_000) : rnd.nextLong(2_000);
        now += by;
        s.advanceBy(by);
        runModelUntil(model, now, expected);
      }
      assertEquals(expected, ran);
      long live = model.stream().filter(t -> !t.cancelled && !t.ran).count();
      assertEquals(live, s.pendingTasks());
      assertEquals(now, s.nanoTime());
    }
  }

  private static void runModelUntil(List<ModelTask> model, long until, List<Integer> out) {
    while (true) {
      ModelTask next = null;
      for (ModelTask t : model) {
        if (!t.cancelled && !t.ran && t.due <= until
            && (next == null || t.due < next.due || (t.due == next.due && t.id < next.id))) {
          next = t;
        }
      }
      if (next == null) {
        return;
      }
      next.ran = true;
      out.add(next.id);
    }
  }
}
