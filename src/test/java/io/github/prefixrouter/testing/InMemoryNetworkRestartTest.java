package io.github.prefixrouter.testing;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.Test;

/**
 * A request whose receiver's transport closes while its handler holds it (the process stopped
 * or was killed, and may be back at its address already) fails as a reset connection over HTTP
 * does: {@code UNREACHABLE}, a link's delay after the close, not at the request's timeout; the
 * handler's later answer is dropped. A crashed node (a hung process) still answers nothing.
 */
class InMemoryNetworkRestartTest {

  private static final long MS = 1_000_000L;

  /** A handler that holds every request until the test answers it. */
  private static final class Holding implements Transport.InboundHandler {
    final List<CompletableFuture<byte[]>> held = new ArrayList<>();

    @Override
    public void onMessage(PeerAddress from, byte[] payload) {}

    @Override
    public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
      CompletableFuture<byte[]> f = new CompletableFuture<>();
      held.add(f);
      return f;
    }
  }

  @Test
  void aRequestHeldByATransportThatClosesFailsUnreachableAfterALinkDelay() throws Exception {
    for (boolean restarted : new boolean[] {false, true}) {
      SimulatedScheduler sim = new SimulatedScheduler();
      InMemoryNetwork net = new InMemoryNetwork(sim, 3);
      net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(5)));
      Transport a = net.transport("a");
      a.start(InMemoryNetworkFaultsTest.echo());
      Transport b = net.transport("b");
      Holding old = new Holding();
      b.start(old);
      CompletableFuture<byte[]> f = a.request(InMemoryNetwork.addressOf("b"), new byte[] {1},
          Duration.ofSeconds(60));
      sim.advanceBy(10 * MS);
      assertEquals(1, old.held.size(), "the request reached b");
      b.close();
      long closedAt = sim.nanoTime();
      Holding fresh = new Holding();
      if (restarted) {
        net.transport("b").start(fresh);
      }
      while (!f.isDone() && sim.nanoTime() - closedAt < Duration.ofSeconds(61).toNanos()) {
        sim.advanceBy(MS);
      }
      long took = sim.nanoTime() - closedAt;
      assertTrue(took <= 5 * MS, "restarted " + restarted + ": the request ended "
          + took / MS + " ms after its receiver's transport closed, not a link's delay (5 ms)"
          + " after it");
      ExecutionException x = assertThrows(ExecutionException.class, f::get);
      TransportException te = assertInstanceOf(TransportException.class, x.getCause());
      assertEquals(TransportException.Kind.UNREACHABLE, te.kind(), te.toString());
      old.held.get(0).complete(new byte[] {9}); // the old handler's answer, late: dropped
      sim.advanceBy(100 * MS);
      assertTrue(fresh.held.isEmpty(), "the request was delivered again to the new transport");
      assertEquals(0, sim.pendingTasks(), "tasks left behind");
    }
  }

  @Test
  void aCrashedNodeStillAnswersNothing() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 3);
    net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(5)));
    Transport a = net.transport("a");
    a.start(InMemoryNetworkFaultsTest.echo());
    Transport b = net.transport("b");
    Holding old = new Holding();
    b.start(old);
    CompletableFuture<byte[]> f = a.request(InMemoryNetwork.addressOf("b"), new byte[] {1},
        Duration.ofSeconds(1));
    sim.advanceBy(10 * MS);
    net.crash("b");
    b.close(); // a crashed host's process, ended: nothing it sends leaves
    sim.advanceBy(900 * MS);
    assertFalse(f.isDone(), "a crashed node's requests time out");
    sim.advanceBy(200 * MS);
    ExecutionException x = assertThrows(ExecutionException.class, f::get);
    assertEquals(TransportException.Kind.TIMEOUT, ((TransportException) x.getCause()).kind());
  }

  @Test
  void aRequestAnsweredBeforeTheCloseKeepsItsAnswer() throws Exception {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 3);
    net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(5)));
    Transport a = net.transport("a");
    a.start(InMemoryNetworkFaultsTest.echo());
    Transport b = net.transport("b");
    Holding old = new Holding();
    b.start(old);
    CompletableFuture<byte[]> f = a.request(InMemoryNetwork.addressOf("b"), new byte[] {1},
        Duration.ofSeconds(60));
    sim.advanceBy(10 * MS);
    old.held.get(0).complete(new byte[] {7}); // answered, on its way back
    b.close();
    sim.advanceBy(10 * MS);
    assertArrayEquals(new byte[] {7}, f.get());
  }
}
