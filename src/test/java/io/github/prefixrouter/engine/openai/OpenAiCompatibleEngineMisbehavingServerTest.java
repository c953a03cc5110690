package io.github.prefixrouter.engine.openai;

import static io.github.prefixrouter.testing.RawConnections.closedByClient;
import static io.github.prefixrouter.testing.RawConnections.readHead;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.EngineTimeoutException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The adapter against servers that misbehave at the HTTP level: answers whose body stalls
 * after the headers, streams held open after {@code [DONE]}. Each server here is a raw socket
 * answering by hand, so that the test controls every byte and sees when the adapter closes the
 * connection. Their requestTimeout, 2 s, is what the tests wait for; it is long enough for the
 * first exchange of a fresh HTTP client on a loaded machine. Tests that must not wait for it set
 * a minute.
 */
class OpenAiCompatibleEngineMisbehavingServerTest {

  private static InferenceRequest request(String id) {
    return new InferenceRequest(id, new int[] {101, 7, 7, 9000}, new GenerationParams(3, 0.0, 0.9, 17L));
  }

  private static EngineException failure(CompletableFuture<EngineResult> f) {
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(20, TimeUnit.SECONDS));
    assertInstanceOf(EngineException.class, e.getCause());
    return (EngineException) e.getCause();
  }

  private static void write(OutputStream out, String s) throws IOException {
    out.write(s.getBytes(StandardCharsets.UTF_8));
    out.flush();
  }

  @Test
  void aPlainAnswerWhoseBodyStallsAfterItsHeadersTimesOutAndClosesTheConnection() throws Exception {
    // to a plain request and to a streamed one, at once: each waits for requestTimeout
    atOnce(List.of(() -> stalledJsonBody(false), () -> stalledJsonBody(true)));
  }

  /** A case of a test; cases that wait for a timeout run at once, see {@link #atOnce}. */
  private interface Case {
    void run() throws Exception;
  }

  /**
   * Runs {@code cases} at once, each on a thread of its own, and throws the first one's
   * failure, in the order given, when all have ended.
   */
  private static void atOnce(List<Case> cases) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(cases.size());
    try {
      List<Future<?>> running = new ArrayList<>();
      for (Case c : cases) {
        running.add(pool.submit(() -> {
          c.run();
          return null;
        }));
      }
      for (Future<?> c : running) {
        try {
          c.get();
        } catch (ExecutionException failed) {
          if (failed.getCause() instanceof Error err) {
            throw err;
          }
          throw (Exception) failed.getCause();
        }
      }
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * A server that sends a JSON answer's headers and a part of its body, then nothing (a hung
   * server or proxy): the request fails at {@code requestTimeout} as one whose headers never
   * came, gives its slot back, and its connection is closed.
   */
  private static void stalledJsonBody(boolean streamed) throws Exception {
    try (ServerSocket raw = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl("http://127.0.0.1:" + raw.getLocalPort())
          .requestTimeout(Duration.ofSeconds(2)).build();
      OpenAiCompatibleEngineStreamingTest.Pieces pieces = new OpenAiCompatibleEngineStreamingTest.Pieces();
      CompletableFuture<EngineResult> f = streamed ? pieces.run(e, request("r1")) : e.execute(request("r1"));
      raw.setSoTimeout(10_000);
      try (Socket conn = raw.accept()) {
        ScriptedOpenAiServer.readRequest(conn);
        // the headers and a part of the body, and then nothing (a hung server or proxy)
        write(conn.getOutputStream(), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + "Content-Length: 100\r\n\r\n{\"choices\":[{\"text\":");
        EngineException err = failure(f);
        assertInstanceOf(EngineTimeoutException.class, err, err::toString);
        assertFalse(err.retryable());
        assertEquals(0, e.load().total(), "the slot is given back");
        assertTrue(closedByClient(conn), "the connection stayed open after the timeout");
      }
      assertTrue(pieces.texts.isEmpty());
    }
  }

  /**
   * A server that accepts the connection and reads the request but never sends a status line
   * (or sends only an informational 1xx, or headers that never end): the request, plain or
   * streamed, fails once at {@code requestTimeout} with an {@link EngineTimeoutException},
   * gives its slot back, streams nothing, and its connection is closed by the client.
   */
  @Test
  void aServerThatAcceptsButNeverSendsHeadersTimesOutOnceAndClosesTheConnection() throws Exception {
    // the six cases each wait for requestTimeout: they run at once, each on a server and an
    // engine of its own
    String[] heads = {"", "HTTP/1.1 100 Continue\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"};
    List<Case> cases = new ArrayList<>();
    for (String head : heads) {
      for (boolean streamed : new boolean[] {false, true}) {
        cases.add(() -> neverSendsHeaders(head, streamed));
      }
    }
    atOnce(cases);
  }

  private static void neverSendsHeaders(String head, boolean streamed) throws Exception {
    String what = (streamed ? "streamed, " : "plain, ") + "after [" + head.strip() + "]";
    try (ServerSocket raw = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl("http://127.0.0.1:" + raw.getLocalPort())
          .requestTimeout(Duration.ofSeconds(2)).build();
      OpenAiCompatibleEngineStreamingTest.Pieces pieces =
          new OpenAiCompatibleEngineStreamingTest.Pieces();
      AtomicInteger completions = new AtomicInteger();
      CompletableFuture<EngineResult> f = streamed ? pieces.run(e, request("r1"))
          : e.execute(request("r1"));
      f.whenComplete((r, err) -> completions.incrementAndGet());
      raw.setSoTimeout(10_000);
      try (Socket conn = raw.accept()) {
        ScriptedOpenAiServer.readRequest(conn);
        write(conn.getOutputStream(), head);
        EngineException err = failure(f);
        assertInstanceOf(EngineTimeoutException.class, err, what + ": " + err);
        assertFalse(err.retryable(), what);
        assertEquals(0, e.load().total(), what + ": the slot is given back");
        assertTrue(closedByClient(conn), what + ": the connection stayed open");
      }
      assertEquals(1, completions.get(), what);
      assertTrue(pieces.texts.isEmpty(), what);
    }
  }

  @Test
  void aStreamHeldOpenAfterDoneIsClosedSoonAfterItNotAtTheDeadline() throws Exception {
    // [DONE] completes the request; a server (or proxy) that then neither ends the body nor
    // closes the connection must not hold it to requestTimeout (a minute here)
    streamToDone(false);
  }

  @Test
  void aStreamWhoseBodyEndsAfterDoneLeavesItsConnectionForTheNextRequest() throws Exception {
    // the body's end (its last chunk, 0) is written after [DONE]: the connection is not closed,
    // neither at [DONE] nor later, and the next request is sent on it
    streamToDone(true);
  }

  /**
   * A stream of one chunk and [DONE] in a chunked body whose end (its last chunk, 0) follows in
   * a write of its own, or never comes; requestTimeout is a minute.
   */
  private static void streamToDone(boolean bodyEnds) throws Exception {
    try (ServerSocket raw = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl("http://127.0.0.1:" + raw.getLocalPort())
          .requestTimeout(Duration.ofSeconds(60)).build();
      OpenAiCompatibleEngineStreamingTest.Pieces pieces =
          new OpenAiCompatibleEngineStreamingTest.Pieces();
      CompletableFuture<EngineResult> f = pieces.run(e, request("r1"));
      raw.setSoTimeout(10_000);
      try (Socket conn = raw.accept()) {
        ScriptedOpenAiServer.readRequest(conn);
        String events = OpenAiCompatibleEngineStreamingTest.chunk("a", "[1]", "length")
            + "data: [DONE]\n\n";
        write(conn.getOutputStream(), "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            + "Transfer-Encoding: chunked\r\n\r\n" + Integer.toHexString(events.length()) + "\r\n"
            + events + "\r\n");
        if (bodyEnds) {
          write(conn.getOutputStream(), "0\r\n\r\n");
        }
        assertEquals("a", f.get(20, TimeUnit.SECONDS).text());
        assertEquals(0, e.load().total());
        assertEquals(List.of("a"), pieces.texts, "the answer is given once");
        if (!bodyEnds) {
          assertTrue(closedByClient(conn), "the connection stayed open 10 s after [DONE]");
          return;
        }
        // the body has ended, and the connection is back in the client's pool (at the body's
        // end, after the request completed) well before the connection of a body still open
        // would be closed: the next request, sent after that, comes on this connection
        Thread.sleep(OpenAiCompatibleEngine.AFTER_DONE_MILLIS + 1000);
        CompletableFuture<EngineResult> next = pieces.run(e, request("r2"));
        ScriptedOpenAiServer.readRequest(conn);
        next.cancel(true);
      }
    }
  }

  @Test
  void aHealthAnswerWhoseBodyStallsStillAnswersTheProbe() throws Exception {
    // NodeMain waits for health() at start-up: a /health whose body never ends (a hung server
    // or proxy) must not hold it for ever. The status says it: 200 is healthy.
    try (ServerSocket raw = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl("http://127.0.0.1:" + raw.getLocalPort())
          .requestTimeout(Duration.ofSeconds(2)).build();
      CompletableFuture<Boolean> health = e.health();
      raw.setSoTimeout(10_000);
      try (Socket conn = raw.accept()) {
        conn.setSoTimeout(10_000);
        InputStream in = conn.getInputStream();
        StringBuilder head = new StringBuilder();
        while (!head.toString().endsWith("\r\n\r\n")) {
          int b = in.read();
          assertTrue(b >= 0, "the probe ended early");
          head.append((char) b);
        }
        assertTrue(head.toString().startsWith("GET /health "), head.toString());
        write(conn.getOutputStream(), "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nstarting");
        assertTrue(health.get(20, TimeUnit.SECONDS));
        assertTrue(closedByClient(conn), "the probe's connection stayed open after requestTimeout");
      }
    }
  }

  /**
   * close() ends the health probes in flight at once: one whose answer's headers have not come
   * completes with -1, and one whose answer's body stalls after its headers has its connection
   * closed. Both were left to {@code requestTimeout} (here an hour): the probe's future and its
   * connection stayed open after close() until then.
   */
  @Test
  void closeEndsTheHealthProbesInFlightAtOnce() throws Exception {
    try (ServerSocket raw = new ServerSocket(0, 4, InetAddress.getLoopbackAddress())) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl("http://127.0.0.1:" + raw.getLocalPort())
          .requestTimeout(Duration.ofHours(1)).build();
      raw.setSoTimeout(10_000);
      CompletableFuture<Integer> unanswered = e.healthStatus();
      try (Socket first = raw.accept()) {
        assertTrue(readHead(first).startsWith("GET /health "));
        CompletableFuture<Integer> stalled = e.healthStatus();
        try (Socket second = raw.accept()) {
          assertTrue(readHead(second).startsWith("GET /health "));
          write(second.getOutputStream(),
              "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 100\r\n\r\nstarting");
          assertEquals(503, stalled.get(20, TimeUnit.SECONDS));
          e.close();
          try {
            assertEquals(-1, unanswered.get(5, TimeUnit.SECONDS));
          } catch (java.util.concurrent.TimeoutException stuck) {
            throw new AssertionError("a probe in flight at close() did not end within 5 s");
          }
          assertTrue(closedByClient(first), "the unanswered probe's connection stayed open");
          assertTrue(closedByClient(second), "the stalled probe's connection stayed open");
        }
      }
      assertEquals(-1, e.healthStatus().get(5, TimeUnit.SECONDS));
    }
  }

  /** The failures of the campaign below, one per request, chosen by its {@code max_tokens}. */
  private static final String[] KINDS = {
      "malformed chunk", "error event", "finish_reason abort", "line above the limit",
      "cancelled from the listener", "stalled stream", "plain answer above the limit",
      "held open after [DONE]", "stalled plain body", "invalid UTF-8", "cut before [DONE]",
  };

  @Test
  void manyFailuresOfEveryKindLeakNoConnectionNoSlotAndNoThread() throws Exception {
    // every way a server can fail a request, several times over, at once: each request's
    // future completes, its slot is given back, its connection is closed by the client, and
    // no thread is left working for it (the JDK client's pool may keep idle workers; it
    // reaps them itself, so their number is no sign of a leak)
    Set<Thread> before = Thread.getAllStackTraces().keySet();
    try (ServerSocket raw = new ServerSocket(0, 64, InetAddress.getLoopbackAddress())) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl("http://127.0.0.1:" + raw.getLocalPort())
          .requestTimeout(Duration.ofSeconds(2)).maxResponseBytes(1024).build();
      ConcurrentLinkedQueue<Thread> handlers = new ConcurrentLinkedQueue<>();
      AtomicInteger closed = new AtomicInteger();
      AtomicInteger accepted = new AtomicInteger();
      Thread acceptor = new Thread(() -> {
        while (!raw.isClosed()) {
          try {
            Socket conn = raw.accept();
            accepted.incrementAndGet();
            Thread h = new Thread(() -> misbehave(conn, closed), "misbehaving-server");
            h.setDaemon(true);
            handlers.add(h);
            h.start();
          } catch (IOException stopped) {
            return;
          }
        }
      }, "misbehaving-acceptor");
      acceptor.setDaemon(true);
      acceptor.start();
      int perRound = 3 * KINDS.length;
      for (int round = 0; round < 2; round++) {
        List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
        for (int i = 0; i < perRound; i++) {
          int kind = i % KINDS.length;
          String id = "r" + round + "-" + i;
          InferenceRequest r = new InferenceRequest(id, new int[] {1, 2, 3},
              new GenerationParams(100 + kind, 0.0, 1.0, 0L));
          boolean plain = KINDS[kind].contains("plain");
          fs.add(plain ? e.execute(r) : e.execute(r, (tokens, text) -> {
            if (KINDS[kind].startsWith("cancelled")) {
              e.cancel(id);
            }
          }));
        }
        for (int i = 0; i < perRound; i++) {
          String kind = KINDS[i % KINDS.length];
          CompletableFuture<EngineResult> f = fs.get(i);
          if (kind.startsWith("held open")) {
            assertEquals("a", f.get(20, TimeUnit.SECONDS).text(), kind);
          } else {
            EngineException err = failure(f);
            assertEquals(!kind.startsWith("cancelled"), err.retryable() || err instanceof EngineTimeoutException,
                kind + ": " + err);
          }
        }
        assertEquals(0, e.load().total(), "every slot is given back");
        // every connection of the round is closed by the client
        for (Thread h; (h = handlers.poll()) != null; ) {
          h.join(20_000);
          assertFalse(h.isAlive(), "a connection stayed open");
        }
        assertEquals(accepted.get(), closed.get(), "connections the client closed");
        assertEquals(List.of(), threadsStillWorking(before, Duration.ofSeconds(20)),
            "threads still working for round " + round + "'s requests");
      }
      assertTrue(accepted.get() >= 2 * perRound, accepted + " connections");
    }
  }

  /**
   * The threads started since {@code before} that are still working once {@code patience} has
   * passed, by name and top frame: a thread running this library's code, or an HTTP client
   * worker that is not waiting in its pool for a task. The test's own server threads and the
   * client's selector, which waits for any connection, do not count.
   */
  private static List<String> threadsStillWorking(Set<Thread> before, Duration patience)
      throws InterruptedException {
    long deadline = System.nanoTime() + patience.toNanos();
    while (true) {
      List<String> working = new ArrayList<>();
      for (Map.Entry<Thread, StackTraceElement[]> t : Thread.getAllStackTraces().entrySet()) {
        Thread thread = t.getKey();
        String name = thread.getName();
        if (before.contains(thread) || thread == Thread.currentThread()
            || name.startsWith("misbehaving-") || name.contains("SelectorManager")) {
          continue;
        }
        StackTraceElement[] stack = t.getValue();
        boolean ours = Arrays.stream(stack)
            .anyMatch(f -> f.getClassName().startsWith("io.github.prefixrouter."));
        boolean idleWorker = Arrays.stream(stack)
            .anyMatch(f -> f.getClassName().equals("java.util.concurrent.ThreadPoolExecutor")
                && f.getMethodName().equals("getTask"));
        boolean clientWorker = name.startsWith("HttpClient-") && name.contains("-Worker-");
        if (ours || (clientWorker && !idleWorker)) {
          working.add(name + " at " + (stack.length > 0 ? stack[0] : "?"));
        }
      }
      if (working.isEmpty() || System.nanoTime() > deadline) {
        return working;
      }
      Thread.sleep(50);
    }
  }

  /** Answers one connection as its request's kind says, then waits for the client to close it. */
  private static void misbehave(Socket conn, AtomicInteger closed) {
    try (conn) {
      conn.setSoTimeout(10_000);
      InputStream in = conn.getInputStream();
      StringBuilder head = new StringBuilder();
      while (!head.toString().endsWith("\r\n\r\n")) {
        int b = in.read();
        if (b < 0) {
          return;
        }
        head.append((char) b);
      }
      Matcher m = Pattern.compile("(?i)content-length:\\s*(\\d+)").matcher(head);
      assertTrue(m.find(), head.toString());
      String body = new String(in.readNBytes(Integer.parseInt(m.group(1))), StandardCharsets.UTF_8);
      Matcher max = Pattern.compile("\"max_tokens\":(\\d+)").matcher(body);
      assertTrue(max.find(), body);
      String kind = KINDS[Integer.parseInt(max.group(1)) - 100];
      OutputStream out = conn.getOutputStream();
      String a = OpenAiCompatibleEngineStreamingTest.chunk("a", "[1]", null);
      String events = switch (kind) {
        case "malformed chunk" -> a + "data: {\"choices\":[{\"text\":5}]}\n\n";
        case "error event" -> a + "data: {\"error\":{\"message\":\"dead\"}}\n\n";
        case "finish_reason abort" -> OpenAiCompatibleEngineStreamingTest.chunk("a", "[1]", "abort");
        case "line above the limit" -> ": " + "z".repeat(2000);
        case "held open after [DONE]" -> OpenAiCompatibleEngineStreamingTest.chunk("a", "[1]", "length")
            + "data: [DONE]\n\n";
        case "invalid UTF-8" -> a + "data: \u00ff\n\n"; // replaced by a lone byte below
        default -> a;
      };
      if (kind.contains("plain")) {
        boolean large = kind.contains("limit");
        write(out, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + (large ? 5000 : 100) + "\r\n\r\n{\"choices\":[{\"text\":\"" + (large ? "x".repeat(2000) : ""));
      } else {
        byte[] b = events.getBytes(StandardCharsets.UTF_8);
        if (kind.equals("invalid UTF-8")) {
          b = events.replace("\u00ff", "?").getBytes(StandardCharsets.UTF_8);
          b[b.length - 3] = (byte) 0xFF;
        }
        boolean cut = kind.equals("cut before [DONE]");
        out.write(("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            + (cut ? "Connection: close\r\n" : "") // a body that ends: not for reuse
            + "Transfer-Encoding: chunked\r\n\r\n" + Integer.toHexString(b.length) + "\r\n")
            .getBytes(StandardCharsets.US_ASCII));
        out.write(b);
        out.write("\r\n".getBytes(StandardCharsets.US_ASCII));
        if (cut) {
          out.write("0\r\n\r\n".getBytes(StandardCharsets.US_ASCII)); // the body ends: no [DONE]
        }
        out.flush();
      }
      // and nothing more: the client must close the connection (it does as the body ends when
      // told Connection: close)
      if (closedByClient(conn)) {
        closed.incrementAndGet();
      }
    } catch (IOException gone) {
      closed.incrementAndGet(); // reset by the client while writing: closed as well
    }
  }
}
