package io.github.prefixrouter.spi;

import io.github.prefixrouter.CacheScope;

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
 * Malformed events (null arrays or a null scope, a block hash equal to {@link #NO_PARENT}, a
 * token count that is not {@code blockHashes.length × blockSize}) are counted and ignored, never
 * thrown back at the engine.
 *
 * <p>An engine that holds two copies of a block under the same hash (it computed the block for
 * two requests before either was cached) reports a store for each and later a removal for
 * each: the block counts as cached until its last copy is removed.
 *
 * <p><b>Scopes.</b> An engine that serves LoRA adapters or honours cache salts keys its blocks
 * by them too ({@link CacheScope}). It reports the scope of a chain where the chain starts:
 * {@link #onBlocksStored(CacheScope, long, long[], int[])} with {@link #NO_PARENT}. Blocks
 * continuing a known block are in that block's scope whatever scope is passed. The
 * three-argument {@link #onBlocksStored(long, long[], int[])} means the default scope (the
 * base model, no salt).
 */
public interface CacheEventListener {

  /**
   * The parent hash of blocks that start at the beginning of a prompt; never a block's own hash
   * (a store naming a block of hash 0 is malformed, and dropped whole).
   */
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
   * The engine cached new full blocks of a request of {@code scope}: like
   * {@link #onBlocksStored(long, long[], int[])}, but a chain starting at {@link #NO_PARENT}
   * goes under {@code scope} rather than under the base model. Engines that know scopes call
   * this one.
   *
   * <p>The default passes the event on to {@link #onBlocksStored(long, long[], int[])} when the
   * scope is the default or the blocks continue a parent (whose scope they share), and drops a
   * root chain of another scope, which a listener that does not know scopes would otherwise
   * credit to the base model (its continuations are then reported with an unknown parent). A
   * null scope makes the event malformed: the default drops it, whatever the parent, as the
   * node's listener does (which also counts it), and does not throw.
   *
   * @param scope the scope of the request that computed the blocks; null is malformed
   * @param parentBlockHash the engine's identifier of the block these continue, or
   *     {@link #NO_PARENT}
   * @param blockHashes the engine's identifiers of the new blocks, in order
   * @param tokenIds the tokens of the new blocks: {@code blockHashes.length × blockSize} ids
   */
  default void onBlocksStored(
      CacheScope scope, long parentBlockHash, long[] blockHashes, int[] tokenIds) {
    if (scope == null) {
      return; // malformed: dropped, never thrown back at the engine
    }
    if (scope.isDefault() || parentBlockHash != NO_PARENT) {
      onBlocksStored(parentBlockHash, blockHashes, tokenIds);
    }
  }

  /**
   * The engine evicted these blocks (and so, implicitly, every block continuing them).
   *
   * @param blockHashes the engine's identifiers of the evicted blocks
   */
  default void onBlocksRemoved(long[] blockHashes) {}

  /** The engine dropped its whole cache. */
  default void onAllCleared() {}
}
