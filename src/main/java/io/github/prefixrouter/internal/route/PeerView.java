package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.GossipStats;
import io.github.prefixrouter.internal.gossip.BlockChainSource;
import io.github.prefixrouter.spi.PeerAddress;

/**
 * What the router knows about its peers: who is alive with what load and round trip, and how
 * many leading blocks of a prompt each one holds. Implemented over the gossip layer's replicas
 * and live-peer view; tests use a scripted implementation.
 */
public interface PeerView {

  /** The live peers now. Cheap: called on every routing decision. */
  PeerSet livePeers();

  /**
   * For every peer of {@code peers}, how many leading blocks of {@code chain[0..blocks)} it
   * holds, written to {@code out[i]}. One pass over the chain whatever the number of peers.
   */
  void leadingBlocks(PeerSet peers, long[] chain, int blocks, int[] out);

  /**
   * Like {@link #leadingBlocks(PeerSet, long[], int, int[])}, but the chain is computed on
   * demand: an implementation asks {@code chain} for more blocks only while some peer still
   * holds every block so far. The default hashes the whole prompt first.
   *
   * @param maxBlocks the prompt's number of full blocks
   */
  default void leadingBlocks(PeerSet peers, BlockChainSource chain, int maxBlocks, int[] out) {
    int n = chain.ensure(maxBlocks);
    leadingBlocks(peers, chain.hashes(), n, out);
  }

  /** Starts gossip (joins through the seeds). */
  default void start() {}

  /** Stops gossip. */
  default void stop() {}

  /**
   * Handles a gossip message from the transport.
   *
   * @return false if the payload is not a gossip message this view understands
   */
  default boolean onMessage(PeerAddress from, byte[] payload) {
    return false;
  }

  /** Distinct full blocks this node advertises (its own summary). */
  default long localBlocks() {
    return 0;
  }

  /** Block hashes held in all replicas. */
  default long replicaBlocks() {
    return 0;
  }

  /** Gossip bytes received. */
  default long bytesIn() {
    return 0;
  }

  /** Gossip bytes sent. */
  default long bytesOut() {
    return 0;
  }

  /** The gossip layer's health: none, all zero, without gossip. */
  default GossipStats gossipStats() {
    return NO_GOSSIP;
  }

  /** The stats of a node without gossip. */
  GossipStats NO_GOSSIP = new GossipStats(0, false, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);

  /** A view with no peers: the node routes nothing. */
  PeerView NONE =
      new PeerView() {
        @Override
        public PeerSet livePeers() {
          return PeerSet.EMPTY;
        }

        @Override
        public void leadingBlocks(PeerSet peers, long[] chain, int blocks, int[] out) {}
      };
}
