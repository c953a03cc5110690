package io.github.prefixrouter.internal;

import io.github.prefixrouter.spi.TransportException;

/**
 * A {@link TransportException.Kind#BUSY} that the sending transport raised itself: its limit of
 * requests in flight to the peer is reached ({@code HttpTransport}'s
 * {@code maxInFlightPerPeer}), so nothing was sent and nothing was heard from the peer. The node
 * reads it as {@code FallbackCause.IN_FLIGHT_LIMIT}, not as the peer's push-back: it does not
 * cool the peer down and does not count it as pushed back. To any other caller it is a
 * {@code BUSY} like the peer's.
 */
public final class InFlightLimitException extends TransportException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates the refusal.
   *
   * @param message what limit was reached, for which peer
   */
  public InFlightLimitException(String message) {
    super(Kind.BUSY, message);
  }
}
