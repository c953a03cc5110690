package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.junit.jupiter.api.Test;

/**
 * The router takes a view per request ({@code livePeers}); the engine's Javadoc promises that
 * {@link GossipEngine#view()} never blocks on gossip. While gossip holds its lock (here: a
 * message being handled, stopped inside the lock by the clock it reads), a request thread
 * asking for the view after an earlier change must get the last view at once, not wait for the
 * lock: a snapshot being encoded or installed holds it for O(blocks).
 */
class ViewDoesNotWaitForGossipTest {

  /** True if {@code t} is parked on a read-write lock (the engine's is the only one here). */
  static boolean waitsForTheLock(Thread t) {
    Object blocker = LockSupport.getBlocker(t);
    return t.getState() == Thread.State.WAITING && blocker != null
        && blocker.getClass().getName().startsWith(ReentrantReadWriteLock.class.getName());
  }

  @Test
  void aRequestThreadGetsTheLastViewWhileGossipHoldsItsLock() throws Exception {
    SimulatedScheduler time = new SimulatedScheduler();
    boolean[] probe = {false};
    AtomicReference<Thread.State> requestThreadState = new AtomicReference<>();
    AtomicReference<GossipView> seen = new AtomicReference<>();
    GossipEngine[] engine = new GossipEngine[1];
    Clock clock = () -> {
      if (probe[0]) {
        probe[0] = false;
        // called by the gossip thread inside its lock: a request thread asks for the view now
        Thread request = new Thread(() -> seen.set(engine[0].view()));
        request.start();
        // until it got a view (TERMINATED) or parks on the engine's lock; other waits (class
        // loading, lambda linkage, a parallel test) are passing and spun through
        while (request.getState() != Thread.State.TERMINATED && !waitsForTheLock(request)) {
          Thread.onSpinWait();
        }
        requestThreadState.set(request.getState()); // parked on the lock: WAITING until we return
      }
      return time.nanoTime();
    };
    engine[0] = new GossipEngine(new PeerAddress("me", "sim:me"), 1,
        GossipConfig.builder().interval(Duration.ofMillis(100)).build(), List.of(), clock, time,
        new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> {});
    GossipEngine e = engine[0];
    PeerAddress a = new PeerAddress("a", "sim:a");
    PeerAddress b = new PeerAddress("b", "sim:b");
    e.handle(a, new Ack2(1, List.of(new Update(new DigestEntry("a", 1, 0, 1, 0, 0, false), null,
        0, List.of()))));
    GossipView before = e.view();
    assertEquals(1, before.peers().size());
    e.handle(a, new Ack2(1, List.of(new Update(new DigestEntry("a", 1, 0, 2, 0, 0, false), null,
        0, List.of())))); // a change since that view

    probe[0] = true;
    e.handle(b, new Ack2(1, List.of(new Update(new DigestEntry("b", 1, 0, 1, 0, 0, false), null,
        0, List.of()))));

    assertEquals(Thread.State.TERMINATED, requestThreadState.get(),
        "the request thread waited for the gossip lock");
    assertNotNull(seen.get());
    // once gossip is done, the next view shows the new peer
    assertNotSame(seen.get(), e.view());
    assertEquals(2, e.view().peers().size());
  }
}
