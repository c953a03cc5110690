package io.github.prefixrouter.spi;

/**
 * The engine is at capacity and did not take the request: nothing of it ran, and another node,
 * or this one a little later, may serve it. Always retryable.
 *
 * <p>The node treats it as push-back: a request its own client submitted is tried on a peer
 * that could serve it; a request a peer forwarded is answered BUSY, so that peer tries
 * elsewhere; when no node can take it, the request fails with this exception as its cause (the
 * client API answers 503 with {@code Retry-After}).
 */
public class EngineBusyException extends EngineException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates a busy failure.
   *
   * @param message what is at capacity, for logs and for the client
   */
  public EngineBusyException(String message) {
    super(message, true);
  }

  /**
   * Creates the busy failure of a model server's HTTP answer (see {@link EngineException#httpStatus()}).
   *
   * @param message what is at capacity, for logs and for the client
   * @param httpStatus the status of the server's answer, three digits (100 to 999)
   * @throws IllegalArgumentException if {@code httpStatus} is not three digits
   */
  public EngineBusyException(String message, int httpStatus) {
    super(message, true, httpStatus, null);
  }
}
