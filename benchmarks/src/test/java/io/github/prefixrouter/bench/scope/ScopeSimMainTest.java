package io.github.prefixrouter.bench.scope;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.bench.SimulatingMainTest;
import org.junit.jupiter.api.Test;

class ScopeSimMainTest extends SimulatingMainTest<ScopeSimMain.Options> {

  ScopeSimMainTest() {
    super(ScopeSimMain::options, o -> o.params().requests(), ScopeSimMain::main);
  }

  /** A command line that would run nothing, or end in a stack trace, is refused. */
  @Test
  void badCommandLinesAreRefused() {
    assertEquals("--seeds must be at least 1 (and at most 2147483647), not 0",
        refused("--seeds", "0"));
    assertEquals("--seeds must be at least 1 (and at most 2147483647), not -2",
        refused("--seeds", "-2"));
    assertEquals("--requests must be at least 1 (and at most 1000000), not 0",
        refused("--requests", "0"));
    assertEquals("--rate must be from 0.001 to 100000, not 0", refused("--rate", "0"));
    assertEquals("--adapters needs a value", refused("--seeds", "2", "--adapters"));
    assertEquals("--seeds is given twice", refused("--seeds", "2", "--seeds", "3"));
    assertEquals("unknown flag --seed", refused("--seed", "2"));
    ScopeSimMain.Options o = ScopeSimMain.options(new String[] {"--adapters", "1", "--seeds", "2"});
    assertEquals(2, o.seeds());
    assertEquals(1, o.params().adapters());
    assertEquals(8, o.params().prompts());
  }

  /** A rate below 1 per second used to be printed as 0/s. */
  @Test
  void theRateIsPrintedAsGiven() {
    String out = output("--seeds", "1", "--requests", "1", "--rate", "0.25");
    assertTrue(out.contains(" 1 requests at 0.25/s, "), out);
  }

  /**
   * With one request nothing is cached in either mode: the hit rates are 0 and their ratio,
   * which used to print as NaNx, does not exist.
   */
  @Test
  void aRatioOverNothingPrintsAsADash() {
    String out = output("--seeds", "1", "--requests", "1");
    assertTrue(out.contains("   1  aware     0.000  "), out);
    String ratios = out.lines().filter(l -> l.startsWith("seed 1 ")).findFirst().orElseThrow();
    assertTrue(ratios.matches("seed 1  -  \\d+\\.\\d\\dx  \\d+\\.\\d\\dx  \\d+\\.\\d\\dx"), out);
    assertFalse(out.contains("NaN"), out);
  }
}
