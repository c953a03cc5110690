package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

class RunClockTest {

  /**
   * A small world of tasks: each one, when it runs, notes its name and the time, and schedules
   * up to two more (to a depth of 3) at delays drawn from its name, many of them on the same
   * instants as the arrivals. Clusters schedule their first timers before the arrivals start.
   */
  private static final class World {
    final long seed;
    final List<String> log = new ArrayList<>();
    Scheduler scheduler;
    Clock clock;

    World(long seed) {
      this.seed = seed;
    }

    Runnable task(String name, int depth) {
      return () -> {
        log.add(name + "@" + clock.nanoTime());
        if (depth == 3) {
          return;
        }
        SplittableRandom r = new SplittableRandom(seed ^ name.hashCode());
        int children = r.nextInt(3);
        for (int k = 0; k < children; k++) {
          long delay = r.nextInt(4) == 0 ? r.nextInt(200) : r.nextInt(12);
          scheduler.schedule(delay, task(name + "." + k, depth + 1));
        }
      };
    }

    void build() {
      scheduler.schedule(5, task("timer0", 1));
      scheduler.schedule(30, task("timer1", 0));
    }
  }

  private static List<Trace.Arrival> arrivals(long seed, int n, int gap) {
    SplittableRandom r = new SplittableRandom(seed);
    List<Trace.Arrival> out = new ArrayList<>();
    long t = 0;
    for (int i = 0; i < n; i++) {
      t += r.nextInt(gap + 1); // many arrivals at the same instant, and on other tasks' instants
      out.add(new Trace.Arrival(i, t, 0, 0, 0));
    }
    return out;
  }

  /** Every arrival scheduled at once, when the arrivals start: the order to keep. */
  private static List<String> eager(long seed, List<Trace.Arrival> arrivals) {
    SimulatedScheduler sim = new SimulatedScheduler();
    World w = new World(seed);
    w.scheduler = sim;
    w.clock = sim;
    w.build();
    for (Trace.Arrival a : arrivals) {
      sim.schedule(a.atNanos(), w.task("a" + a.index(), 0));
    }
    while (sim.runNext()) {
      // all of it
    }
    return w.log;
  }

  private static List<String> lazy(long seed, List<Trace.Arrival> arrivals, int[] mostQueued) {
    RunClock clock = new RunClock(new SimulatedScheduler());
    World w = new World(seed);
    w.scheduler = clock;
    w.clock = clock;
    w.build();
    clock.startArrivals(arrivals.iterator(), a -> w.task("a" + a.index(), 0));
    while (clock.runNext()) {
      // all of it
    }
    mostQueued[0] = clock.mostQueuedArrivals();
    return w.log;
  }

  @Property(tries = 300)
  void arrivalsScheduledJustInTimeRunInTheOrderOfArrivalsScheduledAtOnce(
      @ForAll long seed,
      @ForAll @IntRange(min = 0, max = 60) int n,
      @ForAll @IntRange(min = 0, max = 20) int gap) {
    List<Trace.Arrival> a = arrivals(seed, n, gap);
    List<String> expected = eager(seed, a);
    assertEquals(expected, lazy(seed, a, new int[1]));
  }

  @Test
  void anArrivalRunsBeforeATaskScheduledEarlierForTheSameInstant() {
    RunClock clock = new RunClock(new SimulatedScheduler());
    List<String> log = new ArrayList<>();
    clock.schedule(100, () -> log.add("built@" + clock.nanoTime()));
    clock.startArrivals(
        List.of(new Trace.Arrival(0, 10, 0, 0, 0), new Trace.Arrival(1, 100, 0, 0, 0)).iterator(),
        a -> () -> {
          log.add("a" + a.index() + "@" + clock.nanoTime());
          if (a.index() == 0) {
            clock.schedule(90, () -> log.add("late@" + clock.nanoTime()));
          }
        });
    while (clock.runNext()) {
      // all of it
    }
    // the cluster's timer was scheduled before the arrivals, the other task after them
    assertEquals(Arrays.asList("a0@10", "built@100", "a1@100", "late@100"), log);
  }

  @Property(tries = 20)
  void theQueueHoldsTheArrivalsUpToTheFarthestTaskOnly(
      @ForAll @LongRange(min = 0, max = 1000) long seed) {
    // a gap of up to 20 ns a request, tasks at most 200 ns ahead: about 20 arrivals, not 5,000
    int[] mostQueued = new int[1];
    lazy(seed, arrivals(seed, 5_000, 20), mostQueued);
    assertTrue(mostQueued[0] <= 60, mostQueued[0] + " arrivals queued at once");
  }
}
