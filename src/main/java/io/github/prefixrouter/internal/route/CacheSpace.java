package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.internal.tree.BlockEventListener;
import java.util.Arrays;

/**
 * What cache space is worth at this node: how often the content its cache evicts is asked for
 * again soon after.
 *
 * <p>Design: a prefix copied here for local caching takes cache space for as long as it stays,
 * and the content it displaces would have saved a prefill each time it was reused. That is
 * measured on the local tree's own block events (both tree modes report them: a self-managed
 * tree's LRU evictions, an engine-driven tree's engine events), as an ARC cache keeps "ghost"
 * entries:
 * <ul>
 *   <li>Ghost record: the hashes of the most recently evicted blocks, at most {@link #ghostBlocks}
 *       of them (the cache's capacity in blocks, so about one residency of evictions once the
 *       cache is full, and never more than {@link #MAX_GHOST_BLOCKS}). It is two open-addressed
 *       hash sets, the current one and the one before: a block evicted goes into the current
 *       one; when that holds half the record, the older set is emptied and the two swap. So the
 *       record holds between half and all of the {@link #ghostBlocks} last evicted blocks, in
 *       fixed memory, made at the first eviction (a node whose cache never fills holds none).
 *   <li>Reuse: a block stored again while in the ghost record was evicted and asked for again
 *       soon after. Time is counted in evictions: each block in the record accrues exposure,
 *       one unit per block evicted after it entered, and {@code found / exposure} is the rate at
 *       which evicted blocks are asked for again, per block and per eviction. Times the cache's
 *       capacity in blocks (the evictions of one residency once the cache is full) it is
 *       {@code r}, the reuses per residency of the content at the cache's margin, at most 1;
 *       0 while the cache has never evicted. A generation leaving the record adds its counts to
 *       a running total that decays by {@code e^(-generation / capacity)} per generation, so
 *       {@code r} follows about the last residency's evictions and keeps its value while
 *       nothing is evicted.
 *   <li>Price: a token held for one residency displaces a token that would have been reused
 *       {@code r} times, each saving a prefill: {@code prefill × r} per token per residency
 *       ({@link RoutePlanner} charges a copy for the tokens it copies and the residencies it is
 *       expected to stay).
 *   <li>A cleared tree (the engine's cache lost) is no eviction: nothing is recorded.
 *   <li>Cost: the work is in the tree's event calls, a hash probe per block stored or evicted
 *       (at most {@link #MAX_PROBES} slots, however the hashes were chosen); a decision reads
 *       {@code r} only when it weighs a buy. Methods synchronize; the lock is a leaf (nothing is
 *       called while it is held).
 * </ul>
 */
final class CacheSpace implements BlockEventListener {

  /** Largest ghost record, in blocks (two sets of as many slots: 1 MiB). */
  static final int MAX_GHOST_BLOCKS = 1 << 16;

  /**
   * Slots a look-up or insertion probes at most. Block hashes follow a fixed algorithm, so
   * prompts can be chosen whose blocks share a slot; unbounded probing would walk their whole
   * cluster at every event. A block that finds no free slot within the bound is not recorded
   * (at half load, honest hashes almost never need more than a few probes).
   */
  static final int MAX_PROBES = 16;

  private final int ghostBlocks;
  private final int generationBlocks;
  private final double capacityBlocks;
  /** Weight the finished generations keep when another finishes (one residency's decay). */
  private final double keep;
  private final int slots;
  private final int mask;
  /** The record's two sets, made at the first eviction: a cache that never evicts holds none. */
  private long[] current;
  private long[] previous;
  // per generation: blocks held, the sum of the eviction counts they entered at, blocks found
  private int currentSize;
  private long currentEntered;
  private long currentFound;
  private int previousSize;
  private long previousEntered;
  private long previousFound;

  /** Blocks evicted so far: the record's clock. */
  private long evicted;
  /** Slots probed so far (tests). */
  private long probes;
  /** Blocks found again and exposure (blocks × evictions spent in the record), generations done. */
  private double doneFound;
  private double doneExposure;

