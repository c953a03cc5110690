package io.github.prefixrouter.internal.gossip;

import java.util.Arrays;

/**
 * One replica's store numbers: for every block the replica holds, the position at which its
 * origin published it ({@link LocalSummary} numbers the fingerprints it publishes as stored
 * 1, 2, 3, ... over a generation), so that an eviction naming a store number resolves to the
 * fingerprint to remove.
 *
 * <h2>Design notes</h2>
 *
 * <p>Store numbers only grow, so entries are appended in ascending order to two parallel
 * {@code int} arrays: the store number as an offset from a base, and the fingerprint. A lookup
 * is a binary search. A removal marks its entry dead by flipping the offset's sign (keeping the
 * order searchable); once an eighth of the entries are dead the arrays are compacted (to 1/8
 * above the live entries) and the base moved to the oldest live entry; they grow by 1/8. That
 * costs 8 bytes per live entry, times at most 8/7 for dead entries not yet compacted and 9/8
 * for growth: 8 to 10.3 bytes, so that with the replica index's at most 21.3 bytes per lone
 * block a replicated block stays within 32 bytes (the benchmark reports the figure). Compaction
 * and growth are linear but run at most once per {@code n/8} removals or appends, so each costs
 * O(1) amortized (plus a removal's O(log n) search).
 *
 * <p>Offsets are 31-bit: a block still held 2^31 stores after the oldest one in the arrays
 * after compaction cannot be appended ({@link #append} returns false and the caller refuses
 * it, as with a full replica). The base is always the store number of the first entry, live or
 * dead, and the index of the first live entry is kept ({@code firstLive}, advanced as entries
 * die: O(1) amortized), so an append past the 31-bit range compacts only when that moves the
 * base far enough to place it; otherwise it is refused in O(1) without touching the arrays,
 * however many appends are refused in a row. Such a compaction costs O(n) and needs the oldest
 * live entry to have been removed since the last one, so it runs at most once per removal of the
 * oldest entry: the worst case, every removal of the oldest entry followed by an append at the
 * 2^31 edge, costs O(n) per removal, and requires blocks held across 2^31 stores of their origin
 * (over a year at 60 stores per second).
 *
 * <p>Not thread-safe (the engine's lock guards it).
 */
final class StoreOrder {

  private static final int[] NONE = new int[0];

  private long base;
  private int[] offsets = NONE; // store - base, ascending; negative (-offset - 1) when dead
  private int[] fingerprints = NONE;
  private int n;
  private int dead;
  /** The index of the first live entry, {@code n} if none. */
  private int firstLive;
  private long compactions;

  /** Live entries. */
  int size() {
    return n - dead;
  }

  /** The largest store number appended since the last {@link #clear} (0 if none). */
  long lastStore() {
    return n == 0 ? 0 : base + offset(n - 1);
  }

  private int offset(int i) {
    int o = offsets[i];
    return o < 0 ? -o - 1 : o;
  }

  /**
   * Appends {@code store → fingerprint}; {@code store} must exceed every store number appended
   * before. Returns false (and changes nothing) if it lies too far past the oldest live entry.
   */
  boolean append(long store, long fingerprint) {
    if (store <= lastStore()) {
      throw new IllegalArgumentException("store " + store + " not after " + lastStore());
    }
    if (n > 0 && store - base > Integer.MAX_VALUE) {
      // compaction moves the base to the first live entry: worth its O(n) only if that lets
      // this store in (otherwise nothing changed since the last refusal)
      if (firstLive < n && store - (base + offsets[firstLive]) > Integer.MAX_VALUE) {
        return false;
      }
      compact();
    }
    if (n == 0) {
      base = store;
    }
    if (n == offsets.length) {
      int cap = Math.max(16, n + (n >>> 3));
      offsets = Arrays.copyOf(offsets, cap);
      fingerprints = Arrays.copyOf(fingerprints, cap);
    }
    offsets[n] = (int) (store - base);
    fingerprints[n] = (int) fingerprint;
    n++;
    return true;
  }

