package io.github.prefixrouter.internal.gossip;

import io.github.prefixrouter.spi.PeerAddress;

/**
 * What the router needs to know of one live peer, as of the {@link GossipView} it came from.
 *
 * @param address where to reach it
 * @param slot its index in {@link GossipEngine#leadingBlocks} results
 * @param generation the peer's current generation
 * @param suspect true if its heartbeat has not advanced for {@code suspectAfter}
 * @param queueDepth advertised requests waiting
 * @param inFlight advertised requests running
 * @param overloaded advertised overload flag (set above its high watermark, cleared below its
 *     low one)
 * @param rttNanos smoothed round trip measured from SYN→ACK exchanges, or -1 before the first
 * @param lastSyncNanos clock time at which this node last knew its replica of the peer to be
 *     up to date; {@code now - lastSyncNanos} is the age of the replica for staleness discounts
 * @param heartbeatNanos clock time at which the peer's heartbeat last advanced
 * @param replicaBlocks block hashes replicated for the peer
 * @param replicaVersion version of the peer's block set the replica is at
 * @param replicaTruncated true if a cap refused blocks, so the replica is a subset
 */
public record PeerView(
    PeerAddress address,
    int slot,
    long generation,
    boolean suspect,
    int queueDepth,
    int inFlight,
    boolean overloaded,
    long rttNanos,
    long lastSyncNanos,
    long heartbeatNanos,
    long replicaBlocks,
    long replicaVersion,
    boolean replicaTruncated) {

  /** Age of the replica at {@code nowNanos}. */
  public long summaryAgeNanos(long nowNanos) {
    return Math.max(0, nowNanos - lastSyncNanos);
  }
}
