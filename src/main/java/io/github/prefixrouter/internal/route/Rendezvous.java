package io.github.prefixrouter.internal.route;

import java.nio.charset.StandardCharsets;

/**
 * Bounded-load rendezvous hashing for cold prefixes.
 *
 * <p>Design: every node scores every candidate with {@code mix(firstBlockHash, nodeHash)} and
 * walks candidates from the highest score down to the first whose load, counting the new
 * request, stays within {@code ceil(bound × (totalLoad + 1) / candidates)} (the bound of
 * consistent hashing with bounded loads, Mirrokni et al., with its ceiling). Rendezvous rather than a ring: no virtual nodes to maintain, and a node joining
 * or leaving only moves the prefixes it wins or held. Since all nodes hash the same first block
 * hash and node ids with a fixed function, they agree on the placement without talking, up to
 * the differences in their load views. Walking "highest score first, first under the bound" is
 * done as a single pass choosing the best score among candidates under the bound, which gives
 * the same answer without sorting.
 */
final class Rendezvous {

  private Rendezvous() {}

  /** A node id's fixed 64-bit hash (FNV-1a over its ASCII bytes, then a finalizer). */
  static long nodeHash(String nodeId) {
    byte[] b = nodeId.getBytes(StandardCharsets.US_ASCII);
    long h = 0xcbf29ce484222325L;
    for (byte x : b) {
      h ^= (x & 0xFF);
      h *= 0x100000001b3L;
    }
    return mix(h);
  }

  /** The score of a node for a key. */
  static long score(long key, long nodeHash) {
    return mix(key ^ nodeHash * 0x9E3779B97F4A7C15L);
  }

  /** The largest load (including the new request) a candidate may have. */
  static long capacity(double bound, long totalLoad, int candidates) {
    return (long) Math.ceil(bound * (totalLoad + 1) / candidates);
  }

  /** SplitMix64 finalizer. */
  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
    return z ^ (z >>> 31);
  }
}
