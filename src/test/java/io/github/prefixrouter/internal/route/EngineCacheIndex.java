package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.testing.SimulatedEngine;

/** Test fixture: a local prefix index that reads a {@link SimulatedEngine}'s cache directly. */
public final class EngineCacheIndex {

  private EngineCacheIndex() {}

  /** The exact local match of {@code engine}'s cache; executions record nothing. */
  public static LocalPrefixIndex of(SimulatedEngine engine) {
    return new LocalPrefixIndex() {
      @Override
      public int match(int[] tokens) {
        return engine.cachedPrefixTokens(tokens);
      }

      @Override
      public void onExecuted(int[] tokens) {}

      @Override
      public long cachedTokens() {
        return (long) engine.cachedBlocks() * engine.blockSize();
      }
    };
  }
}
