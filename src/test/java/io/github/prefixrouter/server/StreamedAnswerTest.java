package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.ArgumentMatchers.anyInt;
import static org.mockito.ArgumentMatchers.anyLong;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.never;
import static org.mockito.Mockito.verify;
import static org.mockito.Mockito.when;

import com.sun.net.httpserver.Headers;
import com.sun.net.httpserver.HttpExchange;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.internal.wire.IoDeadline;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineResult;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@link StreamedAnswer} on its own, its writer run on the thread that gives each piece (a
 * direct executor), so that every piece is a batch of its own, written before the next comes.
 */
class StreamedAnswerTest {

  private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
  private final HttpExchange ex = mock(HttpExchange.class);
  private final Headers headers = new Headers();
  private final ByteArrayOutputStream written = new ByteArrayOutputStream();
  private final List<Throwable> statusAnswers = new ArrayList<>();

  @AfterEach
  void stopTimer() {
    timer.shutdownNow();
  }

  /** How many times each answer's {@code onFinished} was called. */
  private final List<StreamedAnswer> finishedCalls = new ArrayList<>();

  /** A streamed chat whose output ends at the stop string {@code "abc"}. */
  private StreamedAnswer chatWithStop() {
    when(ex.getResponseHeaders()).thenReturn(headers);
    when(ex.getResponseBody()).thenReturn(written);
    GenerationParams params = new GenerationParams(16, 1.0, 1.0, 3L)
        .withStops(List.of("abc"), List.of());
    OpenAiAnswers.Context ctx = new OpenAiAnswers.Context(OpenAiRequest.Kind.CHAT,
        "chatcmpl-solo-c1", 1L, "base", params, 3L, false, new FakeTokenizer(), false, 0);
    return new StreamedAnswer(ex, "solo-c1", Runnable::run,
        new IoDeadline(timer, Duration.ofSeconds(5), () -> { }),
        new OpenAiAnswers.ChunkFormat(ctx), (e, failure) -> statusAnswers.add(failure),
        finishedCalls::add, () -> { });
  }

  /**
   * Pieces that show the client nothing (text held back as the possible start of a stop
   * string) are no chunk: a request that fails after them has had no chunk yet and gets the
   * status answer (a 503 with {@code Retry-After} here), not a 200 stream whose only event is
   * an error.
   */
  @Test
  void aFailureAfterPiecesThatShowedNothingGetsTheStatusAnswer() throws Exception {
    StreamedAnswer s = chatWithStop();
    s.onOutput(new int[] {'a'}, ""); // "a" may begin "abc": held back
    s.onOutput(new int[] {'b'}, ""); // "ab" too
    RequestFailedException busy = new RequestFailedException("solo-c1", "busy everywhere",
        new EngineBusyException("engine busy"));
    s.complete(null, busy);

    verify(ex, never()).sendResponseHeaders(anyInt(), anyLong());
    assertEquals(0, written.size(), written.toString(StandardCharsets.UTF_8));
    assertEquals(1, statusAnswers.size());
    assertSame(busy, statusAnswers.get(0));
  }

  /** The same pieces, then the end: one finishing chunk carries the text held back. */
  @Test
  void piecesThatShowedNothingThenTheEndAreOneFinishingChunk() throws Exception {
    StreamedAnswer s = chatWithStop();
    s.onOutput(new int[] {'a'}, "");
    s.onOutput(new int[] {'b'}, "");
    verify(ex, never()).sendResponseHeaders(anyInt(), anyLong());
    s.complete(new InferenceResponse("solo-c1", new EngineResult(new int[] {'a', 'b'}, "", 4, 0,
        1, 1), "solo", false, 1, FallbackCause.NONE, StubNode.LOCAL_DECISION), null);

    verify(ex).sendResponseHeaders(200, 0);
    assertTrue(statusAnswers.isEmpty());
    List<Object> events = Sse.parse(written.toString(StandardCharsets.UTF_8));
    assertEquals(2, events.size(), events.toString());
    assertEquals(Sse.DONE, events.get(1));
    Object choice = ((List<?>) ((Map<?, ?>) events.get(0)).get("choices")).get(0);
    assertEquals(Map.of("role", "assistant", "content", "ab"),
        ((Map<?, ?>) choice).get("delta"));
    assertEquals("stop", ((Map<?, ?>) choice).get("finish_reason"));
  }
  /**
   * An answer is finished once: the endpoint's stop abandoning an answer already written (or one
   * abandoned twice) does not call {@code onFinished} again, which counted its latency and
   * dropped it from the endpoint's open answers a second time.
   */
  @Test
  void anAnswerAbandonedAfterItsEndIsFinishedOnce() throws Exception {
    StreamedAnswer s = chatWithStop();
    s.complete(new InferenceResponse("solo-c1", new EngineResult(new int[] {'x'}, "x", 4, 0,
        1, 1), "solo", false, 1, FallbackCause.NONE, StubNode.LOCAL_DECISION), null);
    assertEquals(1, finishedCalls.size());
    s.abandon();
    s.abandon();
    assertEquals(1, finishedCalls.size(), "onFinished called again by abandon()");

    StreamedAnswer open = chatWithStop();
    open.abandon();
    open.abandon();
    open.complete(null, new RequestFailedException("solo-c1", "late", null));
    assertEquals(2, finishedCalls.size());
    assertSame(open, finishedCalls.get(1));
  }

