package io.github.prefixrouter.spi;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.CacheScope;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The default of the scoped store: what it passes on to a listener that knows no scopes. */
class CacheEventListenerTest {

  /** Records the unscoped stores it is given, by their first hash. */
  private static final class Unscoped implements CacheEventListener {
    final List<Long> stored = new ArrayList<>();

    @Override
    public void onBlocksStored(long parentBlockHash, long[] blockHashes, int[] tokenIds) {
      stored.add(blockHashes[0]);
    }
  }

  @Test
  void aStoreWithANullScopeIsDroppedNotThrown() {
    // the default read scope.isDefault() and threw NullPointerException at the engine
    Unscoped l = new Unscoped();
    assertDoesNotThrow(() -> l.onBlocksStored(null, CacheEventListener.NO_PARENT,
        new long[] {1}, new int[] {5, 6}));
    // a continuation takes its parent's scope, but a null one is still malformed
    assertDoesNotThrow(() -> l.onBlocksStored(null, 1, new long[] {2}, new int[] {7, 8}));
    assertEquals(List.of(), l.stored);
  }

  @Test
  void theDefaultScopeAndContinuationsArePassedOnAndOtherScopesRootsDropped() {
    Unscoped l = new Unscoped();
    l.onBlocksStored(CacheScope.DEFAULT, CacheEventListener.NO_PARENT, new long[] {1},
        new int[] {5, 6});
    l.onBlocksStored(CacheScope.salt("t"), CacheEventListener.NO_PARENT, new long[] {2},
        new int[] {5, 6});
    l.onBlocksStored(CacheScope.salt("t"), 2, new long[] {3}, new int[] {7, 8});
    assertEquals(List.of(1L, 3L), l.stored);
  }
}
