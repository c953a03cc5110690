package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Test;

class SimNetworkTest {

  private static final long MS = 1_000_000;
  private final SimulatedScheduler sim = new SimulatedScheduler();

  @Test
  void messagesAndRequestsTakeOneDelayPerLeg() {
    SimNetwork net = new SimNetwork(sim, new SimLink(100 * MS, 0, null), 0, null);
    Transport a = net.transport("a");
    Transport b = net.transport("b");
    List<String> log = new ArrayList<>();
    a.start(new Transport.InboundHandler() {
      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(new byte[0]);
      }
    });
    b.start(new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        log.add("msg from " + from.nodeId() + " at " + sim.nanoTime() / MS);
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        log.add("req at " + sim.nanoTime() / MS);
        return CompletableFuture.completedFuture(new byte[] {payload[0], 42});
      }
    });
    a.send(net.address("b"), new byte[] {1, 2, 3});
    CompletableFuture<byte[]> f = a.request(net.address("b"), new byte[] {9}, Duration.ofSeconds(1));
    sim.advanceBy(199 * MS);
    assertFalse(f.isDone());
    sim.advanceBy(MS);
    assertArrayEquals(new byte[] {9, 42}, f.join());
    assertEquals(List.of("msg from a at 100", "req at 100"), log);
    assertEquals(3, net.oneWayBytes());
    assertEquals(3, net.requestBytes());
  }

  @Test
  void lostOrUnansweredRequestsTimeOut() {
    SimNetwork net =
        new SimNetwork(sim, new SimLink(10 * MS, 0.5, new SplittableRandom(1)), 1.0 - 1e-9,
            new SplittableRandom(2));
    Transport a = net.transport("a");
    Transport b = net.transport("b");
    a.start((from, p) -> CompletableFuture.completedFuture(p));
    b.start((from, p) -> CompletableFuture.completedFuture(p));
    CompletableFuture<byte[]> f = a.request(net.address("b"), new byte[] {1}, Duration.ofMillis(50));
    sim.advanceBy(49 * MS);
    assertFalse(f.isDone());
    sim.advanceBy(MS);
    assertTrue(f.isCompletedExceptionally());
    try {
      f.join();
    } catch (CompletionException e) {
      assertEquals(TransportException.Kind.TIMEOUT, ((TransportException) e.getCause()).kind());
    }
  }

  @Test
  void unknownPeersAreUnreachableAndCloseFailsPendingRequests() {
    SimNetwork net = new SimNetwork(sim, new SimLink(5 * MS, 0, null), 0, null);
    Transport a = net.transport("a");
    Transport b = net.transport("b");
    a.start((from, p) -> CompletableFuture.completedFuture(p));
    b.start((from, p) -> new CompletableFuture<>()); // never answers
    CompletableFuture<byte[]> u =
        a.request(new PeerAddress("zz", "zz"), new byte[] {1}, Duration.ofSeconds(1));
    CompletableFuture<byte[]> p = a.request(net.address("b"), new byte[] {1}, Duration.ofSeconds(1));
    sim.advanceBy(20 * MS);
    assertEquals(
        TransportException.Kind.UNREACHABLE,
        ((TransportException) u.handle((r, e) -> e).join()).kind());
    assertFalse(p.isDone());
    a.close();
    assertEquals(
        TransportException.Kind.CLOSED, ((TransportException) p.handle((r, e) -> e).join()).kind());
  }
}
