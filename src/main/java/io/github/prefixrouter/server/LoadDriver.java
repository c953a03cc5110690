package io.github.prefixrouter.server;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.internal.Durations;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.internal.wire.JdkHttpClients;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.IntConsumer;

/**
 * A closed-loop HTTP client for a running cluster of {@link NodeMain} processes, used by the
 * load generator and the end-to-end test.
 *
 * <p>{@link #run(List)} issues each prompt once, in order, spreading them round-robin over the
 * nodes' client endpoints with {@code concurrency} requests outstanding. When a node cannot be
 * reached (connection refused or reset) or answers 503 (not running), the request is retried,
 * with the same id, at the next node (a client-side failover; an unreachable node is then
 * skipped for the rest of the run). Every prompt ends with exactly one {@link Sample}: an answer or an error.
 * Latency is measured from the first send to the final answer, retries included.
 *
 * <p>With {@link Builder#stream(boolean)} each request asks for a streamed answer
 * ({@code "stream": true}, server-sent events) and its sample also has the time to its first
 * event (the first piece of output: time to first token, TTFT), from the same first send.
 *
 * <p>{@link Builder#api(Api)} chooses the route: {@link Api#ROUTE} ({@code
 * /v1/route/completions}, token ids, the default), {@link Api#CHAT} ({@code
 * /v1/chat/completions}, a conversation per request) or {@link Api#COMPLETIONS} ({@code
 * /v1/completions}, a text or token ids). On the OpenAI routes the sample is read from OpenAI's
 * answer: the text from the choice, the prompt and cached tokens from {@code usage}, the routing
 * facts from the {@code prefix_router} object (a whole answer's {@code X-Prefix-Router-*}
 * headers must agree with it); a streamed answer must be framed as those routes frame theirs
 * (see {@link #run(List)} and {@link #runPrompts(List)}).
 *
 * <p>It sends with the JDK's HTTP client, which completes every request on {@code
 * CompletableFuture}'s default executor: the JVM's common fork-join pool if that has 2 threads
 * or more, else, up to JDK 24, a new thread per request, as on a host of 1 or 2 processors by
 * default (from JDK 25, the common pool whatever its size). The
 * driver cannot change that (an executor given to the client does not move the completion, and
 * the pool takes its size once per JVM): a program running it there sets {@code
 * -Djava.util.concurrent.ForkJoinPool.common.parallelism=2} on its command line, or first thing
 * in its {@code main}, as the load generator does (docs/deployment.md, "JVM settings on 1 or 2
 * processors: the common pool").
 */
public final class LoadDriver {

  /** The client endpoint's route the requests go to. */
  public enum Api {
    /** {@code POST /v1/route/completions}: token ids, the endpoint's own answer. */
    ROUTE("/v1/route/completions"),
    /** {@code POST /v1/chat/completions}: a conversation, OpenAI's chat answer. */
    CHAT("/v1/chat/completions"),
    /** {@code POST /v1/completions}: a text (or token ids), OpenAI's completion answer. */
    COMPLETIONS("/v1/completions");

    private final String path;

    Api(String path) {
      this.path = path;
    }

    /** The route's path. */
    public String path() {
      return path;
    }
  }

  /**
   * One chat message.
   *
   * @param role {@code system}, {@code user} or {@code assistant}
   * @param content its text
   */
  public record Message(String role, String content) {
    /** Checks that both are given. */
    public Message {
      Objects.requireNonNull(role, "role");
      Objects.requireNonNull(content, "content");
    }
  }

  /**
   * One request's prompt: token ids, a text, or a conversation (exactly one of the three), and
   * optionally the sampling seed to send with it.
   *
   * @param tokens token ids ({@link Api#ROUTE}, or {@link Api#COMPLETIONS}), or null
   * @param text a completion prompt's text ({@link Api#COMPLETIONS}), or null
   * @param messages a conversation ({@link Api#CHAT}), or null
   * @param seed the request's {@code seed}, or null to send none
   */
  public record Prompt(int[] tokens, String text, List<Message> messages, Long seed) {
    /** Checks that exactly one of the prompt's forms is given. */
    public Prompt {
      int forms = (tokens != null ? 1 : 0) + (text != null ? 1 : 0) + (messages != null ? 1 : 0);
      if (forms != 1) {
        throw new IllegalArgumentException("a prompt is token ids, a text or messages, exactly one");
      }
      if (messages != null) {
        messages = List.copyOf(messages);
        if (messages.isEmpty()) {
          throw new IllegalArgumentException("a conversation needs at least one message");
        }
      }
    }

    /** Token ids. */
    public static Prompt ofTokens(int[] tokens) {
      return new Prompt(Objects.requireNonNull(tokens, "tokens"), null, null, null);
    }

    /** A completion prompt's text. */
    public static Prompt ofText(String text) {
      return new Prompt(null, Objects.requireNonNull(text, "text"), null, null);
    }

    /** A conversation. */
    public static Prompt ofChat(List<Message> messages) {
      return new Prompt(null, null, Objects.requireNonNull(messages, "messages"), null);
    }

    /** The same prompt sent with {@code "seed": seed}. */
    public Prompt withSeed(long seed) {
      return new Prompt(tokens, text, messages, seed);
    }

