package io.github.prefixrouter.internal.gossip;

/**
 * The 32-bit fingerprint of a block hash that gossip replicates instead of the 64-bit hash.
 *
 * <h2>Design notes</h2>
 *
 * <p>Replicas answer one question, "how many leading blocks of this chain does the peer hold",
 * and a wrong answer only costs a cache miss: the peer's engine recomputes whatever it does not
 * hold, it never returns a wrong result. So a replica may hold a lossy key as long as false
 * matches are rare. The fingerprint folds the two halves of the chained block hash
 * ({@code (h ^ h >>> 32) mod 2^32}); block hashes are already well mixed, so fingerprints are
 * uniform. Folding (rather than truncating) keeps that true even if one half were weak.
 *
 * <p><b>False matches.</b> The walk over a request's chain stops at the first block the peer
 * does not hold; it goes one block too far only if that block's fingerprint equals one of the
 * peer's {@code k} replicated fingerprints, probability {@code k / 2^32} per peer and lookup:
 * 1.9e-6 for 8,192 blocks (128k tokens of KV at 16 tokens per block), 1.5e-5 for 65,536
 * blocks (1M tokens), 6.1e-5 at the default cap of 262,144 blocks per peer. The estimate is
 * then one block (16 tokens) too long, and a second false match in a row is another factor
 * {@code k / 2^32} rarer. An overestimate can never make a request fail.
 *
 * <p><b>Exactness of replicas.</b> Two blocks of one origin can share a fingerprint (about
 * {@code k^2 / 2^33} pairs in a cache of {@code k} blocks: 0.008 at 8,192 blocks, 0.5 at
 * 65,536). The origin's {@link LocalSummary} therefore counts its blocks per fingerprint and
 * publishes a fingerprint as stored when its first block arrives and as evicted when its last
 * one leaves, so a replica converges to the exact set of the origin's fingerprints.
 */
final class BlockFingerprint {

  /** Bytes of one fingerprint on the wire ({@code fixed32}). */
  static final int BYTES = 4;

  private BlockFingerprint() {}

  /** The fingerprint of {@code blockHash}, in {@code 0..2^32-1}. */
  static long of(long blockHash) {
    return (blockHash ^ (blockHash >>> 32)) & 0xFFFF_FFFFL;
  }

  /** True if {@code v} is a possible fingerprint. */
  static boolean valid(long v) {
    return (v >>> 32) == 0;
  }
}
