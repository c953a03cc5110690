package io.github.prefixrouter.internal.gossip;

/**
 * The counters a {@link GossipEngine} keeps (read them with {@link GossipEngine#stats()}).
 *
 * <p>The "sent" counters count what the send function took: it returned without throwing. A
 * send that throws counts in {@link #SEND_FAILURES} and in no "sent" counter. A one-way send
 * is best effort, so a transport may still drop a message it took ({@code HttpTransport} drops
 * one to a peer that has {@code maxInFlightPerPeer} requests and messages in flight, counting it
 * in its own {@code messagesDropped} and {@code outboundBusy}): the engine cannot tell.
 */
public enum GossipCounter {
  /** Gossip rounds run by this node. */
  ROUNDS,
  /** Messages the send function took. */
  MESSAGES_SENT,
  /** Payload bytes of the messages the send function took. */
  BYTES_SENT,
  /** Messages received (well-formed or not). */
  MESSAGES_RECEIVED,
  /** Payload bytes received. */
  BYTES_RECEIVED,
  /** Received messages dropped because they failed to decode. */
  MALFORMED_DROPPED,
  /** Updates, digest entries or chunks ignored as absurd or forged (far-future generation or
   * version, a claim about this node's own state, a message from this node's own id, a STORE
   * numbering blocks past 2^62, which also restarts the replica). */
  REJECTED,
  /** Deltas applied to replicas. */
  DELTAS_APPLIED,
  /** Deltas received that the replica already had (redundant deliveries). */
  DELTAS_REDUNDANT,
  /** Snapshots served in an exchange of which the send function took at least one chunk. */
  SNAPSHOTS_SENT,
  /** Snapshot chunk messages sent. */
  SNAPSHOT_CHUNKS_SENT,
  /** Snapshots installed into a replica. */
  SNAPSHOTS_INSTALLED,
  /**
   * Block hashes not replicated because of a per-peer or total cap, or because the replica
   * index found no free slot near their home (see {@link #BLOCKS_REFUSED_PROBE_LIMIT}).
   */
  BLOCKS_REFUSED,
  /** Peers learned. */
  MEMBERS_JOINED,
  /** Peers that became suspect. */
  MEMBERS_SUSPECTED,
  /** Peers declared dead. */
  MEMBERS_DEAD,
  /** Dead peers forgotten. */
  MEMBERS_FORGOTTEN,
  /**
   * Digest entries and updates about a peer not tracked because {@code maxPeers} was reached:
   * each message naming such a peer counts again, so it grows every round while the peer runs.
   */
  MEMBERS_REFUSED,
  /** Replicas replaced because their origin restarted with a new generation. */
  GENERATIONS_REPLACED,
  /** Round-trip samples taken from SYN→ACK: at most one per SYN, from its first ACK. */
  RTT_SAMPLES,
  /** Calls to the send function that threw (their messages count as sent nowhere). */
  SEND_FAILURES,
  /**
   * Unexpected errors caught while decoding or handling a message or running a round (each one
   * is a bug, a pathological message's stack overflow, or the virtual machine's trouble).
   */
  INTERNAL_ERRORS,
  /**
   * Deltas not sent again because an earlier answer carrying them to the same peer is still in
   * flight (counted per delta version skipped).
   */
  DELTAS_IN_FLIGHT_SKIPPED,
  /** Bytes of SYN messages sent (the digests, framing included). */
  DIGEST_BYTES_SENT,
  /** Bytes of update headers sent in ACKs and ACK2s (origin entry, address, range, count). */
  UPDATE_HEADER_BYTES_SENT,
  /** Bytes of this node's own deltas sent (op, count, fingerprints or store numbers). */
  OWN_DELTA_BYTES_SENT,
  /** Bytes of third-party deltas relayed (op, count, fingerprints or store numbers). */
  RELAYED_DELTA_BYTES_SENT,
  /** Bytes of snapshot chunk messages sent. */
  SNAPSHOT_BYTES_SENT,
  /** Bytes of deltas received that the replica already had (wasted by redundant deliveries). */
  REDUNDANT_DELTA_BYTES_RECEIVED,
  /**
   * Digest entries sent marked pending: third-party origins already asked about in another
   * exchange still awaiting its answer, for which the receiver sends no deltas.
   */
  PENDING_MARKS_SENT,
  /**
   * Evictions naming a store number the replica cannot resolve (a forged or corrupted update):
   * the delta is not applied and the replica restarts from the empty set at version 0, so the
   * next exchange refills it from deltas or a snapshot. Never happens between correct nodes.
   */
  UNRESOLVED_EVICTIONS,
  /** Evictions (named by store number) applied to replicas. */
  EVICTIONS_RESOLVED,
  /** Bytes of the store numbers inside snapshot chunks sent (part of SNAPSHOT_BYTES_SENT). */
  SNAPSHOT_STORE_NUMBER_BYTES_SENT,
  /**
   * Blocks refused (also counted in {@link #BLOCKS_REFUSED}) because the replica index holds no
   * free slot within its probe limit of their home: fingerprints crowding one region of the
   * table, which only a peer that knew this node's secret mix could choose.
   */
  BLOCKS_REFUSED_PROBE_LIMIT,
  /**
   * Fresh snapshots asked for (the digest shows version 0 for the origin) because a replica
   * truncated by a cap could hold its origin's whole set again.
   */
  REPLICA_REFRESHES,
  /**
   * Snapshots encoded into chunks to be served (the sender's snapshot cache did not hold them
   * already). At most one per exchange whose snapshot budget is already spent is ever encoded.
   */
  SNAPSHOTS_ENCODED,
  /**
   * Snapshot assemblies begun and never installed, each counted once: no new chunk for 16
   * intervals, the replica reached their version by other means, a newer snapshot of the origin
   * replaced them, the origin restarted or was declared dead, or the complete snapshot was
   * refused (also counted in {@link #REJECTED}).
   */
  SNAPSHOTS_ABANDONED,
  /**
   * Digest entries about this node carrying a heartbeat above its own (within
   * {@code maxSequenceJump}), which it refuted by continuing its heartbeat from above them.
   */
  HEARTBEATS_REFUTED,
  /**
   * Digest entries or update headers about this node carrying a version above its own (deltas
   * it never made, passed on by a peer), which it refuted by moving its version past them (its
   * peers then get a snapshot).
   */
  VERSIONS_REFUTED,
  /**
   * Digest entries, update headers or requests about this node carrying a generation above its
   * own (within {@code maxGenerationJump}), which it refuted by continuing as the generation above
   * them (its peers then get a snapshot): an earlier run of the node id started with a clock
   * ahead of this one's, or another process runs with the same node id (which {@link
   * GossipEngine#nodeIdInUse()} reports once they come too often).
   */
  GENERATIONS_REFUTED,
  /**
   * SYNs not sent because the last SYN to the same peer (node id and address) is still awaiting
   * its answer, within a window that doubles with each SYN to it left unanswered.
   */
  SYNS_IN_FLIGHT_SKIPPED,
  /**
   * Times this node began to take its id to be in use by another process ({@link
   * GossipEngine#nodeIdInUse()}): one per episode, however long it lasts.
   */
  NODE_ID_IN_USE_REPORTS,
  /**
   * Replicas restarted from the empty set at version 0 because their origin's own word (a
   * digest entry, update header or snapshot chunk it sent, of the replica's generation) showed a
   * version further below the replica's than the origin refutes (more than {@code
   * maxSequenceJump}): state the origin never made, brought by third parties in steps each
   * within the jump. Never happens between correct nodes at the default jump.
   */
  REPLICAS_BEYOND_REACH_RESTARTED,
  /**
   * Members dropped from a full table to make room for an origin that speaks for itself (a
   * SYN, ACK or ACK2 it sent): tombstones first, then members heard of only from third parties.
   */
  MEMBERS_DISPLACED,
  /**
   * SYNs dropped unanswered because their sender had already had {@link
   * GossipEngine#SYNS_ANSWERED_PER_INTERVAL} SYNs answered within the current interval (an ACK
   * is far larger than a SYN). Honest initiators never send that many.
   */
  SYNS_REFUSED
}