  /**
   * A node whose future completes normally without a response (a {@code PrefixRouterNode} of
   * another implementation, or a bug) still ends the stream: the end cannot be read, so the
   * request gets the internal-error status answer before its first event. It used to throw
   * out of {@code complete} on the node's thread, where nothing saw it, and the client waited
   * for an answer that never came.
   */
  @Test
  void anEndThatCannotBeReadBeforeTheFirstEventGetsTheInternalErrorStatusAnswer() {
    StreamedAnswer s = chatWithStop();
    s.complete(null, null);

    assertEquals(1, statusAnswers.size());
    assertTrue(statusAnswers.get(0) instanceof StreamedAnswer.UnwritableException,
        String.valueOf(statusAnswers.get(0)));
    assertEquals(500, ClientEndpoint.failureStatus(statusAnswers.get(0)));
  }

  /** The same after an event: the stream ends with the internal error event, and is closed. */
  @Test
  void anEndThatCannotBeReadAfterAnEventEndsTheStreamWithTheInternalErrorEvent()
      throws Exception {
    StreamedAnswer s = chatWithStop();
    s.onOutput(new int[] {'x'}, "x");
    verify(ex).sendResponseHeaders(200, 0);
    s.complete(null, null);

    assertTrue(statusAnswers.isEmpty());
    List<Object> events = Sse.parse(written.toString(StandardCharsets.UTF_8));
    assertEquals(2, events.size(), events.toString());
    Map<?, ?> error = (Map<?, ?>) ((Map<?, ?>) events.get(1)).get("error");
    assertEquals("internal", error.get("code"), events.toString());
    verify(ex).close();
  }

  /** A streamed answer in the route's format, written by {@code writers}. */
  private StreamedAnswer routeStream(java.util.concurrent.Executor writers,
      StreamedAnswer.Format format, java.io.OutputStream body) {
    when(ex.getResponseHeaders()).thenReturn(headers);
    when(ex.getResponseBody()).thenReturn(body);
    return new StreamedAnswer(ex, "q1", writers,
        new IoDeadline(timer, Duration.ofSeconds(5), () -> { }), format,
        (e, failure) -> statusAnswers.add(failure), finishedCalls::add, () -> { });
  }

  /**
   * Writers that run the first task given them, there and then, and throw {@code error} for
   * every later one; {@code calls} counts the tasks given.
   */
  private static java.util.concurrent.Executor onlyTheFirst(
      java.util.concurrent.atomic.AtomicInteger calls, Error error) {
    return task -> {
      if (calls.incrementAndGet() > 1) {
        throw error;
      }
      task.run();
    };
  }

  /**
   * A body that, as the first batch is flushed (while {@code calls} is 1), has the piece
   * {@code "b"} given to {@code stream[0]}: a batch queued while the first is written.
   */
  private static ByteArrayOutputStream queuingAsTheFirstIsWritten(
      java.util.concurrent.atomic.AtomicInteger calls, StreamedAnswer[] stream) {
    return new ByteArrayOutputStream() {
      @Override
      public void flush() {
        if (calls.get() == 1) {
          stream[0].onOutput(new int[] {2}, "b"); // queued while the first batch is written
        }
      }
    };
  }

  /**
   * The route's events show no token after the first stop token id, and a piece left with no
   * token and no text is no event (deployment.md: "no event is sent for an empty piece"), not an
   * event of an empty {@code token_ids} and {@code text} for each piece the engine still gives.
   */
  @Test
  void aPieceEmptiedByAStopTokenIsNoEvent() {
    StreamedAnswer.RouteFormat route = new StreamedAnswer.RouteFormat("q1",
        GenerationParams.DEFAULT.withStops(List.of(), List.of(7)));
    String first = new String(route.piece(new int[] {5, 7, 8}, "ab"), StandardCharsets.UTF_8);
    assertTrue(first.contains("\"token_ids\":[5,7]"), first);
    assertEquals(0, route.piece(new int[] {9}, "").length);
    assertEquals(0, route.piece(new int[] {9, 10}, "").length);
  }

