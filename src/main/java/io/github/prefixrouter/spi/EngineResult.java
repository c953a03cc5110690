package io.github.prefixrouter.spi;

import java.util.Arrays;
import java.util.Objects;

/**
 * What an {@link InferenceEngine} produced for one request.
 *
 * @param outputTokens the generated token ids
 * @param text the generated text if the engine detokenizes, else the empty string
 * @param promptTokens how many prompt tokens the engine processed
 * @param cachedPromptTokens how many of them were served from the engine's prefix cache, or
 *     {@code -1} if the engine does not report it
 * @param prefillNanos time spent on the prompt (prefill), or {@code -1} if unknown
 * @param decodeNanos time spent generating (decode), or {@code -1} if unknown
 *
 * <p>Immutable: the token array is copied in and out. {@code outputTokens} and {@code text} are
 * never null.
 */
public record EngineResult(
    int[] outputTokens,
    String text,
    int promptTokens,
    int cachedPromptTokens,
    long prefillNanos,
    long decodeNanos) {

  /**
   * Checks and copies the components.
   *
   * @param outputTokens the generated token ids (copied)
   * @param text the generated text, or the empty string
   * @param promptTokens how many prompt tokens the engine processed
   * @param cachedPromptTokens how many of them came from the prefix cache, or {@code -1}
   * @param prefillNanos prefill time, or {@code -1}
   * @param decodeNanos decode time, or {@code -1}
   * @throws NullPointerException if {@code outputTokens} or {@code text} is null
   * @throws IllegalArgumentException if a count or timing is out of range
   */
  public EngineResult {
    Objects.requireNonNull(outputTokens, "outputTokens");
    Objects.requireNonNull(text, "text");
    outputTokens = outputTokens.clone();
    if (promptTokens < 0) {
      throw new IllegalArgumentException("promptTokens must be >= 0, was " + promptTokens);
    }
    if (cachedPromptTokens < -1 || cachedPromptTokens > promptTokens) {
      throw new IllegalArgumentException(
          "cachedPromptTokens must be -1 or in [0, promptTokens=" + promptTokens + "], was "
              + cachedPromptTokens);
    }
    if (prefillNanos < -1 || decodeNanos < -1) {
      throw new IllegalArgumentException("timings must be >= -1");
    }
  }

  /**
   * The generated token ids.
   *
   * @return a copy of the generated token ids
   */
  @Override
  public int[] outputTokens() {
    return outputTokens.clone();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof EngineResult r
        && Arrays.equals(outputTokens, r.outputTokens)
        && text.equals(r.text)
        && promptTokens == r.promptTokens
        && cachedPromptTokens == r.cachedPromptTokens
        && prefillNanos == r.prefillNanos
        && decodeNanos == r.decodeNanos;
  }

  @Override
  public int hashCode() {
    return Objects.hash(Arrays.hashCode(outputTokens), text, promptTokens, cachedPromptTokens);
  }

  @Override
  public String toString() {
    return "EngineResult{output=" + Arrays.toString(outputTokens) + ", prompt=" + promptTokens
        + ", cached=" + cachedPromptTokens + ", prefillNanos=" + prefillNanos
        + ", decodeNanos=" + decodeNanos + "}";
  }
}
