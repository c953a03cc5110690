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
 * A request whose receiver's transport closes while its handler holds it (the process stopped,
 * and may be back at its address already) fails as {@code HttpTransport.close()} answers it:
 * {@code BUSY} ("transport closed"), a link's delay after the close, not at the request's
 * timeout; the handler's later answer is dropped. What was on its way to the closed transport
 * never reaches its successor. A crashed node (a hung or killed process) still answers nothing.
 */
class InMemoryNetworkRestartTest {

  private static final long MS = 1_000_000L;

  /** A handler that holds every request until the test answers it. */
  private static final class Holding implements Transport.InboundHandler {
    final List<CompletableFuture<byte[]>> held = new ArrayList<>();
    int messages;

    @Override
    public void onMessage(PeerAddress from, byte[] payload) {
      messages++;
    }

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
  void aRequestHeldByATransportThatClosesFailsBusyAfterALinkDelayAsOverHttp() throws Exception {
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
      // what HttpTransport's sender reports of the 503 its peer's close() answers
      assertEquals(TransportException.Kind.BUSY, te.kind(), te.toString());
      assertTrue(te.getMessage().endsWith("is busy: transport closed"), te.getMessage());
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

  /**
   * A request and a message on their way to b when b's transport closes (b crashed first, or
   * not) and b registers again at its address reach neither b's old transport nor its new one,
   * as over HTTP the sender's connection to the old process is reset: the request fails
   * {@code UNREACHABLE} a round trip after it was sent (or, b crashed, gets no answer and times
   * out), and the message is dropped.
   */
  @Test
  void whatWasOnItsWayToATransportThatClosedNeverReachesItsSuccessor() throws Exception {
    for (boolean crashed : new boolean[] {false, true}) {
      SimulatedScheduler sim = new SimulatedScheduler();
      InMemoryNetwork net = new InMemoryNetwork(sim, 3);
      net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(5)));
      Transport a = net.transport("a");
      a.start(InMemoryNetworkFaultsTest.echo());
      Transport b = net.transport("b");
      Holding old = new Holding();
      b.start(old);
      CompletableFuture<byte[]> f =
          a.request(InMemoryNetwork.addressOf("b"), new byte[] {1}, Duration.ofSeconds(1));
      a.send(InMemoryNetwork.addressOf("b"), new byte[] {2});
      sim.advanceBy(2 * MS);
      if (crashed) {
        net.crash("b");
      }
      b.close();
      Holding fresh = new Holding();
      net.transport("b").start(fresh);
      sim.advanceBy(20 * MS);
      assertEquals(List.of(0, 0), List.of(fresh.held.size(), fresh.messages),
          "crashed " + crashed + ": requests and messages sent to b's old transport that reached"
              + " its new one");
      assertEquals(List.of(0, 0), List.of(old.held.size(), old.messages),
          "crashed " + crashed + ": requests and messages that reached b's closed transport");
      if (crashed) {
        assertFalse(f.isDone(), "a request sent to a crashed node was answered");
        sim.advanceBy(1_000 * MS);
      }
      assertTrue(f.isDone(), "crashed " + crashed + ": the request is still pending");
      ExecutionException x = assertThrows(ExecutionException.class, f::get);
      TransportException te = assertInstanceOf(TransportException.class, x.getCause());
      assertEquals(crashed ? TransportException.Kind.TIMEOUT
          : TransportException.Kind.UNREACHABLE, te.kind(), te.toString());
      // the request and the message dropped; the reset, sent back, delivered to the request
      assertEquals(crashed ? List.of(2L, 0L, 2L) : List.of(3L, 1L, 2L),
          List.of(net.messagesSent(), net.messagesDelivered(), net.messagesDropped()),
          "crashed " + crashed + ": sent, delivered, dropped");
      assertEquals(0, sim.pendingTasks(), "tasks left behind");
    }
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
