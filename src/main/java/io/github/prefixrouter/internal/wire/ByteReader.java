package io.github.prefixrouter.internal.wire;

import io.github.prefixrouter.internal.wire.MalformedMessageException.Reason;
import java.nio.charset.StandardCharsets;

/**
 * A bounds-checked cursor over a received message, the counterpart of {@link ByteWriter}.
 *
 * <p>Design note: every read checks the bytes left before touching the buffer, and every
 * length or count is checked against an explicit limit <em>and</em> against the bytes left
 * (times the smallest encoding of one element) <em>before</em> anything is allocated. A lying
 * header can therefore never make the decoder allocate more than the message itself could
 * hold, and never more than the caller's limit. Every failure is a
 * {@link MalformedMessageException} naming the field, the value and the limit; no other
 * exception escapes a read, whatever the bytes.
 *
 * <p>Not thread-safe; one reader per message.
 */
public final class ByteReader {

  private final byte[] buf;
  private final int end;
  private int pos;

  /** Reads all of {@code message}. */
  public ByteReader(byte[] message) {
    this(message, 0, message.length);
  }

  /** Reads {@code length} bytes of {@code message} starting at {@code offset}. */
  public ByteReader(byte[] message, int offset, int length) {
    if (offset < 0 || length < 0 || offset > message.length - length) {
      throw new IndexOutOfBoundsException(
          "offset " + offset + " length " + length + " outside array of " + message.length);
    }
    this.buf = message;
    this.pos = offset;
    this.end = offset + length;
  }

  /** Current offset in the underlying array. */
  public int position() {
    return pos;
  }

  /** Bytes not yet read. */
  public int remaining() {
    return end - pos;
  }

  /** True when every byte has been read. */
  public boolean atEnd() {
    return pos == end;
  }

  /** Fails unless every byte has been read: trailing garbage is not tolerated. */
  public void expectEnd(String message) throws MalformedMessageException {
    if (pos != end) {
      throw MalformedMessageException.of(
          Reason.TRAILING_BYTES, message, end - pos, pos, (end - pos) + " unread byte(s)");
    }
  }

  /** Reads one byte as an unsigned value 0..255. */
  public int readUnsignedByte(String field) throws MalformedMessageException {
    need(field, 1);
    return buf[pos++] & 0xFF;
  }

  /** Reads a boolean encoded as exactly 0 or 1. */
  public boolean readBoolean(String field) throws MalformedMessageException {
    int start = pos;
    int b = readUnsignedByte(field);
    if (b > 1) {
      throw MalformedMessageException.outOfRange(field, b, 0, 1, start);
    }
    return b == 1;
  }

  public int readFixedInt(String field) throws MalformedMessageException {
    need(field, 4);
    int v =
        ((buf[pos] & 0xFF) << 24)
            | ((buf[pos + 1] & 0xFF) << 16)
            | ((buf[pos + 2] & 0xFF) << 8)
            | (buf[pos + 3] & 0xFF);
    pos += 4;
    return v;
  }

  public long readFixedLong(String field) throws MalformedMessageException {
    need(field, 8);
    long v = 0;
    for (int i = 0; i < 8; i++) {
      v = (v << 8) | (buf[pos + i] & 0xFF);
    }
    pos += 8;
    return v;
  }

