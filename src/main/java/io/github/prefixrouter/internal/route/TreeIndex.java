package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;

/** The local prefix tree as the router's {@link LocalPrefixIndex}. */
final class TreeIndex implements LocalPrefixIndex {

  private final ConcurrentPrefixTree tree;
  private final boolean selfManaged;

  TreeIndex(ConcurrentPrefixTree tree) {
    this.tree = tree;
    this.selfManaged = tree.mode() == ConcurrentPrefixTree.Mode.SELF_MANAGED;
  }

  ConcurrentPrefixTree tree() {
    return tree;
  }

  @Override
  public int match(int[] tokens) {
    return tree.match(tokens);
  }

  @Override
  public void onExecuted(int[] tokens) {
    if (selfManaged) {
      tree.insert(tokens);
    }
  }

  @Override
  public int match(long scopeRoot, int[] tokens) {
    return tree.match(scopeRoot, tokens);
  }

  @Override
  public void onExecuted(long scopeRoot, int[] tokens) {
    if (selfManaged) {
      tree.insert(scopeRoot, tokens, tokens.length);
    }
  }

  /**
   * A self-managed tree's lease on the prompt's cached prefix (nothing when none of it is
   * cached); an engine-driven tree pins nothing, the engine's events being authoritative.
   */
  @Override
  public Pin pin(long scopeRoot, int[] tokens) {
    if (!selfManaged || tokens.length == 0) {
      return Pin.NONE;
    }
    ConcurrentPrefixTree.Lease lease = tree.acquire(scopeRoot, tokens);
    return lease::close;
  }

  @Override
  public long cachedTokens() {
    return tree.sizeTokens();
  }

  /**
   * A self-managed tree is cleared, which its listeners (the gossiped summary) are told as a
   * clear; an engine-driven one is left as the engine's events made it.
   */
  @Override
  public void engineCacheLost() {
    if (selfManaged) {
      tree.clear();
    }
  }
}
