package io.github.prefixrouter.engine.vllm;

import java.nio.charset.StandardCharsets;

/**
 * A cursor over one msgpack-encoded value, reading only what the KV-event decoder needs and
 * skipping anything else. Every read checks the bytes left before it touches or allocates
 * anything: a declared length or count larger than what remains (each array element takes at
 * least one byte, each map entry two) is rejected before any array is sized from it, and
 * skipping stops at {@link #MAX_DEPTH} levels of nesting. All failures are
 * {@link MalformedKvEventException}s.
 *
 * <p>Not thread-safe; one reader decodes one payload.
 */
final class MsgpackReader {

  /** How deeply arrays and maps may nest, counting the outermost value as depth 1. */
  static final int MAX_DEPTH = 32;

  /** The kinds of msgpack values. */
  enum Kind {
    NIL, BOOL, INT, FLOAT, STR, BIN, ARRAY, MAP, EXT
  }

  private final byte[] buf;
  private int pos;

  MsgpackReader(byte[] buf) {
    this.buf = buf;
  }

  int position() {
    return pos;
  }

  /** Moves back to a position returned by {@link #position()}. */
  void reset(int position) {
    pos = position;
  }

  boolean atEnd() {
    return pos == buf.length;
  }

  private int remaining() {
    return buf.length - pos;
  }

  private MalformedKvEventException error(String what) {
    return new MalformedKvEventException(what, pos);
  }

  private void need(long n, String field) throws MalformedKvEventException {
    if (n > remaining()) {
      throw error(field + ": needs " + n + " byte(s), " + remaining() + " left");
    }
  }

  /** The kind of the next value, without consuming it. */
  Kind peekKind(String field) throws MalformedKvEventException {
    need(1, field);
    int b = buf[pos] & 0xFF;
    if (b <= 0x7F || b >= 0xE0) {
      return Kind.INT;
    }
    if (b <= 0x8F) {
      return Kind.MAP;
    }
    if (b <= 0x9F) {
      return Kind.ARRAY;
    }
    if (b <= 0xBF) {
      return Kind.STR;
    }
    switch (b) {
      case 0xC0:
        return Kind.NIL;
      case 0xC2:
      case 0xC3:
        return Kind.BOOL;
      case 0xC4:
      case 0xC5:
      case 0xC6:
        return Kind.BIN;
      case 0xC7:
      case 0xC8:
      case 0xC9:
      case 0xD4:
      case 0xD5:
      case 0xD6:
      case 0xD7:
      case 0xD8:
        return Kind.EXT;
      case 0xCA:
      case 0xCB:
        return Kind.FLOAT;
      case 0xCC:
      case 0xCD:
      case 0xCE:
      case 0xCF:
      case 0xD0:
      case 0xD1:
      case 0xD2:
      case 0xD3:
        return Kind.INT;
      case 0xD9:
      case 0xDA:
      case 0xDB:
        return Kind.STR;
      case 0xDC:
      case 0xDD:
        return Kind.ARRAY;
      case 0xDE:
      case 0xDF:
        return Kind.MAP;
      default:
        throw error(field + ": byte 0x" + Integer.toHexString(b) + " starts no msgpack value");
    }
  }

  private Kind expect(Kind kind, String field) throws MalformedKvEventException {
    Kind k = peekKind(field);
    if (k != kind) {
      throw error(field + ": expected " + kind + ", found " + k);
    }
    return k;
  }

  /** Consumes a nil and returns true, or returns false (consuming nothing) if the next value is not nil. */
  boolean tryNil(String field) throws MalformedKvEventException {
    if (peekKind(field) == Kind.NIL) {
      pos++;
      return true;
    }
    return false;
  }

  /** An unsigned big-endian integer of {@code n} bytes (n ≤ 8) at the cursor. */
  private long uint(int n, String field) throws MalformedKvEventException {
    need(n, field);
    long v = 0;
    for (int i = 0; i < n; i++) {
      v = (v << 8) | (buf[pos++] & 0xFF);
    }
    return v;
  }

  /**
   * Reads a length or count of the given header family: the fix form holds it in the low bits
   * of the first byte ({@code fixMask}), the others in the following 1, 2 or 4 bytes.
   */
  private long header(int fixLow, int fixMask, int b8, int b16, int b32, String field)
      throws MalformedKvEventException {
    int b = buf[pos++] & 0xFF;
    if (fixMask != 0 && (b & ~fixMask) == fixLow) {
      return b & fixMask;
    }
    if (b == b8) {
      return uint(1, field);
    }
    if (b == b16) {
      return uint(2, field);
    }
    if (b == b32) {
      return uint(4, field);
    }
    throw new IllegalStateException("not a header byte: " + b);
  }

  /** An array header; the count is at most the bytes left. */
  int readArrayHeader(String field) throws MalformedKvEventException {
    expect(Kind.ARRAY, field);
    long n = header(0x90, 0x0F, -1, 0xDC, 0xDD, field);
    if (n > remaining()) {
      throw error(field + ": array of " + n + " elements, only " + remaining() + " byte(s) left");
    }
    return (int) n;
  }

  /** A map header; the entry count is at most half the bytes left. */
  int readMapHeader(String field) throws MalformedKvEventException {
    expect(Kind.MAP, field);
    long n = header(0x80, 0x0F, -1, 0xDE, 0xDF, field);
    if (2 * n > remaining()) {
      throw error(field + ": map of " + n + " entries, only " + remaining() + " byte(s) left");
    }
    return (int) n;
  }

