package io.github.prefixrouter.bench.stall;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class StallSimMainTest {

  /**
   * On a short run (an engine hung for 30 s of 60): with the watch off, every request the hung
   * engine is given fails; a 10 s stall timeout gives it fewer and fails fewer; requests outside
   * the hang never fail; and a seed replays to the same figures.
   */
  @Test
  void theWatchGivesAHungEngineFewerRequestsAndTheRunIsDeterministic() {
    long s = 1_000_000_000L;
    StallSimMain.Params p = new StallSimMain.Params(4, 8, 65_536, 16, 512, 64, 8, 1.0, 20,
        60 * s, 10 * s, 30 * s, 1_000_000);
    StallSimMain.Outcome off = StallSimMain.run(p, 1, Duration.ZERO);
    StallSimMain.Outcome on = StallSimMain.run(p, 1, Duration.ofSeconds(10));
    assertEquals(off.requests(), on.requests(), "the same requests");
    assertEquals(0, off.stalls());
    assertEquals(1, on.stalls(), on.toString());
    assertTrue(off.givenToHungEngine() > 30, "too few requests hung to say anything: " + off);
    assertTrue(on.givenToHungEngine() < off.givenToHungEngine() * 0.7, on + " vs " + off);
    assertTrue(on.hangFailed() < off.hangFailed(), on + " vs " + off);
    assertTrue(on.reroutes() > 0, on.toString());
    // requests submitted before or after the hang are all answered
    assertEquals(off.failed(), off.hangFailed(), off.toString());
    assertEquals(on.failed(), on.hangFailed(), on.toString());
    assertEquals(on, StallSimMain.run(p, 1, Duration.ofSeconds(10)), "replays from its seed");
  }

  /**
   * Every timeout's ratios are printed against the first run as "watch off": that run is the
   * watch off whatever the list says, and a list that would run a timeout twice or a negative
   * one is refused.
   */
  @Test
  void theWatchOffBaselineRunsFirstAndEveryTimeoutOnce() {
    assertEquals(List.of(0L, 30L, 10L), StallSimMain.stallTimeouts("0,30,10"));
    assertEquals(List.of(0L, 30L, 10L), StallSimMain.stallTimeouts("30,10"));
    assertEquals(List.of(0L, 10L, 30L), StallSimMain.stallTimeouts("10, 0, 30"));
    assertEquals(List.of(0L), StallSimMain.stallTimeouts("0"));
    assertThrows(IllegalArgumentException.class, () -> StallSimMain.stallTimeouts("0,30,30"));
    assertThrows(IllegalArgumentException.class, () -> StallSimMain.stallTimeouts("0,0,30"));
    assertThrows(IllegalArgumentException.class, () -> StallSimMain.stallTimeouts("0,-5"));
    assertThrows(IllegalArgumentException.class, () -> StallSimMain.stallTimeouts("0,1.5"));
  }
}
