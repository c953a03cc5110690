package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.server.PrometheusTextParser.Family;
import io.github.prefixrouter.testing.Await;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The reader-limit flags reach the client endpoint and the transport: with limits of 2 readers
 * and 1 unfinished body per address, the third connection and the second body are refused at
 * once (the defaults, 64 and 16 or 8, would take them), and {@code /metrics} counts them.
 */
class ReaderLimitFlagsTest {

  private static final String CLIENT_HEADERS = "POST /v1/route/completions HTTP/1.1\r\nHost: x\r\n";
  private static final String CLIENT_BODY = CLIENT_HEADERS + "Content-Length: 100\r\n\r\n{\"prompt\"";
  private static final String PEER_HEADERS = "POST /prefix-router/v1/request HTTP/1.1\r\nHost: x\r\n";
  private static final String PEER_BODY = PEER_HEADERS + "Content-Length: 100\r\n\r\nab";

  private final List<Socket> sockets = new ArrayList<>();

  @AfterEach
  void close() throws IOException {
    closeAll();
  }

  private void closeAll() throws IOException {
    for (Socket s : sockets) {
      s.close();
    }
    sockets.clear();
  }

  /** Closes the stallers and gives their reader threads time to see it. */
  private void closeAllAndSettle() throws Exception {
    closeAll();
    Thread.sleep(500);
  }

  private Socket send(String from, String hostPort, String text) throws IOException {
    Socket s = new Socket();
    sockets.add(s);
    s.bind(new InetSocketAddress(from, 0));
    int colon = hostPort.lastIndexOf(':');
    s.connect(new InetSocketAddress(hostPort.substring(0, colon),
        Integer.parseInt(hostPort.substring(colon + 1))), 5_000);
    s.getOutputStream().write(text.getBytes(StandardCharsets.US_ASCII));
    s.getOutputStream().flush();
    return s;
  }

  /** The first bytes the server sends, or "" if it closes the connection without any. */
  private static String firstBytes(Socket s) throws IOException {
    s.setSoTimeout(5_000); // far below the 10 s I/O timeout: a refusal is at once
    InputStream in = s.getInputStream();
    try {
      return new String(in.readNBytes(12), StandardCharsets.US_ASCII);
    } catch (java.net.SocketException reset) {
      return "";
    }
  }

  /** Two stallers in the headers hold both readers: a third connection is closed at once. */
  private void assertThirdConnectionClosedAtOnce(String address, String headers) throws Exception {
    send("127.0.0.3", address, headers);
    send("127.0.0.3", address, headers);
    Thread.sleep(300);
    long t0 = System.nanoTime();
    String third = firstBytes(send("127.0.0.4", address, headers));
    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertEquals("", third, "closed without an answer");
    assertTrue(ms < 5_000, "closed after " + ms + " ms");
  }

  /**
   * One body still arriving from an address: the second from it is a 503 at once. The first
   * holds its address's slot once it holds bytes of the port's body budget ({@code heldBytes}):
   * its reader takes the slot, then the budget's first step, before it reads.
   */
  private void assertSecondBodyRefused(String address, String body, LongSupplier heldBytes)
      throws Exception {
    send("127.0.0.2", address, body);
    Await.until(() -> heldBytes.getAsLong() > 0, "the first body holds its address's slot");
    assertEquals("HTTP/1.1 503", firstBytes(send("127.0.0.2", address, body)));
  }

  private Map<String, Family> metrics(NodeMain.Running r) throws Exception {
    HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (true) {
      try {
        HttpResponse<String> resp = http.send(HttpRequest.newBuilder(
            URI.create("http://" + r.clientAddress + "/metrics")).build(),
            HttpResponse.BodyHandlers.ofString());
        assertEquals(200, resp.statusCode(), resp.body());
        return PrometheusTextParser.parse(resp.body());
      } catch (IOException refusedWhileReadersAreBusy) {
        if (System.nanoTime() > deadline) {
          throw refusedWhileReadersAreBusy;
        }
      }
      Thread.sleep(50);
    }
  }

