package io.github.prefixrouter.engine.openai;

import com.google.common.base.Throwables;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber;
import io.github.prefixrouter.internal.AnswerBudgetException;
import io.github.prefixrouter.internal.Durations;
import io.github.prefixrouter.internal.EngineInFlightLimitException;
import io.github.prefixrouter.internal.PromptArrays;
import io.github.prefixrouter.internal.SecretText;
import io.github.prefixrouter.internal.ShortText;
import io.github.prefixrouter.internal.UrlUserInfo;
import io.github.prefixrouter.internal.engine.RunsById;
import io.github.prefixrouter.internal.json.AnswerHeap;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.internal.json.OpenAiErrors;
import io.github.prefixrouter.internal.wire.BodyBudget;
import io.github.prefixrouter.internal.wire.CappedBody;
import io.github.prefixrouter.internal.wire.JdkHttpClients;
import io.github.prefixrouter.internal.wire.RetriedExchange;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.EngineTimeoutException;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.InvalidRequestException;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.UnresolvedAddressException;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An {@link InferenceEngine} backed by an OpenAI-compatible completions server: vLLM, SGLang or
 * llama.cpp's {@code llama-server}.
 *
 * <p>Each request is one {@code POST <base>/v1/completions} whose {@code prompt} is the request's
 * token ids (so the server does not re-tokenize and the prefix the router matched is exactly the
 * prefix the server caches), with {@code max_tokens}, {@code temperature}, {@code top_p} and
 * {@code seed} from the request's {@link GenerationParams}, and its {@code stop} strings and
 * {@code stop_token_ids} when it has any (vLLM and SGLang then answer the output cut at the first
 * stop: the text without the stop string, the token ids through the token that ended it; the
 * result's text is the server's followed by the stop string the server names, see
 * {@link #stopString}, which the node cuts off). With
 * {@link Builder#returnTokenIds}
 * (on by default) it also sends {@code "return_token_ids": true}, which vLLM answers with
 * {@code choices[0].token_ids}; servers that ignore the field answer with text only and the
 * result's output tokens are then empty.
 *
 * <p>From the answer it takes {@code choices[0].text}, {@code choices[0].token_ids} where present
 * (of the choice of index 0, wherever it is in the array: a server generating several sequences
 * sends the others with their indexes),
 * {@code usage.prompt_tokens} and {@code usage.prompt_tokens_details.cached_tokens} (reported by
 * vLLM with {@code --enable-prompt-tokens-details}, which leaves it out when the count is 0, and
 * by SGLang with {@code --enable-cache-report}). Once the server has reported a count, an
 * answer whose {@code usage} leaves it out is a miss, 0; before that, and in an answer without
 * a {@code usage}, the result says {@code -1}, unknown. The server does not report prefill and
 * decode times, so those are
 * {@code -1} too; the node then times each request itself (submission to answer, on its
 * clock), so its cost model and forwarding timeouts still learn the server's speed.
 *
 * <p>Errors, all as {@link EngineException}: HTTP 408 and 5xx, connection failures (refused, reset,
 * not made within {@code connectTimeout}) and an answer that is not strict JSON of the expected
 * shape, or larger than {@code maxResponseBytes}, or that would take more heap once parsed than
 * 16 MiB and 6 bytes a character of it (far more than text and token ids take: an answer of tiny
 * values such as {@code [{},{},...]}), or whose choice ends with a {@code finish_reason}
 * of {@code abort} or {@code error} (the server gave up on the generation), or has more token ids
 * than {@code max_tokens} or a negative one, are retryable (another node may serve the request: the
 * server misbehaved, not the request); HTTP 429 and 503 (the server says it is overloaded) are
 * {@link EngineBusyException}s; 401 and 403 (the server refuses this node's credentials) are
 * retryable too, since a peer's server may accept its own, and their message says that the
 * server refuses the API key sent (or requests without one), never showing the key. A 404 in OpenAI's error shape that
 * names a model (vLLM's {@code "The model `x` does not exist."}) refuses the model sent: an
 * {@link InvalidRequestException} for a request of a LoRA adapter (a client's name), a retryable
 * failure for one of the base model (the name this engine sends for every request, {@link
 * Builder#model}, is wrong for the server). Any other 404, and a 405, says the server has no
 * completions endpoint where this engine posts (a base URL with a path the server lacks, a
 * proxy without the route): retryable, the message naming the URL and saying to check the base
 * URL. Any other 4xx means the request itself is invalid (vLLM answers 400 to a prompt longer
 * than the model's context): an {@link InvalidRequestException} carrying the server's message.
 * A request the JDK's HTTP client cannot send (it throws, or the host's proxy selector it asks
 * for the route does, an {@link Error} too) fails with a retryable {@link EngineException}
 * carrying what was thrown; one whose body or HTTP request cannot be built (an {@link Error}
 * too: the heap running out) with a non-retryable one. Neither throws out of {@code execute}, a
 * {@link VirtualMachineError} included, and both give their slot back. An {@link Error} as an
 * answer is parsed, or as a streamed answer's result is built (the heap running out), fails the
 * request at once with a retryable {@link EngineException} carrying it, its slot and share
 * given back.
 * Each failure of an error status carries that status ({@link EngineException#httpStatus()});
 * the others (no answer, a malformed one, a timeout) carry none.
 * No whole answer within
 * {@code requestTimeout} (its headers and its body: a server or proxy that stalls the body after
 * the headers times out too, and its connection is closed) is an {@link EngineTimeoutException},
 * not retryable: a generation that outlasts the limit here would outlast it on a peer too.
 *
 * <p><b>Memory.</b> The answers being read and parsed at once hold at most
 * {@link Builder#answerBudget} of heap together (default 256 MiB): each takes its share as its
 * body arrives and its parse grows, and gives it back when its request ends. An answer whose
 * share does not come free within 1 s while no other answer gives any back fails with a
 * retryable {@link EngineException}, its connection closed. The node tries such a request on a
 * peer, as any retryable failure of its engine, but does not count it towards its
 * {@code engineFailureLimit}: the engine answered, and it is the node that is short of heap.
 * {@link #stats()} shows the budget, what the answers hold of it now and the requests so failed.
 *
 * <p><b>Streaming.</b> {@link #execute(InferenceRequest, OutputListener)} with a listener other
 * than {@link OutputListener#IGNORE} sends {@code "stream": true} and
 * {@code "stream_options": {"include_usage": true}} and reads the server-sent events as they
 * arrive: each chunk's {@code choices[0].text} and {@code choices[0].token_ids} (vLLM's
 * per-chunk token ids, with {@code return_token_ids}) go to the listener at once, one chunk at a
 * time, on the HTTP client's thread; the result is their concatenation, with the usage chunk's
 * prompt and cached-token counts (read as a plain answer's; {@code -1}, unknown, without a
 * usage chunk), and is complete at
 * {@code data: [DONE]} once choice 0 gave its {@code finish_reason}. A server that ignores
 * {@code return_token_ids} streams text only: the pieces' and the result's tokens are then
 * empty. The failures are those of a plain request (the
 * HTTP status of the answer maps as above), and, all retryable: an {@code error} event (an
 * {@code error:} line too, as llama.cpp's server reported a failure once its stream had begun)
 * or a chunk carrying an {@code error} (how vLLM reports a failure once the stream has begun; one
 * whose code is 429 or 503, before any output, is an {@link EngineBusyException}, as that
 * status before the stream, and one whose code is another 4xx that is the request's fault
 * before the stream, as above, is before any output an {@link InvalidRequestException}, not
 * retryable: SGLang's scheduler refuses a prompt longer than it allows once the stream has
 * begun, with the code 400), a
 * {@code finish_reason} of {@code abort} or {@code error}, more token ids than
 * {@code max_tokens} or a negative one (the request fails at that chunk, which is not streamed,
 * and its connection is closed), a malformed chunk (one that would take more heap once parsed
 * than 16 MiB and 6 bytes a character of it too), a line or event
 * larger than {@code maxResponseBytes} or an output larger than it (characters plus tokens), a
 * stream cut, or a connection reset, before {@code [DONE]} and before choice 0's
 * {@code finish_reason}, and a {@code [DONE]} before choice 0's {@code finish_reason} (vLLM,
 * SGLang and llama.cpp give every choice they end one in its last chunk, before
 * {@code [DONE]}: without it, the output may be cut, by a proxy that lost the last chunks say).
 * Once that has come, the output is whole, and none of these fails the
 * request any more (an error the server reports after it, for another choice say, or a chunk
 * that cannot be read: the request completes with its output, and its connection is closed; a
 * peer would run the whole generation again, for a client that has it all); a stream that then
 * ends without {@code [DONE]} completes with it, its usage unknown if the usage chunk did not
 * come either, and one that stays open without {@code [DONE]} completes with it 1 s after the
 * {@code finish_reason}, or at {@code requestTimeout} if that comes first, and its connection is
 * closed. {@code requestTimeout} bounds the whole
 * stream, not only the wait for its first bytes: a generation still streaming then fails with
 * an {@link EngineTimeoutException} and its connection is closed, as on {@link #cancel}; and
 * a server that sends nothing for {@link Builder#streamIdleTimeout} (60 s by default), from the
 * request's sending to the end of its event stream (or of the body of a plain answer, below),
 * fails it sooner, with a retryable
 * {@link EngineException} (completing it with its output after choice 0's
 * {@code finish_reason}), its connection closed. The
 * body is read on after {@code [DONE]}, so that the connection can be used again once it ends;
 * one the server leaves open is closed 1 s after {@code [DONE]} (or
 * at {@code requestTimeout}, if that comes first). A listener that
 * throws (an {@link Error} too) is not called again; the request runs on. A server that answers
 * a streamed request with a plain JSON answer is understood: its output is given to the
 * listener in one piece; its body, as any other answer's to a streamed request (an error
 * status's), is bounded by {@code streamIdleTimeout} as an event stream is. {@code execute(request)} does not stream (it sends
 * {@code "stream": false}).
 *
 * <p><b>Load.</b> The server runs at most {@link Builder#slots} requests at once (vLLM's
 * {@code --max-num-seqs}, SGLang's {@code --max-running-requests}, llama.cpp's
 * {@code --parallel}); the ones this adapter has outstanding beyond that wait in the server's
 * queue. {@link #load()} reports them so: {@code inFlight = min(outstanding, slots)},
 * {@code queueDepth = outstanding − inFlight}, which lets the node push back (refuse forwarded
 * work at its high watermark) and price the wait in its routing cost. (Only this adapter's own
 * requests are counted: the completions API shows neither other clients' requests nor a batch
 * the server shrinks for lack of KV-cache memory.) At most {@link Builder#maxInFlight} requests
 * are outstanding at once; further ones fail at once with an {@link EngineBusyException}, which
 * the node turns into push-back or runs elsewhere, and which, as nothing of it reached the server,
 * it does not count towards its {@code engineFailureLimit} (a burst of requests beyond the limit
 * never makes it take a healthy engine for failing); {@link #stats()} shows the requests
 * outstanding, the limit and the requests refused at it. {@link #health()} probes {@code /health},
 * falling back to {@code /v1/models}, which it also asks after a healthy {@code /health}: a 401
 * or 403 there (vLLM guards only {@code /v1} with its key) makes the server unhealthy.
 * {@link #cacheSize} asks the server how many tokens its KV cache holds (vLLM's
 * {@code /metrics}, SGLang's {@code /get_server_info}), for the routing's tree capacity.
 *
 * <p><b>Keep-alive.</b> Building the adapter ({@link Builder#build()}) sets the JVM-wide system
 * property {@code jdk.httpclient.keepalive.timeout} to 20 (seconds) if the host has not set it,
 * as {@code HttpTransport}'s start does. The JDK reads the property once, as the JVM builds its
 * first HTTP client, whoever builds it: a host that built a JDK HTTP client before gets the
 * JDK's default (1200 s on JDK 17, 30 s on JDK 25) in every client of the JVM, this adapter's
 * too, unless it puts {@code -Djdk.httpclient.keepalive.timeout=20} on its command line
 * (docs/deployment.md, "JVM settings for the HTTP clients"). uvicorn, which serves vLLM and
 * SGLang, closes a connection idle for 5 s, so a request may be written to a pooled connection
 * just as the server closes it, and fail before any byte of its answer ({@code "HTTP/1.1 header
 * parser received no bytes"}, or a reset), which the JDK's client (17 to 25) does not send
 * again for a POST. A request or
 * health probe whose try fails with an I/O error before any byte of its answer came is
 * therefore sent again, at once and once, on a new connection, within what is left of
 * {@code requestTimeout} ({@link RetriedExchange}); a refused connection, a connect timeout,
 * a timeout, an answer out of form, a connection that ends after part of the answer's status
 * line or headers came (the server began to answer) and a probe the JDK's client has sent again
 * itself are not: a server that reads every request and closes its connection unanswered gets
 * each twice, not more. The server never read the first try, or lost
 * its connection, on which vLLM and SGLang abort the request: no generation runs twice. A
 * second failure fails the request as any connection failure. {@link #stats()} counts the
 * second tries.
 *
 * <p><b>Cache events.</b> On its own the adapter reports no cache events, so the node runs its
 * tree in self-managed mode (an estimate of what the server caches). It reports the loss of the
 * server's whole cache instead: a connection refused after the server had answered says its
 * process went away, and the node clears that estimate ({@link #setCacheLossListener}); the
 * adapter then also forgets that the server reports its cached tokens. In front of vLLM started
 * with {@code --kv-events-config}, {@link Builder#kvEvents} makes it subscribe to vLLM's
 * KV-event stream ({@link VllmKvEventSubscriber}) once the node hands it its listener: the
 * node's tree then mirrors exactly what vLLM holds (engine-driven mode). Each request the server
 * answers in full is reported to the subscriber ({@link
 * VllmKvEventSubscriber#requestCompleted}), which drops and makes again a stream that has gone
 * silent while the server serves. The subscription's thread ends with {@link #close()}.
 *
 * <p>Threads: the JDK {@link HttpClient} runs on the executor given to the builder, or on its
 * default pool, and has its {@code HttpClient-<n>-SelectorManager} thread, which
 * {@link #close()} ends (JDK 17's client cannot be closed, and the thread ran until the client
 * was garbage collected); with {@link Builder#kvEvents}, the subscriber's one reader thread. The deadline
 * of a request's body is kept by the JDK's shared {@link CompletableFuture#orTimeout} timer,
 * and so are a stream's idle bound and the second after a stream's {@code [DONE]} (or after
 * its {@code finish_reason}, when no {@code [DONE]} has come), and {@link #cacheSize}'s wait
 * (whose answers are then read on that timer's thread); a request that misses its deadline is
 * failed, and a body still open then closed, on the builder's executor (on the timer's own
 * thread when that executor refuses the work, or throws anything else as it is handed it), or
 * on the common fork-join pool.
 * Instances are thread-safe.
 */
public final class OpenAiCompatibleEngine implements InferenceEngine, AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(OpenAiCompatibleEngine.class);

  /**
   * How long a stream's body may stay open after {@code [DONE]} before its connection is closed.
   * A server ends the body right after {@code [DONE]}, and the connection is then used again;
   * one that does not (or a proxy) would otherwise hold the connection to {@code requestTimeout}.
   */
  static final long AFTER_DONE_MILLIS = 1000;

  /**
   * How long an answer waits for its next share of the {@linkplain Builder#answerBudget answer
   * budget} while no other answer gives any back, before it fails (or {@code requestTimeout} if
   * shorter).
   */
  static final Duration ANSWER_BUDGET_WAIT = Duration.ofSeconds(1);

  /**
   * The default {@linkplain Builder#answerBudget answer budget}, 256 MiB, when it is at least
   * {@link Builder#minAnswerBudget} of {@link Builder#maxResponseBytes}.
   */
  public static final long DEFAULT_ANSWER_BUDGET = 256L << 20;

  /** The default {@linkplain Builder#requestTimeout request timeout}: 4 min. */
  public static final Duration DEFAULT_REQUEST_TIMEOUT = Duration.ofMinutes(4);

  /** The default {@linkplain Builder#streamIdleTimeout idle bound of a stream}: 60 s. */
  public static final Duration DEFAULT_STREAM_IDLE_TIMEOUT = Duration.ofSeconds(60);

  private final URI completionsUri;
  private final URI healthUri;
  private final URI modelsUri;
  /** Where {@link #cacheSize} looks: vLLM's metrics, SGLang's server information. */
  private final URI metricsUri;
  private final URI serverInfoUri;
  private final String model;
  private final String apiKey;
  private final Duration requestTimeout;
  private final long requestTimeoutNanos;
  /** {@link Builder#streamIdleTimeout}, in ns: 0 when {@code requestTimeout} is no longer. */
  private final long streamIdleNanos;
  private final int maxResponseBytes;
  private final int maxInFlight;
  private final int slots;
  private final boolean returnTokenIds;
  /** The heap the answers being read and parsed may hold at once ({@link Builder#answerBudget}). */
  private final BodyBudget answers;
  /** Whether answers are being refused their share of {@link #answers}: logged once a spell. */
  private final AtomicBoolean refusing = new AtomicBoolean();
  /** The HTTP client, whose selector thread {@link #close()} ends. */
  private final JdkHttpClients.Client client;
  private final Executor timeoutExecutor;
  private final AtomicInteger inFlight = new AtomicInteger();
  /** Requests refused at once because {@link #maxInFlight} were outstanding ({@link #stats}). */
  private final LongAdder inFlightRefused = new LongAdder();
  /** Requests failed because their answer could not get its share of {@link #answers}. */
  private final LongAdder answerBudgetRefused = new LongAdder();
  /**
   * Requests and probes sent a second time on a new connection: their first try lost its
   * connection before any answer came ({@link RetriedExchange}).
   */
  private final LongAdder connectionRetries = new LongAdder();
  /** The requests in flight by id: ids are unique per origin only, so a few may share one. */
  private final RunsById<Running> running = new RunsById<>();
  /**
   * The health probes, and the questions of {@link #cacheSize}, in flight, until their answers'
   * bodies have ended.
   */
  private final Set<CompletableFuture<? extends HttpResponse<?>>> probes =
      ConcurrentHashMap.newKeySet();
  /**
   * Whether the server has reported {@code usage.prompt_tokens_details.cached_tokens} in an
   * answer, streamed or not: an answer whose usage leaves it out is then a miss, 0
   * ({@link #usage}).
   */
  private final AtomicBoolean cachedTokensReported = new AtomicBoolean();
  /**
   * Whether the server has answered (any status: a completion or a health probe) since this
   * adapter was built or last found it gone ({@link #serverGone}).
   */
  private final AtomicBoolean answered = new AtomicBoolean();
  /** The node's listener of cache losses ({@link #setCacheLossListener}), or null. */
  private volatile Consumer<String> cacheLossListener;
  private final VllmKvEventSubscriber.Builder kvEvents;
  /** Written under this; read without it by each request's completion. */
  private volatile VllmKvEventSubscriber subscriber;
  private volatile boolean closed; // written under this

  private OpenAiCompatibleEngine(Builder b) {
    String base = b.baseUrl.toString();
    if (base.endsWith("/")) {
      base = base.substring(0, base.length() - 1);
    }
    if (base.endsWith("/v1")) {
      base = base.substring(0, base.length() - 3);
    }
    this.completionsUri = URI.create(base + "/v1/completions");
    this.healthUri = URI.create(base + "/health");
    this.modelsUri = URI.create(base + "/v1/models");
    this.metricsUri = URI.create(base + "/metrics");
    this.serverInfoUri = URI.create(base + "/get_server_info");
    this.model = b.model;
    this.apiKey = b.apiKey;
    // at most 2^63 ns (292 years), which is "never" here, as the connect timeout: the JDK's HTTP
    // client fails a request whose timeout its clock cannot add up (a connection, too), and
    // one near 2^63 ms stalls the client for good
    this.requestTimeoutNanos = Durations.saturatedNanos(b.requestTimeout);
    this.requestTimeout = Duration.ofNanos(requestTimeoutNanos);
    long idle = Durations.saturatedNanos(b.streamIdleTimeout);
    // a bound no shorter than the whole request's never comes first: no timer for it
    this.streamIdleNanos = idle < requestTimeoutNanos ? idle : 0;
    this.maxResponseBytes = b.maxResponseBytes;
    this.maxInFlight = b.resolvedMaxInFlight();
    this.slots = b.resolvedSlots();
    this.returnTokenIds = b.returnTokenIds;
    this.answers = new BodyBudget(b.resolvedAnswerBudget(),
        requestTimeout.compareTo(ANSWER_BUDGET_WAIT) < 0 ? requestTimeout : ANSWER_BUDGET_WAIT,
        this::answerRefused);
    this.kvEvents = b.kvEvents;
    HttpClient.Builder cb =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofNanos(Durations.saturatedNanos(b.connectTimeout)))
            .followRedirects(HttpClient.Redirect.NEVER);
    if (b.executor != null) {
      cb.executor(b.executor);
    }
    // JDK 17's client cannot be closed: built so, its selector thread ends with close()
    this.client = JdkHttpClients.build(cb, "prefix-router-openai-client-build");
    this.timeoutExecutor = b.executor != null
        ? orInline(b.executor)
        : java.util.concurrent.ForkJoinPool.commonPool();
  }

  /**
   * {@code host}, or, for work it refuses (a bounded pool that is full, one shut down) or
   * throws anything else on as it is handed it (an {@link Error} too: a pool that cannot start
   * a thread throws an {@link OutOfMemoryError}), the calling thread: a request whose deadline
   * passes is failed even then, on the timer's thread, rather than left unanswered with its
   * slot held.
   */
  private static Executor orInline(Executor host) {
    return task -> {
      try {
        host.execute(task);
      } catch (Throwable refused) { // a VirtualMachineError too: the task must run all the same
        task.run();
      }
    };
  }

  /**
   * A builder; the base URL is required.
   *
   * @return a new builder
   */
  public static Builder builder() {
    return new Builder();
  }

  @Override
  public CompletableFuture<EngineResult> execute(InferenceRequest request) {
    return execute(request, OutputListener.IGNORE);
  }

  /**
   * Runs one request and, unless {@code listener} is {@link OutputListener#IGNORE}, streams its
   * output: the server is asked for a stream ({@code "stream": true}) and each of its chunks is
   * given to {@code listener} as it arrives (see the class comment).
   *
   * @param request the request; never null
   * @param listener where to give the output as it is generated; never null
   * @return a future completed once with the result, or exceptionally with an
   *     {@link EngineException}
   */
  @Override
  public CompletableFuture<EngineResult> execute(InferenceRequest request, OutputListener listener) {
    Objects.requireNonNull(request, "request");
    Objects.requireNonNull(listener, "listener");
    CompletableFuture<EngineResult> answer = new CompletableFuture<>();
    if (closed) {
      answer.completeExceptionally(closedFailure(request.id()));
      return answer;
    }
    if (inFlight.incrementAndGet() > maxInFlight) {
      inFlight.decrementAndGet();
      inFlightRefused.increment();
      answer.completeExceptionally(
          new EngineInFlightLimitException(
              "engine busy: " + maxInFlight + " requests already in flight to " + completionsUri));
      return answer;
    }
    // the request's own future; the caller's (answer) completes after its bookkeeping, so the
    // caller's callbacks see its slot free (and may submit the next request into it)
    CompletableFuture<EngineResult> result = new CompletableFuture<>();
    // what the answer holds of the answer budget, given back however the request ends
    BodyBudget.Share share = answers.share();
    boolean streamed = listener != OutputListener.IGNORE;
    CompletionStream stream = streamed
        ? new CompletionStream(request, maxResponseBytes, apiKey, listener, share,
            cachedTokensReported) : null;
    Running run = new Running(request.id(), result, stream);
    result.whenComplete((r, e) -> {
      share.close();
      if (e == null) {
        refusing.set(false); // an answer passed: a later refusal is logged again
      }
      inFlight.decrementAndGet();
      running.remove(request.id(), run);
      if (e instanceof AnswerBudgetException) {
        answerBudgetRefused.increment();
      }
      if (e != null) {
        answer.completeExceptionally(e);
      } else {
        try {
          requestCompleted(r);
        } finally {
          answer.complete(r);
        }
      }
    });
    // a caller that completes its future itself (cancels it, say) ends the request
    answer.whenComplete((r, e) -> {
      if (e != null) {
        run.fail(e instanceof EngineException ee ? ee
            : new EngineException("request " + request.id() + " cancelled", false, e));
      }
    });
    HttpRequest http;
    try {
      String body = Json.write(requestBody(request, streamed));
      HttpRequest.Builder hb =
          HttpRequest.newBuilder(completionsUri)
              .timeout(requestTimeout)
              .header("Content-Type", "application/json")
              .header("Accept", streamed ? "text/event-stream, application/json" : "application/json")
              .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8));
      if (apiKey != null) {
        hb.header("Authorization", "Bearer " + apiKey);
      }
      http = hb.build();
    } catch (Throwable e) { // an Error too (the heap running out as the body is written)
      run.fail(new EngineException("cannot build request " + request.id() + ": " + e.getMessage(), false, e));
      return answer;
    }
    running.add(request.id(), run);
    if (streamed) {
      executeStreamed(request, stream, http, result, share);
      return answer;
    }
    // the client's own timeout ends with the answer's headers; the body is bounded here
    Deadline deadline = new Deadline(request, result, result::completeExceptionally, () -> { });
    result.whenComplete((r, e) -> deadline.stop());
    CompletableFuture<HttpResponse<byte[]>> call;
    try {
      call = send(http, info -> {
        deadline.headersArrived();
        serverAnswered();
        return capped(info, share);
      }, () -> !result.isDone());
    } catch (Throwable e) { // an Error too (of the host's proxy selector, which the client asks
      // as it sends, say), a VirtualMachineError included: the request's one answer, its slot back
      result.completeExceptionally(new EngineException("cannot send request " + request.id() + ": " + e, true, e));
      return answer;
    }
    result.whenComplete((r, e) -> {
      if (e != null) {
        call.cancel(true); // closes the connection, also while the body is being read
      }
    });
    if (closed) { // closed as it was sent: the client's selector may have ended before it came
      result.completeExceptionally(closedFailure(request.id()));
    }
    call.whenComplete(
        (resp, err) -> {
          if (err != null) {
            Throwable c = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
            result.completeExceptionally(mapFailure(request, c));
            return;
          }
          try {
            result.complete(parseAnswer(request, resp.statusCode(), resp.body(), share));
          } catch (EngineException e) {
            result.completeExceptionally(e);
          } catch (RuntimeException e) {
            result.completeExceptionally(
                new EngineException("request " + request.id() + ": unusable answer: " + e.getMessage(), true, e));
          } catch (Throwable e) { // an Error (the heap running out as the answer is parsed): lost
            // in the client's future, the request would end only at its requestTimeout
            result.completeExceptionally(unreadAnswer(request, e));
          }
        });
    return answer;
  }

  /**
   * The streamed exchange: a 200 answer of type {@code text/event-stream} is parsed as it
   * arrives; any other answer (an error status, or a server that answers a plain JSON body) is
   * collected and read as the non-streamed answer, its output then given to the listener in
   * one piece.
   */
  private void executeStreamed(InferenceRequest request, CompletionStream stream,
      HttpRequest http, CompletableFuture<EngineResult> result, BodyBudget.Share share) {
    AtomicReference<EventStreamBody> events = new AtomicReference<>();
    // a stream out of time (the request's, or its idle bound's): one whose choice 0 gave its
    // finish_reason completes with its output, any other fails; its connection is closed
    Consumer<EngineException> outOfTime = failure -> {
      EventStreamBody b = events.get();
      if (b != null) {
        b.expire(failure);
      } else {
        finish(result, stream, null, failure);
      }
    };
    // the whole answer within requestTimeout, as for a non-streamed request (an event stream,
    // or a JSON answer whose body stalls); after [DONE], a body still open then is closed
    Deadline deadline = new Deadline(request, result, outOfTime::accept, () -> {
      EventStreamBody b = events.get();
      if (b != null && b.cancel()) {
        log.debug("request {}: the event stream was still open after [DONE] at the request's "
            + "{} ms deadline, closed", request.id(), requestTimeout.toMillis());
      }
    });
    // nothing from the server for streamIdleTimeout, from the request's sending to the end of
    // its answer (an event stream, or the body of any other answer): fails the request
    IdleBound idle = new IdleBound(request, outOfTime);
    result.whenComplete((r, e) -> idle.stop());
    idle.touch();
    CompletableFuture<HttpResponse<Object>> call;
    try {
      call = send(http, info -> {
        deadline.headersArrived();
        serverAnswered();
        if (info.statusCode() == 200 && isEventStream(info)) {
          idle.touch();
          EventStreamBody b = new EventStreamBody(request, stream, result, idle);
          events.set(b);
          return b;
        }
        // a plain answer (a server that ignores "stream", an error status): each part of its
        // body starts the bound again, so that one that goes silent mid-body fails as a silent
        // event stream does, not only at requestTimeout
        idle.touch();
        return HttpResponse.BodySubscribers.mapping(heardFrom(capped(info, share), idle::touch),
            body -> (Object) body);
      }, () -> !result.isDone());
    } catch (Throwable e) { // an Error too: see execute
      idle.stop();
      deadline.stop();
      stream.close();
      result.completeExceptionally(new EngineException("cannot send request " + request.id() + ": " + e, true, e));
      return;
    }
    result.whenComplete((r, e) -> {
      stream.close(); // the listener is not called once the future completed
      if (e != null) {
        deadline.stop();
        call.cancel(true);
        EventStreamBody b = events.get();
        if (b != null) {
          b.cancel(); // closes the connection: vLLM aborts the request
        }
      }
    });
    if (closed) { // closed as it was sent: the client's selector may have ended before it came
      finish(result, stream, null, closedFailure(request.id()));
    }
    call.whenComplete((resp, err) -> {
      deadline.stop(); // the body has ended
      if (!(resp != null && resp.body() instanceof EventStreamBody.Streamed)) {
        idle.stop(); // a plain answer's body has ended: no bound while it is parsed
      }
      if (err != null) {
        Throwable c = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
        finish(result, stream, null, mapFailure(request, c));
        return;
      }
      if (resp.body() instanceof EventStreamBody.Streamed) {
        return; // the stream completed the future itself
      }
      try {
        EngineResult r = parseAnswer(request, resp.statusCode(), (byte[]) resp.body(), share);
        stream.deliverWhole(r);
        finish(result, stream, r, null);
      } catch (EngineException e) {
        finish(result, stream, null, e);
      } catch (RuntimeException e) {
        finish(result, stream, null,
            new EngineException("request " + request.id() + ": unusable answer: " + e.getMessage(), true, e));
      } catch (Throwable e) { // an Error: lost, the request would never end (its deadline is off)
        finish(result, stream, null, unreadAnswer(request, e));
      }
    });
  }

  /** {@code body}, with {@code heard} run as each part of it arrives, before it is taken. */
  private static <T> HttpResponse.BodySubscriber<T> heardFrom(HttpResponse.BodySubscriber<T> body,
      Runnable heard) {
    return new HttpResponse.BodySubscriber<>() {
      @Override
      public CompletionStage<T> getBody() {
        return body.getBody();
      }

      @Override
      public void onSubscribe(java.util.concurrent.Flow.Subscription s) {
        body.onSubscribe(s);
      }

      @Override
      public void onNext(List<ByteBuffer> items) {
        heard.run();
        body.onNext(items);
      }

      @Override
      public void onError(Throwable t) {
        body.onError(t);
      }

      @Override
      public void onComplete() {
        body.onComplete();
      }
    };
  }

  /**
   * Sends {@code http} ({@link RetriedExchange}): once more, at once, on a new connection, when
   * its first try fails with an I/O error before any byte of the answer came (the race of a
   * pooled connection with the server's idle close), within what is left of {@code requestTimeout},
   * while {@code wanted} and the engine is open; each second try counted in {@link #stats}.
   * Cancelling the future cancels the try in progress, closing its connection.
   */
  private <T> CompletableFuture<HttpResponse<T>> send(HttpRequest http,
      HttpResponse.BodyHandler<T> handler, java.util.function.BooleanSupplier wanted) {
    return RetriedExchange.send(client.http(), http, handler, requestTimeoutNanos,
        () -> !closed && wanted.getAsBoolean(), connectionRetries::increment).future();
  }

  /**
   * The retryable failure of a request whose answer could not be read for what {@code e} is (an
   * {@link Error}, the heap running out as it is parsed, a {@link VirtualMachineError} included).
   */
  private static EngineException unreadAnswer(InferenceRequest request, Throwable e) {
    return new EngineException("request " + request.id() + ": cannot read the answer: " + e, true, e);
  }

  /**
   * Bounds a request by {@code requestTimeout}, from {@code execute} to the end of its
   * answer's body ({@link #stop}). Until the answer's headers have arrived the HTTP client's own
   * timeout applies (it tells a connection not made in time, retryable, from an answer not
   * come); it ends there, and a server or proxy may then stall the body for ever. A request
   * whose headers came and whose answer is not complete at the deadline (or whose headers come
   * after it) is given to {@code fail}, which completes it with the
   * {@link EngineTimeoutException} and closes its connection, as {@link #cancel} does. A
   * request already complete whose body has not ended by then (a stream left open after
   * {@code [DONE]}) has {@code linger} run, which closes the connection.
   */
  private final class Deadline {
    private final InferenceRequest request;
    private final CompletableFuture<EngineResult> result;
    private final java.util.function.Consumer<EngineTimeoutException> fail;
    private final Runnable linger;
    private final CompletableFuture<Void> timer = new CompletableFuture<>();
    private volatile boolean headers;
    private volatile boolean expired;

    Deadline(InferenceRequest request, CompletableFuture<EngineResult> result,
        java.util.function.Consumer<EngineTimeoutException> fail, Runnable linger) {
      this.request = request;
      this.result = result;
      this.fail = fail;
      this.linger = linger;
      timer.orTimeout(requestTimeoutNanos, TimeUnit.NANOSECONDS).whenComplete((v, e) -> {
        if (e instanceof TimeoutException) {
          expired = true;
          if (headers) {
            expire(e);
          }
        }
      });
    }

    /** Called by the HTTP client as the answer's headers arrive, before its body. */
    void headersArrived() {
      headers = true;
      if (expired) {
        expire(null);
      }
    }

    /** The answer's body has ended, or its connection was closed: the deadline is off. */
    void stop() {
      timer.complete(null);
    }

    private void expire(Throwable cause) {
      // off the JDK's timer thread, which the failure's callbacks must not hold up
      if (!result.isDone()) {
        timeoutExecutor.execute(() -> fail.accept(new EngineTimeoutException("request "
            + request.id() + " to " + completionsUri + ": no answer within "
            + requestTimeout.toMillis() + " ms (requestTimeout)", cause)));
      } else {
        timeoutExecutor.execute(linger);
      }
    }
  }

  /**
   * Bounds the silence of a streamed request's server by {@link Builder#streamIdleTimeout}:
   * each {@link #touch} (the request sent, its headers, each read of its event stream) starts
   * the bound again, on the JDK's shared {@link CompletableFuture#orTimeout} timer, the one
   * {@link Deadline} uses; the bound running out gives {@code fail} a retryable
   * {@link EngineException} on the timeout executor. Does nothing when the bound is off
   * ({@code streamIdleNanos} 0); {@link #stop} ends it for good.
   */
  private final class IdleBound {
    private final InferenceRequest request;
    private final Consumer<EngineException> fail;
    /** The running bound; completed to cancel it (which takes it off the timer's queue). */
    private final AtomicReference<CompletableFuture<Void>> timer = new AtomicReference<>();
    private volatile boolean stopped;

    IdleBound(InferenceRequest request, Consumer<EngineException> fail) {
      this.request = request;
      this.fail = fail;
    }

    /** The server was heard from: the bound starts again. */
    void touch() {
      if (streamIdleNanos == 0 || stopped) {
        return;
      }
      CompletableFuture<Void> next = new CompletableFuture<>();
      CompletableFuture<Void> previous = timer.getAndSet(next);
      if (previous != null) {
        previous.complete(null);
      }
      next.orTimeout(streamIdleNanos, TimeUnit.NANOSECONDS).whenComplete((v, e) -> {
        if (e instanceof TimeoutException && !stopped && timer.get() == next) {
          // off the JDK's timer thread, which the failure's callbacks must not hold up
          timeoutExecutor.execute(() -> fail.accept(new EngineException("request "
              + request.id() + " to " + completionsUri + ": the server sent nothing for "
              + TimeUnit.NANOSECONDS.toMillis(streamIdleNanos)
              + " ms (streamIdleTimeout) while streaming the answer", true)));
        }
      });
      if (stopped) { // stopped as it was started again
        next.complete(null);
      }
    }

    /** The stream is over (or is no event stream): the bound is off for good. */
    void stop() {
      stopped = true;
      CompletableFuture<Void> t = timer.getAndSet(null);
      if (t != null) {
        t.complete(null);
      }
    }
  }

  private static boolean isEventStream(HttpResponse.ResponseInfo info) {
    return info.headers().firstValue("Content-Type")
        .map(t -> t.toLowerCase(java.util.Locale.ROOT).startsWith("text/event-stream"))
        .orElse(false);
  }

  /**
   * A request in flight, as {@link #cancel} finds it: its future and, when it streams, its
   * stream to the listener.
   */
  private record Running(String id, CompletableFuture<EngineResult> result,
      CompletionStream stream) {
    /** Fails the request; a stream is closed first, so no piece is being given after it. */
    void fail(EngineException e) {
      if (stream != null) {
        finish(result, stream, null, e);
      } else {
        result.completeExceptionally(e);
      }
    }
  }

  /** Completes the request: the stream is closed first, so no piece follows the completion. */
  private static void finish(CompletableFuture<EngineResult> result, CompletionStream stream,
      EngineResult r, EngineException e) {
    stream.close();
    if (e != null) {
      result.completeExceptionally(e);
    } else {
      result.complete(r);
    }
  }

  /**
   * The body of a streamed answer: feeds its bytes to the {@link CompletionStream} as they
   * arrive and completes the request at {@code [DONE]}, or with the failure that ended it (but
   * once choice 0 gave its {@code finish_reason}: nothing after it fails the request, which
   * completes with its output). The HTTP client calls it one signal at a time.
   */
  final class EventStreamBody implements HttpResponse.BodySubscriber<Object> {
    /** What the exchange's body completes with: the request was completed by the stream. */
    static final class Streamed {}

    private final InferenceRequest request;
    private final CompletionStream stream;
    private final CompletableFuture<EngineResult> result;
    private final IdleBound idle;
    private final CompletableFuture<Object> body = new CompletableFuture<>();
    private volatile Flow.Subscription subscription;
    private volatile boolean cancelled;

    /** A body without an idle bound. For tests. */
    EventStreamBody(InferenceRequest request, CompletionStream stream,
        CompletableFuture<EngineResult> result) {
      this(request, stream, result, null);
    }

    /** A body whose reads start {@code idle} again (null: none). */
    EventStreamBody(InferenceRequest request, CompletionStream stream,
        CompletableFuture<EngineResult> result, IdleBound idle) {
      this.request = request;
      this.stream = stream;
      this.result = result;
      this.idle = idle;
    }

    @Override
    public CompletionStage<Object> getBody() {
      return body;
    }

    @Override
    public void onSubscribe(Flow.Subscription s) {
      subscription = s;
      if (cancelled || result.isDone() && !stream.done()) {
        s.cancel();
        body.complete(new Streamed());
        return;
      }
      s.request(Long.MAX_VALUE);
    }

    @Override
    public void onNext(List<ByteBuffer> items) {
      if (cancelled) {
        return;
      }
      if (idle != null) {
        idle.touch();
      }
      try {
        for (ByteBuffer b : items) {
          if (cancelled) {
            return; // closed as an earlier buffer was read (the request cancelled as its piece
            // was given, say): the rest of the batch is not parsed
          }
          boolean wasDone = stream.done();
          boolean wasFinished = stream.finished();
          EngineException afterDone = null;
          try {
            stream.feed(b);
          } catch (EngineException e) {
            if (wasDone || !stream.done()) {
              throw e;
            }
            // past the limit after [DONE], in [DONE]'s own read: the request is complete all
            // the same (as when those bytes come in a later read), and the connection closed
            afterDone = e;
          }
          if (!wasDone && stream.done()) {
            finish(result, stream, stream.result(), null);
            if (afterDone != null) {
              throw afterDone;
            }
            CompletableFuture.delayedExecutor(AFTER_DONE_MILLIS, TimeUnit.MILLISECONDS,
                timeoutExecutor).execute(this::closeAfterDone);
          } else if (!wasFinished && stream.finished() && !stream.done()) {
            // the output is whole: [DONE] should follow at once, and may never come
            CompletableFuture.delayedExecutor(AFTER_DONE_MILLIS, TimeUnit.MILLISECONDS,
                timeoutExecutor).execute(this::completeAfterFinish);
          }
        }
      } catch (EngineException e) {
        end(e);
      } catch (BodyBudget.Refused e) {
        end(refusedShare(request, e));
      } catch (RuntimeException e) {
        end(new EngineException("request " + request.id() + ": unusable stream: " + e, true, e));
      }
    }

    /**
     * Ends a stream that went wrong with {@code e}: one whose choice 0 gave its
     * {@code finish_reason} completes with its output, which is whole and streamed (an error the
     * server reports after it, for another choice say, or a chunk that cannot be read, changes
     * nothing of it, as a cut there does not: it used to fail the request, retryable, and a peer
     * ran the whole generation again); any other fails with {@code e}. The connection is closed.
     */
    private void end(EngineException e) {
      EngineResult r = result.isDone() ? null : wholeOrFail();
      if (r == null) {
        fail(e);
        return;
      }
      finish(result, stream, r, null);
      cancel();
      log.debug("request {}: the event stream went wrong after its finish_reason, completed "
          + "with its output and closed: {}", request.id(), e.getMessage());
    }

    @Override
    public void onError(Throwable t) {
      body.complete(new Streamed());
      if (!result.isDone()) {
        if (stream.finished()) {
          // choice 0 gave its finish_reason: the output is whole, only [DONE] (and maybe the
          // usage chunk) did not come; running the generation again on a peer would waste it
          onComplete();
        } else {
          finish(result, stream, null, mapFailure(request, t));
        }
      }
    }

    @Override
    public void onComplete() {
      body.complete(new Streamed());
      if (!result.isDone()) {
        try {
          finish(result, stream, stream.result(), null);
        } catch (EngineException e) {
          finish(result, stream, null, e);
        } catch (RuntimeException e) {
          finish(result, stream, null,
              new EngineException("request " + request.id() + ": unusable stream: " + e, true, e));
        } catch (Throwable e) { // an Error (the heap running out as the result is built): thrown
          // on to the HTTP client, the request was never answered (its body, and deadline, over)
          finish(result, stream, null, unreadAnswer(request, e));
        }
      }
    }

    /** Closes the connection of a body still open {@link #AFTER_DONE_MILLIS} after [DONE]. */
    private void closeAfterDone() {
      if (!body.isDone() && cancel()) {
        log.debug("request {}: the event stream was still open {} ms after [DONE], closed",
            request.id(), AFTER_DONE_MILLIS);
      }
    }

    /**
     * Completes with its output a request whose choice 0 gave its {@code finish_reason}
     * {@link #AFTER_DONE_MILLIS} ago, its stream open since without {@code [DONE]}, and closes
     * the connection. Runs on the timeout executor; the stream's {@link CompletionStream#whole}
     * is safe to read there.
     */
    private void completeAfterFinish() {
      if (result.isDone()) {
        return;
      }
      EngineResult r = wholeOrFail();
      if (r != null && !result.isDone()) {
        finish(result, stream, r, null);
        if (cancel()) {
          log.debug("request {}: the event stream was still open {} ms after its finish_reason, "
              + "without [DONE]: completed with its output and closed", request.id(),
              AFTER_DONE_MILLIS);
        }
      }
    }

    /**
     * The request's time is up ({@code requestTimeout}), or its server sent nothing for
     * {@code streamIdleTimeout}: a stream whose choice 0 gave its {@code finish_reason} completes
     * with its output (only {@code [DONE]} is missing), any other fails with {@code timeout};
     * the connection is closed.
     */
    void expire(EngineException timeout) {
      EngineResult r = wholeOrFail();
      if (r != null) {
        finish(result, stream, r, null);
        cancel();
      } else if (!result.isDone()) {
        fail(timeout);
      }
    }

    /**
     * The stream's result once choice 0 gave its {@code finish_reason} (built now: a copy of the
     * output), else null. A result that cannot be built fails the request, with what was thrown
     * (an {@link Error} too, the heap running out as the output is copied: on the timer's thread
     * it would be lost and the request never answered), and gives null.
     */
    private EngineResult wholeOrFail() {
      try {
        return stream.whole();
      } catch (EngineException e) {
        fail(e);
      } catch (Throwable e) {
        fail(unreadAnswer(request, e));
      }
      return null;
    }

    /** Fails the request and closes the connection. */
    void fail(EngineException e) {
      finish(result, stream, null, e);
      cancel();
    }

    /**
     * Stops reading: the client closes the connection.
     *
     * @return whether the body was still open
     */
    boolean cancel() {
      cancelled = true;
      Flow.Subscription s = subscription;
      if (s != null) {
        s.cancel();
        return body.complete(new Streamed());
      }
      return false;
    }
  }

  private Map<String, Object> requestBody(InferenceRequest request, boolean streamed) {
    GenerationParams p = request.params();
    Map<String, Object> m = new LinkedHashMap<>();
    // vLLM serves a LoRA adapter under its own model name: a request of an adapter names it,
    // the others the builder's model (the base); the salt keys vLLM's prefix cache per tenant
    String adapter = request.scope().adapter();
    if (!adapter.isEmpty()) {
      m.put("model", adapter);
    } else if (model != null) {
      m.put("model", model);
    }
    if (!request.scope().salt().isEmpty()) {
      m.put("cache_salt", request.scope().salt());
    }
    m.put("prompt", PromptArrays.shared(request));
    m.put("max_tokens", p.maxTokens());
    m.put("temperature", p.temperature());
    m.put("top_p", p.topP());
    m.put("seed", p.seed());
    // vLLM and SGLang take both with a prompt of token ids and answer the output cut at the
    // first stop; sent only when set, so a request without stops is the body it always was
    if (!p.stop().isEmpty()) {
      m.put("stop", p.stop());
    }
    if (!p.stopTokenIds().isEmpty()) {
      m.put("stop_token_ids", p.stopTokenIds());
    }
    m.put("stream", streamed);
    if (streamed) {
      // vLLM and SGLang send the usage (prompt and cached tokens) in a last chunk when asked
      m.put("stream_options", Map.of("include_usage", true));
    }
    if (returnTokenIds) {
      m.put("return_token_ids", true);
    }
    return m;
  }

  private HttpResponse.BodySubscriber<byte[]> capped(HttpResponse.ResponseInfo info,
      BodyBudget.Share share) {
    return CappedBody.orNull(info, maxResponseBytes, share);
  }

  /** An answer was refused its next share of the answer budget: logged once a spell. */
  private void answerRefused() {
    if (refusing.compareAndSet(false, true)) {
      log.warn("answers from {} are failing: the heap this engine gives the answers being read "
          + "and parsed ({} bytes, answerBudget) is held by other answers; not logged again "
          + "until an answer passes", completionsUri, answers.capacity());
    }
  }

  /**
   * The retryable failure of an answer refused its next share of the answer budget: this node's
   * shortage of heap, which the node does not count as a failure of its engine.
   */
  private EngineException refusedShare(InferenceRequest request, BodyBudget.Refused e) {
    return new AnswerBudgetException("request " + request.id() + " to " + completionsUri
        + ": the answer could not get its share of the heap this engine gives the answers being "
        + "read and parsed (" + answers.capacity() + " bytes, answerBudget): other answers held "
        + "it; another node may serve the request", e);
  }

  /** The bytes of the answer budget not held by answers now. For tests. */
  long answerBudgetAvailable() {
    return answers.available();
  }

  private EngineException mapFailure(InferenceRequest request, Throwable c) {
    String where = "request " + request.id() + " to " + completionsUri;
    if (c instanceof BodyBudget.Refused refused) {
      return refusedShare(request, refused);
    }
    if (refused(c)) {
      serverGone(c); // nothing listens where the server answered: told before this failure
    }
    if (c instanceof HttpConnectTimeoutException || c instanceof ConnectException) {
      return new EngineException(where + ": server unreachable: " + c, true, c);
    }
    if (c instanceof HttpTimeoutException) {
      // a long generation, which would time out on a peer as well: not retryable
      return new EngineTimeoutException(where + ": no answer within "
          + requestTimeout.toMillis() + " ms (requestTimeout)", c);
    }
    if (c instanceof IOException) {
      return new EngineException(where + ": I/O failure: " + c, true, c);
    }
    if (c instanceof java.util.concurrent.CancellationException) {
      return new EngineException(where + ": cancelled", false, c);
    }
    return new EngineException(where + ": " + c, true, c);
  }

  /** Turns an HTTP answer into a result or a typed error. Package-private for tests. */
  EngineResult parseAnswer(InferenceRequest request, int status, byte[] body) {
    return parseAnswer(request, status, body, (BodyBudget.Share) null);
  }

  /**
   * Turns an HTTP answer into a result or a typed error, taking the heap of its text and its
   * parse from {@code share} (null: from nowhere).
   */
  private EngineResult parseAnswer(InferenceRequest request, int status, byte[] body,
      BodyBudget.Share share) {
    try {
      return parseWithin(request, status, body, share == null ? null : share::take);
    } catch (BodyBudget.Refused e) {
      throw refusedShare(request, e);
    }
  }

  /**
   * Whether an error status (an answer's, or the code of an error a stream reports before any
   * output) says the request itself is at fault, so that every engine would refuse it: a 4xx
   * but 401 and 403 (the server refuses the node's credentials), 404 and 405 (no such endpoint,
   * or a model the server does not serve: the node's setting; a LoRA adapter's unknown model is
   * told apart before this), 408 (a timeout) and 429 (overload), which are retryable.
   */
  static boolean refusesTheRequest(long status) {
    return status >= 400 && status < 500 && status != 401 && status != 403 && status != 404
        && status != 405 && status != 408 && status != 429;
  }

  private EngineResult parseWithin(InferenceRequest request, int status, byte[] body,
      Json.Memory memory) {
    String where = "request " + request.id();
    if (body == null && status == 200) {
      throw new EngineException(where + ": answer larger than " + maxResponseBytes + " bytes", true);
    }
    // an error maps by its status, also when its body (a proxy's page, say) is too large to read
    if (status == 429 || status == 503) {
      throw new EngineBusyException(where + ": server answered HTTP " + status + errorDetail(body),
          status);
    }
    if (status == 404 || status == 405) {
      throw notFound(request, status, body, memory);
    }
    if (status != 200) {
      String detail = where + ": server answered HTTP " + status + errorDetail(body);
      if (status == 401 || status == 403) {
        // the node's credentials, not the request: said so to the client, never the key
        detail += apiKey != null
            ? "; the model server refuses the API key the node sends"
            : "; the model server refuses requests without an API key, and the node sends none";
      }
      if (refusesTheRequest(status)) {
        throw new InvalidRequestException(detail, status);
      }
      // 408, 5xx, 401/403 (this node's credentials), and anything else that is not an answer
      throw new EngineException(detail, true, status, null);
    }
    Object root;
    try {
      if (memory != null) {
        memory.take(2L * body.length); // its text: two bytes a character at most
      }
      String text =
          StandardCharsets.UTF_8
              .newDecoder()
              .onMalformedInput(CodingErrorAction.REPORT)
              .onUnmappableCharacter(CodingErrorAction.REPORT)
              .decode(java.nio.ByteBuffer.wrap(body))
              .toString();
      root = Json.parse(text, maxResponseBytes, 32, AnswerHeap.maxParsedBytes(text.length()),
          memory);
    } catch (CharacterCodingException e) {
      throw new EngineException(where + ": answer is not valid UTF-8", true, e);
    } catch (Json.ParsedSizeException e) {
      throw new EngineException(where + ": " + tooLargeOnceParsed("answer", e), true, e);
    } catch (Json.JsonException e) {
      throw new EngineException(where + ": malformed JSON answer: " + e.getMessage(), true, e);
    }
    try {
      List<?> choices = Json.asList(Json.member(root, "choices"), "choices");
      if (choices.isEmpty()) {
        throw new Json.JsonException("choices is empty", -1);
      }
      Object choice = choiceZero(choices);
      if (choice == null) {
        throw new Json.JsonException("choices has none of index 0", -1);
      }
      Object finish = Json.member(choice, "finish_reason");
      if ("abort".equals(finish) || "error".equals(finish)) {
        // as in a stream: the server gave up on the generation, whatever output it sent
        throw new EngineException(where + ": the server ended the generation with "
            + "finish_reason " + finish, true);
      }
      Object textValue = Json.member(choice, "text");
      String text = textValue == null || textValue == Json.NULL ? "" : Json.asString(textValue, "choices[0].text");
      text += stopString(choice, request.params());
      Object ids = Json.member(choice, "token_ids");
      int[] output = ids == null || ids == Json.NULL ? new int[0] : Json.asIntArray(ids, "choices[0].token_ids");
      String impossible = impossibleOutput(output, 0, request.params());
      if (impossible != null) {
        throw new EngineException(where + ": the server answered " + impossible, true);
      }
      int[] counts = usage(root, request, cachedTokensReported);
      return new EngineResult(output, text, counts[0], counts[1], -1, -1);
    } catch (Json.JsonException e) {
      throw new EngineException(where + ": unexpected answer shape: " + e.getMessage(), true, e);
    }
  }

  /**
   * The failure of a 404 or 405 answer. Only a 404 in OpenAI's error shape that names a model
   * ({@link #namesModel}) is the server's word on the request: the model it was sent is not
   * served. That is the request's fault when it names a LoRA adapter (a client's name), and this
   * node's (retryable) when it is of the base model, whose name this engine sends for every
   * request. Any other 404 or 405 (a framework's {@code {"detail":"Not Found"}}, a proxy's page,
   * no body) says there is no completions endpoint at {@link #completionsUri}: the base URL is
   * wrong for this server, which every request would find alike; retryable, as a peer's server
   * may be set up right.
   */
  private EngineException notFound(InferenceRequest request, int status, byte[] body,
      Json.Memory memory) {
    String where = "request " + request.id();
    if (status == 404 && namesModel(body, memory)) {
      String detail = where + ": server answered HTTP 404" + errorDetail(body);
      if (!request.scope().adapter().isEmpty()) {
        return new InvalidRequestException(detail, status);
      }
      return new EngineException(detail + " (this engine sends "
          + (model != null ? "the model '" + model + "'" : "no model name, the server's default,")
          + " for every request of the base model: check the model name it is given)", true,
          status, null);
    }
    return new EngineException(where + ": POST " + completionsUri + " answered HTTP " + status
        + errorDetail(body) + " (no completions endpoint there: check the server's base URL, "
        + "its root or its /v1, as in http://127.0.0.1:8000)", true, status, null);
  }

  /** Whether an error answer refuses the request's model ({@link OpenAiErrors#namesModel}). */
  static boolean namesModel(byte[] body) {
    return namesModel(body, null);
  }

  /**
   * As {@link #namesModel(byte[])}, taking the heap of the text and its parse from
   * {@code memory} (null: from nowhere), whose failure is thrown on.
   */
  private static boolean namesModel(byte[] body, Json.Memory memory) {
    if (body == null || body.length == 0) {
      return false;
    }
    if (memory != null) {
      memory.take(2L * body.length);
    }
    Object root;
    try {
      String text = new String(body, StandardCharsets.UTF_8);
      root = Json.parse(text, body.length, 8, AnswerHeap.maxParsedBytes(text.length()), memory);
    } catch (BodyBudget.Refused refused) {
      throw refused;
    } catch (RuntimeException notJson) {
      return false;
    }
    return OpenAiErrors.namesModel(root);
  }

  /** The message of an answer or chunk ({@code what}) refused by its {@link AnswerHeap} bound. */
  static String tooLargeOnceParsed(String what, Json.ParsedSizeException e) {
    return AnswerHeap.tooLarge(what, e, "text and token ids");
  }

  /**
   * The choice of index 0 (or without an index) among {@code choices}, or null: the request's
   * one sequence. A server that generates several (n above 1 by its own default) sends the
   * others with their indexes, in any order; they are not the request's output.
   *
   * @throws Json.JsonException if a choice is not an object
   */
  static Object choiceZero(List<?> choices) {
    for (int i = 0; i < choices.size(); i++) { // no iterator: this runs for every chunk
      Object c = choices.get(i);
      Object index = Json.member(c, "index");
      if (index == null || index == Json.NULL || Long.valueOf(0).equals(index)) {
        return c;
      }
    }
    return null;
  }

  /**
   * Why output token ids {@code piece}, following {@code before} others, cannot be a request's
   * output, or null when they can: more than {@code maxTokens} in all, or a negative id (no
   * vocabulary has one). The node would refuse such an answer; failing it here stops a server
   * that generates on, and bounds what a stream holds by {@code maxTokens}.
   */
  static String impossibleOutput(int[] piece, int before, GenerationParams params) {
    if ((long) before + piece.length > params.maxTokens()) {
      return "more than max_tokens " + params.maxTokens() + " output tokens ("
          + ((long) before + piece.length) + ")";
    }
    for (int t : piece) {
      if (t < 0) {
        return "a negative token id " + t;
      }
    }
    return null;
  }

  /**
   * The stop string that ended a choice, as the server reports it, or "": with
   * {@code finish_reason} {@code "stop"}, vLLM's {@code stop_reason} or SGLang's
   * {@code matched_stop} when it is one of the request's stop strings. The server's text ends
   * just before it; the result's text is given with it appended, so that the node sees that a
   * stop ended the output (and says {@code finish_reason: "stop"} even when the output has
   * {@code max_tokens} tokens) and cuts it off itself.
   */
  static String stopString(Object choice, GenerationParams params) {
    if (params.stop().isEmpty() || !"stop".equals(Json.member(choice, "finish_reason"))) {
      return "";
    }
    for (String key : new String[] {"stop_reason", "matched_stop"}) {
      if (Json.member(choice, key) instanceof String s && params.stop().contains(s)) {
        return s;
      }
    }
    return "";
  }

  /**
   * The prompt and cached-token counts of an answer's {@code usage}: {@code prompt_tokens} (the
   * request's length when absent) and {@code prompt_tokens_details.cached_tokens}. A count given
   * sets {@code reported}: the server reports its cached tokens. When the count is absent (or
   * null, or its details are), it is 0 if the answer has a {@code usage} and {@code reported}
   * is set, since such a server leaves the details out only for 0 (vLLM with
   * {@code --enable-prompt-tokens-details} does); else -1, unknown (a server that has not
   * reported a count, or an answer without a {@code usage}).
   *
   * @param reported whether the server has reported a count in an earlier answer; set here
   *     when this one has one
   */
  static int[] usage(Object root, InferenceRequest request, AtomicBoolean reported) {
    Object promptTokens = Json.path(root, "usage", "prompt_tokens");
    int prompt = promptTokens == null ? request.length() : Json.asInt(promptTokens, "usage.prompt_tokens");
    if (prompt < 0) {
      throw new Json.JsonException("usage.prompt_tokens is negative: " + prompt, -1);
    }
    Object cachedValue = Json.path(root, "usage", "prompt_tokens_details", "cached_tokens");
    if (cachedValue == null) {
      // a server that reports the count leaves it out for 0; a missing usage says nothing
      return new int[] {prompt, Json.path(root, "usage") != null && reported.get() ? 0 : -1};
    }
    int cached = Json.asInt(cachedValue, "usage.prompt_tokens_details.cached_tokens");
    if (cached < -1 || cached > prompt) {
      throw new Json.JsonException(
          "usage.prompt_tokens_details.cached_tokens " + cached + " is outside [0, prompt_tokens=" + prompt + "]", -1);
    }
    if (cached >= 0 && !reported.get()) {
      reported.set(true);
    }
    return new int[] {prompt, cached};
  }

  /**
   * An error answer's body, for its message: without the API key ({@link SecretText}), printable
   * and at most 300 chars.
   */
  private String errorDetail(byte[] body) {
    if (body == null) {
      return ": (a body larger than " + maxResponseBytes + " bytes)";
    }
    if (body.length == 0) {
      return "";
    }
    // 300 chars take at most 1,200 bytes; read on past them by the key's longest form, so that
    // a key the cut falls in is still taken out whole
    int read = Math.min(body.length, 1_200 + SecretText.longestForm(apiKey));
    return ": " + CompletionStream.shownServerText(
        new String(body, 0, read, StandardCharsets.UTF_8), apiKey);
  }

  /**
   * This adapter's outstanding requests: up to {@link Builder#slots} as running, the rest as
   * waiting in the server's queue.
   */
  @Override
  public EngineLoad load() {
    int outstanding = Math.max(0, Math.min(inFlight.get(), maxInFlight));
    int running = Math.min(outstanding, slots);
    return new EngineLoad(outstanding - running, running);
  }

  /**
   * What this adapter holds now and has refused since it was built: its requests outstanding at
   * the server against {@link Builder#maxInFlight}, and the heap its answers hold against
   * {@link Builder#answerBudget}; and the requests and probes it sent a second time on a new
   * connection. Each figure is read on its own (no lock is held across them),
   * so a snapshot taken while requests start and end may mix moments; cheap enough to read on
   * every scrape.
   *
   * @return a snapshot of the counters
   */
  public Stats stats() {
    long budget = answers.capacity();
    return new Stats(Math.max(0, Math.min(inFlight.get(), maxInFlight)), maxInFlight,
        inFlightRefused.sum(), budget, budget - answers.available(), answerBudgetRefused.sum(),
        connectionRetries.sum());
  }

  /**
   * The adapter's own limits and what they refused ({@link #stats()}).
   *
   * @param inFlight requests outstanding at the server now: sent, or being sent, and not ended;
   *     at most {@code maxInFlight}
   * @param maxInFlight the most requests outstanding at once ({@link Builder#maxInFlight})
   * @param inFlightRefused requests refused at once, nothing sent, because {@code maxInFlight}
   *     were outstanding (an {@link EngineBusyException}), each counted once
   * @param answerBudgetBytes the heap the answers being read and parsed may hold at once, in
   *     bytes ({@link Builder#answerBudget})
   * @param answerBudgetHeldBytes the heap those answers hold now, in bytes: their bodies or event
   *     streams, texts, parses and streamed output, taken from the answer budget
   * @param answerBudgetRefused requests failed because their answer could not get its next share
   *     of the answer budget in time (the retryable failure naming {@code answerBudget}), each
   *     counted once
   * @param connectionRetries requests and health probes sent a second time, at once, on a new
   *     connection, because their first try failed with an I/O error before any answer came
   *     (the server closed the pooled connection as the request was written to it, see
   *     "Keep-alive" in the class comment); each counted once
   */
  public record Stats(
      int inFlight,
      int maxInFlight,
      long inFlightRefused,
      long answerBudgetBytes,
      long answerBudgetHeldBytes,
      long answerBudgetRefused,
      long connectionRetries) {

    /**
     * The stats without {@code connectionRetries} (0), the shape they had before it.
     *
     * @param inFlight requests outstanding now
     * @param maxInFlight the most requests outstanding at once
     * @param inFlightRefused requests refused at {@code maxInFlight}
     * @param answerBudgetBytes the answer budget, in bytes
     * @param answerBudgetHeldBytes the heap the answers hold now, in bytes
     * @param answerBudgetRefused requests failed for their answer's share of the budget
     */
    public Stats(int inFlight, int maxInFlight, long inFlightRefused, long answerBudgetBytes,
        long answerBudgetHeldBytes, long answerBudgetRefused) {
      this(inFlight, maxInFlight, inFlightRefused, answerBudgetBytes, answerBudgetHeldBytes,
          answerBudgetRefused, 0);
    }
  }

  /**
   * The requests the server runs at once, as configured.
   *
   * @return {@link Builder#slots}
   */
  public int slots() {
    return slots;
  }

  /**
   * The requests outstanding at once at most, as configured.
   *
   * @return {@link Builder#maxInFlight}
   */
  public int maxInFlight() {
    return maxInFlight;
  }

  /**
   * Fails the request's future with a non-retryable error and ends its HTTP exchange: the
   * client closes the connection (the completions API has no cancel call), and vLLM, which
   * notices a client that disconnects, aborts the request instead of generating on for nobody.
   * A streamed request's listener is closed first: a piece being given when this is called
   * ends before the future completes (this call waits for it), and none follows. Every request
   * in flight with that id is cancelled (ids are unique per origin only).
   */
  @Override
  public void cancel(String requestId) {
    for (Running r : running.of(requestId)) {
      r.fail(new EngineException("request " + requestId + " cancelled", false));
    }
  }

  /**
   * True when built with {@link Builder#kvEvents}: the node then runs its tree in engine-driven
   * mode, fed by vLLM's KV events.
   */
  @Override
  public boolean publishesCacheEvents() {
    return kvEvents != null;
  }

  /**
   * Starts the subscription to vLLM's KV events, delivering them to {@code listener}. Called
   * once by the node when {@link #publishesCacheEvents()} is true; does nothing otherwise.
   *
   * @throws IllegalStateException if called twice ("the cache event listener is already set"),
   *     after {@link #close()}, or if the
   *     {@link Builder#kvEvents} builder is incomplete (it names what is missing)
   * @throws IllegalArgumentException if a limit or timeout of the {@link Builder#kvEvents}
   *     builder is out of range (it names the setting): its {@code build()} is called here, not
   *     by this engine's {@link Builder#build()}
   */
  @Override
  public synchronized void setCacheEventListener(CacheEventListener listener) {
    Objects.requireNonNull(listener, "listener");
    if (kvEvents == null) {
      return;
    }
    if (closed) {
      throw new IllegalStateException("engine closed");
    }
    if (subscriber != null) {
      throw new IllegalStateException("the cache event listener is already set");
    }
    VllmKvEventSubscriber s = kvEvents.listener(listener).build();
    s.start();
    subscriber = s;
  }

  /**
   * Tells the KV-event subscriber, if there is one, that the server answered a request in full,
   * so that it notices a stream that went silent while the server serves ({@link
   * VllmKvEventSubscriber#requestCompleted}). Never throws: the answer is delivered whatever
   * happens here.
   */
  private void requestCompleted(EngineResult r) {
    VllmKvEventSubscriber s = subscriber;
    if (s == null) {
      return;
    }
    try {
      s.requestCompleted(r.promptTokens(), r.outputTokens().length, r.cachedPromptTokens());
    } catch (RuntimeException e) {
      log.debug("the KV-event subscriber failed on a completed request", e);
    } catch (Error e) {
      log.warn("the KV-event subscriber failed on a completed request; the answer is delivered",
          e);
    }
  }

  /**
   * The subscription to vLLM's KV events, once started.
   *
   * @return the subscriber (for its {@code stats()} and {@code receiverStats()}), or null
   *     without {@link Builder#kvEvents} or before the node set its listener
   */
  public synchronized VllmKvEventSubscriber kvEventSubscriber() {
    return subscriber;
  }

  /**
   * Has the node told when the server's whole cache is gone: its connection refused after it
   * had answered (a completion or a health probe, any status). Nothing listens where the
   * server did, so its process went away and its cache with it; a server started again starts
   * empty. {@code listener} is called once for that, on the thread that finds the connection
   * refused (the HTTP client's, or one calling {@link #execute}), before the request's
   * failure completes; not again until the server has answered again. The node sets it when its
   * tree is self-managed, and clears the tree. The adapter also forgets that the server
   * reports its cached tokens ({@link #usage}): the new process may run without that option.
   * A listener that throws is logged and changes nothing else.
   *
   * <p>Only a refused connection counts: a connection not made within {@code connectTimeout},
   * an address that does not resolve, a connection reset or a stream cut (a proxy, the network)
   * do not. JDK 17's client tries a connection twice and reports any failure of both tries as
   * one {@link ConnectException}, so a server on another host that the network cannot reach
   * ("no route to host") counts too; a server on the node's own host, as the deployment has
   * it, is refused only when nothing listens. A server restarted between two requests, with
   * none refused, is not seen.
   *
   * @param listener called with what was seen, for the node's log
   */
  @Override
  public void setCacheLossListener(Consumer<String> listener) {
    this.cacheLossListener = Objects.requireNonNull(listener, "listener");
  }

  /** The server answered: a later refused connection means it went away. */
  private void serverAnswered() {
    if (!answered.get()) {
      answered.set(true);
    }
  }

  /**
   * Whether {@code c}, a failure of a request or probe before any answer, is a refused
   * connection: a {@link ConnectException} (so never a connect timeout, an
   * {@link HttpConnectTimeoutException}), but for one whose address did not resolve.
   */
  static boolean refused(Throwable c) {
    return c instanceof ConnectException
        && !(c.getCause() instanceof UnresolvedAddressException);
  }

  /**
   * The server's connection was refused ({@code c}): if it had answered since it was last found
   * gone, its process went away, and its cache with it ({@link #setCacheLossListener}).
   */
  private void serverGone(Throwable c) {
    if (!answered.compareAndSet(true, false)) {
      return; // not answered since: this loss was told, or nothing was cached since the start
    }
    cachedTokensReported.set(false);
    Consumer<String> listener = cacheLossListener;
    if (listener == null) {
      return;
    }
    try {
      listener.accept("the server at " + completionsUri + " refused the connection after it had "
          + "answered (" + c + "): its process went away");
    } catch (Throwable e) { // an Error too: the request's failure is given all the same
      log.warn("the cache loss listener of the engine for {} failed", completionsUri, e);
    }
  }

  /**
   * Stops the KV-event subscription, if any (its thread ends), and the HTTP client's selector
   * thread: JDK 17's client cannot be closed, and the thread ran until the client was garbage
   * collected. Requests still in flight fail at once with a retryable {@link EngineException},
   * their connections closed (close the engine once nothing runs on it, as the node does after
   * its stop); those made afterwards fail at once, and {@link #health()} is false. Health probes
   * in flight end at once too, their connections closed. Each of these is done whatever an
   * earlier one throws (the subscriber's {@code close()}, an {@link Error} too); the first throw
   * is then thrown on, the later ones suppressed in it. Idempotent.
   */
  @Override
  public void close() {
    VllmKvEventSubscriber s;
    synchronized (this) {
      closed = true;
      s = subscriber;
    }
    // each part is closed whatever an earlier one throws (an Error too); the first throw is
    // thrown on once all are, the later ones suppressed in it
    Throwable first = null;
    if (s != null) {
      first = closePart(s::close, first);
    }
    // the client's selector thread, which close() ends, also keeps the client's timeouts: an
    // exchange whose answer's headers had not come would never complete, whatever the
    // requestTimeout; failed here, each closes its connection before the client ends
    first = closePart(() -> running.forEach(r -> r.fail(closedFailure(r.id()))), first);
    // and so would a probe's: cancelled, it completes (-1 if its headers had not come) and
    // closes its connection, rather than at its requestTimeout
    first = closePart(() -> probes.forEach(p -> p.cancel(true)), first);
    first = closePart(client::end, first);
    if (first != null) {
      Throwables.throwIfUnchecked(first);
      throw new IllegalStateException("closing the engine for " + completionsUri + " failed",
          first);
    }
  }

  /**
   * Runs one part of {@link #close()}: returns {@code first}, or what the part threw if it is
   * the first throw, any later one suppressed in the first.
   */
  private static Throwable closePart(Runnable part, Throwable first) {
    try {
      part.run();
    } catch (Throwable e) {
      if (first == null) {
        return e;
      }
      if (first != e) {
        first.addSuppressed(e);
      }
    }
    return first;
  }

  /** The failure of a request made on, or in flight at the close of, a closed engine. */
  private EngineException closedFailure(String requestId) {
    return new EngineException("request " + requestId + ": the engine for " + completionsUri
        + " is closed", true);
  }

  /**
   * Probes the server: {@code GET /health} (vLLM, SGLang, llama.cpp), falling back to
   * {@code GET /v1/models} when {@code /health} is not found, and followed by it when
   * {@code /health} answers 2xx, to see a key refused there ({@link #healthStatus()}). Completes
   * with true if the server answered 2xx, false otherwise (never exceptionally), as soon as the
   * answers' headers have come, each within {@code requestTimeout}: a body that then stalls
   * does not hold it (its connection is closed at {@code requestTimeout}).
   *
   * @return a future of whether the server answered 2xx; never completes exceptionally
   */
  public CompletableFuture<Boolean> health() {
    return healthStatus().thenApply(status -> status >= 200 && status < 300);
  }

  /**
   * Probes the server as {@link #health()} does, and tells what it answered: the HTTP status
   * of {@code GET /health}, or of {@code GET /v1/models} when {@code /health} is not found.
   * A {@code /health} that answers 2xx is followed by {@code GET /v1/models}, whose 401 or 403
   * is then the status: vLLM answers its health check without its {@code --api-key} and guards
   * only {@code /v1}, where the completions go, so a key it refuses showed as healthy. Any other
   * answer of {@code /v1/models} to that second probe (404 on a server without it, a failure, no
   * answer) leaves {@code /health}'s status. That tells a server that refuses this engine's
   * {@link Builder#apiKey} (401 or 403: a wrong key, or none) or fails (5xx) from one that does
   * not answer at all.
   *
   * @return a future of the status, or of -1 when no answer came (the server unreachable, no
   *     headers within {@code requestTimeout}, the engine closed, or the probe not sent: the
   *     HTTP client, or the host's proxy selector it asks, threw, an {@link Error} too); never
   *     completes exceptionally, and the call throws nothing
   */
  public CompletableFuture<Integer> healthStatus() {
    if (closed) {
      return CompletableFuture.completedFuture(-1);
    }
    return probe(healthUri)
        .thenCompose(status -> {
          if (status == 404) {
            return probe(modelsUri);
          }
          if (status < 200 || status >= 300) {
            return CompletableFuture.completedFuture(status);
          }
          // an open health check says nothing of the key: ask a path the key guards
          return probe(modelsUri)
              .thenApply(models -> models == 401 || models == 403 ? models : status)
              .exceptionally(e -> status);
        })
        .exceptionally(e -> -1);
  }

  /**
   * The status of {@code GET uri}, as soon as the answer's headers have come (the HTTP
   * client's timeout bounds the wait for them); the body is discarded, and its connection
   * closed if it has not ended within {@code requestTimeout}.
   */
  private CompletableFuture<Integer> probe(URI uri) {
    HttpRequest.Builder hb = HttpRequest.newBuilder(uri).timeout(requestTimeout).GET();
    if (apiKey != null) {
      hb.header("Authorization", "Bearer " + apiKey);
    }
    CompletableFuture<Integer> status = new CompletableFuture<>();
    CompletableFuture<HttpResponse<Void>> call;
    try {
      call = send(hb.build(), info -> {
        serverAnswered();
        status.complete(info.statusCode());
        return HttpResponse.BodySubscribers.discarding();
      }, () -> true);
    } catch (Throwable e) { // a client ended by close(); an Error (of the host's proxy selector,
      // say, which the client asks as it sends) too, a VirtualMachineError included: no answer
      return CompletableFuture.failedFuture(e);
    }
    probes.add(call);
    call.whenComplete((r, e) -> probes.remove(call));
    if (closed) {
      call.cancel(true);
    }
    CompletableFuture<Void> deadline = new CompletableFuture<>();
    deadline.orTimeout(requestTimeoutNanos, TimeUnit.NANOSECONDS).whenComplete((v, e) -> {
      if (e instanceof TimeoutException) {
        call.cancel(true); // a body that has not ended: the connection is closed
      }
    });
    call.whenComplete((r, e) -> {
      deadline.complete(null);
      if (e != null) {
        Throwable c = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
        if (refused(c)) {
          serverGone(c);
        }
        status.completeExceptionally(e);
      }
    });
    return status;
  }

  /** The largest KV-cache size {@link #cacheSize} takes, in tokens: 2^36 (68,719,476,736). */
  public static final long MAX_CACHE_SIZE_TOKENS = 1L << 36;
  /** How much of each answer {@link #cacheSize} reads at most: 4 MiB. */
  static final int MAX_CACHE_SIZE_ANSWER_BYTES = 4 << 20;

  /**
   * What {@link #cacheSize} found.
   *
   * @param tokens the server's KV-cache size in tokens, from 1 to {@link
   *     #MAX_CACHE_SIZE_TOKENS}; 0 when none was found
   * @param detail where the size was read and how (the endpoint, the metric or member, and for
   *     vLLM its block size and blocks), or, when none was found, what each endpoint answered
   */
  public record CacheSize(long tokens, String detail) {
    /**
     * Checks the fields.
     *
     * @throws NullPointerException if {@code detail} is null
     * @throws IllegalArgumentException if {@code tokens} is outside 0 to {@link
     *     #MAX_CACHE_SIZE_TOKENS}
     */
    public CacheSize {
      Objects.requireNonNull(detail, "detail");
      if (tokens < 0 || tokens > MAX_CACHE_SIZE_TOKENS) {
        throw new IllegalArgumentException("tokens must be 0 to " + MAX_CACHE_SIZE_TOKENS
            + ", was " + tokens);
      }
    }
  }

  /**
   * Asks the server how many tokens its KV cache holds, as vLLM and SGLang publish it, for
   * {@link io.github.prefixrouter.RouterConfig.Builder#treeCapacityTokens}: both at once,
   * {@code GET /metrics} (vLLM's Prometheus gauge {@code vllm:cache_config_info}, whose labels
   * {@code block_size} times {@code num_gpu_blocks} is the size; with several engines behind
   * the server, a sample each, the sum) and {@code GET /get_server_info} (SGLang's
   * {@code max_total_num_tokens}), each with the {@link Builder#apiKey} as the other requests.
   * vLLM's answer is taken when both give a size. Each answer is read up to 4 MiB: of
   * {@code /metrics} only the lines within its first 4 MiB count, a larger
   * {@code /get_server_info} is refused. A size must be a whole number from 1 to {@link
   * #MAX_CACHE_SIZE_TOKENS}; anything else (an error status, an error page, a value absent,
   * not a number, zero, negative or larger, a malformed line) gives none from that endpoint.
   * Whatever has not been answered when {@code wait} has passed is given up, its connection
   * closed; so is everything when the engine closes.
   *
   * @param wait how long the answers may take, their bodies included
   * @return a future of what was found, complete within {@code wait} (plus the time to read
   *     what came); never completes exceptionally
   * @throws NullPointerException if {@code wait} is null
   */
  public CompletableFuture<CacheSize> cacheSize(Duration wait) {
    Objects.requireNonNull(wait, "wait");
    if (closed) {
      return CompletableFuture.completedFuture(new CacheSize(0, "the engine is closed"));
    }
    long waitNanos = Durations.saturatedNanos(wait);
    CompletableFuture<HttpResponse<CacheSizeAnswers.Prefix>> metrics =
        ask(metricsUri, info -> CacheSizeAnswers.prefix(MAX_CACHE_SIZE_ANSWER_BYTES), waitNanos);
    CompletableFuture<HttpResponse<byte[]>> serverInfo = ask(serverInfoUri,
        info -> CappedBody.orNull(info, MAX_CACHE_SIZE_ANSWER_BYTES), waitNanos);
    return CompletableFuture.allOf(metrics, serverInfo)
        .handle((v, e) -> null)
        .completeOnTimeout(null, waitNanos, TimeUnit.NANOSECONDS)
        .thenApply(v -> {
          // what has not ended by now is given up, its connection closed
          boolean[] ended = {metrics.isDone(), serverInfo.isDone()};
          metrics.cancel(true);
          serverInfo.cancel(true);
          String[] found = new String[2];
          CacheSize fromMetrics = size(metricsUri, metrics, ended, wait, found, 0, r ->
              CacheSizeAnswers.fromPrometheus(
                  new String(r.body().bytes(), StandardCharsets.UTF_8), r.body().cut()));
          if (fromMetrics != null) {
            return new CacheSize(fromMetrics.tokens(), CacheSizeAnswers.VLLM_METRIC + " at "
                + metricsUri + " (" + fromMetrics.detail() + ")");
          }
          CacheSize fromInfo = size(serverInfoUri, serverInfo, ended, wait, found, 1, r -> {
            if (r.body() == null) {
              throw new CacheSizeAnswers.Refused("the answer is larger than "
                  + MAX_CACHE_SIZE_ANSWER_BYTES + " bytes");
            }
            return new CacheSize(CacheSizeAnswers.fromServerInfo(
                new String(r.body(), StandardCharsets.UTF_8)), "");
          });
          if (fromInfo != null) {
            return new CacheSize(fromInfo.tokens(), "max_total_num_tokens at " + serverInfoUri);
          }
          return new CacheSize(0, found[0] + "; " + found[1]);
        })
        .exceptionally(e -> new CacheSize(0, "the questions failed: " + e));
  }

  /** How {@link #cacheSize} reads one answer's size. */
  private interface SizeReader<T> {
    CacheSize read(HttpResponse<T> answer) throws CacheSizeAnswers.Refused;
  }

  /**
   * The size the {@code k}th of {@link #cacheSize}'s questions found (at least 1 token), or
   * null, with {@code found[k]} saying why there is none; {@code ended[k]}: whether it had ended
   * when its wait was over.
   */
  private static <T> CacheSize size(URI uri, CompletableFuture<HttpResponse<T>> call,
      boolean[] ended, Duration wait, String[] found, int k, SizeReader<T> reader) {
    String where = "GET " + uri + ": ";
    if (!ended[k]) {
      found[k] = where + "no answer within " + wait.toMillis() + " ms";
      return null;
    }
    HttpResponse<T> r;
    try {
      r = call.join();
    } catch (CompletionException | java.util.concurrent.CancellationException e) {
      Throwable c = e.getCause() != null ? e.getCause() : e;
      found[k] = where + (c instanceof ConnectException ? "connection refused"
          : c instanceof HttpTimeoutException ? "no answer within " + wait.toMillis() + " ms"
          : ShortText.prefix(String.valueOf(c), 200));
      return null;
    }
    if (r.statusCode() != 200) {
      found[k] = where + "HTTP " + r.statusCode();
      return null;
    }
    try {
      CacheSize read = reader.read(r);
      if (read.tokens() < 1) {
        throw new CacheSizeAnswers.Refused("no size");
      }
      return read;
    } catch (CacheSizeAnswers.Refused e) {
      found[k] = where + e.getMessage();
      return null;
    } catch (RuntimeException e) { // the heap bound of the parse, say
      found[k] = where + ShortText.prefix(String.valueOf(e), 200);
      return null;
    }
  }

  /**
   * Sends {@code GET uri} for {@link #cacheSize}, with the API key, within {@code waitNanos};
   * tracked in {@link #probes} until it ends, so that {@link #close()} ends it. Never throws: a
   * request that cannot be sent is a failed future.
   */
  private <T> CompletableFuture<HttpResponse<T>> ask(URI uri, HttpResponse.BodyHandler<T> handler,
      long waitNanos) {
    HttpRequest.Builder hb = HttpRequest.newBuilder(uri)
        .timeout(Duration.ofNanos(Math.max(1, waitNanos))).GET();
    if (apiKey != null) {
      hb.header("Authorization", "Bearer " + apiKey);
    }
    CompletableFuture<HttpResponse<T>> call;
    try {
      call = client.http().sendAsync(hb.build(), handler);
    } catch (Throwable e) { // a client ended by close(); the host's proxy selector's Error too
      return CompletableFuture.failedFuture(e);
    }
    probes.add(call);
    call.whenComplete((r, e) -> probes.remove(call));
    if (closed) {
      call.cancel(true);
    }
    return call;
  }

  /**
   * The completions endpoint this engine posts to.
   *
   * @return the {@code <base>/v1/completions} URI
   */
  public URI completionsUri() {
    return completionsUri;
  }

  @Override
  public String toString() {
    return "OpenAiCompatibleEngine{" + completionsUri + (model != null ? ", model=" + model : "") + "}";
  }

  /** Configures an {@link OpenAiCompatibleEngine}. */
  public static final class Builder {
    private URI baseUrl;
    private String model;
    private String apiKey;
    private Duration connectTimeout = Duration.ofSeconds(2);
    private Duration requestTimeout = DEFAULT_REQUEST_TIMEOUT;
    private Duration streamIdleTimeout = DEFAULT_STREAM_IDLE_TIMEOUT;
    private int maxResponseBytes = 8 << 20;
    private Integer maxInFlight; // null: 2 x slots
    private Integer slots; // null: 256, or maxInFlight when that is set lower
    private boolean returnTokenIds = true;
    private Long answerBudget; // null: the larger of 256 MiB and the least for maxResponseBytes
    private Executor executor;
    private VllmKvEventSubscriber.Builder kvEvents;

    private Builder() {}

    /**
     * The server's base URL, e.g. {@code http://127.0.0.1:8000} (a trailing {@code /v1} is
     * fine; an IPv6 address in brackets, {@code http://[::1]:8000}: without them {@link
     * Builder#build} refuses it saying so). Required. Without user information
     * ({@code user:password@}), which {@link Builder#build} refuses: the HTTP client sends no
     * credentials from a URL; a server's key goes in {@link #apiKey}.
     *
     * @param url the base URL
     * @return this builder
     * @throws IllegalArgumentException if {@code url} is not a URL; the message names
     *     {@code baseUrl}, what is wrong and where, and the value (its first 200 characters),
     *     or, for a value with user information, refuses that without quoting it
     */
    public Builder baseUrl(String url) {
      if (url == null) {
        this.baseUrl = null;
        return this;
      }
      try {
        this.baseUrl = new URI(url);
      } catch (URISyntaxException e) {
        String redacted = UrlUserInfo.redacted(url);
        if (redacted != null) {
          // user information, and no URL either: the parse error, and its cause, would quote
          // the password; refused as build() refuses user information, without either
          throw userInformation(redacted);
        }
        // URI's own message names no setting and carries the whole value, however long
        String value = ShortText.prefix(url, 200);
        throw new IllegalArgumentException("baseUrl is not a URL: " + e.getReason()
            + (e.getIndex() >= 0 ? " at index " + e.getIndex() : "") + ": " + value
            + (value.length() < url.length() ? "..." : ""), e);
      }
      return this;
    }

    /**
     * The model name sent as {@code "model"} (vLLM and SGLang require it when serving several).
     *
     * @param model the model name
     * @return this builder
     */
    public Builder model(String model) {
      this.model = model;
      return this;
    }

    /**
     * A bearer token for servers started with an API key.
     *
     * @param apiKey the token, sent as {@code Authorization: Bearer <apiKey>}
     * @return this builder
     */
    public Builder apiKey(String apiKey) {
      this.apiKey = apiKey;
      return this;
    }

    /**
     * TCP connect timeout. Default 2 s. One beyond 2^63 ns (about 292 years) counts as 2^63 ns.
     *
     * @param d the timeout, positive
     * @return this builder
     */
    public Builder connectTimeout(Duration d) {
      this.connectTimeout = d;
      return this;
    }

    /**
     * How long to wait for an answer: for its headers and for the end of its body (a streamed
     * request's whole stream, a plain request's whole JSON body). Default 4 min (it was 60 s,
     * which cut off a chat sent without {@code max_tokens}, whose generation may run to the end
     * of the model's context; it stays below the HTTP transport's {@code maxHandlingTime}, 5 min,
     * so that a peer's forward times out here first). A request not answered by then fails with an
     * {@link EngineTimeoutException}, which the node does not try on a peer (the client API
     * answers 504): set it above the longest generation the server is to run. A timeout
     * beyond 2^63 ns (about 292 years; {@code ChronoUnit.FOREVER.getDuration()}, say) counts as
     * 2^63 ns, never reached.
     *
     * @param d the timeout, positive
     * @return this builder
     */
    public Builder requestTimeout(Duration d) {
      this.requestTimeout = d;
      return this;
    }

    /**
     * How long the server of a streamed request may send nothing, from the request's sending to
     * the end of its event stream: no byte of the answer's headers (SGLang sends them with the
     * first chunk), of a chunk, of a keep-alive comment; or, for an answer that is no event
     * stream (a plain JSON answer of a server that ignores {@code "stream"}, an error status),
     * to the end of its body. Each byte starts the bound again. A
     * stream that runs out of it fails with a retryable {@link EngineException} and its
     * connection is closed (vLLM then aborts the request), as a stream cut: the node tries it on
     * a peer, or answers an error, instead of holding the request, its slot and its client to
     * {@code requestTimeout}; a stream whose choice 0 gave its {@code finish_reason} completes
     * with its output instead. Requests not streamed have {@code requestTimeout} only.
     *
     * <p>Default 60 s. The longest silence of a healthy server is before the first chunk: the
     * wait in its queue and the prefill, which vLLM and SGLang send nothing during (a 100,000-token
     * prefill takes seconds to tens of seconds on one GPU); between chunks the server sends a
     * token per decode step, tens of ms, and a request preempted and prefilled again is silent
     * for about a prefill. A server quiet for a minute is wedged, or its queue is so deep that a
     * peer will serve sooner. Raise it for servers that queue requests longer (a
     * {@link #maxInFlight} far above {@link #slots}, long generations ahead in the queue); a bound
     * no shorter than {@link #requestTimeout} is never reached. One beyond 2^63 ns (about 292
     * years) counts as 2^63 ns.
     *
     * @param d the bound, positive
     * @return this builder
     */
    public Builder streamIdleTimeout(Duration d) {
      this.streamIdleTimeout = d;
      return this;
    }

    /**
     * Largest answer accepted, in bytes. Default 8 MiB. For a streamed request, the largest
     * line or event of the stream, and the largest output (its characters plus its tokens).
     * Parsed, an answer (or an event) may take 16 MiB and 6 bytes of heap a character of it,
     * which text and token ids never pass; one that would take more is refused.
     * A server asked for token ids (vLLM's {@code return_token_ids}) repeats the prompt's token
     * ids in its answer (a stream's first event), at up to about 8 bytes per token as JSON: a
     * limit below that for the longest prompt served fails such requests as misshapen answers.
     *
     * @param n the limit in bytes
     * @return this builder
     */
    public Builder maxResponseBytes(int n) {
      this.maxResponseBytes = n;
      return this;
    }

    /**
     * Requests outstanding at once at most (running on the server plus waiting in its queue);
     * more fail at once with an {@link EngineBusyException}, busy to the node but not counted
     * towards its {@code engineFailureLimit}: nothing of them reached the server. Default twice
     * {@link #slots}.
     *
     * @param n the limit, at least {@link #slots}
     * @return this builder
     */
    public Builder maxInFlight(int n) {
      this.maxInFlight = n;
      return this;
    }

    /**
     * Requests the server runs at once: vLLM's {@code --max-num-seqs}, SGLang's
     * {@code --max-running-requests}, llama.cpp's {@code --parallel}. Outstanding requests
     * beyond it are reported as the engine's queue depth ({@link #load()}), which the node's
     * push-back watermarks and routing cost use. Default 256 (vLLM's default on most GPUs), or
     * {@link #maxInFlight} if that is set lower.
     *
     * @param n the slots, at least 1
     * @return this builder
     */
    public Builder slots(int n) {
      this.slots = n;
      return this;
    }

    /**
     * The heap the answers being read and parsed may hold at once, all requests together, in
     * bytes. Each answer takes its share as it needs it: its body as its bytes arrive, in steps
     * from 64 KiB, each twice the last, up to its {@code Content-Length} or
     * {@link #maxResponseBytes} (so a server that declares a large body and sends little holds
     * little), then two bytes per byte of it for its text, then its parse's estimate as the
     * parse charges it. A streamed answer's event stream takes its share before its buffers
     * grow: its line, its event's data and their text, each chunk's parse (given back once the
     * chunk is read) and the output. An answer gives all of it back once the request ends,
     * however it ends (an
     * answer, a failure, {@link #cancel}, {@link #close()}, {@code requestTimeout}). An answer
     * whose next step does not come free waits while other answers give theirs back, and fails
     * with a retryable {@link EngineException} once none has for 1 s (or
     * {@code requestTimeout} if shorter): the node then tries the request on a peer, and does
     * not count the failure towards its {@code engineFailureLimit} (the node is short of heap,
     * its engine is not failing), so a load of large answers never makes it route around a
     * healthy engine. Without
     * it, only {@link #maxInFlight} bounded that heap, at {@link #maxInFlight} times an answer
     * at its limits. Default 256 MiB, or the least allowed if that is more.
     *
     * @param bytes the budget, at least {@link #minAnswerBudget} of {@link #maxResponseBytes}
     *     (what one answer at its limits takes, so that one answer alone always passes)
     * @return this builder
     */
    public Builder answerBudget(long bytes) {
      this.answerBudget = bytes;
      return this;
    }

    /**
     * The least {@link #answerBudget} allowed with answers of at most {@code maxResponseBytes}:
     * what one answer at its limits can take, so that one answer alone always passes, 16 MiB and
     * 22 bytes per byte of {@code maxResponseBytes}, 192 MiB for the default 8 MiB. A plain
     * answer takes at most 16 MiB and 9 bytes per byte: its body, its text (two bytes per byte of
     * it) and its parse ({@link AnswerHeap#maxParsedBytes}: 16 MiB and 6 bytes a character); an
     * event stream more, its event's data and the copy handed to its parse, and its output,
     * each in a buffer up to twice what it holds.
     *
     * @param maxResponseBytes the largest answer, in bytes
     * @return the least budget, in bytes
     */
    public static long minAnswerBudget(int maxResponseBytes) {
      return AnswerHeap.maxParsedBytes(maxResponseBytes) + 16L * maxResponseBytes;
    }

    long resolvedAnswerBudget() {
      if (answerBudget != null) {
        return answerBudget;
      }
      return Math.max(DEFAULT_ANSWER_BUDGET, minAnswerBudget(maxResponseBytes));
    }

    int resolvedSlots() {
      if (slots != null) {
        return slots;
      }
      return maxInFlight != null ? Math.min(256, maxInFlight) : 256;
    }

    int resolvedMaxInFlight() {
      if (maxInFlight != null) {
        return maxInFlight;
      }
      return (int) Math.min(Integer.MAX_VALUE, 2L * resolvedSlots());
    }

    /**
     * Whether to ask for generated token ids ({@code "return_token_ids": true}), in the answer
     * or in each streamed chunk. Default true.
     *
     * @param on false for servers that reject the field
     * @return this builder
     */
    public Builder returnTokenIds(boolean on) {
      this.returnTokenIds = on;
      return this;
    }

    /**
     * Executor for the HTTP client's work (default: the JDK client's own pool). A request whose
     * deadline passes is failed on it too; when it refuses that work (or throws anything else,
     * an {@link Error} too, as it is handed it), on the JDK timer's thread.
     *
     * @param executor the executor, owned by the caller
     * @return this builder
     */
    public Builder executor(Executor executor) {
      this.executor = executor;
      return this;
    }

    /**
     * Mirror the server's cache exactly from vLLM's KV-event stream: the engine then reports
     * {@link #publishesCacheEvents()} and, when the node hands it its listener, builds and starts
     * a subscriber from {@code events} (the engine sets its listener; the builder is the
     * engine's from then on). Its settings are checked then, not by {@link #build()}: an
     * incomplete or invalid {@code events} fails the node's build. Give the endpoint, the replay endpoint if vLLM has one, and the
     * node's block size, which must be vLLM's {@code --block-size}:
     *
     * <pre>{@code
     * .kvEvents(VllmKvEventSubscriber.builder()
     *     .endpoint("tcp://127.0.0.1:5557")
     *     .replayEndpoint("tcp://127.0.0.1:5558")
     *     .blockSize(config.blockSize()))
     * }</pre>
     *
     * @param events the subscriber's settings, or null for none (the default)
     * @return this builder
     */
    public Builder kvEvents(VllmKvEventSubscriber.Builder events) {
      this.kvEvents = events;
      return this;
    }

    /**
     * The refusal of a base URL with user information, naming it as {@code redacted}
     * ({@code scheme://...@host:port/path}): never the user or the password.
     */
    private static IllegalArgumentException userInformation(String redacted) {
      return new IllegalArgumentException("baseUrl must not carry user information "
          + "(user:password@): the HTTP client sends no credentials from a URL; give the "
          + "server's API key with apiKey (sent as a bearer token), was " + redacted);
    }

    /**
     * Validates and builds; sets {@code jdk.httpclient.keepalive.timeout} to 20 if the host has
     * not set it (see "Keep-alive" above: no effect on a JVM that has built a JDK HTTP client
     * already).
     *
     * @return the engine
     * @throws IllegalArgumentException naming the first invalid setting
     */
    public OpenAiCompatibleEngine build() {
      if (baseUrl == null) {
        throw new IllegalArgumentException("baseUrl is required, e.g. http://127.0.0.1:8000");
      }
      String rawAuthority = baseUrl.getRawAuthority();
      if (rawAuthority != null && rawAuthority.contains("@")) {
        // the JDK's HTTP client sends nothing of it, and it would stand in every message
        // naming the server: the password too
        throw userInformation(baseUrl.getScheme() + "://...@"
            + rawAuthority.substring(rawAuthority.lastIndexOf('@') + 1)
            + (baseUrl.getRawPath() == null ? "" : baseUrl.getRawPath()));
      }
      String scheme = baseUrl.getScheme();
      if (!"http".equals(scheme) && !"https".equals(scheme)) {
        throw new IllegalArgumentException("baseUrl must be an http(s) URL with a host, was " + baseUrl);
      }
      if (baseUrl.getHost() == null) {
        // no user information: refused above
        String authority = rawAuthority == null ? "" : rawAuthority;
        if (!authority.startsWith("[") && authority.indexOf(':') != authority.lastIndexOf(':')) {
          // java.net.URI reads no host in http://::1:8000
          throw new IllegalArgumentException("baseUrl has an IPv6 address without brackets, whose "
              + "last part cannot be told from a port: write it in brackets, as in "
              + "http://[::1]:8000, was " + baseUrl);
        }
        throw new IllegalArgumentException("baseUrl needs a host an HTTP client can use (letters, "
            + "digits, hyphens and dots, or an IP address, IPv6 in brackets: http://[::1]:8000), "
            + "was " + baseUrl);
      }
      if (baseUrl.getPort() != -1 && (baseUrl.getPort() < 1 || baseUrl.getPort() > 65535)) {
        throw new IllegalArgumentException("baseUrl's port must be 1 to 65535, was " + baseUrl);
      }
      if (baseUrl.getQuery() != null || baseUrl.getFragment() != null) {
        throw new IllegalArgumentException("baseUrl must not have a query or fragment, was " + baseUrl);
      }
      if (connectTimeout == null || connectTimeout.isNegative() || connectTimeout.isZero()) {
        throw new IllegalArgumentException("connectTimeout must be positive, was " + connectTimeout);
      }
      if (requestTimeout == null || requestTimeout.isNegative() || requestTimeout.isZero()) {
        throw new IllegalArgumentException("requestTimeout must be positive, was " + requestTimeout);
      }
      if (streamIdleTimeout == null || streamIdleTimeout.isNegative() || streamIdleTimeout.isZero()) {
        throw new IllegalArgumentException("streamIdleTimeout must be positive, was " + streamIdleTimeout);
      }
      if (maxResponseBytes < 1024) {
        throw new IllegalArgumentException("maxResponseBytes must be at least 1024, was " + maxResponseBytes);
      }
      if (answerBudget != null && answerBudget < minAnswerBudget(maxResponseBytes)) {
        throw new IllegalArgumentException("answerBudget must be at least "
            + minAnswerBudget(maxResponseBytes) + " bytes with maxResponseBytes "
            + maxResponseBytes + " (one answer at its limits: its body or event stream, its "
            + "text, its parse and its output), was " + answerBudget);
      }
      if (slots != null && slots < 1) {
        throw new IllegalArgumentException("slots must be at least 1, was " + slots);
      }
      if (maxInFlight != null && maxInFlight < 1) {
        throw new IllegalArgumentException("maxInFlight must be at least 1, was " + maxInFlight);
      }
      if (resolvedMaxInFlight() < resolvedSlots()) {
        throw new IllegalArgumentException("maxInFlight (" + resolvedMaxInFlight()
            + ") must be at least slots (" + resolvedSlots() + ")");
      }
      if (apiKey != null && (apiKey.isEmpty() || apiKey.chars().anyMatch(c -> c < 0x21 || c > 0x7e))) {
        throw new IllegalArgumentException("apiKey must be non-empty printable ASCII without spaces");
      }
      return new OpenAiCompatibleEngine(this);
    }
  }
}
