package io.github.prefixrouter.internal.gossip;

import io.github.prefixrouter.internal.collect.LongHashSet;
import java.util.Collection;

/**
 * The node ids a gossip engine knows, found from the ASCII bytes of an id being decoded,
 * without building a string for it. The decoder gives every id it reads that the table holds
 * as the table's own string (its hash computed once, and the same instance as the engine's key,
 * so the engine's lookups by it compare no characters), and builds a string only for an id the
 * table does not hold. A digest names every origin its sender knows: building a string per
 * entry, and hashing and comparing it again for each lookup, took about a quarter of a
 * 256-node cluster's gossip time (docs/gossip.md, "CPU per round").
 *
 * <p>The ids' hashes and characters are kept in arrays of their own (the characters of all ids
 * one after the other), so a lookup reads neither the strings nor their character arrays.
 * Immutable: decoders on any thread read one while the engine builds the next.
 *
 * <p><b>Hostile ids.</b> Peers choose the ids the table holds (an origin announced with an
 * address is admitted, up to {@code maxPeers}, and every node relays it), so a slot is chosen by
 * a hash keyed with a per-node secret, never by {@link String#hashCode}: ids sharing a {@code
 * String.hashCode} are trivial to make ({@code "Aa"} and {@code "BB"} hash alike, so the 4,096
 * ids of 12 such pairs share one hash), and placed by it they formed one run of slots, so each
 * lookup read up to one slot per id held: about 8 million slots, each with a comparison of the
 * characters, for a digest of 4,096 such ids, on every node at every digest (a node took about
 * 35 ms of CPU to handle one, over 100 times as long as a digest of 4,096 ordinary ids, and 35
 * times as long as now; docs/gossip.md, "Hostile ids"). The keyed hash runs from the seed over
 * every character ({@link #next}: an xor, a multiply and a rotation per character) and is
 * finished by MurmurHash3's 64-bit finalizer ({@link LongHashSet#mix}), so ids that collide for
 * one seed scatter for another; the decoder carries it along the characters it reads, as it
 * carried {@code String.hashCode} before, and a lookup still builds nothing. It is not a
 * cryptographic function: it keeps a peer from aiming ids it chooses without knowing the seed,
 * which the table never reveals. The engine keys its table with the secret of its replica index
 * (one draw from its random source). Should a peer learn the secret anyway, a lookup still reads
 * at most {@link #MAX_PROBES} slots: an id with no free slot that near its home is left out, and
 * the decoder builds its string as for any id the table does not hold (equal to the member's, so
 * the engine's lookups by it still find the member).
 */
final class IdTable {

  /**
   * The most slots a lookup reads: an id whose slot would lie further from its home slot is left
   * out of the table. Well above the natural maximum (over 10,000 seeds, the longest lookup in a
   * table at its highest load, half full, was 75 to 76 slots; {@code IdTableFloodTest}), so
   * ordinary ids never reach it, and low enough that a digest of 4,096 ids reads at most about
   * half a million slots, where ids aimed at one slot without a bound made it 8 million.
   */
  static final int MAX_PROBES = 128;

  /** A table that holds no id. */
  static final IdTable EMPTY = new IdTable(java.util.List.of(), 0);

  /** Odd: a multiply by it is a bijection, and spreads each character over the higher bits. */
  private static final long MULTIPLIER = 0x9E37_79B9_7F4A_7C15L;

  /**
   * Open addressing with linear probing, at most half full: a probe always meets an empty slot
   * ({@code null} in {@link #ids}).
   */
  private final String[] ids;
  /** The finished keyed hash of each slot's id ({@link #finish}). */
  private final int[] hashes;
  /** Where each slot's characters start in {@link #chars}, and how many. */
  private final int[] starts;
  private final int[] lengths;
  private final byte[] chars;
  private final int mask;
  /** The secret the hash starts from; see the class notes. */
  private final long seed;

