package io.github.prefixrouter.testing;

import io.github.prefixrouter.spi.CacheEventListener;

/**
 * A cache event listener that throws on every event: a {@link StackOverflowError} on every
 * other one, an {@link IllegalStateException} on the rest. For the engines' tests that a
 * listener that throws leaves their requests and their cache sound.
 */
public final class ThrowingCacheEventListener implements CacheEventListener {

  private int calls;

  /** Events the listener was told of (and threw on). */
  public int calls() {
    return calls;
  }

  private void fail() {
    if (calls++ % 2 == 0) {
      throw new StackOverflowError("listener");
    }
    throw new IllegalStateException("listener");
  }

  @Override
  public void onBlocksStored(long parentBlockHash, long[] blockHashes, int[] tokenIds) {
    fail();
  }

  @Override
  public void onBlocksRemoved(long[] blockHashes) {
    fail();
  }

  @Override
  public void onAllCleared() {
    fail();
  }
}
