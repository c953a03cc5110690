package io.github.prefixrouter.contract;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.spi.CacheEventListener;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A cache event listener that throws on every event it is told of, in turn a
 * {@link StackOverflowError}, an {@link IllegalStateException} and an {@link java.io.IOException}
 * thrown undeclared (as code in a language without checked exceptions throws it). The engine
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
    switch (calls.getAndIncrement() % 3) {
      case 0 -> throw new StackOverflowError("cache event listener");
      case 1 -> throw new IllegalStateException("cache event listener");
      default -> throw undeclared(new java.io.IOException("cache event listener"));
    }
  }

  /**
   * Throws {@code t}, whatever it is, from a method that declares no checked exception: as code
   * in a language without checked exceptions throws one. Written {@code throw undeclared(t)} so
   * that the compiler sees the throw.
   *
   * @param <T> the type the compiler takes the throwable for (give {@code RuntimeException})
   * @param t what to throw
   * @return never returns
   * @throws T {@code t}
   */
  @SuppressWarnings("unchecked")
  public static <T extends Throwable> T undeclared(Throwable t) throws T {
    throw (T) t;
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
