package io.github.prefixrouter.spi;

import java.util.OptionalInt;

/**
 * The engine could not serve a request. {@link InferenceEngine#execute} futures complete
 * exceptionally with this type (adapters map HTTP errors, timeouts and malformed answers to it).
 * The node tries a retryable failure on a peer; the subclasses say what the client is told:
 * {@link EngineBusyException} (try again later), {@link InvalidRequestException} (the request
 * is invalid), {@link EngineTimeoutException} (no answer in time). An adapter that maps a model
 * server's HTTP answer gives its status too ({@link #httpStatus()}), so that a caller can tell a
 * server refusing the adapter's credentials (401, 403) from other failures without reading the
 * message. Immutable once thrown.
 */
public class EngineException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  /** Whether trying again elsewhere may help. */
  private final boolean retryable;

  /** The HTTP status of the server's answer this failure maps, or 0 when it maps none. */
  private final int httpStatus;

  /**
   * Creates an engine failure.
   *
   * @param message what went wrong, for logs and for the client
   * @param retryable whether serving the request elsewhere or later may succeed
   */
  public EngineException(String message, boolean retryable) {
    super(message);
    this.retryable = retryable;
    this.httpStatus = 0;
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
    this.httpStatus = 0;
  }

  /**
   * Creates the failure of a model server's HTTP answer: the server answered {@code httpStatus}
   * (an error status, 401 for credentials it refuses, say) instead of serving the request.
   *
   * @param message what went wrong, for logs and for the client
   * @param retryable whether serving the request elsewhere or later may succeed
   * @param httpStatus the status of the server's answer, three digits (100 to 999)
   * @param cause the underlying failure (may be null)
   * @throws IllegalArgumentException if {@code httpStatus} is not three digits
   */
  public EngineException(String message, boolean retryable, int httpStatus, Throwable cause) {
    super(message, cause);
    if (httpStatus < 100 || httpStatus > 999) {
      throw new IllegalArgumentException("httpStatus must be three digits (100 to 999), was "
          + httpStatus);
    }
    this.retryable = retryable;
    this.httpStatus = httpStatus;
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

  /**
   * The HTTP status with which the engine's server answered instead of serving the request,
   * when the failure is such an answer: 401 or 403 when it refuses the credentials it was sent
   * (the OpenAI-compatible adapter's API key), 429 or 503 when it is overloaded, and so on.
   * Empty for every other failure (no answer, a malformed one, a timeout, a cancel) and for
   * failures made with the constructors that take no status.
   *
   * @return the status, or empty
   */
  public OptionalInt httpStatus() {
    return httpStatus == 0 ? OptionalInt.empty() : OptionalInt.of(httpStatus);
  }
}
