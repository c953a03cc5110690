package io.github.prefixrouter.bench.kvevents;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.openjdk.jmh.runner.options.CommandLineOptions;

/**
 * The main reports every score as nanoseconds per batch: JMH flags that would change the mode
 * or the unit of the scores are refused, not printed under the wrong unit.
 */
class KvEventBenchmarkMainTest {

  private static String refused(String... args) throws Exception {
    return KvEventBenchmarkMain.refused(new CommandLineOptions(args));
  }

  @Test
  void anotherTimeUnitIsRefused() throws Exception {
    String why = refused("-f", "1", "-tu", "us");
    assertNotNull(why, "-tu us would print microseconds as ns per batch");
    assertTrue(why.startsWith("-tu "), why);
  }

  @Test
  void anotherModeIsRefused() throws Exception {
    assertNotNull(refused("-bm", "thrpt"), "throughput would invert every ratio");
    assertNotNull(refused("-bm", "avgt,sample"), "two modes would overwrite each other");
    assertTrue(refused("-bm", "all").startsWith("-bm "));
  }

  @Test
  void operationsPerInvocationOtherThanOneAreRefused() throws Exception {
    // every invocation applies one batch: -opi 4 would divide every ns per batch by 4
    String why = refused("-opi", "4");
    assertNotNull(why, "-opi 4 would print a quarter of a batch's time as ns per batch");
    assertTrue(why.startsWith("-opi 4"), why);
    assertNull(refused("-opi", "1"));
  }

  @Test
  void helpAndListFlagsAreRefusedRatherThanRunningTheWholeBenchmark() throws Exception {
    // the Runner does not act on them: -h used to run every benchmark and overwrite the JSON
    for (String flag : new String[] {"-h", "-l", "-lp", "-lprof", "-lrf"}) {
      String why = refused(flag);
      assertNotNull(why, flag);
      assertTrue(why.startsWith(flag + ": "), why);
    }
  }

  /**
   * Outside single-shot mode JMH does not repeat the method -bs times per operation but still
   * divides the operations it counts by -bs (see its generated *_AverageTime methods), so -bs 4
   * printed four times a batch's time as ns per batch.
   */
  @Test
  void aBatchSizeOtherThanOneIsRefused() throws Exception {
    String why = refused("-bs", "4");
    assertNotNull(why, "-bs 4 would print four times a batch's time as ns per batch");
    assertTrue(why.startsWith("-bs 4"), why);
    assertNull(refused("-bs", "1"));
  }

  @Test
  void theDefaultsAndTheirOwnValuesAreAccepted() throws Exception {
    assertNull(refused());
    assertNull(refused("-f", "2", "-wi", "6", "-w", "1s", "-i", "5", "-r", "1s"));
    assertNull(refused("-bm", "avgt", "-tu", "ns"));
  }
}
