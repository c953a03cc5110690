package io.github.prefixrouter.internal.gossip;

import io.github.prefixrouter.internal.wire.ByteWriter;
import java.util.List;

/**
 * One numbered change of an origin's block set: blocks stored, blocks evicted, or everything
 * cleared. Applying the deltas of an origin in sequence order to its set at version {@code v}
 * yields its set at the last delta's sequence.
 *
 * <p>A STORE names its blocks by fingerprint; the origin numbers them, in that order, with the
 * next store numbers of its generation (1, 2, 3, ...: one per fingerprint ever published as
 * stored, clears included). An EVICT names its blocks by those store numbers ("the block stored
 * at position 1,042"), in ascending order, so that an eviction costs about a byte on the wire
 * instead of a 4-byte fingerprint; a replica resolves them with its {@link StoreOrder}.
 *
 * @param seq the origin's sequence number after this change
 * @param op {@link #STORE}, {@link #EVICT} or {@link #CLEAR}
 * @param hashes for STORE the {@link BlockFingerprint}s stored; for EVICT the store numbers of
 *     the blocks evicted, strictly ascending, each in {@code 1..2^62}; empty for CLEAR; never
 *     modified
 */
record Delta(long seq, int op, long[] hashes) {

  static final int STORE = 1;
  static final int EVICT = 2;
  static final int CLEAR = 3;

  static final long[] NO_HASHES = new long[0];

  /** Largest store number: 2^62, like every counter of the protocol. */
  static final long MAX_STORE = GossipMessage.MAX_COUNTER;

  Delta {
    if (op < STORE || op > CLEAR) {
      throw new IllegalArgumentException("op must be 1..3, was " + op);
    }
  }

  /**
   * Bytes this delta takes inside an update on the wire, when the previous EVICT of the same
   * update ended at store number {@code prevRef} (0 at the start of an update): the head
   * varint, then 4 bytes per fingerprint (STORE) or one varint per store number (EVICT: the
   * first as the zigzag difference from {@code prevRef}, the others as the gap to the previous
   * one, minus 1).
   */
  int encodedSize(long prevRef) {
    int n = hashes.length;
    int size = ByteWriter.varLongSize(((long) n << 2) | op);
    if (op != EVICT) {
      return size + BlockFingerprint.BYTES * n;
    }
    long prev = prevRef;
    for (int i = 0; i < n; i++) {
      long r = hashes[i];
      size += ByteWriter.varLongSize(i == 0 ? GossipCodec.zigzag(r - prev) : r - prev - 1);
      prev = r;
    }
    return size;
  }

  /** The store number the next delta of the same update is coded against. */
  long lastRef(long prevRef) {
    return op == EVICT && hashes.length > 0 ? hashes[hashes.length - 1] : prevRef;
  }

  /** Bytes of {@code deltas}, consecutive in one update, on the wire. */
  static long encodedSize(List<Delta> deltas) {
    long size = 0;
    long prev = 0;
    for (Delta d : deltas) {
      size += d.encodedSize(prev);
      prev = d.lastRef(prev);
    }
    return size;
  }
}
