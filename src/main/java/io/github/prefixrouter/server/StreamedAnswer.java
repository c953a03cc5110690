package io.github.prefixrouter.server;

import com.sun.net.httpserver.HttpExchange;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.internal.CountedFailureLog;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.internal.stop.StopMatcher;
import io.github.prefixrouter.internal.wire.IoDeadline;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One streamed answer of the client endpoint ({@code "stream": true}): the request's output as
 * server-sent events, written by the endpoint's writer threads, never by the thread that gives
 * a piece.
 *
 * <p>The node's {@link OutputListener} calls and the request's completion only queue what is to
 * be written (they never block) and hand this answer to a writer when none has it. A writer
 * takes what is queued at that moment (a batch), writes it under the endpoint's I/O deadline and
 * flushes; more queued meanwhile is another batch with a deadline of its own, so a client that
 * keeps reading is never cut off, and one that stops reading for longer than the deadline is
 * (its connection closed and counted as a slow connection). The answer is 200 with
 * {@code text/event-stream; charset=utf-8} from its first event on; a request that fails
 * before one was written (no piece, or only pieces its format shows nothing of) is answered
 * with the status a request that is not streamed would get. A write that fails
 * (the client is gone, or was cut off) cancels the request: the node's future is cancelled.
 *
 * <p>Events are rendered by a {@link Format}: the route's own ({@link RouteFormat}) or OpenAI's
 * chunks ({@link OpenAiAnswers.ChunkFormat}); the queueing, writing, deadlines and cancellation
 * here are the same for both. An empty piece is not rendered, and a text that ends in the first
 * half of a surrogate pair keeps that half for the next piece. The route's format: one
 * {@code data: {"id", "token_ids", "text"}} per piece; at the end, {@code data: } the answer a
 * request that is not streamed gets, its
 * {@code token_ids} and {@code text} only what no piece carried (normally nothing), then
 * {@code data: [DONE]}. A failure after the first piece is
 * {@code data: {"id", "error": {"message", "type", "status"}}} and the end of the stream, without
 * {@code [DONE]}.
 *
 * <p>Whatever is thrown as an event is rendered, as the answer is read or as events are sent,
 * an {@link Error} included (logged at ERROR), ends the stream as an exception does: the
 * internal error (its status answer before the first event, its error event after), or, as
 * events are sent, the exchange closed and the request cancelled; nothing is thrown on to the
 * writer or the node's thread. An answer the writers cannot take (their executor throws an
 * {@code Error}: a thread it cannot start) is given up: its connection is closed and its
 * request cancelled, the thread that hands it on not writing; a writer that cannot hand the
 * rest of an answer to another goes on writing it. Each such failure is reported to the
 * answer's {@link OwnFailure}, through which the endpoint counts it and bounds its log lines.
 */
final class StreamedAnswer implements OutputListener {

  private static final Logger log = LoggerFactory.getLogger(StreamedAnswer.class);
  /**
   * The events' type, naming their charset: without one, clients that follow HTTP's old default
   * for {@code text/} types (Python's {@code requests}) read the UTF-8 bytes as ISO-8859-1.
   */
  static final String CONTENT_TYPE = "text/event-stream; charset=utf-8";
  /** The last event of a stream that ended well. */
  static final byte[] DONE = "data: [DONE]\n\n".getBytes(StandardCharsets.US_ASCII);

  /** How a failed request is answered: the endpoint's status path. */
  interface FailureAnswer {
    /** Answers {@code ex} with the status, headers and body of {@code failure}, and closes it. */
    void answer(HttpExchange ex, Throwable failure);
  }

  /**
   * How a failure of the answer's own is reported: the endpoint counts and logs it (at most so
   * many lines a minute); by default it is logged, an {@link Error} at ERROR.
   */
  interface OwnFailure {
    /**
     * Reports that {@code e} was thrown, the answer ending with the internal error or its
     * connection closed; or, thrown by the writers' executor as a writer handed the rest of the
     * answer on, that writer writing it on itself.
     *
     * @param message the line to log, with one {@code {}} for {@code arg}
     */
    void failed(Throwable e, String message, Object arg);
  }

