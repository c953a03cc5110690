package io.github.prefixrouter.internal.gossip;

import io.github.prefixrouter.internal.tree.BlockEventListener;
import java.util.Arrays;
import java.util.List;

/**
 * The versioned summary of this node's own cache: the exact set of block hashes the local
 * engine holds, a sequence number bumped by every change, and a bounded log of the recent
 * changes that peers catch up from.
 *
 * <p>It is the local tree's {@link BlockEventListener} and receives its block events ({@link #onStored}, {@link #onEvicted},
 * {@link #onCleared}). Events are applied with set semantics: a stored block already present
 * or an evicted block absent changes nothing and bumps no sequence number. A batch larger than
 * {@code maxHashesPerDelta} is split into several deltas so every delta fits in one message.
 * Version 0 is the empty set at the start of the generation.
 *
 * <p>Thread-safe: event methods and readers synchronize on this object; they are short.
 */
public final class LocalSummary implements BlockEventListener {

  private final long generation;
  private final int maxHashesPerDelta;
  private final LongHashSet blocks = new LongHashSet();
  private final DeltaLog log;
  private long version;

  /**
   * @param generation this node's generation (from its builder)
   * @param maxLogHashes the most block hashes the delta log retains
   * @param maxHashesPerDelta the most hashes one delta carries
   */
  LocalSummary(long generation, long maxLogHashes, int maxHashesPerDelta) {
    if (maxHashesPerDelta < 1) {
      throw new IllegalArgumentException("maxHashesPerDelta must be >= 1");
    }
    this.generation = generation;
    this.maxHashesPerDelta = maxHashesPerDelta;
    this.log = new DeltaLog(maxLogHashes, 0);
  }

  public long generation() {
    return generation;
  }

  /** The sequence number of the last change (0 before any). */
  public synchronized long version() {
    return version;
  }

  /** Number of block hashes held now. */
  public synchronized int size() {
    return blocks.size();
  }

  public synchronized boolean contains(long blockHash) {
    return blocks.contains(blockHash);
  }

  /** Blocks the engine stored. */
  @Override
  public synchronized void onStored(long[] blockHashes) {
    record(Delta.STORE, blockHashes);
  }

  /** Blocks the engine evicted. */
  @Override
  public synchronized void onEvicted(long[] blockHashes) {
    record(Delta.EVICT, blockHashes);
  }

  /** The engine dropped its whole cache. */
  @Override
  public synchronized void onCleared() {
    if (blocks.size() == 0) {
      return;
    }
    blocks.clear();
    log.append(new Delta(++version, Delta.CLEAR, Delta.NO_HASHES));
  }

  private void record(int op, long[] hashes) {
    if (hashes == null) {
      throw new NullPointerException("blockHashes");
    }
    long[] changed = new long[Math.min(hashes.length, maxHashesPerDelta)];
    int n = 0;
    for (long h : hashes) {
      boolean change = op == Delta.STORE ? blocks.add(h) : blocks.remove(h);
      if (change) {
        changed[n++] = h;
        if (n == changed.length) {
          log.append(new Delta(++version, op, changed));
          changed = new long[Math.min(hashes.length, maxHashesPerDelta)];
          n = 0;
        }
      }
    }
    if (n > 0) {
      log.append(new Delta(++version, op, Arrays.copyOf(changed, n)));
    }
  }

  /** The current set and the version it is at. */
  synchronized Snapshot snapshot() {
    return new Snapshot(version, blocks.toArray());
  }

  /** See {@link DeltaLog#after}. */
  synchronized List<Delta> deltasAfter(long fromVersion, int byteBudget, int maxSingleDelta) {
    return log.after(fromVersion, byteBudget, maxSingleDelta);
  }

  /** True if the delta log can bring a replica at {@code v} up to date. */
  synchronized boolean logCovers(long v) {
    return log.covers(v);
  }

  synchronized long retainedBytes() {
    return blocks.retainedBytes() + log.retainedBytes();
  }

  /** An origin's full set at one version. */
  record Snapshot(long version, long[] hashes) {}
}
