package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** A request is counted once, by its first answer, whichever path gives it. */
class ClientLatencyTest {

  private static final long MS = 1_000_000L;

  /** How long a thread of the lockstep test may make no step before it is taken for stuck. */
  private static final long STUCK_NANOS = 20_000 * MS;

  private static long count(ClientLatency.Snapshot s, String served) {
    return s.durations().get(served).count();
  }

  private static long total(ClientLatency.Snapshot s) {
    return ClientLatency.SERVED.stream().mapToLong(served -> count(s, served)).sum();
  }

  @Test
  void aSecondAnswerIsNotCounted() {
    AtomicLong now = new AtomicLong();
    ClientLatency latency = new ClientLatency(now::get);
    ClientLatency.Request r = latency.arrived();
    now.set(5 * MS);
    r.answered(ClientLatency.LOCAL, 2 * MS);
    now.set(50 * MS);
    r.answered(ClientLatency.FAILED); // the endpoint gives up the write it has finished
    r.answered(ClientLatency.LOCAL, 3 * MS);
    ClientLatency.Snapshot s = latency.snapshot();
    assertEquals(1, count(s, ClientLatency.LOCAL));
    assertEquals(0, count(s, ClientLatency.FAILED));
    assertEquals(0.005, s.durations().get(ClientLatency.LOCAL).sumSeconds(), 1e-12);
    assertEquals(1, s.firstOutputs().get(ClientLatency.LOCAL).count());
    assertEquals(0.002, s.firstOutputs().get(ClientLatency.LOCAL).sumSeconds(), 1e-12);
    // a wrong served is refused, counted or not
    assertThrows(IllegalArgumentException.class, () -> r.answered("elsewhere"));
    assertThrows(IllegalArgumentException.class,
        () -> latency.arrived().answered("elsewhere"));
    assertEquals(1, total(latency.snapshot()));
  }

  /**
   * The write's completion and the endpoint giving the write up answer a request from two
   * threads at once: each of 20,000 requests, answered by both in step, is counted once, under
   * one of the two. A thread waiting for the other spins a while, then yields between looks, so
   * that on a loaded machine the other gets a processor; it gives up only when the other has
   * made no step for 20 s, however long the whole takes.
   */
  @Test
  void requestsAnsweredFromTwoThreadsAtOnceAreEachCountedOnce() throws InterruptedException {
    ClientLatency latency = new ClientLatency(System::nanoTime);
    int n = 20_000;
    List<ClientLatency.Request> requests = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      requests.add(latency.arrived());
    }
    AtomicInteger[] reached = {new AtomicInteger(-1), new AtomicInteger(-1)};
    AtomicReference<Throwable> failed = new AtomicReference<>();
    List<Thread> threads = new ArrayList<>();
    String[] served = {ClientLatency.LOCAL, ClientLatency.FAILED};
    for (int t = 0; t < 2; t++) {
      int me = t;
      AtomicInteger other = reached[1 - t];
      Thread th = new Thread(() -> {
        try {
          for (int i = 0; i < n; i++) {
            reached[me].set(i);
            // in step: neither runs ahead of the other by more than one request
            int seen = other.get();
            long seenAt = 0;
            for (int spins = 0; other.get() < i - 1 && failed.get() == null; spins++) {
              if (spins < 1_000) {
                Thread.onSpinWait();
                continue;
              }
              Thread.yield();
              long now = System.nanoTime();
              if (seenAt == 0 || other.get() != seen) {
                seen = other.get();
                seenAt = now;
              } else if (now - seenAt > STUCK_NANOS) {
                throw new IllegalStateException("the other thread made no step for 20 s, at "
                    + seen + " while this one waits at " + i);
              }
            }
            requests.get(i).answered(served[me],
                me == 0 ? System.nanoTime() : ClientLatency.NO_OUTPUT);
          }
        } catch (Throwable e) {
          failed.compareAndSet(null, e);
        }
      }, "answer-" + t);
      th.setDaemon(true);
      threads.add(th);
    }
    threads.forEach(Thread::start);
    long steps = -2;
    long stepAt = System.nanoTime();
    for (Thread th : threads) {
      while (th.isAlive()) {
        th.join(100);
        long made = reached[0].get() + (long) reached[1].get();
        if (made != steps) {
          steps = made;
          stepAt = System.nanoTime();
        }
        assertFalse(th.isAlive() && System.nanoTime() - stepAt > STUCK_NANOS + MS * 10_000,
            "an answering thread did not finish, and neither made a step for 30 s");
      }
    }
    assertEquals(null, failed.get());
    ClientLatency.Snapshot s = latency.snapshot();
    assertEquals(n, total(s), "requests counted, " + count(s, ClientLatency.LOCAL) + " local and "
        + count(s, ClientLatency.FAILED) + " failed");
    assertEquals(count(s, ClientLatency.LOCAL), s.firstOutputs().get(ClientLatency.LOCAL).count(),
        "first outputs counted with their requests");
  }
}