  /**
   * How the events of one stream are rendered: the route's own format ({@link RouteFormat}) or
   * OpenAI's chunks ({@link OpenAiAnswers.ChunkFormat}). Called by one writer thread at a time,
   * in the order of the output, so a format may keep state (whether a first event was written).
   * Each method returns whole events, {@code data: ...} and a blank line each; a value JSON
   * cannot carry throws {@link IllegalArgumentException}, and the stream then ends with the
   * error event of an {@link UnwritableException} (or, before its first event, with that
   * failure's status answer), as it does when a method throws any other exception.
   */
  interface Format {
    /** The events of one piece of output, or an empty array for none. */
    byte[] piece(int[] tokens, String text);

    /**
     * The events that end a stream whose request succeeded, {@code data: [DONE]} last.
     *
     * @param tokens the output no piece carried (normally none)
     * @param text its text
     */
    byte[] end(InferenceResponse response, int[] tokens, String text);

    /** The event of a failure after the first piece (the stream ends after it). */
    byte[] error(Throwable failure);
  }

  /**
   * The route's own events ({@code /v1/route/completions}): {@code {"id", "token_ids", "text"}}
   * per piece, the answer a request that is not streamed gets at the end, and
   * {@code {"id", "error": {"message", "type", "status"}}} for a failure.
   */
  static final class RouteFormat implements Format {
    private final String id;
    private final GenerationParams params;
    /** A stop token id ended the output: later tokens are not shown. */
    private boolean stopped;

    RouteFormat(String id) {
      this(id, GenerationParams.DEFAULT);
    }

    /** @param params the request's parameters: its output ends at its first stop token id */
    RouteFormat(String id, GenerationParams params) {
      this.id = id;
      this.params = params;
    }

    /** The tokens of a piece the client sees: none after the first stop token id. */
    private int[] visible(int[] tokens) {
      if (stopped) {
        return new int[0];
      }
      int[] cut = StopMatcher.throughFirstStopToken(tokens, params);
      stopped = cut.length > 0 && params.isStopToken(cut[cut.length - 1]);
      return cut;
    }

    @Override
    public byte[] piece(int[] tokens, String text) {
      int[] visible = visible(tokens);
      if (visible.length == 0 && text.isEmpty()) {
        return new byte[0];
      }
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("id", id);
      m.put("token_ids", visible);
      m.put("text", text);
      return event(m);
    }

    @Override
    public byte[] end(InferenceResponse response, int[] tokens, String text) {
      Map<String, Object> m = ClientEndpoint.toJson(response);
      m.put("id", id);
      m.put("token_ids", visible(tokens));
      m.put("text", text);
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      out.writeBytes(event(m));
      out.writeBytes(DONE);
      return out.toByteArray();
    }

    @Override
    public byte[] error(Throwable failure) {
      Map<String, Object> error = new LinkedHashMap<>();
      error.put("message", ClientEndpoint.safeText(String.valueOf(failure.getMessage())));
      error.put("type", ClientEndpoint.failureType(failure));
      error.put("status", ClientEndpoint.failureStatus(failure));
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("id", id);
      m.put("error", error);
      return event(m);
    }
  }

  private record Piece(int[] tokens, String text) {}

  private record End(InferenceResponse response, int[] tokens, String text) {}

  private record Fail(Throwable failure) {}

  private final HttpExchange ex;
  private final String id;
  private final Executor writers;
  private final IoDeadline deadline;
  private final FailureAnswer failureAnswer;
  private final Format format;
  private final Consumer<StreamedAnswer> onFinished;
  private final Runnable onClientGone;
  private final LongSupplier clock;
  private final OwnFailure ownFailure;
  /** When the first event was written and flushed ({@link #firstWrittenAt}). */
  private volatile long firstWrittenAt = ClientLatency.NO_OUTPUT;
  /** The answer whose end event was written ({@link #answered}). */
  private volatile InferenceResponse answered;

  // queued by the node's threads, taken by the writers (guarded by this)
  private final ArrayDeque<Object> queue = new ArrayDeque<>();
  private boolean scheduled;
  private boolean ended;
  private boolean abandoned;
  /** Whether {@code onFinished} was called. Under this. */
  private boolean finishReported;
  private int tokensGiven;
  private int charsGiven;
  private String heldBack = "";
  private Future<?> request;
  private boolean cancelWanted;

