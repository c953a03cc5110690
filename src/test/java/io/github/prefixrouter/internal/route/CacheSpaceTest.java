package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class CacheSpaceTest {

  /** A cache of 64 blocks of 16 tokens: a record of 64 blocks, two generations of 32. */
  private static CacheSpace space() {
    return new CacheSpace(1_024, 16);
  }

  /**
   * A node whose cache never fills keeps no record: a process that makes and drops many nodes
   * (a test of churn, a host restarting them) would otherwise hold a mebibyte for each.
   */
  @Test
  void theRecordTakesMemoryOnlyOnceTheCacheEvicts() {
    CacheSpace s = new CacheSpace(1L << 20, 16);
    for (long h = 1; h <= 500; h++) {
      s.onStored(new long[] {h});
    }
    s.onEvicted(new long[0]);
    assertEquals(0, s.heldSlots(), "nothing evicted yet");
    s.onEvicted(new long[] {1});
    assertEquals(2 * 65_536, s.heldSlots(), "two sets of twice the 32,768 blocks each holds");
  }

  @Test
  void aCacheThatHasEvictedNothingPricesNothing() {
    CacheSpace s = space();
    for (long h = 1; h <= 500; h++) {
      s.onStored(new long[] {h});
    }
    assertEquals(0, s.reusesPerResidency());
  }

  @Test
  void evictedContentThatNeverComesBackIsFree() {
    CacheSpace s = space();
    for (long h = 1; h <= 1_000; h++) {
      s.onStored(new long[] {h});
      s.onEvicted(new long[] {h});
    }
    assertEquals(0, s.reusesPerResidency());
  }

  @Test
  void theShareOfEvictedBlocksAskedForAgainIsTheReusesPerResidency() {
    // one block evicted at a time; every fourth comes back 16 evictions later, inside the
    // record. A block stays in it for 32 to 64 evictions, 48 on average, so a quarter of a
    // reuse per 48 evictions is a third of a reuse per residency (64 evictions)
    CacheSpace s = space();
    for (long h = 1; h <= 20_000; h++) {
      s.onEvicted(new long[] {h});
      if (h > 16 && (h - 16) % 4 == 0) {
        s.onStored(new long[] {h - 16});
      }
    }
    assertEquals(1.0 / 3, s.reusesPerResidency(), 0.02);
  }

  @Test
  void moreEvictedContentComingBackPricesSpaceHigherUpToOneReuse() {
    double last = 0;
    for (int every : new int[] {16, 8, 4, 2, 1}) {
      CacheSpace s = space();
      for (long h = 1; h <= 5_000; h++) {
        s.onEvicted(new long[] {h});
        if (h > 8 && (h - 8) % every == 0) {
          s.onStored(new long[] {h - 8});
        }
      }
      double r = s.reusesPerResidency();
      assertTrue(r > last && r <= 1.0, "every " + every + ": " + r + " after " + last);
      last = r;
    }
    assertEquals(1.0, last);
  }

  /**
   * A block stored again and evicted again while the older generation still holds it stays in
   * the record once: entered twice, it would accrue exposure twice and price space too low.
   */
  @Test
  void aBlockEvictedAgainWhileInTheOlderGenerationIsRecordedOnce() {
    CacheSpace s = space();
    for (long h = 1; h <= 33; h++) { // 1..32 fill a generation; 33 starts the next
      s.onEvicted(new long[] {h});
    }
    s.onEvicted(new long[] {5}); // 5 is still in the older generation
    for (long h = 100; h <= 125; h++) {
      s.onEvicted(new long[] {h});
    }
    s.onStored(new long[] {5});
    // 60 evictions; exposure: the older generation 32 × 60 - (1 + ... + 32) = 1392, the
    // current one (33 and 100..125, entered at 33 and 35..60) 27 × 60 - 1268 = 352
    assertEquals(64.0 / (1392 + 352), s.reusesPerResidency(), 1e-12);
  }

  @Test
  void contentEvictedLongerAgoThanTheRecordHoldsIsNotFound() {
    // each block comes back 100 evictions after it left: the record holds at most 64
    CacheSpace s = space();
    for (long h = 1; h <= 5_000; h++) {
      s.onEvicted(new long[] {h});
      if (h > 100) {
        s.onStored(new long[] {h - 100});
      }
    }
    assertEquals(0, s.reusesPerResidency());
  }

  @Test
  void theRecordIsBoundedWhateverTheCapacity() {
    assertEquals(64, space().ghostBlocks());
    assertEquals(CacheSpace.MAX_GHOST_BLOCKS, new CacheSpace(Long.MAX_VALUE, 16).ghostBlocks());
  }

  /**
   * Block hashes follow a fixed, documented algorithm, so a client can choose prompts whose
   * blocks land in one slot of the record's tables. Linear probing without a bound would then
   * walk the whole cluster at every store and eviction (about 2 × 10^9 probes for a record of
   * 65,536 blocks); each look-up stops after {@link CacheSpace#MAX_PROBES} slots.
   */
  @Test
  void blocksCraftedToCollideCostABoundedNumberOfProbesEach() {
    CacheSpace s = new CacheSpace(1L << 20, 16); // a record of 65,536 blocks
    long inverse = 1; // of the slot function's odd multiplier, modulo 2^64 (Newton's method)
    for (int i = 0; i < 6; i++) {
      inverse *= 2 - 0x9E3779B97F4A7C15L * inverse;
    }
    int n = 20_000;
    long[] colliding = new long[n];
    for (int i = 0; i < n; i++) {
      colliding[i] = (i + 1) * inverse; // times the multiplier: below 2^40, so all in slot 0
    }
    for (long h : colliding) {
      s.onEvicted(new long[] {h});
      s.onStored(new long[] {h});
    }
    long perOperation = s.probes() / (2L * n);
    assertTrue(perOperation <= 2 * CacheSpace.MAX_PROBES,
        perOperation + " probes per store or eviction of colliding blocks");
  }
}