    /** Its length in token ids, or -1 for a text or a conversation (the node tokenizes them). */
    int knownLength() {
      return tokens != null ? tokens.length : -1;
    }
  }

  private final List<String> endpoints;
  private final int concurrency;
  private final int maxTokens;
  private final Duration requestTimeout;
  private final String idPrefix;
  private final IntConsumer onCompleted;
  private final boolean stream;
  private final Api api;
  private final Double temperature;
  /** The stop strings every OpenAI-route request sends (empty: none). */
  private final List<String> stop;
  private final String model;
  private final HttpClient client;

  private LoadDriver(Builder b) {
    this.endpoints = List.copyOf(b.endpoints);
    this.concurrency = b.concurrency;
    this.maxTokens = b.maxTokens;
    // at most 2^63 ns (292 years), "never" here: the JDK's HTTP client fails a request whose
    // timeout its clock cannot add up, and Duration.toNanos() throws beyond it
    this.requestTimeout = Duration.ofNanos(Durations.saturatedNanos(b.requestTimeout));
    this.idPrefix = b.idPrefix;
    this.onCompleted = b.onCompleted;
    this.stream = b.stream;
    this.api = b.api;
    this.temperature = b.temperature;
    this.stop = b.stop;
    this.model = b.model;
    // the nodes' client ports close a connection idle for 30 s: let go of one before that, as
    // the library's own clients do (unless the host set its own idle time)
    JdkHttpClients.ensureKeepAlive();
    this.client = HttpClient.newBuilder()
        .version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(Duration.ofSeconds(2))
        .build();
  }

  /** A builder; at least one endpoint is required. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * One request's outcome.
   *
   * @param index position in the prompt list
   * @param id the request id sent
   * @param origin endpoint (host:port) that finally answered, or the last one tried
   * @param servedBy node whose engine ran it (null on error)
   * @param forwarded whether the origin forwarded it
   * @param fallback the node's fallback cause, or null
   * @param latencyNanos client-observed latency, retries included
   * @param promptTokens prompt tokens reported (on an error: the prompt's token ids, or -1 for
   *     a text or a conversation)
   * @param cachedTokens cached prompt tokens reported by the serving engine (-1 unknown)
   * @param tokenIds generated token ids; null on the OpenAI routes, whose answers carry text only
   *     (empty on an error)
   * @param clientRetries how many times the client re-sent it to another node
   * @param error null on success, else what went wrong
   * @param firstPieceNanos streamed: client-observed time to the answer's first event (its first
   *     piece of output), retries included; -1 if not streamed or no event came
   * @param text the answer's text (streamed: its pieces' texts joined); null on an error
   * @param seed the seed the request ran with as the answer reports it ({@code
   *     prefix_router.seed} on the OpenAI routes; the token route reports none), or null
   */
  public record Sample(
      int index, String id, String origin, String servedBy, boolean forwarded, String fallback,
      long latencyNanos, int promptTokens, int cachedTokens, int[] tokenIds, int clientRetries,
      String error, long firstPieceNanos, String text, Long seed) {

    /** True if the request was answered. */
    public boolean ok() {
      return error == null;
    }
  }

  /** The outcome of a run. */
  public record Result(List<Sample> samples, long wallNanos, int completions) {

    /** Answered samples. */
    public List<Sample> answered() {
      return samples.stream().filter(Sample::ok).toList();
    }

    /** Latency percentile (0..100) of answered requests, in milliseconds; NaN if none. */
    public double latencyPercentileMillis(double p) {
      long[] l = answered().stream().mapToLong(Sample::latencyNanos).sorted().toArray();
      if (l.length == 0) {
        return Double.NaN;
      }
      int i = (int) Math.ceil(p / 100.0 * l.length) - 1;
      return l[Math.max(0, Math.min(l.length - 1, i))] / 1e6;
    }

    /**
     * Percentile (0..100) of the time to the first piece of answered streamed requests, in
     * milliseconds; NaN if none was streamed.
     */
    public double firstPiecePercentileMillis(double p) {
      long[] l = answered().stream().mapToLong(Sample::firstPieceNanos).filter(t -> t >= 0)
          .sorted().toArray();
      if (l.length == 0) {
        return Double.NaN;
      }
      int i = (int) Math.ceil(p / 100.0 * l.length) - 1;
      return l[Math.max(0, Math.min(l.length - 1, i))] / 1e6;
    }

    /** Mean latency of answered requests in milliseconds. */
    public double meanLatencyMillis() {
      return answered().stream().mapToLong(Sample::latencyNanos).average().orElse(Double.NaN) / 1e6;
    }

    /** Cached prompt tokens / prompt tokens over answered requests that report it. */
    public double hitRate() {
      long p = 0;
      long c = 0;
      for (Sample s : answered()) {
        if (s.cachedTokens() >= 0) {
          p += s.promptTokens();
          c += s.cachedTokens();
        }
      }
      return p == 0 ? 0 : (double) c / p;
    }

    /** Share of answered requests that their origin forwarded to a peer. */
    public double forwardedShare() {
      List<Sample> a = answered();
      return a.isEmpty() ? 0 : (double) a.stream().filter(Sample::forwarded).count() / a.size();
    }

