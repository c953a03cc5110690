package io.github.prefixrouter.internal.tree;

/**
 * Test access to what a prefix tree keeps package-private, for the fault campaign's checks.
 */
public final class TreeProbe {

  private TreeProbe() {}

  /** Tokens pinned by outstanding leases: 0 once every lease taken has been released. */
  public static long pinnedTokens(ConcurrentPrefixTree tree) {
    return tree.pinnedTokens();
  }

  /**
   * How many copies of the engine hash {@code h} an engine-driven tree counts: 0 if it holds no
   * block under that hash (nor remembers it as an alias).
   */
  public static long engineCopies(ConcurrentPrefixTree tree, long h) {
    return tree.engineCopies(h);
  }
}
