package io.github.prefixrouter.internal.gossip;

import io.github.prefixrouter.internal.collect.LongHashSet;
import java.util.Arrays;
import java.util.concurrent.locks.StampedLock;

/**
 * The block hashes every peer holds, indexed by block hash, answering "how many leading blocks
 * of this chain does each peer hold" in one pass over the chain.
 *
 * <h2>Design notes</h2>
 *
 * <p>Peers are numbered by dense <em>slots</em> {@code 0..maxSlots-1}. One open-addressing
 * table (linear probing, backward-shift deletion, key 0 held aside) maps a block hash to its
 * holders. The value is an {@code int}: {@code >= 0} is the single holder's slot (the common
 * case, no further memory); {@code < 0} is {@code -(cell + 1)}, the head of a short linked list
 * of <em>word cells</em> that together form a bitmap of the holders: each cell is one 64-slot
 * word of the bitmap ({@code cellWord} = slot / 64, {@code cellBits} = the holders among those
 * 64 slots, never 0), kept in parallel arrays with a free list. With at most 64 slots in use a
 * shared block is exactly one cell (16 bytes, whatever the number of holders); beyond, one cell
 * per 64-slot word that has a holder. Keys are the 32-bit {@link BlockFingerprint}s the
 * replicas hold, stored in an {@code int} array. A replicated (peer, block) pair therefore
 * costs 8 bytes of table entry divided by the load factor (3/8 to 3/4) when it is the block's
 * only holder, and at most 16 more bytes per holder (usually far less) when several peers share
 * the block.
 *
 * <p>{@link #leadingBlocks} walks the chain once with the set of peers still matching as a
 * bitmap: block 0's holders start it, each later block intersects it with the block's holders
 * ({@code alive &= holders}, one word when at most 64 slots are in use), a peer that drops out
 * gets its count then, and the walk stops as soon as no peer remains. The cost per block is one
 * probe plus one AND per live 64-slot word, never the number of peers. The chain is pulled from
 * a {@link BlockChainSource} in chunks, so a prompt is hashed only a chunk past the longest
 * match.
 *
 * <p><b>Concurrency.</b> Mutations are serialized by the owner ({@link GossipEngine}'s write
 * lock) and each one also holds this index's {@link StampedLock} write lock. {@link
 * #leadingBlocks} is lock-free in the common case: it runs under an optimistic stamp, reading
 * only local copies of the arrays with bounded probe and cell walks (every walk over a block's
 * holder cells stops after as many cells as there are 64-slot words, every probe sequence after
 * the table's longest displacement; a torn read can produce a wrong count or an exception,
 * never a hang), and keeps the result only if the stamp is still valid; otherwise it retries,
 * and after a few failed attempts takes the read lock. Every answer therefore equals the index's
 * contents at one instant. Every other method must be called under the owner's lock.
 *
 * <p>The index keeps no per-slot list of blocks (a second per-peer set would take the memory
 * per block past its budget), so per-slot enumeration ({@link #blocksOf}, for tests) scans the
 * whole table. Removing a slot's blocks (a dead peer, a new generation, a clear, a replica
 * restarted or replaced by a snapshot) must not: peers can cause it with a few bytes (a STORE
 * followed by a CLEAR costs 6), and a scan of a table holding 4,194,304 pairs took about 40 ms.
 * The caller names the slot's blocks instead ({@link #clearSlot(int, long[])}, from the
 * replica's store numbers), which costs O(blocks removed), paid for by the bytes that brought
 * them.
 *
 * <p>Caps: {@link #add} refuses a block when its peer already holds {@code maxPerSlot} blocks or
 * the index holds {@code maxTotal} pairs. Refusals are counted per slot; the replica is then a
 * subset of the owner's set (the router underestimates, never overestimates). Removals are
 * always applied.
 *
 * <p><b>Hostile fingerprints.</b> Peers choose the fingerprints the table holds, so the home slot
 * of a key is keyed with a per-node secret: {@code fmix64(fingerprint ^ seed)} (MurmurHash3's
 * 64-bit finalizer), the seed drawn once from the node's injected random source. With a public
 * mix a peer could pick its {@code maxPerSlot} fingerprints with adjacent homes and build one
 * probe cluster of 262,144 slots: quadratic to build under the gossip lock, and up to ~10^5
 * probes for every request-path lookup landing in it. Per looked-up block the keyed mix costs an
 * xor with the seed, one multiply and two xor-shifts more than the single multiply-and-fold
 * used before, and nothing per probe: far less than the cache miss of the probe itself. A
 * cryptographic keyed hash (SipHash) would cost several times that on every block of every
 * request. As fmix64 is not a cryptographic function, insertions are bounded as well: a new
 * fingerprint that would sit more than {@link #MAX_DISPLACEMENT} slots from its home is refused
 * like a block over a cap (counted per slot and in {@link #probeRefusals}), and lookups stop
 * after the longest displacement in the table ({@code maxDisplacement}). With random homes at
 * the 3/4 maximum load the longest displacement is about 100 to 190 slots in tables of 2^16 to
 * 2^23 slots, so honest blocks are practically never refused, and a lookup reads at most
 * {@code MAX_DISPLACEMENT + 1} slots (2 KiB) instead of a whole cluster. Only a resize can
 * place keys farther (when the table halves, runs from its two halves may merge), which takes
 * fingerprints aimed with the secret.
 */
