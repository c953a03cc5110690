package io.github.prefixrouter.bench.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import org.junit.jupiter.api.Test;

class RouteBenchmarkMainTest {

  private static String refused(String... args) {
    return assertThrows(IllegalArgumentException.class, () -> RouteBenchmarkMain.options(args))
        .getMessage();
  }

  /** A flag without its value, given twice, or with a size or workload JMH has no use for. */
  @Test
  void badCommandLinesAreRefused() {
    assertEquals("--peers needs a value", refused("--gc", "--peers"));
    assertEquals("--out needs a value", refused("--out"));
    assertEquals("--peers is given twice", refused("--peers", "4", "--peers", "64"));
    assertEquals("--full is given twice", refused("--full", "--full"));
    assertEquals("--tokens: not a whole number: 'x'", refused("--tokens", "512,x"));
    assertEquals("--peers: 0 is out of range", refused("--peers", "0"));
    assertEquals("--workload: unknown value 'BOGUS'", refused("--workload", "BOGUS"));
    assertEquals("unknown flag --quick", refused("--quick"));
    RouteBenchmarkMain.Options o =
        RouteBenchmarkMain.options(new String[] {"--peers", "4,64", "--workload", "SHARED"});
    assertEquals(List.of("4", "64"), o.peers());
    assertEquals(List.of("SHARED"), o.workload());
    assertNull(o.tokens());
  }
}
