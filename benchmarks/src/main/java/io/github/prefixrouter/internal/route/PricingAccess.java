package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.PrefixRouterNode;

/**
 * Reaches the library's package-private pricing switch from the benchmarks (this class lives in
 * the benchmarks module, in the router's package), so that a simulation can run the routing cost
 * as it was before slots were counted and forward overheads learned, side by side with the
 * current one on the same requests.
 */
public final class PricingAccess {

  private PricingAccess() {}

  /**
   * Makes {@code node} price as before: {@code queue}, a full service time per waiting request
   * whatever its engine or a peer's runs at once; {@code overhead}, the configured {@code
   * forwardOverhead} for every forward instead of the per-peer overhead learned from answered
   * forwards. Call before the node routes anything.
   *
   * @throws IllegalArgumentException if the node is not the library's own
   */
  public static void usePreviousPricing(PrefixRouterNode node, boolean queue, boolean overhead) {
    if (!(node instanceof RouterNode rn)) {
      throw new IllegalArgumentException("not a library node: " + node);
    }
    rn.usePreviousPricing(queue, overhead);
  }

  /**
   * The per-forward overhead {@code node} prices forwards to {@code peerId} with: learned from
   * its answered forwards there, or the configured prior before any.
   *
   * @throws IllegalArgumentException if the node is not the library's own
   */
  public static long forwardOverheadNanos(PrefixRouterNode node, String peerId) {
    if (!(node instanceof RouterNode rn)) {
      throw new IllegalArgumentException("not a library node: " + node);
    }
    try {
      java.lang.reflect.Field f = RouterNode.class.getDeclaredField("health");
      f.setAccessible(true);
      PeerHealth health = (PeerHealth) f.get(rn);
      return health.get(peerId).overheadNanos(rn.config().forwardOverhead().toNanos());
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("RouterNode changed shape: " + e, e);
    }
  }
}
