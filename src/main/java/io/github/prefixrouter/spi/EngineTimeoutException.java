package io.github.prefixrouter.spi;

/**
 * The engine gave no answer to the request within its time limit (the OpenAI-compatible
 * adapter's {@code requestTimeout}, or the node's {@code engineTimeout}). Never retryable: the
 * usual cause is a generation longer than the limit, which would take as long on a peer, so
 * running it again elsewhere would only spend more engine time on another timeout.
 *
 * <p>The node does not try such a request on a peer; it fails with a
 * {@link io.github.prefixrouter.RequestFailedException} whose cause is this exception, and the
 * client API answers 504 (Gateway Timeout): the client may try again, knowing the request is
 * a long one, or raise the limits. A server that cannot be reached at all is another matter: a
 * connection refused, reset or not made within the connect timeout is a retryable
 * {@link EngineException}, which peers can well serve.
 */
public class EngineTimeoutException extends EngineException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates the failure.
   *
   * @param message which limit passed, for logs and for the client
   * @param cause the underlying timeout (may be null)
   */
  public EngineTimeoutException(String message, Throwable cause) {
    super(message, false, cause);
  }
}
