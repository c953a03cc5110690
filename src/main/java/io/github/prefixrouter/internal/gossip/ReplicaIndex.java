package io.github.prefixrouter.internal.gossip;

import java.util.Arrays;

/**
 * The block hashes every peer holds, indexed by block hash, answering "how many leading blocks
 * of this chain does each peer hold" in one pass over the chain.
 *
 * <h2>Design notes</h2>
 *
 * <p>Peers are numbered by dense <em>slots</em> {@code 0..maxSlots-1}. One open-addressing
 * table (linear probing, backward-shift deletion, key 0 held aside) maps a block hash to its
 * holders. The value is an {@code int}: {@code >= 0} is the single holder's slot (the common
 * case, no further memory); {@code < 0} is {@code -(cell + 1)}, the head of a linked list of
 * holder cells kept in two parallel {@code int} arrays ({@code cellSlot}, {@code cellNext}) with
 * a free list. A replicated (peer, block) pair therefore costs 12 bytes of table entry divided
 * by the load factor (between 3/8 and 3/4) when it is the block's only holder, and 8 more bytes
 * per holder when several peers share the block: at most 32 bytes for a lone holder right after
 * a resize, about 20 on average, less when peers share prefixes.
 *
 * <p>{@link #leadingBlocks} walks the chain once: at block {@code i}, every holder {@code s}
 * whose count is still {@code i} moves to {@code i + 1}; the walk stops as soon as no peer is
 * still matching. The cost per block is the number of holders of that block, never the number
 * of peers.
 *
 * <p>Per-slot enumeration (for snapshots) and per-slot removal (a dead peer, a new generation)
 * scan the whole table. Both are rare events, and avoiding a second per-peer set keeps the
 * memory per block within budget.
 *
 * <p>Caps: {@link #add} refuses a block when its peer already holds {@code maxPerSlot} blocks or
 * the index holds {@code maxTotal} pairs. Refusals are counted per slot; the replica is then a
 * subset of the owner's set (the router underestimates, never overestimates). Removals are
 * always applied.
 *
 * <p>Not thread-safe: {@link GossipEngine} guards it with a read-write lock.
 */
final class ReplicaIndex {

  private static final int MIN_CAPACITY = 16;
  private static final int NO_CELL = -1;

  private final int maxSlots;
  private final long maxPerSlot;
  private final long maxTotal;

  private long[] keys;
  private int[] vals;
  private int mask;
  private int keyCount; // keys in table, excluding the zero key
  private boolean hasZero;
  private int zeroVal;

  private int[] cellSlot = new int[0];
  private int[] cellNext = new int[0];
  private int freeCell = NO_CELL;
  private int cellsUsed;

  private final long[] perSlot;
  private final long[] refusedPerSlot;
  private long pairs;

  ReplicaIndex(int maxSlots, long maxPerSlot, long maxTotal) {
    this.maxSlots = maxSlots;
    this.maxPerSlot = maxPerSlot;
    this.maxTotal = maxTotal;
    this.perSlot = new long[maxSlots];
    this.refusedPerSlot = new long[maxSlots];
    this.keys = new long[MIN_CAPACITY];
    this.vals = new int[MIN_CAPACITY];
    this.mask = MIN_CAPACITY - 1;
  }

  int maxSlots() {
    return maxSlots;
  }

  /** (peer, block) pairs held. */
  long pairs() {
    return pairs;
  }

  /** Distinct block hashes held by at least one peer. */
  int distinctBlocks() {
    return keyCount + (hasZero ? 1 : 0);
  }

  long blocks(int slot) {
    return perSlot[slot];
  }

  /** Blocks refused for {@code slot} by a cap since its last {@link #clearSlot}. */
  long refused(int slot) {
    return refusedPerSlot[slot];
  }

  /** Bytes held by the index arrays (table and cells), for the bytes-per-block figure. */
  long retainedBytes() {
    return 32L + 8L * keys.length + 4L * vals.length + 4L * cellSlot.length + 4L * cellNext.length
        + 16L * maxSlots;
  }