  /** The route's format, but a piece whose text is {@code "boom"} throws {@code error}. */
  private static StreamedAnswer.Format throwingOn(Error error) {
    StreamedAnswer.RouteFormat route = new StreamedAnswer.RouteFormat("q1");
    return new StreamedAnswer.Format() {
      @Override
      public byte[] piece(int[] tokens, String text) {
        if (text.equals("boom")) {
          throw error;
        }
        return route.piece(tokens, text);
      }

      @Override
      public byte[] end(InferenceResponse response, int[] tokens, String text) {
        return route.end(response, tokens, text);
      }

      @Override
      public byte[] error(Throwable failure) {
        return route.error(failure);
      }
    };
  }

  /**
   * An {@link Error} thrown as an event is rendered (a stack overflow in a format) ends the
   * stream as an exception does: the internal-error status answer before the first event, the
   * internal error event after it. It used to end the writer thread (here thrown to the thread
   * that gave the piece), the stream never ended.
   */
  @Test
  void anErrorThrownAsAnEventIsRenderedEndsTheStream() throws Exception {
    StreamedAnswer before = routeStream(Runnable::run, throwingOn(new StackOverflowError()),
        written);
    assertDoesNotThrow(() -> before.onOutput(new int[] {1}, "boom"),
        "an Error rendering the first event escaped the writer");
    assertEquals(1, statusAnswers.size(), "no status answer before the first event");
    assertTrue(statusAnswers.get(0) instanceof StreamedAnswer.UnwritableException,
        String.valueOf(statusAnswers.get(0)));
    assertEquals(List.of(before), finishedCalls);

    StreamedAnswer after = routeStream(Runnable::run, throwingOn(new StackOverflowError()),
        written);
    after.onOutput(new int[] {1}, "a");
    assertDoesNotThrow(() -> after.onOutput(new int[] {2}, "boom"),
        "an Error rendering an event escaped the writer");
    List<Object> events = Sse.parse(written.toString(StandardCharsets.UTF_8));
    assertEquals(2, events.size(), events.toString());
    Map<?, ?> error = (Map<?, ?>) ((Map<?, ?>) events.get(1)).get("error");
    assertEquals("internal", error.get("type"), events.toString());
    assertEquals(List.of(before, after), finishedCalls);
  }

  /**
   * A completed request whose answer cannot be read, whatever it throws (an
   * {@link AssertionError} here), gets the internal-error status answer: an {@code Error} used
   * to escape {@code complete}, on the node's thread, and the stream was never ended.
   */
  @Test
  void anEndWhoseReadThrowsAnErrorGetsTheInternalErrorStatusAnswer() {
    StreamedAnswer s = chatWithStop();
    InferenceResponse bad = org.mockito.Mockito.spy(new InferenceResponse("solo-c1",
        new EngineResult(new int[] {'x'}, "x", 4, 0, 1, 1), "solo", false, 1,
        FallbackCause.NONE, StubNode.LOCAL_DECISION));
    org.mockito.Mockito.doThrow(new AssertionError("a response that breaks")).when(bad).result();
    assertDoesNotThrow(() -> s.complete(bad, null), "an Error reading the end escaped complete");
    assertEquals(1, statusAnswers.size(), "no status answer");
    assertTrue(statusAnswers.get(0) instanceof StreamedAnswer.UnwritableException,
        String.valueOf(statusAnswers.get(0)));
    assertEquals(List.of(s), finishedCalls);
  }

  /**
   * An {@link Error} thrown as the events are sent (a stack overflow as the answer's headers
   * are sent, here) closes the exchange, cancels the request and finishes the answer,
   * as a write that fails does: it used to end the writer thread with the exchange open.
   */
  @Test
  void anErrorThrownAsEventsAreSentClosesTheExchange() throws Exception {
    StreamedAnswer s = routeStream(Runnable::run, new StreamedAnswer.RouteFormat("q1"), written);
    java.util.concurrent.CompletableFuture<InferenceResponse> request =
        new java.util.concurrent.CompletableFuture<>();
    s.attach(request);
    org.mockito.Mockito.doThrow(new StackOverflowError()).when(ex)
        .sendResponseHeaders(anyInt(), anyLong());
    assertDoesNotThrow(() -> s.onOutput(new int[] {1}, "a"),
        "an Error sending the events escaped the writer");
    verify(ex).close();
    assertTrue(request.isCancelled(), "the request was not cancelled");
    assertEquals(List.of(s), finishedCalls);
  }

