package io.github.prefixrouter.internal.wire;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A growable output buffer with a hard cap, for encoding wire messages.
 *
 * <p>Integers are written either fixed-width big-endian ({@link #writeFixedInt},
 * {@link #writeFixedLong}) or as unsigned LEB128 varints ({@link #writeVarLong}: 7 bits per
 * byte, low group first, high bit set on every byte but the last; at most 10 bytes, and no more
 * than the value needs: the reader refuses a longer encoding). Signed
 * values that may be negative use ZigZag ({@link #writeZigZagLong}). Byte strings and ASCII
 * strings are prefixed with their length as a varint. {@link ByteReader} reads every one of
 * these back. The exact layout is specified in {@code docs/wire-format.md}.
 *
 * <p>The cap is enforced before growing: a write that would pass it throws
 * {@link MessageTooLargeException} and leaves the content unchanged. Encoders that fill a
 * message up to the cap (snapshot chunks) check {@link #remaining()} first, or take a
 * {@link #size()} mark and {@link #truncate(int)} back to it.
 *
 * <p>Not thread-safe.
 */
public final class ByteWriter {

  /** Longest encoding of a 64-bit varint, in bytes. */
  public static final int MAX_VARLONG_BYTES = 10;

  private final int cap;
  private byte[] buf;
  private int size;

  /**
   * @param initialCapacity bytes allocated up front (clamped to {@code cap})
   * @param cap the most bytes this writer will ever hold
   */
  public ByteWriter(int initialCapacity, int cap) {
    if (cap < 1) {
      throw new IllegalArgumentException("cap must be >= 1, was " + cap);
    }
    if (initialCapacity < 0) {
      throw new IllegalArgumentException("initialCapacity must be >= 0, was " + initialCapacity);
    }
    this.cap = cap;
    this.buf = new byte[Math.min(initialCapacity, cap)];
  }

  /** The hard cap in bytes. */
  public int cap() {
    return cap;
  }

  /** Bytes written so far. */
  public int size() {
    return size;
  }

  /** Bytes that can still be written before the cap. */
  public int remaining() {
    return cap - size;
  }

  /** Discards everything written after the first {@code newSize} bytes. */
  public void truncate(int newSize) {
    if (newSize < 0 || newSize > size) {
      throw new IllegalArgumentException("newSize must be in 0.." + size + ", was " + newSize);
    }
    size = newSize;
  }

  /** Discards all content, keeping the allocated buffer. */
  public void reset() {
    size = 0;
  }

  /** A copy of the bytes written. */
  public byte[] toByteArray() {
    return Arrays.copyOf(buf, size);
  }

  public ByteWriter writeByte(int b) {
    ensure(1);
    buf[size++] = (byte) b;
    return this;
  }

  public ByteWriter writeBoolean(boolean b) {
    return writeByte(b ? 1 : 0);
  }

  public ByteWriter writeFixedInt(int v) {
    ensure(4);
    buf[size] = (byte) (v >>> 24);
    buf[size + 1] = (byte) (v >>> 16);
    buf[size + 2] = (byte) (v >>> 8);
    buf[size + 3] = (byte) v;
    size += 4;
    return this;
  }

  public ByteWriter writeFixedLong(long v) {
    ensure(8);
    for (int i = 7; i >= 0; i--) {
      buf[size + i] = (byte) v;
      v >>>= 8;
    }
    size += 8;
    return this;
  }

  /** Writes {@code v} as an unsigned LEB128 varint (negative values take 10 bytes). */
  public ByteWriter writeVarLong(long v) {
    if (buf.length - size < MAX_VARLONG_BYTES) { // else any varint fits, within the cap too
      ensure(varLongSize(v));
    }
    while ((v & ~0x7FL) != 0) {
      buf[size++] = (byte) ((v & 0x7F) | 0x80);
      v >>>= 7;
    }
    buf[size++] = (byte) v;
    return this;
  }

  /** Writes a non-negative int as a varint. */
  public ByteWriter writeVarInt(int v) {
    if (v < 0) {
      throw new IllegalArgumentException("writeVarInt takes a non-negative value, was " + v);
    }
    return writeVarLong(v);
  }

  /** Writes a signed value ZigZag-encoded, so small negative values stay short. */
  public ByteWriter writeZigZagLong(long v) {
    return writeVarLong((v << 1) ^ (v >> 63));
  }

  /** Writes {@code bytes} prefixed with its length as a varint. */
  public ByteWriter writeBytes(byte[] bytes) {
    ensure((long) varLongSize(bytes.length) + bytes.length);
    writeVarLong(bytes.length);
    System.arraycopy(bytes, 0, buf, size, bytes.length);
    size += bytes.length;
    return this;
  }

  /**
   * Writes the characters of {@code s} from index {@code from} on, one byte each, prefixed with
   * their count as a varint: the bytes {@code writeBytes(s.substring(from).getBytes(US_ASCII))}
   * writes, without building the substring or the array.
   *
   * @throws IllegalArgumentException if one of those characters is not ASCII (at or above
   *     0x80), before anything is written
   */
  public ByteWriter writeAsciiFrom(String s, int from) {
    int n = s.length() - from;
    for (int i = from; i < s.length(); i++) {
      if (s.charAt(i) >= 0x80) {
        throw new IllegalArgumentException("not ASCII at index " + i + ": " + (int) s.charAt(i));
      }
    }
    ensure((long) varLongSize(n) + n);
    writeVarLong(n);
    for (int i = from; i < s.length(); i++) {
      buf[size++] = (byte) s.charAt(i);
    }
    return this;
  }

  /** Writes {@code bytes} as they are, with no length prefix. */
  public ByteWriter writeRaw(byte[] bytes, int off, int len) {
    ensure(len);
    System.arraycopy(bytes, off, buf, size, len);
    size += len;
    return this;
  }

  /**
   * Writes a printable-ASCII string of 1 to {@code maxLength} characters prefixed with its
   * length, the field {@link ByteReader#readAscii} reads.
   *
   * @throws IllegalArgumentException if {@code s} is empty, longer than {@code maxLength} or
   *     holds a character outside {@code 0x21..0x7E}
   */
  public ByteWriter writeAscii(String s, int maxLength) {
    if (s.isEmpty()) {
      throw new IllegalArgumentException("an ascii field holds at least one character");
    }
    if (s.length() > maxLength) {
      throw new IllegalArgumentException(
          "string of " + s.length() + " characters exceeds its limit of " + maxLength);
    }
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c < 0x21 || c > 0x7E) {
        throw new IllegalArgumentException("not printable ASCII at index " + i + ": " + (int) c);
      }
    }
    return writeBytes(s.getBytes(StandardCharsets.US_ASCII));
  }

  /** Number of bytes {@link #writeVarLong} uses for {@code v}. */
  public static int varLongSize(long v) {
    if (v < 0) {
      return MAX_VARLONG_BYTES;
    }
    int bits = 64 - Long.numberOfLeadingZeros(v | 1);
    return (bits + 6) / 7;
  }

  private void ensure(long extra) {
    long needed = (long) size + extra;
    if (needed > cap) {
      throw new MessageTooLargeException(cap, needed);
    }
    if (needed > buf.length) {
      long grown = Math.max(needed, Math.max(16L, (long) buf.length * 2));
      buf = Arrays.copyOf(buf, (int) Math.min(grown, cap));
    }
  }
}