  @Test
  void theClientPortsLimits() throws Exception {
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "solo", "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0", "--client-reader-threads", "2",
        "--client-max-unfinished-reads", "1"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
    try (NodeMain.Running r = NodeMain.start(o)) {
      assertSecondBodyRefused(r.clientAddress, CLIENT_BODY,
          () -> r.endpoint.bodyBudget() - r.endpoint.bodyBudgetAvailable());
      closeAllAndSettle();
      assertEquals(1, r.endpoint.readsRefused());
      assertThirdConnectionClosedAtOnce(r.clientAddress, CLIENT_HEADERS);
      closeAllAndSettle();
      // at least the third connection; the JDK server may hand the executor one more
      // connection event while both readers are busy, and that refusal counts too
      assertTrue(r.endpoint.readsRefused() >= 2, "refused " + r.endpoint.readsRefused());
      Map<String, Family> m = metrics(r);
      assertEquals((double) r.endpoint.readsRefused(),
          m.get("prefix_router_client_reads_refused_total").value());
      assertEquals(0.0, m.get("prefix_router_transport_reads_refused_total").value());
      assertEquals(0, r.transport.stats().readsRefused());
    }
  }

  @Test
  void theClientBodyBudgetReachesTheEndpoint() throws Exception {
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "solo", "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0", "--client-body-budget", "100m"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
    try (NodeMain.Running r = NodeMain.start(o)) {
      assertEquals(100L << 20, r.endpoint.bodyBudget());
      Map<String, Family> m = metrics(r);
      assertEquals(0.0, m.get("prefix_router_client_body_budget_refused_total").value());
      assertEquals(0.0, m.get("prefix_router_client_body_budget_held_bytes").value());
    }
  }

  /**
   * With {@code --peer-body-budget 8m}, a stranger holding a 4 MiB body leaves no room for a
   * second one's growth to 4 MiB: it is answered 503 and counted (the default, 64m, takes it).
   */
  @Test
  void thePeerBodyBudgetReachesTheTransport() throws Exception {
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "solo", "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0", "--peer-body-budget", "8m"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
    try (NodeMain.Running r = NodeMain.start(o)) {
      String peer = r.transport.localAddress().address();
      String head = PEER_HEADERS + "Content-Length: " + (4 << 20) + "\r\n\r\n";
      // each sends half its body and a byte: its buffer has grown to the whole 4 MiB
      String half = "x".repeat((2 << 20) + 1);
      send("127.0.0.3", peer, head + half);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (r.transport.stats().bodyBudgetHeldBytes() != 4 << 20
          && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      assertEquals(4 << 20, r.transport.stats().bodyBudgetHeldBytes());
      Socket second = send("127.0.0.4", peer, head + half);
      second.setSoTimeout(10_000);
      assertEquals("HTTP/1.1 503", new String(second.getInputStream().readNBytes(12),
          StandardCharsets.US_ASCII));
      assertEquals(1, r.transport.stats().bodyBudgetRefused());
      Map<String, Family> m = metrics(r);
      assertEquals(1.0, m.get("prefix_router_transport_body_budget_refused_total").value());
      assertEquals((double) (4 << 20),
          m.get("prefix_router_transport_body_budget_held_bytes").value());
    }
  }

  @Test
  void thePeerPortsLimits() throws Exception {
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "solo", "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0", "--peer-reader-threads", "2",
        "--peer-max-unfinished-reads", "1"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
    try (NodeMain.Running r = NodeMain.start(o)) {
      String peer = r.transport.localAddress().address();
      assertSecondBodyRefused(peer, PEER_BODY, () -> r.transport.stats().bodyBudgetHeldBytes());
      closeAllAndSettle();
      assertEquals(1, r.transport.stats().readsRefused());
      assertThirdConnectionClosedAtOnce(peer, PEER_HEADERS);
      // the client port keeps its own readers meanwhile
      Map<String, Family> m = metrics(r);
      assertTrue(r.transport.stats().readsRefused() >= 2);
      assertEquals((double) r.transport.stats().readsRefused(),
          m.get("prefix_router_transport_reads_refused_total").value());
      assertEquals(0.0, m.get("prefix_router_client_reads_refused_total").value());
    }
  }
}