  /**
   * Reads an unsigned LEB128 varint of at most 10 bytes covering exactly 64 bits, in its shortest
   * encoding: a last byte of 0 after others (zero groups that only make it longer) is
   * {@code BAD_VARINT}, so each value has one encoding.
   */
  public long readVarLong(String field) throws MalformedMessageException {
    int start = pos;
    long v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= end) {
        throw MalformedMessageException.truncated(field, 1, 0, start);
      }
      int b = buf[pos++] & 0xFF;
      if (shift == 63 && b > 1) {
        throw MalformedMessageException.of(
            Reason.BAD_VARINT, field, b, start, "varint overflows 64 bits");
      }
      v |= (long) (b & 0x7F) << shift;
      if ((b & 0x80) == 0) {
        if (b == 0 && shift > 0) {
          throw MalformedMessageException.of(
              Reason.BAD_VARINT, field, b, start, "varint not minimal (ends with a zero group)");
        }
        return v;
      }
    }
    throw MalformedMessageException.of(
        Reason.BAD_VARINT, field, -1, start, "varint longer than 10 bytes");
  }

  /** Reads a varint and checks it lies in {@code [min, max]} (unsigned values, min >= 0). */
  public long readVarLong(String field, long min, long max) throws MalformedMessageException {
    int start = pos;
    long v = readVarLong(field);
    if (v < min || v > max) { // negative means >= 2^63 unsigned: above any max
      throw MalformedMessageException.outOfRangeUnsigned(field, v, min, max, start);
    }
    return v;
  }

  /** Reads a varint and checks it lies in {@code [min, max]}. */
  public int readVarInt(String field, int min, int max) throws MalformedMessageException {
    return (int) readVarLong(field, min, max);
  }

  /** Reads a ZigZag-encoded signed varint. */
  public long readZigZagLong(String field) throws MalformedMessageException {
    long u = readVarLong(field);
    return (u >>> 1) ^ -(u & 1);
  }

  /**
   * Reads an element count and checks it before the caller allocates: the count must be at most
   * {@code maxCount}, and {@code count * minBytesPerElement} must fit in the bytes left.
   *
   * @param minBytesPerElement the fewest bytes one element can take on the wire (at least 1)
   */
  public int readCount(String field, int maxCount, int minBytesPerElement)
      throws MalformedMessageException {
    if (minBytesPerElement < 1) {
      throw new IllegalArgumentException("minBytesPerElement must be >= 1");
    }
    int start = pos;
    long n = readVarLong(field);
    if (n < 0 || n > maxCount) {
      throw MalformedMessageException.tooLarge(field, n, maxCount, start);
    }
    long bytes = n * minBytesPerElement;
    if (bytes > remaining()) {
      throw MalformedMessageException.truncated(field, bytes, remaining(), start);
    }
    return (int) n;
  }

  /** Reads a length-prefixed byte string of at most {@code maxLength} bytes. */
  public byte[] readBytes(String field, int maxLength) throws MalformedMessageException {
    int len = readLength(field, maxLength);
    byte[] out = new byte[len];
    System.arraycopy(buf, pos, out, 0, len);
    pos += len;
    return out;
  }

  /**
   * Reads what {@link #readBytes(String, int)} reads, with the same checks, into {@code dst}
   * from {@code offset} on, without allocating.
   *
   * @param dst has room for {@code maxLength} bytes from {@code offset} on
   * @return how many bytes were read
   */
  public int readBytes(String field, int maxLength, byte[] dst, int offset)
      throws MalformedMessageException {
    int len = readLength(field, maxLength);
    System.arraycopy(buf, pos, dst, offset, len);
    pos += len;
    return len;
  }

  /**
   * Reads a length-prefixed string of 1 to {@code maxLength} printable ASCII characters
   * ({@code 0x21..0x7E}, no spaces), the format of node ids and addresses.
   */
  public String readAscii(String field, int maxLength) throws MalformedMessageException {
    int start = pos;
    int len = readLength(field, maxLength);
    if (len == 0) {
      throw MalformedMessageException.outOfRange(field, 0, 1, maxLength, start);
    }
    for (int i = 0; i < len; i++) {
      int c = buf[pos + i] & 0xFF;
      if (c < 0x21 || c > 0x7E) {
        throw MalformedMessageException.of(
            Reason.BAD_CHARACTER, field, c, pos + i, "not printable ASCII");
      }
    }
    String s = new String(buf, pos, len, StandardCharsets.US_ASCII);
    pos += len;
    return s;
  }

  /** Reads a count-prefixed array of fixed 64-bit values, at most {@code maxCount} of them. */
  public long[] readFixedLongArray(String field, int maxCount) throws MalformedMessageException {
    int n = readCount(field, maxCount, 8);
    long[] out = new long[n];
    for (int i = 0; i < n; i++) {
      out[i] = readFixedLong(field);
    }
    return out;
  }

  /**
   * Reads a {@code count(maxCount, 4)} followed by that many {@code fixed32}, each returned as an
   * unsigned value in {@code 0..2^32-1}.
   */
  public long[] readFixedUnsignedIntArray(String field, int maxCount)
      throws MalformedMessageException {
    int n = readCount(field, maxCount, 4);
    long[] out = new long[n];
    for (int i = 0; i < n; i++) {
      out[i] = readFixedInt(field) & 0xFFFF_FFFFL;
    }
    return out;
  }

  /** Skips {@code n} bytes. */
  public void skip(String field, int n) throws MalformedMessageException {
    need(field, n);
    pos += n;
  }

  private int readLength(String field, int maxLength) throws MalformedMessageException {
    int start = pos;
    long len = readVarLong(field);
    if (len < 0 || len > maxLength) {
      throw MalformedMessageException.tooLarge(field, len, maxLength, start);
    }
    if (len > remaining()) {
      throw MalformedMessageException.truncated(field, len, remaining(), start);
    }
    return (int) len;
  }

  private void need(String field, int n) throws MalformedMessageException {
    if (n < 0 || n > end - pos) {
      throw MalformedMessageException.truncated(field, n, end - pos, pos);
    }
  }
}