  // the writer's state (one writer at a time: guarded by scheduled)
  private boolean started;
  private boolean finished;

  /**
   * @param ex the client's exchange, its request read and nothing answered yet
   * @param id the request's id, in every event
   * @param writers the endpoint's writer threads
   * @param deadline the endpoint's I/O deadline, for each batch written
   * @param failureAnswer the status answer of a request that failed before its first piece
   * @param onFinished called when the answer is written, or given up
   * @param onClientGone called when a write failed and the request is cancelled for it
   */
  StreamedAnswer(HttpExchange ex, String id, Executor writers, IoDeadline deadline,
      FailureAnswer failureAnswer, Consumer<StreamedAnswer> onFinished, Runnable onClientGone) {
    this(ex, id, writers, deadline, new RouteFormat(id), failureAnswer, onFinished, onClientGone);
  }

  /**
   * @param format how the events are rendered
   * @param ex and the others as above
   */
  StreamedAnswer(HttpExchange ex, String id, Executor writers, IoDeadline deadline, Format format,
      FailureAnswer failureAnswer, Consumer<StreamedAnswer> onFinished, Runnable onClientGone) {
    this(ex, id, writers, deadline, format, failureAnswer, onFinished, onClientGone,
        System::nanoTime);
  }

  /**
   * @param clock a monotonic clock in nanoseconds, read when the first event is written
   *     ({@link #firstWrittenAt})
   * @param ex and the others as above
   */
  StreamedAnswer(HttpExchange ex, String id, Executor writers, IoDeadline deadline, Format format,
      FailureAnswer failureAnswer, Consumer<StreamedAnswer> onFinished, Runnable onClientGone,
      LongSupplier clock) {
    this(ex, id, writers, deadline, format, failureAnswer, onFinished, onClientGone, clock,
        StreamedAnswer::logFailure);
  }

  /**
   * @param ownFailure reports what this answer's own failures threw: a render, a read of the
   *     request's answer or a send that threw (but for a client gone), or no writer that could
   *     take the answer, the stream then ended with the internal error or its connection closed;
   *     or no other writer that could take the rest of the answer, its writer writing it on
   * @param clock and the others as above
   */
  StreamedAnswer(HttpExchange ex, String id, Executor writers, IoDeadline deadline, Format format,
      FailureAnswer failureAnswer, Consumer<StreamedAnswer> onFinished, Runnable onClientGone,
      LongSupplier clock, OwnFailure ownFailure) {
    this.ownFailure = ownFailure;
    this.clock = clock;
    this.format = format;
    this.ex = ex;
    this.id = id;
    this.writers = writers;
    this.deadline = deadline;
    this.failureAnswer = failureAnswer;
    this.onFinished = onFinished;
    this.onClientGone = onClientGone;
  }

  /** The node's future of this request: cancelled if the client goes. */
  void attach(Future<?> future) {
    boolean cancel;
    synchronized (this) {
      request = future;
      cancel = cancelWanted;
    }
    if (cancel) {
      future.cancel(true);
    }
  }

  /**
   * The clock's reading when the first event (of output, or the end's) was written and flushed
   * to the client; {@link ClientLatency#NO_OUTPUT} if none was.
   */
  long firstWrittenAt() {
    return firstWrittenAt;
  }

  /**
   * The answer whose end event ({@link Format#end}) was written to the client, the stream then
   * closed; null if the stream ended otherwise (a failure, a client gone, abandoned). Set before
   * {@code onFinished} is called.
   */
  InferenceResponse answered() {
    return answered;
  }

  @Override
  public void onOutput(int[] tokens, String text) {
    synchronized (this) {
      if (ended || abandoned) {
        return; // a piece after the end: the listener's contract says it does not come
      }
      tokensGiven += tokens.length;
      charsGiven += text.length();
      String t = heldBack.isEmpty() ? text : heldBack + text;
      heldBack = "";
      if (!t.isEmpty() && Character.isHighSurrogate(t.charAt(t.length() - 1))) {
        heldBack = t.substring(t.length() - 1); // its second half comes with the next piece
        t = t.substring(0, t.length() - 1);
      }
      if (tokens.length == 0 && t.isEmpty()) {
        return;
      }
      queue.add(new Piece(tokens, t));
    }
    schedule();
  }

