package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Schedulers;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * Two gossip engines over the HTTP transport on loopback, in real time, while node a has as many
 * requests in flight to node b as the transport lets it (forwards of long generations that b's
 * engine runs): a's gossip to b still gets through. Forwards and messages share a peer's
 * {@code maxInFlightPerPeer} slots, and the forwards used to take them all, so every gossip
 * message of a's to b was dropped as busy: b heard a's heartbeat no more, suspected a healthy
 * peer and then declared it dead (and routed nothing more to it), while a, hearing b's SYNs,
 * kept forwarding to b.
 *
 * <p>What the test watches is the cause, b hearing a's gossip, not its effect on a clock: b's
 * count of gossip messages received must grow by {@value #HEARD} once every slot the forwards
 * may take is held (a's gossip every 50 ms makes that well under 2 s; with the forwards holding
 * every slot it never grows by more than the few messages already on their way). Suspecting and
 * declaring dead take 20 s and 30 s of silence, so that a stall of the machine is not taken
 * for one.
 */
class GossipEngineBesideBusyForwardsTest {

  static final byte[] KEY = "0123456789abcdef0123456789abcdef".getBytes(
      java.nio.charset.StandardCharsets.US_ASCII);

  /** How many more of a's gossip messages b must receive while the forwards are held. */
  static final int HEARD = 20;

  @Test
  void aPeerWhoseSlotsAreHeldByForwardsStillHearsTheSendersGossip() throws Exception {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(50)).fanout(3)
        .suspectAfter(Duration.ofSeconds(20)).deadAfter(Duration.ofSeconds(30))
        .forgetAfter(Duration.ofSeconds(60)).build();
    List<AutoCloseable> toClose = new ArrayList<>();
    List<CompletableFuture<byte[]>> heldAtB = new CopyOnWriteArrayList<>();
    AtomicReference<GossipEngine> ga = new AtomicReference<>();
    AtomicReference<GossipEngine> gb = new AtomicReference<>();
    try {
      Schedulers.ClosableScheduler sa = Schedulers.newSingleThread("gossip-beside-forwards-a");
      toClose.add(sa);
      Schedulers.ClosableScheduler sb = Schedulers.newSingleThread("gossip-beside-forwards-b");
      toClose.add(sb);
      HttpTransport ta = HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
          .clusterKey(KEY).build();
      toClose.add(0, ta);
      HttpTransport tb = HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
          .clusterKey(KEY).build();
      toClose.add(0, tb);
      ta.start(new Transport.InboundHandler() {
        @Override
        public void onMessage(PeerAddress from, byte[] payload) {
          ga.get().onMessage(from, payload);
        }

        @Override
        public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
          return CompletableFuture.completedFuture(new byte[0]);
        }
      });
      tb.start(new Transport.InboundHandler() {
        @Override
        public void onMessage(PeerAddress from, byte[] payload) {
          gb.get().onMessage(from, payload);
        }

        @Override
        public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
          // a long generation: answered when the test ends
          CompletableFuture<byte[]> f = new CompletableFuture<>();
          heldAtB.add(f);
          return f;
        }
      });
      ga.set(new GossipEngine(ta.localAddress(), 1, config, List.of(tb.localAddress()),
          Clock.system(), sa, new SplittableRandom(1), () -> EngineLoad.IDLE, ta::send));
      gb.set(new GossipEngine(tb.localAddress(), 1, config, List.of(ta.localAddress()),
          Clock.system(), sb, new SplittableRandom(2), () -> EngineLoad.IDLE, tb::send));
      ga.get().start();
      gb.get().start();
      await(() -> gb.get().statusOf("a") == GossipEngine.Status.ALIVE
          && ga.get().statusOf("b") == GossipEngine.Status.ALIVE,
          () -> "each engine hears the other");

      // a forwards to b for 1 s, as a node under heavy load does: each slot a gossip message
      // gives back, the next forward takes, until every slot forwards may take is held
      List<CompletableFuture<byte[]>> forwards = new ArrayList<>();
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
      while (System.nanoTime() < until) {
        CompletableFuture<byte[]> f =
            ta.request(tb.localAddress(), new byte[] {0x20}, Duration.ofMinutes(1));
        if (f.isDone()) {
          Thread.sleep(1); // refused as busy
        } else {
          forwards.add(f);
        }
      }
      int held = forwards.size();
      await(() -> heldAtB.size() == held, () -> "b runs all " + held + " forwards");
      long received = gb.get().counter(GossipCounter.MESSAGES_RECEIVED);

      await(() -> gb.get().counter(GossipCounter.MESSAGES_RECEIVED) >= received + HEARD,
          () -> "b heard " + (gb.get().counter(GossipCounter.MESSAGES_RECEIVED) - received)
              + " of a's gossip messages, not " + HEARD + ", in 20 s while running a's " + held
              + " forwards; a's messages dropped: " + ta.stats().messagesDropped());
      assertEquals(GossipEngine.Status.ALIVE, gb.get().statusOf("a"),
          "b's view of a, whose " + held + " forwards b is running");
      assertEquals(GossipEngine.Status.ALIVE, ga.get().statusOf("b"));
      forwards.forEach(f -> f.cancel(true));
    } finally {
      if (ga.get() != null) {
        ga.get().stop();
      }
      if (gb.get() != null) {
        gb.get().stop();
      }
      heldAtB.forEach(f -> f.complete(new byte[0]));
      for (AutoCloseable c : toClose) {
        c.close();
      }
    }
  }

  private static void await(BooleanSupplier condition, Supplier<String> what)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!condition.getAsBoolean() && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertTrue(condition.getAsBoolean(), what);
  }
}
