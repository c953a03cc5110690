package io.github.prefixrouter.server;

import io.github.prefixrouter.internal.Durations;
import io.github.prefixrouter.internal.SecretText;
import io.github.prefixrouter.internal.ShortText;
import io.github.prefixrouter.internal.json.AnswerHeap;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.internal.json.OpenAiErrors;
import io.github.prefixrouter.internal.wire.BodyBudget;
import io.github.prefixrouter.internal.wire.CappedBody;
import io.github.prefixrouter.internal.wire.JdkHttpClients;
import io.github.prefixrouter.internal.wire.RetriedExchange;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Tokenizes with the model server's own tokenizer: vLLM's {@code POST /tokenize} (SGLang serves
 * the same for text prompts), so the ids are exactly those the server would compute from the
 * text, and a chat conversation is rendered by the model's own chat template. An SGLang whose
 * {@code /tokenize} requires {@code prompt} and reads no {@code messages} refuses every
 * conversation with a validation error naming {@code prompt}, HTTP 400: the tokenizer's fault,
 * as the conversation's body has none (docs/deployment.md, "Text and chat").
 *
 * <ul>
 *   <li>A text prompt is sent as {@code {"model", "prompt", "add_special_tokens": true}} (the
 *       special tokens a completion prompt gets, a BOS say); a conversation as
 *       {@code {"model", "messages", "add_generation_prompt": true, "chat_template_kwargs"}} (the
 *       template adds its own special tokens). {@code model} is the client's (a LoRA adapter's
 *       name is accepted by vLLM and tokenizes as its base model), omitted when empty.
 *   <li>The answer must be a JSON object with {@code tokens}, an array of non-negative ids (at
 *       least one: none are the request's fault for a text prompt of white space at most, and
 *       the tokenizer's for any other prompt or conversation, which has tokens: the endpoint did
 *       not read it, as llama.cpp's {@code /tokenize}, which reads {@code content}, does not);
 *       {@code count}, when present, must be their number, and {@code max_model_len}, when
 *       present, a positive integer (the model's context length).
 *   <li>Failures: a 4xx answer other than 401, 403, 405, 408, 429 and a 404 that is not in
 *       OpenAI's error shape naming a model ({@link OpenAiErrors#namesModel}: a framework's
 *       {@code {"detail":"Not Found"}}, a proxy's page or its JSON, OpenAI's {@code "Invalid
 *       URL"}) is the request's fault ({@link TokenizeException#invalidRequest()}: a malformed
 *       conversation, an unknown model), with the server's own message, but a conversation's
 *       validation error naming {@code prompt} ({@link #requiresPrompt}: the endpoint reads no
 *       conversations); everything else (not
 *       reachable, a request the HTTP client cannot send or that cannot be written, whatever is
 *       thrown there, an {@link Error} too, a 5xx, the node's key refused or missing, which the
 *       message says naming the key's flag and variable but never the key, and which is logged
 *       once, no such endpoint, no answer within the timeout, an answer above the size cap or
 *       not of the shape above, one that would take more heap once parsed than 16 MiB and 6
 *       bytes a character, which token ids never pass, one whose parse throws, an
 *       {@link Error} too) is the tokenizer's. A request whose try fails with an I/O error
 *       before any byte of the answer came (the server closed the pooled
 *       connection as idle as the request was written to it: uvicorn, which serves vLLM and
 *       SGLang, closes a connection idle for 5 s) is first sent again, at once and once, on a
 *       new connection, within what is left of the timeout, and counted
 *       ({@link Stats#connectionRetries}). An answer that cannot get its
 *       share of the answer budget is neither's: this node is short of heap for a while
 *       ({@link TokenizeException#budgetRefused()}; the client port answers 503 with
 *       {@code Retry-After}).
 * </ul>
 *
 * <p>Memory: the answers being read and parsed at once hold at most the answer budget of heap
 * together: by default {@link #answerBudget} of the cap, what one answer at the cap can take;
 * given a budget ({@code --tokenizer-answer-budget}), the cap is the largest one answer at
 * which fits it ({@link #maxAnswerBytes(long)}). Each takes its share as it needs it, as
 * the engine's answers take theirs of its answer budget: its body as its bytes arrive (in steps
 * from 64 KiB, each twice the last, up to its {@code Content-Length} or the cap), then two bytes
 * per byte of it for its text, then its parse's estimate as the parse charges it (an error
 * answer's parse too); it gives all of it back when its tokenization ends, however it ends
 * (tokens, a failure, the timeout, {@link #close()}, or its caller cancelling its future, which
 * also cancels the exchange and closes its connection). An answer whose next step does not come
 * free waits, holding one of the tokenizer's threads, while other answers give theirs back,
 * and fails once none has for 1 s (or the timeout, if shorter), its connection closed, with a
 * {@link TokenizeException} that says so ({@link TokenizeException#budgetRefused()}): not the
 * tokenizer's fault (it answered) nor the request's, but this node's own shortage of heap, which
 * the client port answers 503 with {@code Retry-After} as it does a request body its body budget
 * refuses (it used to be the tokenizer's fault, answered 502). The first such failure is logged,
 * and no other until a tokenization passes.
 *
 * <p>Thread-safe. Requests go out on the JDK HTTP client, whose answers are handled on the
 * tokenizer's own threads ({@code prefix-router-tokenizer-<n>-<k>}, at most
 * {@link #THREADS}, ended when idle for a while); the caller never waits. {@link #close()} ends
 * those threads and the client's {@code HttpClient-<n>-SelectorManager}: JDK 17's HTTP client
 * cannot be closed, and the threads of its default executor, then its selector thread,
 * lingered after the node stopped until the client was garbage-collected.
 */
final class EngineTokenizer implements PromptTokenizer {

  /**
   * The default cap on an answer, and the largest {@link #maxAnswerBytes(long)} gives: a prompt
   * of the client endpoint's 8 MiB body, tokenized.
   */
  static final int DEFAULT_MAX_ANSWER_BYTES = 64 << 20;
  /**
   * The default {@linkplain #answerBudget answer budget}, that of
   * {@link #DEFAULT_MAX_ANSWER_BYTES}: 592 MiB ({@code --tokenizer-answer-budget}'s default).
   */
  static final long DEFAULT_ANSWER_BUDGET = answerBudget(DEFAULT_MAX_ANSWER_BYTES);
  /**
   * The smallest answer budget {@code --tokenizer-answer-budget} takes: that of a cap of 1 MiB,
   * 25 MiB, so that one answer of an ordinary prompt's tokens always passes.
   */
  static final long MIN_ANSWER_BUDGET = answerBudget(1 << 20);
  /** The longest part of a server's error message passed on to the client. */
  static final int MAX_MESSAGE_CHARS = 1_000;
  /**
   * How long an answer waits for its next share of the {@linkplain #answerBudget answer budget}
   * while no other answer gives any back, before it fails (or the timeout, if shorter).
   */
  static final Duration ANSWER_BUDGET_WAIT = Duration.ofSeconds(1);

  private final URI uri;
  private final String apiKey;
  private final Duration timeout;
  private final int maxAnswerBytes;
  /** The heap the answers being read and parsed may hold at once ({@link #answerBudget}). */
  private final BodyBudget answers;
  /** Whether answers are being refused their share of {@link #answers}: logged once a spell. */
  private final AtomicBoolean refusing = new AtomicBoolean();
  private final JdkHttpClients.Client client;
  /** Runs the HTTP client's work (answers, their parsing); shut down by {@link #close()}. */
  private final ThreadPoolExecutor executor;
  private final String threadNamePrefix;
  private volatile boolean closed;
  /** The tokenizations in flight and their exchanges, until the tokenizations have ended. */
  private final Map<CompletableFuture<Tokenized>, CompletableFuture<?>> inFlight =
      new ConcurrentHashMap<>();
  /** Whether a refusal of every conversation ({@link #requiresPrompt}) was logged: once. */
  private final AtomicBoolean chatRefusalLogged = new AtomicBoolean();
  /** Whether a 401 or 403 was logged: once per tokenizer. */
  private final AtomicBoolean keyRefusalLogged = new AtomicBoolean();
  /**
   * Tokenizations sent a second time, at once, on a new connection, because their first try
   * lost its connection before any answer came ({@link RetriedExchange}).
   */
  private final LongAdder connectionRetries = new LongAdder();

  private static final Logger log = LoggerFactory.getLogger(EngineTokenizer.class);

  /** The most threads handling answers at once. */
  static final int THREADS = Math.max(2, Math.min(8, Runtime.getRuntime().availableProcessors()));
  private static final AtomicInteger INSTANCES = new AtomicInteger();

  /**
   * @param uri the tokenize endpoint, for example {@code http://127.0.0.1:8000/tokenize}
   *     ({@link #tokenizeUri} of the engine's base URL)
   * @param apiKey sent as {@code Authorization: Bearer}, or null
   * @param connectTimeout how long connecting may take; beyond 2^63 ns (about 292 years), 2^63 ns
   * @param timeout how long a whole exchange may take; beyond 2^63 ns, 2^63 ns
   * @param maxAnswerBytes the largest answer accepted; the answers being read and parsed at
   *     once hold at most {@link #answerBudget} of it together
   * @throws IllegalArgumentException if a duration is not positive or the cap is below 1
   */
  EngineTokenizer(URI uri, String apiKey, Duration connectTimeout, Duration timeout,
      int maxAnswerBytes) {
    this(uri, apiKey, connectTimeout, timeout, maxAnswerBytes, answerBudget(maxAnswerBytes));
  }

  /**
   * As {@link #EngineTokenizer(URI, String, Duration, Duration, int)}, with an answer budget of
   * its own ({@code --tokenizer-answer-budget}; the cap is then {@link #maxAnswerBytes(long)} of
   * it).
   *
   * @param answerBudget the heap the answers being read and parsed may hold at once, at least
   *     {@link #answerBudget} of {@code maxAnswerBytes}, so that one answer alone always passes
   * @throws IllegalArgumentException if a duration is not positive, the cap is below 1 or the
   *     budget below the cap's
   */
  EngineTokenizer(URI uri, String apiKey, Duration connectTimeout, Duration timeout,
      int maxAnswerBytes, long answerBudget) {
    if (connectTimeout.isNegative() || connectTimeout.isZero() || timeout.isNegative()
        || timeout.isZero()) {
      throw new IllegalArgumentException("timeouts must be positive");
    }
    if (maxAnswerBytes < 1) {
      throw new IllegalArgumentException("maxAnswerBytes must be positive, was " + maxAnswerBytes);
    }
    if (answerBudget < answerBudget(maxAnswerBytes)) {
      throw new IllegalArgumentException("answerBudget must be at least "
          + answerBudget(maxAnswerBytes) + " bytes with maxAnswerBytes " + maxAnswerBytes
          + " (one answer at the cap: its body, its text and its parse), was " + answerBudget);
    }
    this.uri = uri;
    this.apiKey = apiKey;
    // at most 2^63 ns (292 years), "never" here: the JDK's HTTP client fails a request or a
    // connection whose timeout its clock cannot add up, and Duration.toNanos() throws beyond it
    this.timeout = Duration.ofNanos(Durations.saturatedNanos(timeout));
    this.maxAnswerBytes = maxAnswerBytes;
    this.answers = new BodyBudget(answerBudget,
        this.timeout.compareTo(ANSWER_BUDGET_WAIT) < 0 ? this.timeout : ANSWER_BUDGET_WAIT,
        this::answerRefused);
    this.threadNamePrefix = "prefix-router-tokenizer-" + INSTANCES.incrementAndGet() + "-";
    AtomicInteger threads = new AtomicInteger();
    this.executor = new ThreadPoolExecutor(THREADS, THREADS, 30, TimeUnit.SECONDS,
        new LinkedBlockingQueue<>(), r -> {
          Thread t = new Thread(r, threadNamePrefix + threads.incrementAndGet());
          t.setDaemon(true);
          return t;
        });
    executor.allowCoreThreadTimeOut(true);
    // JDK 17's client cannot be closed: built so, its selector thread ends with close()
    this.client = JdkHttpClients.build(HttpClient.newBuilder()
        .version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(Duration.ofNanos(Durations.saturatedNanos(connectTimeout)))
        .followRedirects(HttpClient.Redirect.NEVER)
        .executor(executor), threadNamePrefix + "build");
  }

  /**
   * The heap the answers being read and parsed may hold at once, all tokenizations together:
   * what one answer at the cap can take, so that one answer alone always passes: its body, its
   * text (two bytes per byte of it) and its parse ({@link AnswerHeap#maxParsedBytes}: 16 MiB
   * and 6 bytes a character), 16 MiB and 9 bytes per byte of the cap; 592 MiB for
   * {@link #DEFAULT_MAX_ANSWER_BYTES}.
   *
   * @param maxAnswerBytes the largest answer accepted
   * @return the budget, in bytes
   */
  static long answerBudget(int maxAnswerBytes) {
    return AnswerHeap.maxParsedBytes(maxAnswerBytes) + 3L * maxAnswerBytes;
  }

  /**
   * The cap on an answer that an answer budget allows: the largest whose
   * {@link #answerBudget} fits in it, so that one answer at the cap alone always passes, at most
   * {@link #DEFAULT_MAX_ANSWER_BYTES} (a budget above that cap's lets more answers be read at
   * once, not larger ones). A prompt whose tokens' answer is longer than the cap fails as the
   * tokenizer's fault (the answer too large): at {@link #MIN_ANSWER_BUDGET}, a cap of 1 MiB,
   * about 150,000 ids of six digits (seven bytes each, with the comma).
   *
   * @param answerBudget the budget, at least {@link #answerBudget} of a cap of one byte
   * @return the cap, in bytes
   * @throws IllegalArgumentException if not even an answer of one byte fits the budget
   */
  static int maxAnswerBytes(long answerBudget) {
    if (answerBudget < answerBudget(1)) {
      throw new IllegalArgumentException("answerBudget must be at least " + answerBudget(1)
          + " bytes, was " + answerBudget);
    }
    int fits = 1; // answerBudget(fits) <= answerBudget, and it grows with the cap
    int above = DEFAULT_MAX_ANSWER_BYTES + 1;
    while (above - fits > 1) {
      int mid = fits + (above - fits) / 2;
      if (answerBudget(mid) <= answerBudget) {
        fits = mid;
      } else {
        above = mid;
      }
    }
    return fits;
  }

  /** The largest answer accepted, in bytes. */
  int maxAnswerBytes() {
    return maxAnswerBytes;
  }

  /** The bytes of the answer budget not held by answers now. For tests. */
  long answerBudgetAvailable() {
    return answers.available();
  }

  /**
   * What the tokenizer reports in {@code /v1/stats} and {@code /metrics} ({@code tokenizer}).
   * Its refusals are counted where they are answered, in the client endpoint's
   * {@code rejected_busy}.
   *
   * @param answerBudgetBytes the heap the answers being read and parsed may hold at once, in
   *     bytes ({@code --tokenizer-answer-budget})
   * @param answerBudgetHeldBytes the heap those answers hold now, in bytes: their bodies, texts
   *     and parses, taken from the answer budget
   * @param connectionRetries tokenizations sent a second time, at once, on a new connection,
   *     because their first try lost its connection before any answer came (the server closed a
   *     pooled connection as idle as the request was written to it)
   */
  record Stats(long answerBudgetBytes, long answerBudgetHeldBytes, long connectionRetries) {}

  /** A snapshot for {@code /v1/stats} and {@code /metrics}; thread-safe. */
  Stats stats() {
    long budget = answers.capacity();
    return new Stats(budget, budget - answers.available(), connectionRetries.sum());
  }

  /** The names of this tokenizer's threads begin with this. */
  String threadNamePrefix() {
    return threadNamePrefix;
  }

  /**
   * Ends this tokenizer's threads, the HTTP client's selector thread included, then those
   * handling answers, after the work they were given (at most a few seconds; then they are
   * interrupted). A tokenization still in progress fails at once as the tokenizer's fault, saying
   * the tokenizer is closed, its connection closed; tokenizing afterwards fails alike. Call it
   * once nothing waits for a tokenization any more (the client endpoint stopped).
   */
  @Override
  public void close() {
    closed = true;
    // the selector also keeps the client's timeouts: a call whose answer's headers had not come
    // would never complete, and one whose body stalled would end only at the tokenizer's own
    // timeout; each fails now and its exchange, cancelled, closes its connection
    inFlight.forEach(EngineTokenizer::endClosed);
    // JDK 17's client cannot be closed: its selector ran until the client was garbage collected
    client.end();
    executor.shutdown();
    try {
      if (!executor.awaitTermination(2, TimeUnit.SECONDS)) {
        executor.shutdownNow();
      }
    } catch (InterruptedException e) {
      executor.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  /**
   * The tokenize endpoint of an OpenAI-compatible server's base URL ({@code --engine}): the base
   * without a trailing {@code /} or {@code /v1}, then {@code /tokenize}.
   */
  static URI tokenizeUri(String engineBaseUrl) {
    String base = engineBaseUrl;
    if (base.endsWith("/")) {
      base = base.substring(0, base.length() - 1);
    }
    if (base.endsWith("/v1")) {
      base = base.substring(0, base.length() - 3);
    }
    return URI.create(base + "/tokenize");
  }

  /** The endpoint asked. */
  URI uri() {
    return uri;
  }

  @Override
  public CompletableFuture<Tokenized> tokenize(String model, String prompt) {
    return tokenize(model, prompt, Heap.UNCOUNTED);
  }

  @Override
  public CompletableFuture<Tokenized> tokenizeChat(String model,
      List<Map<String, Object>> messages, Map<String, Object> chatTemplateKwargs) {
    return tokenizeChat(model, messages, chatTemplateKwargs, Heap.UNCOUNTED);
  }

  /**
   * {@inheritDoc} The copies taken from {@code heap}: the JSON text of the request sent (one
   * byte a character when every character is Latin-1, else two) and its UTF-8 bytes, which the
   * request holds until it is answered.
   */
  @Override
  public CompletableFuture<Tokenized> tokenize(String model, String prompt, Heap heap) {
    Map<String, Object> body = new LinkedHashMap<>();
    if (model != null && !model.isEmpty()) {
      body.put("model", model);
    }
    body.put("prompt", prompt);
    body.put("add_special_tokens", true);
    return post(body, prompt.isBlank(), false, heap);
  }

  /**
   * {@inheritDoc} The copies taken from {@code heap} as by
   * {@link #tokenize(String, String, Heap)}.
   */
  @Override
  public CompletableFuture<Tokenized> tokenizeChat(String model,
      List<Map<String, Object>> messages, Map<String, Object> chatTemplateKwargs, Heap heap) {
    Map<String, Object> body = new LinkedHashMap<>();
    if (model != null && !model.isEmpty()) {
      body.put("model", model);
    }
    body.put("messages", messages);
    body.put("add_generation_prompt", true);
    if (chatTemplateKwargs != null && !chatTemplateKwargs.isEmpty()) {
      body.put("chat_template_kwargs", chatTemplateKwargs);
    }
    return post(body, false, true, heap);
  }

  /** The heap a string of {@code text}'s characters takes: a byte each if all are Latin-1. */
  static long stringBytes(String text) {
    for (int i = 0; i < text.length(); i++) {
      if (text.charAt(i) > 0xFF) {
        return 2L * text.length();
      }
    }
    return text.length();
  }

  /** The bytes of {@code text} in UTF-8 (a lone surrogate, which JSON refuses, as 3). */
  static long utf8Bytes(String text) {
    long n = 0;
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c < 0x80) {
        n++;
      } else if (c < 0x800) {
        n += 2;
      } else if (Character.isHighSurrogate(c) && i + 1 < text.length()
          && Character.isLowSurrogate(text.charAt(i + 1))) {
        n += 4;
        i++;
      } else {
        n += 3;
      }
    }
    return n;
  }

  /**
   * Sends {@code body}; {@code blank}: it is a text prompt of white space at most, which may
   * have no tokens (the request's fault then), where any other has some; {@code chat}: it is a
   * conversation ({@code messages}, no {@code prompt}).
   */
  private CompletableFuture<Tokenized> post(Map<String, Object> body, boolean blank, boolean chat,
      Heap heap) {
    if (closed) {
      return CompletableFuture.failedFuture(closedFault());
    }
    String json;
    try {
      json = Json.write(body);
    } catch (RuntimeException e) { // a value JSON cannot carry: the client's prompt
      return CompletableFuture.failedFuture(
          new TokenizeException("cannot send the prompt to " + uri + ": " + e.getMessage(), true, e));
    } catch (Throwable e) { // an Error (the heap running out as the body is written): not the
      // prompt's fault; the future fails, as PromptTokenizer promises, rather than tokenize throw
      return CompletableFuture.failedFuture(fault("cannot write the request to " + uri + ": " + e, e));
    }
    // the copies held until the request is answered, taken as they are made; what heap throws
    // (the client port's body budget refusing them) is thrown on, nothing sent
    heap.take(stringBytes(json));
    heap.take(utf8Bytes(json));
    byte[] bytes = json.getBytes(StandardCharsets.UTF_8);
    HttpRequest request;
    try {
      HttpRequest.Builder b = HttpRequest.newBuilder(uri)
          .timeout(timeout)
          .header("Content-Type", "application/json")
          .header("Accept", "application/json")
          .POST(HttpRequest.BodyPublishers.ofByteArray(bytes));
      if (apiKey != null) {
        b.header("Authorization", "Bearer " + apiKey);
      }
      request = b.build();
    } catch (Throwable e) { // a URL the HTTP client cannot use: this node's setting; an Error too
      return CompletableFuture.failedFuture(fault("cannot send to " + uri + ": " + e, e));
    }
    // what the answer holds of the answer budget, given back however the tokenization ends
    BodyBudget.Share share = answers.share();
    CompletableFuture<HttpResponse<byte[]>> call;
    try {
      // sent once more on a new connection when the server closed a pooled one as idle as the
      // request was written to it (RetriedExchange): the server never read it; counted
      call = RetriedExchange.send(client.http(), request, info -> CappedBody.orFail(info,
              maxAnswerBytes,
              what -> new TokenizeException("tokenizer failed: its " + what, false, null), share),
          timeout.toNanos(), () -> !closed, connectionRetries::increment).future();
    } catch (Throwable e) { // an Error too (of the host's proxy selector, which the client asks
      // as it sends, say), a VirtualMachineError included: the future fails, its share closed
      share.close();
      return CompletableFuture.failedFuture(fault("cannot send to " + uri + ": " + e, e));
    }
    CompletableFuture<Tokenized> result = new CompletableFuture<>();
    inFlight.put(result, call);
    result.whenComplete((t, e) -> {
      inFlight.remove(result);
      share.close(); // also when the caller cancelled its future, which handle() then skips
    });
    if (closed) { // closed as it was sent: the client's selector may have ended before it came
      endClosed(result, call);
    }
    call.whenComplete((resp, err) -> {
      if (err != null) {
        Throwable c = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
        result.completeExceptionally(failure(c));
        return;
      }
      try {
        result.complete(parse(resp.statusCode(), resp.body(), blank, chat, share));
      } catch (TokenizeException e) {
        result.completeExceptionally(e);
      } catch (Throwable e) { // an Error too (the heap running out as the answer is parsed): lost
        // in the client's future, the tokenization would end only at its timeout, as no answer
        result.completeExceptionally(fault("cannot read the answer of " + uri + ": " + e, e));
      }
    });
    // the request's timeout covers the exchange up to the answer's headers; this covers its body
    result.orTimeout(timeout.toNanos(), TimeUnit.NANOSECONDS).whenComplete((t, e) -> {
      if (e != null) {
        call.cancel(true);
      }
    });
    CompletableFuture<Tokenized> answer = result.handle((t, e) -> {
      share.close(); // before the caller's future completes (closed twice, it gives nothing)
      if (e == null) {
        refusing.set(false); // a tokenization passed: a later refusal is logged again
        return t;
      }
      Throwable c = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
      throw c instanceof TokenizeException te ? te : failure(c);
    });
    // a caller that cancels its future (the client endpoint's timeout) ends the tokenization:
    // its exchange is cancelled, closing its connection, and its share given back
    answer.whenComplete((t, e) -> {
      if (answer.isCancelled()) {
        result.cancel(true);
      }
    });
    return answer;
  }

  private TokenizeException failure(Throwable c) {
    if (c instanceof TokenizeException te) {
      return te;
    }
    if (c instanceof BodyBudget.Refused refused) {
      return refusedShare(refused);
    }
    if (c instanceof HttpConnectTimeoutException) {
      return fault("cannot connect to " + uri + " in time", c);
    }
    if (c instanceof HttpTimeoutException || c instanceof TimeoutException) {
      return new TokenizeException("tokenizer failed: no answer from " + uri + " within "
          + timeout.toMillis() + " ms", false, true, c);
    }
    return fault("cannot reach " + uri + ": " + c, c);
  }

  /** An answer was refused its next share of the answer budget: logged once a spell. */
  private void answerRefused() {
    if (refusing.compareAndSet(false, true)) {
      log.warn("tokenizations at {} are refused (their requests answered 503): the heap the "
          + "tokenizer gives the answers being read and parsed ({} bytes, "
          + "--tokenizer-answer-budget) is held by other answers; not logged again until a "
          + "tokenization passes", uri, answers.capacity());
    }
  }

  /**
   * The failure of an answer refused its next share of the answer budget: this node's shortage
   * of heap, neither the tokenizer's fault nor the request's
   * ({@link TokenizeException#budgetRefused()}).
   */
  private TokenizeException refusedShare(BodyBudget.Refused e) {
    return new TokenizeException("the answer of " + uri + " could not get its share of the heap "
        + "the tokenizer gives the answers being read and parsed (" + answers.capacity()
        + " bytes): other answers held it", false, false, true, e);
  }

  /** Fails a tokenization in flight as closed and cancels its exchange, closing its connection. */
  private static void endClosed(CompletableFuture<Tokenized> result, CompletableFuture<?> call) {
    result.completeExceptionally(closedFault());
    call.cancel(true);
  }

  private static TokenizeException closedFault() {
    return new TokenizeException("tokenizer failed: the tokenizer is closed (the node stops)",
        false, null);
  }

  private TokenizeException fault(String message, Throwable cause) {
    return new TokenizeException("tokenizer failed: " + message, false, cause);
  }

  /** The ids of a 200 answer, or the failure an error answer says. */
  Tokenized parse(int status, byte[] body) {
    return parseWithin(status, body, true, false, null);
  }

  /**
   * As {@link #parse(int, byte[])}, taking the heap of the answer's text and its parse from
   * {@code share}.
   */
  private Tokenized parse(int status, byte[] body, boolean blank, boolean chat,
      BodyBudget.Share share) {
    try {
      return parseWithin(status, body, blank, chat, share::take);
    } catch (BodyBudget.Refused e) {
      throw refusedShare(e);
    }
  }

  /**
   * The ids of a 200 answer, or the failure an error answer says, taking the heap of its text
   * and its parse from {@code memory} (null: from nowhere), whose failure is thrown on. No ids
   * are the request's fault for a {@code blank} prompt, else the tokenizer's: it did not read
   * the prompt. A validation error of a {@code chat} tokenization that names {@code prompt}
   * ({@link #requiresPrompt}) is the tokenizer's fault: it reads no conversation.
   */
  private Tokenized parseWithin(int status, byte[] body, boolean blank, boolean chat,
      Json.Memory memory) {
    if (memory != null) {
      memory.take(2L * body.length); // its text: two bytes a character at most
    }
    String text = new String(body, StandardCharsets.UTF_8);
    if (status != 200) {
      Object error = errorBody(text, memory);
      String message = serverMessage(error, text, apiKey);
      boolean noEndpoint = status == 405 || status == 404 && !OpenAiErrors.namesModel(error);
      boolean requestsFault = status >= 400 && status < 500 && !noEndpoint
          && status != 401 && status != 403 && status != 408 && status != 429;
      if (requestsFault && chat && requiresPrompt(error, text)) {
        // the conversation's body has no prompt: the endpoint requires one, and reads no
        // messages (an SGLang or a vLLM from before chat tokenization), whatever the conversation
        TokenizeException f = fault(uri + " answered " + status + (message.isEmpty() ? ""
            : ": " + message) + NO_CONVERSATIONS, null);
        if (!chatRefusalLogged.getAndSet(true)) {
          // without the server's words, which may echo the client's conversation
          log.warn("tokenizer failed: {} answered {} to a conversation{} (logged once; every "
              + "chat request fails so)", uri, status, NO_CONVERSATIONS);
        }
        throw f;
      }
      if (requestsFault) {
        throw invalid(message);
      }
      boolean keyRefused = status == 401 || status == 403;
      TokenizeException f = fault(uri + " answered " + status
          + (noEndpoint ? " (no tokenize endpoint there)" : "")
          + (message.isEmpty() ? "" : ": " + message) + (keyRefused ? keyRefused() : ""), null);
      if (keyRefused && !keyRefusalLogged.getAndSet(true)) {
        // for the operator, whom the clients' answers do not reach; once, not at the request rate
        log.warn("{} (logged once; every text prompt and chat fails so until the key is right)",
            f.getMessage());
      }
      throw f;
    }
    Object root;
    try {
      root = Json.parse(text, maxAnswerBytes, 4, AnswerHeap.maxParsedBytes(text.length()),
          memory);
    } catch (Json.ParsedSizeException e) {
      throw fault(AnswerHeap.tooLarge("the answer of " + uri, e, "token ids"), e);
    } catch (BodyBudget.Refused e) {
      throw e;
    } catch (RuntimeException e) {
      throw fault("the answer of " + uri + " is not JSON: " + e.getMessage(), e);
    }
    try {
      int[] tokens = Json.asIntArray(Json.member(root, "tokens"), "tokens");
      for (int i = 0; i < tokens.length; i++) {
        if (tokens[i] < 0) {
          throw new Json.JsonException("tokens[" + i + "] is negative: " + tokens[i], -1);
        }
      }
      Object count = Json.member(root, "count");
      if (count != null && Json.asInt(count, "count") != tokens.length) {
        throw new Json.JsonException("count " + count + " is not the number of tokens, "
            + tokens.length, -1);
      }
      int maxModelLen = -1;
      Object m = Json.member(root, "max_model_len");
      if (m != null && m != Json.NULL) {
        maxModelLen = Json.asInt(m, "max_model_len");
        if (maxModelLen < 1) {
          throw new Json.JsonException("max_model_len must be positive, was " + maxModelLen, -1);
        }
      }
      if (tokens.length == 0 && blank) {
        throw invalid("the prompt is empty: it has no tokens");
      }
      if (tokens.length == 0) {
        // a prompt with text, or a conversation, has tokens: the endpoint did not read it
        throw fault(uri + " answered no tokens for a prompt that is not blank: it does not "
            + "read a vLLM-style body ({\"prompt\"} or {\"messages\"}; llama.cpp's /tokenize "
            + "reads {\"content\"}): point --tokenizer at a vLLM-style /tokenize of the same "
            + "model, or send token ids", null);
      }
      return new Tokenized(tokens, maxModelLen);
    } catch (Json.JsonException e) {
      throw fault("unusable answer from " + uri + ": " + e.getMessage(), e);
    }
  }

  /**
   * What a 401 or 403 means here, as the node's health check says it: the server refuses this
   * node's key, or its lack of one; where to give it. Never the key.
   */
  private String keyRefused() {
    return apiKey != null
        ? "; the server refuses the API key given: give the server's key with "
            + "--engine-api-key-file FILE or env " + NodeOptions.ENGINE_API_KEY_ENV
        : "; the server refuses requests without an API key: give the server's key with "
            + "--engine-api-key-file FILE or env " + NodeOptions.ENGINE_API_KEY_ENV
            + " (sent to a --tokenizer URL only on --engine's scheme, host and port)";
  }

  /** What a tokenizer that reads no conversation is told to do, after the server's words. */
  static final String NO_CONVERSATIONS = " (its /tokenize reads no conversation: it requires "
      + "\"prompt\" and no \"messages\", as an SGLang or a vLLM from before chat tokenization "
      + "does; point --tokenizer at a vLLM-style /tokenize of the same model and chat template, "
      + "or apply the template in the client and send token ids)";

  /** A validation error's text naming the body's {@code prompt} (Python's or pydantic's words). */
  private static final Pattern PROMPT_NAMED = Pattern.compile(
      "'loc': \\('body', 'prompt'\\)|(?m)^(body -> )?prompt\\R\\s+[Ff]ield required");

  /**
   * Whether an error answer ({@code error}, its body parsed, or null; {@code body}, its text) is
   * a validation error naming the request body's {@code prompt}: FastAPI's {@code detail} with
   * an error at {@code ["body", "prompt"]} (its own 422), or a message that names it as Python
   * or pydantic write it ({@code 'loc': ('body', 'prompt')}, what SGLang's and vLLM's 400s for a
   * validation error carry; {@code prompt} or {@code body -> prompt} then {@code Field
   * required}). A conversation's body has no {@code prompt}: a server that names it requires
   * one.
   */
  static boolean requiresPrompt(Object error, String body) {
    if (Json.path(error, "detail") instanceof List<?> details) {
      for (Object d : details) {
        if (Json.path(d, "loc") instanceof List<?> loc && loc.equals(List.of("body", "prompt"))) {
          return true;
        }
      }
    }
    String m = Json.path(error, "error", "message") instanceof String s ? s
        : Json.path(error, "message") instanceof String s ? s
        : error == null ? body : null;
    return m != null && PROMPT_NAMED.matcher(m).find();
  }

  private static TokenizeException invalid(String message) {
    return new TokenizeException(message.isEmpty() ? "the tokenizer refused the prompt" : message,
        true, null);
  }

  /**
   * An error answer's body as JSON, or null when it is not JSON; its parse takes its heap from
   * {@code memory} (null: from nowhere), whose failure is thrown on.
   */
  private static Object errorBody(String body, Json.Memory memory) {
    try {
      return Json.parse(body, MAX_MESSAGE_CHARS * 64, 8, Long.MAX_VALUE, memory);
    } catch (BodyBudget.Refused refused) {
      throw refused;
    } catch (RuntimeException notJson) {
      return null;
    }
  }

  /**
   * The message of an error answer ({@code error}, its body parsed, or null; {@code body}, its
   * text): vLLM's {@code error.message} or {@code message}, FastAPI's {@code detail} (a string,
   * or validation errors' {@code msg}s), or the body itself; shortened to at most
   * {@link #MAX_MESSAGE_CHARS} chars and {@code ...} ({@link ShortText#prefix}: never between the
   * halves of a surrogate pair); without {@code apiKey} ({@link SecretText}: a proxy's page may
   * echo the key it refused), taken out before the cut.
   */
  static String serverMessage(Object error, String body, String apiKey) {
    String m = null;
    if (Json.path(error, "error", "message") instanceof String s) {
      m = s;
    } else if (Json.path(error, "message") instanceof String s) {
      m = s;
    } else if (Json.path(error, "detail") instanceof String s) {
      m = s;
    } else if (Json.path(error, "detail") instanceof List<?> l) {
      StringBuilder b = new StringBuilder();
      for (Object d : l) {
        if (Json.path(d, "msg") instanceof String s) {
          b.append(b.length() == 0 ? "" : "; ").append(s);
        }
      }
      m = b.toString();
    }
    if (m == null) {
      m = body.strip();
    }
    m = SecretText.without(m, apiKey);
    String cut = ShortText.prefix(m, MAX_MESSAGE_CHARS); // never half a surrogate pair
    return cut.length() == m.length() ? m : cut + "...";
  }
}
