package io.github.prefixrouter.internal.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import net.jqwik.api.Assume;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

/**
 * A varint has one encoding, the shortest: every value written reads back, and the same value
 * with zero groups added (a longer encoding of it) is refused as {@code BAD_VARINT}.
 */
class VarintProperties {

  /** The minimal encoding, from the format's definition. */
  static byte[] minimal(long v) {
    byte[] out = new byte[10];
    int n = 0;
    do {
      int group = (int) (v & 0x7F);
      v >>>= 7;
      out[n++] = (byte) (v != 0 ? group | 0x80 : group);
    } while (v != 0);
    return Arrays.copyOf(out, n);
  }

  private static byte[] written(long v) {
    return new ByteWriter(16, 16).writeVarLong(v).toByteArray();
  }

  @Property(tries = 2000)
  void everyValueIsWrittenInItsShortestEncodingAndReadBack(@ForAll long v)
      throws MalformedMessageException {
    byte[] b = written(v);
    assertArrayEquals(minimal(v), b);
    ByteReader r = new ByteReader(b);
    assertEquals(v, r.readVarLong("v"));
    assertTrue(r.atEnd());
  }

  @Property(tries = 2000)
  void everyLongerEncodingOfAValueIsRefused(@ForAll long v, @ForAll @IntRange(min = 1, max = 9) int extra) {
    byte[] m = minimal(v);
    Assume.that(m.length + extra <= 10);
    // the last group gets the continuation bit, then extra - 1 empty groups that continue and
    // one that ends: the same value, in more bytes
    byte[] longer = Arrays.copyOf(m, m.length + extra);
    for (int i = m.length - 1; i < longer.length - 1; i++) {
      longer[i] |= (byte) 0x80;
    }
    MalformedMessageException e = assertThrows(MalformedMessageException.class,
        () -> new ByteReader(longer).readVarLong("v"), () -> "read " + Arrays.toString(longer));
    assertEquals(MalformedMessageException.Reason.BAD_VARINT, e.reason());
    assertEquals(0, e.offset(), "the varint's first byte");
  }

  @Example
  void zeroInTwoBytesIsRefused() {
    MalformedMessageException e = assertThrows(MalformedMessageException.class,
        () -> new ByteReader(new byte[] {(byte) 0x80, 0x00}).readVarLong("v"));
    assertEquals(MalformedMessageException.Reason.BAD_VARINT, e.reason());
    assertTrue(e.getMessage().contains("minimal"), e.getMessage());
  }
}