  boolean contains(int slot, long hash) {
    int v;
    if (hash == 0) {
      if (!hasZero) {
        return false;
      }
      v = zeroVal;
    } else {
      int i = find(hash);
      if (i < 0) {
        return false;
      }
      v = vals[i];
    }
    if (v >= 0) {
      return v == slot;
    }
    for (int c = -v - 1; c != NO_CELL; c = cellNext[c]) {
      if (cellSlot[c] == slot) {
        return true;
      }
    }
    return false;
  }

  /**
   * Records that {@code slot} holds {@code hash}.
   *
   * @return 1 if added, 0 if already present, -1 if refused by a cap
   */
  int add(int slot, long hash) {
    if (hash == 0) {
      if (!hasZero) {
        if (!roomFor(slot)) {
          return -1;
        }
        hasZero = true;
        zeroVal = slot;
        counted(slot);
        return 1;
      }
      int nv = addHolder(zeroVal, slot);
      if (nv == zeroVal || nv == Integer.MIN_VALUE) {
        return nv == Integer.MIN_VALUE ? -1 : 0;
      }
      zeroVal = nv;
      counted(slot);
      return 1;
    }
    int i = mix(hash) & mask;
    for (; ; i = (i + 1) & mask) {
      long k = keys[i];
      if (k == hash) {
        int nv = addHolder(vals[i], slot);
        if (nv == Integer.MIN_VALUE) {
          return -1;
        }
        if (nv == vals[i] && !listGrew) {
          return 0;
        }
        vals[i] = nv;
        counted(slot);
        return 1;
      }
      if (k == 0) {
        break;
      }
    }
    if (!roomFor(slot)) {
      return -1;
    }
    keys[i] = hash;
    vals[i] = slot;
    counted(slot);
    if (++keyCount > (keys.length >>> 2) * 3) {
      rehash(keys.length << 1);
    }
    return 1;
  }

  private boolean listGrew;

  /**
   * Adds {@code slot} to the holder value {@code v}; returns the new value, {@code v} itself if
   * the slot was already there (with {@link #listGrew} false), or MIN_VALUE if refused.
   */
  private int addHolder(int v, int slot) {
    listGrew = false;
    if (v >= 0) {
      if (v == slot) {
        return v;
      }
      if (!roomFor(slot)) {
        return Integer.MIN_VALUE;
      }
      int second = newCell(slot, NO_CELL);
      int first = newCell(v, second);
      listGrew = true;
      return -first - 1;
    }
    int head = -v - 1;
    for (int c = head; c != NO_CELL; c = cellNext[c]) {
      if (cellSlot[c] == slot) {
        return v;
      }
    }
    if (!roomFor(slot)) {
      return Integer.MIN_VALUE;
    }
    int c = newCell(slot, head);
    listGrew = true;
    return -c - 1;
  }

  private boolean roomFor(int slot) {
    if (perSlot[slot] >= maxPerSlot || pairs >= maxTotal) {
      refusedPerSlot[slot]++;
      return false;
    }
    return true;
  }

  private void counted(int slot) {
    perSlot[slot]++;
    pairs++;
  }

  /** Records that {@code slot} no longer holds {@code hash}; returns false if it did not. */
  boolean remove(int slot, long hash) {
    if (hash == 0) {
      if (!hasZero) {
        return false;
      }
      int nv = removeHolder(zeroVal, slot);
      if (nv == zeroVal && !listShrank) {
        return false;
      }
      if (nv == EMPTY) {
        hasZero = false;
      } else {
        zeroVal = nv;
      }
      uncounted(slot);
      return true;
    }
    int i = find(hash);
    if (i < 0) {
      return false;
    }
    int nv = removeHolder(vals[i], slot);
    if (nv == vals[i] && !listShrank) {
      return false;
    }
    uncounted(slot);
    if (nv == EMPTY) {
      shiftBack(i);
      keyCount--;
      maybeShrink();
    } else {
      vals[i] = nv;
    }
    return true;
  }

