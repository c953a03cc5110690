package io.github.prefixrouter.internal.route;

/** Assembles a node's local index, block hasher and peer view from its configuration. */
final class DefaultComponents {

  private DefaultComponents() {}

  static RouterNode.Components create(RouterNode node) {
    LocalPrefixIndex none = new LocalPrefixIndex() {
      @Override
      public int match(int[] tokens) {
        return 0;
      }

      @Override
      public void onExecuted(int[] tokens) {}

      @Override
      public long cachedTokens() {
        return 0;
      }
    };
    return new RouterNode.Components(none, (tokens, length, out) -> 0, PeerView.NONE);
  }
}
