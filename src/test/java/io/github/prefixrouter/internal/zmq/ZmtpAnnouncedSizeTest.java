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
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A frame announced at the size limit costs memory only as its bytes arrive: a peer that
 * announces 16 MiB and sends a few bytes makes the reader hold a few bytes, not 16 MiB.
 */
class ZmtpAnnouncedSizeTest {

  private static final int LIMIT = 16 << 20;
  private static final ZmtpOptions OPTIONS = ZmtpOptions.DEFAULTS.withMaxMessageBytes(LIMIT);

  @Test
  void aLargeAnnouncedFrameThatNeverComesAllocatesLittle() throws Exception {
    com.sun.management.ThreadMXBean threads = threadBean();
    byte[] stream = ZmtpBytes.of().greeting().ready("PUB")
        .raw(new byte[] {ZmtpSocket.FLAG_LONG, 0, 0, 0, 0, 0x01, 0, 0, 0}) // a 16 MiB frame ...
        .raw(new byte[100])                                          // ... of which 100 bytes
        .bytes();
    ZmtpSocket z = ZmtpSocket.overStreams(ZmtpSocket.Type.SUB, OPTIONS,
        new ByteArrayInputStream(stream), OutputStream.nullOutputStream());
    z.handshake();
    long id = Thread.currentThread().getId();
    long before = threads.getThreadAllocatedBytes(id);
    ZmtpProtocolException e = assertThrows(ZmtpProtocolException.class, z::receive);
    long allocated = threads.getThreadAllocatedBytes(id) - before;
    assertEquals(ZmtpProtocolException.Reason.TRUNCATED, e.reason());
    assertTrue(allocated < 1 << 20, "allocated " + allocated + " bytes for 100 received");
  }

  @Test
  void framesAcrossTheGrowthStepsArriveIntact() throws Exception {
    SplittableRandom rnd = new SplittableRandom(3);
    int[] sizes = {0, 1, 255, 256, ZmtpSocket.BODY_CHUNK - 1, ZmtpSocket.BODY_CHUNK,
        ZmtpSocket.BODY_CHUNK + 1, 3 * ZmtpSocket.BODY_CHUNK + 7, LIMIT};
    for (int size : sizes) {
      byte[] body = new byte[size];
      rnd.nextBytes(body);
      byte[] stream = ZmtpBytes.of().greeting().ready("PUB").message(body).bytes();
      ZmtpSocket z = ZmtpSocket.overStreams(ZmtpSocket.Type.SUB, OPTIONS,
          new ByteArrayInputStream(stream), new ByteArrayOutputStream());
      z.handshake();
      List<byte[]> m = z.receive();
      assertEquals(1, m.size());
      assertArrayEquals(body, m.get(0), "a frame of " + size + " bytes");
    }
  }

  private static com.sun.management.ThreadMXBean threadBean() {
    java.lang.management.ThreadMXBean b = ManagementFactory.getThreadMXBean();
    assumeTrue(b instanceof com.sun.management.ThreadMXBean, "needs per-thread allocation counts");
    com.sun.management.ThreadMXBean t = (com.sun.management.ThreadMXBean) b;
    assumeTrue(t.isThreadAllocatedMemorySupported() && t.isThreadAllocatedMemoryEnabled());
    return t;
  }
}
