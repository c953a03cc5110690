package io.github.prefixrouter.internal.route;

/** The router's view of this node's own cache: the exact local prefix tree. */
public interface LocalPrefixIndex {

  /** Length in tokens of the longest cached prefix of {@code tokens}. Thread-safe, cheap. */
  int match(int[] tokens);

  /**
   * A request ran on the local engine (self-managed mode records its prompt; engine-driven mode
   * ignores this, the engine's events are authoritative).
   */
  void onExecuted(int[] tokens);

  /** Tokens held now. */
  long cachedTokens();
}
