package io.github.prefixrouter;

import io.github.prefixrouter.spi.EngineResult;
import java.util.Objects;

/**
 * The answer to one submitted request.
 *
 * @param requestId the request's id
 * @param result what the serving node's engine produced; routing never changes it
 * @param servedBy id of the node whose engine ran the request
 * @param forwarded true if a peer ran it
 * @param attempts how many executions were tried (1 when the first choice answered)
 * @param fallbackCause why the last forwarding attempt fell back ({@link FallbackCause#LOCAL_FAILED}:
 *     the local engine failed it retryably and a peer was tried), or {@link FallbackCause#NONE}
 * @param decision the routing decision taken for the first attempt
 *
 * <p>Immutable and thread-safe; no component is null.
 */
public record InferenceResponse(
    String requestId,
    EngineResult result,
    String servedBy,
    boolean forwarded,
    int attempts,
    FallbackCause fallbackCause,
    RouteDecision decision) {

  /**
   * Checks the components.
   *
   * @param requestId the request's id
   * @param result what the serving node's engine produced; routing never changes it
   * @param servedBy id of the node whose engine ran the request
   * @param forwarded true if a peer ran it
   * @param attempts how many executions were tried (1 when the first choice answered)
   * @param fallbackCause why the last forwarding attempt fell back ({@link FallbackCause#LOCAL_FAILED}:
   *     the local engine failed it retryably and a peer was tried), or {@link FallbackCause#NONE}
   * @param decision the routing decision taken for the first attempt
   * @throws NullPointerException if a component other than {@code forwarded} and {@code attempts}
   *     is null
   * @throws IllegalArgumentException if {@code attempts} is below 1
   */
  public InferenceResponse {
    Objects.requireNonNull(requestId, "requestId");
    Objects.requireNonNull(result, "result");
    Objects.requireNonNull(servedBy, "servedBy");
    Objects.requireNonNull(fallbackCause, "fallbackCause");
    Objects.requireNonNull(decision, "decision");
    if (attempts < 1) {
      throw new IllegalArgumentException("attempts must be >= 1, was " + attempts);
    }
  }

  /**
   * Prompt tokens the serving engine reported as served from its cache.
   *
   * @return the count, or -1 if the engine does not report it
   */
  public int cachedPromptTokens() {
    return result.cachedPromptTokens();
  }
}
