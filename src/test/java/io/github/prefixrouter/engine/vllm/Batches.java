package io.github.prefixrouter.engine.vllm;

import java.io.ByteArrayOutputStream;

/**
 * vLLM-shaped batches for tests, built with {@link MsgpackWriter} (shortest encodings). Public
 * for the engine adapters' tests in other packages.
 */
public final class Batches {

  private Batches() {}

  /** {@code [ts, [events...], 0]}: the events are already-encoded msgpack values. */
  public static byte[] batch(byte[]... events) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.writeBytes(new MsgpackWriter().array(3).float64(1.5e9).array(events.length).bytes());
    for (byte[] e : events) {
      out.writeBytes(e);
    }
    out.writeBytes(new MsgpackWriter().integer(0).bytes());
    return out.toByteArray();
  }

  /** {@code ["BlockStored", hashes, parent or nil, tokens, blockSize, nil, "GPU"]}. */
  public static byte[] stored(Long parent, long[] hashes, int[] tokens, int blockSize) {
    MsgpackWriter w = new MsgpackWriter().array(7).str("BlockStored").array(hashes.length);
    for (long h : hashes) {
      w.integer(h);
    }
    if (parent == null) {
      w.nil();
    } else {
      w.integer(parent);
    }
    w.array(tokens.length);
    for (int t : tokens) {
      w.integer(t);
    }
    return w.integer(blockSize).nil().str("GPU").bytes();
  }

  /** {@code ["BlockStored", hashes of 32 bytes, parent or nil, tokens, blockSize]}. */
  static byte[] storedBytes(byte[] parent, byte[][] hashes, int[] tokens, int blockSize) {
    MsgpackWriter w = new MsgpackWriter().array(5).str("BlockStored").array(hashes.length);
    for (byte[] h : hashes) {
      w.bin(h);
    }
    if (parent == null) {
      w.nil();
    } else {
      w.bin(parent);
    }
    w.array(tokens.length);
    for (int t : tokens) {
      w.integer(t);
    }
    return w.integer(blockSize).bytes();
  }

  /** {@code ["BlockRemoved", hashes, "GPU"]}. */
  public static byte[] removed(long... hashes) {
    MsgpackWriter w = new MsgpackWriter().array(3).str("BlockRemoved").array(hashes.length);
    for (long h : hashes) {
      w.integer(h);
    }
    return w.str("GPU").bytes();
  }

  /** {@code ["BlockRemoved", hashes of 32 bytes]}. */
  static byte[] removedBytes(byte[]... hashes) {
    MsgpackWriter w = new MsgpackWriter().array(2).str("BlockRemoved").array(hashes.length);
    for (byte[] h : hashes) {
      w.bin(h);
    }
    return w.bytes();
  }

  /** {@code ["AllBlocksCleared"]}. */
  public static byte[] cleared() {
    return new MsgpackWriter().array(1).str("AllBlocksCleared").bytes();
  }

  /** {@code [tag, 1, 2]}: an event of a kind the receiver does not know. */
  static byte[] unknown(String tag) {
    return new MsgpackWriter().array(3).str(tag).integer(1).integer(2).bytes();
  }
}
