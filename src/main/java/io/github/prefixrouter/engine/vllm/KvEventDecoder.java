package io.github.prefixrouter.engine.vllm;

import io.github.prefixrouter.engine.vllm.MsgpackReader.Kind;
import io.github.prefixrouter.spi.CacheEventListener;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Decodes the msgpack payload of one vLLM KV-event message (a {@code KVEventBatch}) into
 * {@link KvEvent}s. The whole payload is decoded before anything is returned, so a malformed
 * batch yields no events at all.
 *
 * <p>Accepted: the batch as an array {@code [ts, events, data_parallel_rank?, ...]} (or a map
 * with those keys); each event as a tagged array {@code [tag, field...]} or a tagged map
 * {@code {"type": tag, field: value, ...}}. Fields this decoder does not need, and trailing
 * elements added by newer versions, are skipped whatever their kind; so are the optional
 * fields it reads ({@code medium}, {@code group_idx}, {@code kv_cache_spec_kind}) when they
 * hold a value of another kind than theirs. Stateless and thread-safe.
 */
final class KvEventDecoder {

  static final String STORED = "BlockStored";
  static final String REMOVED = "BlockRemoved";
  static final String CLEARED = "AllBlocksCleared";
  static final String TIER_CLEARED = "TierBlocksCleared";
  private static final KvEvent.Cleared CLEARED_EVENT = new KvEvent.Cleared();
  private static final KvEvent.NoBlocks NO_BLOCKS = new KvEvent.NoBlocks(null, null);

  /** The key of the tag in an event encoded as a map (msgspec's default tag field). */
  static final String TAG_KEY = "type";

  /**
   * Distinct unknown tags of one batch whose events keep their own tag; the events of further
   * unknown tags share one instance (see {@link #decode}).
   */
  static final int MAX_UNKNOWN_TAGS = 64;

  /** The room a batch's list of events starts with: it grows from there as events are read. */
  private static final int INITIAL_EVENTS = 256;

  /**
   * Distinct groups and kinds of one batch's stores and removals naming no block that keep
   * them; those of further groups share one instance naming none (see {@link #decode}).
   */
  static final int MAX_NO_BLOCK_GROUPS = 64;

  private static final int BATCH_DEPTH = 1;
  private static final int EVENT_DEPTH = 3;
  private static final int FIELD_DEPTH = 4;

  private KvEventDecoder() {}

  /**
   * The events of one batch, in order. Events of an unknown tag are shared instances: one per
   * tag for the first {@link #MAX_UNKNOWN_TAGS} distinct unknown tags of the batch, and one
   * (holding the first of them) for the events of every further unknown tag, so that a payload
   * of tiny events of distinct tags retains a reference per event, not an event and a tag.
   * Stores and removals naming no block, whatever else they carry, are {@link KvEvent.NoBlocks}
   * instances shared in the same way: one per group and kind for the first {@link
   * #MAX_NO_BLOCK_GROUPS} of the batch, and one naming none for the others.
   *
   * @throws MalformedKvEventException if the payload is not exactly one well-formed batch
   */
  static List<KvEvent> decode(byte[] payload) throws MalformedKvEventException {
    MsgpackReader r = new MsgpackReader(payload);
    List<KvEvent> events = null;
    Kind kind = r.peekKind("batch");
    if (kind == Kind.ARRAY) {
      int n = r.readArrayHeader("batch");
      if (n < 2) {
        throw new MalformedKvEventException(
            "batch: array of " + n + " elements, needs ts and events", 0);
      }
      r.skipNumber("batch.ts");
      events = readEvents(r);
      if (n >= 3 && !r.tryNil("batch.data_parallel_rank")) {
        r.readLongBits("batch.data_parallel_rank");
      }
      for (int i = 3; i < n; i++) {
        r.skip(BATCH_DEPTH + 1, "batch (trailing element)");
      }
    } else if (kind == Kind.MAP) {
      for (int i = r.readMapHeader("batch"); i > 0; i--) {
        String key = r.readString("batch (key)");
        switch (key) {
          case "ts":
            r.skipNumber("batch.ts");
            break;
          case "events":
            events = readEvents(r);
            break;
          case "data_parallel_rank":
            if (!r.tryNil("batch.data_parallel_rank")) {
              r.readLongBits("batch.data_parallel_rank");
            }
            break;
          default:
            r.skip(BATCH_DEPTH + 1, "batch." + key);
        }
      }
      if (events == null) {
        throw new MalformedKvEventException("batch: map without events", r.position());
      }
    } else {
      throw new MalformedKvEventException("batch: expected an array, found " + kind, 0);
    }
    if (!r.atEnd()) {
      throw new MalformedKvEventException(
          "batch: " + (payload.length - r.position()) + " byte(s) after the batch", r.position());
    }
    return events;
  }

