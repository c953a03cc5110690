package io.github.prefixrouter.internal.gossip;

import io.github.prefixrouter.internal.collect.LongHashSet;
import io.github.prefixrouter.internal.collect.LongLongMap;
import io.github.prefixrouter.internal.tree.BlockEventListener;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

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
 * <p>What it publishes are {@link BlockFingerprint}s: a fingerprint is stored when the first of
 * this node's blocks with that fingerprint is stored and evicted when the last one is evicted
 * (distinct blocks rarely share one; the few that do are counted aside), so the published set
 * is exactly the set of fingerprints of the blocks held. Each fingerprint published as stored
 * gets the next store number of the generation, and its eviction names it by that number (see
 * {@link Delta}).
 *
 * <p>Thread-safe: event methods and readers synchronize on this object; they are short.
 */
public final class LocalSummary implements BlockEventListener {

  /** Under this. */
  private long generation;
  private final int maxHashesPerDelta;
  private final LongHashSet blocks = new LongHashSet();
  /** Published fingerprint -> its store number (see {@link Delta}). */
  private final LongLongMap published = new LongLongMap();
  /** For the rare fingerprints shared by several held blocks: how many blocks beyond the first. */
  private final Map<Long, Integer> sharedFingerprints = new HashMap<>();
  private final DeltaLog log;
  private long version;
  /** Store numbers handed out in this generation (the last one). */
  private long stores;

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

  public synchronized long generation() {
    return generation;
  }

  /**
   * Continues as generation {@code g} with the same set, when peers know this node by a higher
   * generation than its own: the delta log restarts at the current version, so that a replica of
   * the new generation (which starts empty at version 0) gets the set as a snapshot.
   *
   * @param g the new generation, above the current one
   */
  synchronized void newGeneration(long g) {
    if (g <= generation) {
      throw new IllegalArgumentException(
          "generation " + g + " is not above the current " + generation);
    }
    generation = g;
    log.reset(version);
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
    published.clear();
    sharedFingerprints.clear();
    log.append(new Delta(++version, Delta.CLEAR, Delta.NO_HASHES));
  }

  private void record(int op, long[] hashes) {
    if (hashes == null) {
      throw new NullPointerException("blockHashes");
    }
    long[] changed = new long[Math.min(hashes.length, maxHashesPerDelta)];
    int n = 0;
    for (long h : hashes) {
      long item;
      if (op == Delta.STORE) {
        item = blocks.add(h) && addFingerprint(h) ? BlockFingerprint.of(h) : -1;
      } else {
        item = blocks.remove(h) ? removeFingerprint(h) : -1; // the store number, or -1
      }
      if (item >= 0) {
        changed[n++] = item;
        if (n == changed.length) {
          append(op, changed);
          changed = new long[Math.min(hashes.length, maxHashesPerDelta)];
          n = 0;
        }
      }
    }
    if (n > 0) {
      append(op, Arrays.copyOf(changed, n));
    }
  }

  private void append(int op, long[] items) {
    if (op == Delta.EVICT) {
      Arrays.sort(items); // store numbers, ascending on the wire
    }
    log.append(new Delta(++version, op, items));
  }

  /**
   * True if the fingerprint of newly held block {@code h} was not published yet (it then gets
   * the next store number).
   */
  private boolean addFingerprint(long h) {
    long f = BlockFingerprint.of(h);
    if (published.get(f) == LongLongMap.ABSENT) {
      published.put(f, ++stores);
      return true;
    }
    sharedFingerprints.merge(f, 1, Integer::sum);
    return false;
  }

  /**
   * The store number of the fingerprint of just-evicted block {@code h} if no held block is
   * left with it (it is unpublished), else -1.
   */
  private long removeFingerprint(long h) {
    long f = BlockFingerprint.of(h);
    Integer extra = sharedFingerprints.get(f);
    if (extra != null) {
      if (extra == 1) {
        sharedFingerprints.remove(f);
      } else {
        sharedFingerprints.put(f, extra - 1);
      }
      return -1;
    }
    long store = published.remove(f);
    return store == LongLongMap.ABSENT ? -1 : store;
  }

  /**
   * Moves the version past {@code claimed} without changing the set: the next version is
   * {@code claimed + 1} and the delta log restarts there, so every replica below it (a replica
   * a peer pushed past this node's real version with deltas it never made, included) is brought
   * up to date by a snapshot. Does nothing unless {@code claimed} is at least the version.
   *
   * @return the new version
   */
  synchronized long versionAbove(long claimed) {
    if (claimed >= version) {
      version = claimed + 1;
      log.reset(version);
    }
    return version;
  }

  /** Number of distinct fingerprints published (the size of a peer's replica). */
  public synchronized int fingerprintCount() {
    return published.size();
  }

  /** The last store number handed out in this generation (0 before any). */
  public synchronized long storeCount() {
    return stores;
  }

  /**
   * The current set of fingerprints with their store numbers, ascending by store number, and
   * the version it is at.
   */
  synchronized Snapshot snapshot() {
    int n = published.size();
    long[] pairs = new long[2 * n];
    int[] k = {0};
    published.forEach((f, s) -> {
      pairs[k[0]++] = s;
      pairs[k[0]++] = f;
    });
    Integer[] order = new Integer[n];
    for (int i = 0; i < n; i++) {
      order[i] = i;
    }
    Arrays.sort(order, (a, b) -> Long.compare(pairs[2 * a], pairs[2 * b]));
    long[] storeNumbers = new long[n];
    long[] fps = new long[n];
    for (int i = 0; i < n; i++) {
      storeNumbers[i] = pairs[2 * order[i]];
      fps[i] = pairs[2 * order[i] + 1];
    }
    return new Snapshot(version, stores, storeNumbers, fps);
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
    return blocks.retainedBytes() + published.retainedBytes() + 64L * sharedFingerprints.size()
        + log.retainedBytes();
  }

  /**
   * An origin's full set at one version: its fingerprints ({@code hashes}) with their store
   * numbers ({@code stores}, ascending, parallel), and the last store number handed out.
   */
  record Snapshot(long version, long storeCount, long[] stores, long[] hashes) {}
}
