package io.github.prefixrouter.internal.gossip;

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
 */
final class IdTable {

  /** A table that holds no id. */
  static final IdTable EMPTY = new IdTable(java.util.List.of());

  /**
   * Open addressing with linear probing, at most half full: a probe always meets an empty slot
   * ({@code null} in {@link #ids}).
   */
  private final String[] ids;
  private final int[] hashes;
  /** Where each slot's characters start in {@link #chars}, and how many. */
  private final int[] starts;
  private final int[] lengths;
  private final byte[] chars;
  private final int mask;

  /** @param ids node ids (one that is not ASCII is held but never found) */
  IdTable(Collection<String> ids) {
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
      int i = spread(id.hashCode()) & mask;
      while (this.ids[i] != null && !this.ids[i].equals(id)) {
        i = (i + 1) & mask;
      }
      if (this.ids[i] != null) {
        continue; // held already
      }
      this.ids[i] = id;
      hashes[i] = id.hashCode();
      starts[i] = at;
      lengths[i] = id.length();
      for (int k = 0; k < id.length(); k++) {
        char c = id.charAt(k);
        chars[at++] = c < 0x80 ? (byte) c : (byte) 0x80; // 0x80: matches no decoded id
      }
    }
  }

  /**
   * The id held whose characters are the bytes {@code chars[0..length)}, or null.
   *
   * @param chars printable ASCII characters ({@code 0x21..0x7E})
   * @param hash {@link String#hashCode} of those characters: {@code h = 31 * h + c} over them
   */
  String find(byte[] chars, int length, int hash) {
    for (int i = spread(hash) & mask; ; i = (i + 1) & mask) {
      String s = ids[i];
      if (s == null) {
        return null;
      }
      if (hashes[i] == hash && lengths[i] == length
          && java.util.Arrays.equals(this.chars, starts[i], starts[i] + length, chars, 0, length)) {
        return s;
      }
    }
  }

  private static int spread(int h) {
    return h ^ (h >>> 16);
  }
}