  /**
   * @param ids node ids (one that is not ASCII is held but never found; one with no free slot
   *     within {@link #MAX_PROBES} of its home is left out)
   * @param seed the secret keying the slots: drawn from the node's random source, so a peer
   *     cannot choose ids that share a slot
   */
  IdTable(Collection<String> ids, long seed) {
    this.seed = seed;
    int capacity = 2;
    while (capacity < 2 * ids.size()) {
      capacity <<= 1;
    }
    this.ids = new String[capacity];
    hashes = new int[capacity];
    starts = new int[capacity];
    lengths = new int[capacity];
    mask = capacity - 1;
    int total = 0;
    for (String id : ids) {
      total += id.length();
    }
    chars = new byte[total];
    int at = 0;
    for (String id : ids) {
      long state = seed;
      for (int k = 0; k < id.length(); k++) {
        char c = id.charAt(k);
        chars[at + k] = c < 0x80 ? (byte) c : (byte) 0x80; // 0x80: matches no decoded id
        state = next(state, chars[at + k] & 0xFF);
      }
      int hash = finish(state);
      int i = hash & mask;
      for (int read = 1; this.ids[i] != null && !this.ids[i].equals(id) && read < MAX_PROBES;
          read++) {
        i = (i + 1) & mask;
      }
      if (this.ids[i] != null) {
        // held already, or no free slot within MAX_PROBES of its home: left out (its
        // characters are overwritten by the next id)
        continue;
      }
      this.ids[i] = id;
      hashes[i] = hash;
      starts[i] = at;
      lengths[i] = id.length();
      at += id.length();
    }
  }

  /** The hash state before the first character of an id: the seed. */
  long start() {
    return seed;
  }

  /** The hash state after {@code state} and one more character {@code c} ({@code 0..0xFF}). */
  static long next(long state, int c) {
    return Long.rotateLeft((state ^ c) * MULTIPLIER, 31);
  }

  private static int finish(long state) {
    return LongHashSet.mix(state);
  }

  /**
   * The id held whose characters are the bytes {@code chars[0..length)}, or null. Reads at most
   * {@link #MAX_PROBES} slots.
   *
   * @param chars printable ASCII characters ({@code 0x21..0x7E})
   * @param state the hash state after those characters: {@code state = next(state, c)} over
   *     them, from {@link #start()}
   */
  String find(byte[] chars, int length, long state) {
    int i = slot(chars, length, finish(state));
    return i >= 0 ? ids[i] : null;
  }

  /** How many slots {@link #find} reads for the same arguments (for tests). */
  int slotsRead(byte[] chars, int length, long state) {
    int hash = finish(state);
    int i = slot(chars, length, hash);
    return i >= 0 ? ((i - hash) & mask) + 1 : -i;
  }

  /** The slot holding the id, or minus the number of slots read to find it is not held. */
  private int slot(byte[] chars, int length, int hash) {
    int i = hash & mask;
    for (int read = 1; ; read++, i = (i + 1) & mask) {
      if (ids[i] == null) {
        return -read;
      }
      if (hashes[i] == hash && lengths[i] == length
          && java.util.Arrays.equals(this.chars, starts[i], starts[i] + length, chars, 0, length)) {
        return i;
      }
      if (read == MAX_PROBES) {
        return -read;
      }
    }
  }

  /**
   * The longest run of held slots, plus the empty slot that ends it: the most slots a lookup
   * reads where that is below {@link #MAX_PROBES} (scans the table; for tests).
   */
  int longestLookup() {
    int n = ids.length;
    int start = 0;
    while (ids[start] != null) {
      start++; // at most half full: there is an empty slot
    }
    int best = 0;
    int run = 0;
    for (int j = 1; j <= n; j++) {
      if (ids[(start + j) & mask] != null) {
        best = Math.max(best, ++run);
      } else {
        run = 0;
      }
    }
    return best + 1;
  }
}
