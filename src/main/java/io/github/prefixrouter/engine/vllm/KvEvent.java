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
   * @param loraId the LoRA adapter's id ({@code lora_id}), or null if nil or absent (the base
   *     model)
   * @param loraName the LoRA adapter's name ({@code lora_name}), or null if nil or absent
   * @param medium where the blocks are held ({@code medium}: {@code GPU}, {@code CPU} for an
   *     offload tier), or null if nil, absent or not a string
   * @param group the KV-cache group ({@code group_idx}) of a hybrid model's engine, or null if
   *     nil or absent (an engine reporting one group)
   * @param groupKind the kind of that group's layers ({@code kv_cache_spec_kind}: {@code
   *     full_attention}, {@code sliding_window}, {@code mamba}, ...), or null if nil, absent or
   *     not a string
   */
  record Stored(long parent, long[] hashes, int[] tokens, long blockSize, Long loraId,
      String loraName, String medium, Long group, String groupKind) implements KvEvent {

    /** A store of the base model (no LoRA fields, no medium, no group). */
    Stored(long parent, long[] hashes, int[] tokens, long blockSize) {
      this(parent, hashes, tokens, blockSize, null, null, null, null, null);
    }
  }

  /**
   * {@code BlockRemoved}: the engine evicted these blocks.
   *
   * @param hashes the blocks' hashes
   * @param medium where they were held, or null if nil, absent or not a string
   * @param group the KV-cache group ({@code group_idx}), or null if nil or absent
   */
  record Removed(long[] hashes, String medium, Long group) implements KvEvent {

    /** A removal without a medium or a group. */
    Removed(long[] hashes) {
      this(hashes, null, null);
    }
  }

  /** {@code AllBlocksCleared}: the engine dropped its whole cache. */
  record Cleared() implements KvEvent {}

  /**
   * {@code TierBlocksCleared}: the engine dropped every block of one tier of its cache (vLLM
   * with {@code "tier_scoped_clear_events": true} reports a reset of its GPU block pool so).
   *
   * @param medium the tier ({@code GPU}, {@code CPU}, ...), or null if nil, absent or not a
   *     string
   */
  record TierCleared(String medium) implements KvEvent {}

  /**
   * A {@code BlockStored} or {@code BlockRemoved} naming no block: it changes nothing a mirror
   * holds, and the decoder shares one instance among all those of a batch with the same group
   * and kind; skipped. vLLM sends such a store for a KV-cache group whose new blocks all left
   * its sliding window: its kind still tells the receiver to skip that group's events.
   *
   * @param group the KV-cache group ({@code group_idx}), or null if nil or absent
   * @param groupKind a store's {@code kv_cache_spec_kind}, or null (always for a removal)
   */
  record NoBlocks(Long group, String groupKind) implements KvEvent {}

  /** An event whose tag this decoder does not know (a newer vLLM); skipped. */
  record Unknown(String tag) implements KvEvent {}
}
