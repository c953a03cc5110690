package io.github.prefixrouter.bench.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.bench.OutputFlag;
import io.github.prefixrouter.internal.json.Json;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openjdk.jmh.util.ListStatistics;

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
    assertEquals("--peers: 0 is out of range (1 to 32768)", refused("--peers", "0"));
    assertEquals("--workload: unknown value 'BOGUS'", refused("--workload", "BOGUS"));
    assertEquals("unknown flag --quick", refused("--quick"));
    RouteBenchmarkMain.Options o =
        RouteBenchmarkMain.options(new String[] {"--peers", "4,64", "--workload", "SHARED"});
    assertEquals(List.of("4", "64"), o.peers());
    assertEquals(List.of("SHARED"), o.workload());
    assertNull(o.tokens());
  }

  /**
   * The sizes are those the fixture is built for, as route-loop and route-stages take them:
   * --peers 40000 (a router of twice as many peers, beyond RouterConfig's 65,536, which the
   * fixture's set-up then failed on in the benchmark's forked JVM) or --tokens 10 (below the
   * FIXED queries' own 64-token tails) were taken.
   */
  @Test
  void sizesTheFixtureCannotTakeAreRefused() {
    assertEquals("--tokens: 10 is out of range (64 to 1048576)", refused("--tokens", "512,10"));
    assertEquals("--peers: 32769 is out of range (1 to 32768)", refused("--peers", "32769"));
    RouteBenchmarkMain.Options o = RouteBenchmarkMain.options(
        new String[] {"--peers", "1,32768", "--tokens", "64,1048576"});
    assertEquals(List.of("1", "32768"), o.peers());
    assertEquals(List.of("64", "1048576"), o.tokens());
  }

  /**
   * An {@code --out} that is a directory, or lies under a file, is refused before anything
   * runs: it was taken, and writing route.json failed with a stack trace after the whole
   * benchmark, its figures lost.
   */
  @Test
  void anOutputFileThatCannotBeWrittenIsRefusedBeforeAnythingRuns(@TempDir Path dir)
      throws Exception {
    OutputFlag.assertCheckedBeforeAnythingRuns(dir, "route.json", args -> RouteBenchmarkMain.options(args).out());
  }


  /** README: results go to benchmarks/target/results, next to the jar. */
  @Test
  void theDefaultOutputIsInTheModulesTargetResults() {
    assertEquals(java.nio.file.Path.of("target", "results", "route.json").toAbsolutePath(),
        RouteBenchmarkMain.options(new String[0]).out().toAbsolutePath().normalize());
  }

  private static RouteBenchmarkMain.Row row(String impl, double... nanos) {
    ListStatistics s = new ListStatistics();
    for (double v : nanos) {
      s.addValue(v);
    }
    return new RouteBenchmarkMain.Row(impl, "FIXED", 4, 512, s, -1, 0, null);
  }

  /**
   * A library p50 and p99 of 0 ns (below the timer's resolution) make the ratios over it
   * undefined: route.json has null there, not Infinity or NaN, and stays valid JSON.
   */
  @Test
  void ratiosOverAZeroPercentileAreNullInTheJson() {
    String json = RouteBenchmarkMain.toJson(List.of(row("decide", 0, 0, 0),
        row("previousDecide", 40, 50, 60), row("naivePerPeerScan", 0, 0, 0)), false);
    assertTrue(!json.contains("NaN") && !json.contains("Infinity"), json);
    Map<?, ?> ratios = (Map<?, ?>) ((List<?>) ((Map<?, ?>) Json.parse(json)).get("ratios"))
        .get(0);
    assertEquals(Json.NULL, ratios.get("previousOverLibraryP50"), json);
    assertEquals(Json.NULL, ratios.get("naiveOverLibraryP99"), json);
  }
}
