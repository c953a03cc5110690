package io.github.prefixrouter.spi;

/**
 * Why a {@link Transport} request failed. Transports complete a request future exceptionally
 * with this exception (or a subclass), never with an unchecked surprise. Immutable once thrown.
 *
 * <p>{@link Kind} may gain constants in later versions (as {@link Kind#TOO_LARGE} was added):
 * code that switches over it should have a default branch.
 */
public class TransportException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  /** The kind of failure, which decides how the caller reacts. */
  public enum Kind {
    /** No answer within the timeout. The peer may still have acted on the request. */
    TIMEOUT,
    /** The peer could not be reached (connection refused, unknown address, partition). */
    UNREACHABLE,
    /**
     * The peer answered that it will not take the request now (overloaded): the node counts it
     * as push-back and skips the peer for {@code busyCooldown}. The HTTP transport also fails a
     * request with {@code BUSY}, before sending it, when it already has its limit of requests in
     * flight to the peer; the node tells that refusal from the peer's and does not cool the peer
     * down. A transport of the host's has no such way: every {@code BUSY} it reports is taken
     * for the peer's.
     */
    BUSY,
    /** The message was too large, malformed or failed authentication. */
    PROTOCOL,
    /** The transport was closed before the request completed. */
    CLOSED,
    /**
     * The request is larger than the link carries: above this transport's size limit (failed
     * before anything is sent) or the peer's (which refused it unread, as HTTP's 413 says).
     * Nothing is wrong with the peer: a smaller request goes through. A transport that reports
     * such a request as {@link #PROTOCOL} instead still works, but the node then takes the
     * peer for a broken one and cools it down.
     */
    TOO_LARGE
  }

  /** The kind of failure. */
  private final Kind kind;

  /**
   * Creates a transport failure.
   *
   * @param kind the kind of failure
   * @param message what went wrong; the exception's message is {@code kind + ": " + message}
   * @throws NullPointerException if {@code kind} is null
   */
  public TransportException(Kind kind, String message) {
    super(requireKind(kind) + ": " + message);
    this.kind = kind;
  }

  /**
   * Creates a transport failure with its cause.
   *
   * @param kind the kind of failure
   * @param message what went wrong; the exception's message is {@code kind + ": " + message}
   * @param cause the underlying failure (may be null)
   * @throws NullPointerException if {@code kind} is null
   */
  public TransportException(Kind kind, String message, Throwable cause) {
    super(requireKind(kind) + ": " + message, cause);
    this.kind = kind;
  }

  private static Kind requireKind(Kind kind) {
    if (kind == null) {
      throw new NullPointerException("a TransportException needs a kind");
    }
    return kind;
  }

  /**
   * The kind of failure. A subclass that overrides this to answer null is read as
   * {@link Kind#UNREACHABLE} by the node.
   *
   * @return the kind given at construction
   */
  public Kind kind() {
    return kind;
  }
}
