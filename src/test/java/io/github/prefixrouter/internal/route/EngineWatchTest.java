package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.testing.LoggedLines.logged;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.RouteDecision.Reason;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The stall rules of {@link EngineWatch}, on explicit times (T = 10). */
class EngineWatchTest {

  static final long T = 10;

  @Test
  void theReasonSaysWhetherTheEngineIsStalledOrFailing() {
    EngineWatch w = new EngineWatch(T, 2, 5);
    w.started(0);
    assertEquals(Reason.LOCAL_ENGINE_STALLED, w.avoidance(T), "silent for T");
    w.started(T);
    w.failed(T);
    w.ended();
    w.started(T);
    w.failed(T);
    w.ended();
    assertEquals(Reason.LOCAL_ENGINE_FAILING, w.avoidance(T + 1), "failing and stalled");
    w.progressed(T + 2);
    assertEquals(Reason.LOCAL_ENGINE_FAILING, w.avoidance(T + 2), "progress is no success");
    w.succeeded();
    assertEquals(null, w.avoidance(T + 3));
    assertFalse(w.avoid(T + 3));
  }

  /**
   * The start and the end of a stall and of a failing spell are logged, once each, naming the
   * node: the node routes around its engine meanwhile, which operators must hear of. They used
   * to be logged nowhere.
   */
  @Test
  void eachSpellIsLoggedOnceAtItsStartAndItsEnd() {
    EngineWatch w = new EngineWatch("n7", T, 2, 5);
    List<String> lines = logged("n7", () -> {
      w.started(0);
      for (long t = T; t < T + 5; t++) {
        w.avoid(t);
      }
      w.progressed(T + 5);
      w.ended();
      for (int i = 0; i < 4; i++) {
        w.started(20 + i);
        w.failed(20 + i, "connection refused");
        w.ended();
        w.avoid(20 + i);
      }
      w.succeeded();
      w.avoid(40);
    });
    assertEquals(4, lines.size(), String.join("\n", lines));
    assertTrue(lines.get(0).contains("WARN") && lines.get(0).contains("stalled"), lines.get(0));
    assertTrue(lines.get(1).contains("INFO") && lines.get(1).contains("progress"), lines.get(1));
    assertTrue(lines.get(2).contains("WARN") && lines.get(2).contains("failing")
        && lines.get(2).contains("2 retryable failures in a row")
        && lines.get(2).contains("connection refused"), lines.get(2));
    assertTrue(lines.get(3).contains("INFO") && lines.get(3).contains("succeeded"),
        lines.get(3));
  }

  @Test
  void anEngineWithoutRunsIsNeverAvoided() {
    EngineWatch w = new EngineWatch(T);
    assertFalse(w.avoid(1_000));
    w.started(0);
    w.ended();
    assertFalse(w.avoid(1_000));
    assertEquals(0, w.stats(1_000).stalls());
  }

  @Test
  void aRunThatFindsTheEngineIdleStartsTheClock() {
    EngineWatch w = new EngineWatch(T);
    w.started(100);
    assertFalse(w.avoid(109));
    assertTrue(w.avoid(110));
    EngineStallStats s = w.stats(112);
    assertEquals(1, s.avoided());
    assertEquals(1, s.stalled());
    assertEquals(1, s.outstanding());
    assertEquals(1, s.stalls());
  }

  @Test
  void aRunQueuedBehindOthersCountsFromTheLastProgress() {
    EngineWatch w = new EngineWatch(T);
    w.started(0);
    w.started(8); // the engine owes the first run's progress already
    assertTrue(w.avoid(10));
  }

  @Test
  void progressRestartsTheClockAndEndsAStall() {
    EngineWatch w = new EngineWatch(T);
    w.started(0);
    w.progressed(6);
    assertFalse(w.avoid(15));
    assertTrue(w.avoid(16));
    w.progressed(17);
    assertFalse(w.avoid(17));
    assertFalse(w.avoid(26));
    EngineStallStats s = w.stats(26);
    assertEquals(1, s.stalls());
    assertEquals(1, s.recoveries());
    assertEquals(0, s.stalled());
    assertTrue(w.avoid(27), "silent again for T");
    assertEquals(2, w.stats(27).stalls());
  }

  @Test
  void aStallOutlivesItsRunsAndTheNextRunIsAvoidedAtOnce() {
    EngineWatch w = new EngineWatch(T);
    w.started(0);
    assertTrue(w.avoid(10));
    w.ended(); // failed or given up: no progress
    assertFalse(w.avoid(11), "nothing outstanding: the next request may probe");
    assertEquals(1, w.stats(11).stalled());
    w.started(12); // the probe
    assertTrue(w.avoid(12), "no new wait of T for a stalled engine");
    w.progressed(13);
    assertFalse(w.avoid(13));
    assertEquals(1, w.stats(13).stalls());
  }

  @Test
  void silenceIsReportedOnlyWithRunsOutstanding() {
    EngineWatch w = new EngineWatch(1_000_000_000L);
    assertEquals(0, w.stats(5_000_000_000L).silentSeconds());
    w.started(1_000_000_000L);
    assertEquals(2, w.stats(3_500_000_000L).silentSeconds());
  }

  @Test
  void zeroNeverAvoids() {
    EngineWatch w = new EngineWatch(0);
    w.started(0);
    assertFalse(w.avoid(Long.MAX_VALUE / 2));
    assertEquals(0, w.stats(1).stalls());
    assertThrows(IllegalArgumentException.class, () -> new EngineWatch(-1));
  }

