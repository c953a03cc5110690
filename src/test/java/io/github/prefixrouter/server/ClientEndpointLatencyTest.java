package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.server.PrometheusTextParser.Family;
import io.github.prefixrouter.server.PrometheusTextParser.Histogram;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.Await;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The client endpoint's latency histograms: every request it accepted is timed from its arrival
 * to the end of its answer, by where it was served (local, forwarded, failed), on the token
 * route and the OpenAI routes; a streamed one also to its first event of output. The endpoint
 * reads a clock the test moves (and counts the reads of), and the stub node answers when the
 * test says.
 */
class ClientEndpointLatencyTest {

  private static final long MS = 1_000_000L;
  private static final String DURATION = "prefix_router_client_request_duration_seconds";
  private static final String FIRST_OUTPUT = "prefix_router_client_time_to_first_output_seconds";

  private final StubNode stub = new StubNode();
  private final HttpClient client =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  /** The endpoint's clock: negative, as System.nanoTime may be. */
  private final AtomicLong now = new AtomicLong(-9_000_000_000L);
  private final AtomicInteger clockReads = new AtomicInteger();
  private ClientEndpoint endpoint;
  private String address;

  @BeforeEach
  void start() throws IOException {
    when(stub.node.stats()).thenReturn(StatsFixtures.nodeStats());
    endpoint = new ClientEndpoint(stub.node, List::of, 64, Duration.ofSeconds(10), "base",
        ClientEndpoint.DEFAULT_READER_THREADS, ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS,
        new FakeTokenizer(), () -> 1L, 7L, ClientEndpoint.DEFAULT_BODY_BUDGET, () -> {
          clockReads.incrementAndGet();
          return now.get();
        });
    InetSocketAddress a = endpoint.start("127.0.0.1", 0);
    address = "127.0.0.1:" + a.getPort();
  }

  @AfterEach
  void stop() {
    endpoint.stop();
  }

  private HttpRequest post(String path, String body) {
    return HttpRequest.newBuilder(URI.create("http://" + address + path))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build();
  }

  private CompletableFuture<HttpResponse<String>> postAsync(String path, String body) {
    return client.sendAsync(post(path, body), HttpResponse.BodyHandlers.ofString());
  }

  private static InferenceResponse response(String id, boolean forwarded) {
    return new InferenceResponse(id, new EngineResult(new int[] {5, 6}, "ab", 3, 0, 1, 1),
        forwarded ? "peer-b" : "solo", forwarded, forwarded ? 2 : 1, FallbackCause.NONE,
        StubNode.LOCAL_DECISION);
  }

  private Map<String, Family> metrics() {
    return PrometheusTextParser.parse(endpoint.metricsText());
  }

  private Histogram histogram(String family, String served) {
    return metrics().get(family).histogram("served", served);
  }

  private Histogram awaitCount(String family, String served, int n) throws InterruptedException {
    Await.until(() -> histogram(family, served).count() >= n, family + "{" + served + "} " + n);
    Histogram h = histogram(family, served);
    assertEquals(n, h.count(), family + "{" + served + "}");
    return h;
  }

  /** Sends a request whole, moves the clock, then has the node answer (or fail) it. */
  private HttpResponse<String> whole(String path, String body, long tookNanos,
      InferenceResponse answer, Throwable failure) throws Exception {
    int before = stub.futures.size();
    CompletableFuture<HttpResponse<String>> sent = postAsync(path, body);
    stub.awaitSubmitted(before + 1);
    now.addAndGet(tookNanos);
    CompletableFuture<InferenceResponse> f = stub.futures.get(before);
    if (failure == null) {
      f.complete(answer);
    } else {
      f.completeExceptionally(failure);
    }
    return sent.get(20, TimeUnit.SECONDS);
  }

  @Test
  void wholeAnswersAreTimedByWhereTheyWereServed() throws Exception {
    HttpResponse<String> local = whole("/v1/route/completions", "{\"id\":\"l\",\"prompt\":[1,2]}",
        3_000 * MS, response("l", false), null);
    assertEquals(200, local.statusCode(), local.body());
    Histogram h = awaitCount(DURATION, "local", 1);
    assertEquals(1.0, h.above(2.5), "3 s is above 2.5 s: " + h);
    assertEquals(0.0, h.above(5.0), "and at most 5 s: " + h);
    assertEquals(3.0, h.sum(), 1e-9);

    HttpResponse<String> chat = whole("/v1/chat/completions",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", 300 * MS,
        response("solo-c1", true), null);
    assertEquals(200, chat.statusCode(), chat.body());
    h = awaitCount(DURATION, "forwarded", 1);
    assertEquals(1.0, h.above(0.25), h.toString());
    assertEquals(0.0, h.above(0.5), h.toString());

    HttpResponse<String> failed = whole("/v1/route/completions", "{\"prompt\":[3]}", 70_000 * MS,
        null, new IllegalStateException("failed everywhere"));
    assertEquals(502, failed.statusCode(), failed.body());
    h = awaitCount(DURATION, "failed", 1);
    assertEquals(1.0, h.above(60.0), h.toString());
    assertEquals(0.0, h.above(120.0), h.toString());

    // a request refused before it was accepted is not timed; whole answers have no first output
    assertEquals(400, client.send(post("/v1/route/completions", "{\"prompt\":"),
        HttpResponse.BodyHandlers.ofString()).statusCode());
    Map<String, Family> m = metrics();
    for (String served : ClientLatency.SERVED) {
      assertEquals(1.0, m.get(DURATION).histogram("served", served).count(), served);
      assertEquals(0.0, m.get(FIRST_OUTPUT).histogram("served", served).count(), served);
    }
    // /v1/stats carries no histogram
    Map<?, ?> stats = (Map<?, ?>) Json.parse(client.send(HttpRequest.newBuilder(
        URI.create("http://" + address + "/v1/stats")).build(),
        HttpResponse.BodyHandlers.ofString()).body());
    String json = Json.write(stats);
    assertEquals(-1, json.indexOf("duration"), json);
    assertEquals(-1, json.indexOf("first_output"), json);
  }

