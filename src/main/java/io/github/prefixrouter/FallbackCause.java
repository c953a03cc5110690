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
  /**
   * The peer said it will not take the work now (push-back): it answered BUSY (its engine queue
   * at its high watermark, its engine at capacity, stalled or failing, no heap to read its
   * engine's answer, or the node not running), or its
   * transport refused the request as busy (over HTTP, a 503).
   */
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
  TOO_LARGE,
  /**
   * This node's own transport refused to send the request: it already had its limit of requests
   * in flight to the peer ({@code HttpTransport}'s {@code maxInFlightPerPeer}, less the slots it
   * keeps for messages). Nothing was sent and the peer said nothing, so this is not push-back:
   * the peer is not cooled down nor counted in {@link NodeStats#pushedBack()}, and the next
   * candidate or the local engine takes the request. Nor does the refusal use up one of the
   * request's 3 forwards (up to 16 such refusals a request).
   */
  IN_FLIGHT_LIMIT
}
