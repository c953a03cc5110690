package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiConsumer;
import org.junit.jupiter.api.Test;

/**
 * A peer's cool-downs are set by whichever threads end forwards there, at once: the one that
 * lasts longest must win, whatever the interleaving. Each cool-down was a read of the running one
 * (or of the clock) followed by a write, so a thread that had read before another wrote a longer
 * one overwrote it with its own shorter one, and the peer was tried again too soon.
 */
class PeerCooldownRaceTest {

  static final long SHORT = 1_000_000L;
  static final long LONG = 1_000_000_000L;
  static final int ROUNDS = 20_000;

  /**
   * Runs {@code a} and {@code b} on two threads, released together, on a fresh state each round,
   * then {@code check} on that state; returns the number of rounds that failed the check.
   */
  static int race(BiConsumer<PeerHealth.PeerState, Integer> op,
      java.util.function.Predicate<PeerHealth.PeerState> check) throws InterruptedException {
    PeerHealth.PeerState[] states = new PeerHealth.PeerState[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
      states[i] = new PeerHealth.PeerState();
    }
    AtomicInteger go = new AtomicInteger(-1); // the round both threads may run
    AtomicInteger arrived = new AtomicInteger();
    AtomicInteger failures = new AtomicInteger();
    AtomicReference<Throwable> error = new AtomicReference<>();
    long giveUpAt = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    Thread[] threads = new Thread[2];
    for (int t = 0; t < 2; t++) {
      int who = t;
      threads[t] = new Thread(() -> {
        try {
          for (int r = 0; r < ROUNDS; r++) {
            while (go.get() < r) {
              if (System.nanoTime() - giveUpAt > 0) {
                throw new IllegalStateException("stalled in round " + r);
              }
              Thread.onSpinWait();
            }
            op.accept(states[r], who);
            if (arrived.incrementAndGet() == 2 * (r + 1)) { // the last of the two: next round
              if (!check.test(states[r])) {
                failures.incrementAndGet();
              }
              go.set(r + 1);
            }
          }
        } catch (Throwable e) {
          error.set(e);
          go.set(Integer.MAX_VALUE);
        }
      }, "cooldown-race-" + t);
      threads[t].setDaemon(true);
    }
    for (Thread t : threads) {
      t.start();
    }
    go.set(0);
    for (Thread t : threads) {
      t.join(TimeUnit.SECONDS.toMillis(30));
      assertFalse(t.isAlive(), "a racing thread never ended");
    }
    if (error.get() != null) {
      throw new AssertionError(error.get());
    }
    return failures.get();
  }

  @Test
  void aLongerFailureCooldownSetMeanwhileIsKeptByAShorterOne() throws InterruptedException {
    // one forward's garbage answer (the busy cool-down, as a failure one) races another's
    // retryable failure (the failure cool-down) at the same reading of the clock
    int lost = race((st, who) -> st.coolDownFailed(0, who == 0 ? SHORT : LONG),
        st -> st.failed(LONG - 1));
    assertEquals(0, lost, "rounds where the longer cool-down was lost");
  }

  @Test
  void aFailureCooldownStartedLaterIsKeptByOneStartedEarlierAndWrittenAfterIt()
      throws InterruptedException {
    // thread 0 read the clock first (at 0), thread 1 after it (at SHORT): whichever writes
    // last, the cool-down runs until SHORT + LONG
    int lost = race((st, who) -> {
      if (who == 0) {
        st.coolDownFailed(0, LONG);
      } else {
        st.coolDownFailed(SHORT, LONG);
      }
    }, st -> st.failed(SHORT + LONG - 1));
    assertEquals(0, lost, "rounds where the later cool-down was cut short");
  }

  @Test
  void aBusyCooldownStartedLaterIsKeptByOneStartedEarlierAndWrittenAfterIt()
      throws InterruptedException {
    int lost = race((st, who) -> st.coolDownBusy(who == 0 ? 0 : SHORT, LONG),
        st -> st.busy(SHORT + LONG - 1));
    assertEquals(0, lost, "rounds where the later busy cool-down was cut short");
  }

  @Test
  void aCooldownNeverShortensOneRunning() {
    PeerHealth.PeerState st = new PeerHealth.PeerState();
    st.coolDownFailed(0, LONG);
    st.coolDownFailed(SHORT, 0);
    st.coolDownFailed(SHORT, SHORT);
    assertTrue(st.failed(LONG - 1));
    st.coolDownBusy(0, LONG);
    st.coolDownBusy(SHORT, SHORT);
    assertTrue(st.busy(LONG - 1));
    assertFalse(st.busy(LONG));
  }
}
