package io.github.prefixrouter.internal.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.wire.MalformedMessageException.Reason;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.CharRange;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.StringLength;
import org.junit.jupiter.api.Test;

class ByteWriterReaderTest {

  /** One field of a random message: its kind and value, encoded and decoded independently. */
  record Field(int kind, long value, byte[] bytes, String text) {}

  @Provide
  Arbitrary<List<Field>> messages() {
    Arbitrary<Field> field =
        Combinators.combine(
                Arbitraries.integers().between(0, 7),
                Arbitraries.longs(),
                Arbitraries.bytes().array(byte[].class).ofMaxSize(40),
                Arbitraries.strings().withCharRange('!', '~').ofMinLength(1).ofMaxLength(30))
            .as(Field::new);
    return field.list().ofMaxSize(30);
  }

  private static void write(ByteWriter w, Field f) {
    switch (f.kind()) {
      case 0 -> w.writeByte((int) f.value());
      case 1 -> w.writeBoolean((f.value() & 1) == 1);
      case 2 -> w.writeFixedInt((int) f.value());
      case 3 -> w.writeFixedLong(f.value());
      case 4 -> w.writeVarLong(f.value());
      case 5 -> w.writeZigZagLong(f.value());
      case 6 -> w.writeBytes(f.bytes());
      default -> w.writeAscii(f.text(), 64);
    }
  }

  private static void readAndCheck(ByteReader r, Field f) throws MalformedMessageException {
    switch (f.kind()) {
      case 0 -> assertEquals(f.value() & 0xFF, r.readUnsignedByte("b"));
      case 1 -> assertEquals((f.value() & 1) == 1, r.readBoolean("bool"));
      case 2 -> assertEquals((int) f.value(), r.readFixedInt("i"));
      case 3 -> assertEquals(f.value(), r.readFixedLong("l"));
      case 4 -> assertEquals(f.value(), r.readVarLong("v"));
      case 5 -> assertEquals(f.value(), r.readZigZagLong("z"));
      case 6 -> assertArrayEquals(f.bytes(), r.readBytes("bytes", 40));
      default -> assertEquals(f.text(), r.readAscii("s", 64));
    }
  }

  @Property
  void everyFieldRoundTrips(@ForAll("messages") List<Field> fields)
      throws MalformedMessageException {
    ByteWriter w = new ByteWriter(0, 1 << 16);
    for (Field f : fields) {
      write(w, f);
    }
    ByteReader r = new ByteReader(w.toByteArray());
    for (Field f : fields) {
      readAndCheck(r, f);
    }
    r.expectEnd("message");
  }

  @Property
  void varLongSizeMatchesEncoding(@ForAll long v) {
    ByteWriter w = new ByteWriter(0, 16);
    w.writeVarLong(v);
    assertEquals(w.size(), ByteWriter.varLongSize(v));
  }

  /** Truncating a valid message anywhere only ever raises the typed exception. */
  @Property
  void truncatedMessagesFailTyped(
      @ForAll("messages") List<Field> fields) {
    ByteWriter w = new ByteWriter(0, 1 << 16);
    for (Field f : fields) {
      write(w, f);
    }
    byte[] full = w.toByteArray();
    for (int cut = 0; cut < full.length; cut++) {
      ByteReader r = new ByteReader(full, 0, cut);
      try {
        for (Field f : fields) {
          readAndCheck(r, f);
        }
        r.expectEnd("message");
        throw new AssertionError("a message cut at " + cut + " of " + full.length + " decoded");
      } catch (MalformedMessageException expected) {
        assertTrue(expected.getMessage().contains("malformed message"));
      }
    }
  }

  /** Arbitrary bytes read as any field sequence raise only the typed exception. */
  @Property
  void randomBytesFailTypedOrDecode(
      @ForAll byte[] junk, @ForAll("kinds") List<Integer> kinds) {
    ByteReader r = new ByteReader(junk);
    try {
      for (int k : kinds) {
        switch (k) {
          case 0 -> r.readUnsignedByte("b");
          case 1 -> r.readBoolean("bool");
          case 2 -> r.readFixedInt("i");
          case 3 -> r.readFixedLong("l");
          case 4 -> r.readVarLong("v", 0, 1000);
          case 5 -> r.readZigZagLong("z");
          case 6 -> assertTrue(r.readBytes("bytes", 16).length <= 16);
          case 7 -> assertTrue(r.readAscii("s", 8).length() <= 8);
          case 8 -> assertTrue(r.readFixedLongArray("a", 4).length <= 4);
          default -> assertTrue(r.readCount("n", 100, 3) * 3 <= r.remaining());
        }
      }
    } catch (MalformedMessageException expected) {
      assertTrue(expected.field() != null);
    }
  }

