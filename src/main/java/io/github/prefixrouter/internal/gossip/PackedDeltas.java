package io.github.prefixrouter.internal.gossip;

import java.util.AbstractList;
import java.util.Arrays;
import java.util.Objects;
import java.util.RandomAccess;

/**
 * The deltas of one decoded update, held as arrays rather than as one {@link Delta} object per
 * delta: an op byte and an end offset per delta, and the fingerprints and store numbers of all
 * of them in one array. A delta takes 5 bytes of heap and each of its items 8, so a message
 * holds at most 8 bytes of deltas per byte of its own, where a {@code Delta} object and its list
 * slot took 36 bytes for a one-byte CLEAR (see {@code docs/wire-format.md}).
 *
 * <p>{@link #get} builds the delta, with its own copy of its items. Read-only.
 */
final class PackedDeltas extends AbstractList<Delta> implements RandomAccess {

  private final long from;
  private final byte[] ops;
  private final int[] ends;
  private final long[] items;

  /**
   * @param from the version the deltas follow: delta {@code i} has sequence {@code from+i+1}
   * @param ops the op of each delta
   * @param ends for each delta, the index in {@code items} where its items end (ascending)
   * @param items the fingerprints and store numbers of all the deltas, in order
   */
  PackedDeltas(long from, byte[] ops, int[] ends, long[] items) {
    if (ops.length != ends.length) {
      throw new IllegalArgumentException("ops and ends differ in length");
    }
    this.from = from;
    this.ops = ops;
    this.ends = ends;
    this.items = items;
  }

  @Override
  public Delta get(int i) {
    Objects.checkIndex(i, ops.length);
    int start = i == 0 ? 0 : ends[i - 1];
    int end = ends[i];
    return new Delta(from + i + 1, ops[i],
        start == end ? Delta.NO_HASHES : Arrays.copyOfRange(items, start, end));
  }

  @Override
  public int size() {
    return ops.length;
  }
}
