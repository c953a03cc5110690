package io.github.prefixrouter.contract;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.spi.CacheEventListener;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A cache event listener that throws on every event it is told of: a {@link StackOverflowError}
 * on the first and every other one, an {@link IllegalStateException} on the rest. The engine
 * contract's check that such a listener breaks neither an engine's requests nor its later
 * events uses it ({@link InferenceEngineContractTest}); an engine's own tests may too. Engines
 * may call it from any thread.
 */
public final class ThrowingCacheEventListener implements CacheEventListener {

  private final AtomicInteger calls = new AtomicInteger();

  /** A listener that has been told of nothing yet. */
  public ThrowingCacheEventListener() {}

  /**
   * The events the listener was told of (and threw on).
   *
   * @return how many calls the listener had
   */
  public int calls() {
    return calls.get();
  }

  private void fail() {
    if (calls.getAndIncrement() % 2 == 0) {
      throw new StackOverflowError("cache event listener");
    }
    throw new IllegalStateException("cache event listener");
  }

  @Override
  public void onBlocksStored(long parentBlockHash, long[] blockHashes, int[] tokenIds) {
    fail();
  }

  @Override
  public void onBlocksStored(
      CacheScope scope, long parentBlockHash, long[] blockHashes, int[] tokenIds) {
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