  private static List<KvEvent> readEvents(MsgpackReader r) throws MalformedKvEventException {
    int n = r.readArrayHeader("batch.events");
    // n is only checked against the bytes left, a byte an event: the list grows with the events
    // read, so that a batch declaring millions of events and refused at its first gets no list
    // sized for them all (a reference each, 64 MB for a 16 MiB payload)
    List<KvEvent> events = new ArrayList<>(Math.min(n, INITIAL_EVENTS));
    // events that carry only their tag are shared (Cleared is one instance; Unknown, one per
    // tag in the batch): a batch of tiny events (two bytes each) then holds a reference per
    // event, not an event and a tag string of its own
    // past MAX_UNKNOWN_TAGS distinct tags (six-byte events of a tag each), the events of
    // further tags share one instance: the receiver only counts unknown events, and a tag and
    // an event kept per event made a 16 MiB payload hold about 190 MB
    Sharing<String, KvEvent.Unknown> unknown = new Sharing<>(MAX_UNKNOWN_TAGS, null);
    Sharing<KvEvent.NoBlocks, KvEvent.NoBlocks> noBlocks =
        new Sharing<>(MAX_NO_BLOCK_GROUPS, NO_BLOCKS);
    for (int i = 0; i < n; i++) {
      KvEvent e = readEvent(r);
      // a store or removal naming no block changes nothing (17 bytes, ["BlockStored", [], nil,
      // [], 16], decoded to an event and two arrays: a 16 MiB payload of them held 86 MiB, and
      // each was passed to the listener)
      if (e instanceof KvEvent.Stored s && s.hashes().length == 0) {
        e = noBlock(noBlocks, new KvEvent.NoBlocks(s.group(), s.groupKind()));
      } else if (e instanceof KvEvent.Removed d && d.hashes().length == 0) {
        e = noBlock(noBlocks, new KvEvent.NoBlocks(d.group(), null));
      } else if (e instanceof KvEvent.Unknown u) {
        e = unknown.of(u.tag(), u);
      }
      events.add(e);
    }
    return events;
  }

  /** The batch's instance equal to {@code e}, or {@code e} made one, or the one naming none. */
  private static KvEvent.NoBlocks noBlock(Sharing<KvEvent.NoBlocks, KvEvent.NoBlocks> seen,
      KvEvent.NoBlocks e) {
    return e.equals(NO_BLOCKS) ? NO_BLOCKS : seen.of(e, e);
  }

  /**
   * The instances of a batch's events, shared: one per key for the first {@code max} keys, and
   * one for all the keys beyond them (the overflow instance given, or else the first event of
   * such a key).
   */
  private static final class Sharing<K, E extends KvEvent> {
    private final Map<K, E> seen = new HashMap<>();
    private final int max;
    private E overflow;

    Sharing(int max, E overflow) {
      this.max = max;
      this.overflow = overflow;
    }

    E of(K key, E e) {
      E shared = seen.get(key);
      if (shared != null) {
        return shared;
      }
      if (seen.size() < max) {
        seen.put(key, e);
        return e;
      }
      if (overflow == null) {
        overflow = e;
      }
      return overflow;
    }
  }

