package io.github.prefixrouter.internal.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.CharRange;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.StringLength;
import org.junit.jupiter.api.Test;

/**
 * {@link ByteWriter#writeAsciiFrom} writes what {@code writeBytes(s.substring(from).getBytes(
 * US_ASCII))} writes (the node ids of gossip, front-coded, used to be written that way).
 */
class AsciiRunsTest {

  @Property
  void writesTheBytesOfTheSubstring(
      @ForAll @StringLength(max = 200) @CharRange(from = 0, to = 0x7F) String s,
      @ForAll @IntRange(max = 200) int at) {
    int from = Math.min(at, s.length());
    ByteWriter expected = new ByteWriter(8, 1 << 10).writeByte(7)
        .writeBytes(s.substring(from).getBytes(StandardCharsets.US_ASCII));
    ByteWriter actual = new ByteWriter(8, 1 << 10).writeByte(7).writeAsciiFrom(s, from);
    assertArrayEquals(expected.toByteArray(), actual.toByteArray());
  }

  @Test
  void aCharacterThatIsNotAsciiIsRefusedBeforeAnythingIsWritten() {
    ByteWriter w = new ByteWriter(8, 1 << 10).writeByte(7);
    assertThrows(IllegalArgumentException.class, () -> w.writeAsciiFrom("node-\u00e9", 2));
    assertEquals(1, w.size());
    // the first character past ASCII, which a byte cast would write as 0x80
    assertThrows(IllegalArgumentException.class, () -> w.writeAsciiFrom("node-\u0080", 0));
    assertEquals(1, w.size());
    // characters before the run are not written, so not checked
    w.writeAsciiFrom("\u00e9-node", 1);
    assertArrayEquals(new byte[] {7, 5, '-', 'n', 'o', 'd', 'e'}, w.toByteArray());
  }

  @Test
  void theMessageCapHolds() {
    ByteWriter w = new ByteWriter(4, 6);
    w.writeAsciiFrom("abcde", 0);
    assertThrows(MessageTooLargeException.class, () -> w.writeAsciiFrom("a", 0));
    assertEquals(6, w.size());
    assertThrows(MessageTooLargeException.class, () -> w.writeByte(1), "one byte past the cap");
    assertEquals(6, w.size());
  }
}
