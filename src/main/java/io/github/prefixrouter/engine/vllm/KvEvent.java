package io.github.prefixrouter.engine.vllm;

import io.github.prefixrouter.spi.CacheEventListener;

/** One decoded vLLM KV-cache event, before the receiver checks it against its block size. */
sealed interface KvEvent {

  /**
   * {@code BlockStored}: new full blocks continuing {@code parent}.
   *
   * @param parent the parent block's hash, or {@link CacheEventListener#NO_PARENT} for nil
   * @param hashes the new blocks' hashes, in order
   * @param tokens their token ids (a bigram id contributes its first element)
   * @param blockSize the block size the engine declares
   */
  record Stored(long parent, long[] hashes, int[] tokens, long blockSize) implements KvEvent {}

  /** {@code BlockRemoved}: the engine evicted these blocks. */
  record Removed(long[] hashes) implements KvEvent {}

  /** {@code AllBlocksCleared}: the engine dropped its whole cache. */
  record Cleared() implements KvEvent {}

  /** An event whose tag this decoder does not know (a newer vLLM); skipped. */
  record Unknown(String tag) implements KvEvent {}
}
