package io.github.prefixrouter.engine.reference;

import static io.github.prefixrouter.engine.reference.ReferenceEngineTest.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.contract.ThrowingClock;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineResult;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * The engine's clock only times its runs (the result's prefill and decode times): a reading
 * that throws costs no request its answer.
 */
class ReferenceEngineClockTest {

  /**
   * A clock that throws on some readings (each of the three a run takes, or all of them) leaves
   * every request answered with the output a good clock gives, and its times not negative. The
   * engine failed the request with "failed in the engine", after computing it when the last
   * reading threw.
   */
  @Test
  void aClockThatThrowsCostsNoRequestItsAnswer() throws Exception {
    int[] p = prompt(21, 70);
    GenerationParams g = GenerationParams.greedy(8);
    int[] expected;
    try (ReferenceEngine good = ReferenceEngine.builder().executor(Runnable::run).build()) {
      expected = good.execute(new InferenceRequest("a", p, g)).get().outputTokens();
    }
    AtomicLong ticks = new AtomicLong();
    Clock counting = () -> ticks.addAndGet(1_000);
    for (int every = 1; every <= 3; every++) {
      for (int phase = 0; phase < every; phase++) {
        ThrowingClock clock = new ThrowingClock(counting, every, phase);
        try (ReferenceEngine e =
            ReferenceEngine.builder().clock(clock).executor(Runnable::run).build()) {
          clock.arm();
          for (int i = 0; i < 3; i++) {
            CompletableFuture<EngineResult> f = e.execute(new InferenceRequest("q" + i, p, g));
            String what = "every " + every + ", phase " + phase + ", request q" + i;
            assertTrue(f.isDone(), what + ": not answered");
            EngineResult r = null;
            try {
              r = f.get();
            } catch (ExecutionException x) {
              fail(what + ": failed because the clock that times it threw: " + x.getCause());
            }
            assertNotNull(r);
            assertArrayEquals(expected, r.outputTokens(), what + ": another output");
            assertTrue(r.prefillNanos() >= 0 && r.decodeNanos() >= 0, what + ": " + r);
          }
          assertTrue(clock.thrown() > 0, "the clock threw");
          assertEquals(0, e.load().total(), "every request left the load");
        }
      }
    }
  }

  /** A clock that throws when first read, as the engine is built, fails the build. */
  @Test
  void aClockThatThrowsAtBuildFailsTheBuildWithATypedError() {
    ThrowingClock clock = new ThrowingClock(Clock.system(), 1, 0).arm();
    IllegalStateException x = assertThrows(IllegalStateException.class,
        () -> ReferenceEngine.builder().clock(clock).build().close(),
        "a clock that throws at once gave an engine whose every run reads it");
    assertTrue(x.getMessage().contains("clock"), x.getMessage());
    assertNotNull(x.getCause(), "what the clock threw");
  }
}
