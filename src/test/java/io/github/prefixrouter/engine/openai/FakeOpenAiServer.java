package io.github.prefixrouter.engine.openai;

import com.sun.net.httpserver.HttpServer;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.internal.wire.JdkHttpServers;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A fake OpenAI-compatible completions server on loopback, for tests of what sits in front of
 * one: it answers {@code POST /v1/completions} with what {@link Answer} makes of the prompt (as
 * an event stream when the request asks for one, see {@link #streams}), and can hold every
 * request until released (a slow or saturated server). Like vLLM started with {@code --api-key},
 * it can answer 401 to every request without the key ({@link #requireApiKey}); like vLLM, it
 * can serve {@code POST /tokenize} ({@link #tokenizes}).
 */
public final class FakeOpenAiServer implements AutoCloseable {

  /** The JSON answer to one request. */
  public interface Answer {
    /**
     * @param prompt the request's token ids
     * @param maxTokens its {@code max_tokens}
     * @return the answer's JSON body (status 200)
     */
    String body(int[] prompt, int maxTokens);
  }

  /** A well-formed answer: {@code maxTokens} tokens, each the prompt length, and its usage. */
  public static final Answer ECHO = (prompt, maxTokens) -> answer(prompt.length,
      java.util.Collections.nCopies(maxTokens, prompt.length).toString());

  /**
   * {@link #ECHO} with {@code prompt_tokens_details.cached_tokens} 0 in its usage, as vLLM started
   * with {@code --enable-prompt-tokens-details} reports a prompt it had nothing of cached.
   */
  public static final Answer ECHO_NOTHING_CACHED = (prompt, maxTokens) ->
      "{\"choices\":[{\"index\":0,\"text\":\"\",\"token_ids\":"
          + java.util.Collections.nCopies(maxTokens, prompt.length) + "}],\"usage\":"
          + "{\"prompt_tokens\":" + prompt.length
          + ",\"prompt_tokens_details\":{\"cached_tokens\":0}}}";

  private final HttpServer server;
  private final ExecutorService executor;
  private final AtomicInteger arrived = new AtomicInteger();
  private volatile Answer answer;
  private volatile int status = 200;
  private volatile boolean streams = true;
  private volatile CountDownLatch gate = new CountDownLatch(0);
  /** The key every request must carry as {@code Authorization: Bearer}; null: none needed. */
  private volatile String apiKey;
  private volatile boolean tokenizes;
  /** Whether {@code GET /health} answers without the key ({@link #healthOpen}). */
  private volatile boolean healthOpen;
  /** Each request's path and whether it was let through, in arrival order. */
  private final java.util.List<String> requests =
      java.util.Collections.synchronizedList(new java.util.ArrayList<>());
  /** What {@code GET /v1/models} answers: by default vLLM's list of a base model and a LoRA. */
  private volatile String models = "{\"object\":\"list\",\"data\":["
      + "{\"id\":\"fake-base\",\"object\":\"model\",\"root\":\"fake-base\",\"parent\":null},"
      + "{\"id\":\"fake-lora\",\"object\":\"model\",\"root\":\"/adapters/fake\","
      + "\"parent\":\"fake-base\"}]}";

  /**
   * Sets what {@code GET /v1/models} answers.
   *
   * @param json the body
   */
  public void models(String json) {
    this.models = json;
  }

  /**
   * Whether a streamed request ({@code "stream": true}) is answered as an event stream (the
   * default) or with the plain JSON answer.
   *
   * @param on true to stream
   */
  public void streams(boolean on) {
    this.streams = on;
  }

  /**
   * A 200 answer as vLLM streams it: a chunk per output token (the answer's text with the
   * first; one chunk of text if it has no token ids), the last with its finish reason, the
   * usage chunk if asked for, then {@code [DONE]}; null if the answer is not a completion that
   * can be streamed so (it is then sent as it is).
   */
  private static java.util.List<String> events(String answerBody, boolean includeUsage) {
    java.util.List<String> events = new java.util.ArrayList<>();
    try {
      Object root = Json.parse(answerBody);
      Object choice = Json.asList(Json.member(root, "choices"), "choices").get(0);
      Object textValue = Json.member(choice, "text");
      String text = textValue instanceof String t ? t : "";
      Object ids = Json.member(choice, "token_ids");
      int[] tokens = ids == null || ids == Json.NULL ? null : Json.asIntArray(ids, "token_ids");
      int chunks = tokens == null ? 1 : Math.max(1, tokens.length);
      for (int i = 0; i < chunks; i++) {
        java.util.Map<String, Object> c = new java.util.LinkedHashMap<>();
        c.put("index", 0);
        c.put("text", i == 0 ? text : "");
        if (tokens != null) {
          c.put("token_ids", tokens.length == 0 ? new int[0] : new int[] {tokens[i]});
        }
        c.put("finish_reason", i == chunks - 1 ? "length" : Json.NULL);
        events.add("data: " + Json.write(java.util.Map.of("object", "text_completion",
            "choices", java.util.List.of(c))) + "\n\n");
      }
      Object usage = Json.member(root, "usage");
      if (includeUsage && usage != null) {
        events.add("data: " + Json.write(java.util.Map.of("choices", java.util.List.of(),
            "usage", usage)) + "\n\n");
      }
    } catch (RuntimeException notACompletion) {
      return null;
    }
    events.add("data: [DONE]\n\n");
    return events;
  }

  /**
   * From now on, answers every request without {@code Authorization: Bearer <key>} 401 with
   * vLLM's body, {@code {"error": "Unauthorized"}}.
   *
   * @param key the key, or null to need none
   */
  public void requireApiKey(String key) {
    this.apiKey = key;
  }

  /**
   * Whether {@code GET /health} answers without the key too, as vLLM's does (its
   * {@code --api-key} guards only the paths under {@code /v1}). Off by default: the health check
   * is guarded as every other path.
   *
   * @param on true to leave {@code /health} open
   */
  public void healthOpen(boolean on) {
    this.healthOpen = on;
  }

  /**
   * Serves {@code path} (and the paths under it) with {@code handler}, after the key check of
   * {@link #requireApiKey}: a server's other endpoints ({@code /metrics},
   * {@code /get_server_info}); unknown paths are answered 404.
   *
   * @param path the path
   * @param handler what answers it; the exchange is closed after it
   */
  public void serve(String path, com.sun.net.httpserver.HttpHandler handler) {
    server.createContext(path, ex -> {
      try (ex) {
        if (authorized(ex)) {
          handler.handle(ex);
        }
      } catch (IOException e) {
        // the client went away
      }
    });
  }

  /**
   * Serves {@code GET path} with {@code status} and {@code body} of {@code contentType}, as
   * {@link #serve(String, com.sun.net.httpserver.HttpHandler)}.
   *
   * @param path the path
   * @param status the HTTP status
   * @param contentType the body's type
   * @param body the body
   */
  public void serve(String path, int status, String contentType, String body) {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    serve(path, ex -> {
      ex.getResponseHeaders().add("Content-Type", contentType);
      ex.sendResponseHeaders(status, b.length == 0 ? -1 : b.length);
      if (b.length > 0) {
        ex.getResponseBody().write(b);
      }
    });
  }

  /**
   * Whether {@code POST /tokenize} answers (404 without a body when not, the default): a text
   * prompt's ids are its UTF-8 bytes, a chat's those of its last message's content.
   *
   * @param on true to answer
   */
  public void tokenizes(boolean on) {
    this.tokenizes = on;
  }

  /**
   * Every request so far, in arrival order: its path and {@code " 401"} if it was refused for
   * its key, else {@code " ok"}.
   *
   * @return a copy
   */
  public java.util.List<String> requests() {
    synchronized (requests) {
      return java.util.List.copyOf(requests);
    }
  }

  /** Whether {@code ex} may go on; if not, it has been answered 401 and closed. */
  private boolean authorized(com.sun.net.httpserver.HttpExchange ex) throws IOException {
    String key = apiKey;
    String path = ex.getRequestURI().getPath();
    if (key == null || ("Bearer " + key).equals(ex.getRequestHeaders().getFirst("Authorization"))) {
      requests.add(path + " ok");
      return true;
    }
    requests.add(path + " 401");
    byte[] b = "{\"error\":\"Unauthorized\"}".getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders().add("Content-Type", "application/json");
    ex.sendResponseHeaders(401, b.length);
    ex.getResponseBody().write(b);
    ex.close();
    return false;
  }

  private FakeOpenAiServer(Answer answer, int port) {
    this.answer = answer;
    try {
      server = JdkHttpServers.create(new InetSocketAddress("127.0.0.1", port), 512);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    executor = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, "fake-openai-server");
      t.setDaemon(true);
      return t;
    });
    server.setExecutor(executor);
    server.createContext("/v1/completions", ex -> {
      try (ex) {
        if (!authorized(ex)) {
          return;
        }
        java.util.Map<?, ?> body = (java.util.Map<?, ?>) Json.parse(
            new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8));
        int[] prompt = Json.asIntArray(body.get("prompt"), "prompt");
        int maxTokens = Json.asInt(body.get("max_tokens"), "max_tokens");
        CountDownLatch g = gate;
        arrived.incrementAndGet();
        g.await(60, TimeUnit.SECONDS);
        String answerBody = this.answer.body(prompt, maxTokens);
        if (Boolean.TRUE.equals(body.get("stream")) && status == 200 && streams) {
          java.util.List<String> events = events(answerBody,
              Boolean.TRUE.equals(Json.path(body, "stream_options", "include_usage")));
          if (events != null) {
            ex.getResponseHeaders().add("Content-Type", "text/event-stream");
            ex.sendResponseHeaders(200, 0);
            for (String e : events) {
              ex.getResponseBody().write(e.getBytes(StandardCharsets.UTF_8));
              ex.getResponseBody().flush();
            }
            return;
          }
        }
        byte[] b = answerBody.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().add("Content-Type", "application/json");
        ex.sendResponseHeaders(status, b.length);
        ex.getResponseBody().write(b);
      } catch (IOException | InterruptedException e) {
        // the client went away, or the server is stopping
      }
    });
    server.createContext("/v1/models", ex -> {
      try (ex) {
        if (!authorized(ex)) {
          return;
        }
        byte[] b = models.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().add("Content-Type", "application/json");
        ex.sendResponseHeaders(200, b.length);
        ex.getResponseBody().write(b);
      } catch (IOException e) {
        // the client went away
      }
    });
    server.createContext("/health", ex -> {
      if (healthOpen) {
        requests.add("/health ok");
      }
      if (healthOpen || authorized(ex)) {
        ex.sendResponseHeaders(200, -1);
        ex.close();
      }
    });
    server.createContext("/tokenize", ex -> {
      try (ex) {
        if (!tokenizes) {
          ex.sendResponseHeaders(404, -1);
          return;
        }
        if (!authorized(ex)) {
          return;
        }
        Object body = Json.parse(new String(ex.getRequestBody().readAllBytes(),
            StandardCharsets.UTF_8));
        Object text = Json.member(body, "prompt");
        if (text == null) {
          java.util.List<?> messages = Json.asList(Json.member(body, "messages"), "messages");
          text = Json.member(messages.get(messages.size() - 1), "content");
        }
        byte[] utf8 = String.valueOf(text).getBytes(StandardCharsets.UTF_8);
        java.util.List<Integer> ids = new java.util.ArrayList<>();
        for (byte x : utf8) {
          ids.add(x & 0xff);
        }
        byte[] b = Json.write(java.util.Map.of("count", ids.size(), "tokens", ids))
            .getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().add("Content-Type", "application/json");
        ex.sendResponseHeaders(200, b.length);
        ex.getResponseBody().write(b);
      }
    });
    server.start();
  }

  /**
   * Starts a server.
   *
   * @param answer what it answers
   * @return the running server
   */
  public static FakeOpenAiServer start(Answer answer) {
    return new FakeOpenAiServer(answer, 0);
  }

  /**
   * Starts a server on {@code port} of loopback: a server started again where one was closed.
   *
   * @param answer what it answers
   * @param port the port, as {@link #port()} gave it
   * @return the running server
   */
  public static FakeOpenAiServer start(Answer answer, int port) {
    return new FakeOpenAiServer(answer, port);
  }

  /**
   * The port it listens on.
   *
   * @return the port
   */
  public int port() {
    return server.getAddress().getPort();
  }

  /** An answer body with the given {@code usage.prompt_tokens} and {@code token_ids} (JSON). */
  public static String answer(int promptTokens, String tokenIdsJson) {
    return "{\"choices\":[{\"index\":0,\"text\":\"\",\"token_ids\":" + tokenIdsJson
        + "}],\"usage\":{\"prompt_tokens\":" + promptTokens + "}}";
  }

  /**
   * The base URL to give the adapter.
   *
   * @return {@code http://127.0.0.1:port}
   */
  public String baseUrl() {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  /** From now on, requests wait (for up to a minute) until {@link #release()}. */
  public void hold() {
    gate = new CountDownLatch(1);
  }

  /** Lets every waiting request be answered, and later ones at once. */
  public void release() {
    gate.countDown();
  }

  /**
   * Changes the answer of later requests (status 200).
   *
   * @param a the answer
   */
  public void answer(Answer a) {
    this.status = 200;
    this.answer = a;
  }

  /**
   * Answers later requests with {@code status} and {@code body} (an error, as vLLM words it).
   *
   * @param status the HTTP status
   * @param body the JSON body
   */
  public void fail(int status, String body) {
    this.answer = (prompt, maxTokens) -> body;
    this.status = status;
  }

  /**
   * Waits until at least {@code n} requests have arrived in all.
   *
   * @param n how many
   * @param within how long to wait at most
   * @return whether they did
   */
  public boolean awaitArrived(int n, Duration within) throws InterruptedException {
    long deadline = System.nanoTime() + within.toNanos();
    while (arrived.get() < n) {
      if (System.nanoTime() > deadline) {
        return false;
      }
      Thread.sleep(5);
    }
    return true;
  }

  /**
   * Requests that arrived so far.
   *
   * @return the count
   */
  public int arrived() {
    return arrived.get();
  }

  @Override
  public void close() {
    release();
    server.stop(0);
    executor.shutdownNow();
  }
}