  /** The request completed: its answer, or its failure. */
  void complete(InferenceResponse response, Throwable failure) {
    synchronized (this) {
      if (ended) {
        return;
      }
      ended = true;
      if (abandoned) {
        return;
      }
      if (failure == null) {
        try {
          // what the pieces did not carry; the node gives it all before completing, normally
          int[] out = response.result().outputTokens();
          String text = response.result().text();
          int[] tail = tokensGiven < out.length
              ? Arrays.copyOfRange(out, tokensGiven, out.length) : new int[0];
          String rest = charsGiven < text.length() ? text.substring(charsGiven) : "";
          queue.add(new End(response, tail, heldBack + rest));
          heldBack = "";
        } catch (Throwable e) { // no response (a node of another implementation), a bug, an
          // Error: thrown here, on the node's thread, it was seen by no one and the stream never
          // ended
          ownFailure.failed(e, "cannot read the answer of {}", id);
          queue.add(new Fail(new UnwritableException()));
        }
      } else {
        Throwable c = failure instanceof CompletionException && failure.getCause() != null
            ? failure.getCause() : failure;
        queue.add(new Fail(c));
      }
    }
    schedule();
  }

  /**
   * Gives up the answer without writing more: the endpoint is closing. The request is cancelled;
   * the connection is left to the server, which closes it.
   */
  void abandon() {
    synchronized (this) {
      if (abandoned) {
        return;
      }
      abandoned = true;
      queue.clear();
    }
    cancelRequest();
    reportFinished();
  }

  /** Calls {@code onFinished} once, however the answer ends (abandoned after its end too). */
  private void reportFinished() {
    synchronized (this) {
      if (finishReported) {
        return;
      }
      finishReported = true;
    }
    onFinished.accept(this);
  }

  private void schedule() {
    synchronized (this) {
      if (scheduled || queue.isEmpty() || abandoned) {
        return;
      }
      scheduled = true;
    }
    try {
      writers.execute(this::drain);
    } catch (RejectedExecutionException stopping) {
      // the endpoint's stop() has shut its writers down and waits for them before it closes
      // the port: written here, under the deadline, a request that arrived meanwhile gets the
      // stopped node's 503 (it was abandoned, and its client waited for the port to close
      // without an answer). Once the port is closed, the write fails at once
      drain();
    } catch (Throwable e) { // the writers cannot take it otherwise (an Error: a thread they
      // cannot start): thrown on, it reached the node's thread, and the answer, marked as
      // handed to a writer, was never written nor ended
      notHandedOn(e);
    }
  }

  /**
   * Gives the answer up when no writer could take it ({@link #schedule}, which holds
   * {@code scheduled}): the thread that hands it on (the node's) does not write, so its
   * connection is closed (under the I/O deadline: closing a stream already started writes its
   * last chunk) and its request cancelled.
   */
  private void notHandedOn(Throwable e) {
    ownFailure.failed(e, "no writer thread could take the answer of {}; closing its connection",
        id);
    synchronized (this) {
      abandoned = true;
      queue.clear();
      scheduled = false;
    }
    finished = true;
    deadline.run(ex::close);
    cancelRequest();
    reportFinished();
  }

  /**
   * Logs a failure of this answer's own, an {@link Error} at ERROR, anything else at WARN
   * ({@link CountedFailureLog#log}).
   */
  private static void logFailure(Throwable e, String message, Object arg) {
    CountedFailureLog.log(log, e, message, arg);
  }

  /** On a writer thread: writes the batches queued, each under a deadline of its own. */
  private void drain() {
    while (true) {
      List<Object> batch;
      synchronized (this) {
        if (queue.isEmpty() || abandoned) {
          scheduled = false;
          return;
        }
        batch = new ArrayList<>(queue);
        queue.clear();
      }
      deadline.run(() -> write(batch));
      synchronized (this) {
        if (queue.isEmpty() || abandoned) {
          scheduled = false;
          return;
        }
      }
      // more came while writing: let other answers' batches go first if the writers take it
      try {
        writers.execute(this::drain);
        return;
      } catch (RejectedExecutionException stopping) {
        // the endpoint is stopping: its writers finish what they were given; go on here
      } catch (Throwable e) { // the writers cannot take it (an Error: a thread they cannot
        // start): this writer goes on with it. Reported as the answer's other failures are,
        // counted and its lines bounded: logged here every time, it filled the log
        ownFailure.failed(e, "no other writer thread could take the answer of {}; writing it on",
            id);
      }
    }
  }

