package io.github.prefixrouter.engine.vllm;

/**
 * One-event batches of a hybrid model's vLLM: events naming their KV-cache group
 * ({@code group_idx}) and, on stores, its kind ({@code kv_cache_spec_kind}), as a map (current
 * vLLM) or a tagged array (the {@code array_like} encoding, fields in declaration order:
 * {@code block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name,
 * extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window}).
 */
final class GroupedEvents {

  private GroupedEvents() {}

  /**
   * A {@code BlockStored} of medium GPU, without LoRA fields.
   *
   * @param group the group index, or null to leave it out
   * @param kind the group's kind, or null to leave it out; a sliding window's store also
   *     carries its window (a field the receiver skips)
   */
  static byte[] stored(boolean maps, Long group, String kind, int blockSize, Long parent,
      int[] tokens, long... hashes) {
    boolean window = kind != null && kind.startsWith("sliding_window");
    MsgpackWriter w = new MsgpackWriter().array(2).float64(1.5).array(1);
    if (maps) {
      w.map(8 + (group != null ? 1 : 0) + (kind != null ? 1 : 0) + (window ? 1 : 0));
      w.str("type").str("BlockStored").str("block_hashes");
      hashes(w, hashes).str("parent_block_hash");
      parent(w, parent).str("token_ids");
      tokens(w, tokens).str("block_size").integer(blockSize).str("lora_id").nil()
          .str("medium").str("GPU").str("lora_name").nil();
      if (group != null) {
        w.str("group_idx").integer(group);
      }
      if (kind != null) {
        w.str("kv_cache_spec_kind").str(kind);
      }
      if (window) {
        w.str("kv_cache_spec_sliding_window").integer(128);
      }
    } else {
      int fields = kind != null ? (window ? 12 : 11) : group != null ? 10 : 8;
      w.array(fields).str("BlockStored");
      hashes(w, hashes);
      parent(w, parent);
      tokens(w, tokens).integer(blockSize).nil().str("GPU").nil();
      if (fields > 8) {
        w.nil(); // extra_keys
        if (group == null) {
          w.nil();
        } else {
          w.integer(group);
        }
      }
      if (kind != null) {
        w.str(kind);
      }
      if (window) {
        w.integer(128);
      }
    }
    return w.bytes();
  }

  /** A {@code BlockRemoved} of medium GPU; {@code group} null leaves the group out. */
  static byte[] removed(boolean maps, Long group, long... hashes) {
    MsgpackWriter w = new MsgpackWriter().array(2).float64(1.5).array(1);
    if (maps) {
      w.map(group == null ? 3 : 4).str("type").str("BlockRemoved").str("block_hashes");
      hashes(w, hashes).str("medium").str("GPU");
      if (group != null) {
        w.str("group_idx").integer(group);
      }
    } else {
      w.array(group == null ? 3 : 4).str("BlockRemoved");
      hashes(w, hashes).str("GPU");
      if (group != null) {
        w.integer(group);
      }
    }
    return w.bytes();
  }

  private static MsgpackWriter parent(MsgpackWriter w, Long parent) {
    return parent == null ? w.nil() : w.integer(parent);
  }

  static MsgpackWriter hashes(MsgpackWriter w, long... hashes) {
    w.array(hashes.length);
    for (long h : hashes) {
      w.integer(h);
    }
    return w;
  }

  static MsgpackWriter tokens(MsgpackWriter w, int[] tokens) {
    w.array(tokens.length);
    for (int t : tokens) {
      w.integer(t);
    }
    return w;
  }
}