  /** Sends a streamed request; the events are read from the returned reader. */
  private BufferedReader stream(String body) throws Exception {
    HttpResponse<InputStream> resp = client.send(post("/v1/route/completions", body),
        HttpResponse.BodyHandlers.ofInputStream());
    assertEquals(200, resp.statusCode());
    return new BufferedReader(new InputStreamReader(resp.body(), StandardCharsets.UTF_8));
  }

  @Test
  void aStreamIsTimedToItsFirstOutputAndToItsEnd() throws Exception {
    int reads = clockReads.get();
    CompletableFuture<BufferedReader> events = CompletableFuture.supplyAsync(() -> {
      try {
        return stream("{\"id\":\"s\",\"prompt\":[1,2],\"max_tokens\":2,\"stream\":true}");
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    });
    stub.awaitSubmitted(1);
    now.addAndGet(200 * MS);
    stub.listeners.get(0).onOutput(new int[] {5}, "a");
    BufferedReader in = events.get(20, TimeUnit.SECONDS);
    assertEquals("a", Sse.text(Sse.next(in)));
    // the clock was read at the arrival and once the first event was written
    Await.until(() -> clockReads.get() >= reads + 2, "the first event's time read");
    now.addAndGet(4_000 * MS);
    stub.futures.get(0).complete(response("s", true));
    Object last;
    do {
      last = Sse.next(in);
    } while (last != null && !Sse.DONE.equals(last));
    assertEquals(Sse.DONE, last);
    Histogram first = awaitCount(FIRST_OUTPUT, "forwarded", 1);
    assertEquals(1.0, first.above(0.1), first.toString());
    assertEquals(0.0, first.above(0.25), first.toString());
    Histogram d = awaitCount(DURATION, "forwarded", 1);
    assertEquals(1.0, d.above(2.5), d.toString());
    assertEquals(0.0, d.above(5.0), d.toString());
    assertEquals(4.2, d.sum(), 1e-9);
    assertEquals(0.0, histogram(DURATION, "local").count());
    assertEquals(0.0, histogram(DURATION, "failed").count());
  }

  /**
   * Requests answered while /metrics is scraped: every scrape is consistent (the reader checks
   * that each _count is its +Inf bucket) and no count falls; at the end each request is counted
   * once, under where it was served.
   */
  @Test
  void concurrentRequestsAreEachCountedOnceWhileScraped() throws Exception {
    int n = 48;
    List<CompletableFuture<HttpResponse<String>>> sent = new java.util.ArrayList<>();
    for (int i = 0; i < n; i++) {
      // the prompt says which request it is (the node gets an id of the endpoint's)
      sent.add(postAsync("/v1/route/completions", "{\"id\":\"r" + i + "\",\"prompt\":[" + i
          + "],\"stream\":" + (i % 2 == 0) + "}"));
    }
    stub.awaitSubmitted(n);
    AtomicReference<Throwable> failure = new AtomicReference<>();
    AtomicBoolean done = new AtomicBoolean();
    Thread scraper = new Thread(() -> {
      try {
        double last = 0;
        while (!done.get()) {
          Map<String, Family> m = metrics();
          double total = 0;
          for (String served : ClientLatency.SERVED) {
            total += m.get(DURATION).histogram("served", served).count();
          }
          assertEquals(true, total >= last, "the count fell from " + last + " to " + total);
          last = total;
        }
      } catch (Throwable e) {
        failure.set(e);
      }
    });
    scraper.start();
    for (int i = 0; i < n; i++) {
      String id = stub.requests.get(i).id();
      int k = stub.requests.get(i).tokens()[0];
      if (k % 3 == 2) {
        stub.futures.get(i).completeExceptionally(new IllegalStateException("failed everywhere"));
      } else {
        stub.futures.get(i).complete(response(id, k % 3 == 1));
      }
    }
    for (CompletableFuture<HttpResponse<String>> f : sent) {
      f.get(20, TimeUnit.SECONDS);
    }
    for (String served : ClientLatency.SERVED) {
      awaitCount(DURATION, served, n / 3);
    }
    done.set(true);
    scraper.join(20_000);
    if (failure.get() != null) {
      throw new AssertionError(failure.get());
    }
    // the streamed ones (even) that did not fail wrote their end event: their first output
    long streamedServed = java.util.stream.IntStream.range(0, n)
        .filter(k -> k % 2 == 0 && k % 3 != 2).count();
    assertEquals(streamedServed, histogram(FIRST_OUTPUT, "local").count()
        + histogram(FIRST_OUTPUT, "forwarded").count());
    assertEquals(0.0, histogram(FIRST_OUTPUT, "failed").count());
  }

  /** A client that goes away mid-stream: its request is cancelled and counted as failed. */
  @Test
  void aStreamWhoseClientWentAwayIsFailed() throws Exception {
    byte[] body = "{\"id\":\"g\",\"prompt\":[1],\"max_tokens\":9,\"stream\":true}"
        .getBytes(StandardCharsets.UTF_8);
    int reads = clockReads.get();
    try (Socket socket = new Socket("127.0.0.1", Integer.parseInt(address.split(":")[1]))) {
      OutputStream out = socket.getOutputStream();
      out.write(("POST /v1/route/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
          + body.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
      out.write(body);
      out.flush();
      stub.awaitSubmitted(1);
      now.addAndGet(40 * MS);
      stub.listeners.get(0).onOutput(new int[] {5}, "a");
      BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(),
          StandardCharsets.UTF_8));
      String line;
      do {
        line = in.readLine();
      } while (line != null && !line.startsWith("data: "));
      assertEquals("data: {\"id\":\"g\",\"token_ids\":[5],\"text\":\"a\"}", line);
      Await.until(() -> clockReads.get() >= reads + 2, "the first event's time read");
    }
    now.addAndGet(7_000 * MS);
    CompletableFuture<InferenceResponse> f = stub.futures.get(0);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!f.isDone() && System.nanoTime() < deadline) {
      stub.listeners.get(0).onOutput(new int[] {6}, "b"); // finds the connection gone
      Thread.sleep(20);
    }
    assertEquals(true, f.isCancelled(), "the request was not cancelled");
    Histogram d = awaitCount(DURATION, "failed", 1);
    assertEquals(1.0, d.above(5.0), d.toString());
    assertEquals(0.0, d.above(10.0), d.toString());
    Histogram first = awaitCount(FIRST_OUTPUT, "failed", 1);
    assertEquals(1.0, first.above(0.025), first.toString());
    assertEquals(0.0, first.above(0.05), first.toString());
    assertEquals(0.0, histogram(DURATION, "local").count());
  }

