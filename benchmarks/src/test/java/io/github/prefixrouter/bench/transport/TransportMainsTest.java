package io.github.prefixrouter.bench.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.Locale;
import java.util.Map;
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

  /** The table used to follow the default locale: {@code 0,123} on a decimal-comma one. */
  @Test
  void theTableIsInTheRootLocaleWhateverTheDefault() {
    Locale before = Locale.getDefault();
    Locale.setDefault(Locale.GERMANY);
    try {
      String t = LoopbackLatencyMain.table(Map.of("transport request 100 B",
          Map.of("false", List.of(0.5, 0.123, 0.2), "true", List.of(0.1, 0.05, 0.05))));
      assertEquals(String.format(Locale.ROOT, "%-34s %14s %14s %8s%n%-34s %14s %14s %8s%n",
          "median ms (median over rounds)", "nodelay=false", "nodelay=true", "ratio",
          "transport request 100 B", "0.200", "0.050", "4.0x"), t);
    } finally {
      Locale.setDefault(before);
    }
  }

  /** A median of 0 with TCP_NODELAY used to print the ratio as {@code Infinityx}. */
  @Test
  void aRatioOverAZeroMedianIsADash() {
    String t = LoopbackLatencyMain.table(Map.of("transport request 100 B",
        Map.of("false", List.of(0.2), "true", List.of(0.0))));
    assertEquals(String.format(Locale.ROOT, "%-34s %14s %14s %8s%n%-34s %14s %14s %8s%n",
        "median ms (median over rounds)", "nodelay=false", "nodelay=true", "ratio",
        "transport request 100 B", "0.200", "0.000", "-"), t);
  }
}
