package io.github.prefixrouter.testing;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.contract.ThrowingClock;
import io.github.prefixrouter.spi.EngineResult;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.Test;

/**
 * The simulated engine's own clock ({@link SimulatedEngine.Builder#clock}) only measures how
 * long requests queued: a reading that throws costs no request its answer.
 */
class SimulatedEngineClockTest {

  private static final long MS = 1_000_000L;

  /**
   * A clock that throws on some readings (as a request is queued, as it starts, or all of
   * them) leaves every request accepted and answered once, with its output, and the engine
   * empty at the end; its tasks throw nothing into the scheduler.
   */
  @Test
  void aClockThatThrowsCostsNoRequestItsAnswer() {
    List<String> problems = new ArrayList<>();
    for (int every = 1; every <= 3; every++) {
      for (int phase = 0; phase < every; phase++) {
        SimulatedScheduler sim = new SimulatedScheduler();
        ThrowingClock clock = new ThrowingClock(sim, every, phase);
        SimulatedEngine e = SimulatedEngine.builder().scheduler(sim).clock(clock).slots(2)
            .vocabularySize(1000)
            .prefillOverheadNanos(MS).prefillNanosPerToken(MS / 100).decodeNanosPerToken(MS)
            .build();
        clock.arm();
        String at = "every " + every + ", phase " + phase + ": ";
        List<InferenceRequest> requests = new ArrayList<>();
        List<CompletableFuture<EngineResult>> answers = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
          InferenceRequest q = new InferenceRequest("q" + i, prompt(100 * i, 40),
              GenerationParams.greedy(1 + i));
          try {
            answers.add(e.execute(q));
            requests.add(q);
          } catch (Throwable x) {
            problems.add(at + "execute of " + q.id() + " threw " + x);
          }
          run(sim, at, problems);
        }
        run(sim, at, problems);
        for (int i = 0; i < answers.size(); i++) {
          InferenceRequest q = requests.get(i);
          CompletableFuture<EngineResult> f = answers.get(i);
          if (!f.isDone()) {
            problems.add(at + q.id() + " never answered");
            continue;
          }
          try {
            assertArrayEquals(SimulatedEngine.expectedOutput(q.tokens(), q.params(), 1000),
                f.get().outputTokens(), at + q.id());
          } catch (ExecutionException | InterruptedException x) {
            problems.add(at + q.id() + " failed: " + x.getCause());
          }
        }
        if (e.load().total() != 0) {
          problems.add(at + "still loaded: " + e.load());
        }
        assertTrue(clock.thrown() > 0, at + "the clock threw");
      }
    }
    assertEquals(List.of(), problems, "what the engine's clock throwing did");
  }

  /** A clock that throws when first read, as the engine is built, fails the build. */
  @Test
  void aClockThatThrowsAtBuildFailsTheBuildWithATypedError() {
    SimulatedScheduler sim = new SimulatedScheduler();
    ThrowingClock clock = new ThrowingClock(sim, 1, 0).arm();
    IllegalStateException x = assertThrows(IllegalStateException.class,
        () -> SimulatedEngine.builder().scheduler(sim).clock(clock).build(),
        "a clock that throws at once gave an engine whose every request reads it");
    assertTrue(x.getMessage().contains("clock"), x.getMessage());
    assertTrue(x.getCause() != null, "what the clock threw");
  }

  /** Runs the simulation for a second, noting what its tasks threw. */
  private static void run(SimulatedScheduler sim, String at, List<String> problems) {
    long end = sim.nanoTime() + 1_000 * MS;
    while (true) {
      try {
        sim.advanceTo(end);
        return;
      } catch (Throwable x) {
        if (Thread.currentThread().isInterrupted()) {
          throw new AssertionError("interrupted (the test timed out)", x);
        }
        problems.add(at + "a scheduler task threw " + x);
      }
    }
  }

  private static int[] prompt(int base, int length) {
    int[] t = new int[length];
    for (int i = 0; i < length; i++) {
      t[i] = base + i;
    }
    return t;
  }
}
