package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.internal.tree.BlockHasher;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The block-hash chains of a few recently seen prompt prefixes, so that a routing decision does
 * not hash again the part of a prompt it shares with an earlier one (a system prompt, a few-shot
 * preamble, the previous turns of a conversation).
 *
 * <h2>Design notes</h2>
 *
 * <ul>
 *   <li><b>Why.</b> The block hash chain is serial and costs about 1 ns per token; it is the
 *       largest part of a decision on long prompts. Comparing tokens is about ten times cheaper
 *       ({@link Arrays#mismatch} is vectorized), and a block's chained hash depends only on the
 *       tokens up to the end of that block, so hashes can be copied from an earlier prompt for
 *       every leading block whose tokens are equal.
 *   <li><b>Correctness.</b> A hash is reused only after the tokens of its block and of every
 *       block before it were compared equal to those of the cached prompt, of the same cache
 *       scope (the chain's root parent, compared too), whose hashes were computed by the same
 *       hasher: the result is exactly the chain the hasher would compute.
 *       A key collision or a stale entry can only cost a lookup, never a wrong hash.
 *   <li><b>Structure.</b> {@link #SETS} sets of {@link #WAYS} entries, the set chosen by the
 *       chained hash of the prompt's first {@link #HEAD_BLOCKS} blocks (the head, which a
 *       decision hashes anyway); at most one entry per head in a set. An entry is immutable: a
 *       copy of a prompt's first {@code b} blocks of tokens and their {@code b} hashes, with
 *       {@code b <= } {@link #MAX_ENTRY_BLOCKS}. Memory is therefore bounded by
 *       {@code SETS × WAYS × MAX_ENTRY_BLOCKS × (4 × blockSize + 8)} bytes (4.7 MB at 16 tokens
 *       per block; about 2.3 MB with 4,096-token prompts).
 *   <li><b>Admission.</b> Copying a prompt into the cache costs about as much as comparing it,
 *       so a prompt is admitted only when it extends what the cache knows in a way seen twice: a
 *       small direct-mapped filter remembers the hash of the first block a decision had to hash
 *       past the head and past what the cache served; when a later decision has to hash that
 *       same block again, two prompts share everything up to it, and the later one is admitted.
 *       Only blocks the decision needed count (some peer held them): the replica query hashes up
 *       to a chunk past the longest peer match, and a prompt whose only unserved blocks are that
 *       overshoot (its own tail after a cached preamble) adds nothing worth copying.
 *       Traffic without shared prefixes never repeats that block and never allocates; a
 *       family of prompts sharing a preamble is admitted on its second request, after which its
 *       requests copy the preamble's hashes and hash only their own tails. Replacement within a
 *       set is CLOCK-like: an entry found by a lookup is marked used; an admission to a full set
 *       takes a way not used since its last chance, and if every way was used it clears the
 *       marks and admits nothing, so more heads than ways in one set do not thrash it.
 *   <li><b>Concurrency.</b> Lock-free: entries are immutable and published through an {@link
 *       AtomicReferenceArray}, the filter is an {@link AtomicLongArray}. Concurrent admissions to
 *       one set race benignly (the last one wins; every entry is valid). Readers never block.
 *   <li><b>Short prompts</b> (at most {@link #MIN_PROMPT_BLOCKS} blocks) bypass the cache: their
 *       whole chain costs about what a lookup of a cold entry does.
 *   <li><b>Determinism.</b> No clock, no randomness: the contents depend only on the sequence of
 *       prompts. Decisions never depend on the contents (only their cost does).
 * </ul>
 */
final class PrefixHashCache {

  /** Blocks of the prompt head that choose the set (and that a decision always hashes). */
  static final int HEAD_BLOCKS = 8;
  /** Sets of the table (a power of two). */
  static final int SETS = 64;
  /** Entries per set. */
  static final int WAYS = 2;
  /** Longest prefix an entry keeps, in blocks (8,192 tokens at 16 per block). */
  static final int MAX_ENTRY_BLOCKS = 512;
  /**
   * Prompts of at most this many blocks (512 tokens at 16 per block) do not use the cache:
   * hashing them costs a few hundred nanoseconds, about what a lookup costs when the cached
   * entry is not in the processor's caches.
   */
  static final int MIN_PROMPT_BLOCKS = 32;
  /** Fewest blocks a decision must have hashed past the cache for its prompt to be admitted. */
  static final int MIN_ADMIT_BLOCKS = 8;
  /** Slots of the admission filter (a power of two). */
  static final int FILTER_SLOTS = 256;

  /** A prompt's first {@code hashes.length} blocks and their chained hashes. Immutable. */
  static final class Entry {
    /** The root parent of the chain (its cache scope's): equal tokens hash alike only in one scope. */
    final long scopeRoot;
    final int[] tokens;
    final long[] hashes;
    /**
     * Set when a lookup found the entry, cleared when an admission to its full set gave it a
     * second chance (the only mutable field; a stale read only changes which entry is evicted).
     */
    volatile boolean used;

    Entry(long scopeRoot, int[] tokens, long[] hashes) {
      this.scopeRoot = scopeRoot;
      this.tokens = tokens;
      this.hashes = hashes;
    }

    int blocks() {
      return hashes.length;
    }

    long headKey() {
      return hashes[HEAD_BLOCKS - 1];
    }
  }

  private final int blockSize;
  private final AtomicReferenceArray<Entry> entries =
      new AtomicReferenceArray<>(SETS * WAYS);
  private final AtomicLongArray filter = new AtomicLongArray(FILTER_SLOTS);

  PrefixHashCache(int blockSize) {
    if (blockSize < 1) {
      throw new IllegalArgumentException("blockSize must be at least 1, was " + blockSize);
    }
    this.blockSize = blockSize;
  }

  int blockSize() {
    return blockSize;
  }

  /**
   * The entry of the set of {@code headKey} whose head tokens equal {@code tokens}' head, or
   * null. Only the head is compared here; the caller compares further as it needs.
   */
  Entry find(long headKey, int[] tokens) {
    return find(BlockHasher.ROOT_PARENT, headKey, tokens);
  }

  /** {@link #find(long, int[])} for a prompt of the scope whose chain starts at scopeRoot. */
  Entry find(long scopeRoot, long headKey, int[] tokens) {
    int base = set(headKey) * WAYS;
    int headTokens = HEAD_BLOCKS * blockSize;
    for (int w = 0; w < WAYS; w++) {
      Entry e = entries.get(base + w);
      if (e != null && e.headKey() == headKey && e.scopeRoot == scopeRoot
          && Arrays.equals(tokens, 0, headTokens, e.tokens, 0, headTokens)) {
        if (!e.used) {
          e.used = true; // written only when it changes, so hits do not contend
        }
        return e;
      }
    }
    return null;
  }

  /**
   * Called once a decision is done with a prompt: {@code hashes[0 .. hashed)} are the chain of
   * {@code tokens}' first {@code hashed} blocks, of which blocks {@code HEAD_BLOCKS ..
   * HEAD_BLOCKS + reused)} came from the cache, and the first {@code useful} blocks are those
   * the decision needed (some peer held them; the query hashes a chunk further). Admits the
   * prompt if the cache failed to serve at least {@link #MIN_ADMIT_BLOCKS} useful blocks and the
   * filter saw its first freshly hashed block before (see the class notes).
   *
   * @return true if the prompt was admitted
   */
  boolean offer(int[] tokens, long[] hashes, int hashed, int reused, int useful) {
    return offer(BlockHasher.ROOT_PARENT, tokens, hashes, hashed, reused, useful);
  }

  /** {@link #offer(int[], long[], int, int, int)} of a prompt chained from scopeRoot. */
  boolean offer(long scopeRoot, int[] tokens, long[] hashes, int hashed, int reused,
      int useful) {
    int fresh = Math.min(useful, hashed) - HEAD_BLOCKS - reused;
    if (hashed <= HEAD_BLOCKS || fresh < MIN_ADMIT_BLOCKS
        || HEAD_BLOCKS + reused >= MAX_ENTRY_BLOCKS) { // nothing an entry could add
      return false;
    }
    long first = hashes[HEAD_BLOCKS + reused]; // the first block the cache could not serve
    int slot = filterSlot(first);
    if (filter.get(slot) != first) {
      filter.set(slot, first);
      return false;
    }
    filter.compareAndSet(slot, first, 0);
    long key = hashes[HEAD_BLOCKS - 1];
    int base = set(key) * WAYS;
    int victim = -1;
    for (int w = 0; w < WAYS && victim < 0; w++) { // the entry of the same head, else a free way
      Entry old = entries.get(base + w);
      if (old == null || old.headKey() == key) {
        victim = w;
      }
    }
    for (int w = 0; w < WAYS && victim < 0; w++) { // else one not used since its last chance
      if (!entries.get(base + w).used) {
        victim = w;
      }
    }
    if (victim < 0) {
      // every way was used since: give them a second chance and admit nothing now (CLOCK), so
      // a head competing for a set of busier ones cannot make them thrash
      for (int w = 0; w < WAYS; w++) {
        entries.get(base + w).used = false;
      }
      return false;
    }
    int blocks = Math.min(hashed, MAX_ENTRY_BLOCKS);
    entries.set(base + victim,
        new Entry(scopeRoot, Arrays.copyOf(tokens, blocks * blockSize),
            Arrays.copyOf(hashes, blocks)));
    return true;
  }

  /** The entries now, for tests. */
  Entry[] snapshot() {
    Entry[] out = new Entry[entries.length()];
    for (int i = 0; i < out.length; i++) {
      out[i] = entries.get(i);
    }
    return out;
  }

  private static int set(long key) {
    return mix(key) & (SETS - 1);
  }

  private static int filterSlot(long key) {
    return (mix(key) >>> 8) & (FILTER_SLOTS - 1);
  }

  private static int mix(long key) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 32));
  }
}