  private void write(List<Object> batch) {
    if (finished) {
      return;
    }
    ByteArrayOutputStream events = new ByteArrayOutputStream();
    boolean last = false;
    InferenceResponse endOf = null;
    Fail failBeforeStart = null;
    for (Object item : batch) {
      if (item instanceof Fail f && !started && events.size() == 0) {
        failBeforeStart = f;
        break;
      }
      try {
        if (item instanceof Piece p) {
          events.writeBytes(format.piece(p.tokens(), p.text()));
        } else if (item instanceof End e) {
          events.writeBytes(format.end(e.response(), e.tokens(), e.text()));
          last = true;
          endOf = e.response();
          break;
        } else if (item instanceof Fail f) {
          events.writeBytes(format.error(f.failure()));
          last = true;
          break;
        }
      } catch (Throwable e) { // a value JSON cannot carry (a lone surrogate), a bug, an Error
        // (a stack overflow): thrown on, it ended the writer thread and the stream stayed open
        ownFailure.failed(e, "cannot write a piece of {}", id);
        if (!started && events.size() == 0) {
          failBeforeStart = new Fail(new UnwritableException());
        } else {
          events.writeBytes(format.error(new UnwritableException()));
          last = true;
        }
        cancelRequest();
        break;
      }
    }
    if (failBeforeStart != null) {
      finished = true;
      failureAnswer.answer(ex, failBeforeStart.failure());
      reportFinished();
      return;
    }
    if (!started && events.size() == 0) {
      // pieces that show the client nothing (text held back for a stop string) are no event:
      // the answer is not started, so a failure after them still gets its status answer
      return;
    }
    try {
      if (!started) {
        ex.getResponseHeaders().add("Content-Type", CONTENT_TYPE);
        ex.getResponseHeaders().add("Cache-Control", "no-cache");
        ex.getResponseHeaders().add("X-Accel-Buffering", "no"); // nginx: pass events on at once
        ex.sendResponseHeaders(200, 0); // chunked: the length is not known
        started = true;
      }
      OutputStream out = ex.getResponseBody();
      out.write(events.toByteArray());
      out.flush();
      if (firstWrittenAt == ClientLatency.NO_OUTPUT) {
        firstWrittenAt = clock.getAsLong();
      }
      if (last) {
        finished = true;
        out.close(); // the last chunk
        ex.close();
        answered = endOf;
        reportFinished();
      }
    } catch (Throwable e) {
      // the client is gone, or did not read within the deadline (its connection is closed); or
      // an Error (the heap running out), which thrown on ended the writer with the stream open
      if (e instanceof Error) {
        ownFailure.failed(e, "streaming {} to its client failed; closing its connection", id);
      } else {
        log.debug("streaming {} to client {} failed: {}", id, ex.getRemoteAddress(), e.toString());
      }
      finished = true;
      ex.close();
      synchronized (this) {
        abandoned = true;
        queue.clear();
      }
      if (!last) {
        onClientGone.run(); // (with the last batch the request has ended: nothing cancelled)
      }
      cancelRequest();
      reportFinished();
    }
  }

  private void cancelRequest() {
    Future<?> f;
    synchronized (this) {
      f = request;
      cancelWanted = true;
    }
    if (f != null) {
      f.cancel(true);
    }
  }

  /** One event: {@code data: } the JSON of {@code json} and a blank line. */
  static byte[] event(Map<String, Object> json) {
    byte[] b = Json.write(json).getBytes(StandardCharsets.UTF_8);
    ByteArrayOutputStream out = new ByteArrayOutputStream(b.length + 8);
    out.writeBytes("data: ".getBytes(StandardCharsets.US_ASCII));
    out.writeBytes(b);
    out.writeBytes("\n\n".getBytes(StandardCharsets.US_ASCII));
    return out.toByteArray();
  }

  /** An answer JSON cannot carry. */
  static final class UnwritableException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    UnwritableException() {
      super("the answer cannot be written as JSON", null, false, false);
    }
  }
}
