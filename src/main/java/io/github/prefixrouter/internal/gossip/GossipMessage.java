package io.github.prefixrouter.internal.gossip;

import java.util.List;

/**
 * The four gossip messages (wire layout in {@code docs/wire-format.md}, codec in
 * {@link GossipCodec}). One exchange is SYN (digest) → ACK (updates the initiator lacks +
 * requests) → ACK2 (updates the responder asked for); snapshots travel as separate
 * {@link SnapshotChunk} messages.
 */
sealed interface GossipMessage {

  /** Message type codes, inside the gossip range {@code 0x10..0x1F}. */
  int TYPE_SYN = 0x10;
  int TYPE_ACK = 0x11;
  int TYPE_ACK2 = 0x12;
  int TYPE_SNAPSHOT_CHUNK = 0x13;

  /** Version byte this codec writes and the only one it reads. */
  int VERSION = 3;

  /** Largest generation, version or heartbeat accepted: 2^62. */
  long MAX_COUNTER = 1L << 62;

  /**
   * What a node knows of one origin: its generation, the version of its block set, its
   * heartbeat and its advertised load. In a SYN, {@code pending} says that the initiator has
   * already asked another peer about this origin at this version and awaits the answer: the
   * receiver sends no deltas for it (it still requests what it lacks).
   */
  record DigestEntry(
      String nodeId,
      long generation,
      long version,
      long heartbeat,
      int queueDepth,
      int inFlight,
      boolean overloaded,
      boolean pending) {

    /** An entry without the pending mark. */
    DigestEntry(String nodeId, long generation, long version, long heartbeat, int queueDepth,
        int inFlight, boolean overloaded) {
      this(nodeId, generation, version, heartbeat, queueDepth, inFlight, overloaded, false);
    }
  }

  /**
   * State of one origin sent to a peer that lacks it: the full header (with the address, so the
   * receiver can learn the origin) and optionally the deltas following {@code fromVersion}.
   *
   * @param address the origin's address, or {@code null} when the receiver already knows the
   *     origin (it listed it in its digest or request)
   * @param deltas consecutive deltas with sequences {@code fromVersion+1, fromVersion+2, ...};
   *     empty for a header-only update
   */
  record Update(DigestEntry header, String address, long fromVersion, List<Delta> deltas) {}

  /** A peer's request for an origin: "I have this generation at this version". */
  record Request(String nodeId, long generation, long version) {}

  /** Step 1: the initiator's digest. {@code round} is echoed in the ACK for RTT measurement. */
  record Syn(long round, long senderGeneration, List<DigestEntry> digest)
      implements GossipMessage {}

  /** Step 2: what the initiator lacks, and what the responder wants. */
  record Ack(long round, long senderGeneration, List<Update> updates, List<Request> requests)
      implements GossipMessage {}

  /** Step 3: what the responder asked for. */
  record Ack2(long senderGeneration, List<Update> updates) implements GossipMessage {}

  /**
   * One chunk of an origin's full block set at {@code version}. The chunks of one snapshot are
   * numbered {@code 0..chunkCount-1}; the receiver installs the snapshot once it has them all.
   * Each fingerprint comes with its store number ({@code stores}, parallel to {@code hashes},
   * strictly ascending within the chunk and across the chunks in index order), so that later
   * evictions naming store numbers resolve; {@code storeCount} is the last store number the
   * origin had handed out at {@code version}.
   */
  record SnapshotChunk(
      String nodeId, long generation, long version, long storeCount, int chunkIndex,
      int chunkCount, long[] stores, long[] hashes)
      implements GossipMessage {

    public SnapshotChunk {
      if (stores.length != hashes.length) {
        throw new IllegalArgumentException("stores and hashes differ in length");
      }
    }
  }
}