  /**
   * @param capacityTokens the local cache's capacity in tokens
   * @param blockSize tokens per block
   */
  CacheSpace(long capacityTokens, int blockSize) {
    long blocks = Math.max(2, capacityTokens / Math.max(1, blockSize));
    this.capacityBlocks = blocks;
    this.ghostBlocks = (int) Math.min(MAX_GHOST_BLOCKS, blocks);
    this.generationBlocks = Math.max(1, ghostBlocks / 2);
    this.slots = Integer.highestOneBit(generationBlocks * 2 - 1) << 1; // at most half full
    this.mask = slots - 1;
    this.keep = Math.exp(-generationBlocks / capacityBlocks);
  }

  /** Blocks the ghost record remembers at most. */
  int ghostBlocks() {
    return ghostBlocks;
  }

  @Override
  public synchronized void onEvicted(long[] blockHashes) {
    if (current == null) {
      if (blockHashes.length == 0) {
        return;
      }
      current = new long[slots];
      previous = new long[slots];
    }
    for (long h : blockHashes) {
      evicted++;
      long k = h == 0 ? 1 : h; // 0 marks an empty slot
      if (contains(current, k) || contains(previous, k)) {
        continue;
      }
      if (currentSize >= generationBlocks) {
        // the older generation leaves the record: what it saw is final
        doneFound = doneFound * keep + previousFound;
        doneExposure = doneExposure * keep + exposure(previousSize, previousEntered);
        long[] t = previous;
        Arrays.fill(t, 0);
        previous = current;
        previousSize = currentSize;
        previousEntered = currentEntered;
        previousFound = currentFound;
        current = t;
        currentSize = 0;
        currentEntered = 0;
        currentFound = 0;
      }
      if (!add(current, k)) {
        continue; // its slots are taken: not recorded (MAX_PROBES)
      }
      currentSize++;
      currentEntered += evicted;
    }
  }

  @Override
  public synchronized void onStored(long[] blockHashes) {
    if (evicted == 0) {
      return; // nothing evicted yet: nothing to find
    }
    for (long h : blockHashes) {
      long k = h == 0 ? 1 : h;
      if (contains(current, k)) {
        currentFound++;
      } else if (contains(previous, k)) {
        previousFound++;
      }
    }
  }

  /**
   * Reuses per residency of the content this node's cache evicts: the rate at which blocks in
   * the ghost record are stored again, per block and per block evicted since it entered, times
   * the cache's capacity in blocks (a residency's worth of evictions once the cache is full);
   * 0 before any eviction, at most 1.
   */
  synchronized double reusesPerResidency() {
    double exposure = doneExposure + exposure(currentSize, currentEntered)
        + exposure(previousSize, previousEntered);
    if (!(exposure > 0)) {
      return 0;
    }
    double found = doneFound + currentFound + previousFound;
    return Math.min(1.0, found / exposure * capacityBlocks);
  }

  /** Blocks × evictions spent in the record by a generation of {@code size} blocks. */
  private double exposure(int size, long entered) {
    return (double) size * evicted - entered;
  }

  /** Slots the record's two sets take now: 0 until the first eviction (tests). */
  synchronized int heldSlots() {
    return current == null ? 0 : 2 * slots;
  }

  /** Slots probed since this record was made (tests). */
  synchronized long probes() {
    return probes;
  }

  private boolean contains(long[] table, long k) {
    int i = slot(k);
    for (int n = 0; n < MAX_PROBES; n++) {
      probes++;
      long e = table[i];
      if (e == k) {
        return true;
      }
      if (e == 0) {
        return false;
      }
      i = (i + 1) & mask;
    }
    return false;
  }

  /** Adds {@code k}, unless its {@link #MAX_PROBES} slots are taken: whether it was added. */
  private boolean add(long[] table, long k) {
    int i = slot(k);
    for (int n = 0; n < MAX_PROBES; n++) {
      probes++;
      if (table[i] == 0) {
        table[i] = k;
        return true;
      }
      i = (i + 1) & mask;
    }
    return false;
  }

  private int slot(long k) {
    long h = k * 0x9E3779B97F4A7C15L;
    return (int) (h >>> 40) & mask;
  }
}
