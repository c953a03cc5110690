package io.github.prefixrouter;

/** Base class of the typed errors a {@link PrefixRouterNode} reports. */
public class PrefixRouterException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what happened
   */
  public PrefixRouterException(String message) {
    super(message);
  }

  /**
   * Creates the exception with its cause.
   *
   * @param message what happened
   * @param cause the underlying failure
   */
  public PrefixRouterException(String message, Throwable cause) {
    super(message, cause);
  }
}
