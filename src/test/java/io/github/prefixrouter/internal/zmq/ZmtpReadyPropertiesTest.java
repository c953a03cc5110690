package io.github.prefixrouter.internal.zmq;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The properties of a peer's READY are kept for the connection's life, so their number is
 * bounded: a READY of tiny properties (nine bytes each, a name of four characters and an empty
 * value) kept an entry, a name and a value of about 100 bytes per property, so a READY at the
 * default 16 MiB limit made the socket hold about 190 MB for as long as it was connected.
 */
class ZmtpReadyPropertiesTest {

  private static final String CHARS = "abcdefghijklmnopqrstuvwxyz0123456789";

  /** A READY with Socket-Type PUB, then {@code n} distinct properties with empty values. */
  private static byte[] readyWith(int n) {
    ByteArrayOutputStream data = new ByteArrayOutputStream();
    data.writeBytes(ZmtpBytes.property("Socket-Type", "PUB"));
    int b = CHARS.length();
    for (int i = 0; i < n; i++) {
      String name = "" + CHARS.charAt(i % b) + CHARS.charAt(i / b % b)
          + CHARS.charAt(i / b / b % b) + CHARS.charAt(i / b / b / b % b);
      data.writeBytes(ZmtpBytes.property(name, ""));
    }
    return ZmtpBytes.of().greeting().command("READY", data.toByteArray()).bytes();
  }

  @Test
  void aReadyOfMoreThanTheMostPropertiesIsRefusedWithoutAnEntryPerProperty() throws Exception {
    java.lang.management.ThreadMXBean b = ManagementFactory.getThreadMXBean();
    assumeTrue(b instanceof com.sun.management.ThreadMXBean, "needs per-thread allocation counts");
    com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) b;
    byte[] stream = readyWith(100_000); // 900 KB
    ZmtpSocket z = ZmtpSocket.overStreams(ZmtpSocket.Type.SUB, ZmtpOptions.DEFAULTS,
        new ByteArrayInputStream(stream), OutputStream.nullOutputStream());
    long id = Thread.currentThread().getId();
    long before = threads.getThreadAllocatedBytes(id);
    ZmtpProtocolException e = assertThrows(ZmtpProtocolException.class, z::handshake);
    long allocated = threads.getThreadAllocatedBytes(id) - before;
    assertEquals(ZmtpProtocolException.Reason.MALFORMED_COMMAND, e.reason(), e.getMessage());
    // the frame's body and the command's data, each the size of the READY, and little more
    assertTrue(allocated < 4L * stream.length,
        "allocated " + allocated + " bytes for a READY of " + stream.length);
  }

  @Test
  void aReadyOfTheMostPropertiesIsAccepted() throws Exception {
    byte[] stream = readyWith(ZmtpSocket.MAX_READY_PROPERTIES - 1);
    ZmtpSocket z = ZmtpSocket.overStreams(ZmtpSocket.Type.SUB, ZmtpOptions.DEFAULTS,
        new ByteArrayInputStream(stream), OutputStream.nullOutputStream());
    z.handshake();
    assertEquals("PUB", z.peerSocketType());
    assertEquals(ZmtpSocket.MAX_READY_PROPERTIES, z.peerProperties().size());
    assertArrayEquals(new byte[0], z.peerProperties().get("aaaa"));
    assertArrayEquals("PUB".getBytes(StandardCharsets.US_ASCII),
        z.peerProperties().get("socket-type"));
  }
}
