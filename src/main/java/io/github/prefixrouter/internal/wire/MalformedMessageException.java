package io.github.prefixrouter.internal.wire;

/**
 * A received message could not be decoded: it is truncated, oversized, uses an unknown version
 * or type, or holds a value outside its field's limits. The message must be dropped as a whole
 * (and counted); decoding never applies part of it.
 *
 * <p>Checked on purpose: every decode site has to decide what to do with a bad message, so none
 * can forget to count and drop it. The message names the field, the offending value and the
 * limit; the same facts are available as {@link #reason()}, {@link #field()}, {@link #value()}
 * and {@link #limit()} for counters and tests.
 */
public final class MalformedMessageException extends Exception {

  /** What is wrong with the message. */
  public enum Reason {
    /**
     * The message ends before a field is complete, or a length or count (times the smallest
     * encoding of one element) is larger than the bytes left in the message.
     */
    TRUNCATED,
    /** A length or count is larger than its explicit limit, or the message than its cap. */
    TOO_LARGE,
    /** A value lies outside the range its field allows. */
    OUT_OF_RANGE,
    /**
     * A variable-length integer is longer than 10 bytes, overflows 64 bits, or is not in its
     * shortest encoding.
     */
    BAD_VARINT,
    /** The version byte names a version this decoder does not speak. */
    UNKNOWN_VERSION,
    /** The message type byte names no known message. */
    UNKNOWN_TYPE,
    /** Bytes remain after the last field of the message. */
    TRAILING_BYTES,
    /**
     * A string holds a character its field does not allow: outside printable ASCII in an
     * {@code ascii} field, malformed UTF-8 or an encoded surrogate in a text field, a control
     * character where text must have none.
     */
    BAD_CHARACTER,
    /** The fields decode but contradict each other (for example a forged origin). */
    INCONSISTENT
  }

  private static final long NONE = Long.MIN_VALUE;

  private final Reason reason;
  private final String field;
  private final long value;
  private final long limit;
  private final int offset;

  private MalformedMessageException(
      Reason reason, String field, long value, long limit, int offset, String detail) {
    this(reason, field, value, false, limit, offset, detail);
  }

  private MalformedMessageException(Reason reason, String field, long value, boolean unsigned,
      long limit, int offset, String detail) {
    super(format(reason, field, value, unsigned, limit, offset, detail), null, false, false);
    this.reason = reason;
    this.field = field;
    this.value = value;
    this.limit = limit;
    this.offset = offset;
  }

  /**
   * A field's value is larger than its limit (lengths, counts, sizes). The value is unsigned: a
   * negative one stands for 2^63 or more, as a varint reads into a {@code long}.
   */
  public static MalformedMessageException tooLarge(
      String field, long value, long limit, int offset) {
    return new MalformedMessageException(
        Reason.TOO_LARGE, field, value, true, limit, offset, null);
  }

  /** The message ended inside {@code field}: {@code needed} bytes wanted, {@code left} left. */
  public static MalformedMessageException truncated(
      String field, long needed, long left, int offset) {
    return new MalformedMessageException(Reason.TRUNCATED, field, needed, left, offset, null);
  }

  /** {@code value} lies outside {@code [min, max]}. */
  public static MalformedMessageException outOfRange(
      String field, long value, long min, long max, int offset) {
    return new MalformedMessageException(
        Reason.OUT_OF_RANGE, field, value, max, offset, "allowed " + min + ".." + max);
  }

  /**
   * {@code value}, an unsigned varint, lies outside {@code [min, max]}: as {@link #outOfRange},
   * but a negative value stands for 2^63 or more and is written so in the message.
   */
  public static MalformedMessageException outOfRangeUnsigned(
      String field, long value, long min, long max, int offset) {
    return new MalformedMessageException(
        Reason.OUT_OF_RANGE, field, value, true, max, offset, "allowed " + min + ".." + max);
  }

  /** Any other reason, with a free-form detail. */
  public static MalformedMessageException of(
      Reason reason, String field, long value, int offset, String detail) {
    return new MalformedMessageException(reason, field, value, NONE, offset, detail);
  }

  public Reason reason() {
    return reason;
  }

  /** The name of the field being decoded when the problem was found. */
  public String field() {
    return field;
  }

  /**
   * The offending value (a length, count, or the decoded value), if any. A varint of 2^63 or
   * more is negative here, as read into a {@code long}; the message shows it unsigned.
   */
  public long value() {
    return value;
  }

  /** The limit the value broke, or {@link Long#MIN_VALUE} when none applies. */
  public long limit() {
    return limit;
  }

  /** Byte offset in the message where the field starts, or -1 when unknown. */
  public int offset() {
    return offset;
  }

  private static String format(Reason reason, String field, long value, boolean unsigned,
      long limit, int offset, String detail) {
    String v = unsigned ? Long.toUnsignedString(value) : Long.toString(value);
    StringBuilder sb = new StringBuilder(64);
    sb.append("malformed message: ").append(reason).append(" in field '").append(field).append('\'');
    switch (reason) {
      case TRUNCATED:
        sb.append(": needs ").append(value).append(" byte(s), ").append(limit).append(" left");
        break;
      case TOO_LARGE:
        sb.append(": ").append(v).append(" exceeds limit ").append(limit);
        break;
      default:
        if (unsigned || value != NONE) { // unsigned, NONE's bits are 2^63
          sb.append(": value ").append(v);
        }
    }
    if (detail != null) {
      sb.append(" (").append(detail).append(')');
    }
    if (offset >= 0) {
      sb.append(" at offset ").append(offset);
    }
    return sb.toString();
  }
}
