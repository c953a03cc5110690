package io.github.prefixrouter.spi;

/**
 * The engine could not serve a request. {@link InferenceEngine#execute} futures complete
 * exceptionally with this type (adapters map HTTP errors, timeouts and malformed answers to it).
 * The node tries a retryable failure on a peer; the subclasses say what the client is told:
 * {@link EngineBusyException} (try again later), {@link InvalidRequestException} (the request
 * is invalid), {@link EngineTimeoutException} (no answer in time). Immutable once thrown.
 */
public class EngineException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  /** Whether trying again elsewhere may help. */
  private final boolean retryable;

  /**
   * Creates an engine failure.
   *
   * @param message what went wrong, for logs and for the client
   * @param retryable whether serving the request elsewhere or later may succeed
   */
  public EngineException(String message, boolean retryable) {
    super(message);
    this.retryable = retryable;
  }

  /**
   * Creates an engine failure with its cause.
   *
   * @param message what went wrong, for logs and for the client
   * @param retryable whether serving the request elsewhere or later may succeed
   * @param cause the underlying failure (may be null)
   */
  public EngineException(String message, boolean retryable, Throwable cause) {
    super(message, cause);
    this.retryable = retryable;
  }

  /**
   * Whether the failure is transient.
   *
   * @return true if the failure is transient or particular to this engine (overload, an
   *     unreachable or misbehaving server), so another engine may serve the request; false if
   *     no engine would ({@link InvalidRequestException}: the request itself is bad;
   *     {@link EngineTimeoutException}: it outlasted the time limit)
   */
  public boolean retryable() {
    return retryable;
  }
}
