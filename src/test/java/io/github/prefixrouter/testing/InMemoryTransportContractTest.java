package io.github.prefixrouter.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/**
 * The in-memory transport keeps the transport contract, on a perfect and on a delayed network;
 * and the network keeps its own model.
 */
class InMemoryTransportContractTest {

  @Nested
  class PerfectLinks extends InMemoryTransportKit {
    PerfectLinks() {
      super(1);
    }
  }

  @Nested
  class DelayedJitteryLinks extends InMemoryTransportKit {
    DelayedJitteryLinks() {
      super(2);
      net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(20))
          .withJitter(Duration.ofMillis(10)).withReorder(0.3));
    }
  }

  private final SimulatedScheduler sim = new SimulatedScheduler();
  private final InMemoryNetwork net = new InMemoryNetwork(sim, 3);

  private Transport started(String nodeId) {
    Transport t = net.transport(nodeId);
    t.start((from, payload) -> CompletableFuture.completedFuture(payload));
    return t;
  }

  /** Sent, delivered and dropped messages so far. */
  private List<Long> counts() {
    return List.of(net.messagesSent(), net.messagesDelivered(), net.messagesDropped());
  }

  @Test
  void aMessageThatFindsNobodyAtItsAddressIsDroppedNotDelivered() {
    // a message to an address nobody registered was counted as delivered
    Transport a = started("a");
    a.send(InMemoryNetwork.addressOf("ghost"), new byte[] {1});
    sim.runUntilIdle(1000);
    assertEquals(List.of(1L, 0L, 1L), counts(), "to an address nobody registered");
    Transport b = net.transport("b");
    a.send(b.localAddress(), new byte[] {2});
    sim.runUntilIdle(1000);
    assertEquals(List.of(2L, 0L, 2L), counts(), "to a transport not started");
    b.start((from, payload) -> CompletableFuture.completedFuture(payload));
    a.send(b.localAddress(), new byte[] {3});
    sim.runUntilIdle(1000);
    assertEquals(List.of(3L, 1L, 2L), counts(), "to a started transport");
    a.send(new PeerAddress("c", b.localAddress().address()), new byte[] {4});
    sim.runUntilIdle(1000);
    assertEquals(List.of(4L, 1L, 3L), counts(), "to another node's address");
    b.close();
    a.send(b.localAddress(), new byte[] {5});
    sim.runUntilIdle(1000);
    assertEquals(List.of(5L, 1L, 4L), counts(), "to a closed transport");
    // a request to nobody: the request is dropped, its refusal delivered to the requester
    CompletableFuture<byte[]> f =
        a.request(InMemoryNetwork.addressOf("ghost"), new byte[] {6}, Duration.ofSeconds(1));
    sim.runUntilIdle(1000);
    assertTrue(f.isCompletedExceptionally());
    assertEquals(List.of(7L, 2L, 5L), counts(), "a refused request");
  }

  @Test
  void aLinkDelayBeyondALongOfNanosecondsIsRefusedWhenTheLinkIsMade() {
    // such a link was accepted, and the first message sent over it threw ArithmeticException
    Duration years300 = Duration.ofDays(300 * 365);
    for (Supplier<InMemoryNetwork.Link> make : List.<Supplier<InMemoryNetwork.Link>>of(
        () -> InMemoryNetwork.Link.delay(years300),
        () -> InMemoryNetwork.Link.delay(Duration.ofSeconds(Long.MAX_VALUE)),
        () -> InMemoryNetwork.Link.delay(Duration.ofNanos(Long.MAX_VALUE)),
        () -> InMemoryNetwork.Link.PERFECT.withJitter(years300),
        () -> InMemoryNetwork.Link.delay(Duration.ofDays(200 * 365))
            .withJitter(Duration.ofDays(100 * 365)))) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, make::get);
      assertTrue(e.getMessage().startsWith("delay plus jitter must be less than "
          + Long.MAX_VALUE + " ns"), e.getMessage());
    }
  }

  @Test
  void theLongestLinkCarriesMessagesEvenWhenReorderingDelaysThemFurther() {
    // the longest link with every message reordered: the extra delay took the sum past a long
    // of nanoseconds, and sending threw
    InMemoryNetwork.Link longest = new InMemoryNetwork.Link(
        Duration.ofNanos(Long.MAX_VALUE - 2), Duration.ofNanos(1), 0, 0, 1);
    net.setLink("a", "b", longest);
    Transport a = started("a");
    int[] got = new int[1];
    net.transport("b").start(new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        got[0]++;
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(payload);
      }
    });
    for (int i = 0; i < 20; i++) {
      a.send(InMemoryNetwork.addressOf("b"), new byte[] {1});
    }
    sim.runUntilIdle(1000);
    assertEquals(20, got[0]);
    assertTrue(sim.nanoTime() >= Long.MAX_VALUE - 2, "not before the link's delay");
  }

  @Test
  void aLinksSettingsAndCutsAreItsOwnWhateverItsNodeIds() {
    // links were keyed by "from->to", and node ids may hold "->": the link a -> b->c and the
    // link a->b -> c had one key, so cutting or delaying one cut or delayed the other
    int[] got = new int[2];
    Transport a = started("a");
    Transport ab = started("a->b");
    net.transport("b->c").start((from, payload) -> {
      throw new AssertionError("requests only");
    });
    net.transport("c").start(new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        got[payload[0]]++;
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(payload);
      }
    });
    net.partitionOneWay("a", "b->c");
    ab.send(InMemoryNetwork.addressOf("c"), new byte[] {0});
    sim.runUntilIdle(1000);
    assertEquals(1, got[0], "a->b's message to c was cut by the partition of a from b->c");
    net.heal();
    net.setLink("a", "b->c", InMemoryNetwork.Link.PERFECT.withLoss(1));
    ab.send(InMemoryNetwork.addressOf("c"), new byte[] {1});
    sim.runUntilIdle(1000);
    assertEquals(1, got[1], "a->b's link to c took the settings of a's link to b->c");
    net.setLink("a", "b->c", InMemoryNetwork.Link.PERFECT);
    net.partition(java.util.Set.of("a->b"), java.util.Set.of("c"));
    a.send(InMemoryNetwork.addressOf("b->c"), new byte[] {0});
    sim.runUntilIdle(1000);
    assertEquals(List.of(3L, 3L, 0L), counts(),
        "a's message to b->c was cut by the partition of a->b from c");
  }

  @Test
  void aRequestToNobodyIsRefusedAfterARoundTrip() {
    // the refusal travels back like an answer would: 30 ms there and 20 ms back
    net.setLink("a", "ghost", InMemoryNetwork.Link.delay(Duration.ofMillis(30)));
    net.setLink("ghost", "a", InMemoryNetwork.Link.delay(Duration.ofMillis(20)));
    Transport a = started("a");
    CompletableFuture<byte[]> f =
        a.request(InMemoryNetwork.addressOf("ghost"), new byte[] {1}, Duration.ofSeconds(1));
    sim.advanceBy(Duration.ofMillis(50).toNanos() - 1);
    assertFalse(f.isDone(), "refused before the refusal could have come back");
    sim.advanceBy(1);
    assertEquals(TransportException.Kind.UNREACHABLE, kindOf(f));
    // a refusal cut on its way back leaves the requester to its timeout
    net.partitionOneWay("ghost", "a");
    CompletableFuture<byte[]> g =
        a.request(InMemoryNetwork.addressOf("ghost"), new byte[] {2}, Duration.ofSeconds(1));
    sim.runUntilIdle(1000);
    assertEquals(TransportException.Kind.TIMEOUT, kindOf(g));
  }

  @Test
  void aNodeRestartedAtAnotherAddressIsReachedThereAndRefusedAtItsOldOne() {
    Transport a = started("a");
    Transport b = started("b");
    PeerAddress moved = new PeerAddress("b", "mem:b-moved");
    assertThrows(IllegalStateException.class, () -> net.transport(moved),
        "a second open transport of node b");
    assertThrows(IllegalStateException.class,
        () -> net.transport(new PeerAddress("c", InMemoryNetwork.addressOf("b").address())),
        "a second open transport at b's address");
    b.close();
    Transport again = net.transport(moved);
    again.start((from, payload) -> CompletableFuture.completedFuture(new byte[] {7}));
    assertEquals(moved, again.localAddress());
    CompletableFuture<byte[]> old =
        a.request(InMemoryNetwork.addressOf("b"), new byte[] {1}, Duration.ofSeconds(1));
    CompletableFuture<byte[]> there = a.request(moved, new byte[] {2}, Duration.ofSeconds(1));
    sim.runUntilIdle(1000);
    assertEquals(TransportException.Kind.UNREACHABLE, kindOf(old),
        "a request to b's old address, where nobody listens now");
    assertEquals(7, there.join()[0], "b's answer at its new address");
  }

  @Test
  void anAnswerThatFindsItsRequestNoLongerPendingIsDroppedNotDelivered() {
    // such answers were counted as delivered to a pending request
    Transport a = started("a");
    started("b");
    net.setLink("b", "a", InMemoryNetwork.Link.delay(Duration.ofSeconds(2)));
    CompletableFuture<byte[]> late =
        a.request(InMemoryNetwork.addressOf("b"), new byte[] {1}, Duration.ofSeconds(1));
    sim.runUntilIdle(1000);
    assertEquals(TransportException.Kind.TIMEOUT, kindOf(late));
    assertEquals(List.of(2L, 1L, 1L), counts(), "the request delivered, its late answer dropped");
    // a refusal arriving after the request timed out
    net.setLink("ghost", "a", InMemoryNetwork.Link.delay(Duration.ofSeconds(2)));
    CompletableFuture<byte[]> refused =
        a.request(InMemoryNetwork.addressOf("ghost"), new byte[] {2}, Duration.ofSeconds(1));
    sim.runUntilIdle(1000);
    assertEquals(TransportException.Kind.TIMEOUT, kindOf(refused));
    assertEquals(List.of(4L, 1L, 3L), counts(), "the request refused, its late refusal dropped");
    // a duplicated request runs the handler twice; the second answer finds nobody waiting
    net.setLink("a", "b", InMemoryNetwork.Link.PERFECT.withDuplicate(1));
    CompletableFuture<byte[]> twice =
        a.request(InMemoryNetwork.addressOf("b"), new byte[] {3}, Duration.ofSeconds(10));
    sim.runUntilIdle(1000);
    assertEquals(3, twice.join()[0]);
    assertEquals(List.of(7L, 4L, 4L), counts(),
        "two copies of the request and the first answer delivered, the second answer dropped");
    // an answer arriving after the requester's transport closed
    CompletableFuture<byte[]> closed =
        a.request(InMemoryNetwork.addressOf("b"), new byte[] {4}, Duration.ofSeconds(10));
    net.setLink("a", "b", InMemoryNetwork.Link.PERFECT);
    sim.advanceBy(Duration.ofSeconds(1).toNanos());
    a.close();
    sim.runUntilIdle(1000);
    assertEquals(TransportException.Kind.CLOSED, kindOf(closed));
    assertEquals(List.of(10L, 6L, 6L), counts(), "both answers to a closed requester dropped");
  }

  @Test
  void callsFromManyThreadsAtOnceUseTheSchedulerOneAtATime() throws InterruptedException {
    // a request's timeout timer was scheduled outside the network's lock: requests from several
    // threads at once used the scheduler (a simulated one is not thread-safe) concurrently
    java.util.concurrent.atomic.AtomicInteger inside =
        new java.util.concurrent.atomic.AtomicInteger();
    java.util.concurrent.atomic.AtomicInteger overlaps =
        new java.util.concurrent.atomic.AtomicInteger();
    io.github.prefixrouter.spi.Scheduler oneAtATime = (delay, task) -> {
      if (inside.incrementAndGet() > 1) {
        overlaps.incrementAndGet();
      }
      try {
        Thread.sleep(1); // long enough for another caller to come in
        return sim.schedule(delay, task);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      } finally {
        inside.decrementAndGet();
      }
    };
    InMemoryNetwork checked =
        new InMemoryNetwork(sim, oneAtATime, new java.util.SplittableRandom(5));
    Transport a = checked.transport("a");
    a.start((from, payload) -> CompletableFuture.completedFuture(payload));
    Transport b = checked.transport("b");
    b.start((from, payload) -> CompletableFuture.completedFuture(payload));
    java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
    List<CompletableFuture<byte[]>> fs = new java.util.concurrent.CopyOnWriteArrayList<>();
    List<Thread> threads = new java.util.ArrayList<>();
    for (int t = 0; t < 4; t++) {
      byte tb = (byte) t;
      Thread th = new Thread(() -> {
        try {
          go.await();
        } catch (InterruptedException e) {
          return;
        }
        for (int i = 0; i < 10; i++) {
          fs.add(a.request(b.localAddress(), new byte[] {tb, (byte) i}, Duration.ofSeconds(1)));
          a.send(b.localAddress(), new byte[] {tb, (byte) i});
        }
      });
      th.start();
      threads.add(th);
    }
    go.countDown();
    for (Thread th : threads) {
      th.join(30_000);
      assertFalse(th.isAlive(), "a caller never finished");
    }
    assertEquals(0, overlaps.get(), "calls used the scheduler at the same time");
    sim.runUntilIdle(10_000);
    assertEquals(40, fs.size());
    assertTrue(fs.stream().allMatch(f -> f.isDone() && !f.isCompletedExceptionally()),
        "every request answered");
  }

  @Test
  void aRequestWhoseCallerCancelsIsLetGoOfAtOnce() {
    // the contract: a cancelled request is let go of as a failed one; its timeout timer stayed
    // queued and its entry held until the timeout, and a late answer counted as delivered
    Transport a = started("a");
    Transport b = net.transport("b");
    CompletableFuture<byte[]> never = new CompletableFuture<>();
    b.start((from, payload) -> never);
    CompletableFuture<byte[]> f =
        a.request(b.localAddress(), new byte[] {7}, Duration.ofHours(1));
    sim.advanceBy(Duration.ofSeconds(1).toNanos()); // delivered; the peer holds it
    assertEquals(1, sim.pendingTasks(), "the request's timeout timer");
    assertTrue(f.cancel(false));
    assertEquals(0, sim.pendingTasks(), "the cancelled request's timer is gone");
    long delivered = net.messagesDelivered();
    never.complete(new byte[] {8}); // the peer answers after all: nobody awaits it
    sim.advanceBy(Duration.ofSeconds(1).toNanos());
    assertEquals(delivered, net.messagesDelivered(), "an answer to a cancelled request");
    assertEquals(1L, net.messagesDropped(), "the late answer is dropped");
  }

  @Test
  void aRequestThatACloseOnAnotherThreadFailedIsNeitherSentNorTimed() {
    // close() on another thread could come in after the request's entry was made but before its
    // timeout timer was set: it failed the request CLOSED, yet the request then set a timer
    // nobody cancelled and was sent, so the peer ran a request its sender had given up on. The
    // scheduler below runs that close() at the moment the timer is asked for (on this thread,
    // so that the interleaving is the same on every run)
    Transport[] requester = new Transport[1];
    boolean[] closing = {false};
    io.github.prefixrouter.spi.Scheduler closesFirst = (delay, task) -> {
      if (delay == Duration.ofSeconds(7).toNanos() && !closing[0]) {
        closing[0] = true;
        requester[0].close();
      }
      return sim.schedule(delay, task);
    };
    InMemoryNetwork racing =
        new InMemoryNetwork(sim, closesFirst, new java.util.SplittableRandom(5));
    requester[0] = racing.transport("a");
    requester[0].start((from, payload) -> CompletableFuture.completedFuture(payload));
    Transport b = racing.transport("b");
    List<byte[]> ran = new java.util.ArrayList<>();
    b.start((from, payload) -> {
      ran.add(payload);
      return CompletableFuture.completedFuture(payload);
    });
    CompletableFuture<byte[]> f =
        requester[0].request(b.localAddress(), new byte[] {1}, Duration.ofSeconds(7));
    assertTrue(closing[0], "the close did not come in");
    assertEquals(TransportException.Kind.CLOSED, kindOf(f));
    assertEquals(0, sim.pendingTasks(), "a timer or a delivery left behind by the failed request");
    sim.runUntilIdle(1_000);
    assertEquals(0, ran.size(), "the peer ran a request its sender had given up on");
    assertEquals(0L, racing.messagesSent(), "the failed request was sent");
  }

  private static TransportException.Kind kindOf(CompletableFuture<byte[]> f) {
    assertTrue(f.isCompletedExceptionally(), "not failed");
    Throwable t = assertThrows(java.util.concurrent.CompletionException.class, f::join).getCause();
    return ((TransportException) t).kind();
  }
}