  private static KvEvent readEvent(MsgpackReader r) throws MalformedKvEventException {
    int start = r.position();
    Kind kind = r.peekKind("event");
    if (kind == Kind.MAP) {
      return readMapEvent(r);
    }
    if (kind != Kind.ARRAY) {
      throw new MalformedKvEventException("event: expected an array or a map, found " + kind,
          start);
    }
    int n = r.readArrayHeader("event");
    if (n < 1) {
      throw new MalformedKvEventException("event: empty array, no tag", start);
    }
    String tag = r.readString("event.tag");
    KvEvent event;
    int used;
    switch (tag) {
      case STORED: {
        if (n < 5) {
          throw new MalformedKvEventException(
              "BlockStored: " + (n - 1) + " fields, needs block_hashes, parent_block_hash, "
                  + "token_ids and block_size", start);
        }
        long[] hashes = readHashes(r, "BlockStored.block_hashes");
        long parent = readParent(r);
        int[] tokens = readTokens(r);
        long blockSize = r.readLongBits("BlockStored.block_size");
        // then lora_id, medium, lora_name, extra_keys, group_idx, kv_cache_spec_kind (vLLM
        // omits trailing defaults)
        Long loraId = n > 5 ? readLoraId(r) : null;
        String medium = n > 6 ? readLenientString(r, "BlockStored.medium") : null;
        String loraName = n > 7 ? readLoraName(r) : null;
        if (n > 8) {
          r.skip(FIELD_DEPTH, "BlockStored.extra_keys");
        }
        Long group = n > 9 ? readGroup(r, "BlockStored.group_idx") : null;
        String groupKind = n > 10 ? readLenientString(r, "BlockStored.kv_cache_spec_kind") : null;
        event = new KvEvent.Stored(parent, hashes, tokens, blockSize, loraId, loraName, medium,
            group, groupKind);
        used = Math.min(n, 11);
        break;
      }
      case REMOVED:
        if (n < 2) {
          throw new MalformedKvEventException("BlockRemoved: no block_hashes", start);
        }
        long[] removed = readHashes(r, "BlockRemoved.block_hashes");
        String removedMedium = n > 2 ? readLenientString(r, "BlockRemoved.medium") : null;
        Long removedGroup = n > 3 ? readGroup(r, "BlockRemoved.group_idx") : null;
        event = new KvEvent.Removed(removed, removedMedium, removedGroup);
        used = Math.min(n, 4);
        break;
      case CLEARED:
        event = CLEARED_EVENT;
        used = 1;
        break;
      case TIER_CLEARED:
        // then medium, ownership (skipped: whoever cleared the tier, its blocks are gone)
        event = new KvEvent.TierCleared(
            n > 1 ? readLenientString(r, "TierBlocksCleared.medium") : null);
        used = Math.min(n, 2);
        break;
      default:
        event = new KvEvent.Unknown(tag);
        used = 1;
    }
    for (int i = used; i < n; i++) {
      r.skip(FIELD_DEPTH, tag + " (field " + i + ")");
    }
    return event;
  }

  /**
   * An event encoded as a map: a first pass finds the tag (it may be any entry), a second
   * reads the fields the tag needs.
   */
  private static KvEvent readMapEvent(MsgpackReader r) throws MalformedKvEventException {
    int start = r.position();
    int n = r.readMapHeader("event");
    int fields = r.position();
    String tag = null;
    for (int i = 0; i < n; i++) {
      String key = r.readString("event (key)");
      if (key.equals(TAG_KEY)) {
        tag = r.readString("event.type");
      } else {
        r.skip(FIELD_DEPTH, "event." + key);
      }
    }
    if (tag == null) {
      throw new MalformedKvEventException("event: map without a \"type\" tag", start);
    }
    if (!tag.equals(STORED) && !tag.equals(REMOVED) && !tag.equals(TIER_CLEARED)) {
      return tag.equals(CLEARED) ? CLEARED_EVENT : new KvEvent.Unknown(tag);
    }
    r.reset(fields);
    long[] hashes = null;
    long parent = CacheEventListener.NO_PARENT;
    int[] tokens = null;
    Long blockSize = null;
    Long loraId = null;
    String loraName = null;
    String medium = null;
    Long group = null;
    String groupKind = null;
    for (int i = 0; i < n; i++) {
      String key = r.readString("event (key)");
      // a BlockRemoved needs only its block_hashes, medium and group_idx; a TierBlocksCleared
      // its medium
      String wanted = tag.equals(STORED) || key.equals("medium") || tag.equals(REMOVED)
          && (key.equals("block_hashes") || key.equals("group_idx")) ? key : "";
      switch (wanted) {
        case "block_hashes":
          hashes = readHashes(r, tag + ".block_hashes");
          break;
        case "parent_block_hash":
          parent = readParent(r);
          break;
        case "token_ids":
          tokens = readTokens(r);
          break;
        case "block_size":
          blockSize = r.readLongBits("BlockStored.block_size");
          break;
        case "lora_id":
          loraId = readLoraId(r);
          break;
        case "lora_name":
          loraName = readLoraName(r);
          break;
        case "medium":
          medium = readLenientString(r, tag + ".medium");
          break;
        case "group_idx":
          group = readGroup(r, tag + ".group_idx");
          break;
        case "kv_cache_spec_kind":
          groupKind = readLenientString(r, "BlockStored.kv_cache_spec_kind");
          break;
        default:
          r.skip(FIELD_DEPTH, tag + "." + key);
      }
    }
    if (tag.equals(TIER_CLEARED)) {
      return new KvEvent.TierCleared(medium);
    }
    if (hashes == null) {
      throw new MalformedKvEventException(tag + ": no block_hashes", start);
    }
    if (tag.equals(REMOVED)) {
      return new KvEvent.Removed(hashes, medium, group);
    }
    if (tokens == null || blockSize == null) {
      throw new MalformedKvEventException(
          "BlockStored: " + (tokens == null ? "no token_ids" : "no block_size"), start);
    }
    return new KvEvent.Stored(parent, hashes, tokens, blockSize, loraId, loraName, medium,
        group, groupKind);
  }