  private static final int EMPTY = Integer.MIN_VALUE;
  private boolean listShrank;

  private int removeHolder(int v, int slot) {
    listShrank = false;
    if (v >= 0) {
      if (v == slot) {
        listShrank = true;
        return EMPTY;
      }
      return v;
    }
    int head = -v - 1;
    int prev = NO_CELL;
    for (int c = head; c != NO_CELL; prev = c, c = cellNext[c]) {
      if (cellSlot[c] == slot) {
        listShrank = true;
        int next = cellNext[c];
        freeCell(c);
        if (prev == NO_CELL) {
          head = next;
        } else {
          cellNext[prev] = next;
        }
        break;
      }
    }
    if (!listShrank) {
      return v;
    }
    // a single remaining holder goes back inline
    if (cellNext[head] == NO_CELL) {
      int only = cellSlot[head];
      freeCell(head);
      return only;
    }
    return -head - 1;
  }

  private void uncounted(int slot) {
    perSlot[slot]--;
    pairs--;
  }

  /** Removes every block of {@code slot} (scans the table) and resets its refusal count. */
  void clearSlot(int slot) {
    refusedPerSlot[slot] = 0;
    if (perSlot[slot] == 0) {
      return;
    }
    for (long k : blocksOf(slot)) {
      remove(slot, k);
    }
  }

  /** Every block hash {@code slot} holds (scans the table). */
  long[] blocksOf(int slot) {
    long[] out = new long[(int) perSlot[slot]];
    int n = 0;
    if (hasZero && holds(zeroVal, slot)) {
      out[n++] = 0;
    }
    for (int i = 0; i < keys.length && n < out.length; i++) {
      if (keys[i] != 0 && holds(vals[i], slot)) {
        out[n++] = keys[i];
      }
    }
    return n == out.length ? out : Arrays.copyOf(out, n);
  }

  private boolean holds(int v, int slot) {
    if (v >= 0) {
      return v == slot;
    }
    for (int c = -v - 1; c != NO_CELL; c = cellNext[c]) {
      if (cellSlot[c] == slot) {
        return true;
      }
    }
    return false;
  }

  /**
   * For each slot, how many leading blocks of {@code chain[0..n)} it holds.
   *
   * @param outPerSlot receives the counts; entries {@code 0..slotLimit-1} are overwritten
   * @param slotLimit one more than the highest slot that may hold blocks
   * @return the largest count over all slots
   */
  int leadingBlocks(long[] chain, int n, int[] outPerSlot, int slotLimit) {
    Arrays.fill(outPerSlot, 0, slotLimit, 0);
    int best = 0;
    for (int i = 0; i < n; i++) {
      long h = chain[i];
      int v;
      if (h == 0) {
        if (!hasZero) {
          break;
        }
        v = zeroVal;
      } else {
        int idx = find(h);
        if (idx < 0) {
          break;
        }
        v = vals[idx];
      }
      boolean advanced = false;
      if (v >= 0) {
        if (outPerSlot[v] == i) {
          outPerSlot[v] = i + 1;
          advanced = true;
        }
      } else {
        for (int c = -v - 1; c != NO_CELL; c = cellNext[c]) {
          int s = cellSlot[c];
          if (outPerSlot[s] == i) {
            outPerSlot[s] = i + 1;
            advanced = true;
          }
        }
      }
      if (!advanced) {
        break;
      }
      best = i + 1;
    }
    return best;
  }

  private int find(long hash) {
    for (int i = mix(hash) & mask; ; i = (i + 1) & mask) {
      long k = keys[i];
      if (k == hash) {
        return i;
      }
      if (k == 0) {
        return -1;
      }
    }
  }

  private static int mix(long key) {
    return LongHashSet.mix(key);
  }

