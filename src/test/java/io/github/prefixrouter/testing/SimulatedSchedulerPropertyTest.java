package io.github.prefixrouter.testing;

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
}
