package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.TransportException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * What the class documentation says of connections: over HTTP/1.1 every request and message in
 * flight to a peer holds a connection of its own, so a burst to a peer with no idle connection
 * opens as many connections at once (each with its handshake), and {@code maxInFlightPerPeer}
 * is the only bound on them.
 */
class HttpTransportConnectionsPerPeerTest extends HttpTransportFixture {

  @Test
  void aBurstOpensOneConnectionPerExchangeInFlightUpToMaxInFlightPerPeer() throws Exception {
    // a peer that accepts connections and never answers
    ServerSocket silent = new ServerSocket(0, 50, InetAddress.getByName("127.0.0.1"));
    toClose.add(silent);
    List<Socket> accepted = new CopyOnWriteArrayList<>();
    Thread acceptor = new Thread(() -> {
      try {
        while (true) {
          Socket s = silent.accept();
          accepted.add(s);
          toClose.add(s);
        }
      } catch (java.io.IOException closed) {
        // the test is over
      }
    }, "silent-peer");
    acceptor.setDaemon(true);
    acceptor.start();
    HttpTransport b = start(node("b").maxInFlightPerPeer(8)
        .messageTimeout(Duration.ofSeconds(30)), new HttpTransportTest.Recorder());
    PeerAddress peer = new PeerAddress("a", "127.0.0.1:" + silent.getLocalPort());
    List<CompletableFuture<byte[]>> requests = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      requests.add(b.request(peer, new byte[] {1}, Duration.ofSeconds(30)));
    }
    for (int i = 0; i < 4; i++) {
      b.send(peer, new byte[] {2});
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (accepted.size() < 8 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    Thread.sleep(200); // a ninth connection would have come by now
    // 6 requests and the first 2 messages: 8 connections; the last 2 messages dropped as busy
    assertEquals(8, accepted.size(), "connections opened to the peer");
    assertEquals(2, b.stats().outboundBusy());
    assertEquals(2, b.stats().messagesDropped());
    CompletableFuture<byte[]> ninth = b.request(peer, new byte[] {3}, Duration.ofSeconds(30));
    ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(
        ExecutionException.class, () -> ninth.get(5, TimeUnit.SECONDS));
    assertEquals(TransportException.Kind.BUSY, ((TransportException) e.getCause()).kind());
    for (CompletableFuture<byte[]> r : requests) {
      r.cancel(true);
    }
  }
}
