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
 * its own are delivered), never a match or an acquire, even while a later write's event waits in
 * the queue.
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
          release.await(60, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    });
    Thread first = new Thread(() -> t.insert(new int[] {9, 9, 9, 9}), "first-writer");
    first.start();
    assertTrue(inListener.await(30, TimeUnit.SECONDS));
    Thread second = new Thread(() -> t.insert(new int[] {8, 8, 8, 8}), "second-writer");
    second.start();
    CompletableFuture<ConcurrentPrefixTree.Lease> lease;
    try {
      // the second write is made in the tree, and its event waits in the queue behind the first's
      Await.until(() -> second.getState() == Thread.State.WAITING, "the second writer waits");
      assertEquals(4, t.match(new int[] {8, 8, 8, 8}));
      // readers go on past the queued event: a match and a lease (whose release is a write, made
      // once the listener ends)
      lease = CompletableFuture.supplyAsync(() -> {
        assertEquals(8, t.match(new int[] {1, 2, 3, 4, 5, 6, 7, 8, 0}));
        return t.acquire(new int[] {1, 2, 3, 4, 5});
      }, r -> new Thread(r, "reader").start());
      assertEquals(5, lease.get(20, TimeUnit.SECONDS).lockedTokens());
      assertTrue(first.isAlive(), "the first write returned while its listener was blocked");
      assertTrue(second.isAlive(), "the second write returned while the listener was blocked");
    } finally {
      release.countDown(); // on a failure too: no thread left waiting
    }
    first.join(30_000);
    second.join(30_000);
    assertFalse(first.isAlive() || second.isAlive(), "a write still waits after the listener");
    lease.get().close();
  }
}
