package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Peers (or strangers) that open connections and then stall must not starve everyone else. */
class HttpTransportSlowPeerTest extends HttpTransportFixture {

  private Socket stall(InetSocketAddress addr, String prefix) throws Exception {
    Socket s = new Socket(addr.getHostString(), addr.getPort());
    toClose.add(s);
    OutputStream out = s.getOutputStream();
    out.write(prefix.getBytes(StandardCharsets.US_ASCII));
    out.flush();
    return s;
  }

  @Test
  void stalledConnectionsDoNotStarveOtherPeers() throws Exception {
    HttpTransport a = start(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY).serverThreads(2).inboundIoTimeout(Duration.ofSeconds(1)),
        new HttpTransportTest.Recorder());
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY), new HttpTransportTest.Recorder());
    InetSocketAddress addr = HttpTransportTest.hostPort(a.localAddress().address());
    // two strangers stall in the request headers, two in a body they never finish
    for (int i = 0; i < 2; i++) {
      stall(addr, "POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n");
      stall(addr, "POST /prefix-router/v1/message HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc");
    }
    Thread.sleep(300);
    byte[] answer = b.request(a.localAddress(), "hi".getBytes(StandardCharsets.UTF_8),
        Duration.ofSeconds(20)).get(30, TimeUnit.SECONDS);
    assertEquals("echo b hi", new String(answer, StandardCharsets.UTF_8));
    // every stalled connection is cut and counted; the peer that answered is not
    for (AutoCloseable c : toClose) {
      if (c instanceof Socket s) {
        s.setSoTimeout(10_000);
        assertEquals(-1, s.getInputStream().read(), "a stalled connection is closed");
      }
    }
    // counted just after the connection closes
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (a.stats().slowConnectionsClosed() < 4 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(4, a.stats().slowConnectionsClosed());
    assertEquals(1, a.stats().requestsReceived());
  }

  @Test
  void aPeerThatDoesNotReadItsAnswerDoesNotBlockTheThreadThatAnswers() throws Exception {
    CompletableFuture<byte[]> answer = new CompletableFuture<>();
    HttpTransport a = start(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().inboundIoTimeout(Duration.ofSeconds(1)),
        new Transport.InboundHandler() {
          @Override
          public void onMessage(PeerAddress from, byte[] payload) {}

          @Override
          public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
            return answer;
          }
        });
    InetSocketAddress addr = HttpTransportTest.hostPort(a.localAddress().address());
    // a peer that sends a request and never reads the answer
    Socket s = stall(addr, "POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n"
        + "PR-Sender: b\r\nPR-Sender-Address: 127.0.0.1:1\r\nPR-Recipient: a\r\n"
        + "PR-Timestamp: 0\r\nPR-Nonce: n1\r\nContent-Length: 1\r\n\r\nx");
    s.setReceiveBufferSize(4096);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (a.stats().requestsReceived() < 1 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(1, a.stats().requestsReceived());
    // the thread that completes the handler's answer (an engine's, a scheduler's) must not be
    // the one left writing 4 MB into a connection nobody reads
    CompletableFuture<Void> completing = CompletableFuture.runAsync(
        () -> answer.complete(new byte[(4 << 20) - 64]));
    completing.get(5, TimeUnit.SECONDS);
    // and the connection is cut once the answer has not been taken within the timeout (what
    // the kernel buffered before the cut still trickles to the client afterwards)
    deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (a.stats().slowConnectionsClosed() < 1 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(1, a.stats().slowConnectionsClosed());
  }

  @Test
  void aPeerThatStallsInTheAnswerToAMessageDoesNotHoldItsSlotForever() throws Exception {
    // a "peer" that answers every message with headers and then stalls in the body
    StallingHttpPeer fake = new StallingHttpPeer(
        "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nx");
    toClose.add(fake);
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY).maxInFlightPerPeer(1)
        .messageTimeout(Duration.ofMillis(300)), new HttpTransportTest.Recorder());
    PeerAddress peer = new PeerAddress("a", "127.0.0.1:" + fake.port());
    b.send(peer, new byte[] {1});
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (b.stats().messagesFailed() < 1 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(1, b.stats().messagesFailed(), "the stalled answer fails the message");
    // its slot is free again: the next message is sent, not dropped as busy
    b.send(peer, new byte[] {2});
    assertEquals(0, b.stats().outboundBusy());
    assertEquals(2, b.stats().messagesSent());
  }

  /**
   * A request refused after its body was read in part (a chunked body above the cap, a chunk
   * header that is no number) is answered, and the JDK server then drains what is left of the
   * body: a sender that stalls there is cut after the I/O timeout too. Before, the answer and
   * the drain came after the deadline had ended, and the connection held its reader thread
   * for ever (here the only one, so a signed peer's request was refused meanwhile).
   */
  @ParameterizedTest
  @ValueSource(booleans = {true, false})
  void aSenderStallingAfterARefusedBodyIsCut(boolean aboveTheCap) throws Exception {
    String chunks = aboveTheCap ? "41\r\n" + "x".repeat(0x41) + "\r\n" : "zz\r\n";
    HttpTransport a = start(HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY).maxMessageBytes(64).readerThreads(1)
        .inboundIoTimeout(Duration.ofSeconds(1)), new HttpTransportTest.Recorder());
    HttpTransport b = start(HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY), new HttpTransportTest.Recorder());
    InetSocketAddress addr = HttpTransportTest.hostPort(a.localAddress().address());
    Socket s = stall(addr, "POST /prefix-router/v1/message HTTP/1.1\r\nHost: x\r\n"
        + "Transfer-Encoding: chunked\r\n\r\n" + chunks);
    s.setSoTimeout(10_000);
    InputStream in = s.getInputStream();
    String answer = new String(in.readNBytes(12), StandardCharsets.US_ASCII);
    assertTrue(answer.equals("HTTP/1.1 413") || answer.equals("HTTP/1.1 400"), answer);
    while (in.read() >= 0) {
      // the rest of the answer, then the end of the stream: the connection is cut
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (a.stats().slowConnectionsClosed() < 1 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(1, a.stats().slowConnectionsClosed());
    // the reader thread is free for the next request
    byte[] echo = b.request(a.localAddress(), "hi".getBytes(StandardCharsets.UTF_8),
        Duration.ofSeconds(20)).get(30, TimeUnit.SECONDS);
    assertEquals("echo b hi", new String(echo, StandardCharsets.UTF_8));
    assertEquals(0, a.stats().readsRefused());
  }
}
