package io.github.prefixrouter.spi;

/**
 * Receives an engine's KV-cache events, in the shape vLLM and SGLang publish them, for the
 * <em>engine-driven</em> tree mode: the node's local prefix tree then mirrors exactly what the
 * engine holds.
 *
 * <p>Block hashes here are the engine's own block identifiers; the library only uses them to
 * find which blocks a later event refers to. Blocks hold exactly the node's configured block
 * size of tokens. All methods have no-op defaults.
 */
public interface CacheEventListener {

  /** The parent hash of blocks that start at the beginning of a prompt. */
  long NO_PARENT = 0L;

  /**
   * The engine cached new full blocks continuing the block {@code parentBlockHash} (or starting
   * a prompt, when it is {@link #NO_PARENT}).
   *
   * @param blockHashes the engine's identifiers of the new blocks, in order
   * @param tokenIds the tokens of the new blocks: {@code blockHashes.length × blockSize} ids
   */
  default void onBlocksStored(long parentBlockHash, long[] blockHashes, int[] tokenIds) {}

  /** The engine evicted these blocks (and so, implicitly, every block continuing them). */
  default void onBlocksRemoved(long[] blockHashes) {}

  /** The engine dropped its whole cache. */
  default void onAllCleared() {}
}
