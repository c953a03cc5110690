package io.github.prefixrouter.spi;

/**
 * The engine refused the request itself as invalid: a prompt longer than the model's context,
 * a parameter out of range, an adapter the server does not serve. Every engine of the
 * cluster runs the same model, so another one would refuse it the same way: never retryable.
 *
 * <p>The node does not try such a request on a peer; it fails with a
 * {@link io.github.prefixrouter.RequestFailedException} whose cause is this exception, and the
 * client API answers 400 with its message (the engine's own words), which HTTP clients and
 * proxies do not retry. The OpenAI-compatible adapter reports a server's 4xx answer this way,
 * except 408 and 429 (a timeout and overload, retryable), 401 and 403 (the server refuses
 * the node's credentials, not the request), 405 and a 404 other than an unknown LoRA adapter's
 * (no completions endpoint at the adapter's URL, or a base model name the server does not
 * serve: this node's setting, not the request), and an error with such a code that the server
 * reports in a stream before any output (how SGLang's scheduler refuses a prompt longer than it
 * allows once the stream has begun).
 */
public class InvalidRequestException extends EngineException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates the failure.
   *
   * @param message what the engine found wrong with the request, for logs and for the client
   */
  public InvalidRequestException(String message) {
    super(message, false);
  }

  /**
   * Creates the failure of a model server's HTTP answer (see {@link EngineException#httpStatus()}).
   *
   * @param message what the engine found wrong with the request, for logs and for the client
   * @param httpStatus the status of the server's answer, three digits (100 to 999)
   * @throws IllegalArgumentException if {@code httpStatus} is not three digits
   */
  public InvalidRequestException(String message, int httpStatus) {
    super(message, false, httpStatus, null);
  }
}
