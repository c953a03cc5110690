package io.github.prefixrouter.bench.kvevents;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class EngineTreeHeapMainTest {

  @Test
  void measuresTheSteadyTreeAfterEveryBatchOfItsCyclesApplied() throws Exception {
    KvEventWorkload w = KvEventWorkload.standard(KvEventWorkload.HashKind.INT);
    EngineTreeHeapMain.Heap h = EngineTreeHeapMain.measure(w);
    assertEquals(w.heldTokens(), h.heldTokens());
    assertEquals((long) EngineTreeHeapMain.CYCLES * w.batches(), h.batchesApplied());
    // the heap figures themselves depend on the collector (none under the serial one, see
    // docs/tree.md), so they are the tool's output, not asserted here
  }

  /**
   * It takes no arguments: one given (a flag of another main, a misspelling) used to be ignored
   * and the measurement ran as if it had not been given. In a JVM of its own, as it exits.
   */
  @Test
  void anArgumentIsRefusedBeforeAnythingIsMeasured() throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    // the serial collector: without the check the main stops at once, with "no figures"
    Process p = new ProcessBuilder(java, "-XX:+UseSerialGC", "-cp",
        System.getProperty("java.class.path"), EngineTreeHeapMain.class.getName(), "--cycles",
        "10").redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
    String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS));
    assertEquals(2, p.exitValue(), err);
    assertTrue(err.startsWith("error: unknown flag --cycles"), err);
  }

  /** The line used to follow the default locale: {@code 1.048.576} and {@code 0,500} on a German one. */
  @Test
  void theLineIsInTheRootLocaleWhateverTheDefault() {
    Locale before = Locale.getDefault();
    Locale.setDefault(Locale.GERMANY);
    try {
      assertEquals("INT hashes: 1,048,576 tokens held; 0.500 bytes per token filled, 0.250 after "
              + EngineTreeHeapMain.CYCLES + " cycles (12,345 batches)" + System.lineSeparator(),
          EngineTreeHeapMain.line(KvEventWorkload.HashKind.INT,
              new EngineTreeHeapMain.Heap(1_048_576, 524_288, 262_144, 12_345)));
    } finally {
      Locale.setDefault(before);
    }
  }
}
