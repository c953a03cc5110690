package io.github.prefixrouter.spi;

/**
 * Receives an engine's KV-cache events, in the shape vLLM and SGLang publish them, for the
 * <em>engine-driven</em> tree mode: the node's local prefix tree then mirrors exactly what the
 * engine holds.
 *
 * <p>Block hashes here are the engine's own block identifiers; the library only uses them to
 * find which blocks a later event refers to. Blocks hold exactly the node's configured block
 * size of tokens. All methods have no-op defaults.
 *
 * <p>The node's listener is thread-safe: an engine may call it from any thread, but must call
 * it for one cache in the order the changes happened. It applies each event before returning.
 * Malformed events (null arrays, a token count that is not {@code blockHashes.length ×
 * blockSize}) are counted and ignored, never thrown back at the engine.
 *
 * <p>An engine that holds two copies of a block under the same hash (it computed the block for
 * two requests before either was cached) reports a store for each and later a removal for
 * each: the block counts as cached until its last copy is removed.
 */
public interface CacheEventListener {

  /** The parent hash of blocks that start at the beginning of a prompt. */
  long NO_PARENT = 0L;

  /**
   * The engine cached new full blocks continuing the block {@code parentBlockHash} (or starting
   * a prompt, when it is {@link #NO_PARENT}).
   *
   * @param parentBlockHash the engine's identifier of the block these continue, or
   *     {@link #NO_PARENT}
   * @param blockHashes the engine's identifiers of the new blocks, in order
   * @param tokenIds the tokens of the new blocks: {@code blockHashes.length × blockSize} ids
   */
  default void onBlocksStored(long parentBlockHash, long[] blockHashes, int[] tokenIds) {}

  /**
   * The engine evicted these blocks (and so, implicitly, every block continuing them).
   *
   * @param blockHashes the engine's identifiers of the evicted blocks
   */
  default void onBlocksRemoved(long[] blockHashes) {}

  /** The engine dropped its whole cache. */
  default void onAllCleared() {}
}
