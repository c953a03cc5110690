package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GossipStats;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.Await;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Clients (or strangers) that stall mid-request cost only their own reader slots: health checks,
 * stats and other clients' requests are answered while they are still connected. The I/O
 * timeout is far above every bound asserted here. Also: exact paths, methods, 413 and unknown
 * keys.
 */
class ClientEndpointStrangerTest {

  private static final Duration LONG_IO_TIMEOUT = Duration.ofSeconds(120);
  private static final String HEADERS_STALL = "POST /v1/route/completions HTTP/1.1\r\nHost: x\r\n";
  private static final String BODY_STALL = "POST /v1/route/completions HTTP/1.1\r\nHost: x\r\n"
      + "Content-Length: 100\r\n\r\n{\"prompt\"";

  private final List<Socket> stallers = new ArrayList<>();
  private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private ClientEndpoint endpoint;
  private String base;

  @BeforeEach
  void startEndpoint() throws IOException {
    PrefixRouterNode node = mock(PrefixRouterNode.class);
    when(node.state()).thenReturn(PrefixRouterNode.State.RUNNING);
    when(node.nodeId()).thenReturn("solo");
    when(node.stats()).thenReturn(new NodeStats("solo", PrefixRouterNode.State.RUNNING,
        0, 0, 0, 0, 0, 0, 0, 0, Map.of(), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        new GossipStats(0, false, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)));
    RouteDecision d = new RouteDecision(RoutingPolicy.COST_AWARE, 1, new String[] {"solo"},
        new int[1], new int[1], new int[1], new long[1], new long[1],
        new RouteDecision.SkipReason[] {RouteDecision.SkipReason.NONE}, 0,
        RouteDecision.Reason.LOCAL_ONLY_POLICY);
    InferenceResponse r = new InferenceResponse("q", new EngineResult(new int[] {7}, "a", 1,
        0, 1, 1), "solo", false, 1, FallbackCause.NONE, d);
    when(node.submit(any())).thenReturn(CompletableFuture.completedFuture(r));
    endpoint = new ClientEndpoint(node, List::of, 16, LONG_IO_TIMEOUT);
    InetSocketAddress addr = endpoint.start("127.0.0.1", 0);
    base = "http://127.0.0.1:" + addr.getPort();
  }

  @AfterEach
  void stop() throws IOException {
    for (Socket s : stallers) {
      s.close();
    }
    endpoint.stop();
  }

  private Socket connectFrom(String localHost) throws IOException {
    Socket s = new Socket();
    stallers.add(s);
    s.bind(new InetSocketAddress(localHost, 0));
    URI u = URI.create(base);
    s.connect(new InetSocketAddress(u.getHost(), u.getPort()), 5_000);
    return s;
  }

  private Socket stall(String localHost, String prefix) throws IOException {
    Socket s = connectFrom(localHost);
    OutputStream out = s.getOutputStream();
    out.write(prefix.getBytes(StandardCharsets.US_ASCII));
    out.flush();
    return s;
  }

  private static void assertStillConnected(Socket s) throws IOException {
    s.setSoTimeout(50);
    assertThrows(SocketTimeoutException.class, () -> s.getInputStream().read(),
        "the stalled connection is still open");
  }