final class ReplicaIndex {

  private static final int MIN_CAPACITY = 16;
  private static final int NO_CELL = -1;
  /** Blocks asked for in the first chunk of a lazily hashed chain. */
  static final int FIRST_CHUNK = 8;
  /** Blocks asked for in every further chunk. */
  static final int CHUNK = 16;
  private static final int OPTIMISTIC_TRIES = 3;
  /** The farthest a newly added fingerprint may sit from its home slot; beyond, it is refused. */
  static final int MAX_DISPLACEMENT = 512;
  /** The largest table: the next doubling (2^31 slots) is no Java array. */
  static final int MAX_CAPACITY = 1 << 30;
  /**
   * The most (peer, block) pairs an index can hold, and so the largest {@code maxTotal}: every
   * pair but the zero key's adds at most one key, and the table grows when its keys pass 3/4 of
   * its slots, which the largest table can take up to 805,306,368 keys (its two arrays then take
   * 8 GiB). A {@code maxTotal} above it failed with a {@link NegativeArraySizeException} in the
   * resize instead of refusing the pair.
   */
  static final long MAX_PAIRS = (MAX_CAPACITY >>> 2) * 3L;

  private final int maxSlots;
  private final long maxPerSlot;
  private final long maxTotal;
  /** The secret that keys the home slots; see the class notes. */
  private final long seed;
  private final StampedLock guard = new StampedLock();

  private int[] keys; // 32-bit fingerprints; 0 marks an empty slot (fingerprint 0 is aside)
  private int[] vals;
  private int mask;
  private int keyCount; // keys in table, excluding the zero key
  /** No key sits farther than this from its home (an upper bound: removals do not lower it). */
  private int maxDisplacement;
  private long probeRefusals;
  /** Table slots read by clears that scanned the table (the engine's clears make none). */
  private long clearSlotsScanned;
  private boolean hasZero;
  private int zeroVal;

  private int[] cellWord = new int[0];
  private long[] cellBits = new long[0];
  private int[] cellNext = new int[0];
  private int freeCell = NO_CELL;
  private int cellsUsed;
  private int liveCells;

  private final long[] perSlot;
  private final long[] refusedPerSlot;
  private long pairs;
  /** One more than the highest slot ever added (never decreases). */
  private int slotLimit;

  /** Per-thread bitmaps for queries over more than 64 slots. */
  private static final class Scratch {
    long[] alive = new long[0];
    long[] holders = new long[0];
    int[] aliveWords = new int[0];

    void ensure(int words) {
      if (alive.length < words) {
        alive = new long[words];
        holders = new long[words];
        aliveWords = new int[words];
      }
    }
  }

  private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