  /**
   * {@code group_idx}: an int, or null for nil (one group) or a value of any other kind
   * (skipped, as a field of a version that placed something else there).
   */
  private static Long readGroup(MsgpackReader r, String field)
      throws MalformedKvEventException {
    if (r.peekKind(field) == Kind.INT) {
      return r.readLongBits(field);
    }
    r.skip(FIELD_DEPTH, field);
    return null;
  }

  /** {@code lora_id}: nil (the base model) or an int. */
  private static Long readLoraId(MsgpackReader r) throws MalformedKvEventException {
    if (r.tryNil("BlockStored.lora_id")) {
      return null;
    }
    return r.readLongBits("BlockStored.lora_id");
  }

  /**
   * {@code medium} (or {@code kv_cache_spec_kind}): a string, or null for nil or a value of any
   * other kind (skipped).
   */
  private static String readLenientString(MsgpackReader r, String field)
      throws MalformedKvEventException {
    if (r.peekKind(field) == Kind.STR) {
      return r.readString(field);
    }
    r.skip(FIELD_DEPTH, field);
    return null;
  }

  /** {@code lora_name}: nil or a string. */
  private static String readLoraName(MsgpackReader r) throws MalformedKvEventException {
    if (r.tryNil("BlockStored.lora_name")) {
      return null;
    }
    return r.readString("BlockStored.lora_name");
  }

  private static long[] readHashes(MsgpackReader r, String field)
      throws MalformedKvEventException {
    int n = r.readArrayHeader(field);
    long[] hashes = new long[n];
    for (int i = 0; i < n; i++) {
      hashes[i] = r.readHash(field);
    }
    return hashes;
  }

  private static long readParent(MsgpackReader r) throws MalformedKvEventException {
    if (r.tryNil("BlockStored.parent_block_hash")) {
      return CacheEventListener.NO_PARENT;
    }
    return r.readHash("BlockStored.parent_block_hash");
  }

  /** Token ids; an element that is a 2-element array (a bigram id) gives its first element. */
  private static int[] readTokens(MsgpackReader r) throws MalformedKvEventException {
    int n = r.readArrayHeader("BlockStored.token_ids");
    int[] tokens = new int[n];
    for (int i = 0; i < n; i++) {
      if (r.peekKind("BlockStored.token_ids") == Kind.ARRAY) {
        int start = r.position();
        int m = r.readArrayHeader("BlockStored.token_ids (bigram)");
        if (m != 2) {
          throw new MalformedKvEventException(
              "BlockStored.token_ids: bigram id of " + m + " elements", start);
        }
        tokens[i] = r.readInt("BlockStored.token_ids");
        r.skip(FIELD_DEPTH + 2, "BlockStored.token_ids (bigram)");
      } else {
        tokens[i] = r.readInt("BlockStored.token_ids");
      }
    }
    return tokens;
  }
}
