package io.github.prefixrouter;

import io.github.prefixrouter.internal.PromptArrays;
import java.util.Arrays;
import java.util.Objects;

/**
 * One inference request: an id, the prompt's token ids, the generation parameters and the
 * {@link CacheScope} (LoRA adapter and cache salt) whose cached prefixes it may use.
 *
 * <p>Token ids are those of the engine's tokenizer; routing matches them against cached
 * prefixes. They never leave the node except inside a forwarded request, and never appear in
 * gossip. The array is copied on construction (the copy is what is checked) and on
 * {@link #tokens()}; use {@link #tokenAt(int)} and {@link #length()} to read without copying.
 *
 * <p>Immutable and thread-safe. No component is ever null.
 */
public final class InferenceRequest {

  static {
    PromptArrays.register(r -> r.tokens);
  }

  /** Longest request id accepted, in characters. */
  public static final int MAX_ID_LENGTH = 128;

  /** Largest token id accepted (exclusive); covers every tokenizer in use (up to 2^24 ids). */
  public static final int MAX_TOKEN_ID = 1 << 24;

  /** Longest prompt accepted, in tokens. */
  public static final int MAX_PROMPT_TOKENS = 1 << 20;

  private final String id;
  private final int[] tokens;
  private final GenerationParams params;
  private final CacheScope scope;

  /**
   * Creates a request of the {@link CacheScope#DEFAULT} scope (the base model, no cache salt).
   *
   * @param id the request id, 1 to {@link #MAX_ID_LENGTH} characters of well-formed UTF-16 (no
   *     lone surrogates), unique per origin node
   * @param tokens the prompt's token ids (copied), 1 to {@link #MAX_PROMPT_TOKENS} of them
   * @param params the generation parameters
   * @throws NullPointerException if an argument is null
   * @throws IllegalArgumentException if the id is empty, too long or has a lone surrogate, the
   *     prompt is empty or too long, or a token id is negative or not below {@link #MAX_TOKEN_ID}
   */
  public InferenceRequest(String id, int[] tokens, GenerationParams params) {
    this(id, tokens, params, CacheScope.DEFAULT);
  }

  /**
   * Creates a request of a given cache scope.
   *
   * @param id the request id, as for {@link #InferenceRequest(String, int[], GenerationParams)}
   * @param tokens the prompt's token ids (copied), 1 to {@link #MAX_PROMPT_TOKENS} of them
   * @param params the generation parameters
   * @param scope the adapter and cache salt the request runs under
   * @throws NullPointerException if an argument is null
   * @throws IllegalArgumentException as {@link #InferenceRequest(String, int[], GenerationParams)}
   */
  public InferenceRequest(String id, int[] tokens, GenerationParams params, CacheScope scope) {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(tokens, "tokens");
    Objects.requireNonNull(params, "params");
    Objects.requireNonNull(scope, "scope");
    if (id.isEmpty() || id.length() > MAX_ID_LENGTH) {
      throw new IllegalArgumentException(
          "request id must have 1 to " + MAX_ID_LENGTH + " characters, was " + id.length());
    }
    int lone = WellFormedText.loneSurrogateAt(id);
    if (lone >= 0) {
      // UTF-8 cannot carry it: a forwarded request would be answered under another id
      throw new IllegalArgumentException("request id has a lone surrogate at index " + lone);
    }
    if (tokens.length == 0) {
      throw new IllegalArgumentException("request " + id + ": prompt must have at least one token");
    }
    if (tokens.length > MAX_PROMPT_TOKENS) {
      throw new IllegalArgumentException(
          "request " + id + ": prompt has " + tokens.length + " tokens, limit " + MAX_PROMPT_TOKENS);
    }
    // the copy is what is checked and kept: a token the caller's array gets meanwhile (another
    // thread writing to it) cannot slip in after the check
    int[] copy = tokens.clone();
    for (int i = 0; i < copy.length; i++) {
      if (copy[i] < 0 || copy[i] >= MAX_TOKEN_ID) {
        throw new IllegalArgumentException(
            "request " + id + ": token id " + copy[i] + " at index " + i
                + " is outside [0, " + MAX_TOKEN_ID + ")");
      }
    }
    this.id = id;
    this.tokens = copy;
    this.params = params;
    this.scope = scope;
  }

  private InferenceRequest(InferenceRequest r, CacheScope scope) {
    this.id = r.id;
    this.tokens = r.tokens; // immutable, shared
    this.params = r.params;
    this.scope = scope;
  }

  /**
   * A request with {@link GenerationParams#DEFAULT}.
   *
   * @param id the request id
   * @param tokens the prompt's token ids (copied)
   * @return the request
   * @throws NullPointerException if an argument is null
   * @throws IllegalArgumentException as {@link #InferenceRequest(String, int[], GenerationParams)}
   */
  public static InferenceRequest of(String id, int[] tokens) {
    return new InferenceRequest(id, tokens, GenerationParams.DEFAULT);
  }

  /**
   * The request id, unique per origin node.
   *
   * @return the id
   */
  public String id() {
    return id;
  }

  /**
   * A copy of the prompt's token ids.
   *
   * @return a new array of the token ids
   */
  public int[] tokens() {
    return tokens.clone();
  }

  /**
   * The prompt length in tokens.
   *
   * @return the number of prompt tokens
   */
  public int length() {
    return tokens.length;
  }

  /**
   * The token id at {@code index}.
   *
   * @param index the position, 0 to {@code length() - 1}
   * @return the token id
   * @throws ArrayIndexOutOfBoundsException if {@code index} is out of range
   */
  public int tokenAt(int index) {
    return tokens[index];
  }

  /**
   * The generation parameters.
   *
   * @return the parameters
   */
  public GenerationParams params() {
    return params;
  }

  /**
   * The cache scope: the adapter and cache salt whose cached prefixes this request can use.
   *
   * @return the scope, {@link CacheScope#DEFAULT} unless one was given
   */
  public CacheScope scope() {
    return scope;
  }

  /**
   * This request under another cache scope (same id, tokens and parameters).
   *
   * @param scope the scope
   * @return a request equal to this one but for its scope ({@code this} if it is the same)
   * @throws NullPointerException if the scope is null
   */
  public InferenceRequest withScope(CacheScope scope) {
    Objects.requireNonNull(scope, "scope");
    return scope.equals(this.scope) ? this : new InferenceRequest(this, scope);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof InferenceRequest r
        && id.equals(r.id)
        && Arrays.equals(tokens, r.tokens)
        && params.equals(r.params)
        && scope.equals(r.scope);
  }

  @Override
  public int hashCode() {
    return 31 * (31 * (31 * id.hashCode() + Arrays.hashCode(tokens)) + params.hashCode())
        + scope.hashCode();
  }

  @Override
  public String toString() {
    return "InferenceRequest{id=" + id + ", tokens=" + tokens.length + ", " + params
        + (scope.isDefault() ? "" : ", " + scope) + "}";
  }
}
