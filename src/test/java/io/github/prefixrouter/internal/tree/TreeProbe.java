package io.github.prefixrouter.internal.tree;

/**
 * Test access to what a prefix tree keeps package-private, for the fault campaign's checks of
 * self-managed trees.
 */
public final class TreeProbe {

  private TreeProbe() {}

  /** Tokens pinned by outstanding leases: 0 once every lease taken has been released. */
  public static long pinnedTokens(ConcurrentPrefixTree tree) {
    return tree.pinnedTokens();
  }
}
