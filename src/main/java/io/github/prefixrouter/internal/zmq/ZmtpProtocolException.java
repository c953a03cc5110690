package io.github.prefixrouter.internal.zmq;

import java.io.IOException;

/**
 * The peer broke the ZMTP protocol (or spoke a part of it this client does not support). The
 * connection must be closed: after a violation the byte stream cannot be trusted any more.
 *
 * <p>The message names the problem, the offending value and the limit where there is one; the
 * kind of problem is also available as {@link #reason()} for counters and tests.
 */
public class ZmtpProtocolException extends IOException {

  /** What is wrong with what the peer sent. */
  public enum Reason {
    /** The greeting does not start with the ZMTP 3 signature (ZMTP 1.0 peer, or not ZMTP). */
    BAD_SIGNATURE,
    /** The greeting names a major version below 3 (ZMTP 2.0 or earlier). */
    UNSUPPORTED_VERSION,
    /** The greeting names a security mechanism other than NULL. */
    UNSUPPORTED_MECHANISM,
    /** The peer's READY has no Socket-Type, or one this socket cannot talk to. */
    INCOMPATIBLE_SOCKET_TYPE,
    /** A command frame whose body does not parse (sizes past its end, empty names). */
    MALFORMED_COMMAND,
    /** Something other than READY arrived where the handshake expects READY. */
    UNEXPECTED_COMMAND,
    /** A frame's flags byte has reserved bits set, or marks a command as "more". */
    BAD_FLAGS,
    /** A frame, or the message it belongs to, is larger than the configured maximum. */
    MESSAGE_TOO_LARGE,
    /** A message has more frames than the configured maximum. */
    TOO_MANY_FRAMES,
    /** The connection ended inside the greeting, a command, a frame or a multipart message. */
    TRUNCATED,
    /** The peer sent an ERROR command. */
    PEER_ERROR,
    /**
     * The connection could not take a PONG at once: the peer sends PINGs but does not read
     * what this side writes, so a blocking write would wait for ever.
     */
    PEER_NOT_READING
  }

  private final Reason reason;

  public ZmtpProtocolException(Reason reason, String detail) {
    super("ZMTP protocol error: " + reason + ": " + detail);
    this.reason = reason;
  }

  public Reason reason() {
    return reason;
  }
}
