package io.github.prefixrouter.internal.zmq;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link ZmtpOptions#maxMessageBytes} bounds the peer's READY command too, so a limit below the
 * smallest READY a compatible peer can send would fail every handshake: it is refused when the
 * options are made.
 */
class ZmtpMinimumMessageBytesTest {

  @Test
  void aLimitBelowTheSmallestReadyIsRefusedWhenTheOptionsAreMade() {
    // a READY with Socket-Type PUB (or REP): name size, "READY", property name size,
    // "Socket-Type", value size (4 bytes), "PUB"
    assertEquals(1 + 5 + 1 + 11 + 4 + 3, ZmtpOptions.MIN_MESSAGE_BYTES);
    assertEquals(ZmtpOptions.MIN_MESSAGE_BYTES, ZmtpBytes.of().ready("PUB").bytes().length - 2,
        "the READY body, without its frame's flags and size");
    for (int n : new int[] {0, 1, 24}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> ZmtpOptions.DEFAULTS.withMaxMessageBytes(n), () -> "maxMessageBytes " + n);
      assertTrue(e.getMessage().contains("at least " + ZmtpOptions.MIN_MESSAGE_BYTES), e.getMessage());
    }
  }

  @Test
  void atTheMinimumAHandshakeWithThePeersOfTheShortestTypesSucceeds() throws Exception {
    ZmtpOptions options = ZmtpOptions.DEFAULTS
        .withReadTimeout(Duration.ofSeconds(5))
        .withMaxMessageBytes(ZmtpOptions.MIN_MESSAGE_BYTES);
    byte[] body = new byte[ZmtpOptions.MIN_MESSAGE_BYTES];
    body[0] = 42;
    // the peers with the shortest types (a longer type, or more properties, needs more)
    String[][] pairs = {{"SUB", "PUB"}, {"DEALER", "REP"}};
    for (String[] pair : pairs) {
      try (HostilePeer p = new HostilePeer((s, in, out) -> {
        HostilePeer.readClientHandshake(in);
        out.write(ZmtpBytes.of().greeting().ready(pair[1]).message(body).bytes());
        out.flush();
        HostilePeer.awaitClientClose(in);
      })) {
        List<byte[]> got = assertTimeoutPreemptively(Duration.ofSeconds(20), () -> {
          try (ZmtpSocket z = new ZmtpSocket(ZmtpSocket.Type.valueOf(pair[0]), options)) {
            z.connect(p.endpoint());
            return z.receive();
          }
        }, () -> pair[0] + " with " + pair[1]);
        assertEquals(1, got.size());
        assertArrayEquals(body, got.get(0));
      }
    }
  }
}
