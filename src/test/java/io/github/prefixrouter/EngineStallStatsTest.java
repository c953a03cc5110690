package io.github.prefixrouter;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/**
 * A host that built {@link EngineStallStats} in one of its earlier shapes (before the failing
 * engine's figures, before {@code cacheLosses}, before {@code loadFailures}) still builds it,
 * the components it did not have 0.
 */
class EngineStallStatsTest {

  @Test
  void theComponentsBeforeTheFailingEnginesFiguresStillConstructIt() {
    EngineStallStats old = new EngineStallStats(1, 1, 2, 3, 4, 5, 6, 7);
    assertEquals(new EngineStallStats(1, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0), old);
    assertEquals(7, old.refusedForPeers());
  }

  @Test
  void theComponentsBeforeCacheLossesStillConstructIt() {
    EngineStallStats old = new EngineStallStats(1, 0, 2, 3, 4, 5, 6, 7, 1, 8, 9);
    assertEquals(new EngineStallStats(1, 0, 2, 3, 4, 5, 6, 7, 1, 8, 9, 0, 0), old);
    assertEquals(9, old.failingSpells());
  }

  @Test
  void theComponentsBeforeLoadFailuresStillConstructIt() {
    EngineStallStats old = new EngineStallStats(0, 1, 2, 3, 4, 5, 6, 7, 1, 8, 9, 10);
    assertEquals(new EngineStallStats(0, 1, 2, 3, 4, 5, 6, 7, 1, 8, 9, 10, 0), old);
    assertEquals(10, old.cacheLosses());
    assertEquals(0, old.loadFailures());
  }
}
