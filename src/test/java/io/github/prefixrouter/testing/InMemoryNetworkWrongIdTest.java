package io.github.prefixrouter.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.Test;

/**
 * A message or request addressed to a node id other than the one at the address (a seed or
 * peer list with the wrong id) is reported as the HTTP transport reports it: the sender logs a
 * warning naming both ids, once per address and id, at most 10 such warnings a minute, the
 * next one logged saying how many were left out; and a request's failure names both ids.
 */
class InMemoryNetworkWrongIdTest {

  private static final long MINUTE = 60_000_000_000L;

  @Test
  void aMessageToAnotherIdAtAnAddressIsWarnedOfOncePerAddressAndId() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    Transport a = net.transport("a");
    a.start(InMemoryNetworkFaultsTest.echo());
    net.transport("b").start(InMemoryNetworkFaultsTest.echo());
    PeerAddress wrong = new PeerAddress("c", "mem:b");
    List<String> lines = LoggedLines.logged("the node at mem:b is b, not c", () -> {
      a.send(wrong, new byte[] {1});
      a.send(wrong, new byte[] {2});
      sim.runUntilIdle(1_000);
    });
    assertEquals(1, lines.size(), "one warning per address and id: " + lines);
    assertTrue(lines.get(0).contains("a: "), "the sender names itself: " + lines);
    assertEquals(2, net.messagesDropped(), "neither message reaches b");
  }

  @Test
  void aRequestToAnotherIdFailsNamingBothIds() throws Exception {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    Transport a = net.transport("a");
    a.start(InMemoryNetworkFaultsTest.echo());
    net.transport("b").start(InMemoryNetworkFaultsTest.echo());
    CompletableFuture<byte[]>[] f = new CompletableFuture[1];
    List<String> lines = LoggedLines.logged("the node at mem:b is b, not c", () -> {
      f[0] = a.request(new PeerAddress("c", "mem:b"), new byte[] {1}, Duration.ofSeconds(5));
      sim.runUntilIdle(1_000);
    });
    assertEquals(1, lines.size(), "warned of: " + lines);
    assertTrue(f[0].isCompletedExceptionally(), "refused, not timed out later");
    ExecutionException x = org.junit.jupiter.api.Assertions.assertThrows(
        ExecutionException.class, f[0]::get);
    TransportException te = (TransportException) x.getCause();
    assertEquals(TransportException.Kind.UNREACHABLE, te.kind());
    assertTrue(te.getMessage().contains("the node at mem:b is b, not c"), te.getMessage());
  }

  @Test
  void theWarningsAreBoundedPerMinuteAndNeverStopForGood() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    Transport a = net.transport("a");
    a.start(InMemoryNetworkFaultsTest.echo());
    net.transport("b").start(InMemoryNetworkFaultsTest.echo());
    List<String> lines = LoggedLines.logged("the node at mem:b is b, not", () -> {
      for (int i = 0; i < 13; i++) {
        a.send(new PeerAddress("w" + i, "mem:b"), new byte[] {1});
      }
      sim.runUntilIdle(1_000);
      sim.advanceBy(MINUTE);
      // the ones left out were not remembered: they warn once the minute is over
      a.send(new PeerAddress("w10", "mem:b"), new byte[] {1});
      a.send(new PeerAddress("w0", "mem:b"), new byte[] {1});
      sim.runUntilIdle(1_000);
    });
    assertEquals(11, lines.size(), "10 in the first minute, then w10: " + lines);
    for (int i = 0; i < 10; i++) {
      assertTrue(lines.get(i).contains("not w" + i + ";"), lines.get(i));
    }
    assertTrue(lines.get(10).contains("not w10;")
        && lines.get(10).contains("3 more such warnings left out"), lines.get(10));
  }

  @Test
  void aClockThatThrowsStillWarnsAndDeliversWhatItCan() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(() -> {
      throw new IllegalStateException("clock shut down");
    }, sim, new java.util.SplittableRandom(1));
    Transport a = net.transport("a");
    a.start(InMemoryNetworkFaultsTest.echo());
    net.transport("b").start(InMemoryNetworkFaultsTest.echo());
    List<String> lines = LoggedLines.logged("the node at mem:b is b, not c", () -> {
      a.send(new PeerAddress("c", "mem:b"), new byte[] {1});
      a.send(new PeerAddress("b", "mem:b"), new byte[] {1});
      sim.runUntilIdle(1_000);
    });
    assertEquals(1, lines.size(), "warned of: " + lines);
    assertEquals(1, net.messagesDelivered(), "the message to b's own id arrives");
    assertEquals(1, net.messagesDropped());
  }

  @Test
  void noWarningForAnAddressNobodyListensAtOrTheRightId() {
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, 1);
    Transport a = net.transport("a");
    a.start(InMemoryNetworkFaultsTest.echo());
    net.transport("b").start(InMemoryNetworkFaultsTest.echo());
    List<String> lines = LoggedLines.logged("the node at", () -> {
      a.send(new PeerAddress("b", "mem:b"), new byte[] {1});
      a.send(new PeerAddress("x", "mem:x"), new byte[] {1});
      sim.runUntilIdle(1_000);
    });
    assertEquals(List.of(), lines);
  }
}