  /**
   * @param seed the secret keying the home slots: draw it from the node's random source, so a
   *     peer cannot choose fingerprints that share their homes (see the class notes)
   */
  ReplicaIndex(int maxSlots, long maxPerSlot, long maxTotal, long seed) {
    if (maxTotal > MAX_PAIRS) {
      throw new IllegalArgumentException("maxTotal must be at most " + MAX_PAIRS + ", was " + maxTotal);
    }
    this.maxSlots = maxSlots;
    this.maxPerSlot = maxPerSlot;
    this.maxTotal = maxTotal;
    this.seed = seed;
    this.perSlot = new long[maxSlots];
    this.refusedPerSlot = new long[maxSlots];
    this.keys = new int[MIN_CAPACITY];
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

  /**
   * New fingerprints refused because they would have sat more than {@link #MAX_DISPLACEMENT}
   * slots from their home (also counted per slot in {@link #refused}).
   */
  long probeRefusals() {
    return probeRefusals;
  }

  /** No key sits farther than this from its home slot (an upper bound). */
  int maxDisplacement() {
    return maxDisplacement;
  }

  /** The longest run of occupied table slots (scans the table; for tests). */
  int longestCluster() {
    int n = keys.length;
    int start = 0;
    while (start < n && keys[start] != 0) {
      start++;
    }
    if (start == n) {
      return n;
    }
    int best = 0;
    int run = 0;
    for (int j = 1; j <= n; j++) {
      if (keys[(start + j) & mask] != 0) {
        best = Math.max(best, ++run);
      } else {
        run = 0;
      }
    }
    return best;
  }

  /** Blocks refused for {@code slot} by a cap since its last {@link #clearSlot}. */
  long refused(int slot) {
    return refusedPerSlot[slot];
  }

  /**
   * Records a block of {@code slot} refused outside the index (its replica is a subset now),
   * as {@link #refused} reports until the next {@link #clearSlot}.
   */
  void refuse(int slot) {
    refusedPerSlot[slot]++;
  }

  /** Bytes held by the index arrays (table and cells), for the bytes-per-block figure. */
  long retainedBytes() {
    return 32L + 4L * keys.length + 4L * vals.length + 4L * cellWord.length
        + 8L * cellBits.length + 4L * cellNext.length + 16L * maxSlots;
  }

  boolean contains(int slot, long hash) {
    int v;
    if (!BlockFingerprint.valid(hash)) {
      return false;
    }
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
    return holds(v, slot);
  }

  /**
   * Records that {@code slot} holds {@code hash}.
   *
   * @return 1 if added, 0 if already present, -1 if refused by a cap, -2 if refused because it
   *     would sit more than {@link #MAX_DISPLACEMENT} slots from its home
   */
  int add(int slot, long hash) {
    long stamp = guard.writeLock();
    try {
      return addUnguarded(slot, hash);
    } finally {
      guard.unlockWrite(stamp);
    }
  }

  private int addUnguarded(int slot, long hash) {
    if (!BlockFingerprint.valid(hash)) {
      throw new IllegalArgumentException("not a 32-bit block fingerprint: " + hash);
    }
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
      if (nv == Integer.MIN_VALUE) {
        return -1;
      }
      if (nv == zeroVal && !listGrew) {
        return 0;
      }
      zeroVal = nv;
      counted(slot);
      return 1;
    }
    int key = (int) hash;
    int i = home(key, seed) & mask;
    int limit = Math.max(MAX_DISPLACEMENT, maxDisplacement);
    int d = 0;
    for (; ; i = (i + 1) & mask, d++) {
      if (d > limit) {
        break; // absent (no key sits this far from home), and no room near its home
      }
      int k = keys[i];
      if (k == key) {
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
    if (d > MAX_DISPLACEMENT) {
      refusedPerSlot[slot]++;
      probeRefusals++;
      return -2;
    }
    if (!roomFor(slot)) {
      return -1;
    }
    keys[i] = key;
    vals[i] = slot;
    if (d > maxDisplacement) {
      maxDisplacement = d;
    }
    counted(slot);
    if (++keyCount > (keys.length >>> 2) * 3) {
      rehash(keys.length << 1);
    }
    return 1;
  }

  private boolean listGrew;

  /**
   * Adds {@code slot} to the holder value {@code v}; returns the new value ({@code v} itself when
   * the slot went into an existing cell, with {@link #listGrew} true, or when it was already
   * there, with {@link #listGrew} false), or MIN_VALUE if refused.
   */
  private int addHolder(int v, int slot) {
    listGrew = false;
    int word = slot >>> 6;
    long bit = 1L << slot;
    if (v >= 0) {
      if (v == slot) {
        return v;
      }
      if (!roomFor(slot)) {
        return Integer.MIN_VALUE;
      }
      listGrew = true;
      if (v >>> 6 == word) {
        return -newCell(word, bit | (1L << v), NO_CELL) - 1;
      }
      int second = newCell(word, bit, NO_CELL);
      return -newCell(v >>> 6, 1L << v, second) - 1;
    }
    int head = -v - 1;
    for (int c = head; c != NO_CELL; c = cellNext[c]) {
      if (cellWord[c] == word) {
        if ((cellBits[c] & bit) != 0) {
          return v;
        }
        if (!roomFor(slot)) {
          return Integer.MIN_VALUE;
        }
        cellBits[c] |= bit;
        listGrew = true;
        return v;
      }
    }
    if (!roomFor(slot)) {
      return Integer.MIN_VALUE;
    }
    listGrew = true;
    return -newCell(word, bit, head) - 1;
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
    if (slot >= slotLimit) {
      slotLimit = slot + 1;
    }
  }

  /** Records that {@code slot} no longer holds {@code hash}; returns false if it did not. */
  boolean remove(int slot, long hash) {
    long stamp = guard.writeLock();
    try {
      return removeUnguarded(slot, hash);
    } finally {
      guard.unlockWrite(stamp);
    }
  }

  private boolean removeUnguarded(int slot, long hash) {
    if (!BlockFingerprint.valid(hash)) {
      return false;
    }
    if (hash == 0) {
      if (!hasZero) {
        return false;
      }
      int nv = removeHolder(zeroVal, slot);
      if (!listShrank) {
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
    if (!listShrank) {
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
    int word = slot >>> 6;
    long bit = 1L << slot;
    int head = -v - 1;
    int prev = NO_CELL;
    for (int c = head; c != NO_CELL; prev = c, c = cellNext[c]) {
      if (cellWord[c] == word) {
        if ((cellBits[c] & bit) == 0) {
          return v;
        }
        listShrank = true;
        cellBits[c] &= ~bit;
        if (cellBits[c] == 0) {
          int next = cellNext[c];
          freeCell(c);
          if (prev == NO_CELL) {
            head = next;
          } else {
            cellNext[prev] = next;
          }
        }
        break;
      }
    }
    if (!listShrank) {
      return v;
    }
    // a single remaining holder goes back inline
    if (cellNext[head] == NO_CELL && Long.bitCount(cellBits[head]) == 1) {
      int only = cellWord[head] << 6 | Long.numberOfTrailingZeros(cellBits[head]);
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
    clearSlot(slot, NONE);
  }

  private static final long[] NONE = new long[0];

  /**
   * Removes every block of {@code slot} and resets its refusal count, in O({@code held}) when
   * {@code held} lists the slot's blocks (as its replica's store numbers do): no table scan.
   * Blocks of the slot that {@code held} leaves out are found by a scan, so the slot ends empty
   * whatever {@code held} lists; entries it does not hold are ignored. One instant for readers.
   */
  void clearSlot(int slot, long[] held) {
    refusedPerSlot[slot] = 0;
    if (perSlot[slot] == 0) {
      return;
    }
    long stamp = guard.writeLock();
    try {
      for (int i = 0; i < held.length && perSlot[slot] > 0; i++) {
        removeUnguarded(slot, held[i]);
      }
      if (perSlot[slot] > 0) {
        clearSlotsScanned += keys.length;
        for (long k : blocksOf(slot)) {
          removeUnguarded(slot, k);
        }
      }
    } finally {
      guard.unlockWrite(stamp);
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
        out[n++] = keys[i] & 0xFFFF_FFFFL;
      }
    }
    return n == out.length ? out : Arrays.copyOf(out, n);
  }

  /** Table slots read by {@link #clearSlot} scanning for blocks it was not given. */
  long clearSlotsScanned() {
    return clearSlotsScanned;
  }

  private boolean holds(int v, int slot) {
    if (v >= 0) {
      return v == slot;
    }
    int word = slot >>> 6;
    for (int c = -v - 1; c != NO_CELL; c = cellNext[c]) {
      if (cellWord[c] == word) {
        return (cellBits[c] & (1L << slot)) != 0;
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
    return leadingBlocks(BlockChainSource.of(chain, n), outPerSlot, slotLimit);
  }

  /**
   * For each slot, how many leading blocks of the chain it holds, pulling the chain from
   * {@code chain} in chunks only while some slot still holds every block so far. Safe to call
   * concurrently with mutations (see the class notes); the answer is the index's contents at
   * one instant. An exception {@code chain} throws is thrown on as it is (not taken for a torn
   * read once the index is seen not to have changed during the query).
   *
   * @param outPerSlot receives the counts; entries {@code 0..slotLimit-1} are overwritten
   * @param slotLimit one more than the highest slot that may hold blocks
   * @return the largest count over all slots
   */
  int leadingBlocks(BlockChainSource chain, int[] outPerSlot, int slotLimit) {
    for (int attempt = 0; attempt < OPTIMISTIC_TRIES; attempt++) {
      long stamp = guard.tryOptimisticRead();
      if (stamp == 0) {
        Thread.onSpinWait();
        continue;
      }
      int best;
      RuntimeException failure = null;
      try {
        best = query(chain, outPerSlot, slotLimit);
      } catch (RuntimeException e) { // a torn read (retried below), or the chain source's own
        best = -1;
        failure = e;
      }
      if (guard.validate(stamp)) {
        if (failure != null) {
          throw failure; // the index did not change meanwhile: not a torn read
        }
        if (best < 0) {
          throw new IllegalStateException("replica index query failed on a stable index");
        }
        return best;
      }
    }
    long stamp = guard.readLock();
    try {
      return query(chain, outPerSlot, slotLimit);
    } finally {
      guard.unlockRead(stamp);
    }
  }

  /** The query itself, reading every field once into locals; see {@link #leadingBlocks}. */
  private int query(BlockChainSource src, int[] out, int limit) {
    int slots = Math.max(limit, slotLimit);
    Arrays.fill(out, 0, Math.min(slots, out.length), 0);
    int[] k = keys;
    int[] vs = vals;
    if (vs.length != k.length) {
      return -1; // a resize in progress: invalid, retried
    }
    int m = k.length - 1;
    int md = Math.min(maxDisplacement, m);
    long sd = seed;
    boolean zero = hasZero;
    int zv = zeroVal;
    long[] bits = cellBits;
    if (slots <= 64) {
      return queryOneWord(src, out, k, vs, m, md, sd, zero, zv, bits);
    }
    return queryWords(src, out, k, vs, m, md, sd, zero, zv, bits, cellWord, cellNext,
        (slots + 63) >>> 6);
  }

  /**
   * The holder value of {@code h}, or {@link #EMPTY} if nobody holds it; probes at most
   * {@code md + 1} slots (no key sits farther than {@code md} from its home).
   */
  private static int lookup(long h, int[] k, int[] vs, int m, int md, long sd, boolean zero,
      int zv) {
    if (h == 0) {
      return zero ? zv : EMPTY;
    }
    if ((h >>> 32) != 0) {
      return EMPTY; // not a fingerprint: nobody holds it
    }
    int hk = (int) h;
    int i = home(hk, sd) & m;
    for (int probes = 0; probes <= md; probes++, i = (i + 1) & m) {
      int key = k[i];
      if (key == hk) {
        return vs[i];
      }
      if (key == 0) {
        return EMPTY;
      }
    }
    return EMPTY;
  }

  private static int nextChunk(int i) {
    return i == 0 ? FIRST_CHUNK : i + CHUNK;
  }

  /** All slots below 64: the live set is one {@code long}. */
  private static int queryOneWord(BlockChainSource src, int[] out, int[] k, int[] vs, int m,
      int md, long sd, boolean zero, int zv, long[] bits) {
    long alive = -1L;
    long[] chain = null;
    int avail = 0;
    int i = 0;
    while (true) {
      if (i == avail) {
        avail = src.ensureSome(nextChunk(i));
        chain = src.hashes();
        if (i >= avail) {
          break;
        }
      }
      int v = lookup(chain[i], k, vs, m, md, sd, zero, zv);
      long holders = v >= 0 ? 1L << v : v == EMPTY ? 0 : bits[-v - 1];
      long dropped = alive & ~holders;
      if (i > 0) {
        for (long d = dropped; d != 0; d &= d - 1) {
          out[Long.numberOfTrailingZeros(d)] = i;
        }
      }
      alive &= holders;
      if (alive == 0) {
        return i;
      }
      i++;
    }
    if (i == 0) {
      return 0; // an empty chain
    }
    for (long a = alive; a != 0; a &= a - 1) {
      out[Long.numberOfTrailingZeros(a)] = i;
    }
    return i;
  }

  /** Slots beyond 64: the live set is a bitmap with a list of its non-zero words. */
  private static int queryWords(BlockChainSource src, int[] out, int[] k, int[] vs, int m,
      int md, long sd, boolean zero, int zv, long[] bits, int[] words, int[] next,
      int wordCount) {
    Scratch s = SCRATCH.get();
    s.ensure(wordCount);
    long[] alive = s.alive;
    long[] holders = s.holders;
    int[] aliveWords = s.aliveWords;
    int live = 0;
    long[] chain = null;
    int avail = 0;
    int i = 0;
    try {
      while (true) {
        if (i == avail) {
          avail = src.ensureSome(nextChunk(i));
          chain = src.hashes();
          if (i >= avail) {
            break;
          }
        }
        int v = lookup(chain[i], k, vs, m, md, sd, zero, zv);
        if (v == EMPTY) {
          return dropAll(out, alive, aliveWords, live, i);
        }
        // spread the block's holders into the holders bitmap
        int cells = 0;
        if (v >= 0) {
          holders[v >>> 6] = 1L << v;
        } else {
          for (int c = -v - 1; c != NO_CELL; c = next[c]) {
            holders[words[c]] = bits[c];
            if (++cells > wordCount) {
              return -1; // a cycle: only a torn read
            }
          }
        }
        if (i == 0) {
          if (v >= 0) {
            alive[v >>> 6] = 1L << v;
            aliveWords[live++] = v >>> 6;
          } else {
            for (int c = -v - 1; c != NO_CELL; c = next[c]) {
              if (live == wordCount) {
                return -1; // more cells than words: only a torn read
              }
              alive[words[c]] = bits[c];
              aliveWords[live++] = words[c];
            }
          }
        } else {
          int kept = 0;
          for (int j = 0; j < live; j++) {
            int w = aliveWords[j];
            long a = alive[w];
            long h = holders[w];
            for (long d = a & ~h; d != 0; d &= d - 1) {
              out[w << 6 | Long.numberOfTrailingZeros(d)] = i;
            }
            alive[w] = a & h;
            if ((a & h) != 0) {
              aliveWords[kept++] = w;
            }
          }
          live = kept;
        }
        // clear the holders bitmap for the next block; the cells may have changed under a
        // torn read since the first walk, so this walk is bounded the same way
        if (v >= 0) {
          holders[v >>> 6] = 0;
        } else {
          cells = 0;
          for (int c = -v - 1; c != NO_CELL; c = next[c]) {
            holders[words[c]] = 0;
            if (++cells > wordCount) {
              return -1; // a cycle: only a torn read
            }
          }
        }
        if (live == 0) {
          return i;
        }
        i++;
      }
      return dropAll(out, alive, aliveWords, live, i);
    } finally {
      // leave the scratch bitmaps zeroed whatever happened (a torn read may have written
      // anywhere in them)
      Arrays.fill(alive, 0);
      Arrays.fill(holders, 0);
    }
  }

  /** Every slot still alive holds {@code count} leading blocks. */
  private static int dropAll(int[] out, long[] alive, int[] aliveWords, int live, int count) {
    for (int j = 0; j < live; j++) {
      int w = aliveWords[j];
      for (long a = alive[w]; a != 0; a &= a - 1) {
        out[w << 6 | Long.numberOfTrailingZeros(a)] = count;
      }
    }
    return count;
  }

  /** The table index of non-zero fingerprint {@code hash}, or -1. */
  private int find(long hash) {
    int key = (int) hash;
    int i = home(key, seed) & mask;
    for (int d = 0; d <= maxDisplacement; d++, i = (i + 1) & mask) {
      int k = keys[i];
      if (k == key) {
        return i;
      }
      if (k == 0) {
        return -1;
      }
    }
    return -1;
  }

  /**
   * The home of fingerprint {@code key} (before masking), keyed with {@code seed}: MurmurHash3's
   * 64-bit finalizer of the unsigned fingerprint xor the seed.
   */
  static int home(int key, long seed) {
    return LongHashSet.mix((key & 0xFFFF_FFFFL) ^ seed);
  }

  private int newCell(int word, long bits, int next) {
    int c;
    if (freeCell != NO_CELL) {
      c = freeCell;
      freeCell = cellNext[c];
    } else {
      if (cellsUsed == cellWord.length) {
        int cap = Math.max(16, cellWord.length * 2);
        cellWord = Arrays.copyOf(cellWord, cap);
        cellBits = Arrays.copyOf(cellBits, cap);
        cellNext = Arrays.copyOf(cellNext, cap);
      }
      c = cellsUsed++;
    }
    cellWord[c] = word;
    cellBits[c] = bits;
    cellNext[c] = next;
    liveCells++;
    return c;
  }

  private void freeCell(int c) {
    cellWord[c] = -1;
    cellBits[c] = 0;
    cellNext[c] = freeCell;
    freeCell = c;
    liveCells--;
    if (liveCells == 0 && cellWord.length > 0) {
      // no shared block left: release the cell arrays entirely
      cellWord = new int[0];
      cellBits = new long[0];
      cellNext = new int[0];
      cellsUsed = 0;
      freeCell = NO_CELL;
    }
  }

  private void shiftBack(int hole) {
    int i = hole;
    while (true) {
      i = (i + 1) & mask;
      int k = keys[i];
      if (k == 0) {
        break;
      }
      int home = home(k, seed) & mask;
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
    int[] oldKeys = keys;
    int[] oldVals = vals;
    int[] newKeys = new int[newCapacity];
    int[] newVals = new int[newCapacity];
    int newMask = newCapacity - 1;
    int newMax = 0;
    for (int j = 0; j < oldKeys.length; j++) {
      int k = oldKeys[j];
      if (k != 0) {
        int h = home(k, seed) & newMask;
        int i = h;
        while (newKeys[i] != 0) {
          i = (i + 1) & newMask;
        }
        newKeys[i] = k;
        newVals[i] = oldVals[j];
        newMax = Math.max(newMax, (i - h) & newMask);
      }
    }
    keys = newKeys;
    vals = newVals;
    mask = newMask;
    maxDisplacement = newMax;
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
      if (((i - home(keys[i], seed)) & mask) > maxDisplacement) {
        throw new IllegalStateException("key at " + i + " farther from home than "
            + maxDisplacement);
      }
      if (find(keys[i] & 0xFFFF_FFFFL) != i) {
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
      if (counted[s] > 0 && s >= slotLimit) {
        throw new IllegalStateException("slot " + s + " holds blocks beyond the slot limit");
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
    int holders = 0;
    int cells = 0;
    long seenWords = 0;
    for (int c = -v - 1; c != NO_CELL; c = cellNext[c]) {
      if (++cells > (maxSlots + 63) / 64) {
        throw new IllegalStateException("holder list longer than the slot words (a cycle?)");
      }
      int w = cellWord[c];
      long b = cellBits[c];
      if (b == 0) {
        throw new IllegalStateException("empty holder cell " + c);
      }
      if (w < 64 && (seenWords & (1L << w)) != 0) {
        throw new IllegalStateException("holder word " + w + " twice in one list");
      }
      seenWords |= w < 64 ? 1L << w : 0;
      for (long x = b; x != 0; x &= x - 1) {
        counted[w << 6 | Long.numberOfTrailingZeros(x)]++;
        holders++;
      }
    }
    if (holders < 2) {
      throw new IllegalStateException("holder set of " + holders + " should be inline");
    }
  }
}
