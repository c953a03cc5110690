package io.github.prefixrouter.faults;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.faults.FaultCluster.Outcome;
import io.github.prefixrouter.faults.FaultCluster.Wiring;
import io.github.prefixrouter.faults.FaultyEngine.Sabotage;
import io.github.prefixrouter.testing.SimulatedScheduler;
import org.junit.jupiter.api.Test;

/** The campaign's invariants must be able to fail: deliberately broken runs are caught. */
class FaultHarnessSelfTest {

  /** Seed 5 forwards plenty of requests under the stale view (see the campaign's figures). */
  private static final long FORWARDING_SEED = 5;

  @Test
  void aWrongAnswerFromAPeerIsCaught() {
    Outcome clean = FaultCluster.run(FORWARDING_SEED, Wiring.STALE_VIEW);
    assertTrue(clean.ok(), () -> String.join("\n", clean.violations()));
    assertTrue(clean.summary().forwarded() > 0, "the seed must forward something");

    Outcome o = FaultCluster.run(FORWARDING_SEED, Wiring.STALE_VIEW,
        Sabotage.WRONG_FORWARDED_ANSWER);
    assertTrue(o.violations().stream().anyMatch(v -> v.contains("a local engine gives")),
        () -> String.join("\n", o.violations()));
  }

  @Test
  void aLostAnswerIsCaught() {
    long seed = 1;
    while (new FaultPlan(seed).config.engineTimeout().toSeconds() < 60) {
      seed++;
    }
    Outcome o = FaultCluster.run(seed, Wiring.LIBRARY, Sabotage.LOSE_LOCAL_ANSWER);
    // without an engine deadline the request hangs; with one it fails although the engine
    // never reported a failure: either way the run is caught
    assertTrue(o.violations().stream().anyMatch(v -> v.contains("never completed")
            || v.contains("never failed")),
        () -> String.join("\n", o.violations()));
  }

  @Test
  void anExceptionThrownByAScheduledTaskIsRecorded() {
    GuardedScheduler g = new GuardedScheduler(new SimulatedScheduler());
    g.schedule(5, () -> {
      throw new IllegalStateException("boom");
    });
    g.schedule(10, () -> { });
    g.advanceTo(20);
    assertEquals(1, g.escaped().size());
    assertTrue(g.escaped().get(0).contains("boom"));
  }

  @Test
  void theSameSeedReplaysTheSameRun() {
    Outcome a = FaultCluster.run(11, Wiring.STALE_VIEW);
    Outcome b = FaultCluster.run(11, Wiring.STALE_VIEW);
    assertEquals(a.summary(), b.summary());
  }
}
