package io.github.prefixrouter.bench.stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.bench.SimulatingMainTest;
import org.junit.jupiter.api.Test;

class StreamSimMainTest extends SimulatingMainTest<StreamSimMain.Options> {

  StreamSimMainTest() {
    super(StreamSimMain::options, StreamSimMain.Options::requests, StreamSimMain::main);
  }

  /**
   * On a small run: streaming gets the first output out well before the answer, coalescing
   * sends fewer STREAM messages than the engines give pieces (16 per request), and without a
   * listener nothing is streamed.
   */
  @Test
  void streamingShortensTheTimeToFirstOutputAndCoalescingSavesMessages() {
    StreamSimMain.Outcome whole = StreamSimMain.run(300, 1, "whole", 150);
    StreamSimMain.Outcome coalesced = StreamSimMain.run(300, 1, "stream-20ms", 150);
    StreamSimMain.Outcome every = StreamSimMain.run(300, 1, "stream-0ms", 150);
    assertEquals(0, whole.failed() + coalesced.failed() + every.failed());
    assertEquals(0.0, whole.streamsPerForward());
    assertEquals(whole.ttftMeanMs(), whole.latencyMeanMs(), 1e-9);
    assertTrue(coalesced.ttftMeanMs() < whole.ttftMeanMs() / 2, coalesced + " vs " + whole);
    assertTrue(coalesced.forwarded() > 0.05, "too few forwards to say anything: " + coalesced);
    assertEquals(16.0, every.streamsPerForward(), 1e-9);
    assertTrue(coalesced.streamsPerForward() < 8, coalesced.toString());
  }

  /** A command line that would run nothing, or end in a stack trace, is refused. */
  @Test
  void badCommandLinesAreRefused() {
    assertEquals("--rounds must be at least 1 (and at most 2147483647), not 0",
        refused("--rounds", "0"));
    assertEquals("--requests must be at least 1 (and at most 1000000), not 0",
        refused("--requests", "0"));
    assertEquals("--warmup must be 0 or more (and at most 2147483647), not -1",
        refused("--warmup", "-1"));
    assertEquals("--rate must be from 0.001 to 100000, not 0", refused("--rate", "0"));
    assertEquals("--seed needs a value", refused("--rounds", "2", "--seed"));
    assertEquals("--rounds is given twice", refused("--rounds", "2", "--rounds", "3"));
    StreamSimMain.Options o = StreamSimMain.options(new String[] {"--warmup", "0"});
    assertEquals(new StreamSimMain.Options(3_000, 5, 1, 150, 0), o);
  }

  /** A rate below 1 per second used to be printed as 0/s. */
  @Test
  void theRateIsPrintedAsGiven() {
    String text = output("--requests", "1", "--rounds", "1", "--warmup", "0", "--rate", "0.5");
    assertTrue(text.contains("; 1 requests at 0.5/s (Poisson);"), text);
  }
}