  @Provide
  Arbitrary<List<Integer>> kinds() {
    return Arbitraries.integers().between(0, 9).list().ofMaxSize(12);
  }

  @Test
  void lyingLengthIsRejectedBeforeAllocation() {
    ByteWriter w = new ByteWriter(16, 64);
    w.writeVarLong(Integer.MAX_VALUE); // claims 2 GiB of payload
    w.writeByte(1);
    ByteReader r = new ByteReader(w.toByteArray());
    MalformedMessageException e =
        assertThrows(MalformedMessageException.class, () -> r.readBytes("payload", 1 << 20));
    assertEquals(Reason.TOO_LARGE, e.reason());
    assertEquals("payload", e.field());
    assertEquals(Integer.MAX_VALUE, e.value());
    assertEquals(1 << 20, e.limit());
    assertTrue(e.getMessage().contains("'payload'"), e.getMessage());
  }

  @Test
  void lengthWithinLimitButBeyondMessageIsTruncated() {
    ByteWriter w = new ByteWriter(16, 64);
    w.writeVarLong(50);
    w.writeByte(1);
    MalformedMessageException e =
        assertThrows(
            MalformedMessageException.class,
            () -> new ByteReader(w.toByteArray()).readBytes("payload", 100));
    assertEquals(Reason.TRUNCATED, e.reason());
  }

  @Test
  void countIsCheckedAgainstBytesLeft() throws MalformedMessageException {
    ByteWriter w = new ByteWriter(16, 64);
    w.writeVarLong(3);
    w.writeFixedLong(1).writeFixedLong(2);
    ByteReader r = new ByteReader(w.toByteArray());
    MalformedMessageException e =
        assertThrows(MalformedMessageException.class, () -> r.readFixedLongArray("hashes", 10));
    assertEquals(Reason.TRUNCATED, e.reason());
    ByteReader r2 = new ByteReader(w.toByteArray());
    MalformedMessageException e2 =
        assertThrows(MalformedMessageException.class, () -> r2.readFixedLongArray("hashes", 2));
    assertEquals(Reason.TOO_LARGE, e2.reason());
    assertEquals(3, e2.value());
    // one byte short of three longs: refused at the count, before an array is made for them
    ByteWriter w3 = new ByteWriter(16, 64);
    w3.writeVarLong(3);
    w3.writeFixedLong(1).writeFixedLong(2).writeFixedInt(3).writeByte(4).writeByte(5).writeByte(6);
    MalformedMessageException e3 = assertThrows(MalformedMessageException.class,
        () -> new ByteReader(w3.toByteArray()).readFixedLongArray("hashes", 10));
    assertEquals(Reason.TRUNCATED, e3.reason());
    assertEquals(24, e3.value());
    assertEquals(0, e3.offset());
  }

  @Test
  void overlongVarintIsRejected() {
    byte[] eleven = new byte[11];
    java.util.Arrays.fill(eleven, (byte) 0x80);
    MalformedMessageException e =
        assertThrows(
            MalformedMessageException.class, () -> new ByteReader(eleven).readVarLong("v"));
    assertEquals(Reason.BAD_VARINT, e.reason());
    byte[] overflow = {-1, -1, -1, -1, -1, -1, -1, -1, -1, 0x02};
    MalformedMessageException e2 =
        assertThrows(
            MalformedMessageException.class, () -> new ByteReader(overflow).readVarLong("v"));
    assertEquals(Reason.BAD_VARINT, e2.reason());
  }

  @Test
  void rangeChecksNameTheLimits() {
    ByteWriter w = new ByteWriter(16, 64).writeVarLong(-1L);
    MalformedMessageException e =
        assertThrows(
            MalformedMessageException.class,
            () -> new ByteReader(w.toByteArray()).readVarInt("fanout", 0, 10));
    assertEquals(Reason.OUT_OF_RANGE, e.reason());
    assertTrue(e.getMessage().contains("0..10"), e.getMessage());
  }

  /**
   * A varint of 2^63 or more, which a peer sends as ten bytes, is reported as the unsigned
   * number it encodes: read into a {@code long} it is negative, and the messages said that a
   * count of -1 "exceeds limit 65537", or that a value -1 lay outside 0..10.
   */
  @Test
  void valuesOfTwoToThe63OrMoreAreReportedAsSent() {
    for (long v : new long[] {-1L, Long.MIN_VALUE}) { // 2^64 - 1 and 2^63
      byte[] b = new ByteWriter(16, 64).writeVarLong(v).toByteArray();
      String sent = Long.toUnsignedString(v);
      List<MalformedMessageException> errors = List.of(
          assertThrows(MalformedMessageException.class,
              () -> new ByteReader(b).readCount("digest.count", 65_537, 6)),
          assertThrows(MalformedMessageException.class,
              () -> new ByteReader(b).readBytes("rest", 64)),
          assertThrows(MalformedMessageException.class,
              () -> new ByteReader(b).readVarLong("round", 0, 1L << 62)),
          assertThrows(MalformedMessageException.class,
              () -> new ByteReader(b).readVarInt("fanout", 0, 10)));
      for (MalformedMessageException e : errors) {
        assertEquals(v, e.value());
        assertTrue(e.getMessage().contains(" " + sent + " ") && !e.getMessage().contains("-"),
            e.getMessage());
      }
    }
  }

