package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.RouteDecision.Reason;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * The failing-engine rule of {@link EngineWatch} against a model of it: a count of retryable
 * failures in a row, failing from the {@code limit}-th on, avoided while a run is outstanding,
 * the probe is taken or the last failure is less than the probe interval ago, and reset by any
 * success; a failure that is not retryable changes nothing; while failing, one decision at a
 * time holds the probe. The stall check is off, to see this rule alone.
 */
class EngineWatchFailingProperties {

  static final long PROBE = 10;

  /**
   * Steps, each an int: 0 to 2 start a run and end it at once with a success, a retryable
   * failure or a failure that is not retryable; 3 starts a run left outstanding; 4 ends the
   * oldest outstanding run with a retryable failure; 5 to 12 let {@code step - 4} time
   * units pass; 13 is a decision to run here, which takes the probe while failing; 14 gives the
   * probe back if it was taken.
   */
  @Property
  void failingFollowsTheModel(@ForAll @IntRange(min = 1, max = 5) int limit,
      @ForAll @Size(max = 80) List<@IntRange(min = 0, max = 14) Integer> steps) {
    EngineWatch w = new EngineWatch(0, limit, PROBE);
    long now = 0;
    int outstanding = 0;
    int inARow = 0;
    boolean failing = false;
    long lastFailure = 0;
    long spells = 0;
    boolean probeHeld = false;
    for (int step : steps) {
      if (step <= 2 || step == 4 && outstanding > 0) {
        if (step <= 2) {
          w.started(now);
        } else {
          outstanding--;
        }
        if (step == 0) {
          w.succeeded();
          inARow = 0;
          failing = false;
        } else if (step == 1 || step == 4) {
          w.failed(now);
          inARow++;
          lastFailure = now;
          if (!failing && inARow >= limit) {
            failing = true;
            spells++;
          }
        }
        w.ended();
      } else if (step == 3) {
        w.started(now);
        outstanding++;
      } else if (step <= 12) {
        now += step - 4;
      } else if (step == 13) {
        int expected = !failing ? EngineWatch.NO_PROBE
            : probeHeld ? EngineWatch.PROBE_TAKEN : EngineWatch.PROBE;
        assertEquals(expected, w.takeProbe(), "take at " + now + ": " + w.stats(now));
        probeHeld |= expected == EngineWatch.PROBE;
      } else if (probeHeld) {
        w.probeEnded();
        probeHeld = false;
      }
      boolean avoided =
          failing && (probeHeld || outstanding > 0 || now - lastFailure < PROBE);
      EngineStallStats s = w.stats(now);
      String at = "after " + step + " at " + now + ": " + s;
      assertEquals(avoided, w.avoid(now), at);
      assertEquals(avoided ? Reason.LOCAL_ENGINE_FAILING : null, w.avoidance(now), at);
      assertEquals(avoided ? 1 : 0, s.avoided(), at);
      assertEquals(failing ? 1 : 0, s.failing(), at);
      assertEquals(inARow, s.failedInARow(), at);
      assertEquals(spells, s.failingSpells(), at);
      assertEquals(outstanding, s.outstanding(), at);
      assertEquals(0, s.stalls(), at);
    }
  }

  /**
   * With a limit of 0 the check is off: no sequence of failures avoids the engine, and the
   * failures in a row are still counted.
   */
  @Property
  void aLimitOfZeroNeverAvoids(
      @ForAll @Size(max = 40) List<@IntRange(min = 0, max = 5) Integer> gaps) {
    EngineWatch w = new EngineWatch(0, 0, PROBE);
    long now = 0;
    long inARow = 0;
    for (int gap : gaps) {
      now += gap;
      w.started(now);
      w.failed(now);
      w.ended();
      inARow++;
      assertEquals(false, w.avoid(now));
      assertEquals(0, w.stats(now).failing());
      assertEquals(inARow, w.stats(now).failedInARow());
      assertEquals(0, w.stats(now).failingSpells());
    }
  }
}