  @Test
  void failedStreamsAreFailedWithAFirstOutputOnlyIfOneWasWritten() throws Exception {
    // fails before its first output: answered 502, timed, no first output
    CompletableFuture<HttpResponse<String>> before = postAsync("/v1/route/completions",
        "{\"id\":\"f1\",\"prompt\":[1],\"stream\":true}");
    stub.awaitSubmitted(1);
    now.addAndGet(1_500 * MS);
    stub.futures.get(0).completeExceptionally(new IllegalStateException("failed everywhere"));
    assertEquals(502, before.get(20, TimeUnit.SECONDS).statusCode());
    Histogram d = awaitCount(DURATION, "failed", 1);
    assertEquals(1.0, d.above(1.0), d.toString());
    assertEquals(0.0, d.above(2.5), d.toString());
    for (String served : ClientLatency.SERVED) {
      assertEquals(0.0, histogram(FIRST_OUTPUT, served).count(), served);
    }

    // fails after its first output: an error event, failed in both
    int reads = clockReads.get();
    CompletableFuture<BufferedReader> events = CompletableFuture.supplyAsync(() -> {
      try {
        return stream("{\"id\":\"f2\",\"prompt\":[1],\"max_tokens\":3,\"stream\":true}");
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    });
    stub.awaitSubmitted(2);
    now.addAndGet(30 * MS);
    stub.listeners.get(1).onOutput(new int[] {5}, "a");
    BufferedReader in = events.get(20, TimeUnit.SECONDS);
    assertEquals("a", Sse.text(Sse.next(in)));
    Await.until(() -> clockReads.get() >= reads + 2, "the first event's time read");
    now.addAndGet(20_000 * MS);
    stub.futures.get(1).completeExceptionally(new IllegalStateException("failed everywhere"));
    Map<?, ?> error = (Map<?, ?>) Sse.next(in);
    assertEquals(502L, ((Map<?, ?>) error.get("error")).get("status"));
    Histogram first = awaitCount(FIRST_OUTPUT, "failed", 1);
    assertEquals(1.0, first.above(0.025), first.toString());
    assertEquals(0.0, first.above(0.05), first.toString());
    d = awaitCount(DURATION, "failed", 2);
    assertEquals(1.0, d.above(15.0), d.toString());
    assertEquals(0.0, d.above(30.0), d.toString());
  }
}
