package io.github.prefixrouter.spi;

/**
 * The engine could not serve a request. {@link InferenceEngine#execute} futures complete
 * exceptionally with this type (adapters map HTTP errors, timeouts and malformed answers to it).
 * Immutable once thrown.
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
   * @return true if the failure is transient (overload, timeout), false if the request itself
   *     is bad
   */
  public boolean retryable() {
    return retryable;
  }
}
