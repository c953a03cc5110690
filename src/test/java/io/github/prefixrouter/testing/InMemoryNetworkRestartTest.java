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

  /**
   * Nodes "a" (which echoes) and "b" on a network of 5 ms links, 10 ms after "a" sent "b" a
   * request with {@code timeout}: {@link #f}, held by b's handler {@link #old}.
   */
  private static final class HeldRequest {
    final SimulatedScheduler sim = new SimulatedScheduler();
    final InMemoryNetwork net = new InMemoryNetwork(sim, 3);
    final Transport b;
    final Holding old = new Holding();
    final CompletableFuture<byte[]> f;

    HeldRequest(Duration timeout) {
      net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(5)));
      Transport a = net.transport("a");
      a.start(InMemoryNetworkFaultsTest.echo());
      b = net.transport("b");
      b.start(old);
      f = a.request(InMemoryNetwork.addressOf("b"), new byte[] {1}, timeout);
      sim.advanceBy(10 * MS);
    }
  }

  @Test
  void aRequestHeldByATransportThatClosesFailsUnreachableAfterALinkDelay() throws Exception {
    for (boolean restarted : new boolean[] {false, true}) {
      HeldRequest r = new HeldRequest(Duration.ofSeconds(60));
      assertEquals(1, r.old.held.size(), "the request reached b");
      r.b.close();
      long closedAt = r.sim.nanoTime();
      Holding fresh = new Holding();
      if (restarted) {
        r.net.transport("b").start(fresh);
      }
      while (!r.f.isDone() && r.sim.nanoTime() - closedAt < Duration.ofSeconds(61).toNanos()) {
        r.sim.advanceBy(MS);
      }
      long took = r.sim.nanoTime() - closedAt;
      assertTrue(took <= 5 * MS, "restarted " + restarted + ": the request ended "
          + took / MS + " ms after its receiver's transport closed, not a link's delay (5 ms)"
          + " after it");
      ExecutionException x = assertThrows(ExecutionException.class, r.f::get);
      TransportException te = assertInstanceOf(TransportException.class, x.getCause());
      assertEquals(TransportException.Kind.UNREACHABLE, te.kind(), te.toString());
      r.old.held.get(0).complete(new byte[] {9}); // the old handler's answer, late: dropped
      r.sim.advanceBy(100 * MS);
      assertTrue(fresh.held.isEmpty(), "the request was delivered again to the new transport");
      assertEquals(0, r.sim.pendingTasks(), "tasks left behind");
    }
  }

  @Test
  void aCrashedNodeStillAnswersNothing() {
    HeldRequest r = new HeldRequest(Duration.ofSeconds(1));
    r.net.crash("b");
    r.b.close(); // a crashed host's process, ended: nothing it sends leaves
    r.sim.advanceBy(900 * MS);
    assertFalse(r.f.isDone(), "a crashed node's requests time out");
    r.sim.advanceBy(200 * MS);
    ExecutionException x = assertThrows(ExecutionException.class, r.f::get);
    assertEquals(TransportException.Kind.TIMEOUT, ((TransportException) x.getCause()).kind());
  }

  @Test
  void aRequestAnsweredBeforeTheCloseKeepsItsAnswer() throws Exception {
    HeldRequest r = new HeldRequest(Duration.ofSeconds(60));
    r.old.held.get(0).complete(new byte[] {7}); // answered, on its way back
    r.b.close();
    r.sim.advanceBy(10 * MS);
    assertArrayEquals(new byte[] {7}, r.f.get());
  }
}
