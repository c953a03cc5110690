package io.github.prefixrouter;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** A host that built {@link GossipStats} before it counted refused SYNs still builds it. */
class GossipStatsTest {

  @Test
  void theComponentsBeforeSynsRefusedStillConstructItWithNoneRefused() {
    GossipStats old = new GossipStats(7, true, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15);
    assertEquals(
        new GossipStats(7, true, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 0), old);
    assertEquals(0, old.synsRefused());
    assertEquals(15, old.blocksRefused());
  }
}
