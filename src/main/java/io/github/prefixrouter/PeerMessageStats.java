package io.github.prefixrouter;

/**
 * What a node dropped or refused on its forwarding and streaming paths, and the streamed
 * requests it failed because their output diverged (docs/routing.md, "Forwarding protocol" and
 * "Streaming"): counted since the node was built. Gossip has its own counters
 * ({@link GossipStats}). Read it with {@link PrefixRouterNode#peerMessageStats()}.
 *
 * <p>Immutable and thread-safe.
 *
 * @param malformed messages from peers that did not decode or were of no type the node takes
 *     (a FORWARD, an answer to one, a CANCEL or streamed output, cut short or forged; an
 *     unknown type): a request among them answered with a protocol error, the others dropped
 *     (gossip that did not decode is {@link GossipStats#malformedDropped()})
 * @param strayStreams streamed output from peers that belongs to no current forward of this
 *     node (late, from another peer than the forward's, of another tag or request id); dropped
 * @param outputDivergences streamed requests failed because a run's output contradicted what
 *     had already been streamed (an engine that does not decode deterministically): those
 *     submitted here with {@link OutputDivergedException} (also counted in
 *     {@link NodeStats#failed()}), those peers forwarded with a retryable failure (their
 *     senders check the output they streamed themselves)
 * @param cancelledBeforeArrival requests forwarded by peers and not run because the peer's
 *     CANCEL of them had arrived first (the network reordered them, or a FORWARD of a request
 *     already cancelled came again); each answered as cancelled
 * @param otherModelRefused requests forwarded by peers and refused because the peer's model id
 *     is not this node's ({@link RouterConfig#modelId()}); each answered with a protocol
 *     failure, after which that peer skips this node
 */
public record PeerMessageStats(long malformed, long strayStreams, long outputDivergences,
    long cancelledBeforeArrival, long otherModelRefused) {}
