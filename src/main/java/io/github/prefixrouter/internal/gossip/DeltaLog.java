package io.github.prefixrouter.internal.gossip;

import java.util.ArrayList;
import java.util.List;

/**
 * The most recent deltas of one origin, bounded by the number of block hashes they carry. It
 * covers the versions {@code floor()+1 .. last()}: a replica at any version {@code v} with
 * {@code floor() <= v <= last()} can be brought up to date from it; an older one needs a
 * snapshot. The oldest deltas are dropped first when the bound is passed. A delta without
 * hashes (a CLEAR, one byte on the wire) counts as one hash toward the bound, so that a stream
 * of them cannot grow the log without limit.
 *
 * <p>Deltas carry consecutive sequence numbers, so they sit in a ring buffer where the delta
 * following version {@code v} is found by index ({@code v - floor()}) in O(1): answering a peer
 * costs only the deltas sent, not the length of the retained log.
 *
 * <p>Not thread-safe.
 */
final class DeltaLog {

  private Delta[] ring = new Delta[16];
  private int head; // index of the oldest delta
  private int count;
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

  /** The hashes held, a delta without hashes counting as one (what the bound limits). */
  long hashCount() {
    return hashes;
  }

  /** What a delta counts toward the bound: its hashes, and at least one. */
  private static long weight(Delta d) {
    return Math.max(1, d.hashes().length);
  }

  int size() {
    return count;
  }

  private Delta get(int i) {
    return ring[(head + i) & (ring.length - 1)];
  }

  /** Drops everything and restarts the log at {@code version}. */
  void reset(long version) {
    java.util.Arrays.fill(ring, null);
    head = 0;
    count = 0;
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
    if (count == ring.length) {
      Delta[] bigger = new Delta[ring.length * 2];
      for (int i = 0; i < count; i++) {
        bigger[i] = get(i);
      }
      ring = bigger;
      head = 0;
    }
    ring[(head + count) & (ring.length - 1)] = d;
    count++;
    hashes += weight(d);
    last = d.seq();
    trim();
  }

  private void trim() {
    while (count > 0 && (hashes > maxHashes)) {
      Delta old = ring[head];
      ring[head] = null;
      head = (head + 1) & (ring.length - 1);
      count--;
      hashes -= weight(old);
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
    long prevRef = 0; // EVICT store numbers are coded against the previous EVICT of the update
    // covers(version) and version < last: the next delta is at index version - floor
    for (int i = (int) (version - floor); i < count; i++) {
      Delta d = get(i);
      int size = d.encodedSize(prevRef);
      if (out.isEmpty() && size > maxSingleDelta) {
        return null;
      }
      if (used + size > byteBudget) {
        break;
      }
      out.add(d);
      used += size;
      prevRef = d.lastRef(prevRef);
    }
    return out;
  }

  long retainedBytes() {
    return 64L + 48L * count + 8L * hashes;
  }
}