  private int newCell(int slot, int next) {
    int c;
    if (freeCell != NO_CELL) {
      c = freeCell;
      freeCell = cellNext[c];
    } else {
      if (cellsUsed == cellSlot.length) {
        int cap = Math.max(16, cellSlot.length * 2);
        cellSlot = Arrays.copyOf(cellSlot, cap);
        cellNext = Arrays.copyOf(cellNext, cap);
      }
      c = cellsUsed++;
    }
    cellSlot[c] = slot;
    cellNext[c] = next;
    liveCells++;
    return c;
  }

  private int liveCells;

  private void freeCell(int c) {
    cellSlot[c] = -1;
    cellNext[c] = freeCell;
    freeCell = c;
    liveCells--;
    if (liveCells == 0 && cellSlot.length > 0) {
      // no shared block left: release the cell arrays entirely
      cellSlot = new int[0];
      cellNext = new int[0];
      cellsUsed = 0;
      freeCell = NO_CELL;
    }
  }

  private void shiftBack(int hole) {
    int i = hole;
    while (true) {
      i = (i + 1) & mask;
      long k = keys[i];
      if (k == 0) {
        break;
      }
      int home = mix(k) & mask;
      if (((i - home) & mask) >= ((i - hole) & mask)) {
        keys[hole] = k;
        vals[hole] = vals[i];
        hole = i;
      }
    }
    keys[hole] = 0;
    vals[hole] = 0;
  }

  private void maybeShrink() {
    if (keys.length > MIN_CAPACITY && keyCount < (keys.length >>> 3)) {
      rehash(keys.length >>> 1);
    }
  }

  private void rehash(int newCapacity) {
    long[] oldKeys = keys;
    int[] oldVals = vals;
    keys = new long[newCapacity];
    vals = new int[newCapacity];
    mask = newCapacity - 1;
    for (int j = 0; j < oldKeys.length; j++) {
      long k = oldKeys[j];
      if (k != 0) {
        int i = mix(k) & mask;
        while (keys[i] != 0) {
          i = (i + 1) & mask;
        }
        keys[i] = k;
        vals[i] = oldVals[j];
      }
    }
  }

  /** Checks the index's invariants; throws {@link IllegalStateException} naming the first one broken. */
  void checkInvariants() {
    long[] counted = new long[maxSlots];
    int keysSeen = 0;
    for (int i = 0; i < keys.length; i++) {
      if (keys[i] == 0) {
        continue;
      }
      keysSeen++;
      if (find(keys[i]) != i) {
        throw new IllegalStateException("key at " + i + " not reachable from its home");
      }
      countHolders(vals[i], counted);
    }
    if (hasZero) {
      countHolders(zeroVal, counted);
    }
    if (keysSeen != keyCount) {
      throw new IllegalStateException("keyCount " + keyCount + " but " + keysSeen + " keys");
    }
    long total = 0;
    for (int s = 0; s < maxSlots; s++) {
      if (counted[s] != perSlot[s]) {
        throw new IllegalStateException("slot " + s + " count " + perSlot[s] + " != " + counted[s]);
      }
      if (perSlot[s] > maxPerSlot) {
        throw new IllegalStateException("slot " + s + " over its cap");
      }
      total += counted[s];
    }
    if (total != pairs || pairs > maxTotal) {
      throw new IllegalStateException("pairs " + pairs + " != " + total + " or over cap");
    }
  }

  private void countHolders(int v, long[] counted) {
    if (v >= 0) {
      counted[v]++;
      return;
    }
    int n = 0;
    for (int c = -v - 1; c != NO_CELL; c = cellNext[c]) {
      counted[cellSlot[c]]++;
      if (++n > maxSlots) {
        throw new IllegalStateException("holder list cycle");
      }
    }
    if (n < 2) {
      throw new IllegalStateException("holder list of " + n + " should be inline");
    }
  }
}
