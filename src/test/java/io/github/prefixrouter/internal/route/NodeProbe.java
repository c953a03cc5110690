package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.internal.gossip.GossipProbe;
import java.lang.reflect.Field;

/**
 * Reaches the gossip engine inside a node built by {@link PrefixRouterNode#builder()}, for the
 * fault campaign's exact convergence checks. {@link RouterNode} keeps its peer view private, so
 * this reads the field reflectively; a package-private {@code RouterNode.peerView()} accessor
 * would make it unnecessary.
 */
public final class NodeProbe {

  private NodeProbe() {}

  /** The node's gossip probe, or null if the node does not run the library's gossip. */
  public static GossipProbe gossipOf(PrefixRouterNode node) {
    if (!(node instanceof RouterNode rn)) {
      return null;
    }
    try {
      Field f = RouterNode.class.getDeclaredField("peers");
      f.setAccessible(true);
      Object view = f.get(rn);
      if (!(view instanceof GossipPeerView g)) {
        return null;
      }
      Object engine = g.engine();
      return engine == null ? null : new GossipProbe(engine);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("RouterNode changed shape: " + e, e);
    }
  }
}
