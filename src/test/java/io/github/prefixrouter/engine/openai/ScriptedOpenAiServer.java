package io.github.prefixrouter.engine.openai;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.internal.wire.JdkHttpServers;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A fake OpenAI-compatible server on loopback whose {@code POST /v1/completions} does what the
 * test sets in {@link #behaviour}, with the request's parsed JSON body (also kept in
 * {@link #lastBody}); {@code GET /health} answers {@link #healthStatus} and {@code GET
 * /v1/models} an empty list (or {@link #modelsStatus}). {@link #close()} releases every handler waiting in
 * {@link #awaitRelease()} and stops the server.
 */
final class ScriptedOpenAiServer implements AutoCloseable {

  /** What the fake server does with a completions request. */
  interface Behaviour {
    void answer(HttpExchange ex, Map<?, ?> body) throws IOException;
  }

  /** What the next completions requests get. */
  final AtomicReference<Behaviour> behaviour = new AtomicReference<>();
  /** The body of the last completions request. */
  final AtomicReference<Map<?, ?>> lastBody = new AtomicReference<>();
  /** What {@code GET /health} answers. */
  volatile int healthStatus = 200;
  /** What {@code GET /v1/models} answers: 200 with an empty list, or this status without one. */
  volatile int modelsStatus = 200;
  /** Counted down by the test (or by {@link #close()}) to let held handlers go. */
  final CountDownLatch release = new CountDownLatch(1);
  private final HttpServer server;

  private ScriptedOpenAiServer(ExecutorService executor) throws IOException {
    server = JdkHttpServers.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.setExecutor(executor);
    server.createContext("/v1/completions", ex -> {
      try (ex) {
        Map<?, ?> body = (Map<?, ?>) Json.parse(
            new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8));
        lastBody.set(body);
        behaviour.get().answer(ex, body);
      } catch (IOException e) {
        // the client went away
      }
    });
    server.createContext("/health", ex -> {
      ex.sendResponseHeaders(healthStatus, -1);
      ex.close();
    });
    server.createContext("/v1/models", ex -> {
      if (modelsStatus != 200) {
        ex.sendResponseHeaders(modelsStatus, -1);
        ex.close();
        return;
      }
      byte[] b = "{\"data\":[]}".getBytes(StandardCharsets.UTF_8);
      ex.sendResponseHeaders(200, b.length);
      ex.getResponseBody().write(b);
      ex.close();
    });
    server.start();
  }

  /** Starts a server handling each request on a thread of its own (daemon threads). */
  static ScriptedOpenAiServer start() throws IOException {
    return new ScriptedOpenAiServer(Executors.newCachedThreadPool(daemons()));
  }

  /** Starts a server handling at most {@code threads} requests at once (daemon threads). */
  static ScriptedOpenAiServer start(int threads) throws IOException {
    return new ScriptedOpenAiServer(Executors.newFixedThreadPool(threads, daemons()));
  }

  private static ThreadFactory daemons() {
    return r -> {
      Thread t = new Thread(r, "fake-openai-server");
      t.setDaemon(true);
      return t;
    };
  }

  /** The server's base URL, {@code http://127.0.0.1:port}. */
  String base() {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  /** Holds the calling handler until the test counts {@link #release} down (30 s at most). */
  void awaitRelease() {
    try {
      release.await(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Stops the server at once (it no longer accepts connections); held handlers stay held. */
  void stop() {
    server.stop(0);
  }

  @Override
  public void close() {
    release.countDown();
    server.stop(0);
  }

  /**
   * Reads one HTTP request on a raw connection (a server that answers by hand): its head, then
   * the {@code Content-Length} bytes of its body; 10 s at most per read.
   *
   * @return the connection's input, past the request
   */
  static InputStream readRequest(Socket conn) throws IOException {
    return io.github.prefixrouter.testing.RawConnections.readRequest(conn);
  }

  /** Sends a JSON answer: {@code status}, and {@code body} unless it is empty. */
  static void reply(HttpExchange ex, int status, String body) throws IOException {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders().add("Content-Type", "application/json");
    ex.sendResponseHeaders(status, b.length == 0 ? -1 : b.length);
    if (b.length > 0) {
      ex.getResponseBody().write(b);
    }
  }
}
