package io.github.prefixrouter.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * A link's faults happen as its settings say, over many messages: the share lost, the spread of
 * jitter, the share reordered and how far, the share duplicated; and partitions cut exactly the
 * links they name, messages already on their way included.
 *
 * <p>The network's faults are drawn from {@link #SEED}, so each test is one fixed run. Each
 * bound on a share or a mean over {@link #N} messages is at least five standard deviations
 * wide, so a correct network meets it for any seed but with negligible odds; and narrow enough
 * that a fault drawn with another probability, or over another range, does not.
 */
class InMemoryNetworkFaultsTest {

  private static final long SEED = 57;
  private static final int N = 10_000;
  private static final long MS = 1_000_000L;
  private static final InMemoryNetwork.Link PERFECT = InMemoryNetwork.Link.PERFECT;

  /**
   * A run of {@link #N} messages from a to b: when each was sent, when each of its copies
   * arrived (none if it was lost), and the network's counts.
   */
  private record Run(long[] sentAt, List<List<Long>> arrivedAt, InMemoryNetwork net) {

    /** How long each message's first copy took to arrive, for the messages that did. */
    List<Long> took() {
      List<Long> took = new ArrayList<>();
      for (int i = 0; i < sentAt.length; i++) {
        if (!arrivedAt.get(i).isEmpty()) {
          took.add(arrivedAt.get(i).get(0) - sentAt[i]);
        }
      }
      return took;
    }

    /** The share of messages delivered exactly {@code copies} times. */
    double shareArrived(int copies) {
      return arrivedAt.stream().filter(a -> a.size() == copies).count() / (double) N;
    }
  }

  /**
   * Sends {@link #N} messages from a to b over {@code link}, {@code spacingNanos} apart, on a
   * network seeded with {@link #SEED}, and runs it until every message arrived or was dropped.
   */
  private static Run send(InMemoryNetwork.Link link, long spacingNanos) {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, SEED);
    net.setLink("a", "b", link);
    long[] sentAt = new long[N];
    List<List<Long>> arrivedAt = new ArrayList<>();
    for (int i = 0; i < N; i++) {
      arrivedAt.add(new ArrayList<>());
    }
    Transport a = net.transport("a");
    a.start(echo());
    net.transport("b").start(new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        arrivedAt.get(ByteBuffer.wrap(payload).getInt()).add(sim.nanoTime());
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(payload);
      }
    });
    for (int i = 0; i < N; i++) {
      if (i > 0) {
        sim.advanceBy(spacingNanos);
      }
      sentAt[i] = sim.nanoTime();
      a.send(InMemoryNetwork.addressOf("b"), ByteBuffer.allocate(Integer.BYTES).putInt(i).array());
    }
    sim.runUntilIdle(Long.MAX_VALUE);
    return new Run(sentAt, arrivedAt, net);
  }

  /** A handler that ignores messages and answers each request with its own payload. */
  static Transport.InboundHandler echo() {
    return new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {}

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(payload);
      }
    };
  }

  private static double mean(List<Long> xs) {
    return xs.stream().mapToLong(Long::longValue).average().orElseThrow();
  }

  @Test
  void aLinkLosesItsLossShareOfMessages() {
    // over 10,000 messages the share lost has a standard deviation of at most 0.005
    for (double loss : new double[] {0, 0.1, 0.75, 1}) {
      Run r = send(PERFECT.withLoss(loss), 0);
      double lost = r.shareArrived(0);
      assertEquals(loss, lost, 0.03, "the share of messages lost over a link of loss " + loss);
      assertEquals(1 - lost, r.shareArrived(1), 1e-9, "the rest arrive once each");
      assertEquals(Math.round(lost * N), r.net().messagesDropped(), "lost messages counted");
      assertEquals(N - Math.round(lost * N), r.net().messagesDelivered());
    }
  }

  @Test
  void jitterSpreadsDeliveriesEvenlyOverItsBoundAfterTheDelay() {
    long delay = 10 * MS;
    long jitter = 4 * MS;
    Run r = send(InMemoryNetwork.Link.delay(Duration.ofNanos(delay))
        .withJitter(Duration.ofNanos(jitter)), 0);
    List<Long> took = r.took();
    assertEquals(N, took.size(), "a message lost on a link without loss");
    for (long t : took) {
      assertTrue(t >= delay && t < delay + jitter,
          "took " + t + " ns: not in [delay, delay + jitter)");
    }
    // uniform over [delay, delay + jitter): the mean's standard deviation is 0.003 × jitter
    assertEquals(delay + jitter / 2.0, mean(took), 0.02 * jitter, "the mean time taken");
    assertTrue(took.stream().anyMatch(t -> t < delay + jitter / 100),
        "no message in the first 1% of the jitter");
    assertTrue(took.stream().anyMatch(t -> t >= delay + 99 * jitter / 100),
        "no message in the last 1% of the jitter");
  }

  @Test
  void reorderingDelaysItsShareOfMessagesByUpToDelayPlusJitterMore() {
    long delay = 10 * MS;
    Run r = send(InMemoryNetwork.Link.delay(Duration.ofNanos(delay)).withReorder(0.3), 0);
    List<Long> took = r.took();
    assertEquals(N, took.size(), "a message lost on a link without loss");
    List<Long> extra = took.stream().filter(t -> t > delay).map(t -> t - delay).toList();
    assertEquals(0.3, extra.size() / (double) N, 0.03,
        "the share of messages delayed beyond the link's delay, reordering 0.3");
    assertTrue(took.stream().allMatch(t -> t >= delay && t <= 2 * delay),
        "a message outside [delay, 2 × delay] on a link without jitter");
    // the extra is uniform over [0, delay]: over ~3,000 messages its mean's deviation is 0.005 ×
    // delay
    assertEquals(delay / 2.0, mean(extra), 0.05 * delay, "the mean extra delay");
    assertTrue(extra.stream().anyMatch(e -> e >= 95 * delay / 100),
        "no extra delay in the last 5% of [0, delay]");

    // with jitter, the extra ranges over [0, delay + jitter]: here the time taken is the sum of
    // two uniform draws over [0, jitter], of mean jitter (deviation 0.004 × jitter over 10,000)
    long jitter = 4 * MS;
    List<Long> both = send(PERFECT.withJitter(Duration.ofNanos(jitter)).withReorder(1), 0).took();
    assertTrue(both.stream().allMatch(t -> t >= 0 && t <= 2 * jitter),
        "a message outside [0, 2 × jitter] with no delay");
    assertEquals(jitter, mean(both), 0.03 * jitter, "the mean time taken, every message reordered");
    assertTrue(both.stream().anyMatch(t -> t >= 19 * jitter / 10),
        "no message took 1.9 × jitter or more: the extra does not reach past the jitter");
  }

  @Test
  void aReorderedMessageMayBeOvertakenByOnesSentAfterIt() {
    // messages 1 ms apart over a 10 ms link: one is overtaken by the next if it is delayed
    // 1 ms more than the next, which happens to a share of 0.225 with reordering 0.3, and
    // never without reordering
    InMemoryNetwork.Link link = InMemoryNetwork.Link.delay(Duration.ofMillis(10));
    for (double reorder : new double[] {0, 0.3}) {
      Run r = send(link.withReorder(reorder), MS);
      int overtaken = 0;
      for (int i = 0; i + 1 < N; i++) {
        if (r.arrivedAt().get(i).get(0) > r.arrivedAt().get(i + 1).get(0)) {
          overtaken++;
        }
      }
      if (reorder == 0) {
        assertEquals(0, overtaken, "messages overtaken on a link that does not reorder");
      } else {
        assertEquals(0.225, overtaken / (double) (N - 1), 0.03,
            "the share of messages overtaken by the next one");
      }
    }
  }

  @Test
  void aLinkDuplicatesItsDuplicateShareOfMessagesEachCopyDelayedOnItsOwn() {
    long jitter = 4 * MS;
    Run r = send(InMemoryNetwork.Link.delay(Duration.ofMillis(10))
        .withJitter(Duration.ofNanos(jitter)).withDuplicate(0.2), 0);
    assertEquals(0.2, r.shareArrived(2), 0.03, "the share of messages delivered twice");
    assertEquals(1, r.shareArrived(1) + r.shareArrived(2), 1e-9,
        "a message lost, or delivered more than twice");
    long copies = r.arrivedAt().stream().mapToLong(List::size).sum();
    assertEquals(N, r.net().messagesSent(), "copies counted as sent");
    assertEquals(copies, r.net().messagesDelivered(), "every copy counted as delivered");
    // each copy draws its own jitter: the mean gap between two independent uniform draws over
    // [0, jitter) is jitter / 3 (deviation 0.005 × jitter over ~2,000 pairs)
    List<Long> gaps = r.arrivedAt().stream().filter(a -> a.size() == 2)
        .map(a -> Math.abs(a.get(1) - a.get(0))).toList();
    assertEquals(jitter / 3.0, mean(gaps), 0.05 * jitter, "the mean gap between two copies");
  }

  @Test
  void aPartitionCutsEveryLinkBetweenItsSidesBothWaysAndNoOther() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, SEED);
    List<String> ids = List.of("a", "b", "c", "d");
    Set<List<String>> got = new HashSet<>();
    List<Transport> transports = new ArrayList<>();
    for (String id : ids) {
      Transport t = net.transport(id);
      t.start(new Transport.InboundHandler() {
        @Override
        public void onMessage(PeerAddress from, byte[] payload) {
          got.add(List.of(from.nodeId(), id));
        }

        @Override
        public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
          return CompletableFuture.completedFuture(payload);
        }
      });
      transports.add(t);
    }
    Set<List<String>> every = new HashSet<>();
    for (String x : ids) {
      for (String y : ids) {
        if (!x.equals(y)) {
          every.add(List.of(x, y));
        }
      }
    }
    Runnable exchange = () -> {
      got.clear();
      for (Transport from : transports) {
        for (String to : ids) {
          if (!to.equals(from.localAddress().nodeId())) {
            from.send(InMemoryNetwork.addressOf(to), new byte[] {1});
          }
        }
      }
      sim.runUntilIdle(1_000);
    };

    net.partition(Set.of("a", "b"), Set.of("c"));
    exchange.run();
    Set<List<String>> expected = new HashSet<>(every);
    expected.removeAll(Set.of(List.of("a", "c"), List.of("c", "a"), List.of("b", "c"),
        List.of("c", "b")));
    assertEquals(expected, got, "links delivering while a and b are cut from c");
    net.heal();
    exchange.run();
    assertEquals(every, got, "links delivering once healed");
    net.partitionOneWay("a", "d");
    exchange.run();
    expected = new HashSet<>(every);
    expected.remove(List.of("a", "d"));
    assertEquals(expected, got, "links delivering while a is cut from d one way");
    net.heal();

    // a message already on its way when its link is cut does not arrive while the cut lasts
    net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(10)));
    got.clear();
    transports.get(0).send(InMemoryNetwork.addressOf("b"), new byte[] {1});
    sim.advanceBy(5 * MS);
    net.partition(Set.of("a"), Set.of("b"));
    long dropped = net.messagesDropped();
    sim.advanceBy(10 * MS);
    assertEquals(Set.of(), got, "a message on its way when the partition came");
    assertEquals(dropped + 1, net.messagesDropped(), "the message cut on its way is dropped");
  }
}
