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

  /**
   * Length in tokens of the longest prefix of {@code tokens} cached in the scope whose chains
   * start from {@code scopeRoot} ({@link io.github.prefixrouter.internal.tree.BlockHasher#scopeRoot}).
   * The default serves the default scope and reports nothing cached in any other (an index
   * that does not know scopes must not credit one scope's prefixes to another).
   */
  default int match(long scopeRoot, int[] tokens) {
    return scopeRoot == io.github.prefixrouter.internal.tree.BlockHasher.ROOT_PARENT
        ? match(tokens) : 0;
  }

  /**
   * A request of the scope {@code scopeRoot} ran on the local engine; the default records only
   * requests of the default scope.
   */
  default void onExecuted(long scopeRoot, int[] tokens) {
    if (scopeRoot == io.github.prefixrouter.internal.tree.BlockHasher.ROOT_PARENT) {
      onExecuted(tokens);
    }
  }

  /** Tokens held now. */
  long cachedTokens();

  /**
   * The engine's whole cache is gone (its server's process went away): an index that estimates
   * that cache from the requests run forgets it all; one mirroring the engine's own events keeps
   * what they said (they say what the engine holds). The default does nothing.
   */
  default void engineCacheLost() {}

  /**
   * Pins the cached prefix of a prompt about to run on the local engine, in the scope whose
   * chains start from {@code scopeRoot}, so the index does not evict it while the engine uses
   * it (an engine keeps the blocks of a running request); the node releases the pin once the
   * run has ended, however it ended. The default pins nothing, as an index mirroring an
   * engine's own events needs (the engine reports what it keeps).
   *
   * @return the pin; its {@link Pin#release()} is called exactly once
   */
  default Pin pin(long scopeRoot, int[] tokens) {
    return Pin.NONE;
  }

  /** A pin on a cached prefix ({@link #pin}). */
  interface Pin {
    /** Pins nothing. */
    Pin NONE = () -> {};

    /** Lets the prefix be evicted again. */
    void release();
  }
}
