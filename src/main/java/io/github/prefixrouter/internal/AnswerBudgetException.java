package io.github.prefixrouter.internal;

import io.github.prefixrouter.spi.EngineException;

/**
 * A retryable {@link EngineException} that the engine adapter raised itself: the heap it gives
 * the answers being read and parsed ({@code OpenAiCompatibleEngine}'s {@code answerBudget}) was
 * held by other answers, so this answer could not be read. The engine answered, or was
 * answering; it is this node that is short of heap, under load from answers near their size
 * limit, say. The node tries the request on a peer as for any retryable failure of its engine,
 * but does not count it among its engine's failures in a row ({@code
 * RouterConfig.engineFailureLimit}): it is neither a failure nor a success there, so that such
 * refusals never make the node take a healthy engine for failing and route around it. A peer's
 * forward that fails so is answered BUSY (push-back: the node is overloaded, its engine is not
 * failing), so its sender cools the node down for {@code busyCooldown} and tries elsewhere, as
 * for an engine at capacity; a request of the node's own client that
 * no peer serves is answered 503 with {@code Retry-After} by the client API, as a request body
 * refused by its body budget is: the node is short of heap for a while, and nothing is wrong
 * with the server. To any other caller it is a retryable {@code EngineException} like the
 * others.
 */
public final class AnswerBudgetException extends EngineException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates the refusal.
   *
   * @param message which request's answer was refused, and the budget it was refused by
   * @param cause the budget's refusal (may be null)
   */
  public AnswerBudgetException(String message, Throwable cause) {
    super(message, true, cause);
  }
}