  /**
   * A stream the writers cannot take (their executor throws an {@link Error}: a thread it
   * cannot start) is given up: its exchange closed, its request cancelled, the answer finished,
   * nothing thrown to the thread that gave the piece. It used to throw there, and the stream,
   * marked as handed to a writer, was never written nor ended.
   */
  @Test
  void aStreamNoWriterCanTakeIsGivenUpAtOnce() throws Exception {
    StreamedAnswer s = routeStream(task -> {
      throw new InternalError("a thread that cannot start");
    }, new StreamedAnswer.RouteFormat("q1"), written);
    java.util.concurrent.CompletableFuture<InferenceResponse> request =
        new java.util.concurrent.CompletableFuture<>();
    s.attach(request);
    assertDoesNotThrow(() -> s.onOutput(new int[] {1}, "a"),
        "the writers' Error escaped to the thread that gave the piece");
    verify(ex).close();
    assertTrue(request.isCancelled(), "the request was not cancelled");
    assertEquals(List.of(s), finishedCalls);
  }

  /**
   * A writer that cannot hand the rest of a stream to another writer (their executor throws an
   * {@link Error}) writes it itself, as it does when the writers are shut down: the batch
   * queued while it wrote is written. The Error used to end that writer, the stream, marked as
   * handed to a writer, never written again.
   */
  @Test
  void aWriterThatCannotHandTheRestOnWritesItItself() throws Exception {
    java.util.concurrent.atomic.AtomicInteger calls = new java.util.concurrent.atomic.AtomicInteger();
    StreamedAnswer[] stream = new StreamedAnswer[1];
    ByteArrayOutputStream body = queuingAsTheFirstIsWritten(calls, stream);
    stream[0] = routeStream(onlyTheFirst(calls, new InternalError("a thread that cannot start")),
        new StreamedAnswer.RouteFormat("q1"), body);
    assertDoesNotThrow(() -> stream[0].onOutput(new int[] {1}, "a"),
        "the writers' Error escaped the writer");
    List<Object> events = Sse.parse(body.toString(StandardCharsets.UTF_8));
    assertEquals(2, events.size(), "the batch queued while writing: " + events);
    assertEquals("b", ((Map<?, ?>) events.get(1)).get("text"), events.toString());
  }

  /**
   * A writer that cannot hand the rest of a stream to another writer (their executor throws an
   * {@link Error}: a thread it cannot start) reports it to the answer's {@code OwnFailure},
   * once, as the answer's other failures are, so that the endpoint counts it
   * ({@code client.internal_errors}) and bounds its log lines; it writes the rest on. It was
   * logged at ERROR with its stack trace on its own, every time, counted nowhere: a pool that
   * cannot start a thread for a while filled the log.
   */
  @Test
  void aWriterThatCannotHandTheRestOnReportsItAsTheAnswersOwnFailure() throws Exception {
    java.util.concurrent.atomic.AtomicInteger calls = new java.util.concurrent.atomic.AtomicInteger();
    InternalError thrown = new InternalError("a thread that cannot start");
    List<Throwable> reported = new ArrayList<>();
    StreamedAnswer[] stream = new StreamedAnswer[1];
    ByteArrayOutputStream body = queuingAsTheFirstIsWritten(calls, stream);
    when(ex.getResponseHeaders()).thenReturn(headers);
    when(ex.getResponseBody()).thenReturn(body);
    stream[0] = new StreamedAnswer(ex, "q1", onlyTheFirst(calls, thrown),
        new IoDeadline(timer, Duration.ofSeconds(5), () -> { }),
        new StreamedAnswer.RouteFormat("q1"), (e, failure) -> statusAnswers.add(failure),
        finishedCalls::add, () -> { }, System::nanoTime,
        (e, message, arg) -> reported.add(e));
    assertDoesNotThrow(() -> stream[0].onOutput(new int[] {1}, "a"),
        "the writers' Error escaped the writer");
    assertEquals(List.of(thrown), reported,
        "the writers' Error not reported to the answer's OwnFailure, which counts it");
    List<Object> events = Sse.parse(body.toString(StandardCharsets.UTF_8));
    assertEquals(2, events.size(), "the batch queued while writing: " + events);
  }
}