  private HttpResponse<String> send(String method, String path, String body) throws Exception {
    HttpRequest.BodyPublisher p = body == null
        ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body);
    return http.sendAsync(HttpRequest.newBuilder(URI.create(base + path)).method(method, p).build(),
        HttpResponse.BodyHandlers.ofString()).get(20, TimeUnit.SECONDS);
  }

  @Test
  void stallingClientsDoNotDelayHealthStatsOrOtherClients() throws Exception {
    // four times as many stallers as the endpoint has writer threads, in headers and bodies
    for (int i = 0; i < 4; i++) {
      stall("127.0.0.2", HEADERS_STALL);
      stall("127.0.0.3", BODY_STALL);
    }
    // every staller has reached the endpoint and holds a reader thread, the bodies their
    // address's slots (a fixed sleep only hoped so: a staller that came later was no test)
    java.net.InetAddress bodies = java.net.InetAddress.getByName("127.0.0.3");
    Await.until(() -> endpoint.readersInUse() == 8 && endpoint.unfinishedReadsFrom(bodies) == 4,
        "the 8 stallers hold reader threads, 4 of them reading bodies");
    long t0 = System.nanoTime();
    HttpResponse<String> health = send("GET", "/health", null);
    assertEquals(200, health.statusCode(), health.body());
    HttpResponse<String> stats = send("GET", "/v1/stats", null);
    assertEquals(200, stats.statusCode(), stats.body());
    HttpResponse<String> completion = send("POST", "/v1/route/completions", "{\"prompt\":[1,2]}");
    assertEquals(200, completion.statusCode(), completion.body());
    long elapsedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertTrue(elapsedMs < 20_000, "answered in " + elapsedMs + " ms");
    for (Socket s : stallers) {
      assertStillConnected(s);
    }
    assertEquals(0, endpoint.slowConnectionsClosed());
    assertEquals(0, endpoint.readsRefused());
  }

  @Test
  void oneAddressGetsAtMostItsShareOfUnfinishedBodies() throws Exception {
    for (int i = 0; i < ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS; i++) {
      stall("127.0.0.2", BODY_STALL);
    }
    // every staller's body is being read (a fixed sleep was too short on a busy machine: the
    // next request then took a free slot and stalled like the others, not refused)
    java.net.InetAddress host = java.net.InetAddress.getByName("127.0.0.2");
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (endpoint.unfinishedReadsFrom(host) < ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS
        && System.nanoTime() < until) {
      Thread.sleep(10);
    }
    assertEquals(ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS,
        endpoint.unfinishedReadsFrom(host), "the stalled bodies hold their address's slots");
    for (String path : List.of("/v1/route/completions", "/v1/completions")) {
      Socket next = connectFrom("127.0.0.2");
      next.getOutputStream().write(BODY_STALL.replace("/v1/route/completions", path)
          .getBytes(StandardCharsets.US_ASCII));
      String head = answerHead(next);
      assertTrue(head.startsWith("HTTP/1.1 503"),
          path + ": refused at once, long before the I/O timeout: " + head);
      assertTrue(head.toLowerCase(Locale.ROOT).contains("\r\nretry-after: 1\r\n"),
          path + ": a refusal the client should retry says when: " + head);
      // the body is left unread, and the server closes the connection after draining 64 KiB
      // of it: a client that kept the connection would send its next request into a closed one
      assertTrue(head.toLowerCase(Locale.ROOT).contains("\r\nconnection: close\r\n"),
          path + ": the client is told not to send on this connection again: " + head);
      next.close();
    }
    assertEquals(2, endpoint.readsRefused());
    HttpResponse<String> stats = send("GET", "/v1/stats", null);
    Map<?, ?> m = (Map<?, ?>) Json.parse(stats.body());
    assertEquals(2L, ((Map<?, ?>) m.get("client")).get("reads_refused"), stats.body());
    // other addresses are served
    assertEquals(200, send("POST", "/v1/route/completions", "{\"prompt\":[1]}").statusCode());
    for (Socket s : stallers.subList(0, ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS)) {
      assertStillConnected(s);
    }
  }

  @Test
  void pathsMatchExactlyAndTakeOneMethod() throws Exception {
    assertEquals(404, send("GET", "/healthzzz", null).statusCode());
    assertEquals(404, send("GET", "/health/x", null).statusCode());
    assertEquals(404, send("GET", "/v1/statsx", null).statusCode());
    assertEquals(404, send("POST", "/v1/route/completions/x", "{\"prompt\":[1]}").statusCode());
    assertEquals(404, send("GET", "/", null).statusCode());
    HttpResponse<String> delete = send("DELETE", "/v1/stats", null);
    assertEquals(405, delete.statusCode());
    assertEquals("GET", delete.headers().firstValue("Allow").orElse(""));
    HttpResponse<String> postHealth = send("POST", "/health", "{}");
    assertEquals(405, postHealth.statusCode());
    // the Allow header names every method the path takes: probes use HEAD as well as GET
    assertEquals("GET, HEAD", postHealth.headers().firstValue("Allow").orElse(""));
    HttpResponse<String> get = send("GET", "/v1/route/completions", null);
    assertEquals(405, get.statusCode());
    assertEquals("POST", get.headers().firstValue("Allow").orElse(""));
    assertEquals(200, send("GET", "/health", null).statusCode());
    assertEquals(200, send("HEAD", "/health", null).statusCode());
    assertEquals(200, send("GET", "/v1/stats", null).statusCode());
  }

  /** The head of the answer {@code s} reads, up to its blank line. */
  private static String answerHead(Socket s) throws IOException {
    s.setSoTimeout(10_000);
    InputStream in = s.getInputStream();
    StringBuilder head = new StringBuilder();
    while (head.indexOf("\r\n\r\n") < 0) {
      int b = in.read();
      assertTrue(b >= 0, "the connection closed in the answer's headers: " + head);
      head.append((char) b);
    }
    return head.toString();
  }

  /**
   * A request with a body that no route reads (an unknown path, a path that takes another
   * method) is answered with {@code Connection: close}: the server drains at most 64 KiB of its
   * body and closes the connection, so a client that kept it would send its next request into a
   * closed one. A request without a body keeps its connection.
   */
  @Test
  void aRefusalOfABodyNoRouteReadsSaysConnectionClose() throws Exception {
    byte[] body = new byte[1 << 20];
    java.util.Arrays.fill(body, (byte) ' ');
    for (String request : List.of("POST /v1/embeddings", "POST /v1/route/completions/x",
        "POST /v1/stats", "PUT /v1/completions")) {
      Socket s = connectFrom("127.0.0.1");
      OutputStream out = s.getOutputStream();
      out.write((request + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + body.length
          + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
      // a part of the body only: the server may answer and close while the rest is on its way,
      // and a write then would fail with a reset before the answer is read
      out.write(body, 0, 16 << 10);
      out.flush();
      String head = answerHead(s);
      assertTrue(head.startsWith("HTTP/1.1 40"), request + ": " + head);
      assertTrue(head.toLowerCase(Locale.ROOT).contains("\r\nconnection: close\r\n"),
          request + ": its body is left unread: " + head);
      s.close();
    }
    Socket s = connectFrom("127.0.0.1");
    s.getOutputStream().write("GET /v1/statsx HTTP/1.1\r\nHost: x\r\n\r\n"
        .getBytes(StandardCharsets.US_ASCII));
    String head = answerHead(s);
    assertTrue(head.startsWith("HTTP/1.1 404"), head);
    assertTrue(!head.toLowerCase(Locale.ROOT).contains("connection: close"),
        "no body: the connection is kept: " + head);
  }

  @Test
  void anOversizedBodyIs413() throws Exception {
    // declared too large: refused before reading
    Socket s = connectFrom("127.0.0.1");
    s.getOutputStream().write(("POST /v1/route/completions HTTP/1.1\r\nHost: x\r\n"
        + "Content-Length: " + ((8 << 20) + 1) + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
    String head = answerHead(s);
    assertTrue(head.startsWith("HTTP/1.1 413"), head);
    assertTrue(head.toLowerCase(Locale.ROOT).contains("\r\nconnection: close\r\n"),
        "the body is left unread: " + head);
    // sent too large without a length: cut off at the cap
    String big = "{\"prompt\":[1],\"id\":\"" + "x".repeat(8 << 20) + "\"}";
    HttpResponse<String> resp = http.sendAsync(HttpRequest.newBuilder(URI.create(base + "/v1/route/completions"))
            .POST(HttpRequest.BodyPublishers.fromPublisher(HttpRequest.BodyPublishers.ofString(big))).build(),
        HttpResponse.BodyHandlers.ofString()).get(30, TimeUnit.SECONDS);
    assertEquals(413, resp.statusCode(), resp.body());
  }

  @Test
  void anUnknownKeyIs400NamingIt() throws Exception {
    for (String key : List.of("max_token", "stream_options", "salt", "n")) {
      String value = key.equals("stream_options") ? "{\"include_usage\":true}"
          : key.equals("salt") ? "\"m\"" : "100";
      HttpResponse<String> resp = send("POST", "/v1/route/completions",
          "{\"prompt\":[1],\"" + key + "\":" + value + "}");
      assertEquals(400, resp.statusCode(), resp.body());
      String error = (String) ((Map<?, ?>) Json.parse(resp.body())).get("error");
      assertTrue(error.contains("\"" + key + "\""), error);
    }
    // every documented key is accepted
    HttpResponse<String> ok = send("POST", "/v1/route/completions",
        "{\"id\":\"a\",\"prompt\":[1],\"max_tokens\":1,\"temperature\":0,\"top_p\":1,\"seed\":3,"
            + "\"model\":\"lora-a\",\"cache_salt\":\"t1\",\"stream\":false}");
    assertEquals(200, ok.statusCode(), ok.body());
  }
}
