package io.github.prefixrouter.testing;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;

/**
 * Random traffic over random links, partitions, crashes and restarts against a naive model of
 * the network: per message, the settings of its link when it was sent, hence when it may arrive,
 * and the incarnation of its receiver it was sent to; per node, which incarnation is open.
 */
class InMemoryNetworkPropertyTest {

  private static final int NODES = 4;
  private static final long MS = 1_000_000L;

  /**
   * What was sent: the link's settings then, and when; and the receiver's incarnation open
   * then, the only one it may reach (-1 if none was: the one open when it arrives).
   */
  private record Sent(int from, int to, long at, InMemoryNetwork.Link link, boolean cut,
      int bound) {}

  /** A request awaited: by when it must have been answered, and what it carried. */
  private record Awaited(CompletableFuture<byte[]> future, long deadline, byte[] payload) {}

  /**
   * Every message arrives within its link's bounds (its delay, plus jitter, plus reordering's
   * extra) or not at all, only at an open incarnation of its node (the one open when it was
   * sent, if one was) and never across a cut in place when it was sent; every request is answered with its own payload, refused, or
   * failed by its deadline, exactly once; nothing is lost from the counts; and the same seed
   * replays the same run.
   */
  @Property(tries = 25)
  void deliveriesKeepTheLinkModelAndASeedReplays(@ForAll long seed) {
    List<String> first = run(seed);
    List<String> again = run(seed);
    assertEquals(first, again, "the same seed gave another run");
  }