    /** Answered requests per serving node. */
    public Map<String, Long> servedBy() {
      Map<String, Long> m = new TreeMap<>();
      for (Sample s : answered()) {
        m.merge(s.servedBy(), 1L, Long::sum);
      }
      return m;
    }

    /** Client-side retries (failovers to another node). */
    public long clientRetries() {
      return samples.stream().mapToLong(Sample::clientRetries).sum();
    }

    /** A one-paragraph summary. */
    public String summary() {
      String ttft = Double.isNaN(firstPiecePercentileMillis(50)) ? ""
          : String.format(Locale.ROOT, " ttft ms: p50=%.1f p90=%.1f p99=%.1f max=%.1f",
              firstPiecePercentileMillis(50), firstPiecePercentileMillis(90),
              firstPiecePercentileMillis(99), firstPiecePercentileMillis(100));
      return String.format(Locale.ROOT,
          "requests=%d answered=%d errors=%d wall=%.1fs throughput=%.1f/s latency ms: mean=%.1f p50=%.1f "
              + "p90=%.1f p99=%.1f max=%.1f%s hitRate=%.3f forwarded=%.3f clientRetries=%d servedBy=%s",
          samples.size(), answered().size(), samples.size() - answered().size(), wallNanos / 1e9,
          answered().size() / Math.max(1e-9, wallNanos / 1e9), meanLatencyMillis(),
          latencyPercentileMillis(50), latencyPercentileMillis(90), latencyPercentileMillis(99),
          latencyPercentileMillis(100), ttft, hitRate(), forwardedShare(), clientRetries(),
          servedBy());
    }
  }

  /**
   * Issues every prompt (token ids) once and waits for all answers.
   *
   * @throws IllegalArgumentException if the driver's route takes no token ids ({@link Api#CHAT})
   * @throws IllegalStateException once every prompt is done, if the
   *     {@link Builder#onCompleted} callback threw
   */
  public Result run(List<int[]> prompts) {
    List<Prompt> p = new ArrayList<>(prompts.size());
    for (int[] t : prompts) {
      p.add(Prompt.ofTokens(t));
    }
    return runPrompts(p);
  }