  /** The index of the live entry for {@code store}, or -1. */
  int find(long store) {
    long off = store - base;
    if (n == 0 || off < 0 || off > Integer.MAX_VALUE) {
      return -1;
    }
    int lo = 0;
    int hi = n - 1;
    while (lo <= hi) {
      int mid = (lo + hi) >>> 1;
      int o = offset(mid);
      if (o < off) {
        lo = mid + 1;
      } else if (o > off) {
        hi = mid - 1;
      } else {
        return offsets[mid] < 0 ? -1 : mid;
      }
    }
    return -1;
  }

  /** The fingerprint of entry {@code i} (from {@link #find}). */
  long fingerprintAt(int i) {
    return fingerprints[i] & 0xFFFF_FFFFL;
  }

  /** Removes entry {@code i} (from {@link #find}). */
  void removeAt(int i) {
    if (offsets[i] < 0) {
      throw new IllegalStateException("entry " + i + " already removed");
    }
    offsets[i] = -offsets[i] - 1;
    dead++;
    while (firstLive < n && offsets[firstLive] < 0) {
      firstLive++;
    }
    if (dead > 8 && 8 * dead > n) {
      compact();
    }
  }

  void clear() {
    offsets = NONE;
    fingerprints = NONE;
    n = 0;
    dead = 0;
    firstLive = 0;
    base = 0;
  }

  /** The live store numbers and fingerprints, ascending by store number. */
  long[][] toArrays() {
    long[] stores = new long[size()];
    long[] fps = new long[stores.length];
    int k = 0;
    for (int i = 0; i < n; i++) {
      if (offsets[i] >= 0) {
        stores[k] = base + offsets[i];
        fps[k++] = fingerprints[i] & 0xFFFF_FFFFL;
      }
    }
    return new long[][] {stores, fps};
  }

  /** The live fingerprints, ascending by store number. */
  long[] fingerprints() {
    long[] fps = new long[size()];
    int k = 0;
    for (int i = 0; i < n; i++) {
      if (offsets[i] >= 0) {
        fps[k++] = fingerprints[i] & 0xFFFF_FFFFL;
      }
    }
    return fps;
  }

  long retainedBytes() {
    return 48L + 4L * offsets.length + 4L * fingerprints.length;
  }

  /** Compactions run since construction (tests bound them). */
  long compactions() {
    return compactions;
  }

  private void compact() {
    compactions++;
    int live = n - dead;
    int cap = live == 0 ? 0 : Math.max(16, live + (live >>> 3));
    int[] o = new int[cap];
    int[] f = new int[cap];
    long newBase = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
      if (offsets[i] >= 0) {
        long store = base + offsets[i];
        if (k == 0) {
          newBase = store;
        }
        o[k] = (int) (store - newBase);
        f[k++] = fingerprints[i];
      }
    }
    offsets = o;
    fingerprints = f;
    base = newBase;
    n = k;
    dead = 0;
    firstLive = 0;
  }

  /** Checks ascending offsets and the dead count; throws {@link IllegalStateException}. */
  void checkInvariants() {
    int d = 0;
    for (int i = 0; i < n; i++) {
      if (offsets[i] < 0) {
        d++;
      }
      if (i > 0 && offset(i) <= offset(i - 1)) {
        throw new IllegalStateException("store order not ascending at " + i);
      }
    }
    if (d != dead) {
      throw new IllegalStateException("dead entries " + dead + " != " + d);
    }
    int first = 0;
    while (first < n && offsets[first] < 0) {
      first++;
    }
    if (first != firstLive) {
      throw new IllegalStateException("first live entry " + firstLive + " != " + first);
    }
    if (n > 0 && offset(0) != 0) {
      throw new IllegalStateException("base is not the first entry's store number");
    }
  }
}
