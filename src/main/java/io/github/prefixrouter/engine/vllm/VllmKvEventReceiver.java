package io.github.prefixrouter.engine.vllm;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.internal.collect.LongLongMap;
import io.github.prefixrouter.spi.CacheEventListener;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Applies vLLM's KV-cache event stream to a {@link CacheEventListener}: the messages of vLLM's
 * ZMQ event publisher ({@code --kv-events-config}), each a sequence number and a msgpack-encoded
 * event batch.
 *
 * <p>Each batch is decoded whole before any of it is applied: {@code BlockStored} becomes
 * {@link CacheEventListener#onBlocksStored}, {@code BlockRemoved}
 * {@link CacheEventListener#onBlocksRemoved}, {@code AllBlocksCleared}
 * {@link CacheEventListener#onAllCleared}, and so does {@code TierBlocksCleared} (a clear of
 * one tier, such as the GPU's: the mirror cannot tell its copies of one tier from another's)
 * unless it names a tier whose copies the mirror never took; events with other tags, and
 * stores and removals naming no block, are skipped. A store whose
 * declared block size differs from this receiver's, or whose token count is not its block count
 * times the block size, cannot be mirrored and is skipped. A store without token ids is how
 * vLLM reports a copy to its CPU offload tier: skipped too, and so are the removals of its
 * {@code medium} (unless a store of that medium was mirrored), which would otherwise take the
 * GPU's copy of the same blocks out of the mirror.
 *
 * <p>A hybrid model's engine (sliding-window or Mamba layers next to full attention) reports
 * each KV-cache group's blocks with the group's index ({@code group_idx}) and, on stores, its
 * kind ({@code kv_cache_spec_kind}). Only groups whose blocks hold the whole prefix (full
 * attention, MLA) are mirrored: a sliding-window group drops a prompt's early blocks while the
 * full-attention group still holds them, and applying its removals would take those blocks,
 * and every block continuing them, out of the mirror. Events of sliding-window, chunked local
 * attention and Mamba groups are skipped ({@link Stats#otherGroupEvents()}). Of a group whose
 * kind was not reported, the receiver applies only removals of copies that group's own stores
 * added, so one group never removes another's blocks.
 *
 * <p>Events naming their group are counted per medium, group and block hash: the copies passed
 * to the listener and not removed since. A group's removal is applied only to copies its own
 * stores added. A store starting a chain ({@code parent_block_hash} nil) whose first
 * blocks that medium and group holds already announces them again: vLLM does so for the blocks
 * a request found in its cache when the request asks for {@code "kv_cache_report_mode":
 * "full"}, and removes each such block once. Those blocks are not passed on as more copies
 * ({@link Stats#reannouncedBlocks()}), only the blocks after them, continuing them. A block
 * vLLM computes again into a block of its own, stored under the same hash, is another copy
 * as long as its store continues a block; as a chain start (a one-block prompt) it is taken
 * as announced again, so the mirror lets it go at the first of its two removals.
 *
 * <p>Whenever the mirror may hold blocks the engine no longer has, the receiver clears it
 * ({@link CacheEventListener#onAllCleared}) before applying the next batch: after lost messages
 * (a sequence number above the one expected), after a publisher restart (one below it, on a
 * live message), and after a malformed batch (its events are lost), including a message
 * numbered outside {@code 0..}{@link #MAX_SEQ}, which no message can follow (the stream then
 * starts over, as after {@link #reset()}, without counting a gap or a restart). A cleared mirror
 * under-reports the engine's cache until new stores arrive, which only costs cache hits; it
 * never claims blocks the engine dropped. One restart sequence numbers cannot show (its first
 * messages lost, exactly as many as were received before it) is covered by {@link #reset()},
 * which the subscriber calls whenever its connection to the publisher breaks.
 *
 * <p>Nothing is thrown at the caller for bad input or a failing listener: malformed batches
 * and listener exceptions and {@link Error}s (an {@link OutOfMemoryError} too, which the tree's
 * engine events throw on once they have repaired the tree: thrown on, it would end the batch,
 * whose later events the subscriber would then never apply) are logged and counted in {@link
 * #stats()}, and the next event is applied (only a null payload, a caller's bug, throws a
 * {@link NullPointerException}, before anything changes).
 * Deterministic: no clock, no threads, no randomness.
 *
 * <p>Thread-safe: every method is synchronized, so batches are applied one at a time and in
 * the order they are passed. The listener is called while the receiver's lock is held.
 */
public final class VllmKvEventReceiver implements KvEventSink {

  private static final Logger LOG = LoggerFactory.getLogger(VllmKvEventReceiver.class);

  private final CacheEventListener listener;
  private final int blockSize;

  /**
   * The largest sequence number a message may carry, 2^63 - 2: the one after it must still be a
   * {@code long}. A message numbered outside {@code 0..MAX_SEQ} is malformed.
   */
  public static final long MAX_SEQ = Long.MAX_VALUE - 1;

  private boolean started;
  private long nextSeq = -1;

  private long batchesApplied;
  private long replayedBatches;
  private long storedEvents;
  private long removedEvents;
  private long clearedEvents;
  private long ignoredEvents;
  private long emptyEvents;
  private long blockSizeMismatches;
  private long tokenCountMismatches;
  private long unattributedStores;
  private long malformedBatches;
  private long gaps;
  private long restarts;
  private long duplicatesIgnored;
  private long resets;
  private long listenerFailures;
  private long unmirroredRemovals;
  private long otherGroupEvents;
  private long trackingOverflows;
  private long reannouncedBlocks;
  /**
   * Media (BlockStored.medium cut to {@link #MAX_KIND_CHARS}, null for none) of stores passed to
   * the listener; at most {@link #MAX_MEDIA}.
   */
  private final Set<String> mirroredMedia = new HashSet<>();
  /**
   * Media of stores skipped for having no token ids (an offload tier's, as vLLM reports it); at
   * most {@link #MAX_MEDIA}.
   */
  private final Set<String> tokenlessMedia = new HashSet<>();
  /**
   * Media remembered in each of the two sets; a medium first seen past it is not (vLLM names
   * two or three: the GPU, the CPU tier, a disk tier).
   */
  static final int MAX_MEDIA = 64;

  /**
   * KV-cache group kinds (vLLM's {@code KVCacheSpecKind}) whose blocks hold a request's whole
   * prefix: a prefix is cached when these blocks are.
   */
  static final Set<String> PREFIX_KINDS =
      Set.of("full_attention", "mla_attention", "sink_full_attention");
  /**
   * Kinds whose blocks do not: a sliding window or a local chunk keeps only the last tokens'
   * blocks, a Mamba group a state at some block boundaries. Their events are skipped.
   */
  static final Set<String> PARTIAL_KINDS = Set.of(
      "sliding_window", "sliding_window_mla", "chunked_local_attention", "mamba");
  /**
   * Groups whose kind is remembered; the kinds of groups past this many are not. Also the most
   * groups whose copies are tracked at once, and the most media and groups whose copies are
   * counted at once: a store of another past it is treated as {@link #MAX_TRACKED_COPIES}
   * passed.
   */
  static final int MAX_GROUPS = 1_024;
  /** Kinds are remembered cut to this many characters (every kind named above is shorter). */
  static final int MAX_KIND_CHARS = 64;
  /**
   * Copies tracked for groups of unknown kind, in all, and copies counted per medium and group,
   * in all; past it the mirror is cleared. A correct engine stays far below (each copy is one
   * of its cached blocks); a publisher that never removes what it stores would otherwise grow
   * the tracking without bound.
   */
  static final long MAX_TRACKED_COPIES = 1L << 21;
  /**
   * The kind of each KV-cache group, as its stores named it; forgotten when the publisher
   * restarts and on {@link #reset()}.
   */
  private final Map<Long, String> groupKinds = new HashMap<>();
  /**
   * For each tracked group (kind unknown when its first store was mirrored), the copies its
   * stores added to the mirror: block hash to count. Emptied whenever the mirror is cleared.
   */
  private final Map<Long, LongLongMap> trackedCopies = new HashMap<>();
  private long trackedTotal;

  /** Where a copy is held: a medium (cut to {@link #MAX_KIND_CHARS}, null for none), a group. */
  private record Holder(String medium, long group) {}

  /**
   * For each medium and KV-cache group named by stores passed to the listener, the copies of
   * each block hash passed on that holder's behalf and not removed since: block hash to count;
   * a holder is listed while it has some. At most {@link #MAX_GROUPS} holders and {@link
   * #MAX_TRACKED_COPIES} copies. Emptied whenever the mirror is cleared.
   */
  private final Map<Holder, LongLongMap> heldCopies = new HashMap<>();
  private long heldTotal;

  /**
   * Counters of what the receiver did since it was created. Events are counted once each,
   * when the listener returned normally from the call they became.
   *
   * @param batchesApplied batches decoded and applied, live or replayed
   * @param replayedBatches of those, batches that came through {@code onReplayed}
   * @param storedEvents {@code BlockStored} events passed to the listener
   * @param removedEvents {@code BlockRemoved} events passed to the listener
   * @param clearedEvents {@code AllBlocksCleared} events, and {@code TierBlocksCleared} events
   *     of a tier the mirror may hold copies of, passed to the listener as a clear (not the
   *     clears the receiver issues itself: at most one per message for its sequence number and
   *     payload, a gap, a restart or a malformed batch; one per {@code reset()}; and one per
   *     {@link #trackingOverflows() tracking overflow}, of which one message may cause several)
   * @param ignoredEvents events with a tag this receiver does not know, skipped
   * @param blockSizeMismatches {@code BlockStored} events whose block size differs from the
   *     receiver's, skipped (vLLM and the node are configured differently)
   * @param tokenCountMismatches {@code BlockStored} events with the right block size whose
   *     token count is not their block count times the block size, skipped
   * @param malformedBatches payloads that did not decode, and messages numbered outside
   *     {@code 0..}{@link VllmKvEventReceiver#MAX_SEQ}; none of their events were applied
   * @param gaps messages whose sequence number was above the one expected (messages lost),
   *     live or replayed
   * @param restarts live messages whose sequence number was below the one expected (the
   *     publisher restarted)
   * @param duplicatesIgnored replayed messages already applied, ignored
   * @param resets calls of {@link VllmKvEventReceiver#reset()}
   * @param listenerFailures listener calls that threw (an exception or an {@link Error})
   * @param unattributedStores {@code BlockStored} events starting a chain ({@code
   *     parent_block_hash} nil) of a LoRA adapter this receiver cannot name (a {@code lora_id}
   *     without a {@code lora_name}, or a name that is no valid {@link CacheScope} adapter),
   *     skipped rather than credited to the base model
   * @param unmirroredRemovals {@code BlockRemoved} events not applied because they name copies
   *     the mirror never took: their medium is one whose stores came without token ids (vLLM's
   *     CPU offload tier) and none of whose stores was mirrored (and {@code TierBlocksCleared}
   *     events of such a medium, not applied either); or removals of a KV-cache group naming
   *     no copy that group's stores added (of that medium, for a group whose kind is known)
   * @param otherGroupEvents {@code BlockStored} and {@code BlockRemoved} events of a KV-cache
   *     group whose blocks do not hold the whole prefix (sliding window, chunked local
   *     attention, Mamba: a hybrid model's), skipped
   * @param trackingOverflows times the copies tracked for KV-cache groups of unknown kind, or
   *     those counted per medium and group, exceeded {@link
   *     VllmKvEventReceiver#MAX_TRACKED_COPIES}, or a store came for a group (or a medium and
   *     group) past {@link VllmKvEventReceiver#MAX_GROUPS} of them, and the mirror was cleared
   * @param emptyEvents {@code BlockStored} and {@code BlockRemoved} events naming no block,
   *     skipped: they change nothing the mirror holds (those of a group counted in {@code
   *     otherGroupEvents} are counted there)
   * @param reannouncedBlocks blocks of {@code BlockStored} events starting a chain ({@code
   *     parent_block_hash} nil) of a KV-cache group, leading blocks the receiver had already
   *     passed on for that medium and group, not removed since: announced again (vLLM's full
   *     report mode), not passed on as more copies
   */
  public record Stats(
      long batchesApplied,
      long replayedBatches,
      long storedEvents,
      long removedEvents,
      long clearedEvents,
      long ignoredEvents,
      long blockSizeMismatches,
      long tokenCountMismatches,
      long malformedBatches,
      long gaps,
      long restarts,
      long duplicatesIgnored,
      long resets,
      long listenerFailures,
      long unattributedStores,
      long unmirroredRemovals,
      long otherGroupEvents,
      long trackingOverflows,
      long emptyEvents,
      long reannouncedBlocks) {}

  /**
   * A receiver applying events to {@code listener}.
   *
   * @param listener where decoded events go (the node's cache-event listener)
   * @param blockSize the node's block size in tokens; vLLM must use the same
   * @throws IllegalArgumentException if {@code blockSize} is not positive
   */
  public VllmKvEventReceiver(CacheEventListener listener, int blockSize) {
    this.listener = Objects.requireNonNull(listener, "listener");
    if (blockSize <= 0) {
      throw new IllegalArgumentException("blockSize must be positive, was " + blockSize);
    }
    this.blockSize = blockSize;
  }

  /**
   * The sequence number expected next: one past the last message applied (or dropped as
   * malformed), or {@code -1} before the first message (and after one numbered outside
   * {@code 0..}{@link #MAX_SEQ}): never above {@code MAX_SEQ}.
   */
  @Override
  public synchronized long nextSeq() {
    return started ? nextSeq : -1;
  }

  /**
   * Applies a message received live. The first message is applied as it is; after that, a
   * sequence number above {@link #nextSeq()} clears the listener first (messages were lost:
   * counted in {@link Stats#gaps()}), one below it clears it too (the publisher restarted with
   * an empty cache: {@link Stats#restarts()}) and forgets the KV-cache groups' kinds. Either way the batch is then applied and
   * {@code nextSeq()} becomes {@code seq + 1}. A malformed payload clears the listener, is
   * counted and applies nothing. So does a sequence number outside {@code 0..}{@link #MAX_SEQ}
   * (negative, or one whose successor would wrap), counted in {@link Stats#malformedBatches()};
   * the stream then starts over: {@code nextSeq()} is -1 and the next message counts as the
   * first.
   *
   * @param seq the message's sequence number (its second frame)
   * @param payload the message's msgpack payload (its third frame); not modified
   */
  @Override
  public synchronized void onMessage(long seq, byte[] payload) {
    Objects.requireNonNull(payload, "payload");
    if (cannotFollow(seq, payload)) {
      return;
    }
    boolean clear = false;
    if (started && seq > nextSeq) {
      gaps++;
      clear = true;
      if (logNow(gaps)) {
        LOG.warn("KV events {}..{} were lost; clearing the mirror of the engine's cache ({} "
            + "gaps so far)", nextSeq, seq - 1, gaps);
      } else {
        LOG.debug("KV events {}..{} were lost", nextSeq, seq - 1);
      }
    } else if (started && seq < nextSeq) {
      restarts++;
      clear = true;
      forgetEngine(); // another engine, perhaps configured otherwise
      if (logNow(restarts)) {
        LOG.warn("KV-event sequence went back from {} to {}: the publisher restarted; "
            + "clearing the mirror of the engine's cache ({} restarts so far)", nextSeq - 1, seq,
            restarts);
      } else {
        LOG.debug("KV-event sequence went back from {} to {}", nextSeq - 1, seq);
      }
    }
    receive(seq, payload, clear, false);
  }

  /**
   * Applies a message received from the publisher's replay endpoint. One already applied
   * ({@code seq < nextSeq()}) is ignored and counted in {@link Stats#duplicatesIgnored()}; one
   * above {@code nextSeq()} means the replay itself misses messages: the listener is cleared
   * first (counted in {@link Stats#gaps()}). Otherwise, and for a sequence number outside
   * {@code 0..}{@link #MAX_SEQ}, as {@link #onMessage}. vLLM ends a replay with a marker
   * numbered -1 with an empty payload, which is not a message: a caller stops there and does
   * not pass it here, where it would be dropped as malformed and clear the listener.
   *
   * @param seq the message's sequence number
   * @param payload the message's msgpack payload; not modified
   */
  @Override
  public synchronized void onReplayed(long seq, byte[] payload) {
    Objects.requireNonNull(payload, "payload");
    if (cannotFollow(seq, payload)) {
      return;
    }
    boolean clear = false;
    if (started && seq < nextSeq) {
      duplicatesIgnored++;
      return;
    }
    if (started && seq > nextSeq) {
      gaps++;
      clear = true;
      if (logNow(gaps)) {
        LOG.warn("KV events {}..{} are missing from the replay; clearing the mirror of the "
            + "engine's cache ({} gaps so far)", nextSeq, seq - 1, gaps);
      } else {
        LOG.debug("KV events {}..{} are missing from the replay", nextSeq, seq - 1);
      }
    }
    receive(seq, payload, clear, true);
  }

  /**
   * Forgets the stream: clears the listener (counted in {@link Stats#resets()}) and takes the
   * next message, live or replayed, as the first. Call it when the connection to the publisher
   * is lost (the subscriber does, at once: the messages published until it reconnects are
   * lost too). Sequence numbers alone cannot show every restart: a publisher
   * that restarted (with an empty cache) and whose first messages were lost, exactly as many as
   * the node had received before, continues at the very number expected. The KV-cache
   * groups' kinds learned so far are forgotten too, as on a restart the sequence numbers show:
   * the engine that follows may be another, with other groups. So are the media it named, and
   * whether each carried token ids.
   */
  @Override
  public synchronized void reset() {
    resets++;
    started = false;
    nextSeq = -1;
    forgetEngine();
    clearListener();
  }

  /**
   * Forgets what was learned of the engine's configuration: the kinds of its KV-cache groups
   * and the media it named (one that carried token ids may carry none in the engine that
   * follows, whose removals must then not take the GPU's copies out of the mirror).
   */
  private void forgetEngine() {
    groupKinds.clear();
    mirroredMedia.clear();
    tokenlessMedia.clear();
  }

  /**
   * The counters so far.
   *
   * @return a snapshot of the counters, consistent with each other (taken under the lock)
   */
  public synchronized Stats stats() {
    return new Stats(
        batchesApplied,
        replayedBatches,
        storedEvents,
        removedEvents,
        clearedEvents,
        ignoredEvents,
        blockSizeMismatches,
        tokenCountMismatches,
        malformedBatches,
        gaps,
        restarts,
        duplicatesIgnored,
        resets,
        listenerFailures,
        unattributedStores,
        unmirroredRemovals,
        otherGroupEvents,
        trackingOverflows,
        emptyEvents,
        reannouncedBlocks);
  }

  /**
   * True if no message can follow {@code seq}: a negative number, or {@link #MAX_SEQ} + 1
   * ({@code Long.MAX_VALUE}), after which the next number would wrap to a negative one. Such a
   * message is dropped as malformed (its events are lost): the listener is cleared and the
   * stream starts over, the next message counting as the first (no gap, no restart).
   */
  private boolean cannotFollow(long seq, byte[] payload) {
    if (seq >= 0 && seq <= MAX_SEQ) {
      return false;
    }
    malformedBatches++;
    if (logNow(malformedBatches)) {
      LOG.warn("KV-event message {} ({} bytes) has a sequence number outside 0..{}, which no "
          + "message can follow; dropped, clearing the mirror of the engine's cache and starting "
          + "the stream over ({} malformed so far)", seq, payload.length, MAX_SEQ,
          malformedBatches);
    } else {
      LOG.debug("KV-event message {} has a sequence number no message can follow", seq);
    }
    started = false;
    nextSeq = -1;
    clearListener();
    return true;
  }

  private void clearListener() {
    forgetCopies();
    try {
      listener.onAllCleared();
    } catch (Throwable e) {
      listenerFailed("clear", e);
    }
  }

  private void receive(long seq, byte[] payload, boolean clear, boolean replayed) {
    List<KvEvent> events;
    try {
      events = KvEventDecoder.decode(payload);
    } catch (MalformedKvEventException e) {
      malformedBatches++;
      if (logNow(malformedBatches)) {
        LOG.warn("KV-event batch {} ({} bytes) is malformed, dropped; clearing the mirror of the "
            + "engine's cache ({} malformed so far): {}", seq, payload.length, malformedBatches,
            e.getMessage());
      } else {
        LOG.debug("KV-event batch {} is malformed: {}", seq, e.getMessage());
      }
      events = null;
      clear = true;
    }
    started = true;
    nextSeq = seq + 1;
    if (clear) {
      clearListener();
    }
    if (events == null) {
      return;
    }
    batchesApplied++;
    if (replayed) {
      replayedBatches++;
    }
    for (KvEvent event : events) {
      try {
        apply(event);
      } catch (Throwable e) {
        listenerFailed(event.getClass().getSimpleName(), e);
      }
    }
  }

  /**
   * The cache scope of a store: a chain's continuation is in its parent's scope (the listener
   * ignores the one passed); a chain's first blocks are in the scope of their {@code lora_name},
   * or the default scope without LoRA fields; null when an adapter is named by id only (or by
   * a name that is no valid adapter name), which cannot be attributed. vLLM's events do not name
   * the cache salt: salted chains are reported under their adapter (or the base model).
   */
  private static CacheScope scopeOf(KvEvent.Stored s) {
    if (s.parent() != CacheEventListener.NO_PARENT) {
      return CacheScope.DEFAULT;
    }
    if (s.loraName() != null && !s.loraName().isEmpty()) {
      try {
        return CacheScope.adapter(s.loraName());
      } catch (IllegalArgumentException e) {
        return null;
      }
    }
    return s.loraId() == null ? CacheScope.DEFAULT : null;
  }

  private void apply(KvEvent event) {
    if (event instanceof KvEvent.Stored s) {
      if (s.group() != null && s.groupKind() != null) {
        learnKind(s.group(), s.groupKind());
      }
      if (s.tokens().length == 0 && s.hashes().length > 0) {
        // how vLLM reports a copy to its CPU offload tier (whatever that tier's block size):
        // nothing to mirror, and the removals of that medium name copies the mirror never took
        remember(tokenlessMedia, s.medium());
        if (tokenCountMismatches++ == 0) {
          LOG.warn("skipped a BlockStored of {} blocks without token ids (medium {}): an "
              + "offload tier's copies are not mirrored, nor are removals of that medium",
              s.hashes().length, s.medium());
        }
      } else if (s.group() != null && isPartial(s.group())) {
        otherGroupEvents++;
      } else if (s.blockSize() != blockSize) {
        if (blockSizeMismatches++ == 0) {
          LOG.error("vLLM reports blocks of {} tokens{}, this node is configured for {}: its "
              + "stores cannot be mirrored and are skipped; configure the same block size on "
              + "both", s.blockSize(), s.group() == null ? ""
                  : " in KV-cache group " + s.group() + " (kind " + s.groupKind() + ")",
              blockSize);
        } else {
          LOG.debug("skipped a BlockStored of block size {} (node: {})", s.blockSize(),
              blockSize);
        }
      } else if (s.tokens().length != (long) s.hashes().length * blockSize) {
        if (tokenCountMismatches++ == 0) {
          LOG.warn("skipped a BlockStored of {} blocks with {} tokens (block size {})",
              s.hashes().length, s.tokens().length, blockSize);
        }
      } else {
        CacheScope scope = scopeOf(s);
        if (scope == null) {
          if (unattributedStores++ == 0) {
            LOG.warn("skipped a BlockStored starting a chain of LoRA adapter id {} named {}: "
                + "its blocks cannot be attributed to an adapter, nor to the base model "
                + "(counted in unattributedStores)", s.loraId(), s.loraName());
          }
          return;
        }
        remember(mirroredMedia, s.medium());
        Holder holder = s.group() == null ? null : new Holder(cut(s.medium()), s.group());
        long parent = s.parent();
        long[] hashes = s.hashes();
        int[] tokens = s.tokens();
        int known = holder == null || parent != CacheEventListener.NO_PARENT ? 0
            : reannounced(holder, hashes);
        if (known > 0) {
          // vLLM's full report mode announces the blocks a request found in its cache again,
          // from the prompt's first block on: the same blocks, each removed once
          reannouncedBlocks += known;
          if (known == hashes.length) {
            return;
          }
          parent = hashes[known - 1];
          hashes = Arrays.copyOfRange(hashes, known, hashes.length);
          tokens = Arrays.copyOfRange(tokens, known * blockSize, tokens.length);
        }
        boolean tracked = s.group() != null && isTracked(s.group());
        listener.onBlocksStored(scope, parent, hashes, tokens);
        storedEvents++;
        boolean overflow = tracked && !track(s.group(), hashes);
        if (holder != null && !overflow) {
          overflow = !hold(holder, hashes, s.parent() == CacheEventListener.NO_PARENT);
        }
        if (overflow) {
          trackingOverflow();
        }
      }
    } else if (event instanceof KvEvent.Removed r) {
      String medium = cut(r.medium());
      if (tokenlessMedia.contains(medium) && !mirroredMedia.contains(medium)) {
        // removing them would take out the GPU's copy of the same hashes, and every block
        // continuing them, while the GPU still holds them
        unmirroredRemovals++;
        return;
      }
      long[] hashes = r.hashes();
      if (r.group() != null && isPartial(r.group())) {
        otherGroupEvents++;
        return;
      }
      if (r.group() != null) {
        // a group removes only copies its own stores added: with its kind unknown, those it
        // may have stored for another group's blocks; else, blocks it stored before this
        // receiver saw it, or a copy announced again and taken as the same block
        Holder holder = new Holder(medium, r.group());
        hashes = isTracked(r.group())
            ? release(holder, untrack(r.group(), hashes), false)
            : release(holder, hashes, true);
        if (hashes.length == 0) {
          unmirroredRemovals++;
          return;
        }
      }
      listener.onBlocksRemoved(hashes);
      removedEvents++;
    } else if (event instanceof KvEvent.Cleared) {
      forgetCopies();
      listener.onAllCleared();
      clearedEvents++;
    } else if (event instanceof KvEvent.TierCleared t) {
      String medium = cut(t.medium());
      if (tokenlessMedia.contains(medium) && !mirroredMedia.contains(medium)) {
        // a tier whose copies the mirror never took (vLLM's CPU offload tier)
        unmirroredRemovals++;
        return;
      }
      // the mirror does not know which of its copies are of that tier: it is cleared whole,
      // which can only make it under-report
      forgetCopies();
      listener.onAllCleared();
      clearedEvents++;
    } else if (event instanceof KvEvent.NoBlocks e) {
      // nothing to apply; a store's kind still counts (vLLM sends a sliding-window group's
      // store naming no block when all its new blocks left the window)
      if (e.group() != null && e.groupKind() != null) {
        learnKind(e.group(), e.groupKind());
      }
      if (e.group() != null && isPartial(e.group())) {
        otherGroupEvents++;
      } else {
        emptyEvents++;
      }
    } else {
      String tag = ((KvEvent.Unknown) event).tag();
      if (ignoredEvents++ == 0) {
        LOG.warn("skipping KV events tagged \"{}\", unknown to this version",
            tag.length() > 64 ? tag.substring(0, 64) + "..." : tag);
      }
    }
  }

  /** Whether the events of {@code group} are skipped: its kind is one of {@link #PARTIAL_KINDS}. */
  private boolean isPartial(long group) {
    String kind = groupKinds.get(group);
    return kind != null && PARTIAL_KINDS.contains(kind);
  }

  /**
   * Whether {@code group}'s removals apply only to the copies its own stores added: its kind is
   * unknown (not reported, or no kind this receiver knows), or it was when the group's copies
   * began to be tracked (until the mirror is next cleared; a group whose last tracked copy went
   * while its kind was still unknown starts afresh).
   */
  private boolean isTracked(long group) {
    String kind = groupKinds.get(group);
    return kind == null || !PREFIX_KINDS.contains(kind) || trackedCopies.containsKey(group);
  }

  /** {@code text} cut to {@link #MAX_KIND_CHARS} characters; null stays null. */
  private static String cut(String text) {
    return text == null || text.length() <= MAX_KIND_CHARS
        ? text : text.substring(0, MAX_KIND_CHARS);
  }

  /** Adds {@code medium}, cut, to {@code media} unless that holds {@link #MAX_MEDIA} already. */
  private static void remember(Set<String> media, String medium) {
    String m = cut(medium);
    if (media.size() < MAX_MEDIA || media.contains(m)) {
      media.add(m);
    }
  }

  /** Remembers the kind of {@code group}; a group found to be partial gives its copies back. */
  private void learnKind(long group, String kind) {
    String k = cut(kind);
    String before = groupKinds.get(group);
    if (k.equals(before) || (before == null && groupKinds.size() >= MAX_GROUPS)) {
      return;
    }
    groupKinds.put(group, k);
    if (PARTIAL_KINDS.contains(k)) {
      heldCopies.entrySet().removeIf(e -> {
        boolean mine = e.getKey().group() == group;
        if (mine) {
          heldTotal -= count(e.getValue());
        }
        return mine;
      });
      LOG.info("KV-cache group {} holds {} layers: its events are skipped, the mirror follows "
          + "the full-attention groups", group, k);
      LongLongMap copies = trackedCopies.remove(group);
      if (copies != null && copies.size() > 0) {
        // the copies this group's stores added while its kind was unknown
        long[] withdrawn = new long[Math.toIntExact(count(copies))];
        int[] at = {0};
        copies.forEach((hash, n) -> {
          for (long i = 0; i < n; i++) {
            withdrawn[at[0]++] = hash;
          }
        });
        trackedTotal -= withdrawn.length;
        listener.onBlocksRemoved(withdrawn);
      }
    } else if (!PREFIX_KINDS.contains(k) && before == null) {
      LOG.warn("KV-cache group {} reports kind \"{}\", unknown to this version: its removals "
          + "apply only to blocks its own stores added", group, k);
    }
  }

  private static long count(LongLongMap copies) {
    long[] total = {0};
    copies.forEach((hash, n) -> total[0] += n);
    return total[0];
  }

  /**
   * The copy counts of {@code key} in {@code counts}, made if it has none; null if it has none
   * and {@code counts} has {@link #MAX_GROUPS} keys already.
   */
  private static <K> LongLongMap copiesOf(Map<K, LongLongMap> counts, K key) {
    LongLongMap copies = counts.get(key);
    if (copies == null && counts.size() < MAX_GROUPS) {
      copies = new LongLongMap();
      counts.put(key, copies);
    }
    return copies;
  }

  /**
   * Counts a copy of each of {@code hashes} as added by {@code group}'s stores; false if that
   * passed {@link #MAX_TRACKED_COPIES}, or the group would be one past {@link #MAX_GROUPS}
   * (then nothing is counted): the caller clears the mirror.
   */
  private boolean track(long group, long[] hashes) {
    LongLongMap copies = copiesOf(trackedCopies, group);
    if (copies == null) {
      return false;
    }
    for (long h : hashes) {
      long n = copies.get(h);
      copies.put(h, n == LongLongMap.ABSENT ? 1 : n + 1);
    }
    trackedTotal += hashes.length;
    return trackedTotal <= MAX_TRACKED_COPIES;
  }

  /**
   * How many of {@code hashes}, from the first on, {@code holder} holds already: a chain
   * start naming them announces them again (vLLM does, for the blocks a request found, in its
   * full report mode).
   */
  private int reannounced(Holder holder, long[] hashes) {
    LongLongMap copies = heldCopies.get(holder);
    int n = 0;
    while (copies != null && n < hashes.length && copies.get(hashes[n]) != LongLongMap.ABSENT) {
      n++;
    }
    return n;
  }

  /**
   * Counts a copy of each of {@code hashes} as held by {@code holder}, passed to the listener;
   * of a chain start ({@code chainStart}), one the holder holds already is taken as announced
   * again, not counted (it continues a block the holder did not hold, so the listener, which
   * did not hold that block either, took it as new). False if the copies passed {@link
   * #MAX_TRACKED_COPIES}, or the holder would be one past {@link #MAX_GROUPS} (then nothing is
   * counted): the caller clears the mirror.
   */
  private boolean hold(Holder holder, long[] hashes, boolean chainStart) {
    LongLongMap copies = copiesOf(heldCopies, holder);
    if (copies == null) {
      return false;
    }
    for (long h : hashes) {
      long n = copies.get(h);
      if (n == LongLongMap.ABSENT) {
        copies.put(h, 1);
      } else if (!chainStart) {
        copies.put(h, n + 1);
      } else {
        continue;
      }
      heldTotal++;
    }
    return heldTotal <= MAX_TRACKED_COPIES;
  }

  /**
   * Takes one copy of each of {@code hashes} off {@code holder}'s count. Returns those that had
   * one, in order, if {@code onlyHeld}; else all of {@code hashes}.
   */
  private long[] release(Holder holder, long[] hashes, boolean onlyHeld) {
    LongLongMap copies = heldCopies.get(holder);
    if (copies == null) {
      return onlyHeld ? new long[0] : hashes;
    }
    long[] held = takeOneCopyEach(copies, hashes);
    heldTotal -= held.length;
    if (copies.size() == 0) {
      heldCopies.remove(holder);
    }
    return onlyHeld ? held : hashes;
  }

  /**
   * Takes one copy of each of {@code hashes} off {@code copies}; returns those that had one,
   * in order ({@code hashes} itself if all had).
   */
  private static long[] takeOneCopyEach(LongLongMap copies, long[] hashes) {
    long[] taken = new long[hashes.length];
    int n = 0;
    for (long h : hashes) {
      long c = copies.get(h);
      if (c == LongLongMap.ABSENT) {
        continue;
      }
      if (c == 1) {
        copies.remove(h);
      } else {
        copies.put(h, c - 1);
      }
      taken[n++] = h;
    }
    return n == hashes.length ? hashes : Arrays.copyOf(taken, n);
  }

  /** The copies counted passed their bounds: counted, logged, and the mirror is cleared. */
  private void trackingOverflow() {
    trackingOverflows++;
    if (logNow(trackingOverflows)) {
      LOG.warn("over {} block copies, or copies of over {} KV-cache groups, counted: the "
          + "engine stores blocks whose removals do not arrive; clearing the mirror of the "
          + "engine's cache ({} times so far)", MAX_TRACKED_COPIES, MAX_GROUPS,
          trackingOverflows);
    }
    forgetCopies();
    listener.onAllCleared();
  }

  /**
   * Takes one copy of each of {@code hashes} off {@code group}'s count; returns those that had
   * one (the removals to apply), in order.
   */
  private long[] untrack(long group, long[] hashes) {
    LongLongMap copies = trackedCopies.get(group);
    if (copies == null) {
      return new long[0];
    }
    long[] applied = takeOneCopyEach(copies, hashes);
    trackedTotal -= applied.length;
    String kind = groupKinds.get(group);
    if (copies.size() == 0 && (kind == null || !PREFIX_KINDS.contains(kind))) {
      // a group of unknown kind is tracked whether listed or not; one whose kind became known
      // stays listed, so that it is tracked until the mirror is next cleared
      trackedCopies.remove(group);
    }
    return applied;
  }

  /** Groups whose copies are tracked now (for tests: at most {@link #MAX_GROUPS}). */
  int trackedGroups() {
    return trackedCopies.size();
  }

  /** Media remembered, in both sets (for tests: at most twice {@link #MAX_MEDIA}). */
  int rememberedMedia() {
    return mirroredMedia.size() + tokenlessMedia.size();
  }

  /** Holders of copies counted now (for tests: at most {@link #MAX_GROUPS}). */
  int holders() {
    return heldCopies.size();
  }

  /** Forgets the tracked and held copies: the mirror is being cleared. */
  private void forgetCopies() {
    heldCopies.clear();
    heldTotal = 0;
    trackedCopies.clear();
    trackedTotal = 0;
  }

  private void listenerFailed(String call, Throwable e) {
    listenerFailures++;
    if (logNow(listenerFailures)) {
      LOG.warn("cache event listener failed on {} ({} failures so far)", call, listenerFailures,
          e);
    } else {
      LOG.debug("cache event listener failed on {}", call, e);
    }
  }

  /**
   * Whether the {@code count}-th occurrence of a repeated problem is logged at warn level: the
   * 1st, 2nd, 4th, 8th... (the others at debug), so a stream of bad input cannot flood the log.
   */
  static boolean logNow(long count) {
    return Long.bitCount(count) == 1;
  }
}
