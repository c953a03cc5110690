package io.github.prefixrouter.bench.slots;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.bench.SimulatingMainTest;
import java.util.List;
import org.junit.jupiter.api.Test;

class SlotSimMainTest extends SimulatingMainTest<SlotSimMain.Options> {

  SlotSimMainTest() {
    super(SlotSimMain::options, o -> o.params().requests(), SlotSimMain::main);
  }

  /** A command line that would run nothing, or end in a stack trace, is refused. */
  @Test
  void badCommandLinesAreRefused() {
    assertEquals("--seeds must be at least 1 (and at most 2147483647), not 0",
        refused("--seeds", "0"));
    assertEquals("--requests must be at least 1 (and at most 1000000), not 0",
        refused("--requests", "0"));
    // the simulated engine's most: 5000 was taken, and the run failed in a stack trace
    assertEquals("--slots must be at least 1 (and at most 4096), not 5000",
        refused("--slots", "5000"));
    assertEquals("--slots must be at least 1 (and at most 4096), not 0",
        refused("--slots", "0"));
    assertEquals("--zipf must be 0 or more, not -1.0", refused("--zipf", "-1"));
    assertEquals("--capacity must be at least 16 (and at most 2147483647), not 8",
        refused("--capacity", "8"));
    assertEquals("--rate needs a value", refused("--rate"));
    assertEquals("--rate is given twice", refused("--rate", "1", "--rate", "2"));
    SlotSimMain.Options o = SlotSimMain.options(new String[] {"--rate", "4000"});
    assertEquals(3, o.seeds());
    assertEquals(4000, o.params().ratePerSecond());
  }

  /**
   * Every mode's ratios are printed against the first run as the previous pricing: that run is
   * the previous pricing whatever the list says, and a list that would run a mode twice is
   * refused.
   */
  @Test
  void thePreviousPricingRunsFirstAndEveryModeOnce() {
    assertEquals(List.of("previous", "slots", "current"),
        SlotSimMain.options(new String[0]).modes());
    assertEquals(List.of("previous", "current"),
        SlotSimMain.options(new String[] {"--modes", "previous,current"}).modes());
    assertEquals(List.of("previous", "current", "slots"),
        SlotSimMain.options(new String[] {"--modes", "current,slots"}).modes());
    assertEquals(List.of("previous", "slots"),
        SlotSimMain.options(new String[] {"--modes", "slots,previous"}).modes());
    assertEquals("--modes: slots is given twice", refused("--modes", "slots,slots"));
    assertEquals("--modes: previous is given twice", refused("--modes", "previous,previous"));
    assertEquals("--modes: unknown mode 'slot'", refused("--modes", "slot"));
  }

  /** A rate below 1 per second used to be printed as 0/s. */
  @Test
  void theRateIsPrintedAsGiven() {
    String out = output("--seeds", "1", "--requests", "1", "--modes", "slots", "--rate", "0.25");
    assertTrue(out.contains(" 1 requests at 0.25/s (Poisson)"), out);
  }

  /**
   * With one request, measured, nothing is cached in either pricing: the hit rates' ratio (0 /
   * 0) used to print as NaNx; and with a single arrival the arrival period is empty, so the busy
   * share of its slot time used to print as Infinity. Neither exists.
   */
  @Test
  void figuresAndRatiosOverNothingPrintAsADash() {
    String out = output("--seeds", "1", "--requests", "1", "--modes", "slots");
    List<String> rows = out.lines().filter(l -> l.startsWith("   1  ")).toList();
    assertEquals(2, rows.size(), out);
    for (String row : rows) {
      assertTrue(row.matches("   1  \\S+ +0\\.000  .*  -       0"), out);
    }
    String ratios = out.lines().filter(l -> l.startsWith("seed 1 ")).findFirst().orElseThrow();
    assertTrue(ratios.matches("seed 1  -(  \\d+\\.\\d{3}x){5}"), out);
    assertFalse(out.contains("NaN") || out.contains("Infinity"), out);
  }
}
