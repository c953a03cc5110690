package io.github.prefixrouter.internal.zmq;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * The frame decoder fed from memory: valid streams decode to exactly the messages encoded,
 * and any corruption of them (overwritten bytes, truncation, garbage) ends in an {@link
 * IOException}, never in an unchecked exception or an allocation past the limits.
 */
class ZmtpFuzzProperties {

  private static final ZmtpOptions OPTIONS =
      ZmtpOptions.DEFAULTS.withMaxMessageBytes(4096).withMaxFrames(8);

  @Provide
  Arbitrary<List<List<byte[]>>> messages() {
    Arbitrary<byte[]> frame = Arbitraries.oneOf(
        Arbitraries.bytes().array(byte[].class).ofMaxSize(20),
        Arbitraries.bytes().array(byte[].class).ofMinSize(250).ofMaxSize(600));
    return frame.list().ofMinSize(1).ofMaxSize(5).list().ofMaxSize(6);
  }

  private static byte[] encode(List<List<byte[]>> messages) {
    ZmtpBytes b = ZmtpBytes.of().greeting().ready("PUB");
    for (List<byte[]> m : messages) {
      b.message(m.toArray(new byte[0][]));
    }
    return b.bytes();
  }

  /** Decodes {@code bytes} as a SUB until the stream fails; returns what was decoded. */
  private static List<List<byte[]>> decode(byte[] bytes, List<IOException> failure) {
    List<List<byte[]>> out = new ArrayList<>();
    ZmtpSocket z = ZmtpSocket.overStreams(
        ZmtpSocket.Type.SUB, OPTIONS, new ByteArrayInputStream(bytes), OutputStream.nullOutputStream());
    try {
      z.handshake();
      while (true) {
        out.add(z.receive());
      }
    } catch (IOException e) {
      failure.add(e);
    } finally {
      z.close();
    }
    return out;
  }

  @Property
  void validStreamsDecodeToTheMessagesEncodedThenEof(
      @ForAll("messages") List<List<byte[]>> messages) {
    List<IOException> failure = new ArrayList<>();
    List<List<byte[]>> decoded = decode(encode(messages), failure);
    assertEquals(messages.size(), decoded.size());
    for (int i = 0; i < messages.size(); i++) {
      assertEquals(messages.get(i).size(), decoded.get(i).size());
      for (int f = 0; f < messages.get(i).size(); f++) {
        assertArrayEquals(messages.get(i).get(f), decoded.get(i).get(f));
      }
    }
    assertEquals(EOFException.class, failure.get(0).getClass());
  }

  @Property
  void corruptedStreamsFailOnlyWithIoExceptions(
      @ForAll("messages") List<List<byte[]>> messages,
      @ForAll @Size(max = 6) List<@IntRange(min = 0, max = 1_000_000) Integer> positions,
      @ForAll @Size(min = 6, max = 6) List<Byte> values,
      @ForAll @IntRange(min = 0, max = 110) int keepPercent) {
    byte[] bytes = encode(messages);
    for (int i = 0; i < positions.size(); i++) {
      bytes[positions.get(i) % bytes.length] = values.get(i);
    }
    if (keepPercent < 100) {
      bytes = java.util.Arrays.copyOf(bytes, bytes.length * keepPercent / 100);
    }
    List<IOException> failure = new ArrayList<>();
    List<List<byte[]>> decoded = decode(bytes, failure); // an unchecked exception fails here
    assertEquals(1, failure.size());
    for (List<byte[]> m : decoded) {
      int total = m.stream().mapToInt(f -> f.length).sum();
      assertTrue(m.size() <= OPTIONS.maxFrames() && total <= OPTIONS.maxMessageBytes());
    }
  }

  @Property
  void garbageAfterTheHandshakeFailsOnlyWithIoExceptions(
      @ForAll @Size(max = 300) byte[] garbage) {
    byte[] valid = ZmtpBytes.of().greeting().ready("PUB").bytes();
    byte[] bytes = java.util.Arrays.copyOf(valid, valid.length + garbage.length);
    System.arraycopy(garbage, 0, bytes, valid.length, garbage.length);
    List<IOException> failure = new ArrayList<>();
    decode(bytes, failure);
    assertEquals(1, failure.size());
  }
}
