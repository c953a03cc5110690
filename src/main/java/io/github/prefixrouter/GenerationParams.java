package io.github.prefixrouter;

import java.util.ArrayList;
import java.util.List;

/**
 * How to generate the answer of an {@link InferenceRequest}. Routing never looks at these; they
 * travel with the request to whichever engine runs it.
 *
 * <p>Stops have vLLM's meaning. Generation ends at the first token that is one of
 * {@code stopTokenIds} (that token is the last of the output; its text is not part of the
 * output's text) or at the first token after which the output's text contains one of
 * {@code stop} (that token is the last of the output, and the text ends just before the stop
 * string, which is not part of it; of two stop strings completed at the same char, the one
 * listed first). Stop strings are looked for
 * in the output's text only, never in the prompt. An engine that generates text honours both;
 * one that gives token ids only honours {@code stopTokenIds} (see {@code docs/engines.md} for
 * what the node does when an engine ignores them).
 *
 * @param maxTokens how many tokens to generate at most: 1 to {@value #MAX_TOKENS_LIMIT}
 * @param temperature sampling temperature, 0 for greedy decoding: 0 to 100
 * @param topP nucleus sampling mass: greater than 0, at most 1
 * @param seed seed for sampling, so the same request gives the same answer on any node
 * @param stop stop strings, in the client's order: at most {@value #MAX_STOP_STRINGS}, each 1 to
 *     {@value #MAX_STOP_LENGTH} UTF-16 chars of well-formed text (no lone surrogate); empty for
 *     none
 * @param stopTokenIds stop token ids, in the client's order: at most
 *     {@value #MAX_STOP_TOKEN_IDS}, each in {@code [0, }{@link InferenceRequest#MAX_TOKEN_ID}
 *     {@code )}, the range of the prompt's token ids; empty for none
 *
 * <p>Immutable and thread-safe: the lists are copied in, unmodifiable and never null.
 */
public record GenerationParams(int maxTokens, double temperature, double topP, long seed,
    List<String> stop, List<Integer> stopTokenIds) {

  /** Largest {@code maxTokens} accepted. */
  public static final int MAX_TOKENS_LIMIT = 1 << 20;

  /** Most stop strings a request may have. */
  public static final int MAX_STOP_STRINGS = 16;

  /** Longest stop string, in UTF-16 chars. */
  public static final int MAX_STOP_LENGTH = 256;

  /** Most stop token ids a request may have. */
  public static final int MAX_STOP_TOKEN_IDS = 256;

  /** One greedy token: the MMLU-style default. */
  public static final GenerationParams DEFAULT = new GenerationParams(1, 0.0, 1.0, 0L);

  /**
   * Checks the parameters and copies the lists. Each list is read once, into the copy that is
   * checked and kept, so a list that changes meanwhile (another thread adding to it) gives
   * parameters that satisfy every check, or an {@link IllegalArgumentException}.
   *
   * @param maxTokens how many tokens to generate at most
   * @param temperature sampling temperature
   * @param topP nucleus sampling mass
   * @param seed seed for sampling
   * @param stop stop strings (null: none)
   * @param stopTokenIds stop token ids (null: none)
   * @throws IllegalArgumentException if a parameter is out of its range, a list is too long, or
   *     an element is null, empty, too long, not well-formed text or out of the token range
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
    stop = checkStop(stop);
    stopTokenIds = checkStopTokenIds(stopTokenIds);
  }

  /**
   * Parameters without stops.
   *
   * @param maxTokens how many tokens to generate at most
   * @param temperature sampling temperature
   * @param topP nucleus sampling mass
   * @param seed seed for sampling
   * @throws IllegalArgumentException if a parameter is out of its range
   */
  public GenerationParams(int maxTokens, double temperature, double topP, long seed) {
    this(maxTokens, temperature, topP, seed, List.of(), List.of());
  }

  /**
   * Greedy decoding of up to {@code maxTokens} tokens.
   *
   * @param maxTokens how many tokens to generate at most
   * @return the parameters, with temperature 0, top-p 1, seed 0 and no stops
   */
  public static GenerationParams greedy(int maxTokens) {
    return new GenerationParams(maxTokens, 0.0, 1.0, 0L);
  }

  /**
   * These parameters with other stops.
   *
   * @param stop stop strings (null: none)
   * @param stopTokenIds stop token ids (null: none)
   * @return the parameters, the same but for the stops
   * @throws IllegalArgumentException if a stop is invalid, as for the constructor
   */
  public GenerationParams withStops(List<String> stop, List<Integer> stopTokenIds) {
    return new GenerationParams(maxTokens, temperature, topP, seed, stop, stopTokenIds);
  }

  /**
   * Whether the request has a stop string or a stop token id.
   *
   * @return true if {@link #stop} or {@link #stopTokenIds} is not empty
   */
  public boolean hasStops() {
    return !stop.isEmpty() || !stopTokenIds.isEmpty();
  }

  /**
   * Whether {@code token} is one of the stop token ids.
   *
   * @param token a token id
   * @return true if generation ends after {@code token}
   */
  public boolean isStopToken(int token) {
    return !stopTokenIds.isEmpty() && stopTokenIds.contains(token);
  }

  private static List<String> checkStop(List<String> stop) {
    if (stop == null) {
      return List.of();
    }
    // the caller's list is read once, and the copy checked and kept: a list another thread
    // changes meanwhile cannot pass one reading of it to the checks and another to the record
    List<String> copy = new ArrayList<>(stop);
    if (copy.isEmpty()) {
      return List.of();
    }
    if (copy.size() > MAX_STOP_STRINGS) {
      throw new IllegalArgumentException("stop must have at most " + MAX_STOP_STRINGS
          + " strings, had " + copy.size());
    }
    for (String s : copy) {
      if (s == null) {
        throw new IllegalArgumentException("a stop string is null");
      }
      if (s.isEmpty() || s.length() > MAX_STOP_LENGTH) {
        throw new IllegalArgumentException("a stop string must be 1 to " + MAX_STOP_LENGTH
            + " chars long, was " + s.length());
      }
      int lone = WellFormedText.loneSurrogateAt(s);
      if (lone >= 0) {
        throw new IllegalArgumentException(
            "a stop string must be well-formed text; it has a lone surrogate at " + lone);
      }
    }
    return List.copyOf(copy);
  }

  private static List<Integer> checkStopTokenIds(List<Integer> ids) {
    if (ids == null) {
      return List.of();
    }
    List<Integer> copy = new ArrayList<>(ids); // read once, as the stop strings are
    if (copy.isEmpty()) {
      return List.of();
    }
    if (copy.size() > MAX_STOP_TOKEN_IDS) {
      throw new IllegalArgumentException("stopTokenIds must have at most " + MAX_STOP_TOKEN_IDS
          + " ids, had " + copy.size());
    }
    for (Integer id : copy) {
      if (id == null || id < 0 || id >= InferenceRequest.MAX_TOKEN_ID) {
        throw new IllegalArgumentException("a stop token id must be in [0, "
            + InferenceRequest.MAX_TOKEN_ID + "), was " + id);
      }
    }
    return List.copyOf(copy);
  }
}