  /** A str or bin header; the length is at most the bytes left. */
  private int bytesHeader(Kind kind, String field) throws MalformedKvEventException {
    long n = kind == Kind.STR
        ? header(0xA0, 0x1F, 0xD9, 0xDA, 0xDB, field)
        : header(0, 0, 0xC4, 0xC5, 0xC6, field);
    if (n > remaining()) {
      throw error(field + ": " + kind + " of " + n + " bytes, only " + remaining() + " left");
    }
    return (int) n;
  }

  /** A str value, decoded as UTF-8 (malformed sequences become replacement characters). */
  String readString(String field) throws MalformedKvEventException {
    expect(Kind.STR, field);
    int n = bytesHeader(Kind.STR, field);
    String s = new String(buf, pos, n, StandardCharsets.UTF_8);
    pos += n;
    return s;
  }

  /**
   * An integer of any msgpack width, as its 64 bits: an unsigned 64-bit value above
   * {@link Long#MAX_VALUE} comes back negative (the same bits).
   */
  long readLongBits(String field) throws MalformedKvEventException {
    expect(Kind.INT, field);
    int b = buf[pos] & 0xFF;
    if (b <= 0x7F) {
      pos++;
      return b;
    }
    if (b >= 0xE0) {
      pos++;
      return (byte) b;
    }
    pos++;
    switch (b) {
      case 0xCC:
        return uint(1, field);
      case 0xCD:
        return uint(2, field);
      case 0xCE:
        return uint(4, field);
      case 0xCF:
        return uint(8, field);
      case 0xD0:
        return (byte) uint(1, field);
      case 0xD1:
        return (short) uint(2, field);
      case 0xD2:
        return (int) uint(4, field);
      default: // 0xD3
        return uint(8, field);
    }
  }

  /** An integer that must lie in {@code int} range. */
  int readInt(String field) throws MalformedKvEventException {
    int start = pos;
    expect(Kind.INT, field);
    boolean unsigned64 = (buf[pos] & 0xFF) == 0xCF;
    long v = readLongBits(field);
    if ((unsigned64 && v < 0) || v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
      throw new MalformedKvEventException(
          field + ": " + (unsigned64 && v < 0 ? Long.toUnsignedString(v) : Long.toString(v))
              + " is outside int range", start);
    }
    return (int) v;
  }

  /**
   * A block hash: an integer (its 64 bits), or bin bytes (their last 8 bytes big-endian; fewer
   * than 8 bytes give their big-endian value).
   */
  long readHash(String field) throws MalformedKvEventException {
    Kind k = peekKind(field);
    if (k == Kind.INT) {
      // peekKind consumed nothing; readLongBits checks the kind again
      return readLongBits(field);
    }
    if (k != Kind.BIN) {
      throw error(field + ": expected an INT or BIN block hash, found " + k);
    }
    int n = bytesHeader(Kind.BIN, field);
    long v = 0;
    for (int i = Math.max(0, n - 8); i < n; i++) {
      v = (v << 8) | (buf[pos + i] & 0xFF);
    }
    pos += n;
    return v;
  }

  /** A number: an integer or a float of either width. */
  void skipNumber(String field) throws MalformedKvEventException {
    Kind k = peekKind(field);
    if (k != Kind.INT && k != Kind.FLOAT) {
      throw error(field + ": expected a number, found " + k);
    }
    skip(1, field);
  }

  /**
   * Skips one value of any kind, nested at {@code depth} (1 for a top-level value).
   *
   * @throws MalformedKvEventException if the value is truncated or nests deeper than
   *     {@link #MAX_DEPTH}
   */
  void skip(int depth, String field) throws MalformedKvEventException {
    if (depth > MAX_DEPTH) {
      throw error(field + ": nested deeper than " + MAX_DEPTH + " levels");
    }
    Kind k = peekKind(field);
    int b = buf[pos] & 0xFF;
    switch (k) {
      case NIL:
      case BOOL:
        pos++;
        return;
      case INT:
        readLongBits(field);
        return;
      case FLOAT:
        pos++;
        need(b == 0xCA ? 4 : 8, field);
        pos += b == 0xCA ? 4 : 8;
        return;
      case STR:
      case BIN: {
        int n = bytesHeader(k, field); // before pos is read: the header moves it
        pos += n;
        return;
      }
      case EXT:
        skipExt(b, field);
        return;
      case ARRAY:
        for (int i = readArrayHeader(field); i > 0; i--) {
          skip(depth + 1, field);
        }
        return;
      default: // MAP
        for (int i = readMapHeader(field); i > 0; i--) {
          skip(depth + 1, field);
          skip(depth + 1, field);
        }
    }
  }

  private void skipExt(int b, String field) throws MalformedKvEventException {
    pos++;
    long n;
    switch (b) {
      case 0xD4:
        n = 1;
        break;
      case 0xD5:
        n = 2;
        break;
      case 0xD6:
        n = 4;
        break;
      case 0xD7:
        n = 8;
        break;
      case 0xD8:
        n = 16;
        break;
      case 0xC7:
        n = uint(1, field);
        break;
      case 0xC8:
        n = uint(2, field);
        break;
      default: // 0xC9
        n = uint(4, field);
    }
    need(n + 1, field); // the type byte, then the data
    pos += (int) (n + 1);
  }
}
