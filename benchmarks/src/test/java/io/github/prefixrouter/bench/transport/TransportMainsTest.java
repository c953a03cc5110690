package io.github.prefixrouter.bench.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** The command lines of ForwardOverheadMain and LoopbackLatencyMain. */
class TransportMainsTest {

  private static String refused(org.junit.jupiter.api.function.Executable e) {
    return assertThrows(IllegalArgumentException.class, e).getMessage();
  }

  /** A count of 0 used to end in an index error (or print nothing), a bare flag in another. */
  @Test
  void badCommandLinesAreRefused() {
    assertEquals("--n must be at least 1 (and at most 2147483647), not 0",
        refused(() -> ForwardOverheadMain.requests(new String[] {"--n", "0"})));
    assertEquals("--n needs a value",
        refused(() -> ForwardOverheadMain.requests(new String[] {"--n"})));
    assertEquals("--n is given twice",
        refused(() -> ForwardOverheadMain.requests(new String[] {"--n", "5", "--n", "6"})));
    assertEquals(300, ForwardOverheadMain.requests(new String[0]));
    assertEquals("--rounds must be at least 1 (and at most 2147483647), not 0",
        refused(() -> LoopbackLatencyMain.options(new String[] {"--rounds", "0"})));
    assertEquals("--n needs a value",
        refused(() -> LoopbackLatencyMain.options(new String[] {"--rounds", "1", "--n"})));
    assertEquals("--child: unknown value 'x'",
        refused(() -> LoopbackLatencyMain.options(new String[] {"--child", "x"})));
    assertEquals(new LoopbackLatencyMain.Options(2, 50, "transport"),
        LoopbackLatencyMain.options(new String[] {"--n", "50", "--child", "transport"}));
  }
}
