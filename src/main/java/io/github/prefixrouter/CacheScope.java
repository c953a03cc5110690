package io.github.prefixrouter;

import java.nio.charset.StandardCharsets;
import java.util.Objects;

/**
 * The part of an engine's prefix-cache key that is not the tokens: the LoRA adapter that serves
 * a request and the request's cache salt. An engine such as vLLM keys every cached block by its
 * tokens <em>and</em> these: a prefix cached for adapter A, or under salt S, is never a hit for
 * a request of the base model, of another adapter or of another salt. Routing therefore matches
 * a request only against prefixes cached in its own scope.
 *
 * <ul>
 *   <li>{@link #adapter()}: the adapter's name as the engine serves it (vLLM: the
 *       {@code --lora-modules} name, sent as the request's {@code model}); empty for the base
 *       model.
 *   <li>{@link #salt()}: the request's cache salt (vLLM: {@code cache_salt}), which a
 *       multi-tenant deployment sets per tenant so that tenants never share cached blocks; empty
 *       for none.
 * </ul>
 *
 * <p>Both are strings of 0 to {@link #MAX_ADAPTER_BYTES} (adapter) or {@link #MAX_SALT_BYTES}
 * (salt) bytes of UTF-8, without lone surrogates or control characters (U+0000 to U+001F,
 * U+007F to U+009F). {@link #DEFAULT} (both empty) is the scope of every request that names
 * neither; its prompts hash exactly as they did before scopes existed.
 *
 * <p>Immutable and thread-safe; two scopes are equal when both strings are equal.
 */
public final class CacheScope {

  /** Longest adapter name accepted, in bytes of UTF-8. */
  public static final int MAX_ADAPTER_BYTES = 256;

  /** Longest cache salt accepted, in bytes of UTF-8. */
  public static final int MAX_SALT_BYTES = 256;

  /** The base model without a cache salt: the scope of a request that names neither. */
  public static final CacheScope DEFAULT = new CacheScope("", "");

  private final String adapter;
  private final String salt;

  private CacheScope(String adapter, String salt) {
    this.adapter = adapter;
    this.salt = salt;
  }

  /**
   * The scope of an adapter and a cache salt.
   *
   * @param adapter the adapter's name, empty for the base model
   * @param salt the cache salt, empty for none
   * @return the scope ({@link #DEFAULT} when both are empty)
   * @throws NullPointerException if an argument is null
   * @throws IllegalArgumentException if a string is too long, has a lone surrogate or a control
   *     character (the message names which string and where)
   */
  public static CacheScope of(String adapter, String salt) {
    check("adapter", adapter, MAX_ADAPTER_BYTES);
    check("cache salt", salt, MAX_SALT_BYTES);
    if (adapter.isEmpty() && salt.isEmpty()) {
      return DEFAULT;
    }
    return new CacheScope(adapter, salt);
  }

  /**
   * The scope of an adapter on its own (no cache salt).
   *
   * @param adapter the adapter's name, empty for the base model
   * @return the scope
   * @throws NullPointerException if the adapter is null
   * @throws IllegalArgumentException as {@link #of(String, String)}
   */
  public static CacheScope adapter(String adapter) {
    return of(adapter, "");
  }

  /**
   * The scope of a cache salt on the base model.
   *
   * @param salt the cache salt, empty for none
   * @return the scope
   * @throws NullPointerException if the salt is null
   * @throws IllegalArgumentException as {@link #of(String, String)}
   */
  public static CacheScope salt(String salt) {
    return of("", salt);
  }

  private static void check(String what, String s, int maxBytes) {
    Objects.requireNonNull(s, what);
    if (s.length() > maxBytes) { // each char is at least one byte of UTF-8
      throw new IllegalArgumentException(
          what + " must have at most " + maxBytes + " bytes of UTF-8, has " + s.length()
              + " characters");
    }
    int i = WellFormedText.badCharAt(s, true);
    if (i >= 0) {
      char c = s.charAt(i);
      throw new IllegalArgumentException(Character.isSurrogate(c)
          ? what + " has a lone surrogate at index " + i
          : what + " has the control character U+" + String.format("%04X", (int) c)
              + " at index " + i);
    }
    int bytes = s.getBytes(StandardCharsets.UTF_8).length;
    if (bytes > maxBytes) {
      throw new IllegalArgumentException(
          what + " must have at most " + maxBytes + " bytes of UTF-8, has " + bytes);
    }
  }

  /**
   * The adapter's name.
   *
   * @return the name, empty for the base model
   */
  public String adapter() {
    return adapter;
  }

  /**
   * The cache salt.
   *
   * @return the salt, empty for none
   */
  public String salt() {
    return salt;
  }

  /**
   * Whether this is {@link #DEFAULT}: the base model, no salt.
   *
   * @return true if both the adapter and the salt are empty
   */
  public boolean isDefault() {
    return adapter.isEmpty() && salt.isEmpty();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof CacheScope s && adapter.equals(s.adapter) && salt.equals(s.salt);
  }

  @Override
  public int hashCode() {
    return 31 * adapter.hashCode() + salt.hashCode();
  }

  /** The adapter and whether a salt is set; the salt itself is not shown (it may be a secret). */
  @Override
  public String toString() {
    if (isDefault()) {
      return "CacheScope{default}";
    }
    return "CacheScope{adapter=" + (adapter.isEmpty() ? "(base)" : adapter)
        + (salt.isEmpty() ? "" : ", salted") + "}";
  }
}
