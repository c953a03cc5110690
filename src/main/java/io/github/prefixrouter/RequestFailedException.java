package io.github.prefixrouter;

/**
 * A request could not be served. Mostly: every forwarding attempt (if any) fell back, and the
 * local engine itself failed it; the cause is then the engine's
 * {@link io.github.prefixrouter.spi.EngineException} (or whatever the engine reported). Also:
 * a peer's engine refused it for good (invalid, or beyond the peer's time limit) while the local
 * engine is avoided as failing or stalled and this is not its probe; its output diverged from
 * what was already streamed ({@link OutputDivergedException}); its {@link OutputListener}
 * threw, the cause being what it threw; or the engine's result could not be made into a
 * response. An
 * {@link io.github.prefixrouter.spi.EngineBusyException} means the local engine was at capacity
 * and no peer could take the request either: try again a little later. An
 * {@link io.github.prefixrouter.spi.InvalidRequestException} means the engine refused the
 * request itself (no engine would serve it as it is), an
 * {@link io.github.prefixrouter.spi.EngineTimeoutException} that it was not answered within the
 * engine's time limit; neither was tried on a peer.
 */
public class RequestFailedException extends PrefixRouterException {

  private static final long serialVersionUID = 1L;

  /** The id of the request that failed. */
  private final String requestId;

  /**
   * Creates the exception.
   *
   * @param requestId the id of the request that failed
   * @param message what happened
   * @param cause the engine's failure
   */
  public RequestFailedException(String requestId, String message, Throwable cause) {
    super("request " + requestId + ": " + message, cause);
    this.requestId = requestId;
  }

  /**
   * The id of the request that failed.
   *
   * @return the request id
   */
  public String requestId() {
    return requestId;
  }
}
