package io.github.prefixrouter.internal.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** {@link BodyBudget.Share#read}: a body's share follows its bytes, not its Content-Length. */
class BodyBudgetTest {

  private static final int KIB = 1 << 10;
  private static final int MIB = 1 << 20;

  private final BodyBudget budget = new BodyBudget(64 * MIB, Duration.ZERO, () -> { });

  /** A stream of {@code length} bytes, 1,000 at a time, that checks the share at every read. */
  private static InputStream trickle(int length, BodyBudget.Share share, int firstStep) {
    return new InputStream() {
      private int sent;

      @Override
      public int read() {
        byte[] one = new byte[1];
        return read(one, 0, 1) < 0 ? -1 : one[0];
      }

      @Override
      public int read(byte[] b, int off, int len) {
        long most = Math.max(firstStep, 2L * sent);
        assertTrue(share.held() <= most, "holding " + share.held() + " with " + sent
            + " bytes arrived, more than " + most);
        if (sent == length) {
          return -1;
        }
        int n = Math.min(Math.min(len, 1000), length - sent);
        sent += n;
        return n;
      }
    };
  }

  /**
   * A share resized gives back what it holds beyond the size, or takes what it lacks, as a step
   * is taken: refused, and ended, when the budget cannot give it in time.
   */
  @Test
  void aShareResizedGivesBackOrTakesTheDifference() {
    BodyBudget small = new BodyBudget(MIB, Duration.ofMillis(50), () -> {});
    try (BodyBudget.Share share = small.share(); BodyBudget.Share other = small.share()) {
      share.take(600 * KIB);
      share.resize(100 * KIB);
      assertEquals(100 * KIB, share.held());
      assertEquals(MIB - 100 * KIB, small.available());
      share.resize(300 * KIB);
      assertEquals(300 * KIB, share.held());
      other.take(600 * KIB);
      assertThrows(BodyBudget.Refused.class, () -> share.resize(500 * KIB));
      assertEquals(0, share.held(), "refused, it gave back all it held");
      assertEquals(MIB - 600 * KIB, small.available());
    }
    assertEquals(MIB, small.available());
  }

  @Test
  void aBodyHoldsTwiceWhatHasArrivedAtMostNotWhatItDeclares() throws IOException {
    for (long declared : new long[] {8 * MIB, -1}) {
      try (BodyBudget.Share share = budget.share()) {
        BodyBudget.Body body =
            share.read(trickle(300 * KIB, share, 64 * KIB), declared, 8 * MIB, 64 * KIB);
        assertEquals(300 * KIB, body.length());
        assertEquals(512 * KIB, share.held(), "the step its bytes reached, not 8 MiB");
        assertEquals(share.held(), body.bytes().length);
      }
      assertEquals(64 * MIB, budget.available());
    }
  }

  @Test
  void aBodyStopsAtItsLengthOrItsCap() throws IOException {
    try (BodyBudget.Share share = budget.share()) {
      BodyBudget.Body body = share.read(trickle(100 * KIB, share, 8 * KIB), 100 * KIB, MIB,
          8 * KIB);
      assertEquals(100 * KIB, body.length());
      assertEquals(100 * KIB, share.held(), "the last step is the exact length");
    }
    try (BodyBudget.Share share = budget.share()) {
      assertEquals(0, share.read(new ByteArrayInputStream(new byte[0]), 0, MIB, 8 * KIB)
          .length());
      assertEquals(0, share.held());
      assertNull(share.read(new ByteArrayInputStream(new byte[MIB + 1]), -1, MIB, 8 * KIB));
    }
    assertEquals(64 * MIB, budget.available());
  }

  /**
   * A body of exactly its cap is read whole, whatever the steps its buffer grew by: a step that
   * ends one byte short of the cap grows once more, it does not take the byte after it for a
   * body past the cap.
   */
  @Test
  void aBodyOfExactlyItsCapIsReadWhateverItsSteps() throws IOException {
    for (int firstStep : new int[] {9, 5, 10, 3}) {
      try (BodyBudget.Share share = budget.share()) {
        BodyBudget.Body body = share.read(new ByteArrayInputStream(new byte[10]), -1, 10,
            firstStep);
        assertEquals(10, body.length(), "first step " + firstStep);
        assertNull(share.read(new ByteArrayInputStream(new byte[11]), -1, 10, firstStep));
      }
    }
  }

  /** One share may take the whole budget: the least budget is what one body can take. */
  @Test
  void aShareMayTakeTheWholeBudget() {
    BodyBudget b = new BodyBudget(100, Duration.ZERO, () -> { });
    try (BodyBudget.Share share = b.share()) {
      share.take(100);
      assertEquals(0, b.available());
      assertThrows(BodyBudget.Refused.class, () -> b.share().take(1));
    }
    assertThrows(BodyBudget.Refused.class, () -> b.share().take(101));
    assertEquals(100, b.available());
  }

  /**
   * A stream that fails with an unchecked exception (the JDK server's stream of a chunked body
   * whose chunk size overflows an int) fails the read with an {@link IOException}, closed first,
   * and the share gives back what it held. The exception went through to the caller, which
   * answered it as an internal error, and left the stream for the server to drain, which threw
   * again and left the connection open.
   */
  @Test
  void aStreamThatFailsUncheckedIsClosedAndFailsTheReadWithAnIoException() {
    for (int failAt : new int[] {0, 5}) {
      boolean[] closed = new boolean[1];
      InputStream in = new InputStream() {
        private int sent;

        @Override
        public int read() {
          throw new IndexOutOfBoundsException();
        }

        @Override
        public int read(byte[] b, int off, int len) {
          if (sent >= failAt) {
            throw new IndexOutOfBoundsException("len " + len);
          }
          sent++;
          return 1;
        }

        @Override
        public void close() {
          closed[0] = true;
          throw new IndexOutOfBoundsException("again, while draining");
        }
      };
      try (BodyBudget.Share share = budget.share()) {
        IOException e = assertThrows(IOException.class,
            () -> share.read(in, failAt, MIB, 8 * KIB));
        assertInstanceOf(IndexOutOfBoundsException.class, e.getCause());
        assertTrue(closed[0], "the stream was closed");
      }
      assertEquals(64 * MIB, budget.available());
    }
  }

  /**
   * A share closed from another thread while one of its steps waits (an engine's answer whose
   * request is cancelled or times out) ends the wait at once, holds nothing, and takes nothing
   * more: the step that was waiting is not taken later behind its close, which would have held
   * it for good.
   */
  @Test
  void aShareClosedWhileItsStepWaitsEndsTheWaitAndTakesNothingMore() throws Exception {
    BodyBudget b = new BodyBudget(MIB, Duration.ofSeconds(30), () -> { });
    BodyBudget.Share waiting = b.share();
    waiting.take(KIB);
    BodyBudget.Share other = b.share();
    other.take(MIB - KIB);
    other.give(KIB); // not enough for the step below
    java.util.concurrent.CompletableFuture<Throwable> step =
        onOwnThread(() -> {
          try {
            waiting.take(MIB / 2);
            return null;
          } catch (RuntimeException e) {
            return e;
          }
        });
    Thread.sleep(100);
    long start = System.nanoTime();
    waiting.close();
    Throwable t = step.get(5, java.util.concurrent.TimeUnit.SECONDS);
    assertTrue(System.nanoTime() - start < java.util.concurrent.TimeUnit.SECONDS.toNanos(5));
    assertInstanceOf(BodyBudget.Refused.class, t);
    assertEquals(0, waiting.held());
    other.close();
    assertEquals(MIB, b.available(), "the closed share holds nothing");
    assertThrows(BodyBudget.Refused.class, () -> waiting.take(1));
    assertEquals(MIB, b.available(), "a closed share takes nothing more");
  }

  /**
   * Shares that all wait for more with none giving any back are refused one at a time, each
   * refusal giving the others room: a refused share gives back all it holds at once, and is
   * ended, so the next waiter takes its step instead of being refused too. The refused share gave
   * its holdings back only when its owner closed it, after handling the refusal (on another
   * thread, for an engine's answer), and the waiters whose wait ran out meanwhile were refused
   * as well: 48 streams held open at the least budget for them were all refused, once, under
   * load.
   */
  @Test
  void aRefusedShareGivesBackAtOnceSoTheOtherWaiterTakesItsStep() throws Exception {
    BodyBudget b = new BodyBudget(MIB, Duration.ofMillis(200), () -> { });
    BodyBudget.Share first = b.share();
    BodyBudget.Share second = b.share();
    first.take(MIB / 2);
    second.take(MIB / 2);
    // each waits for a step that only the other's holdings can give; neither owner closes its
    // share after a refusal (an owner slow to handle it)
    java.util.List<java.util.concurrent.CompletableFuture<Throwable>> steps =
        new java.util.ArrayList<>();
    for (BodyBudget.Share s : java.util.List.of(first, second)) {
      steps.add(onOwnThread(() -> {
        try {
          s.take(MIB / 4);
          return null;
        } catch (RuntimeException e) {
          return e;
        }
      }));
    }
    int refused = 0;
    for (java.util.concurrent.CompletableFuture<Throwable> step : steps) {
      Throwable t = step.get(10, java.util.concurrent.TimeUnit.SECONDS);
      if (t != null) {
        assertInstanceOf(BodyBudget.Refused.class, t);
        refused++;
      }
    }
    assertEquals(1, refused, "both waiters were refused: the refused share held its bytes "
        + "until its owner closed it");
    BodyBudget.Share gone = first.held() == 0 ? first : second;
    BodyBudget.Share kept = gone == first ? second : first;
    assertEquals(MIB / 2 + MIB / 4, kept.held());
    assertEquals(MIB / 4, b.available());
    assertThrows(BodyBudget.Refused.class, () -> gone.take(1), "the refused share is ended");
    gone.close();
    kept.close();
    assertEquals(MIB, b.available());
  }

  /**
   * What a refusal gives back is not progress: it does not start the others' waits again, so
   * the waiters its room does not fit are refused in the same moment, not one wait after
   * another. Three shares hold a third of the budget each and wait for two thirds more: two are
   * refused together, and the third takes their room. (Counted as progress, each refusal gave
   * the next waiter a whole wait more: a burst of 40 answers beyond the engine's budget took 40 s
   * to clear, holding their connections and threads.)
   */
  @Test
  void refusalsTheirRoomDoesNotFitComeTogetherNotOneWaitApart() throws Exception {
    long wait = java.util.concurrent.TimeUnit.SECONDS.toNanos(2);
    BodyBudget b = new BodyBudget(3 * MIB, Duration.ofNanos(wait), () -> { });
    java.util.List<BodyBudget.Share> shares = new java.util.ArrayList<>();
    for (int i = 0; i < 3; i++) {
      BodyBudget.Share s = b.share();
      s.take(MIB);
      shares.add(s);
    }
    java.util.List<java.util.concurrent.CompletableFuture<Long>> steps =
        new java.util.ArrayList<>();
    for (BodyBudget.Share s : shares) {
      steps.add(onOwnThread(() -> {
        try {
          s.take(2 * MIB);
          return -1L; // taken
        } catch (BodyBudget.Refused e) {
          return System.nanoTime();
        }
      }));
    }
    java.util.List<Long> refusedAt = new java.util.ArrayList<>();
    for (java.util.concurrent.CompletableFuture<Long> step : steps) {
      long at = step.get(20, java.util.concurrent.TimeUnit.SECONDS);
      if (at >= 0) {
        refusedAt.add(at);
      }
    }
    assertEquals(2, refusedAt.size(), "the third waiter did not take the room of the two refused");
    long apart = Math.abs(refusedAt.get(0) - refusedAt.get(1));
    assertTrue(apart < wait / 2, "the second refusal came " + apart / 1_000_000
        + " ms after the first, with waits of " + wait / 1_000_000 + " ms: the first refusal's "
        + "room restarted its wait");
    assertEquals(0, b.available());
    for (BodyBudget.Share s : shares) {
      s.close();
    }
    assertEquals(3 * MIB, b.available());
  }

  /**
   * Runs {@code work} on a thread of its own: steps that wait side by side. (Not the common
   * pool, which from JDK 25 is also {@code supplyAsync}'s executor on 1 or 2 processors, and
   * there has one thread: it ran such steps one after another.)
   */
  private static <T> java.util.concurrent.CompletableFuture<T> onOwnThread(
      java.util.function.Supplier<T> work) {
    java.util.concurrent.CompletableFuture<T> f = new java.util.concurrent.CompletableFuture<>();
    Thread t = new Thread(() -> {
      try {
        f.complete(work.get());
      } catch (Throwable e) {
        f.completeExceptionally(e);
      }
    }, "body-budget-step");
    t.setDaemon(true);
    t.start();
    return f;
  }
}
