package io.github.prefixrouter;

/**
 * Why a forwarded attempt did not produce the answer, so the node tried the next candidate or
 * ran the request locally (or, {@link #LOCAL_FAILED}, why a local run was followed by a
 * forward). Counted per cause in {@link NodeStats#fallbacks()}.
 */
public enum FallbackCause {
  /** No fallback happened. */
  NONE,
  /** The peer did not answer within the forwarding timeout; a cancel was sent to it. */
  TIMEOUT,
  /** The peer refused the work because it is above its high watermark (push-back). */
  BUSY,
  /** The transport could not reach the peer. */
  UNREACHABLE,
  /** The peer's engine failed the request. */
  PEER_FAILED,
  /** The peer's answer was malformed or the transport reported a protocol error. */
  PROTOCOL_ERROR,
  /** The transport was closed while the request was in flight. */
  TRANSPORT_CLOSED,
  /**
   * The local engine failed the request with a retryable error (busy, unreachable, an answer
   * that cannot be for the request), so it was tried on a peer. Not a forwarding attempt: not
   * part of {@link NodeStats#totalFallbacks()}.
   */
  LOCAL_FAILED,
  /**
   * The request was too large for the link to the peer (the transport's size limit, or the
   * peer's: {@code TransportException.Kind.TOO_LARGE}), so it ran locally without trying other
   * peers, and the peer was not cooled down: nothing is wrong with it.
   */
  TOO_LARGE
}
