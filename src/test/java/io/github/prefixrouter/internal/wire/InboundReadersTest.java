package io.github.prefixrouter.internal.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class InboundReadersTest {

  private static final InetSocketAddress A = new InetSocketAddress("127.0.0.2", 40001);
  private static final InetSocketAddress A_OTHER_PORT = new InetSocketAddress("127.0.0.2", 40002);
  private static final InetSocketAddress B = new InetSocketAddress("127.0.0.3", 40001);

  private final AtomicInteger refused = new AtomicInteger();
  private final ExecutorService pool = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "inbound-readers-test");
    t.setDaemon(true);
    return t;
  });
  private final List<InboundReaders> made = new ArrayList<>();

  @AfterEach
  void tearDown() {
    pool.shutdownNow();
    made.forEach(InboundReaders::shutdownNow);
  }

  private InboundReaders readers(int maxPerAddress, Duration maxWait) {
    InboundReaders r = new InboundReaders(4, maxPerAddress, maxWait, Thread::new, refused::incrementAndGet);
    made.add(r);
    return r;
  }

  @Test
  void aRequestBeyondTheCapWaitsForOneOfItsAddressesReadsToFinish() throws Exception {
    InboundReaders r = readers(2, Duration.ofSeconds(30));
    assertTrue(r.tryAcquire(A));
    assertTrue(r.tryAcquire(A_OTHER_PORT), "the cap is per address, whatever the port");
    Future<Boolean> third = pool.submit(() -> r.tryAcquire(A));
    assertThrows(TimeoutException.class, () -> third.get(200, TimeUnit.MILLISECONDS), "waits");
    r.release(A);
    assertTrue(third.get(10, TimeUnit.SECONDS), "takes the slot given back");
    assertEquals(0, refused.get());
    r.release(A);
    r.release(A);
    assertEquals(0, r.addressesReading(), "no entry outlives its reads");
  }

  /**
   * Twenty-four requests queued behind a cap of one, each read taking 250 ms: the last waits
   * about 6 s, longer than the 5 s without progress after which a request is refused, and none
   * is refused because the address's reads keep finishing. A wait counted from the request's
   * arrival refused the last ones whatever the load (each waits at least the reads ahead of
   * it); here a stall of the machine refuses one only if it outlasts the 4.75 s between a read's
   * end and maxWait (with 1 s of no progress and 250 ms reads, a stall of 750 ms did).
   */
  @Test
  void aQueueThatKeepsMovingWaitsLongerThanMaxWait() throws Exception {
    Duration maxWait = Duration.ofSeconds(5);
    long readMillis = 250;
    int queuedReads = 24; // (1 + 23) x 250 ms ahead of the last: 6 s
    InboundReaders r = readers(1, maxWait);
    assertTrue(r.tryAcquire(A));
    long start = System.nanoTime();
    List<Future<Long>> queued = new ArrayList<>();
    for (int i = 0; i < queuedReads; i++) {
      queued.add(pool.submit(() -> {
        if (!r.tryAcquire(A)) {
          return -1L;
        }
        long got = System.nanoTime() - start;
        Thread.sleep(readMillis); // the body being read
        r.release(A);
        return got;
      }));
    }
    Thread.sleep(readMillis);
    r.release(A);
    long last = 0;
    for (Future<Long> f : queued) {
      long got = f.get(60, TimeUnit.SECONDS);
      assertTrue(got >= 0, "refused although its address's reads kept finishing");
      last = Math.max(last, got);
    }
    assertTrue(last > maxWait.toNanos(), "the last waited " + last / 1_000_000 + " ms");
    assertEquals(0, refused.get());
    assertEquals(0, r.addressesReading());
  }

  @Test
  void aRequestBeyondTheCapIsRefusedAndCountedWhenNoSlotFreesInTime() {
    InboundReaders r = readers(1, Duration.ofMillis(150));
    assertTrue(r.tryAcquire(A));
    long start = System.nanoTime();
    assertFalse(r.tryAcquire(A));
    assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(150), "waited first");
    assertEquals(1, refused.get());
    r.release(A);
    assertTrue(r.tryAcquire(A), "a refusal takes no slot");
    r.release(A);
    assertEquals(0, r.addressesReading());
  }

  @Test
  void withoutAWaitARequestBeyondTheCapIsRefusedAtOnce() throws Exception {
    InboundReaders r = readers(1, Duration.ZERO);
    assertTrue(r.tryAcquire(A));
    assertFalse(pool.submit(() -> r.tryAcquire(A)).get(10, TimeUnit.SECONDS));
    assertEquals(1, refused.get());
  }

  @Test
  void otherAddressesNeverWaitBehindAFullOne() throws Exception {
    InboundReaders r = readers(1, Duration.ofSeconds(30));
    assertTrue(r.tryAcquire(A));
    Future<Boolean> waiting = pool.submit(() -> r.tryAcquire(A));
    assertTrue(pool.submit(() -> r.tryAcquire(B)).get(10, TimeUnit.SECONDS));
    assertTrue(pool.submit(() -> r.tryAcquire(null)).get(10, TimeUnit.SECONDS), "unknown address");
    r.release(B);
    assertFalse(waiting.isDone(), "a release by another address frees none of A's slots");
    r.release(A);
    assertTrue(waiting.get(10, TimeUnit.SECONDS));
  }

  @Test
  void anInterruptEndsTheWaitAsARefusalAndStaysSet() throws Exception {
    InboundReaders r = readers(1, Duration.ofSeconds(30));
    assertTrue(r.tryAcquire(A));
    CountDownLatch started = new CountDownLatch(1);
    CompletableFuture<boolean[]> result = new CompletableFuture<>();
    Thread t = new Thread(() -> {
      started.countDown();
      boolean got = r.tryAcquire(A);
      result.complete(new boolean[] {got, Thread.currentThread().isInterrupted()});
    });
    t.start();
    started.await();
    Thread.sleep(100);
    t.interrupt(); // what the I/O deadline does
    boolean[] got = result.get(10, TimeUnit.SECONDS);
    assertFalse(got[0], "refused");
    assertTrue(got[1], "the interrupt is left for the I/O that follows");
    assertEquals(1, refused.get());
  }

  /**
   * A burst from one address, several times its cap, each read short: with the wait none is
   * refused and the cap still holds at every moment; refused at once, the same burst loses
   * requests.
   */
  @Test
  void aBurstOfShortReadsFromOneAddressIsServedWhole() throws Exception {
    assertEquals(0, burst(readers(8, Duration.ofSeconds(30))), "none refused with the wait");
    refused.set(0);
    assertTrue(burst(readers(8, Duration.ZERO)) > 0, "the same burst without the wait loses some");
  }

  /** 64 threads read from one address at once, 20 times over; returns how many were refused. */
  private int burst(InboundReaders r) throws Exception {
    AtomicInteger reading = new AtomicInteger();
    AtomicInteger most = new AtomicInteger();
    for (int round = 0; round < 20; round++) {
      CountDownLatch go = new CountDownLatch(1);
      List<Future<?>> all = new ArrayList<>();
      for (int i = 0; i < 64; i++) {
        all.add(pool.submit(() -> {
          go.await();
          if (r.tryAcquire(A)) {
            most.accumulateAndGet(reading.incrementAndGet(), Math::max);
            Thread.sleep(2); // the body being read
            reading.decrementAndGet();
            r.release(A);
          }
          return null;
        }));
      }
      go.countDown();
      for (Future<?> f : all) {
        f.get(60, TimeUnit.SECONDS);
      }
    }
    assertTrue(most.get() <= 8, "never more than the cap at once: " + most.get());
    assertEquals(0, r.addressesReading());
    return refused.get();
  }

  /**
   * A reader thread whose task has ended is on its way back to the pool for a moment, still
   * counted there as busy; a connection that starts a request then, with none being read, is
   * read, not refused (one reader, each task started once the last has ended).
   */
  @Test
  void aReadStartedOnceTheLastHasEndedIsNeverRefused() throws Exception {
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    try {
      InboundReaders r = new InboundReaders(1, 1, Duration.ZERO, Thread::new, refused::incrementAndGet);
      made.add(r);
      Executor e = r.executor(new IoDeadline(timer, Duration.ofSeconds(60), () -> { }));
      for (int i = 0; i < 2000; i++) {
        CountDownLatch ran = new CountDownLatch(1);
        try {
          e.execute(ran::countDown);
        } catch (RejectedExecutionException refusal) {
          throw new AssertionError("read " + i + " refused with none being read", refusal);
        }
        assertTrue(ran.await(10, TimeUnit.SECONDS), "read " + i + " ran");
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (r.readersInUse() != 0) {
          assertTrue(System.nanoTime() < until, "read " + i + " ended");
          Thread.onSpinWait();
        }
      }
      assertEquals(0, refused.get());
    } finally {
      timer.shutdownNow();
    }
  }

  @Test
  void waitFor_isOneSecondOrTheIoTimeoutIfShorter() {
    assertEquals(Duration.ofSeconds(1), InboundReaders.waitFor(Duration.ofSeconds(10)));
    assertEquals(Duration.ofMillis(300), InboundReaders.waitFor(Duration.ofMillis(300)));
  }

  @Test
  void badLimitsAreRejected() {
    assertThrows(IllegalArgumentException.class,
        () -> new InboundReaders(1, 1, Duration.ofMillis(-1), Thread::new, () -> { }));
    assertThrows(IllegalArgumentException.class,
        () -> new InboundReaders(1, 0, Duration.ZERO, Thread::new, () -> { }));
  }
}
