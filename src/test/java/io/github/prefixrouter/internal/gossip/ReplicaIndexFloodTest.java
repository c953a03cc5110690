package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.collect.LongHashSet;
import java.util.function.IntPredicate;
import org.junit.jupiter.api.Test;

/**
 * Fingerprints chosen by a hostile peer to share their home slots: the keyed mix scatters those
 * built against the public mix, and the probe limit bounds the damage of those built against
 * the secret itself.
 */
class ReplicaIndexFloodTest {

  static final long SEED = 0x6A09_E667_F3BC_C909L;

  /** The first {@code n} non-zero 32-bit fingerprints accepted by {@code chosen}. */
  static long[] choose(int n, IntPredicate chosen) {
    long[] out = new long[n];
    int k = 0;
    for (long f = 1; k < n; f++) {
      if (chosen.test((int) f)) {
        out[k++] = f;
      }
    }
    return out;
  }

  /**
   * 20,000 fingerprints whose homes under the public, unkeyed mix (the one the index used
   * before it was keyed, {@code fmix64} of the fingerprint) lie in the first 64 slots of every
   * table of 64 to 32,768 slots. Unkeyed, they form one cluster of 20,000 slots and the last
   * one sits about 20,000 slots from its home; keyed, they land like any other fingerprints.
   */
  @Test
  void fingerprintsAimedAtThePublicMixDoNotCluster() {
    long[] hostile = choose(20_000, f -> (LongHashSet.mix(f & 0xFFFF_FFFFL) & 0x7FFF) < 64);
    ReplicaIndex index = new ReplicaIndex(2, 1 << 20, 1 << 22, SEED);
    for (long f : hostile) {
      assertEquals(1, index.add(0, f));
    }
    index.checkInvariants();
    assertEquals(hostile.length, index.blocks(0));
    assertEquals(0, index.probeRefusals());
    // lookups probe at most maxDisplacement + 1 slots; a miss stops at the cluster's end
    assertTrue(index.maxDisplacement() <= 128, "displacement " + index.maxDisplacement());
    assertTrue(index.longestCluster() <= 512, "cluster " + index.longestCluster());
    int[] out = new int[2];
    for (long f : hostile) {
      assertEquals(1, index.leadingBlocks(new long[] {f}, 1, out, 2));
    }
  }

  /**
   * A peer that knew the secret could still aim all its fingerprints at one home: the first
   * {@code MAX_DISPLACEMENT + 1} fill the slots from there on, the rest are refused like blocks
   * over a cap, and no lookup reads more than that run.
   */
  @Test
  void fingerprintsSharingOneHomeAreRefusedPastTheProbeLimit() {
    // home 4,000 in a 4,096-slot table (and the same slot modulo every smaller table), so the
    // run wraps around the end of the table
    long[] hostile = choose(1_000, f -> (ReplicaIndex.home(f, SEED) & 4095) == 4000);
    ReplicaIndex index = new ReplicaIndex(2, 1 << 20, 1 << 22, SEED);
    int accepted = 0;
    for (long f : hostile) {
      int r = index.add(1, f);
      assertTrue(r == 1 || r == -2, "add returned " + r);
      accepted += r == 1 ? 1 : 0;
      index.checkInvariants();
    }
    int limit = ReplicaIndex.MAX_DISPLACEMENT;
    assertEquals(limit + 1, accepted);
    assertEquals(hostile.length - accepted, index.probeRefusals());
    assertEquals(hostile.length - accepted, index.refused(1));
    assertEquals(accepted, index.blocks(1));
    assertTrue(index.maxDisplacement() <= limit, "displacement " + index.maxDisplacement());
    for (int i = 0; i < hostile.length; i++) {
      assertEquals(i < accepted, index.contains(1, hostile[i]), "fingerprint " + i);
    }
    // room near the home again once some leave
    assertTrue(index.remove(1, hostile[0]));
    assertEquals(1, index.add(1, hostile[accepted]));
    assertFalse(index.contains(1, hostile[0]));
    index.checkInvariants();
  }
}
