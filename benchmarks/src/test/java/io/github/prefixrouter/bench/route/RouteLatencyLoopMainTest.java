package io.github.prefixrouter.bench.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/**
 * The positional arguments of {@link RouteLatencyLoopMain} (and of {@link RouteStagesMain},
 * the first three): a bad one is an {@link IllegalArgumentException} naming it, which the mains
 * print as {@code error: ...} with exit code 2. They used to be read with bare
 * {@code parseLong}/{@code parseInt}, a word ending the run in a NumberFormatException's stack
 * trace and a count of 0 in an ArrayIndexOutOfBoundsException after the warm-up.
 */
class RouteLatencyLoopMainTest {

  private static String refused(String... args) {
    return assertThrows(IllegalArgumentException.class,
        () -> RouteLatencyLoopMain.Options.parse(args), String.join(" ", args)).getMessage();
  }

  @Test
  void theDefaultsAndTheArgumentsGiven() {
    assertEquals(new RouteLatencyLoopMain.Options(
        new RouteFixture.Args(64, 4096, RouteFixture.Workload.FIXED), 15_000, 400_000),
        RouteLatencyLoopMain.Options.parse(new String[0]));
    assertEquals(new RouteLatencyLoopMain.Options(
        new RouteFixture.Args(4, 512, RouteFixture.Workload.SHARED), 0, 1),
        RouteLatencyLoopMain.Options.parse(new String[] {"4", "512", "SHARED", "0", "1"}));
    assertEquals(new RouteFixture.Args(8, 64, RouteFixture.Workload.FIXED),
        RouteFixture.Args.parse(new String[] {"8", "64"}));
  }

  @Test
  void badArgumentsAreRefusedNamingThem() {
    assertEquals("slowNanos: not a whole number: 'fast'", refused("64", "4096", "FIXED", "fast"));
    assertEquals("slowNanos must be 0 or more, not -1", refused("64", "4096", "FIXED", "-1"));
    assertEquals("decisions must be 1 to 10000000, not 0",
        refused("64", "4096", "FIXED", "15000", "0"));
    assertEquals("decisions: not a whole number: '4e5'",
        refused("64", "4096", "FIXED", "15000", "4e5"));
    assertEquals("peers must be 1 to 32768, not 0", refused("0"));
    assertEquals("peers: not a whole number: 'x'", refused("x"));
    assertEquals("promptTokens must be 64 to 1048576, not 63", refused("64", "63"));
    assertEquals("workload must be FIXED or SHARED, not 'fixed'", refused("64", "4096", "fixed"));
    assertEquals("at most 5 arguments ([peers] [promptTokens] [FIXED|SHARED] [slowNanos] "
        + "[decisions]), not 6", refused("64", "4096", "FIXED", "1", "1", "1"));
    assertEquals("at most 3 arguments ([peers] [promptTokens] [FIXED|SHARED]), not 4",
        assertThrows(IllegalArgumentException.class, () -> RouteFixture.Args.parseAll(
            new String[] {"64", "4096", "FIXED", "1"})).getMessage());
  }

  /** The least arguments accepted build a fixture. */
  @Test
  void theLeastArgumentsBuildAFixture() {
    for (RouteFixture.Workload w : RouteFixture.Workload.values()) {
      RouteFixture f = RouteFixture.Args.parse(new String[] {"1", "64", w.name()}).fixture();
      assertEquals(1, f.peers);
      f.decide.apply(f.queries[0]);
    }
  }
}