  @Test
  void badBooleanAndAsciiAreRejected() {
    assertEquals(
        Reason.OUT_OF_RANGE,
        assertThrows(
                MalformedMessageException.class,
                () -> new ByteReader(new byte[] {2}).readBoolean("flag"))
            .reason());
    assertEquals(
        Reason.BAD_CHARACTER,
        assertThrows(
                MalformedMessageException.class,
                () -> new ByteReader(new byte[] {2, 'a', ' '}).readAscii("id", 8))
            .reason());
    assertEquals(
        Reason.OUT_OF_RANGE,
        assertThrows(
                MalformedMessageException.class,
                () -> new ByteReader(new byte[] {0}).readAscii("id", 8))
            .reason());
  }

  @Test
  void trailingBytesAreRejected() throws MalformedMessageException {
    ByteReader r = new ByteReader(new byte[] {1, 2});
    r.readUnsignedByte("a");
    assertEquals(
        Reason.TRAILING_BYTES,
        assertThrows(MalformedMessageException.class, () -> r.expectEnd("msg")).reason());
  }

  @Test
  void writerEnforcesItsCapWithoutChangingContent() {
    ByteWriter w = new ByteWriter(0, 10);
    w.writeFixedLong(7);
    MessageTooLargeException e =
        assertThrows(MessageTooLargeException.class, () -> w.writeFixedInt(1));
    assertEquals(10, e.cap());
    assertEquals(12, e.attempted());
    assertEquals(8, w.size());
    assertThrows(MessageTooLargeException.class, () -> w.writeBytes(new byte[5]));
    assertEquals(8, w.size());
    w.writeByte(1).writeByte(2);
    assertEquals(0, w.remaining());
    w.truncate(8);
    assertEquals(2, w.remaining());
  }

  @Test
  void writerRejectsBadArguments() {
    assertThrows(IllegalArgumentException.class, () -> new ByteWriter(0, 0));
    assertThrows(IllegalArgumentException.class, () -> new ByteWriter(-1, 10));
    ByteWriter w = new ByteWriter(0, 100);
    assertThrows(IllegalArgumentException.class, () -> w.writeVarInt(-1));
    assertThrows(IllegalArgumentException.class, () -> w.writeAscii("a b", 10));
    assertThrows(IllegalArgumentException.class, () -> w.writeAscii("abc", 2));
    assertThrows(IllegalArgumentException.class, () -> w.writeAscii("", 10));
    assertEquals(0, w.size());
  }

  /**
   * The writer writes only the ascii fields the reader takes: any string and limit either is
   * refused by {@code writeAscii}, writing nothing, or reads back as itself.
   */
  @Property
  void writeAsciiWritesOnlyWhatReadAsciiReads(
      @ForAll @StringLength(max = 12) @CharRange(from = 0x1f, to = 0x80) String s,
      @ForAll @IntRange(min = 0, max = 10) int maxLength) throws MalformedMessageException {
    ByteWriter w = new ByteWriter(0, 64);
    try {
      w.writeAscii(s, maxLength);
    } catch (IllegalArgumentException refused) {
      assertEquals(0, w.size());
      return;
    }
    ByteReader r = new ByteReader(w.toByteArray());
    assertEquals(s, r.readAscii("s", maxLength));
    r.expectEnd("ascii");
  }

  @Test
  void knownEncodings() {
    assertArrayEquals(new byte[] {0}, new ByteWriter(0, 16).writeVarLong(0).toByteArray());
    assertArrayEquals(
        new byte[] {(byte) 0xAC, 0x02}, new ByteWriter(0, 16).writeVarLong(300).toByteArray());
    assertArrayEquals(new byte[] {3}, new ByteWriter(0, 16).writeZigZagLong(-2).toByteArray());
    assertArrayEquals(
        new byte[] {1, 2, 3, 4}, new ByteWriter(0, 16).writeFixedInt(0x01020304).toByteArray());
  }

  @Test
  void typeRanges() throws MalformedMessageException {
    assertTrue(WireTypes.isGossip(0x10));
    assertTrue(!WireTypes.isGossip(0x20));
    assertTrue(WireTypes.isForwarding(0x3F));
    assertEquals(0x11, WireTypes.peekType(new byte[] {0x11, 1}));
    assertThrows(MalformedMessageException.class, () -> WireTypes.peekType(new byte[0]));
  }
}
