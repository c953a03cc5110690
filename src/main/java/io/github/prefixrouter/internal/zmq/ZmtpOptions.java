package io.github.prefixrouter.internal.zmq;

import java.time.Duration;
import java.util.Objects;

/**
 * Limits and timeouts of one {@link ZmtpSocket}.
 *
 * <p>Every timeout is at most {@link #MAX_TIMEOUT} (365 days): deadlines are kept in
 * nanoseconds, and a longer one (a "never" written as a huge duration) cannot be.
 *
 * @param connectTimeout how long the TCP connect may take
 * @param handshakeTimeout how long the whole handshake (greetings and READY commands) may take
 * @param readTimeout how long one message (or command) may take to arrive once its first byte
 *     has arrived: a peer that stops inside a frame is cut after it
 * @param idleTimeout how long to wait for the first byte of the next message; {@link
 *     Duration#ZERO} waits forever (a publisher may be silent for hours)
 * @param maxMessageBytes the largest message accepted: the sum of its frames' sizes, and the
 *     largest command body, the peer's READY included; at least {@link #MIN_MESSAGE_BYTES}
 * @param maxFrames the most frames one message may have
 */
public record ZmtpOptions(
    Duration connectTimeout,
    Duration handshakeTimeout,
    Duration readTimeout,
    Duration idleTimeout,
    int maxMessageBytes,
    int maxFrames) {

  /** The longest timeout accepted. */
  public static final Duration MAX_TIMEOUT = Duration.ofDays(365);

  /**
   * The smallest {@code maxMessageBytes} accepted (25): the body of the smallest READY command a
   * compatible peer can send, which the limit bounds too. That is the command name's size byte
   * and {@code READY}, then its one required property, the name's size byte,
   * {@code Socket-Type}, the value's 4 size bytes and the shortest peer type ({@code PUB} for a
   * SUB, {@code REP} for a DEALER). Below it, every handshake would fail; a peer of a longer
   * type, or one that sends more properties, needs more.
   */
  public static final int MIN_MESSAGE_BYTES = minReadyBytes();

  /** Defaults for a subscriber: 16 MiB messages of at most 16 frames, no idle timeout. */
  public static final ZmtpOptions DEFAULTS =
      new ZmtpOptions(
          Duration.ofSeconds(5),
          Duration.ofSeconds(5),
          Duration.ofSeconds(10),
          Duration.ZERO,
          16 << 20,
          16);

  public ZmtpOptions {
    positive(connectTimeout, "connectTimeout");
    positive(handshakeTimeout, "handshakeTimeout");
    positive(readTimeout, "readTimeout");
    Objects.requireNonNull(idleTimeout, "idleTimeout");
    if (idleTimeout.isNegative() || idleTimeout.compareTo(MAX_TIMEOUT) > 0) {
      throw new IllegalArgumentException(
          "idleTimeout must be zero (none) to 365 days, was " + idleTimeout);
    }
    if (maxMessageBytes < MIN_MESSAGE_BYTES) {
      // the peer's READY could not arrive: every handshake would fail
      throw new IllegalArgumentException("maxMessageBytes must be at least " + MIN_MESSAGE_BYTES
          + " (the smallest READY a peer can send), was " + maxMessageBytes);
    }
    if (maxFrames < 1) {
      throw new IllegalArgumentException("maxFrames must be at least 1, was " + maxFrames);
    }
  }

  private static int minReadyBytes() {
    int shortest = Integer.MAX_VALUE;
    for (ZmtpSocket.Type t : ZmtpSocket.Type.values()) {
      shortest = Math.min(shortest, t.shortestPeerType());
    }
    return 1 + "READY".length() + 1 + "Socket-Type".length() + 4 + shortest;
  }

  private static void positive(Duration d, String name) {
    Objects.requireNonNull(d, name);
    if (d.isNegative() || d.isZero() || d.compareTo(MAX_TIMEOUT) > 0) {
      throw new IllegalArgumentException(
          name + " must be positive and at most 365 days, was " + d);
    }
  }

  public ZmtpOptions withConnectTimeout(Duration d) {
    return new ZmtpOptions(d, handshakeTimeout, readTimeout, idleTimeout, maxMessageBytes, maxFrames);
  }

  public ZmtpOptions withHandshakeTimeout(Duration d) {
    return new ZmtpOptions(connectTimeout, d, readTimeout, idleTimeout, maxMessageBytes, maxFrames);
  }

  public ZmtpOptions withReadTimeout(Duration d) {
    return new ZmtpOptions(connectTimeout, handshakeTimeout, d, idleTimeout, maxMessageBytes, maxFrames);
  }

  public ZmtpOptions withIdleTimeout(Duration d) {
    return new ZmtpOptions(connectTimeout, handshakeTimeout, readTimeout, d, maxMessageBytes, maxFrames);
  }

  public ZmtpOptions withMaxMessageBytes(int n) {
    return new ZmtpOptions(connectTimeout, handshakeTimeout, readTimeout, idleTimeout, n, maxFrames);
  }

  public ZmtpOptions withMaxFrames(int n) {
    return new ZmtpOptions(connectTimeout, handshakeTimeout, readTimeout, idleTimeout, maxMessageBytes, n);
  }
}
