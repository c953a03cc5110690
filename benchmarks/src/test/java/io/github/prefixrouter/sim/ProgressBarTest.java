package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class ProgressBarTest {

  private static int count(String s, String what) {
    int n = 0;
    for (int i = s.indexOf(what); i >= 0; i = s.indexOf(what, i + 1)) {
      n++;
    }
    return n;
  }

  /**
   * The last run's end draws the full bar; finish() ends the line without drawing it again
   * (into a file, where each redraw stays, it showed 100% twice).
   */
  @Test
  void theFullBarIsDrawnOnce() {
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8);
    ProgressBar bar = new ProgressBar(out, "simulating", 4, 2);
    bar.advance(2);
    bar.runFinished();
    bar.advance(2);
    bar.runFinished();
    bar.finish();
    String s = buf.toString(StandardCharsets.UTF_8);
    assertEquals(1, count(s, "100%  runs 2/2"), s);
    assertTrue(s.endsWith(System.lineSeparator()), s);
  }

  /** A run cut short (advance never reached the total) still ends on the full bar, once. */
  @Test
  void finishDrawsTheFullBarWhenNoDrawShowedIt() {
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8);
    ProgressBar bar = new ProgressBar(out, "simulating", 4, 1);
    bar.runFinished();
    bar.finish();
    String s = buf.toString(StandardCharsets.UTF_8);
    assertEquals(1, count(s, "100%  runs 1/1"), s);
  }

  /**
   * A run that fails ends the bar's line as it stands, so that what follows (the failure's
   * stack trace) starts on a line of its own: it was written on the bar's line.
   */
  @Test
  void aFailedRunEndsTheLine() {
    SimConfig cfg = SimulationDeterminismTest.small(1, 1, java.util.List.of(Policy.values()[0]),
        java.util.List.of(2));
    int runs = PaperRunner.scenarios(cfg).size();
    assertTrue(runs >= 2, "runs " + runs);
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8);
    ProgressBar bar = new ProgressBar(out, "simulating", (long) runs * cfg.requests(), runs);
    java.util.concurrent.atomic.AtomicInteger built = new java.util.concurrent.atomic.AtomicInteger();
    Simulation.ClusterFactory failsSecond = ctx -> {
      if (built.incrementAndGet() == 2) {
        throw new IllegalStateException("test");
      }
      return Clusters.create(ctx);
    };
    org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class,
        () -> PaperRunner.run(cfg, Prompts.load(null, cfg.seed()), failsSecond, bar));
    String s = buf.toString(StandardCharsets.UTF_8);
    assertTrue(s.contains("runs 1/" + runs), s);
    assertTrue(s.endsWith(System.lineSeparator()), s);
    assertEquals(0, count(s, "100%"), s);
    bar.runFinished(); // a run still going when the pool was shut down
    bar.finish();
    assertEquals(s, buf.toString(StandardCharsets.UTF_8), "drawn after the line ended");
  }
}