  private static List<String> run(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, rnd.nextLong());
    List<String> trace = new ArrayList<>();
    // what the handlers found wrong: the network catches what a handler throws, as a network
    // drops a message whose handler fails, so it is checked after every step instead
    List<AssertionError> broken = new ArrayList<>();
    Map<Long, Sent> sent = new HashMap<>();
    InMemoryNetwork.Link[][] links = new InMemoryNetwork.Link[NODES][NODES];
    boolean[][] cut = new boolean[NODES][NODES];
    boolean[] crashed = new boolean[NODES];
    Transport[] open = new Transport[NODES]; // each node's last incarnation, maybe closed
    boolean[] closed = new boolean[NODES];
    int[] incarnation = new int[NODES];
    boolean[][] closedIncarnation = new boolean[NODES][1024];
    List<Awaited> awaited = new ArrayList<>();
    long[] nextId = {0};
    for (int i = 0; i < NODES; i++) {
      for (int j = 0; j < NODES; j++) {
        links[i][j] = InMemoryNetwork.Link.PERFECT;
      }
      open[i] = start(net, sim, i, 0, sent, closedIncarnation, crashed, trace, broken);
    }
    int ops = 100 + rnd.nextInt(200);
    for (int op = 0; op < ops; op++) {
      int kind = rnd.nextInt(100);
      int a = rnd.nextInt(NODES);
      int b = rnd.nextInt(NODES);
      if (kind < 30) {
        long id = nextId[0]++;
        sent.put(id, new Sent(a, b, sim.nanoTime(), links[a][b],
            cut[a][b] || crashed[a] || closed[a], closed[b] ? -1 : incarnation[b]));
        open[a].send(InMemoryNetwork.addressOf(id(b)), payload(id));
      } else if (kind < 50) {
        long id = nextId[0]++;
        sent.put(id, new Sent(a, b, sim.nanoTime(), links[a][b],
            cut[a][b] || crashed[a] || closed[a], closed[b] ? -1 : incarnation[b]));
        Duration timeout = Duration.ofMillis(1 + rnd.nextInt(400));
        byte[] p = payload(id);
        awaited.add(new Awaited(open[a].request(InMemoryNetwork.addressOf(id(b)), p, timeout),
            sim.nanoTime() + timeout.toNanos(), p));
      } else if (kind < 62) {
        InMemoryNetwork.Link l = new InMemoryNetwork.Link(
            Duration.ofNanos(rnd.nextLong(50 * MS)), Duration.ofNanos(rnd.nextLong(20 * MS)),
            rnd.nextInt(3) == 0 ? rnd.nextDouble(0.5) : 0,
            rnd.nextInt(3) == 0 ? rnd.nextDouble(0.5) : 0,
            rnd.nextInt(3) == 0 ? rnd.nextDouble() : 0);
        links[a][b] = l;
        net.setLink(id(a), id(b), l);
      } else if (kind < 67) {
        cut[a][b] = true;
        net.partitionOneWay(id(a), id(b));
      } else if (kind < 70) {
        cut = new boolean[NODES][NODES];
        net.heal();
      } else if (kind < 73) {
        crashed[a] = true;
        net.crash(id(a));
      } else if (kind < 76 && !closed[a]) {
        open[a].close(); // stopped: requests to it are refused until it restarts
        closedIncarnation[a][incarnation[a]] = true;
        closed[a] = true;
      } else if (kind < 80 && closed[a]) {
        incarnation[a]++; // a restart: a new incarnation registered
        closed[a] = false;
        crashed[a] = false;
        open[a] = start(net, sim, a, incarnation[a], sent, closedIncarnation, crashed, trace,
            broken);
      } else {
        sim.advanceBy(rnd.nextLong(100 * MS));
      }
      checkArrivals(broken);
      checkAnswered(sim, awaited, trace);
    }
    sim.advanceBy(Duration.ofSeconds(10).toNanos());
    checkArrivals(broken);
    checkAnswered(sim, awaited, trace);
    assertEquals(0, sim.pendingTasks(), "tasks left after every deadline");
    assertTrue(awaited.stream().allMatch(w -> w.future().isDone()), "a request never answered");
    // every message handed over is delivered or dropped, its copies too
    long settled = net.messagesDelivered() + net.messagesDropped();
    assertTrue(settled >= net.messagesSent() && settled <= 2 * net.messagesSent(),
        net.messagesSent() + " sent, " + settled + " delivered or dropped");
    trace.add("counts " + net.messagesSent() + " " + net.messagesDelivered() + " "
        + net.messagesDropped() + " " + net.bytesSent());
    return trace;
  }

  private static Transport start(InMemoryNetwork net, SimulatedScheduler sim, int node,
      int incarnation, Map<Long, Sent> sent, boolean[][] closedIncarnation, boolean[] crashed,
      List<String> trace, List<AssertionError> broken) {
    Transport t = net.transport(id(node));
    t.start(new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        arrived(from, payload, "message");
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        arrived(from, payload, "request");
        return CompletableFuture.completedFuture(payload);
      }

      private void arrived(PeerAddress from, byte[] payload, String what) {
        try {
          check(from, payload, what);
        } catch (AssertionError e) {
          broken.add(e);
          throw e;
        }
      }

      private void check(PeerAddress from, byte[] payload, String what) {
        long id = ByteBuffer.wrap(payload).getLong();
        Sent s = sent.get(id);
        long took = sim.nanoTime() - s.at();
        InMemoryNetwork.Link l = s.link();
        long jitterMax = Math.max(0, l.jitter().toNanos() - 1);
        long max = l.delay().toNanos() + jitterMax
            + (l.reorder() > 0 ? l.delay().toNanos() + l.jitter().toNanos() : 0);
        assertTrue(!closedIncarnation[node][incarnation],
            what + " " + id + " reached a closed transport of n" + node);
        assertTrue(!crashed[node], what + " " + id + " reached crashed n" + node);
        assertTrue(s.bound() < 0 || s.bound() == incarnation, what + " " + id + " sent to n"
            + node + "#" + s.bound() + " reached its successor n" + node + "#" + incarnation);
        assertEquals(id(s.from()), from.nodeId(), "sender of " + what + " " + id);
        assertEquals(s.to(), node, "receiver of " + what + " " + id);
        assertTrue(!s.cut(), what + " " + id + " crossed a cut (or left a crashed node)");
        assertTrue(took >= l.delay().toNanos() && took <= max,
            what + " " + id + " took " + took + " ns over " + l);
        trace.add(sim.nanoTime() + " " + what + " " + id + " at n" + node + "#" + incarnation);
      }
    });
    return t;
  }

  /** Fails with the first thing a handler found wrong, if any. */
  private static void checkArrivals(List<AssertionError> broken) {
    if (!broken.isEmpty()) {
      throw broken.get(0);
    }
  }

  /** Requests past their deadline are done: with their own payload or a transport failure. */
  private static void checkAnswered(SimulatedScheduler sim, List<Awaited> awaited,
      List<String> trace) {
    for (Awaited w : awaited) {
      if (w.deadline() <= sim.nanoTime()) {
        assertTrue(w.future().isDone(), "a request not answered by its deadline");
      }
      if (w.future().isDone()) {
        try {
          assertArrayEquals(w.payload(), w.future().join(), "an answer to another request");
        } catch (CompletionException e) {
          assertTrue(e.getCause() instanceof TransportException, "failed with " + e.getCause());
        }
      }
    }
    trace.add(sim.nanoTime() + " done " + awaited.stream().filter(w -> w.future().isDone())
        .count());
  }

  private static byte[] payload(long id) {
    return ByteBuffer.allocate(Long.BYTES).putLong(id).array();
  }

  private static String id(int node) {
    return "n" + node;
  }
}
