package io.github.prefixrouter.internal.gossip;

import java.util.List;

/**
 * An immutable picture of the live membership, taken after the last change. Cheap to read from
 * any thread: the router takes one per request.
 *
 * @param peers live (alive or suspect) peers, in slot order
 * @param bySlot the same peers indexed by slot ({@code null} where no live peer has the slot);
 *     never modified
 * @param localOverloaded this node's own overload flag, as it advertises it
 */
public record GossipView(List<PeerView> peers, PeerView[] bySlot, boolean localOverloaded) {

  /** The live peer in {@code slot}, or {@code null}. */
  public PeerView peerAt(int slot) {
    return slot >= 0 && slot < bySlot.length ? bySlot[slot] : null;
  }
}
