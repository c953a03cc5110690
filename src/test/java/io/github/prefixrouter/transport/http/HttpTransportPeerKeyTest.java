package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.TransportException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@code maxInFlightPerPeer} counts per peer, not per spelling of its address: a host name in
 * another case, an IPv6 literal written another way, a port with a leading zero name the same
 * peer, and were counted apart, so a node that knew a peer under two spellings (a seed list and
 * gossip, say) could have twice the limit in flight there.
 */
class HttpTransportPeerKeyTest extends HttpTransportFixture {

  /** A "peer" that takes connections (the kernel's backlog) and never answers. */
  private int silentPeer() throws Exception {
    ServerSocket s = new ServerSocket(0, 50);
    toClose.add(s);
    return s.getLocalPort();
  }

  private static TransportException.Kind failedAtOnce(CompletableFuture<byte[]> f) {
    assertTrue(f.isDone(), "the request beyond the peer's limit did not fail at once");
    try {
      f.join();
    } catch (CompletionException e) {
      assertTrue(e.getCause() instanceof TransportException, "cause: " + e.getCause());
      return ((TransportException) e.getCause()).kind();
    }
    throw new AssertionError("the request beyond the peer's limit was answered");
  }

  @ParameterizedTest(name = "{0} then {1}")
  @CsvSource({
      "localhost:%d, LOCALHOST:%d",
      "localhost:%d, LocalHost:0%d",
      "[::ffff:7f00:1]:%d, [::FFFF:7F00:1]:%d",
      "[::ffff:7f00:1]:%d, [0:0:0:0:0:ffff:7f00:0001]:%d",
  })
  void twoSpellingsOfOnePeersAddressShareItsInFlightLimit(String first, String second)
      throws Exception {
    int port = silentPeer();
    HttpTransport b = start(node("b").maxInFlightPerPeer(1), new HttpTransportTest.Recorder());
    CompletableFuture<byte[]> held = b.request(new PeerAddress("a", String.format(first, port)),
        new byte[] {1}, Duration.ofSeconds(20));
    CompletableFuture<byte[]> beyond = b.request(
        new PeerAddress("a", String.format(second, port)), new byte[] {2},
        Duration.ofSeconds(20));
    assertFalse(held.isDone(), "the first request is not held by the peer: " + held);
    assertEquals(TransportException.Kind.BUSY, failedAtOnce(beyond));
    assertEquals(1, b.peersInFlight());
    // a one-way message counts there too
    b.send(new PeerAddress("a", String.format(second, port)), new byte[] {3});
    assertEquals(2, b.stats().outboundBusy());
    // once the first is let go of, the peer's slot is free under either spelling
    held.cancel(false);
    assertEquals(0, b.peersInFlight());
  }

  @Test
  void peerKeysFoldOnlyWhatNamesTheSamePeer() {
    assertEquals("example.com:80", HttpTransport.peerKey("Example.COM:80"));
    assertEquals("example.com:80", HttpTransport.peerKey("example.com:0080"));
    assertEquals("[0:0:0:0:0:0:0:1]:80", HttpTransport.peerKey("[::1]:80"));
    assertEquals("[0:0:0:0:0:0:0:1]:80", HttpTransport.peerKey("[0:0:0:0:0:0:0:1]:80"));
    assertEquals("[fe80:0:0:0:0:0:0:1]:80", HttpTransport.peerKey("[FE80::1]:80"));
    assertEquals("127.0.0.1:80", HttpTransport.peerKey("[::ffff:127.0.0.1]:80"));
    // different peers stay apart
    assertFalse(HttpTransport.peerKey("a:80").equals(HttpTransport.peerKey("a:81")));
    assertFalse(HttpTransport.peerKey("[::1]:80").equals(HttpTransport.peerKey("[::2]:80")));
    // what is not an address is left as it is (its request fails as a bad address)
    assertEquals("[nothex]:80", HttpTransport.peerKey("[nothex]:80"));
    assertEquals("[::1", HttpTransport.peerKey("[::1"));
    assertEquals("host:port", HttpTransport.peerKey("host:port"));
    // a zone id names an interface, whose name may differ from another's in case only
    assertEquals("[fe80::1%Eth0]:80", HttpTransport.peerKey("[fe80::1%Eth0]:80"));
    // an address already in its key's form (the usual one) is its own key, not a copy
    for (String plain : new String[] {"node-1:7000", "10.0.0.7:80", "h:0", "127.0.0.1:65535"}) {
      assertSame(plain, HttpTransport.peerKey(plain), plain);
    }
    assertEquals("h:0", HttpTransport.peerKey("h:00"));
  }
}
