package io.github.prefixrouter.server;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsExchange;
import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.GossipStats;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeNotRunningException;
import io.github.prefixrouter.OutputDivergedException;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.internal.AnswerBudgetException;
import io.github.prefixrouter.internal.CountedFailureLog;
import io.github.prefixrouter.internal.PromptArrays;
import io.github.prefixrouter.internal.ShortText;
import io.github.prefixrouter.internal.gossip.GossipEngine;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.internal.tls.CertificateNodeIds;
import io.github.prefixrouter.internal.stop.StopMatcher;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineTimeoutException;
import io.github.prefixrouter.spi.InvalidRequestException;
import java.io.IOException;
import java.io.OutputStream;
import io.github.prefixrouter.internal.wire.BodyBudget;
import io.github.prefixrouter.internal.wire.InboundReaders;
import io.github.prefixrouter.internal.wire.IoDeadline;
import io.github.prefixrouter.internal.wire.JdkHttpServers;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntSupplier;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import javax.net.ssl.SSLContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The small client-facing HTTP API of a {@link NodeMain} process.
 *
 * <ul>
 *   <li>{@code POST /v1/route/completions} with
 *       {@code {"id": "...", "prompt": [token ids], "max_tokens": 1, "temperature": 0,
 *       "top_p": 1, "seed": 0, "model": "sql-lora", "cache_salt": "tenant-1", "stream": false,
 *       "stop_token_ids": [2]}} (all but
 *       {@code prompt} optional; a key whose value is {@code null} is absent) submits one request to the node and answers {@code {"id", "served_by", "forwarded", "attempts", "fallback",
 *       "token_ids", "text", "prompt_tokens", "cached_tokens", "reason"}}, its
 *       {@code token_ids} (whole or streamed) ending after the first stop token id. Its
 *       {@code id} is the client's; the node gets the request under an id the endpoint makes
 *       (the node's id, its run and a counter: {@link #nextRequestId}), as for a request
 *       without one, so that requests of clients that chose the same id, or of the node's
 *       earlier run, never meet at a peer or an engine. 400 for a bad request
 *       (the message says what; a key not in {@link #REQUEST_KEYS} is one), 413 for a body
 *       above 8 MiB; 503 with {@code Retry-After} when the engines that could serve
 *       it are busy (the local one at capacity and no peer took it: none was eligible, or each
 *       one tried pushed back, failed retryably, timed out, could not be reached or was not sent
 *       to: this node's limit of requests in flight to it, or a request too large for the link),
 *       or this node had no heap to read its engine's answer and no peer took the request (the
 *       engine's answer budget held by other answers: {@link AnswerBudgetException}),
 *       when too many client requests are in flight here, or the heap given to the bodies being read is held
 *       by other requests (or too many bodies from the client's address are
 *       still arriving), and (without {@code Retry-After}) when the node is
 *       not running: the client should try again, here later or at another node; 400 when the
 *       engine refused the request as invalid ({@link InvalidRequestException}: a prompt
 *       beyond the model's context, say; the message is the engine's), which no node would
 *       serve; 504 when the engine did not answer in time ({@link EngineTimeoutException}), not
 *       tried on peers; 502 when the request failed everywhere otherwise, or the node's
 *       {@code submit} threw or gave no future.
 *   <li>With {@code "stream": true} (a boolean; anything else is a 400) the answer is streamed
 *       as server-sent events ({@link StreamedAnswer}): {@code 200} with
 *       {@code Content-Type: text/event-stream; charset=utf-8} once the node gives the first
 *       piece of output, then {@code data: {"id", "token_ids", "text"}} for each piece the node
 *       gives, then
 *       {@code data: } the answer above (its {@code token_ids} and {@code text} only what no
 *       piece carried, normally nothing), then {@code data: [DONE]}. A request that fails
 *       before its first piece is answered as above (same statuses); one that fails after it
 *       gets {@code data: {"id", "error": {"message", "type", "status"}}} (the message and
 *       status the status answer would have had; {@link #failureType}) and the end of the
 *       stream, without {@code [DONE]}.
 *   <li>OpenAI-compatible routes, for clients that send text: {@code POST /v1/completions}
 *       (a string prompt, or token ids), {@code POST /v1/chat/completions} (a conversation),
 *       {@code GET /v1/models} and {@code GET /v1/models/{model}} (the base model, else 404).
 *       The prompt is tokenized by the {@link PromptTokenizer} (without one, text and chat are
 *       answered {@value #NO_TOKENIZER_STATUS}), routed as its token ids exactly as above,
 *       and answered in OpenAI's shapes, whole or streamed ({@link OpenAiRequest} for the keys
 *       and defaults, {@link OpenAiAnswers} for the answers). A tokenization holds an
 *       in-flight slot, never a reader thread, and is bounded by {@code ioTimeout} (then 504)
 *       and by {@link #stop} (then 503). One whose answer this node had no heap to read (the
 *       tokenizer's answer budget held by other answers:
 *       {@link PromptTokenizer.TokenizeException#budgetRefused()}) is answered 503 with
 *       {@code Retry-After}, code {@code busy}, counted in {@code rejected_busy}: the node's
 *       own shortage, as of the body budget, not a tokenizer failure. A request without a
 *       {@code seed} gets one drawn here ({@link RequestSeeds}).
 *   <li>The request's {@link CacheScope}, as in vLLM's OpenAI API: {@code "model"} names a LoRA
 *       adapter, unless it is absent, empty or the node's base model ({@code --model}); then
 *       the request is of the base model. {@code "cache_salt"} (absent or empty: none) keys
 *       the engine's prefix cache per tenant. Routing matches a request only against prefixes
 *       cached in its own scope; an OpenAI-compatible engine receives both fields back.
 *   <li>{@code GET /v1/stats}: the node's {@link NodeStats} (its gossip layer's under
 *       {@code "gossip"}; plus transport, engine and this endpoint's own counters) as JSON.
 *   <li>{@code GET /metrics} (or {@code HEAD}): the same counters and gauges in Prometheus' text
 *       format 0.0.4 (see {@link StatsTables} for the names), and histograms of how long the
 *       accepted requests took, by where they were served ({@link ClientLatency}).
 *   <li>{@code GET /health} (or {@code HEAD}): 200 while the node runs, 503 otherwise. The body
 *       is {@code {"state": ...}}, with, when the node reports its engine watch ({@link
 *       PrefixRouterNode#engineStallStats()}; the library's node always does), {@code
 *       "engine_avoided"} ({@code true} while the node routes around its stalled or failing
 *       engine), {@code "engine_stalled"} and {@code "engine_failing"}; and, given a watch of
 *       the engine's key ({@link #watchEngineKey}), {@code "engine_key_refused"} ({@code true}
 *       while the model server refuses the node's API key, then with {@code
 *       "engine_key_refused_status"}); and {@code "node_id_in_use"} ({@code true} while the
 *       node takes its id to be in use by another process, {@link
 *       io.github.prefixrouter.GossipStats#nodeIdInUse()}, then with {@code
 *       "node_id_in_use_reason"}). None of them changes the status: the node still answers
 *       its clients (through its peers, or with its engine). One whose source throws, an
 *       {@link Error} included, is left out, the status still the state's.
 * </ul>
 *
 * Paths match exactly (anything else is 404) and another method is 405; the 405 of an OpenAI
 * route and the 404 of another path under {@code /v1/} (but {@code /v1/route/} and
 * {@code /v1/stats}) are in OpenAI's error shape. Requests are answered
 * asynchronously: no thread waits for the engine.
 *
 * <p>The endpoint speaks plain HTTP, or HTTPS with the context given to
 * {@link #start(String, int, SSLContext, boolean)} (the TLS handshake is made on the reader
 * thread, under the same I/O deadline as the request, which starts at the connection's first
 * byte: a client that stalls in the handshake or right after it is cut at {@code ioTimeout} and
 * counted as a slow connection), optionally requiring clients' certificates: a request without
 * one is answered 401 on every path but {@code /health}.
 *
 * <p>Threads: every connection that starts a request is read on a reader thread of its own (at most
 * {@code readerThreads} at once, default {@value #DEFAULT_READER_THREADS}; a connection beyond is
 * closed at once), and at most {@code maxUnfinishedPerAddress} request bodies (default
 * {@value #DEFAULT_MAX_UNFINISHED_PER_ADDRESS}) from one address may be unfinished (one beyond
 * waits for one of them to finish, and is answered 503 with {@code Retry-After} once none has
 * finished for 1 s, or {@code ioTimeout} if shorter), so clients that stall hold only their own
 * threads and {@code /health}, {@code /v1/stats} and {@code /metrics} are answered at once, never
 * behind other clients' requests, until stalled connections hold all {@code readerThreads}: a
 * connection is read from its first byte, before its headers name its path or its address is
 * counted, so connections that stall in their headers, from anywhere, have every other
 * connection closed at once, {@code /health}'s too, for as long as they keep all the threads
 * (each at most {@code ioTimeout}). Answers to completions are written by writer threads, one per
 * answer being written and at most {@code readerThreads}, so a client that does not read holds only
 * its own. Reading a request and writing an answer each have {@code ioTimeout}; a connection that
 * takes longer is closed. A connection that sends nothing holds no reader thread (the server starts
 * reading it, and its handshake, at its first byte) and is not closed at {@code ioTimeout}: the JDK
 * server closes it once it has been idle for its idle interval
 * ({@code sun.net.httpserver.idleInterval}, 30 s by default, checked every 10 s), without counting
 * it.
 *
 * <p>Memory: the requests, all together, hold at most the body budget ({@code bodyBudget},
 * default {@value #DEFAULT_BODY_BUDGET} bytes, at least {@value #MIN_BODY_BUDGET}: what one
 * request of an 8 MiB body can take, read or tokenized, so that one request alone always gets
 * its share): the bodies being read, and the prompts of the requests accepted until they end.
 * Each request takes its share as it needs it: its body in doubling steps from 64 KiB as it
 * arrives, up to its Content-Length (so a client that declares 8 MiB and sends nothing holds 64
 * KiB), two bytes per body byte for its text (one when it is ASCII), and its parse's estimate
 * ({@link #maxParsedBytes}) in doubling steps as the parse charges it ({@link Json.Memory}).
 * Parsed, it gives back its body and text, and its share is resized to what the request still
 * holds ({@link BodyBudget.Share#resize}): a text prompt its text ({@link #promptBytes}), a
 * conversation its parse's share, while they are tokenized, with the tokenizer's copies of them
 * taken as it makes them ({@link PromptTokenizer#tokenize(String, String,
 * PromptTokenizer.Heap)}); then, and from the start for token ids, its token ids, 4 bytes each,
 * and its strings ({@link #requestBytes}) while it runs. It gives all of it back once the request
 * has ended, however it ended (answered, failed, cancelled, refused, its tokenization failed or
 * the endpoint stopped), or once its body is refused or its connection closed or was cut, before
 * any refusal is written. A step, or a larger share once tokenized, that does not come free waits
 * while other requests give theirs back, and is answered 503 with {@code Retry-After} (OpenAI's
 * shape, code {@code busy}, on the OpenAI routes) once none has for 1 s (or {@code ioTimeout} if
 * shorter), counted as {@code body_budget_refused} ({@link BodyBudget}). So the prompts the
 * endpoint holds are bounded by the budget, not only by {@code maxInFlight} requests.
 * Before the budget only the reader threads bounded that memory: 64 x (8 MiB + text + 49 MB).
 *
 * <p>A streamed request is cancelled ({@code cancel(true)} on the node's future) when a write
 * to its client fails: the client disconnected, or did not take what was written within
 * {@code ioTimeout} and was cut off. The JDK HTTP server reports no disconnect otherwise (an
 * exchange exposes neither its socket nor a close callback; a closed connection shows only when
 * something is written), so a streamed request is cancelled at its first piece after the client
 * left, and one that is not streamed is not cancelled: it runs to its end and its answer is
 * dropped.
 *
 * <p>Failures of the endpoint's own: whatever a handler or the write of an answer throws, an
 * {@link Error} included (the heap running out, a stack overflow, an {@link AssertionError} of
 * a host component), is answered 500 in the path's error shape (OpenAI's on its paths, code
 * {@code internal}) if nothing was sent yet, else the exchange is closed, cutting the answer
 * short. It is counted ({@link #internalErrors()}: {@code client.internal_errors}) and logged
 * (an {@code Error} at ERROR, at most {@value #WARNINGS_PER_MINUTE} lines a minute for all such
 * failures, the next line logged saying how many were left out), never sent to the client, and
 * not rethrown: the JDK server, or a writer thread, would leave the exchange without an
 * answer. A node whose
 * {@code submit}, or a tokenizer whose call, throws an {@code Error} is answered as one that
 * throws an exception (502), the {@code Error} logged at ERROR, at most
 * {@value #WARNINGS_PER_MINUTE} lines a minute for both together. An answer the writer threads
 * cannot take (an {@code Error}: a thread they cannot start) has its connection closed at once,
 * as the thread that hands it on (the node's, the tokenizer's) does not write; so has a
 * stream's ({@link StreamedAnswer}, which ends a stream with its internal error whatever is
 * thrown as it is written). Whatever is thrown, the request gives back its in-flight slot, its
 * tokenization, its stream and its share of the body budget.
 */
final class ClientEndpoint {

  private static final Logger log = LoggerFactory.getLogger(ClientEndpoint.class);
  private static final int MAX_BODY = 8 << 20;
  /** The parsed JSON of a body may take this much heap, plus {@link #PARSED_PER_BODY_BYTE}. */
  static final long PARSED_BASE_BYTES = 16L << 20;
  /** Heap the parsed JSON of a body may take per byte of the body, over the base. */
  static final int PARSED_PER_BODY_BYTE = 4;
  /**
   * The most heap one request can take of the {@linkplain #DEFAULT_BODY_BUDGET body budget},
   * rounded up to a whole MiB: 73 MiB. Read, a request of an 8 MiB body takes its body, its text
   * (16 MiB: two bytes per character) and its parse (16 MiB + 4 x 8 MiB), 72 MiB. Tokenized, a
   * conversation of that body keeps its parse's share (48 MiB at most) and takes the engine
   * tokenizer's copies of it: their JSON text, at most a character per byte of the body and two
   * bytes a character, and its UTF-8, at most a byte per body byte, 24 MiB, plus the keys the
   * tokenizer adds (numbers the tokenizer writes longer than the client did, {@code 1e6} as
   * {@code 1000000.0} in {@code chat_template_kwargs}, aside): 72 MiB and some bytes. A smaller
   * budget is refused: one request alone always gets its share.
   */
  static final long MIN_BODY_BUDGET = 73L << 20;
  /** The default heap the request bodies being read may take at once: 256 MiB. */
  static final long DEFAULT_BODY_BUDGET = 256L << 20;
  /** The first step of the heap a body being read takes ({@link #readObject}). */
  private static final int FIRST_BODY_STEP = 64 << 10;
  /** Seconds a client told to try again later should wait: about a node's busy cool-down. */
  static final String RETRY_AFTER_SECONDS = "1";
  static final int DEFAULT_READER_THREADS = 64;
  static final int DEFAULT_MAX_UNFINISHED_PER_ADDRESS = 16;
  /** The most reader threads, and unfinished bodies per address, that may be set. */
  static final int MAX_READER_THREADS = 4096;
  static final String COMPLETIONS = "/v1/route/completions";
  /** OpenAI's completions: a text prompt (or token ids), answered in OpenAI's shapes. */
  static final String OPENAI_COMPLETIONS = "/v1/completions";
  /** OpenAI's chat completions: a conversation, answered in OpenAI's shapes. */
  static final String OPENAI_CHAT = "/v1/chat/completions";
  /** OpenAI's model list: the base model. */
  static final String MODELS = "/v1/models";
  /**
   * The status of a text or chat request at a node without a tokenizer: 501 (Not Implemented),
   * since it is the node's configuration, not the request, that is lacking.
   */
  static final int NO_TOKENIZER_STATUS = 501;
  static final String STATS = "/v1/stats";
  static final String METRICS = "/metrics";
  static final String HEALTH = "/health";
  /** Lines a minute at most that log the endpoint's own failures ({@link #failedHere}). */
  static final int WARNINGS_PER_MINUTE = 10;

  /**
   * The keys a completions request may have; any other is refused with a 400 naming it (a typo
   * such as {@code max_token} would otherwise be silently ignored, and so would options this
   * endpoint does not support, such as {@code stream_options}).
   */
  static final Set<String> REQUEST_KEYS =
      Set.of("id", "prompt", "max_tokens", "temperature", "top_p", "seed", "model",
          "cache_salt", "stream", "stop_token_ids");

  private final PrefixRouterNode node;
  private final String baseModel;
  private final Supplier<List<StatsTable.Section<?>>> extraStats;
  private final int maxInFlight;
  private final int readerThreads;
  private final int maxUnfinishedPerAddress;
  private final Duration ioTimeout;
  private final AtomicInteger inFlight = new AtomicInteger();
  private final AtomicLong ids = new AtomicLong();
  /** What the request ids this endpoint makes have between the node's id and the counter. */
  private final String runInIds;
  private final AtomicLong slowConnectionsClosed = new AtomicLong();
  private final AtomicLong rejectedBusy = new AtomicLong();
  /** Requests refused 400 or 413 by the endpoint itself ({@link #countInvalid}). */
  private final AtomicLong rejectedInvalid = new AtomicLong();
  /** Requests answered 404 (no such path) or 405 (a method the path does not take). */
  private final AtomicLong rejectedNotFound = new AtomicLong();
  private final AtomicLong readsRefused = new AtomicLong();
  private final AtomicLong bodyBudgetRefused = new AtomicLong();
  /**
   * The heap the requests hold: their bodies being read ({@link #readObject}), then their
   * prompts until they end.
   */
  private final BodyBudget bodies;
  private final AtomicLong streamsCancelled = new AtomicLong();
  private final AtomicLong tokenizeFailures = new AtomicLong();
  private final AtomicLong tokenizeRefused = new AtomicLong();
  private final AtomicLong refusedWithoutCertificate = new AtomicLong();
  /**
   * Requests answered 500, or closed, for a failure of this endpoint's own: their count and
   * their lines ({@link #failedHere}), at most {@link #WARNINGS_PER_MINUTE} a minute by the
   * endpoint's monotonic clock.
   */
  private final CountedFailureLog ownFailures;
  /**
   * The {@link Error}s the node's {@code submit} or the tokenizer's call threw (each request
   * answered 502, as the node's or the tokenizer's failure): their lines, at most
   * {@link #WARNINGS_PER_MINUTE} a minute by the same clock. Their count is not exported: not
   * the endpoint's own failures, the tokenizer's are counted in {@code tokenize_failures}.
   */
  private final CountedFailureLog thrownByNodeOrTokenizer;
  /** Mutual TLS: every path but {@link #HEALTH} needs a client certificate (set by start). */
  private volatile boolean certificatesRequired;
  /** The status of the model server's refusal of the node's key, 0 for none; null: not known. */
  private volatile IntSupplier engineKeyRefused;
  private final PromptTokenizer tokenizer;
  private final LongSupplier epochSeconds;
  private final RequestSeeds seeds;
  /** How long requests took: the histograms of {@code /metrics}. */
  private final ClientLatency latency;
  /** Tokenizations under way: failed at {@link #stop} so that none holds its slot for ever. */
  private final Set<CompletableFuture<PromptTokenizer.Tokenized>> tokenizing =
      ConcurrentHashMap.newKeySet();
  private volatile boolean stopping;
  private long startedEpochSeconds;
  /** Streamed answers not yet written to their end (nor given up). */
  private final Set<StreamedAnswer> openStreams = ConcurrentHashMap.newKeySet();
  private HttpServer server;
  private ExecutorService executor;
  private InboundReaders readers;
  private ScheduledThreadPoolExecutor timer;
  private IoDeadline ioDeadline;

  /**
   * @param extraStats the process's counters besides the node's and this endpoint's (transport,
   *     engine), read for each {@code /v1/stats} and {@code /metrics}
   * @param ioTimeout how long a client connection may take to deliver one request once it has
   *     started it, and to take its answer; a connection that takes longer is closed
   */
  ClientEndpoint(PrefixRouterNode node, Supplier<List<StatsTable.Section<?>>> extraStats,
      int maxInFlight, Duration ioTimeout) {
    this(node, extraStats, maxInFlight, ioTimeout, null);
  }

  /**
   * @param ioTimeout as above
   * @param baseModel the base model's name: a request's {@code "model"} equal to it names no
   *     adapter (null: none, every non-empty {@code "model"} names an adapter)
   */
  ClientEndpoint(PrefixRouterNode node, Supplier<List<StatsTable.Section<?>>> extraStats,
      int maxInFlight, Duration ioTimeout, String baseModel) {
    this(node, extraStats, maxInFlight, ioTimeout, baseModel, DEFAULT_READER_THREADS,
        DEFAULT_MAX_UNFINISHED_PER_ADDRESS);
  }

  /**
   * @param baseModel as above
   * @param readerThreads requests read at once at most, each on a thread of its own; a
   *     connection that starts one beyond is closed at once (1 to {@value #MAX_READER_THREADS})
   * @param maxUnfinishedPerAddress request bodies from one address still arriving at most; one
   *     beyond waits for a slot, and is answered 503 once none has come free for 1 s (1 to
   *     {@value #MAX_READER_THREADS})
   * @throws IllegalArgumentException if a limit is out of its range
   */
  ClientEndpoint(PrefixRouterNode node, Supplier<List<StatsTable.Section<?>>> extraStats,
      int maxInFlight, Duration ioTimeout, String baseModel, int readerThreads,
      int maxUnfinishedPerAddress) {
    this(node, extraStats, maxInFlight, ioTimeout, baseModel, readerThreads,
        maxUnfinishedPerAddress, null, () -> System.currentTimeMillis() / 1000,
        System.nanoTime() ^ System.currentTimeMillis());
  }

  /**
   * An endpoint that also serves the OpenAI-compatible routes with text prompts and chat.
   *
   * @param baseModel as above; also the model {@code /v1/models} lists (none when null)
   * @param readerThreads as above
   * @param maxUnfinishedPerAddress as above
   * @param tokenizer tokenizes the text prompts and conversations of {@code /v1/completions}
   *     and {@code /v1/chat/completions}, and gives their output's text; null: the node has
   *     none, and those requests (but for a prompt of token ids) are answered
   *     {@value #NO_TOKENIZER_STATUS}
   * @param epochSeconds the wall clock, in seconds since the epoch, for the {@code created} of
   *     OpenAI's answers (read once per request, and once at {@link #start} for the model list)
   * @param seedOfSeeds seeds the generator of the sampling seeds drawn for OpenAI-style
   *     requests that name none ({@link RequestSeeds}); the host passes something that differs
   *     between runs (a secure random, say), tests a constant
   * @throws IllegalArgumentException if a limit is out of its range
   */
  ClientEndpoint(PrefixRouterNode node, Supplier<List<StatsTable.Section<?>>> extraStats,
      int maxInFlight, Duration ioTimeout, String baseModel, int readerThreads,
      int maxUnfinishedPerAddress, PromptTokenizer tokenizer, LongSupplier epochSeconds,
      long seedOfSeeds) {
    this(node, extraStats, maxInFlight, ioTimeout, baseModel, readerThreads,
        maxUnfinishedPerAddress, tokenizer, epochSeconds, seedOfSeeds, DEFAULT_BODY_BUDGET);
  }

  /**
   * An endpoint with a budget of the heap the request bodies being read may hold.
   *
   * @param bodyBudget the bytes the requests may hold at once, all together: the bodies being
   *     read, their texts and parsed JSON, and the prompts of the requests accepted until they
   *     end (at least {@value #MIN_BODY_BUDGET}, what one request of the largest body can take,
   *     read or tokenized, so that one request alone always gets its share; default
   *     {@value #DEFAULT_BODY_BUDGET}). A request whose next step of its share
   *     does not come free waits while other requests give theirs back, and is answered 503
   *     with {@code Retry-After} once none has for 1 s ({@link BodyBudget})
   * @throws IllegalArgumentException if a limit is out of its range
   */
  ClientEndpoint(PrefixRouterNode node, Supplier<List<StatsTable.Section<?>>> extraStats,
      int maxInFlight, Duration ioTimeout, String baseModel, int readerThreads,
      int maxUnfinishedPerAddress, PromptTokenizer tokenizer, LongSupplier epochSeconds,
      long seedOfSeeds, long bodyBudget) {
    this(node, extraStats, maxInFlight, ioTimeout, baseModel, readerThreads,
        maxUnfinishedPerAddress, tokenizer, epochSeconds, seedOfSeeds, bodyBudget,
        System::nanoTime, null);
  }

  /**
   * An endpoint that times its requests by the given clock.
   *
   * @param nanoClock a monotonic clock in nanoseconds ({@code System::nanoTime}), read when a
   *     request arrives, when a stream's first event is written and when an answer ends: the
   *     latency histograms of {@code /metrics} ({@link ClientLatency})
   * @param bodyBudget and the others as above
   * @throws IllegalArgumentException if a limit is out of its range
   */
  ClientEndpoint(PrefixRouterNode node, Supplier<List<StatsTable.Section<?>>> extraStats,
      int maxInFlight, Duration ioTimeout, String baseModel, int readerThreads,
      int maxUnfinishedPerAddress, PromptTokenizer tokenizer, LongSupplier epochSeconds,
      long seedOfSeeds, long bodyBudget, LongSupplier nanoClock) {
    this(node, extraStats, maxInFlight, ioTimeout, baseModel, readerThreads,
        maxUnfinishedPerAddress, tokenizer, epochSeconds, seedOfSeeds, bodyBudget, nanoClock,
        null);
  }

  /**
   * An endpoint whose request ids name the run of the node process it serves.
   *
   * @param run what tells this run of the node id from its earlier and later ones, in the ids
   *     the endpoint gives its requests ({@link #nextRequestId}): the host passes a value no
   *     other run of the node id has (the node process its gossip generation, which each run
   *     takes above the last); null for none, ids of the node's id and a counter alone
   * @param nanoClock and the others as above
   * @throws IllegalArgumentException if a limit is out of its range, or {@code run} is empty,
   *     longer than {@value #MAX_RUN_LENGTH} characters or not letters and digits
   */
  ClientEndpoint(PrefixRouterNode node, Supplier<List<StatsTable.Section<?>>> extraStats,
      int maxInFlight, Duration ioTimeout, String baseModel, int readerThreads,
      int maxUnfinishedPerAddress, PromptTokenizer tokenizer, LongSupplier epochSeconds,
      long seedOfSeeds, long bodyBudget, LongSupplier nanoClock, String run) {
    if (run != null && (run.isEmpty() || run.length() > MAX_RUN_LENGTH
        || !run.chars().allMatch(c -> c < 0x80 && Character.isLetterOrDigit(c)))) {
      throw new IllegalArgumentException("run must be 1 to " + MAX_RUN_LENGTH + " ASCII letters "
          + "and digits, was '" + run + "'");
    }
    if (bodyBudget < MIN_BODY_BUDGET) {
      throw new IllegalArgumentException("bodyBudget must be at least " + MIN_BODY_BUDGET
          + " bytes (one request of the largest body, read or tokenized), was "
          + bodyBudget);
    }
    this.bodies = new BodyBudget(bodyBudget, InboundReaders.waitFor(ioTimeout),
        bodyBudgetRefused::incrementAndGet);
    this.tokenizer = tokenizer;
    this.epochSeconds = epochSeconds;
    this.seeds = new RequestSeeds(seedOfSeeds);
    this.latency = new ClientLatency(nanoClock);
    LongSupplier clockMillis = () -> TimeUnit.NANOSECONDS.toMillis(nanoClock.getAsLong());
    this.ownFailures = new CountedFailureLog(log, WARNINGS_PER_MINUTE, clockMillis);
    this.thrownByNodeOrTokenizer = new CountedFailureLog(log, WARNINGS_PER_MINUTE, clockMillis);
    checkRange("readerThreads", readerThreads);
    checkRange("maxUnfinishedPerAddress", maxUnfinishedPerAddress);
    this.baseModel = baseModel;
    this.node = node;
    this.runInIds = run == null ? "-c" : "-" + run + "-c";
    this.extraStats = extraStats;
    this.maxInFlight = maxInFlight;
    this.ioTimeout = ioTimeout;
    this.readerThreads = readerThreads;
    this.maxUnfinishedPerAddress = maxUnfinishedPerAddress;
  }

  /**
   * Has {@code GET /health} say whether the model server refuses the node's API key: {@code
   * refusedStatus} gives the status of its refusal (401 or 403), or 0 while it accepts the key.
   * Without it, {@code /health} says nothing of the key.
   *
   * @param refusedStatus the status of the standing refusal, or 0
   */
  void watchEngineKey(IntSupplier refusedStatus) {
    this.engineKeyRefused = Objects.requireNonNull(refusedStatus, "refusedStatus");
  }

  private static void checkRange(String name, int v) {
    if (v < 1 || v > MAX_READER_THREADS) {
      throw new IllegalArgumentException(
          name + " must be 1 to " + MAX_READER_THREADS + ", was " + v);
    }
  }

  /** The base model's name (a request's {@code "model"} equal to it names no adapter), or null. */
  String baseModel() {
    return baseModel;
  }

  /** Serves plain HTTP on {@code host:port} (port 0: any free one); the address bound. */
  InetSocketAddress start(String host, int port) throws IOException {
    return start(host, port, null, false);
  }

  /**
   * Serves on {@code host:port} (port 0: any free one), over TLS with {@code tls} unless it is
   * null; the address bound.
   *
   * @param tls the TLS context (its key manager presents this port's certificate, its trust
   *     manager checks clients' certificates); null for plain HTTP
   * @param clientCertificates whether clients must present a certificate its trust manager
   *     accepts (mutual TLS): a certificate it does not accept fails the handshake, and a
   *     request without one is answered 401 on every path but {@code /health}, which load
   *     balancers and orchestrators probe without one; false asks for none
   */
  InetSocketAddress start(String host, int port, SSLContext tls, boolean clientCertificates)
      throws IOException {
    startedEpochSeconds = epochSeconds.getAsLong();
    certificatesRequired = tls != null && clientCertificates;
    InetSocketAddress bind = new InetSocketAddress(host, port);
    if (tls != null) {
      // a certificate asked for, not needed at the handshake: a client without one gets a 401
      // saying so (not a connection closed without a word), and /health stays open to probes;
      // one the trust manager does not accept still fails the handshake
      server = JdkHttpServers.createHttps(bind, 256, tls, clientCertificates
          ? JdkHttpServers.ClientCertificates.WANTED : JdkHttpServers.ClientCertificates.NONE);
    } else {
      server = JdkHttpServers.create(bind, 256);
    }
    AtomicInteger n = new AtomicInteger();
    // one writer per answer being written, up to as many as requests are read at once: a
    // client that does not read its answer holds its own writer for at most ioTimeout, and
    // other answers wait for a writer only while that many clients stall at once; idle
    // writers end after 30 s
    ThreadPoolExecutor writers = new ThreadPoolExecutor(readerThreads, readerThreads, 30,
        TimeUnit.SECONDS, new LinkedBlockingQueue<>(), r -> {
          Thread t = new Thread(r, "client-endpoint-writer-" + n.incrementAndGet());
          t.setDaemon(true);
          return t;
        });
    writers.allowCoreThreadTimeOut(true);
    executor = writers;
    AtomicInteger rn = new AtomicInteger();
    readers = new InboundReaders(readerThreads, maxUnfinishedPerAddress,
        InboundReaders.waitFor(ioTimeout), r -> {
      Thread t = new Thread(r, "client-endpoint-reader-" + rn.incrementAndGet());
      t.setDaemon(true);
      return t;
    }, readsRefused::incrementAndGet);
    timer = new ScheduledThreadPoolExecutor(1, r -> {
      Thread t = new Thread(r, "client-endpoint-timer");
      t.setDaemon(true);
      return t;
    });
    timer.setRemoveOnCancelPolicy(true);
    // requests are read (and answers written) with blocking I/O: a client that stalls
    // mid-request or does not read its answer is cut off after ioTimeout; each request is read
    // on a reader thread of its own, so stalled clients hold only theirs
    ioDeadline = new IoDeadline(timer, ioTimeout, slowConnectionsClosed::incrementAndGet);
    server.setExecutor(readers.executor(ioDeadline));
    // one context for all: the JDK server matches contexts by prefix ("/healthz" would be
    // /health), the paths here match exactly
    server.createContext("/", ex -> answered(ex, this::route));
    server.start();
    return server.getAddress();
  }

  /**
   * Stops the endpoint. Answers already handed to the writers (the node answered before this
   * call) are still written, each within the I/O deadline, before the server closes the
   * connections: a process that stops its node and then its endpoint loses no answer (a stream
   * the node ended gets its end or its error event). Answers given after this call (a request
   * that arrived meanwhile, streamed or not, refused 503 by the stopped node; a stream's events)
   * are written by the thread that gives them, under the I/O deadline, until the port closes;
   * after that their connection is closed. Streamed ones still running are cancelled.
   * OpenAI-style requests still being tokenized are answered 503 ({@code not_running}) and
   * give back their in-flight slots.
   */
  void stop() {
    stopping = true;
    // tokenizations still under way end now: their requests are answered 503 (not yet
    // submitted) by the writers, which finish before the connections close
    for (CompletableFuture<PromptTokenizer.Tokenized> t : List.copyOf(tokenizing)) {
      t.completeExceptionally(new EndpointStoppingException());
    }
    if (server != null) {
      executor.shutdown();
      try {
        if (!executor.awaitTermination(ioTimeout.toMillis() + 1_000, TimeUnit.MILLISECONDS)) {
          log.warn("client endpoint: answers still being written after {}; closing", ioTimeout);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      server.stop(0); // closes every connection, streams still open included
      executor.shutdownNow();
      readers.shutdownNow();
      timer.shutdownNow();
      // streams whose request had not ended: their clients are gone with the connections
      for (StreamedAnswer s : List.copyOf(openStreams)) {
        s.abandon();
      }
    }
  }

  /** Client requests accepted and not yet answered. */
  int inFlight() {
    return inFlight.get();
  }

  /** Tokenizations under way, bounded by the timeout and by {@link #stop} (for tests). */
  int tokenizationsUnderWay() {
    return tokenizing.size();
  }

  /** Streamed answers not yet written to their end (for tests). */
  int openStreams() {
    return openStreams.size();
  }

  /** The message of a 500 for a failure of the endpoint itself; its exception is logged. */
  static final String INTERNAL_ERROR_MESSAGE =
      "internal error: the node failed to handle the request (see its log)";

  /**
   * Runs a handler so that the exchange gets an answer whatever it throws, an {@link Error}
   * included: the JDK server would otherwise leave it without one. The answer is a 500 in the
   * path's error shape (OpenAI's on its paths, code {@code internal}); what was thrown is logged
   * (an {@code Error} at ERROR), never sent to the client, and not rethrown.
   */
  private void answered(HttpExchange ex, com.sun.net.httpserver.HttpHandler h) {
    try {
      h.handle(ex);
    } catch (Throwable e) { // an Error too: rethrown, it would leave the exchange unanswered
      failedHere(e, "client request to {} failed", ex.getRequestURI());
      internalError(ex);
    }
  }

  /**
   * Runs the write of an answer (on a writer thread) so that the exchange is answered or closed
   * whatever it throws, an {@link Error} included: a 500 in the path's error shape if nothing
   * was sent yet, else the exchange is closed, cutting the answer short. Without this the writer
   * thread died with what was thrown and the client waited for an answer that never came.
   */
  private void written(HttpExchange ex, Runnable write) {
    try {
      write.run();
    } catch (Throwable e) { // an Error too (see answered), logged and not rethrown
      failedHere(e, "could not write the answer to client request {}", ex.getRequestURI());
      if (ex.getResponseCode() == -1) {
        internalError(ex);
      } else {
        ex.close(); // the status was sent: the client sees the answer cut short
      }
    }
  }

  /**
   * Counts a request answered 500, or whose connection is closed, for a failure of the
   * endpoint's own ({@link #internalErrors()}), and logs it with what was thrown: an
   * {@link Error} (the heap running out, a thread that cannot start) at ERROR, anything else at
   * WARN; at most {@link #WARNINGS_PER_MINUTE} such lines a minute by the endpoint's clock, all
   * kinds together, the next one logged saying how many were left out, since a failure that
   * lasts fails every request meanwhile ({@link CountedFailureLog}).
   *
   * @param message the line, with one {@code {}} for {@code arg}
   */
  private void failedHere(Throwable e, String message, Object arg) {
    ownFailures.failed(e, message, arg);
  }

  /** Answers {@link #INTERNAL_ERROR_MESSAGE} with 500, in OpenAI's shape on its paths. */
  private static void internalError(HttpExchange ex) {
    if (isOpenAiPath(ex.getRequestURI().getRawPath())) {
      openAiError(ex, 500, INTERNAL_ERROR_MESSAGE, null, "internal");
    } else {
      respond(ex, 500, Map.of("error", INTERNAL_ERROR_MESSAGE));
    }
  }

  private void route(HttpExchange ex) {
    String path = ex.getRequestURI().getRawPath();
    String method = ex.getRequestMethod();
    boolean certificateMissing =
        certificatesRequired && !HEALTH.equals(path) && !presentedCertificate(ex);
    if (hasBody(ex) && (certificateMissing || !readsBody(path, method))) {
      closesWithBodyUnread(ex); // answered without reading its body
    }
    if (certificateMissing) {
      refusedWithoutCertificate.incrementAndGet();
      String message = "a client certificate is required: this port answers only clients "
          + "presenting a TLS certificate its trust store accepts (mutual TLS); " + HEALTH
          + " needs none";
      if (isOpenAiPath(path)) {
        openAiError(ex, 401, message, null, "client_certificate_required");
      } else {
        respond(ex, 401, Map.of("error", message));
      }
      return;
    }
    switch (path == null ? "" : path) {
      case COMPLETIONS -> {
        if (allowed(ex, method, "POST")) {
          completions(ex);
        }
      }
      case OPENAI_COMPLETIONS -> {
        if (openAiAllowed(ex, path, method, "POST")) {
          openAi(ex, OpenAiRequest.Kind.COMPLETION);
        }
      }
      case OPENAI_CHAT -> {
        if (openAiAllowed(ex, path, method, "POST")) {
          openAi(ex, OpenAiRequest.Kind.CHAT);
        }
      }
      case MODELS -> {
        if (openAiAllowed(ex, path, method, "GET")) {
          respond(ex, 200, OpenAiAnswers.models(baseModel, startedEpochSeconds));
        }
      }
      case STATS -> {
        if (allowed(ex, method, "GET")) {
          stats(ex);
        }
      }
      case METRICS -> { // Prometheus scrapes with GET
        if (getOrHead(ex, method)) {
          metrics(ex);
        }
      }
      case HEALTH -> { // load balancers probe with GET or HEAD
        if (getOrHead(ex, method)) {
          Map<String, Object> body = new java.util.LinkedHashMap<>();
          PrefixRouterNode.State state = node.state(); // once: the status says what the body says
          body.put("state", state.name());
          // the details only inform: the probe answers by the state alone, each detail that
          // throws (an Error too) left out whole
          healthDetail(body, "engine stall stats", d -> node.engineStallStats().ifPresent(s -> {
            d.put("engine_avoided", s.avoided() == 1);
            d.put("engine_stalled", s.stalled() == 1);
            d.put("engine_failing", s.failing() == 1);
          }));
          IntSupplier keyRefused = engineKeyRefused;
          if (keyRefused != null) {
            healthDetail(body, "engine key watch", d -> {
              int status = keyRefused.getAsInt();
              d.put("engine_key_refused", status != 0);
              if (status != 0) {
                d.put("engine_key_refused_status", status);
              }
            });
          }
          healthDetail(body, "node stats", d -> {
            GossipStats g = node.stats().gossip();
            d.put("node_id_in_use", g.nodeIdInUse());
            if (g.nodeIdInUse()) {
              d.put("node_id_in_use_reason", nodeIdInUseReason(node.nodeId(), g));
            }
          });
          respond(ex, state == PrefixRouterNode.State.RUNNING ? 200 : 503, body);
        }
      }
      default -> {
        if (path != null && path.startsWith(MODELS + "/") && path.length() > MODELS.length() + 1) {
          if (openAiAllowed(ex, path, method, "GET")) {
            model(ex);
          }
          return;
        }
        rejectedNotFound.incrementAndGet();
        String paths = COMPLETIONS + ", " + OPENAI_CHAT + ", " + OPENAI_COMPLETIONS + ", "
            + MODELS + ", " + STATS + ", " + METRICS + " or " + HEALTH;
        if (isOpenAiPath(path)) {
          openAiError(ex, 404, "no such path: " + method + " " + path + "; this node serves "
              + "POST " + OPENAI_CHAT + ", POST " + OPENAI_COMPLETIONS + ", GET " + MODELS
              + " and GET " + MODELS + "/{model} of OpenAI's API (and " + paths + ")", null,
              "unknown_url");
        } else {
          respond(ex, 404, Map.of("error", "no such path; use " + paths));
        }
      }
    }
  }

  /**
   * Adds to {@code /health}'s body the keys {@code detail} puts, or none if it throws, whatever
   * it throws, an {@link Error} included: a probe is answered by the node's state alone, which a
   * load balancer reads, never with a 500 that would take a running node out of rotation.
   * What was thrown is logged at debug level: probes come every few seconds, and the same
   * failure through {@code /v1/stats} or {@code /metrics} is answered 500, counted and logged.
   */
  private static void healthDetail(Map<String, Object> body, String what,
      java.util.function.Consumer<Map<String, Object>> detail) {
    Map<String, Object> d = new LinkedHashMap<>();
    try {
      detail.accept(d);
    } catch (Throwable e) { // an Error too: the state alone
      log.debug("/health: no {}", what, e);
      return;
    }
    body.putAll(d);
  }

  /** What {@code /health} says of a node id in use by another process ({@code g} says it is). */
  static String nodeIdInUseReason(String nodeId, GossipStats g) {
    return "another process gossips with node id " + nodeId + ": peers knew this node by a "
        + "generation above its own " + g.generationsRefuted() + " times, the last within "
        + GossipEngine.ID_IN_USE_WINDOW + " gossip rounds (it is at generation " + g.generation()
        + " now, and the other process draws above it in turn); give each process its own --id";
  }

  /**
   * {@code GET /v1/models/{model}}: the base model as the list has it, or 404
   * {@code model_not_found}. The model is the rest of the path, percent-decoded (a name with a
   * slash, {@code org/name}, may be sent as it is or with {@code %2F}).
   */
  private void model(HttpExchange ex) {
    String id = ex.getRequestURI().getPath().substring(MODELS.length() + 1);
    if (baseModel != null && !baseModel.isEmpty() && baseModel.equals(id)) {
      respond(ex, 200, OpenAiAnswers.model(baseModel, startedEpochSeconds));
    } else {
      openAiError(ex, 404, "the model '" + ShortText.prefix(id, 256) + "' does not exist: this "
          + "node serves " + (baseModel == null || baseModel.isEmpty() ? "no base model"
          : "'" + baseModel + "'") + " (GET " + MODELS + ")", "model", "model_not_found");
    }
  }

  /**
   * Whether the client of {@code ex} presented a certificate at the handshake (one the trust
   * manager did not accept failed the handshake, so this is one it accepted).
   */
  private static boolean presentedCertificate(HttpExchange ex) {
    return ex instanceof HttpsExchange https
        && CertificateNodeIds.leaf(https.getSSLSession()) != null;
  }


  /**
   * Whether {@code path} is under OpenAI's API ({@code /v1/}, but for this node's own
   * {@code /v1/route/} and {@code /v1/stats}): its errors are in OpenAI's shape, which OpenAI
   * clients read (an embeddings or responses call, a model by name).
   */
  private static boolean isOpenAiPath(String path) {
    return path != null && path.startsWith("/v1/") && !path.startsWith("/v1/route/")
        && !path.startsWith(STATS);
  }

  /** As {@link #allowed}, for an OpenAI route: a 405 in OpenAI's error shape. */
  private boolean openAiAllowed(HttpExchange ex, String path, String method,
      String expected) {
    if (expected.equals(method)) {
      return true;
    }
    rejectedNotFound.incrementAndGet();
    ex.getResponseHeaders().add("Allow", expected);
    openAiError(ex, 405, method + " " + path + " is not allowed: use " + expected, null,
        "method_not_allowed");
    return false;
  }

  /**
   * Marks a refusal that leaves the request's body unread (all or part of it) with
   * {@code Connection: close}: the JDK server drains at most 64 KiB of what is left, then closes
   * the connection, so a client that kept it would send its next request into a closed one. So
   * are the answers to a request whose body no route reads (404, 405, 401 without a
   * certificate).
   */
  private static void closesWithBodyUnread(HttpExchange ex) {
    ex.getResponseHeaders().add("Connection", "close");
  }

  /** Whether the request says it has a body: a Content-Length above 0, or a Transfer-Encoding. */
  private static boolean hasBody(HttpExchange ex) {
    String length = ex.getRequestHeaders().getFirst("Content-Length");
    return ex.getRequestHeaders().containsKey("Transfer-Encoding")
        || length != null && !length.trim().equals("0");
  }

  /** Whether {@code method} on {@code path} is a request whose body a route reads. */
  private static boolean readsBody(String path, String method) {
    return "POST".equals(method) && (COMPLETIONS.equals(path) || OPENAI_COMPLETIONS.equals(path)
        || OPENAI_CHAT.equals(path));
  }

  /** True if the method is the one the path takes; otherwise answers 405. */
  private boolean allowed(HttpExchange ex, String method, String expected) {
    if (expected.equals(method)) {
      return true;
    }
    rejectedNotFound.incrementAndGet();
    ex.getResponseHeaders().add("Allow", expected);
    respond(ex, 405, Map.of("error", "use " + expected));
    return false;
  }

  /**
   * True for GET and HEAD, which {@link #METRICS} and {@link #HEALTH} take; otherwise answers
   * 405 with an {@code Allow} naming both.
   */
  private boolean getOrHead(HttpExchange ex, String method) {
    if ("GET".equals(method) || "HEAD".equals(method)) {
      return true;
    }
    rejectedNotFound.incrementAndGet();
    ex.getResponseHeaders().add("Allow", "GET, HEAD");
    respond(ex, 405, Map.of("error", "use GET or HEAD"));
    return false;
  }

  private void completions(HttpExchange ex) {
    ClientLatency.Request timing = latency.arrived();
    ParsedRequest parsed;
    InetSocketAddress remote = ex.getRemoteAddress();
    if (!readers.tryAcquire(remote)) {
      ex.getResponseHeaders().add("Retry-After", RETRY_AFTER_SECONDS);
      closesWithBodyUnread(ex);
      respond(ex, 503, Map.of("error", "too many unfinished requests from this address"));
      return;
    }
    // the share is given back before any refusal is written; once the request is parsed, it is
    // resized to what the request holds, its token ids, kept until the request ends
    BodyBudget.Share share = bodies.share();
    try {
      try {
        parsed = parseRequest(ex, share);
        share.resize(parsed.bytes());
      } catch (Throwable e) {
        share.close();
        throw e;
      }
    } catch (BodyBudget.Refused e) {
      refuseInTime(ex, () -> {
        ex.getResponseHeaders().add("Retry-After", RETRY_AFTER_SECONDS);
        closesWithBodyUnread(ex);
        respond(ex, 503, Map.of("error", String.valueOf(e.getMessage())));
      });
      return;
    } catch (BodyTooLargeException e) {
      countInvalid();
      refuseInTime(ex, () -> {
        closesWithBodyUnread(ex);
        respond(ex, 413, Map.of("error", String.valueOf(e.getMessage())));
      });
      return;
    } catch (IOException e) {
      countInvalid();
      refuseInTime(ex, () -> respond(ex, 400, Map.of("error", "cannot read the request body")));
      return;
    } catch (IllegalArgumentException | Json.JsonException e) { // bad JSON, shape or values
      countInvalid();
      refuseInTime(ex, () -> respond(ex, 400, Map.of("error", String.valueOf(e.getMessage()))));
      return;
    } finally {
      readers.release(remote);
    }
    boolean handedOn = false; // the share then ends with the request
    try {
      if (!inTime(ex)) {
        return; // the body came, or was read, too late: inTime closed the connection
      }
      if (inFlight.incrementAndGet() > maxInFlight) {
        inFlight.decrementAndGet();
        rejectedBusy.incrementAndGet();
        share.close();
        ex.getResponseHeaders().add("Retry-After", RETRY_AFTER_SECONDS);
        respond(ex, 503, Map.of("error", "too many requests in flight at this node"));
        return;
      }
      InferenceRequest request = parsed.request();
      String clientId = parsed.clientId();
      handedOn = true;
      if (parsed.stream()) {
        stream(ex, request, clientId, timing, share);
        return;
      }
      submitWhole(ex, request, timing, share,
          resp -> () -> respond(ex, 200, toJson(resp, request.params(), clientId)),
          c -> () -> answerFailure(ex, clientId, c));
    } finally {
      if (!handedOn) {
        share.close();
      }
    }
  }

  /**
   * Submits a streamed request ({@code "stream": true}): its pieces and its end are written as
   * server-sent events by the writer threads ({@link StreamedAnswer}), under {@code clientId}.
   */
  private void stream(HttpExchange ex, InferenceRequest request, String clientId,
      ClientLatency.Request timing, BodyBudget.Share share) {
    stream(ex, request, timing, share,
        () -> new StreamedAnswer.RouteFormat(clientId, request.params()),
        (e, failure) -> answerFailure(e, clientId, failure));
  }

  /**
   * Submits a streamed request whose events {@code format} renders and whose failure before its
   * first piece {@code failureAnswer} answers; gives its in-flight slot and its {@code share} of
   * the body budget back when it completes (answered, failed, cancelled).
   * Its time is counted when its answer ends: served where its answer came from if its end
   * event was written, else failed. Whatever is thrown as its answer is set up (an
   * {@link Error} too: the heap running out) is the endpoint's own failure: the slot is given
   * back and the client answered 500 by a writer thread, nothing submitted.
   */
  private void stream(HttpExchange ex, InferenceRequest request, ClientLatency.Request timing,
      BodyBudget.Share share, Supplier<StreamedAnswer.Format> format,
      StreamedAnswer.FailureAnswer failureAnswer) {
    StreamedAnswer made = null;
    try {
      made = new StreamedAnswer(ex, request.id(), executor, ioDeadline, format.get(),
          (e, failure) -> written(e, () -> failureAnswer.answer(e, failure)), done -> {
            openStreams.remove(done);
            InferenceResponse r = done.answered();
            timing.answered(r == null ? ClientLatency.FAILED : ClientLatency.served(r),
                done.firstWrittenAt());
          }, streamsCancelled::incrementAndGet, latency::now, this::failedHere);
      openStreams.add(made);
    } catch (Throwable e) { // after the slot was taken, on the reader thread or the one that
      // completed the tokenization: thrown on, it kept the slot, or was lost in the tokenizer's
      // future and the client never answered
      if (made != null) {
        openStreams.remove(made);
      }
      inFlight.decrementAndGet();
      share.close();
      failedHere(e, "cannot set up the stream of client request {}", request.id());
      writeLater(ex, () -> internalError(ex), () -> timing.answered(ClientLatency.FAILED));
      return;
    }
    StreamedAnswer s = made;
    CompletableFuture<InferenceResponse> answer;
    try {
      answer = given(node.submit(request, s));
    } catch (Throwable e) { // an Error too: answered as the node's failure, its slot given back
      answer = submitThrew(request, e);
    }
    s.attach(answer);
    answer.whenComplete((resp, err) -> {
      inFlight.decrementAndGet();
      share.close();
      s.complete(resp, err);
    });
  }

  // ------------------------------------------------------------- OpenAI-compatible routes

  /** Deepest nesting of an OpenAI-style body (messages with content parts, template kwargs). */
  private static final int OPENAI_MAX_DEPTH = 16;

  static final String NO_TOKENIZER_MESSAGE = "this node has no tokenizer, so it cannot take text "
      + "prompts or chat: start it with --tokenizer (see docs/deployment.md, \"OpenAI-compatible "
      + "routes\"); without one, " + OPENAI_COMPLETIONS + " takes a prompt of token ids only";

  /**
   * {@code POST /v1/completions} and {@code POST /v1/chat/completions}, on a reader thread: reads
   * and checks the request, takes an in-flight slot, then tokenizes it (never waiting here: the
   * tokenizer's future completes on its thread) and submits it when its tokens come
   * ({@link #submitOpenAi}).
   */
  private void openAi(HttpExchange ex, OpenAiRequest.Kind kind) {
    ClientLatency.Request timing = latency.arrived();
    InetSocketAddress remote = ex.getRemoteAddress();
    if (!readers.tryAcquire(remote)) {
      ex.getResponseHeaders().add("Retry-After", RETRY_AFTER_SECONDS);
      closesWithBodyUnread(ex);
      openAiError(ex, 503, "too many unfinished requests from this address", null, "busy");
      return;
    }
    OpenAiRequest req;
    // given back before any refusal is written; once parsed, resized to what the request holds
    // (its text, its conversation as parsed, its token ids), kept until the request ends
    BodyBudget.Share share = bodies.share();
    try {
      try {
        req = OpenAiRequest.parse(readObject(ex, OPENAI_MAX_DEPTH, share), kind, baseModel);
        if (req.kind != OpenAiRequest.Kind.CHAT) { // a conversation keeps its parse's share
          share.resize(promptBytes(req));
        }
      } catch (Throwable e) {
        share.close();
        throw e;
      }
    } catch (BodyBudget.Refused e) {
      refuseInTime(ex, () -> {
        ex.getResponseHeaders().add("Retry-After", RETRY_AFTER_SECONDS);
        closesWithBodyUnread(ex);
        openAiError(ex, 503, e.getMessage(), null, "busy");
      });
      return;
    } catch (BodyTooLargeException e) {
      countInvalid();
      refuseInTime(ex, () -> {
        closesWithBodyUnread(ex);
        openAiError(ex, 413, e.getMessage(), null, "body_too_large");
      });
      return;
    } catch (IOException e) {
      countInvalid();
      refuseInTime(ex,
          () -> openAiError(ex, 400, "cannot read the request body", null, "invalid_request"));
      return;
    } catch (OpenAiRequest.Invalid e) {
      countInvalid();
      refuseInTime(ex, () -> openAiError(ex, 400, e.getMessage(), e.param(), e.code()));
      return;
    } catch (IllegalArgumentException | Json.JsonException e) { // not a JSON object
      countInvalid();
      refuseInTime(ex,
          () -> openAiError(ex, 400, String.valueOf(e.getMessage()), null, "invalid_json"));
      return;
    } finally {
      readers.release(remote);
    }
    boolean handedOn = false; // the share then ends with the request
    try {
      if (!inTime(ex)) {
        return; // the body came, or was read, too late: inTime closed the connection
      }
      if (req.needsTokenizer() && tokenizer == null) {
        share.close();
        openAiError(ex, NO_TOKENIZER_STATUS, NO_TOKENIZER_MESSAGE, req.promptParam(),
            "no_tokenizer");
        return;
      }
      String requestId = nextRequestId();
      long seed = req.seed != null ? req.seed : seeds.next();
      long created = epochSeconds.getAsLong();
      // the slot is taken before tokenizing: a tokenization counts against the cap as a request;
      // from here on every path gives it back exactly once, and the share with it
      if (inFlight.incrementAndGet() > maxInFlight) {
        inFlight.decrementAndGet();
        rejectedBusy.incrementAndGet();
        share.close();
        ex.getResponseHeaders().add("Retry-After", RETRY_AFTER_SECONDS);
        openAiError(ex, 503, "too many requests in flight at this node", null, "busy");
        return;
      }
      handedOn = true;
      tokenize(req, requestId, share,
          (t, err) -> submitOpenAi(ex, req, requestId, seed, created, timing, share, t, err));
    } finally {
      if (!handedOn) {
        share.close();
      }
    }
  }

  /**
   * Tokenizes the prompt and calls {@code then} with its tokens or the failure, exactly once: at
   * once for token ids; else when the tokenizer's future completes, bounded by the I/O timeout
   * (then with a {@link TokenizeTimeoutException}, and the tokenizer's future is cancelled) and
   * by {@link #stop} (an {@link EndpointStoppingException}). If that bound cannot be set (the
   * timer throws, an {@link Error} too: a thread it cannot start), or anything else is thrown as
   * the tokenization is awaited (an {@link Error}: the heap running out as it is tracked), the
   * tokenizer's future is cancelled and {@code then} called at once with an
   * {@link EndpointFailure}, unless it was called already: answered 500, the slot given back.
   * Called already (the tokens, the timeout or {@link #stop} came first), the request is
   * answered that way, and what was thrown is counted and logged as the endpoint's own failure
   * all the same ({@link #failedHere}).
   */
  private void tokenize(OpenAiRequest req, String requestId, BodyBudget.Share share,
      java.util.function.BiConsumer<PromptTokenizer.Tokenized, Throwable> then) {
    if (!req.needsTokenizer()) {
      then.accept(new PromptTokenizer.Tokenized(req.promptIds, -1), null);
      return;
    }
    CompletableFuture<PromptTokenizer.Tokenized> call;
    try {
      // the tokenizer's copies of the prompt (the request it sends) are taken from the share
      call = req.kind == OpenAiRequest.Kind.CHAT
          ? tokenizer.tokenizeChat(req.model, req.messages, req.chatTemplateKwargs, share::take)
          : tokenizer.tokenize(req.model, req.promptText, share::take);
      if (call == null) {
        throw new IllegalStateException("the tokenizer gave no future");
      }
    } catch (BodyBudget.Refused e) { // its copies' heap did not come: answered 503 busy
      call = CompletableFuture.failedFuture(e);
    } catch (Throwable e) { // a tokenizer that throws instead of failing its future, an
      // Error too: answered 502 tokenizer_failed all the same, its slot given back
      if (e instanceof Error) {
        thrownByNodeOrTokenizer.failed(e, "the tokenizer threw");
      }
      call = CompletableFuture.failedFuture(e);
    }
    // then is called once, whatever is thrown from here on
    AtomicBoolean called = new AtomicBoolean();
    java.util.function.BiConsumer<PromptTokenizer.Tokenized, Throwable> once = (t, e) -> {
      if (called.compareAndSet(false, true)) {
        then.accept(t, e);
      }
    };
    CompletableFuture<PromptTokenizer.Tokenized> tokens = call;
    CompletableFuture<PromptTokenizer.Tokenized> bounded = new CompletableFuture<>();
    try {
      if (tokens.isDone()) {
        tokens.whenComplete(once);
        return;
      }
      ScheduledFuture<?> timeout = null;
      AtomicBoolean timedOut = new AtomicBoolean();
      try {
        timeout = timer.schedule(() -> {
          if (!bounded.isDone() && timedOut.compareAndSet(false, true)) {
            // cancelled before the client is answered, so that a client that sees the 504
            // never finds the tokenization still running
            tokens.cancel(true);
            bounded.completeExceptionally(new TokenizeTimeoutException(ioTimeout));
          }
        }, ioTimeout.toNanos(), TimeUnit.NANOSECONDS);
      } catch (RejectedExecutionException stopped) {
        bounded.completeExceptionally(new EndpointStoppingException());
      } // anything else the timer throws (an Error too: a thread it cannot start) is caught below
      ScheduledFuture<?> expiry = timeout;
      bounded.whenComplete((t, e) -> {
        tokenizing.remove(bounded);
        if (expiry != null) {
          expiry.cancel(false);
        }
      });
      bounded.whenComplete(once);
      tokens.whenComplete((t, e) -> {
        if (timedOut.get()) {
          return; // cancelled by the timeout, which answers
        }
        if (e == null) {
          bounded.complete(t);
        } else {
          bounded.completeExceptionally(e);
        }
      });
      // seen by stop() only once it is wholly set up, so that stop() gets it answered
      tokenizing.add(bounded);
      if (bounded.isDone()) {
        tokenizing.remove(bounded); // it completed before it was added
      }
      if (stopping) { // stop() may have looked at the tokenizations before this one was added
        bounded.completeExceptionally(new EndpointStoppingException());
      }
    } catch (Throwable e) { // an Error too (a timer thread that cannot start, the heap running
      // out as the tokenization is tracked): thrown on, it reached the handler's guard, which
      // answered 500 with the slot held and the call running, whose end then answered again or
      // submitted the request. This endpoint's own failure, counted and logged; unless then was
      // called already (the request is answered that way), the call, which nothing would
      // bound, is cancelled, and a 500 through then gives the slot back
      if (called.compareAndSet(false, true)) {
        failedHere(e, "cannot await the tokenization of client request {}", requestId);
        tokens.cancel(true);
        EndpointFailure failure = new EndpointFailure(e);
        bounded.completeExceptionally(failure); // its timeout cancelled, if it was set
        then.accept(null, failure);
      } else { // its tokens, its timeout or stop came first: it was dropped without a line
        failedHere(e, "cannot track the tokenization of client request {}, answered as it "
            + "ended", requestId);
      }
    }
  }

  /**
   * Once the prompt is tokenized (on the thread that completed the tokenization): builds the
   * request and submits it, or answers why it cannot be. Releases the in-flight slot exactly
   * once: here on a failure, else when the node's future completes.
   */
  private void submitOpenAi(HttpExchange ex, OpenAiRequest req, String requestId, long seed,
      long created, ClientLatency.Request timing, BodyBudget.Share share,
      PromptTokenizer.Tokenized tokenized, Throwable tokenizeError) {
    InferenceRequest request;
    OpenAiAnswers.Context ctx;
    try {
      if (tokenizeError != null) {
        throw tokenizeFailure(req, tokenizeError);
      }
      if (tokenized == null || tokenized.tokens() == null) {
        tokenizeFailures.incrementAndGet();
        throw new OpenAiFailure(502, "the tokenizer gave no tokens", null, "tokenizer_failed");
      }
      try {
        request = req.toInferenceRequest(requestId, tokenized.tokens(), tokenized.maxModelLen(),
            seed);
      } catch (OpenAiRequest.Invalid e) {
        throw e;
      } catch (IllegalArgumentException e) { // token ids out of range: the tokenizer's fault
        tokenizeFailures.incrementAndGet();
        throw new OpenAiFailure(502, "the tokenizer gave an invalid prompt: " + e.getMessage(),
            null, "tokenizer_failed");
      }
      ctx = new OpenAiAnswers.Context(req.kind, OpenAiAnswers.answerId(req.kind, requestId),
          created, req.model, request.params(), seed, req.includeUsage, tokenizer,
          req.continuousUsage, request.tokens().length);
      // its text, conversation and the tokenizer's copies are held no more, its ids are: a
      // larger share than it had waits as a body's step, and is refused as one
      try {
        share.resize(requestBytes(request));
      } catch (BodyBudget.Refused e) {
        throw budgetRefused(e);
      }
    } catch (Throwable e) { // an Error too (thrown here it was lost in the tokenizer's future,
      // the client never answered): this endpoint's own failure, a 500 internal
      inFlight.decrementAndGet();
      share.close();
      if (e instanceof OpenAiRequest.Invalid) { // its tokens: none, or too many
        rejectedInvalid.incrementAndGet();
      }
      Runnable answer;
      if (e instanceof EndpointFailure) { // logged where it happened
        answer = () -> internalError(ex);
      } else if (e instanceof RuntimeException r) {
        answer = () -> openAiFailure(ex, r);
      } else {
        failedHere(e, "client request {} failed once tokenized", requestId);
        answer = () -> internalError(ex);
      }
      writeLater(ex, answer, () -> timing.answered(ClientLatency.FAILED));
      return;
    }
    if (req.stream) {
      stream(ex, request, timing, share, () -> new OpenAiAnswers.ChunkFormat(ctx),
          this::openAiFailure);
      return;
    }
    submitWhole(ex, request, timing, share, resp -> () -> answerOpenAi(ex, ctx, resp),
        c -> () -> openAiFailure(ex, c));
  }

  /** A request whose share of the body budget did not come, answered 503 {@code busy}. */
  private static OpenAiFailure budgetRefused(BodyBudget.Refused e) {
    return new OpenAiFailure(503, String.valueOf(e.getMessage()), null, "busy");
  }

  /** Why a tokenization failed, as the answer it gets; counts it. */
  private RuntimeException tokenizeFailure(OpenAiRequest req, Throwable err) {
    Throwable c = err instanceof CompletionException && err.getCause() != null
        ? err.getCause() : err;
    if (c instanceof EndpointStoppingException e) {
      return e;
    }
    if (c instanceof EndpointFailure e) { // this endpoint's, not the tokenizer's
      return e;
    }
    if (c instanceof BodyBudget.Refused e) { // the tokenizer's copies did not get their share
      return budgetRefused(e);
    }
    if (c instanceof TokenizeTimeoutException) {
      tokenizeFailures.incrementAndGet();
      return new OpenAiFailure(504, c.getMessage(), null, "tokenizer_timeout");
    }
    if (c instanceof PromptTokenizer.TokenizeException te && te.invalidRequest()) {
      tokenizeRefused.incrementAndGet();
      return new OpenAiFailure(400, String.valueOf(te.getMessage()), req.promptParam(),
          "invalid_prompt");
    }
    // no heap here to read the tokenizer's answer: this node's shortage, as of the body budget,
    // not the tokenizer's fault (it used to be a 502 tokenizer_failed)
    if (c instanceof PromptTokenizer.TokenizeException te && te.budgetRefused()) {
      rejectedBusy.incrementAndGet();
      return new OpenAiFailure(503, String.valueOf(te.getMessage()), null, "busy");
    }
    tokenizeFailures.incrementAndGet();
    // the engine's tokenizer says "tokenizer failed: ..." itself: say it once
    String why = String.valueOf(c.getMessage());
    if (why.startsWith(TOKENIZER_FAILED)) {
      why = why.substring(TOKENIZER_FAILED.length());
    }
    // the tokenizer's own timeout, which may end the call just before this endpoint's: a 504
    // all the same (it used to be a 502 whenever the tokenizer's timer won the race)
    if (c instanceof PromptTokenizer.TokenizeException te && te.timedOut()) {
      return new OpenAiFailure(504, "the " + TOKENIZER_FAILED + why, null, "tokenizer_timeout");
    }
    return new OpenAiFailure(502, "the " + TOKENIZER_FAILED + why, null, "tokenizer_failed");
  }

  /**
   * Submits a request answered whole: when the node's future completes, gives the in-flight slot
   * and the request's {@code share} of the body budget back and hands the answer's write
   * ({@code answer}, or {@code failure} of the failure's cause) to the writer threads, never
   * writing on the engine's or the node's thread that completed the
   * request: a client that does not read must not block it. Its time is counted once the write
   * ends: served where its answer came from if that was answered 200, else failed.
   */
  private void submitWhole(HttpExchange ex, InferenceRequest request, ClientLatency.Request timing,
      BodyBudget.Share share, java.util.function.Function<InferenceResponse, Runnable> answer,
      java.util.function.Function<Throwable, Runnable> failure) {
    CompletableFuture<InferenceResponse> f;
    try {
      f = given(node.submit(request));
    } catch (Throwable e) { // an Error too: answered as the node's failure, its slot given back
      f = submitThrew(request, e);
    }
    f.whenComplete((resp, err) -> {
      inFlight.decrementAndGet();
      share.close(); // the request has ended: the node holds its ids no more
      if (err == null) {
        writeLater(ex, answer.apply(resp), () -> timing.answered(
            ex.getResponseCode() == 200 ? ClientLatency.served(resp) : ClientLatency.FAILED));
      } else {
        Throwable c = err instanceof CompletionException && err.getCause() != null
            ? err.getCause() : err;
        writeLater(ex, failure.apply(c), () -> timing.answered(ClientLatency.FAILED));
      }
    });
  }

  /**
   * The future of a request whose {@code submit} threw: failed with what it threw, answered 502
   * as a failure of the node. An {@link Error} is logged at ERROR, at most
   * {@link #WARNINGS_PER_MINUTE} lines a minute with the tokenizer's (an exception is only
   * answered, as it always was).
   */
  private CompletableFuture<InferenceResponse> submitThrew(InferenceRequest request,
      Throwable e) {
    if (e instanceof Error) {
      thrownByNodeOrTokenizer.failed(e, "the node's submit of {} threw", request.id());
    }
    return CompletableFuture.failedFuture(e);
  }

  /**
   * The future {@code submit} returned; a node that gave none (null, against its contract)
   * failed the request as one that throws does, answered 502: it used to be a 500 whose
   * in-flight slot (and stream) was never given back.
   */
  private static CompletableFuture<InferenceResponse> given(
      CompletableFuture<InferenceResponse> future) {
    if (future == null) {
      throw new IllegalStateException("the node gave no future");
    }
    return future;
  }

  /**
   * Hands a write to the writer threads, under the I/O deadline; once {@link #stop} has shut them
   * down, writes on this thread under the same deadline. A write that throws still answers the
   * exchange ({@link #written}). If the writers cannot take it otherwise (an {@link Error}: a
   * thread they cannot start), the exchange is closed at once without an answer (nothing was
   * sent, so closing never blocks), as this thread, the node's or the tokenizer's, does not
   * write, and the failure is logged. {@code then} runs once the write has ended, however it
   * ended.
   */
  private void writeLater(HttpExchange ex, Runnable write, Runnable then) {
    Runnable task = () -> {
      try {
        ioDeadline.run(() -> written(ex, write));
      } finally {
        then.run();
      }
    };
    try {
      executor.execute(task);
    } catch (RuntimeException stopped) {
      // stop() waits for the writers before it closes the port: a request that arrives
      // meanwhile (the stopped node refuses it) got its connection closed instead of its 503.
      // Once the port is closed, the write fails at once and closes the exchange
      task.run();
    } catch (Throwable e) { // no writer could take it (an Error): lost in the node's future if
      // not caught here, the exchange left open
      failedHere(e, "no writer thread could take the answer to client request {}; closing "
          + "its connection", ex.getRequestURI());
      try {
        ex.close();
      } finally {
        then.run();
      }
    }
  }

  /** A whole OpenAI answer, with the routing headers. */
  private static void answerOpenAi(HttpExchange ex, OpenAiAnswers.Context ctx,
      InferenceResponse resp) {
    byte[] b;
    try {
      b = Json.write(OpenAiAnswers.answer(ctx, resp)).getBytes(StandardCharsets.UTF_8);
    } catch (IllegalArgumentException e) { // a text JSON cannot carry, or no text at all
      log.warn("cannot write the answer of {} as JSON: {}", resp.requestId(), e.getMessage());
      openAiError(ex, 500, "the answer cannot be written as JSON", null, "internal");
      return;
    }
    OpenAiAnswers.headers(ex.getResponseHeaders(), ctx, resp);
    send(ex, 200, "application/json", b);
  }

  /** Answers a failed OpenAI-style request in OpenAI's shape, and closes the exchange. */
  private void openAiFailure(HttpExchange ex, Throwable c) {
    if (c instanceof OpenAiRequest.Invalid i) {
      openAiError(ex, 400, i.getMessage(), i.param(), i.code());
    } else if (c instanceof OpenAiFailure f) {
      if (f.status == 503) { // busy: the client may come back
        ex.getResponseHeaders().add("Retry-After", RETRY_AFTER_SECONDS);
      }
      openAiError(ex, f.status, f.getMessage(), f.param, f.code);
    } else if (c instanceof EndpointStoppingException) {
      openAiError(ex, 503, c.getMessage(), null, "not_running");
    } else {
      if (comeBackLater(c)) {
        ex.getResponseHeaders().add("Retry-After", RETRY_AFTER_SECONDS);
      }
      respond(ex, failureStatus(c), OpenAiAnswers.failure(c));
    }
  }

  private static void openAiError(HttpExchange ex, int status, String message, String param,
      String code) {
    respond(ex, status, OpenAiAnswers.error(status, message, param, code));
  }

  /**
   * A failure of an OpenAI-style request before it was submitted, with its answer; a 503 gets
   * {@code Retry-After}.
   */
  private static final class OpenAiFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final int status;
    final String param;
    final String code;

    OpenAiFailure(int status, String message, String param, String code) {
      super(message, null, false, false);
      this.status = status;
      this.param = param;
      this.code = code;
    }
  }

  /** The tokenizer did not answer within the I/O timeout (answered 504). */
  static final class TokenizeTimeoutException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    TokenizeTimeoutException(Duration timeout) {
      super("the tokenizer did not answer within " + timeout.toMillis() + " ms", null, false,
          false);
    }
  }

  /** The endpoint stopped while a request was being tokenized (answered 503). */
  static final class EndpointStoppingException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    EndpointStoppingException() {
      super("the node is stopping", null, false, false);
    }
  }

  /**
   * A failure of this endpoint's own as a request was tokenized (its timeout could not be set),
   * what was thrown its cause, logged where it happened: answered 500 {@code internal}, not as
   * the tokenizer's failure.
   */
  private static final class EndpointFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    EndpointFailure(Throwable cause) {
      super("internal error", cause, false, false);
    }
  }

  /**
   * Counts a request refused 400 or 413 while its body was read, before its refusal is written;
   * not one whose read the I/O deadline cut, which is counted as a slow connection alone.
   */
  private void countInvalid() {
    if (!ioDeadline.passed()) {
      rejectedInvalid.incrementAndGet();
    }
  }

  /**
   * Answers a request refused while its body was read, still under the read's deadline, then
   * ends the deadline. Closing the exchange makes the JDK server drain what is left of the body
   * (up to 64 KiB, blocking), so a client that stalls in the rest of a refused body would hold
   * this reader thread for ever if the refusal came after the deadline; past the deadline the
   * connection is closed instead.
   */
  private void refuseInTime(HttpExchange ex, Runnable refusal) {
    refusal.run();
    inTime(ex);
  }

  /** Ends the read's deadline; false, with the exchange closed, if it had passed. */
  private boolean inTime(HttpExchange ex) {
    if (ioDeadline.endPhase()) {
      return true;
    }
    ex.close(); // nothing was sent: closes the connection
    return false;
  }

  /** Answers a failed request with its status ({@link #failureStatus}) and closes the exchange. */
  private static void answerFailure(HttpExchange ex, String id, Throwable c) {
    if (comeBackLater(c)) {
      ex.getResponseHeaders().add("Retry-After", RETRY_AFTER_SECONDS);
    }
    respond(ex, failureStatus(c),
        Map.of("id", id, "error", safeText(String.valueOf(c.getMessage()))));
  }

  /**
   * The kind of a failed request, for the error event of a streamed answer: {@code busy} and
   * {@code not_running} (503), {@code invalid_request} (400), {@code timeout} (504),
   * {@code failed} (502), as {@link #failureStatus}; {@code output_diverged} (502) when a
   * fallback's output disagreed with what the stream had already given, which the client must
   * then discard ({@link OutputDivergedException}); {@code internal} (500) when the endpoint
   * could not write an answer ({@link StreamedAnswer.UnwritableException}).
   */
  static String failureType(Throwable failure) {
    if (failure instanceof StreamedAnswer.UnwritableException) {
      return "internal";
    }
    if (failure instanceof NodeNotRunningException) {
      return "not_running";
    }
    if (failure instanceof OutputDivergedException) {
      return "output_diverged";
    }
    return switch (failureStatus(failure)) {
      case 503 -> "busy";
      case 400 -> "invalid_request";
      case 504 -> "timeout";
      default -> "failed";
    };
  }

  /** {@code s} with every lone surrogate replaced by U+FFFD, so that JSON can carry it. */
  static String safeText(String s) {
    StringBuilder b = null;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      boolean pair = Character.isHighSurrogate(c) && i + 1 < s.length()
          && Character.isLowSurrogate(s.charAt(i + 1));
      if (pair) {
        if (b != null) {
          b.append(c).append(s.charAt(i + 1));
        }
        i++;
      } else if (Character.isSurrogate(c)) {
        if (b == null) {
          b = new StringBuilder(s.length()).append(s, 0, i);
        }
        b.append('\uFFFD');
      } else if (b != null) {
        b.append(c);
      }
    }
    return b == null ? s : b.toString();
  }

  /**
   * The status of a failed request: 503 when busy everywhere ({@link #comeBackLater}) or the
   * node is not running, 400 when the engine refused the request as invalid, 504 when the
   * engine did not answer in time, 500 when the endpoint could not write its answer ({@link
   * StreamedAnswer.UnwritableException}), 502 otherwise.
   */
  static int failureStatus(Throwable failure) {
    if (failure instanceof StreamedAnswer.UnwritableException) {
      return 500;
    }
    Throwable cause = failure.getCause();
    if (failure instanceof NodeNotRunningException || comeBackLater(failure)) {
      return 503;
    }
    if (cause instanceof InvalidRequestException) {
      return 400;
    }
    if (cause instanceof EngineTimeoutException) {
      return 504;
    }
    return 502;
  }

  /**
   * Whether a failed request is answered 503 with {@code Retry-After}: no node could take it now,
   * and the client may try again a little later. Its cause is then the engine at capacity
   * ({@link EngineBusyException}), or this node short of the heap to read its engine's answer
   * ({@link AnswerBudgetException}: the engine's answer budget held by other answers), a
   * shortage of this node's own as that of the body budget is, and no failure of the engine.
   */
  static boolean comeBackLater(Throwable failure) {
    Throwable cause = failure.getCause();
    return cause instanceof EngineBusyException || cause instanceof AnswerBudgetException;
  }

  /**
   * {@code GenerationParams}' message with the API's keys for the Java parameters it names
   * ({@code maxTokens}, {@code topP}): the client sent the keys, not the parameters.
   */
  static String apiKeyNames(String generationParamsMessage) {
    return String.valueOf(generationParamsMessage).replace("maxTokens", "max_tokens")
        .replace("topP", "top_p").replace("stopTokenIds", "stop_token_ids");
  }

  /**
   * A request's {@code stop_token_ids}: absent, null or an array of at most
   * {@link GenerationParams#MAX_STOP_TOKEN_IDS} token ids in [0,
   * {@link InferenceRequest#MAX_TOKEN_ID}) (empty: none), as {@link GenerationParams} takes them.
   *
   * @throws IllegalArgumentException if it is something else
   */
  static List<Integer> stopTokenIds(Object value) {
    if (value == null || value == Json.NULL) {
      return List.of();
    }
    if (!(value instanceof List<?> l)) {
      throw new IllegalArgumentException("stop_token_ids must be an array of token ids");
    }
    if (l.size() > GenerationParams.MAX_STOP_TOKEN_IDS) {
      throw new IllegalArgumentException("stop_token_ids must have at most "
          + GenerationParams.MAX_STOP_TOKEN_IDS + " ids, had " + l.size());
    }
    List<Integer> ids = new ArrayList<>(l.size());
    for (Object o : l) {
      if (!(o instanceof Long x) || x < 0 || x >= InferenceRequest.MAX_TOKEN_ID) {
        throw new IllegalArgumentException("stop_token_ids must be token ids in [0, "
            + InferenceRequest.MAX_TOKEN_ID + "), had " + Json.write(o));
      }
      ids.add(x.intValue());
    }
    return ids;
  }


  /**
   * A client's request id, which its answer carries back (the request goes to the node under an
   * id of the endpoint's: {@link #nextRequestId}).
   *
   * @throws IllegalArgumentException if it has a control character (C0, DEL or C1: a line
   *     break would forge a log line, an escape drive a terminal)
   */
  static String requestId(String id) {
    for (int i = 0; i < id.length(); i++) {
      if (Character.isISOControl(id.charAt(i))) {
        throw new IllegalArgumentException("id must have no control character, had U+"
            + String.format("%04X", (int) id.charAt(i)) + " at index " + i);
      }
    }
    return id;
  }

  /**
   * A parsed completions request, under an id this endpoint made ({@link #nextRequestId}); the
   * id its answer carries (the client's, else the request's); whether its answer is streamed.
   */
  private record ParsedRequest(InferenceRequest request, String clientId, boolean stream) {
    /** The heap it holds: {@link #requestBytes}, and the client's id if it is not the request's. */
    long bytes() {
      return requestBytes(request)
          + (clientId.equals(request.id()) ? 0 : 2L * clientId.length());
    }
  }

  /** The longest run a request id names, as long as any {@code long} in base 36. */
  static final int MAX_RUN_LENGTH = 13;

  /**
   * A new request id, unique at this endpoint's node across its runs: the node's id, its run
   * (as the host gave it) and a counter, {@code n0-hdoctn0vxs-c17}. Every request the endpoint
   * submits has one, whatever id its client chose (which only its answer carries): ids are
   * unique per origin node only as long as its host makes them so, and peers key forwarded
   * requests and their CANCELs by origin and id, and engines cancel by id, so two clients of one
   * id would meet there (one's cancel ending the other's run at a peer). Peers keep what they
   * know of a request for minutes after it ended (a CANCEL that crossed its answer stops it
   * coming again) and know nothing of the run that sent it, so a run's counter, which starts
   * at 1, must not give the ids of an earlier run: its requests would be answered as that run's
   * cancelled ones, or join that run's still running at a peer.
   */
  private String nextRequestId() {
    return node.nodeId() + runInIds + ids.incrementAndGet();
  }

  private ParsedRequest parseRequest(HttpExchange ex, BodyBudget.Share share) throws IOException {
    Map<?, ?> body = readObject(ex, 8, share);
    Map<Object, Object> m = new java.util.HashMap<>();
    for (Map.Entry<?, ?> e : body.entrySet()) {
      Object key = e.getKey();
      if (!REQUEST_KEYS.contains(key)) {
        throw new IllegalArgumentException("unknown key \""
            + OpenAiRequest.shortened(String.valueOf(key)) + "\"; the keys are "
            + new java.util.TreeSet<>(REQUEST_KEYS));
      }
      if (e.getValue() != Json.NULL) {
        m.put(key, e.getValue()); // a JSON null stands for an absent key, as on the OpenAI routes
      }
    }
    Object idValue = m.get("id");
    String clientId = idValue == null ? null : requestId(Json.asString(idValue, "id"));
    int[] prompt = Json.asIntArray(m.get("prompt"), "prompt");
    int maxTokens = m.containsKey("max_tokens") ? Json.asInt(m.get("max_tokens"), "max_tokens") : 1;
    double temperature = m.containsKey("temperature") ? Json.asDouble(m.get("temperature"), "temperature") : 0.0;
    double topP = m.containsKey("top_p") ? Json.asDouble(m.get("top_p"), "top_p") : 1.0;
    long seed = 0;
    if (m.containsKey("seed")) {
      if (!(m.get("seed") instanceof Long l)) {
        throw new IllegalArgumentException("seed must be an integer");
      }
      seed = l;
    }
    String model = m.containsKey("model") ? Json.asString(m.get("model"), "model") : "";
    String salt = m.containsKey("cache_salt") ? Json.asString(m.get("cache_salt"), "cache_salt")
        : "";
    CacheScope scope = CacheScope.of(model.equals(baseModel) ? "" : model, salt);
    List<Integer> stopTokenIds = stopTokenIds(m.get("stop_token_ids"));
    GenerationParams params;
    try {
      params = new GenerationParams(maxTokens, temperature, topP, seed, List.of(), stopTokenIds);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(apiKeyNames(e.getMessage()), e);
    }
    boolean stream = false;
    if (m.containsKey("stream")) {
      if (!(m.get("stream") instanceof Boolean b)) {
        throw new IllegalArgumentException("stream must be true or false");
      }
      stream = b;
    }
    if (clientId == null) {
      InferenceRequest request = new InferenceRequest(nextRequestId(), prompt, params, scope);
      return new ParsedRequest(request, request.id(), stream);
    }
    // checked under the client's id, which the refusals name, as before; submitted under one
    // of the endpoint's
    InferenceRequest checked = new InferenceRequest(clientId, prompt, params, scope);
    return new ParsedRequest(new InferenceRequest(nextRequestId(),
        PromptArrays.shared(checked), params, scope), clientId, stream);
  }

  /**
   * Reads a request body of at most 8 MiB as a JSON object, whose parse may take at most
   * {@link #maxParsedBytes} of heap, taking the heap it holds from {@code share}: the body as its
   * bytes arrive, in steps from 64 KiB, each twice the last, up to its Content-Length or 8 MiB
   * ({@link BodyBudget.Share#read}), so that a client holds about what it has sent, not what it
   * declared; then two bytes per byte of it for its text (given back down to one when the text
   * is ASCII, which the JVM holds in a byte a character), then the parse's estimate as it goes
   * ({@link Json.Memory}). Parsed, the body and its text are given back: the share holds the
   * parse's, what the parsed JSON may take.
   *
   * @throws BodyTooLargeException for a larger body (413)
   * @throws BodyBudget.Refused if the budget cannot give a step of the share in time (503)
   * @throws IllegalArgumentException or {@link Json.JsonException} if it is not a JSON object
   *     in UTF-8 ({@link #utf8}), or its parse would take more heap than that (400)
   */
  private static Map<?, ?> readObject(HttpExchange ex, int maxDepth, BodyBudget.Share share)
      throws IOException {
    long declared = -1;
    String cl = ex.getRequestHeaders().getFirst("Content-Length");
    if (cl != null) {
      try {
        declared = Long.parseLong(cl.trim());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException("bad Content-Length");
      }
    }
    // a Content-Length above the cap is refused before a byte is read
    BodyBudget.Body body = declared > MAX_BODY ? null
        : share.read(ex.getRequestBody(), declared, MAX_BODY, FIRST_BODY_STEP);
    if (body == null) {
      throw new BodyTooLargeException("body larger than " + MAX_BODY + " bytes");
    }
    long textBytes = 2L * body.length();
    share.take(textBytes);
    String text = utf8(body.bytes(), body.length());
    if (text.length() == body.length()) { // every byte a character: ASCII, a byte each
      share.give(body.length());
      textBytes = body.length();
    }
    Object root = Json.parse(text, MAX_BODY, maxDepth, maxParsedBytes(body.length()),
        share::take);
    // the body and its text are not held once parsed: the share keeps the parse's
    share.give(body.bytes().length + textBytes);
    if (!(root instanceof Map<?, ?> m)) {
      throw new IllegalArgumentException("the body must be a JSON object");
    }
    return m;
  }

  /**
   * The most heap the parsed JSON of a body of {@code bodyBytes} may take ({@link Json}'s
   * estimate): 16 MiB plus 4 bytes per byte of the body. Text, token ids and the objects of
   * ordinary requests take well under that; a body crafted of tiny values (8 MiB of
   * {@code [{},{},...]} held about 260 MB once parsed) is refused as it is parsed, so the
   * reader threads bound what bodies hold in memory.
   */
  static long maxParsedBytes(int bodyBytes) {
    return PARSED_BASE_BYTES + (long) PARSED_PER_BODY_BYTE * bodyBytes;
  }

  /**
   * The heap a request holds while it runs, which its share of the body budget keeps until it
   * ends: its token ids, 4 bytes each, its strings (its id, adapter, cache salt and stop
   * strings), 2 bytes a character, and its stop token ids, 16 bytes each (boxed).
   */
  static long requestBytes(InferenceRequest r) {
    GenerationParams p = r.params();
    return 4L * r.tokens().length + stringsBytes(r.id(), r.scope(), p.stop(), p.stopTokenIds());
  }

  /**
   * The heap an OpenAI-style completion holds until its tokens come, which its share of the body
   * budget keeps: its prompt's text (a byte a character when all are Latin-1, else two) or token
   * ids (4 bytes each), and its strings and stop token ids as {@link #requestBytes} counts them
   * (a conversation keeps its parse's share instead: the parsed messages).
   */
  static long promptBytes(OpenAiRequest req) {
    long b = stringsBytes(req.model, req.scope, req.stop, req.stopTokenIds);
    if (req.promptText != null) {
      b += EngineTokenizer.stringBytes(req.promptText);
    }
    if (req.promptIds != null) {
      b += 4L * req.promptIds.length;
    }
    return b;
  }

  /**
   * The heap of a request's strings, 2 bytes a character ({@code name}: its id or model, its
   * scope's adapter and salt, its stop strings), and its stop token ids, 16 bytes each (boxed).
   */
  private static long stringsBytes(String name, CacheScope scope, List<String> stops,
      List<Integer> stopTokenIds) {
    long b = 2L * (name.length() + scope.adapter().length() + scope.salt().length());
    for (String stop : stops) {
      b += 2L * stop.length();
    }
    return b + 16L * stopTokenIds.size();
  }

  /**
   * The text of the first {@code length} bytes of a body, which JSON requires to be UTF-8 (RFC
   * 8259, section 8.1).
   *
   * @throws IllegalArgumentException if it is not well-formed UTF-8 (a byte that is never in
   *     UTF-8, a sequence cut short, an encoded surrogate, an overlong encoding): decoding it
   *     with U+FFFD in place of the bad bytes would run a prompt the client never sent
   */
  static String utf8(byte[] body, int length) {
    String text = new String(body, 0, length, StandardCharsets.UTF_8);
    // a bad sequence decodes as U+FFFD, which a text of ASCII and Latin-1 alone cannot hold
    if (text.indexOf('\uFFFD') < 0) {
      return text;
    }
    ByteBuffer in = ByteBuffer.wrap(body, 0, length);
    try {
      StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(in);
    } catch (CharacterCodingException e) {
      throw new IllegalArgumentException("the body is not valid UTF-8: a malformed byte "
          + "sequence at byte " + in.position());
    }
    return text; // U+FFFD sent as such
  }

  /**
   * The answer of a request that is not streamed (a new, modifiable map), under its client's
   * {@code id}, its token ids cut after the first of the request's stop token ids (the text is
   * the engine's, which honours them itself).
   */
  static Map<String, Object> toJson(InferenceResponse r, GenerationParams params, String id) {
    Map<String, Object> m = toJson(r);
    m.put("id", id);
    m.put("token_ids", StopMatcher.throughFirstStopToken(r.result().outputTokens(), params));
    return m;
  }

  /** The answer of a request that is not streamed (a new, modifiable map). */
  static Map<String, Object> toJson(InferenceResponse r) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("id", r.requestId());
    m.put("served_by", r.servedBy());
    m.put("forwarded", r.forwarded());
    m.put("attempts", r.attempts());
    m.put("fallback", r.fallbackCause() == FallbackCause.NONE ? Json.NULL : r.fallbackCause().name());
    m.put("token_ids", r.result().outputTokens());
    m.put("text", r.result().text());
    m.put("prompt_tokens", r.result().promptTokens());
    m.put("cached_tokens", r.result().cachedPromptTokens());
    m.put("reason", r.decision().reason().name());
    return m;
  }

  /** How a tokenizer's failure begins, in {@code EngineTokenizer}'s messages and in answers. */
  private static final String TOKENIZER_FAILED = "tokenizer failed: ";

  /** A request body above the cap: answered 413. */
  private static final class BodyTooLargeException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    BodyTooLargeException(String message) {
      super(message);
    }
  }

  /**
   * Writer threads writing an answer now (for tests: to wait until clients that do not read
   * their streams hold their writers).
   */
  int writersBusy() {
    return ((ThreadPoolExecutor) executor).getActiveCount();
  }

  /**
   * Reader threads reading a connection's request now, refusers not counted (for tests: to
   * wait until stalled connections hold theirs).
   */
  int readersInUse() {
    return readers.readersInUse();
  }

  /**
   * Requests waiting now for their body's share of the budget (for tests: to wait until one
   * waits).
   */
  int bodyBudgetWaiting() {
    return bodies.waiting();
  }

  /**
   * How long a request waits for its body's share with none given back, instead of
   * {@link InboundReaders#waitFor} of the I/O timeout (for tests, before the requests that are
   * to wait: a wait no stall of a busy machine outlasts, where a test asserts that a waiting
   * request is served).
   */
  void bodyBudgetWait(Duration maxWait) {
    bodies.maxWait(maxWait);
  }

  /** Bodies from the host {@code address} being read now (their reader slots held). */
  int unfinishedReadsFrom(java.net.InetAddress address) {
    return readers.unfinishedReads(new InetSocketAddress(address, 0));
  }

  /** Connections closed, and requests answered 503, at once for lack of a reader slot. */
  long readsRefused() {
    return readsRefused.get();
  }

  /** Requests answered 503 because the body budget could not give them their share. */
  long bodyBudgetRefused() {
    return bodyBudgetRefused.get();
  }

  /** The bytes of the body budget not held by requests now (being read, or accepted). */
  long bodyBudgetAvailable() {
    return bodies.available();
  }

  /** The body budget's bytes. */
  long bodyBudget() {
    return bodies.capacity();
  }

  /** Streamed requests cancelled because a write to their client failed. */
  long streamsCancelled() {
    return streamsCancelled.get();
  }

  /**
   * Requests answered 500 (their stream's {@code internal} error event, after its first event),
   * or whose connection was closed, for a failure of the endpoint's own: a handler, a write, a
   * tokenization's timeout or a stream that threw, an answer no writer thread could take; and
   * streams whose writer could not hand their rest to another writer thread, and wrote it on,
   * and tokenizations that could not be tracked once their tokens had come, their requests
   * answered as those made them.
   */
  long internalErrors() {
    return ownFailures.count();
  }

  /** Client connections closed for stalling mid-request or not reading their answer. */
  long slowConnectionsClosed() {
    return slowConnectionsClosed.get();
  }

  /**
   * Every counter and gauge, read now: the node's, the process's others ({@code extraStats}),
   * this endpoint's; and this endpoint's latency histograms. {@code /v1/stats} and
   * {@code /metrics} both write these ({@code /v1/stats} leaves the histograms out).
   */
  List<StatsTable.Section<?>> sections() {
    List<StatsTable.Section<?>> all = new ArrayList<>();
    NodeStats stats = node.stats();
    all.add(StatsTables.NODE.section(null, stats));
    all.add(StatsTables.GOSSIP.section("gossip", stats.gossip()));
    all.addAll(extraStats.get());
    all.add(StatsTables.CLIENT.section("client", new StatsTables.ClientStats(inFlight.get(),
        rejectedBusy.get(), rejectedInvalid.get(), rejectedNotFound.get(),
        slowConnectionsClosed.get(), readsRefused.get(), openStreams.size(),
        streamsCancelled.get(), tokenizeFailures.get(), tokenizeRefused.get(),
        refusedWithoutCertificate.get(), bodies.capacity() - bodies.available(),
        bodyBudgetRefused.get(), ownFailures.count())));
    all.add(StatsTables.CLIENT_LATENCY.section(null, latency.snapshot()));
    return all;
  }

  private void stats(HttpExchange ex) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (StatsTable.Section<?> s : sections()) {
      if (s.key() == null) {
        m.putAll(s.json());
      } else {
        m.put(s.key(), s.json());
      }
    }
    respond(ex, 200, m);
  }

  /** The node's part of {@code /v1/stats}. */
  static Map<String, Object> statsJson(NodeStats s) {
    return StatsTables.NODE.json(s);
  }

  /** Every section in Prometheus' text format. */
  String metricsText() {
    PrometheusText out = new PrometheusText();
    for (StatsTable.Section<?> s : sections()) {
      s.metrics(out);
    }
    return out.toString();
  }

  private void metrics(HttpExchange ex) {
    byte[] b;
    int status = 200;
    String type = PrometheusText.CONTENT_TYPE;
    try {
      b = metricsText().getBytes(StandardCharsets.UTF_8);
    } catch (Throwable e) { // a stats source that failed, an Error too: logged, never sent
      failedHere(e, "cannot write {}", METRICS);
      status = 500;
      type = "text/plain; charset=utf-8";
      b = INTERNAL_ERROR_MESSAGE.getBytes(StandardCharsets.UTF_8);
    }
    send(ex, status, type, b);
  }

  private static void respond(HttpExchange ex, int status, Map<String, ?> body) {
    byte[] b;
    try {
      b = Json.write(body).getBytes(StandardCharsets.UTF_8);
    } catch (RuntimeException e) { // a value JSON cannot carry (a lone surrogate in a text)
      log.warn("cannot write the answer to {} as JSON: {}", ex.getRequestURI(), e.getMessage());
      status = 500;
      b = "{\"error\":\"the answer cannot be written as JSON\"}".getBytes(StandardCharsets.UTF_8);
    }
    send(ex, status, "application/json", b);
  }

  /** Answers {@code ex} (headers only for HEAD) and closes it; a client gone is logged. */
  private static void send(HttpExchange ex, int status, String contentType, byte[] b) {
    try (ex) {
      ex.getResponseHeaders().add("Content-Type", contentType);
      if ("HEAD".equals(ex.getRequestMethod())) {
        ex.sendResponseHeaders(status, -1);
        return;
      }
      ex.sendResponseHeaders(status, b.length);
      try (OutputStream out = ex.getResponseBody()) {
        out.write(b);
      }
    } catch (IOException | RuntimeException e) {
      log.debug("could not answer client {}: {}", ex.getRemoteAddress(), e.toString());
    }
  }
}
