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
   */
  record Stored(long parent, long[] hashes, int[] tokens, long blockSize, Long loraId,
      String loraName, String medium) implements KvEvent {

    /** A store of the base model (no LoRA fields, no medium). */
    Stored(long parent, long[] hashes, int[] tokens, long blockSize) {
      this(parent, hashes, tokens, blockSize, null, null, null);
    }
  }

  /**
   * {@code BlockRemoved}: the engine evicted these blocks.
   *
   * @param hashes the blocks' hashes
   * @param medium where they were held, or null if nil, absent or not a string
   */
  record Removed(long[] hashes, String medium) implements KvEvent {

    /** A removal without a medium. */
    Removed(long[] hashes) {
      this(hashes, null);
    }
  }

  /** {@code AllBlocksCleared}: the engine dropped its whole cache. */
  record Cleared() implements KvEvent {}

  /** An event whose tag this decoder does not know (a newer vLLM); skipped. */
  record Unknown(String tag) implements KvEvent {}
}
