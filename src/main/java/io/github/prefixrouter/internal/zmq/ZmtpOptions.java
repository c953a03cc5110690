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
 *     largest command body
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
    if (maxMessageBytes < 0) {
      throw new IllegalArgumentException("maxMessageBytes must not be negative, was " + maxMessageBytes);
    }
    if (maxFrames < 1) {
      throw new IllegalArgumentException("maxFrames must be at least 1, was " + maxFrames);
    }
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
