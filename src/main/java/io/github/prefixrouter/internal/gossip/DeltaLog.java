package io.github.prefixrouter.internal.gossip;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/**
 * The most recent deltas of one origin, bounded by the number of block hashes they carry. It
 * covers the versions {@code floor()+1 .. last()}: a replica at any version {@code v} with
 * {@code floor() <= v <= last()} can be brought up to date from it; an older one needs a
 * snapshot. The oldest deltas are dropped first when the bound is passed.
 *
 * <p>Not thread-safe.
 */
final class DeltaLog {

  private final ArrayDeque<Delta> deltas = new ArrayDeque<>();
  private long floor;
  private long last;
  private long hashes;
  private long maxHashes;

  DeltaLog(long maxHashes, long version) {
    this.maxHashes = maxHashes;
    this.floor = version;
    this.last = version;
  }

  long floor() {
    return floor;
  }

  long last() {
    return last;
  }

  long hashCount() {
    return hashes;
  }

  int size() {
    return deltas.size();
  }

  /** Drops everything and restarts the log at {@code version}. */
  void reset(long version) {
    deltas.clear();
    hashes = 0;
    floor = version;
    last = version;
  }

  /** Changes the bound, trimming at once if needed. */
  void setMaxHashes(long maxHashes) {
    this.maxHashes = maxHashes;
    trim();
  }

  /** Appends the delta that follows {@link #last()}. */
  void append(Delta d) {
    if (d.seq() != last + 1) {
      throw new IllegalArgumentException("delta " + d.seq() + " does not follow " + last);
    }
    deltas.addLast(d);
    hashes += d.hashes().length;
    last = d.seq();
    trim();
  }

  private void trim() {
    while (!deltas.isEmpty() && (hashes > maxHashes)) {
      Delta old = deltas.removeFirst();
      hashes -= old.hashes().length;
      floor = old.seq();
    }
  }

  /** True if a replica at {@code version} can be updated from this log. */
  boolean covers(long version) {
    return version >= floor && version <= last;
  }

  /**
   * The deltas after {@code version}, in order, as many as fit in {@code byteBudget} (at least
   * none). Returns {@code null} if the log does not cover {@code version}, or if the very next
   * delta alone is larger than {@code maxSingleDelta} bytes (only a snapshot can help then).
   */
  List<Delta> after(long version, int byteBudget, int maxSingleDelta) {
    if (!covers(version)) {
      return null;
    }
    List<Delta> out = new ArrayList<>();
    if (version == last) {
      return out;
    }
    int used = 0;
    Iterator<Delta> it = deltas.iterator();
    while (it.hasNext()) {
      Delta d = it.next();
      if (d.seq() <= version) {
        continue;
      }
      int size = d.encodedSize();
      if (out.isEmpty() && size > maxSingleDelta) {
        return null;
      }
      if (used + size > byteBudget) {
        break;
      }
      out.add(d);
      used += size;
    }
    return out;
  }

  long retainedBytes() {
    return 64L + 48L * deltas.size() + 8L * hashes;
  }
}
