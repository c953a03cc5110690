package io.github.prefixrouter.internal;

import io.github.prefixrouter.spi.EngineBusyException;

/**
 * An {@link EngineBusyException} that the engine adapter raised itself: its limit of requests
 * outstanding at the server ({@code OpenAiCompatibleEngine}'s {@code maxInFlight}) is reached, so
 * nothing was sent and nothing was heard from the server. The node handles it as any busy
 * failure of its engine (a request of its own client is tried on a peer, a peer's forward is
 * answered BUSY, and with no node to take it the client API answers 503 with
 * {@code Retry-After}), but does not count it among its engine's failures in a row
 * ({@code RouterConfig.engineFailureLimit}): it is neither a failure nor a success there, so that
 * a burst beyond the limit never makes the node take a healthy engine for failing and route
 * around it. To any other caller it is an {@code EngineBusyException} like the server's.
 */
public final class EngineInFlightLimitException extends EngineBusyException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates the refusal.
   *
   * @param message what limit was reached, for which server
   */
  public EngineInFlightLimitException(String message) {
    super(message);
  }
}
