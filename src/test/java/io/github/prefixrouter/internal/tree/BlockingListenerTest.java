package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.testing.Await;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * What a {@link BlockEventListener} that blocks holds up, as its Javadoc says: the write whose
 * event it is being given and every later write (each returns only once the events queued before
 * its own are delivered), never a match or an acquire.
 */
class BlockingListenerTest {

  @Test
  void aBlockedListenerHoldsUpWritesButNeitherMatchesNorAcquires() throws Exception {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(1_000).blockSize(4)
        .build();
    t.insert(new int[] {1, 2, 3, 4, 5, 6, 7, 8});
    CountDownLatch inListener = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    t.addListener(new BlockEventListener() {
      @Override
      public void onStored(long[] blockHashes) {
        inListener.countDown();
        try {
          release.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    });
    CompletableFuture<Void> first =
        CompletableFuture.runAsync(() -> t.insert(new int[] {9, 9, 9, 9}));
    assertTrue(inListener.await(30, TimeUnit.SECONDS));
    Thread[] second = new Thread[1];
    CompletableFuture<Void> later = new CompletableFuture<>();
    second[0] = new Thread(() -> {
      t.insert(new int[] {8, 8, 8, 8});
      later.complete(null);
    }, "second-writer");
    second[0].start();
    // readers go on: a match and a lease (its release is a write, made after the listener ends)
    assertEquals(8, t.match(new int[] {1, 2, 3, 4, 5, 6, 7, 8, 0}));
    ConcurrentPrefixTree.Lease lease = t.acquire(new int[] {1, 2, 3, 4, 5});
    assertEquals(5, lease.lockedTokens());
    // the second write is done in the tree, and waits to deliver after the first's event
    Await.until(() -> second[0].getState() == Thread.State.WAITING, "the second writer waits");
    assertEquals(4, t.match(new int[] {8, 8, 8, 8}));
    assertFalse(first.isDone(), "the first write returned while its listener was blocked");
    assertFalse(later.isDone(), "the second write returned while the listener was blocked");
    release.countDown();
    first.get(30, TimeUnit.SECONDS);
    later.get(30, TimeUnit.SECONDS);
    lease.close();
  }
}
