package io.github.prefixrouter.internal.gossip;

/**
 * One numbered change of an origin's block set: blocks stored, blocks evicted, or everything
 * cleared. Applying the deltas of an origin in sequence order to its set at version {@code v}
 * yields its set at the last delta's sequence.
 *
 * @param seq the origin's sequence number after this change
 * @param op {@link #STORE}, {@link #EVICT} or {@link #CLEAR}
 * @param hashes the {@link BlockFingerprint}s of the blocks stored or evicted (empty for
 *     {@link #CLEAR}); never modified
 */
record Delta(long seq, int op, long[] hashes) {

  static final int STORE = 1;
  static final int EVICT = 2;
  static final int CLEAR = 3;

  static final long[] NO_HASHES = new long[0];

  Delta {
    if (op < STORE || op > CLEAR) {
      throw new IllegalArgumentException("op must be 1..3, was " + op);
    }
  }

  /** Bytes this delta takes inside an update on the wire: head varint, then fingerprints. */
  int encodedSize() {
    int n = hashes.length;
    return io.github.prefixrouter.internal.wire.ByteWriter.varLongSize(((long) n << 2) | op)
        + BlockFingerprint.BYTES * n;
  }
}
