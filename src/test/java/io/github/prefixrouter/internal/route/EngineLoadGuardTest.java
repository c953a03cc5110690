package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The estimate a node makes of its engine's load while {@code load()} fails: the last good
 * reading, followed by the runs the node has on the engine since.
 */
class EngineLoadGuardTest {

  private final AtomicBoolean failing = new AtomicBoolean();
  private final AtomicInteger outstanding = new AtomicInteger();
  private final EngineLoadGuard guard = new EngineLoadGuard("n1", new InferenceEngine() {
    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      return new CompletableFuture<>();
    }

    @Override
    public void cancel(String id) {}

    @Override
    public EngineLoad load() {
      if (failing.get()) {
        throw new IllegalStateException("the metrics endpoint is down");
      }
      return new EngineLoad(6, 1);
    }
  }, outstanding::get);

  /** A last reading of 6 queued and 1 running, taken with 7 runs of the node's outstanding. */
  private void lastGoodReadingThenFailing() {
    outstanding.set(7);
    assertEquals(new EngineLoad(6, 1), guard.read());
    failing.set(true);
  }

  @Test
  void aQueueOfTheNodesRunsEmptiesAsTheyEnd() {
    lastGoodReadingThenFailing();
    outstanding.set(4); // three of its runs ended: three places in the queue freed at least
    assertEquals(new EngineLoad(3, 1), guard.read());
    outstanding.set(0); // every run the node gave the engine has ended
    assertEquals(0, guard.read().queueDepth(), "the estimate once every run has ended");
    outstanding.set(2);
    assertEquals(1, guard.read().queueDepth(), "runs given since, beyond the one running");
  }

  @Test
  void runsGivenSinceTheReadingRaiseTheQueue() {
    lastGoodReadingThenFailing();
    assertEquals(new EngineLoad(6, 1), guard.read(), "nothing ended, nothing given");
    outstanding.set(10);
    assertEquals(new EngineLoad(9, 1), guard.read());
  }
}
