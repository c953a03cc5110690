package io.github.prefixrouter.spi;

/**
 * The engine could not serve a request. {@link InferenceEngine#execute} futures complete
 * exceptionally with this type (adapters map HTTP errors, timeouts and malformed answers to it).
 */
public class EngineException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  /** Whether trying again elsewhere may help. */
  private final boolean retryable;

  public EngineException(String message, boolean retryable) {
    super(message);
    this.retryable = retryable;
  }

  public EngineException(String message, boolean retryable, Throwable cause) {
    super(message, cause);
    this.retryable = retryable;
  }

  /** True if the failure is transient (overload, timeout), false if the request itself is bad. */
  public boolean retryable() {
    return retryable;
  }
}
