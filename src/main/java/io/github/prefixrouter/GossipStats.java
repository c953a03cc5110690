package io.github.prefixrouter;

/**
 * The health of a node's gossip layer, which keeps its replicas of its peers' caches and its
 * view of who is alive (docs/gossip.md): the counters an operator alerts or debugs on, counted
 * since the node started, and a few figures of now. Part of {@link NodeStats#gossip()}; all
 * zero (and {@code nodeIdInUse} false) for a node without gossip, or before it starts.
 *
 * <p>Immutable and thread-safe.
 *
 * @param generation this node's gossip generation now: the one it started with
 *     ({@link RouterConfig#gossipGeneration()}), or one it drew above a higher generation of
 *     itself that peers knew ({@code generationsRefuted})
 * @param nodeIdInUse true while this node takes its id to be in use by another process: it has
 *     refuted a higher generation of itself 4 times within 128 gossip rounds, and the last time
 *     less than 128 rounds ago. Two processes started with one node id raise each other's
 *     generation for as long as both run, and peers keep replacing the id's replica; a node
 *     restarted with its clock behind its last run's refutes once or twice, within a few rounds,
 *     and is not reported (a peer forging higher generations in the node's name is). The node
 *     keeps running either way: stopping one of the processes, or giving it its own id, is the
 *     host's decision
 * @param peersSuspect of the live peers ({@link NodeStats#peersLive()}), those suspect now: no
 *     heartbeat of theirs heard for {@link RouterConfig#peerSuspectAfter()}; still routed to
 * @param rounds gossip rounds this node ran (about one per {@link RouterConfig#gossipInterval()}
 *     while it runs: a rate below that means its scheduler is starved)
 * @param malformedDropped gossip messages dropped because they did not decode (a peer of an
 *     incompatible version, corruption)
 * @param rejected digest entries, updates and snapshot chunks ignored as absurd or forged: a
 *     generation or version claimed by a third party too far ahead of what is known, a claim
 *     about this node's own state that it cannot follow, a message from this node's own id
 * @param internalErrors unexpected errors while handling a gossip message or running a round,
 *     each one dropped the message or cut the round short (a bug, or the virtual machine's
 *     trouble), and the node's scheduler refusing the timer of the next round (an executor shut
 *     down while the node runs: the node then gossips no more, logged at ERROR); 0 in a healthy
 *     node
 * @param membersSuspected times a peer became suspect
 * @param membersDead times a peer was declared dead (no heartbeat for
 *     {@link RouterConfig#peerDeadAfter()}): its replica dropped
 * @param membersRefused digest entries and updates about a peer not tracked because the node
 *     already tracks {@link RouterConfig#maxPeers()}: each message naming such a peer counts
 *     again, so it grows every round while the cluster is larger than that setting
 * @param generationsReplaced times a peer's replica was replaced because the peer restarted
 *     with a new generation (or, for a node id in use twice, the other process drew one)
 * @param generationsRefuted times this node saw its own id at a generation above its own and
 *     continued above it: a restart with its clock behind its last run's, or another process
 *     with the same node id ({@code nodeIdInUse})
 * @param snapshotsSent full copies of a cache summary sent to peers that lagged beyond the
 *     delta logs (a new peer, a restart, a long partition)
 * @param snapshotsInstalled full copies received and installed into a replica
 * @param snapshotsAbandoned full copies begun and never installed, each counted once: no new
 *     chunk for 16 rounds, the replica caught up by other means, a newer copy replaced it, its
 *     origin restarted or was declared dead, or it was refused once complete; a steady rate
 *     means lossy links or chunks too large for them
 * @param blocksRefused block hashes not replicated because a replica reached its cap (per peer
 *     or in total): the node then underestimates those peers' caches
 * @param synsRefused gossip exchanges a peer began (SYNs) left unanswered because that peer
 *     had already begun 8 within this node's current {@link RouterConfig#gossipInterval()}: an
 *     answer is far larger than the message asking for it, and an honest peer of the same
 *     interval begins one or two; a peer of a much shorter interval, or one flooding, begins more
 */
public record GossipStats(
    long generation,
    boolean nodeIdInUse,
    int peersSuspect,
    long rounds,
    long malformedDropped,
    long rejected,
    long internalErrors,
    long membersSuspected,
    long membersDead,
    long membersRefused,
    long generationsReplaced,
    long generationsRefuted,
    long snapshotsSent,
    long snapshotsInstalled,
    long snapshotsAbandoned,
    long blocksRefused,
    long synsRefused) {

  /**
   * The figures of a node that refused no SYN ({@code synsRefused} 0): the components this
   * record had before {@code synsRefused}, kept so that a host constructing the record itself
   * (its own tests, a fake node) compiles unchanged.
   *
   * @param generation see the class documentation
   * @param nodeIdInUse see the class documentation
   * @param peersSuspect see the class documentation
   * @param rounds see the class documentation
   * @param malformedDropped see the class documentation
   * @param rejected see the class documentation
   * @param internalErrors see the class documentation
   * @param membersSuspected see the class documentation
   * @param membersDead see the class documentation
   * @param membersRefused see the class documentation
   * @param generationsReplaced see the class documentation
   * @param generationsRefuted see the class documentation
   * @param snapshotsSent see the class documentation
   * @param snapshotsInstalled see the class documentation
   * @param snapshotsAbandoned see the class documentation
   * @param blocksRefused see the class documentation
   */
  public GossipStats(long generation, boolean nodeIdInUse, int peersSuspect, long rounds,
      long malformedDropped, long rejected, long internalErrors, long membersSuspected,
      long membersDead, long membersRefused, long generationsReplaced, long generationsRefuted,
      long snapshotsSent, long snapshotsInstalled, long snapshotsAbandoned, long blocksRefused) {
    this(generation, nodeIdInUse, peersSuspect, rounds, malformedDropped, rejected,
        internalErrors, membersSuspected, membersDead, membersRefused, generationsReplaced,
        generationsRefuted, snapshotsSent, snapshotsInstalled, snapshotsAbandoned, blocksRefused,
        0);
  }
}