  /**
   * Issues every prompt once and waits for all answers.
   *
   * @throws IllegalArgumentException if a prompt's form does not suit the driver's route: token
   *     ids for {@link Api#ROUTE}, a conversation for {@link Api#CHAT}, token ids or a text for
   *     {@link Api#COMPLETIONS}
   * @throws IllegalStateException once every prompt is done, if the
   *     {@link Builder#onCompleted} callback threw
   */
  public Result runPrompts(List<Prompt> prompts) {
    for (int i = 0; i < prompts.size(); i++) {
      Prompt p = prompts.get(i);
      boolean fits = switch (api) {
        case ROUTE -> p.tokens() != null;
        case CHAT -> p.messages() != null;
        case COMPLETIONS -> p.messages() == null;
      };
      if (!fits) {
        String form = p.tokens() != null ? "token ids" : p.text() != null ? "a text" : "messages";
        throw new IllegalArgumentException("prompt " + i + " is " + form + ", which the "
            + api + " route (" + api.path() + ") does not take");
      }
    }
    int n = prompts.size();
    AtomicReferenceArray<Sample> samples = new AtomicReferenceArray<>(n);
    AtomicInteger next = new AtomicInteger();
    AtomicInteger completions = new AtomicInteger();
    Map<String, Boolean> down = new ConcurrentHashMap<>();
    CompletableFuture<Void> all = new CompletableFuture<>();
    AtomicInteger done = new AtomicInteger();
    long start = System.nanoTime();
    int workers = Math.min(concurrency, Math.max(1, n));
    if (n == 0) {
      all.complete(null);
    }
    java.util.concurrent.atomic.AtomicReference<RuntimeException> callbackFailure =
        new java.util.concurrent.atomic.AtomicReference<>();
    /** Records prompt {@code i}'s sample; true once every prompt has one. */
    interface Outcome {
      boolean record(int i, String id, long t0, Sample s, Throwable err);
    }
    Outcome outcome = (i, id, t0, s, err) -> {
      Sample sample = err != null
          ? new Sample(i, id, null, null, false, null, System.nanoTime() - t0,
              prompts.get(i).knownLength(), -1, new int[0], 0, "client failure: " + err, -1, null,
              null)
          : withLatency(s, i, System.nanoTime() - t0);
      completions.incrementAndGet();
      if (!samples.compareAndSet(i, null, sample)) {
        throw new IllegalStateException("request " + id + " completed twice");
      }
      int d = done.incrementAndGet();
      if (onCompleted != null) {
        try {
          onCompleted.accept(d);
        } catch (RuntimeException e) {
          // thrown here it was swallowed by the future, and the next prompt never sent: the
          // run goes on, and ends with it
          callbackFailure.compareAndSet(null, e);
        }
      }
      if (d == n) {
        all.complete(null);
        return true;
      }
      return false;
    };
    Runnable[] issue = new Runnable[1];
    issue[0] = () -> {
      while (true) {
        int i = next.getAndIncrement();
        if (i >= n) {
          return;
        }
        String id = idPrefix + i;
        long t0 = System.nanoTime();
        CompletableFuture<Sample> sent;
        try {
          sent = send(prompts.get(i), id, i % endpoints.size(), 0, down, t0);
        } catch (RuntimeException e) {
          // a prompt that cannot be sent (a text JSON cannot carry) is its own error, and the
          // next prompt is sent in its place (here, not from a completion: a run of such
          // prompts must not nest a call each): thrown in the completion of the request before
          // it, it left this one without a sample and the run waiting for ever
          if (outcome.record(i, id, t0, null, e)) {
            return;
          }
          continue;
        }
        sent.whenComplete((s, err) -> {
          if (!outcome.record(i, id, t0, s, err)) {
            issue[0].run();
          }
        });
        return;
      }
    };
    for (int w = 0; w < workers; w++) {
      issue[0].run();
    }
    all.join();
    if (callbackFailure.get() != null) {
      throw new IllegalStateException("the onCompleted callback failed: "
          + callbackFailure.get().getMessage(), callbackFailure.get());
    }
    long wall = System.nanoTime() - start;
    List<Sample> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      out.add(samples.get(i));
    }
    return new Result(List.copyOf(out), wall, completions.get());
  }

  private static Sample withLatency(Sample s, int index, long latency) {
    return new Sample(index, s.id(), s.origin(), s.servedBy(), s.forwarded(), s.fallback(), latency,
        s.promptTokens(), s.cachedTokens(), s.tokenIds(), s.clientRetries(), s.error(),
        s.firstPieceNanos(), s.text(), s.seed());
  }

  private CompletableFuture<Sample> send(Prompt prompt, String id, int endpointIndex, int retries,
      Map<String, Boolean> down, long t0) {
    // pick the next endpoint that is not known to be down
    int k = endpointIndex;
    for (int tries = 0; tries < endpoints.size() && down.containsKey(endpoints.get(k)); tries++) {
      k = (k + 1) % endpoints.size();
    }
    String endpoint = endpoints.get(k);
    int chosen = k;
    int promptLength = prompt.knownLength();
    HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + endpoint + api.path()))
        .timeout(requestTimeout)
        .header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(Json.write(body(prompt, id)), StandardCharsets.UTF_8))
        .build();
    AtomicLong firstEvent = new AtomicLong(-1);
    HttpResponse.BodyHandler<String> handler = !stream ? HttpResponse.BodyHandlers.ofString()
        : info -> HttpResponse.BodySubscribers.fromLineSubscriber(new Lines(firstEvent),
            Lines::text, StandardCharsets.UTF_8, "\n");
    CompletableFuture<HttpResponse<String>> http = client.sendAsync(req, handler);
    // the HTTP client's timeout ends when the answer's headers arrive; an endpoint that stalls
    // in the body would hang the run, so the whole exchange is bounded too
    CompletableFuture<HttpResponse<String>> bounded =
        http.copy().orTimeout(requestTimeout.toNanos(), java.util.concurrent.TimeUnit.NANOSECONDS);
    bounded.whenComplete((r, e) -> {
      if (e != null) {
        http.cancel(true);
      }
    });
    return bounded
        .handle((resp, err) -> {
          Throwable c = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
          boolean nodeGone = c instanceof IOException && !(c instanceof java.net.http.HttpTimeoutException);
          boolean unavailable = resp != null && resp.statusCode() == 503;
          if ((nodeGone || unavailable) && retries + 1 < endpoints.size()) {
            if (nodeGone) {
              down.put(endpoint, Boolean.TRUE);
            }
            return send(prompt, id, (chosen + 1) % endpoints.size(), retries + 1, down, t0);
          }
          if (c != null) {
            return CompletableFuture.completedFuture(failure(id, endpoint, promptLength, retries,
                String.valueOf(c), -1));
          }
          if (stream && resp.statusCode() == 200) {
            long first = firstEvent.get();
            long firstPiece = first < 0 ? -1 : first - t0;
            return CompletableFuture.completedFuture(api == Api.ROUTE
                ? parseStream(id, endpoint, retries, promptLength, resp.body(), firstPiece)
                : parseOpenAiStream(id, endpoint, retries, promptLength, resp.body(), firstPiece));
          }
          return CompletableFuture.completedFuture(api == Api.ROUTE
              ? parse(id, endpoint, retries, promptLength, resp)
              : parseOpenAi(id, endpoint, retries, promptLength, resp));
        })
        .thenCompose(f -> f);
  }

  /** The request's JSON body for the driver's route. */
  private Map<String, Object> body(Prompt prompt, String id) {
    Map<String, Object> body = new LinkedHashMap<>();
    if (api == Api.ROUTE) {
      body.put("id", id);
      body.put("prompt", prompt.tokens());
      if (model != null) { // the same cache scope as on the OpenAI routes
        body.put("model", model);
      }
    } else {
      // the OpenAI routes take no id of the client's: the node names the answer
      if (model != null) {
        body.put("model", model);
      }
      if (api == Api.CHAT) {
        List<Map<String, Object>> messages = new ArrayList<>();
        for (Message m : prompt.messages()) {
          Map<String, Object> message = new LinkedHashMap<>();
          message.put("role", m.role());
          message.put("content", m.content());
          messages.add(message);
        }
        body.put("messages", messages);
      } else {
        body.put("prompt", prompt.tokens() != null ? prompt.tokens() : prompt.text());
      }
    }
    body.put("max_tokens", maxTokens);
    if (temperature != null) {
      body.put("temperature", temperature);
    }
    if (!stop.isEmpty()) {
      body.put("stop", stop);
    }
    if (prompt.seed() != null) {
      body.put("seed", prompt.seed());
    }
    if (stream) {
      body.put("stream", true);
      if (api != Api.ROUTE) {
        // the usage (prompt and cached tokens) comes in a chunk of its own only when asked for
        body.put("stream_options", Map.of("include_usage", true));
      }
    }
    return body;
  }

  private static Sample failure(String id, String endpoint, int promptLength, int retries,
      String error, long firstPieceNanos) {
    return new Sample(0, id, endpoint, null, false, null, 0, promptLength, -1, new int[0], retries,
        error, firstPieceNanos, null, null);
  }

  private static Sample parse(String id, String endpoint, int retries, int promptLength, HttpResponse<String> resp) {
    try {
      Map<?, ?> m = (Map<?, ?>) Json.parse(resp.body());
      if (resp.statusCode() != 200) {
        return failure(id, endpoint, promptLength, retries,
            "HTTP " + resp.statusCode() + ": " + m.get("error"), -1);
      }
      return answer(id, endpoint, retries, m, Json.asIntArray(m.get("token_ids"), "token_ids"),
          Json.asString(m.get("text"), "text"), -1);
    } catch (RuntimeException e) {
      return failure(id, endpoint, promptLength, retries,
          "unusable answer (HTTP " + resp.statusCode() + "): " + e.getMessage(), -1);
    }
  }

  private static Sample answer(String id, String endpoint, int retries, Map<?, ?> m,
      int[] tokens, String text, long firstPieceNanos) {
    Object fb = m.get("fallback");
    return new Sample(0, id, endpoint, Json.asString(m.get("served_by"), "served_by"),
        Boolean.TRUE.equals(m.get("forwarded")), fb instanceof String s ? s : null, 0,
        Json.asInt(m.get("prompt_tokens"), "prompt_tokens"),
        Json.asInt(m.get("cached_tokens"), "cached_tokens"), tokens, retries, null,
        firstPieceNanos, text, null);
  }

  /**
   * A streamed answer: the token ids of all its events joined (the pieces', then whatever the
   * answer's event carries that no piece did), the last event before {@code [DONE]} the answer.
   * An error event is an error, and so is a stream that breaks the framing: no {@code [DONE]},
   * an event for another request id, an answer event (one with {@code served_by}) that is not
   * the last event or a last event that is not one, or data after {@code [DONE]}.
   */
  private static Sample parseStream(String id, String endpoint, int retries, int promptLength,
      String body, long firstPieceNanos) {
    try {
      SseBody sse = SseBody.of(body);
      boolean done = sse.done();
      List<Map<?, ?>> events = new ArrayList<>();
      for (Map<?, ?> event : sse.events()) {
        if (!id.equals(event.get("id"))) {
          throw new IllegalArgumentException("an event of request " + event.get("id"));
        }
        if (event.get("error") != null) {
          return failure(id, endpoint, promptLength, retries,
              "stream failed: " + Json.write(event.get("error")), firstPieceNanos);
        }
        events.add(event);
      }
      if (!done || events.isEmpty()) {
        throw new IllegalArgumentException("the stream ended without [DONE]");
      }
      for (int i = 0; i < events.size(); i++) {
        boolean isAnswer = events.get(i).containsKey("served_by");
        if (isAnswer != (i == events.size() - 1)) {
          throw new IllegalArgumentException(isAnswer
              ? "the answer's event is not the last one" : "the last event is not the answer's");
        }
      }
      int n = 0;
      List<int[]> pieces = new ArrayList<>();
      StringBuilder text = new StringBuilder();
      for (Map<?, ?> e : events) {
        int[] t = Json.asIntArray(e.get("token_ids"), "token_ids");
        pieces.add(t);
        n += t.length;
        Object et = e.get("text");
        if (et instanceof String s) {
          text.append(s);
        }
      }
      int[] tokens = new int[n];
      int at = 0;
      for (int[] t : pieces) {
        System.arraycopy(t, 0, tokens, at, t.length);
        at += t.length;
      }
      return answer(id, endpoint, retries, events.get(events.size() - 1), tokens,
          text.toString(), firstPieceNanos);
    } catch (RuntimeException e) {
      return failure(id, endpoint, promptLength, retries, "unusable stream: " + e.getMessage(),
          firstPieceNanos);
    }
  }

  /**
   * A whole answer of an OpenAI route: the choice's text ({@code message.content} or
   * {@code text}), {@code usage}, the {@code prefix_router} object; the {@code X-Prefix-Router-*}
   * headers, where present, must agree with it. A status other than 200 is an error with its
   * OpenAI error object.
   */
  private Sample parseOpenAi(String id, String endpoint, int retries, int promptLength,
      HttpResponse<String> resp) {
    try {
      Map<?, ?> m = (Map<?, ?>) Json.parse(resp.body());
      if (resp.statusCode() != 200) {
        return failure(id, endpoint, promptLength, retries,
            "HTTP " + resp.statusCode() + ": " + Json.write(m.get("error")), -1);
      }
      expect(api == Api.CHAT ? "chat.completion" : "text_completion", m.get("object"), "object");
      List<?> choices = Json.asList(m.get("choices"), "choices");
      if (choices.size() != 1) {
        throw new IllegalArgumentException("an answer has one choice, this has " + choices.size());
      }
      Map<?, ?> choice = (Map<?, ?>) choices.get(0);
      String text = api == Api.CHAT
          ? Json.asString(Json.path(choice, "message", "content"), "message.content")
          : Json.asString(choice.get("text"), "text");
      if (!(choice.get("finish_reason") instanceof String)) {
        throw new IllegalArgumentException("no finish_reason");
      }
      Map<?, ?> routing = (Map<?, ?>) m.get("prefix_router");
      Sample s = openAiSample(id, endpoint, retries, routing, (Map<?, ?>) m.get("usage"), text, -1);
      HttpHeaders h = resp.headers();
      agree(h, OpenAiAnswers.SERVED_BY, s.servedBy());
      agree(h, OpenAiAnswers.FORWARDED, String.valueOf(s.forwarded()));
      agree(h, OpenAiAnswers.SEED, String.valueOf(s.seed()));
      agree(h, OpenAiAnswers.ATTEMPTS, String.valueOf(routing.get("attempts")));
      agree(h, OpenAiAnswers.CACHED_TOKENS,
          s.cachedTokens() >= 0 ? String.valueOf(s.cachedTokens()) : null);
      return s;
    } catch (RuntimeException e) {
      return failure(id, endpoint, promptLength, retries,
          "unusable answer (HTTP " + resp.statusCode() + "): " + e.getMessage(), -1);
    }
  }

  private static void expect(Object want, Object got, String what) {
    if (!want.equals(got)) {
      throw new IllegalArgumentException(what + " is " + got + ", not " + want);
    }
  }

  /** A header that is present must say {@code value}; with a null value it must be absent. */
  private static void agree(HttpHeaders h, String name, String value) {
    java.util.Optional<String> v = h.firstValue(name);
    if (v.isPresent() && !v.get().equals(value)) {
      throw new IllegalArgumentException("header " + name + " is " + v.get() + ", the answer "
          + value);
    }
  }

  /** A sample from an OpenAI answer's {@code prefix_router} object and {@code usage}. */
  private static Sample openAiSample(String id, String endpoint, int retries, Map<?, ?> routing,
      Map<?, ?> usage, String text, long firstPieceNanos) {
    if (routing == null) {
      throw new IllegalArgumentException("no prefix_router object");
    }
    if (usage == null) {
      throw new IllegalArgumentException("no usage");
    }
    Object fb = routing.get("fallback");
    Object cached = Json.path(usage, "prompt_tokens_details", "cached_tokens");
    Object seed = routing.get("seed");
    if (!(seed instanceof Long)) {
      throw new IllegalArgumentException("prefix_router.seed is " + seed);
    }
    return new Sample(0, id, endpoint, Json.asString(routing.get("served_by"), "served_by"),
        Boolean.TRUE.equals(routing.get("forwarded")), fb instanceof String f ? f : null, 0,
        Json.asInt(usage.get("prompt_tokens"), "prompt_tokens"),
        cached == null ? -1 : Json.asInt(cached, "cached_tokens"), null, retries, null,
        firstPieceNanos, text, (Long) seed);
  }

  /**
   * A streamed answer of an OpenAI route, framed as that route frames it: chunks of one answer
   * id and of the route's chunk object; chat: the role in the first chunk's delta and no other;
   * exactly one chunk with a {@code finish_reason}, the last one with a choice, carrying the
   * {@code prefix_router} object; then the usage chunk ({@code "choices": []}, asked for with
   * {@code include_usage}); then {@code [DONE]} and nothing after it. The text is the chunks'
   * texts joined. An error event ({@code {"error": ...}}) is an error.
   */
  private Sample parseOpenAiStream(String id, String endpoint, int retries, int promptLength,
      String body, long firstPieceNanos) {
    try {
      String object = api == Api.CHAT ? "chat.completion.chunk" : "text_completion";
      String answerId = null;
      StringBuilder text = new StringBuilder();
      Map<?, ?> routing = null;
      Map<?, ?> usage = null;
      int chunks = 0;
      SseBody sse = SseBody.of(body);
      boolean done = sse.done();
      for (Map<?, ?> chunk : sse.events()) {
        if (chunk.get("error") != null) {
          return failure(id, endpoint, promptLength, retries,
              "stream failed: " + Json.write(chunk.get("error")), firstPieceNanos);
        }
        if (answerId == null) {
          answerId = Json.asString(chunk.get("id"), "id");
        } else if (!answerId.equals(chunk.get("id"))) {
          throw new IllegalArgumentException("a chunk of answer " + chunk.get("id") + " in "
              + answerId + "'s stream");
        }
        expect(object, chunk.get("object"), "a chunk's object");
        if (usage != null) {
          throw new IllegalArgumentException("a chunk after the usage chunk");
        }
        List<?> choices = Json.asList(chunk.get("choices"), "choices");
        if (choices.isEmpty()) {
          if (routing == null) {
            throw new IllegalArgumentException("the usage chunk before the finish chunk");
          }
          usage = (Map<?, ?>) chunk.get("usage");
          if (usage == null) {
            throw new IllegalArgumentException("a chunk without choices and without usage");
          }
          continue;
        }
        if (routing != null) {
          throw new IllegalArgumentException("a chunk with a choice after the finish chunk");
        }
        if (choices.size() != 1) {
          throw new IllegalArgumentException("a chunk has one choice, this has " + choices.size());
        }
        Map<?, ?> choice = (Map<?, ?>) choices.get(0);
        if (api == Api.CHAT) {
          Map<?, ?> delta = (Map<?, ?>) choice.get("delta");
          if (delta == null) {
            throw new IllegalArgumentException("a chat chunk without a delta");
          }
          boolean role = delta.containsKey("role");
          if (role != (chunks == 0)) {
            throw new IllegalArgumentException(role ? "the role in a delta after the first"
                : "the first delta without the role");
          }
          if (role) {
            expect("assistant", delta.get("role"), "the role");
          }
          if (delta.containsKey("content")) {
            text.append(Json.asString(delta.get("content"), "delta.content"));
          }
        } else {
          text.append(Json.asString(choice.get("text"), "text"));
        }
        chunks++;
        Object finish = choice.get("finish_reason");
        if (finish instanceof String) {
          routing = (Map<?, ?>) chunk.get("prefix_router");
          if (routing == null) {
            throw new IllegalArgumentException("the finish chunk without prefix_router");
          }
        } else if (finish != Json.NULL) {
          throw new IllegalArgumentException("finish_reason is " + finish);
        } else if (chunk.containsKey("prefix_router")) {
          throw new IllegalArgumentException("prefix_router in a chunk before the finish chunk");
        }
      }
      if (!done) {
        throw new IllegalArgumentException("the stream ended without [DONE]");
      }
      if (routing == null) {
        throw new IllegalArgumentException("no finish chunk");
      }
      if (usage == null) {
        throw new IllegalArgumentException("no usage chunk");
      }
      return openAiSample(id, endpoint, retries, routing, usage, text.toString(),
          firstPieceNanos);
    } catch (RuntimeException e) {
      return failure(id, endpoint, promptLength, retries, "unusable stream: " + e.getMessage(),
          firstPieceNanos);
    }
  }

  /**
   * The data events of a server-sent event stream, each a JSON object, and whether
   * {@code data: [DONE]} ended it.
   */
  private record SseBody(List<Map<?, ?>> events, boolean done) {

    /** Parses {@code body}; data after {@code [DONE]} is an {@link IllegalArgumentException}. */
    static SseBody of(String body) {
      List<Map<?, ?>> events = new ArrayList<>();
      boolean done = false;
      for (String line : body.split("\n")) {
        if (done) {
          if (!line.isEmpty()) {
            throw new IllegalArgumentException("data after [DONE]: " + line);
          }
          continue;
        }
        if (!line.startsWith("data: ")) {
          continue;
        }
        String payload = line.substring("data: ".length());
        if (payload.equals("[DONE]")) {
          done = true;
          continue;
        }
        events.add((Map<?, ?>) Json.parse(payload));
      }
      return new SseBody(events, done);
    }
  }

  /** Collects a streamed answer's lines and notes when its first event arrived. */
  private static final class Lines implements Flow.Subscriber<String> {
    private final AtomicLong firstEvent;
    private final StringBuilder text = new StringBuilder();

    Lines(AtomicLong firstEvent) {
      this.firstEvent = firstEvent;
    }

    @Override
    public void onSubscribe(Flow.Subscription s) {
      s.request(Long.MAX_VALUE);
    }

    @Override
    public void onNext(String line) {
      if (line.startsWith("data: ")) {
        firstEvent.compareAndSet(-1, System.nanoTime());
      }
      text.append(line).append('\n');
    }

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onComplete() {}

    String text() {
      return text.toString();
    }
  }

  /**
   * Fetches {@code GET /v1/stats} of one endpoint, or null if it does not answer within 5
   * seconds (the whole exchange: the client's timeout covers only the headers, and a body that
   * stalls would otherwise block the caller).
   */
  public Map<?, ?> stats(String endpoint) {
    CompletableFuture<HttpResponse<String>> f = null;
    try {
      f = client.sendAsync(
          HttpRequest.newBuilder(URI.create("http://" + endpoint + "/v1/stats")).timeout(Duration.ofSeconds(5)).build(),
          HttpResponse.BodyHandlers.ofString());
      HttpResponse<String> r = f.get(5, java.util.concurrent.TimeUnit.SECONDS);
      return r.statusCode() == 200 ? (Map<?, ?>) Json.parse(r.body()) : null;
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException
        | RuntimeException e) {
      if (f != null) {
        f.cancel(true);
      }
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    }
  }

  /** Configures a {@link LoadDriver}. */
  public static final class Builder {
    private final List<String> endpoints = new ArrayList<>();
    private int concurrency = 4;
    private int maxTokens = 1;
    private Duration requestTimeout = Duration.ofSeconds(120);
    private String idPrefix = "load-";
    private IntConsumer onCompleted;
    private boolean stream;
    private Api api = Api.ROUTE;
    private Double temperature;
    private List<String> stop = List.of();
    private String model;

    private Builder() {}

    /**
     * The route the requests go to. Default {@link Api#ROUTE}. The prompts given to {@link
     * LoadDriver#runPrompts} must suit it.
     */
    public Builder api(Api a) {
      this.api = Objects.requireNonNull(a, "api");
      return this;
    }

    /**
     * The {@code temperature} every request sends; null (the default) sends none, so the route's
     * default holds (0 on {@link Api#ROUTE}, 1 on the OpenAI routes).
     *
     * @throws IllegalArgumentException if it is not 0 to 100, the nodes' range
     *     ({@link GenerationParams}), beyond which every request would be refused
     */
    public Builder temperature(Double t) {
      if (t != null && !(t >= 0 && t <= 100)) {
        throw new IllegalArgumentException("temperature must be 0 to 100, was " + t);
      }
      this.temperature = t;
      return this;
    }

    /**
     * The {@code model} every request names, on every route (the cache scope: the base model,
     * or a LoRA adapter); null (the default) sends none.
     */
    public Builder model(String m) {
      this.model = m;
      return this;
    }

    /**
     * The stop strings every request sends ({@code "stop"}), on the OpenAI routes only (the
     * token route takes none); null or empty (the default) sends none.
     *
     * @throws IllegalArgumentException if they break {@link GenerationParams}' limits
     */
    public Builder stop(List<String> s) {
      this.stop = GenerationParams.greedy(1).withStops(s, null).stop();
      return this;
    }

    /**
     * Whether to ask for streamed answers ({@code "stream": true}) and measure the time to the
     * first piece. Default false.
     */
    public Builder stream(boolean s) {
      this.stream = s;
      return this;
    }

    /** Client endpoints ({@code host:port}, the port 1 to 65535) of the nodes. */
    public Builder endpoints(List<String> hostPorts) {
      endpoints.clear();
      endpoints.addAll(hostPorts);
      return this;
    }

    /** Requests outstanding at once. Default 4. */
    public Builder concurrency(int n) {
      this.concurrency = n;
      return this;
    }

    /**
     * Tokens generated per request, 1 to {@link GenerationParams#MAX_TOKENS_LIMIT} (the nodes'
     * range). Default 1 (MMLU answers are one token).
     */
    public Builder maxTokens(int n) {
      this.maxTokens = n;
      return this;
    }

    /**
     * How long one HTTP exchange may take, answer body included; positive. Default 120 s. One
     * beyond 2^63 ns (about 292 years; {@code ChronoUnit.FOREVER.getDuration()}, say) counts as
     * 2^63 ns.
     */
    public Builder requestTimeout(Duration d) {
      this.requestTimeout = d;
      return this;
    }

    /** Prefix of the request ids (ids are prefix + index). Default "load-". */
    public Builder idPrefix(String p) {
      this.idPrefix = p;
      return this;
    }

    /**
     * Called with the number of completed requests after each completion (any thread). If it
     * throws, the run still sends and completes every prompt, then throws an
     * {@link IllegalStateException} with the first exception as its cause.
     */
    public Builder onCompleted(IntConsumer c) {
      this.onCompleted = c;
      return this;
    }

    /**
     * Validates and builds.
     *
     * @throws IllegalArgumentException for a setting out of its range, the message beginning
     *     with the setting's name ({@code endpoints}, {@code concurrency}, {@code maxTokens},
     *     {@code stop}, {@code requestTimeout}), for a command line to say which of its flags it
     *     was, as the setters' that check their value at once do ({@link #temperature})
     */
    public LoadDriver build() {
      if (endpoints.isEmpty()) {
        throw new IllegalArgumentException("endpoints must name at least one");
      }
      for (String e : endpoints) {
        Objects.requireNonNull(e, "endpoint");
        URI u;
        try {
          u = new URI("http://" + e);
        } catch (URISyntaxException notAUri) { // "h 1:9": its message named no endpoint
          u = null;
        }
        // a port no connection can go to (0, above 65535) failed every request of the run
        if (u == null || u.getHost() == null || u.getPort() < 1 || u.getPort() > 65_535) {
          throw new IllegalArgumentException("endpoints must be host:port, was '" + e + "'");
        }
      }
      if (concurrency < 1 || concurrency > 10_000) {
        throw new IllegalArgumentException("concurrency must be 1 to 10000, was " + concurrency);
      }
      if (maxTokens < 1 || maxTokens > GenerationParams.MAX_TOKENS_LIMIT) {
        // the nodes' range: beyond it every request was sent, and refused
        throw new IllegalArgumentException("maxTokens must be 1 to "
            + GenerationParams.MAX_TOKENS_LIMIT + ", was " + maxTokens);
      }
      if (!stop.isEmpty() && api == Api.ROUTE) {
        throw new IllegalArgumentException("stop strings need an OpenAI route (the token route "
            + "takes stop_token_ids only)");
      }
      Objects.requireNonNull(requestTimeout, "requestTimeout");
      if (requestTimeout.isZero() || requestTimeout.isNegative()) {
        // the HTTP client refuses it: every request of the run failed, one by one
        throw new IllegalArgumentException("requestTimeout must be positive, was "
            + requestTimeout);
      }
      return new LoadDriver(this);
    }
  }

  @Override
  public String toString() {
    return "LoadDriver" + Arrays.toString(endpoints.toArray());
  }
}