  @Test
  void countsWhatTheNodeReports() {
    EngineWatch w = new EngineWatch(T);
    w.rerouted(Reason.LOCAL_ENGINE_STALLED);
    w.rerouted(Reason.LOCAL_ENGINE_STALLED);
    w.refusedForPeer(Reason.LOCAL_ENGINE_STALLED);
    EngineStallStats s = w.stats(0);
    assertEquals(2, s.reroutes());
    assertEquals(1, s.refusedForPeers());
  }

  @Test
  void countsWhatItDidForAFailingEngineApart() {
    EngineWatch w = new EngineWatch(T, 1, 5);
    w.rerouted(Reason.LOCAL_ENGINE_STALLED);
    w.rerouted(Reason.LOCAL_ENGINE_FAILING);
    w.rerouted(Reason.LOCAL_ENGINE_FAILING);
    w.refusedForPeer(Reason.LOCAL_ENGINE_STALLED);
    w.refusedForPeer(Reason.LOCAL_ENGINE_FAILING);
    w.refusedForPeer(Reason.LOCAL_ENGINE_STALLED);
    EngineStallStats s = w.stats(0);
    assertEquals(3, s.reroutes());
    assertEquals(3, s.refusedForPeers());
    assertEquals(2, w.failingReroutes());
    assertEquals(1, w.failingRefusals());
    assertFalse(w.isFailing());
    w.failed(0);
    assertTrue(w.isFailing());
    w.succeeded();
    assertFalse(w.isFailing());
  }

  /**
   * A piece of output and a check that detects the stall at the same moment: whichever order
   * they interleave in, no stall stands after the progress (each side writes its flag before it
   * reads the other's). Both threads spin to start each round together.
   */
  @Test
  void progressRacingADetectionLeavesNoStall() throws Exception {
    progressRacingADetection(20_000);
  }

  /** {@link #progressRacingADetectionLeavesNoStall} at 25 times the rounds. */
  @Test
  @Tag("long")
  void progressRacingADetectionLeavesNoStallManyRounds() throws Exception {
    progressRacingADetection(500_000);
  }

  private static void progressRacingADetection(int rounds) throws InterruptedException {
    EngineWatch[] watch = new EngineWatch[rounds + 1];
    for (int i = 1; i <= rounds; i++) {
      watch[i] = new EngineWatch(T);
      watch[i].started(0);
    }
    AtomicInteger go = new AtomicInteger();
    AtomicInteger checked = new AtomicInteger();
    Thread checker = new Thread(() -> {
      for (int i = 1; i <= rounds; i++) {
        await(go, i);
        watch[i].avoid(100); // silent since 0: detects, unless it sees the progress at 100
        checked.set(i);
      }
    });
    checker.start();
    int standing = 0;
    for (int i = 1; i <= rounds; i++) {
      go.set(i);
      watch[i].progressed(100);
      await(checked, i);
      if (watch[i].avoid(105)) { // 5 after the progress: never stalled
        standing++;
      }
    }
    checker.join();
    assertEquals(0, standing, "stalls left standing after progress, of " + rounds);
  }

  /**
   * A run that starts on an engine idle for longer than the stall timeout, and a check at that
   * moment on another thread: whichever order they interleave in, the run just started is not
   * taken for a stalled one (the check must not see it outstanding with the clock of the idle
   * period before it). Both threads spin to start each round together.
   */
  @Test
  void aRunStartingAfterAnIdlePeriodRacingACheckIsNotTakenForAStall() throws Exception {
    runStartingAfterAnIdlePeriodRacingACheck(20_000);
  }

  /** The check of a run starting after an idle period, at 25 times the rounds. */
  @Test
  @Tag("long")
  void aRunStartingAfterAnIdlePeriodRacingACheckIsNotTakenForAStallManyRounds() throws Exception {
    runStartingAfterAnIdlePeriodRacingACheck(500_000);
  }

  private static void runStartingAfterAnIdlePeriodRacingACheck(int rounds)
      throws InterruptedException {
    EngineWatch[] watch = new EngineWatch[rounds + 1];
    for (int i = 1; i <= rounds; i++) {
      watch[i] = new EngineWatch(T);
      watch[i].started(0); // a run answered at 0, then nothing for 100
      watch[i].progressed(0);
      watch[i].ended();
    }
    AtomicInteger go = new AtomicInteger();
    AtomicInteger checked = new AtomicInteger();
    Thread checker = new Thread(() -> {
      for (int i = 1; i <= rounds; i++) {
        await(go, i);
        watch[i].avoid(100); // the run starts at 100: never stalled at 100
        checked.set(i);
      }
    });
    checker.start();
    int stalled = 0;
    for (int i = 1; i <= rounds; i++) {
      go.set(i);
      watch[i].started(100);
      await(checked, i);
      if (watch[i].avoid(105)) { // 5 after the run started: never stalled
        stalled++;
      }
    }
    checker.join();
    assertEquals(0, stalled, "runs taken for stalled as they started, of " + rounds);
  }

  /** Spins until {@code v} reaches {@code i}, yielding the CPU after a while (one free core). */
  private static void await(AtomicInteger v, int i) {
    int spins = 0;
    while (v.get() < i) {
      if (++spins < 1_000) {
        Thread.onSpinWait();
      } else {
        Thread.yield();
      }
    }
  }
}
