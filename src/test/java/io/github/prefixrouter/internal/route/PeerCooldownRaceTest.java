package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
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
  /** Where peer p1 listens. */
  static final PeerAddress P1 = new PeerAddress("p1", "10.0.0.1:7070");

  /** How long the race may go without a round ending before it is taken for stuck. */
  static final long STUCK_NANOS = TimeUnit.SECONDS.toNanos(20);

  /** Spins a thread waits for the next round before it yields its processor between looks. */
  static final int SPINS = 1_000;

  /**
   * Runs {@code a} and {@code b} on two threads, released together, on a fresh state each round,
   * then {@code check} on that state; returns the number of rounds that failed the check. A
   * thread waiting for the next round spins a while, then yields between looks, so that on a
   * loaded machine the other thread gets a processor; the race fails only when no round has
   * ended for {@link #STUCK_NANOS}, however long all of them take.
   */
  static int race(BiConsumer<PeerHealth.PeerState, Integer> op,
      java.util.function.Predicate<PeerHealth.PeerState> check) throws InterruptedException {
    return race(ROUNDS, i -> new PeerHealth.PeerState(), op, check);
  }

  /**
   * As {@link #race(BiConsumer, java.util.function.Predicate)}, for {@code rounds} rounds on
   * what {@code fresh} makes.
   */
  static <T> int race(int rounds, java.util.function.IntFunction<T> fresh,
      BiConsumer<T, Integer> op, java.util.function.Predicate<T> check)
      throws InterruptedException {
    java.util.List<T> states = new java.util.ArrayList<>(rounds);
    for (int i = 0; i < rounds; i++) {
      states.add(fresh.apply(i));
    }
    AtomicInteger go = new AtomicInteger(-1); // the round both threads may run
    AtomicInteger arrived = new AtomicInteger();
    AtomicInteger failures = new AtomicInteger();
    AtomicReference<Throwable> error = new AtomicReference<>();
    AtomicLong roundEnded = new AtomicLong(System.nanoTime()); // when a round last ended
    Thread[] threads = new Thread[2];
    for (int t = 0; t < 2; t++) {
      int who = t;
      threads[t] = new Thread(() -> {
        try {
          for (int r = 0; r < rounds; r++) {
            for (int spins = 0; go.get() < r; spins++) {
              if (spins < SPINS) {
                Thread.onSpinWait();
                continue;
              }
              Thread.yield();
              if (System.nanoTime() - roundEnded.get() > STUCK_NANOS) {
                throw new IllegalStateException("no round ended for "
                    + TimeUnit.NANOSECONDS.toSeconds(STUCK_NANOS) + " s, waiting in round " + r);
              }
            }
            op.accept(states.get(r), who);
            if (arrived.incrementAndGet() == 2 * (r + 1)) { // the last of the two: next round
              if (!check.test(states.get(r))) {
                failures.incrementAndGet();
              }
              roundEnded.set(System.nanoTime());
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
      while (t.isAlive()) {
        t.join(100);
        assertFalse(t.isAlive()
            && System.nanoTime() - roundEnded.get() > STUCK_NANOS + TimeUnit.SECONDS.toNanos(10),
            "a racing thread never ended, and no round has ended for 30 s");
      }
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

  /**
   * A forward's end sets its peer's cool-down after the forward stopped counting as outstanding;
   * a peer missing from the live set (the failure detector dropped it) is forgotten by a prune
   * meanwhile. The cool-down was set on the state the forward had captured, which nothing looked
   * up any more: the peer, back in the live set, was tried again at once.
   */
  @Test
  void aCooldownSetAfterAPruneForgotThePeerIsSeenByItsNextLookup() {
    PeerHealth health = new PeerHealth();
    PeerHealth.PeerState sentTo = health.get("p1"); // the state a forward there captured
    sentTo.forwarded();
    sentTo.answered(); // the forward's end: nothing outstanding any more
    health.prune(Set.of(), 0); // p1 is not live
    health.coolDownFailed("p1", 0, 0, LONG);
    assertTrue(health.get("p1").failed(LONG - 1), "the failure cool-down was lost");
    health.prune(Set.of(), 0);
    health.coolDownBusy("p1", 0, 0, LONG);
    assertTrue(health.get("p1").busy(LONG - 1), "the busy cool-down was lost");
  }

  /**
   * A cool-down set after a prune forgot the peer is about the incarnation the forward went to:
   * the peer, back in the live set restarted, is not cooled down by its old process's failure.
   */
  @Test
  void aCooldownSetAfterAPruneStaysWithTheIncarnationItIsAbout() {
    PeerHealth health = new PeerHealth();
    health.get("p1", 41);
    health.prune(Set.of(), 0); // p1 is not live
    health.coolDownFailed("p1", 41, 0, LONG);
    assertFalse(health.get("p1", 42).failed(0), "the restarted peer is cooled down");
  }

  /**
   * A forward counted after a prune forgot its peer (between its decision's lookup and its
   * count) makes the peer's state again about the incarnation the forward went to: what its end
   * teaches, a failure's cool-down or a miss, is not carried over to the peer restarted. It was
   * made about no incarnation, and the restarted peer's next lookup took it as its own.
   */
  @Test
  void aForwardCountedAfterAPruneStaysWithTheIncarnationItWentTo() {
    PeerHealth health = new PeerHealth();
    health.get("p1", 41); // the forward's decision
    health.prune(Set.of(), 0); // p1 is not live
    PeerHealth.PeerState sentTo = health.forwarded(P1, 41);
    sentTo.observeAccuracy(320, 0, 0, 1e9); // a miss where the whole prompt was estimated
    sentTo.answered();
    health.coolDownFailed("p1", 41, 0, LONG);
    PeerHealth.PeerState restarted = health.get("p1", 42);
    assertFalse(restarted.failed(0), "the restarted peer is cooled down");
    assertEquals(1.0, restarted.trust(0, 1e9), "the restarted peer is distrusted");
  }

  /**
   * A forward counted on a record about an earlier incarnation of its peer (made again by the
   * failure of a forward to the old process, after a prune forgot the peer) starts the record of
   * the forward's incarnation, as a lookup for it does. It counted on the old record, which the
   * next lookup replaced: decisions did not see it outstanding, and the old process's cool-down
   * was taken for the new one's until then.
   */
  @Test
  void aForwardCountedOnAnEarlierIncarnationsRecordStartsItsOwn() {
    PeerHealth health = new PeerHealth();
    health.get("p1", 42); // the forward's decision
    health.prune(Set.of(), 0); // p1 is not live
    health.coolDownFailed("p1", 41, 0, LONG); // a forward to the old process failed
    PeerHealth.PeerState counted = health.forwarded(P1, 42);
    assertSame(health.get("p1", 42), counted,
        "counted on a record the next lookup for its incarnation replaces");
    assertEquals(1, counted.outstanding);
    assertEquals(42, counted.generation);
    assertFalse(counted.failed(0), "the old process's failure cools the new one down");
  }

  /** The same, with the prune and the cool-down on two threads at once. */
  @Test
  void aCooldownSetWhileAPruneForgetsThePeerIsKept() throws InterruptedException {
    int lost = race(ROUNDS / 10, i -> {
      PeerHealth h = new PeerHealth();
      h.get("p1");
      return h;
    }, (h, who) -> {
      if (who == 0) {
        h.prune(Set.of(), 0);
      } else {
        h.coolDownFailed("p1", 0, 0, LONG);
      }
    }, h -> h.get("p1").failed(LONG - 1));
    assertEquals(0, lost, "rounds where the cool-down was lost to a prune");
  }

  /**
   * A forward counted while a prune forgets its peer is counted on the state the next lookup
   * finds, and that is the state it returns (the one the forward's end counts and learns on).
   */
  @Test
  void aForwardCountedWhileAPruneForgetsThePeerIsKept() throws InterruptedException {
    final class Round {
      final PeerHealth health = new PeerHealth();
      volatile PeerHealth.PeerState counted;
    }
    int lost = race(ROUNDS / 10, i -> {
      Round r = new Round();
      r.health.get("p1"); // looked up by the forward's decision
      return r;
    }, (r, who) -> {
      if (who == 0) {
        r.health.prune(Set.of(), 0);
      } else {
        r.counted = r.health.forwarded(P1, 0);
      }
    }, r -> r.health.get("p1") == r.counted && r.counted.outstanding == 1);
    assertEquals(0, lost, "rounds where the forward was counted on a state the prune forgot");
  }

  /** A prune still forgets a peer that is not live, with nothing outstanding or cooling down. */
  @Test
  void pruneForgetsOnlyIdlePeersThatAreNotLive() {
    PeerHealth health = new PeerHealth();
    health.get("idle");
    health.get("live");
    health.get("outstanding").forwarded();
    health.coolDownFailed("failed", 0, 0, LONG);
    health.coolDownBusy("busy", 0, 0, LONG);
    health.prune(Set.of("live"), SHORT);
    assertEquals(4, health.size());
    health.get("outstanding").answered();
    health.prune(Set.of("live"), LONG);
    assertEquals(1, health.size());
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
