package io.github.prefixrouter;

/**
 * How to generate the answer of an {@link InferenceRequest}. Routing never looks at these; they
 * travel with the request to whichever engine runs it.
 *
 * @param maxTokens how many tokens to generate at most: 1 to {@value #MAX_TOKENS_LIMIT}
 * @param temperature sampling temperature, 0 for greedy decoding: 0 to 100
 * @param topP nucleus sampling mass: greater than 0, at most 1
 * @param seed seed for sampling, so the same request gives the same answer on any node
 *
 * <p>Immutable and thread-safe.
 */
public record GenerationParams(int maxTokens, double temperature, double topP, long seed) {

  /** Largest {@code maxTokens} accepted. */
  public static final int MAX_TOKENS_LIMIT = 1 << 20;

  /** One greedy token: the MMLU-style default. */
  public static final GenerationParams DEFAULT = new GenerationParams(1, 0.0, 1.0, 0L);

  /**
   * Checks the parameters.
   *
   * @param maxTokens how many tokens to generate at most
   * @param temperature sampling temperature
   * @param topP nucleus sampling mass
   * @param seed seed for sampling
   * @throws IllegalArgumentException if a parameter is out of its range
   */
  public GenerationParams {
    if (maxTokens < 1 || maxTokens > MAX_TOKENS_LIMIT) {
      throw new IllegalArgumentException(
          "maxTokens must be between 1 and " + MAX_TOKENS_LIMIT + ", was " + maxTokens);
    }
    if (!(temperature >= 0.0 && temperature <= 100.0)) {
      throw new IllegalArgumentException("temperature must be between 0 and 100, was " + temperature);
    }
    if (!(topP > 0.0 && topP <= 1.0)) {
      throw new IllegalArgumentException("topP must be in (0, 1], was " + topP);
    }
  }

  /**
   * Greedy decoding of up to {@code maxTokens} tokens.
   *
   * @param maxTokens how many tokens to generate at most
   * @return the parameters, with temperature 0, top-p 1 and seed 0
   */
  public static GenerationParams greedy(int maxTokens) {
    return new GenerationParams(maxTokens, 0.0, 1.0, 0L);
  }
}
