package io.github.prefixrouter;

/** Base class of the typed errors a {@link PrefixRouterNode} reports. */
public class PrefixRouterException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  public PrefixRouterException(String message) {
    super(message);
  }

  public PrefixRouterException(String message, Throwable cause) {
    super(message, cause);
  }
}
